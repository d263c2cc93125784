/** The benches' numeric flags. */

/** Each named flag of values as a number; throws naming the first that is not a whole number of at least 1. */
export function positiveWholes(values: Record<string, unknown>, names: readonly string[]): number[] {
  return names.map((name) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive whole number`);
    return v;
  });
}
