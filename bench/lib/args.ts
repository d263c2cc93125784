/** The benches' numeric flags. */
import { defaultMigrationOptions } from '../../src/contract/definitions';

/** Each named flag of values as a number; throws naming the first that is not a whole number of at least 1. */
export function positiveWholes(values: Record<string, unknown>, names: readonly string[]): number[] {
  return names.map((name) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive whole number`);
    return v;
  });
}

/** The flags of the benches that run rounds over one set of objects (bench:ratio, bench:chunk), for parseArgs. */
export const roundOptions = {
  objects: { type: 'string', default: '5000' },
  rounds: { type: 'string', default: '3' },
  'chunk-size': { type: 'string', default: String(defaultMigrationOptions.chunkSize) },
  concurrency: { type: 'string', default: String(defaultMigrationOptions.concurrency) },
  dir: { type: 'string' },
} as const;

/** roundOptions' numbers: objects, rounds, chunk size, concurrency; each a positive whole number. */
export function roundNumbers(values: Record<string, unknown>): [number, number, number, number] {
  return positiveWholes(values, ['objects', 'rounds', 'chunk-size', 'concurrency']) as [number, number, number, number];
}
