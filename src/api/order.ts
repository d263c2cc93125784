/**
 * Orders two strings by their UTF-16 code units, the same on every machine. `localeCompare` is not: it follows the ICU
 * collation of the Node that runs it (a workflow replayed by another Node could sort otherwise), and its first call
 * maps ~2 MiB of ICU's collation data into the worker. Kubernetes names (lowercase letters, digits, '-', '.') sort
 * the same either way.
 */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
