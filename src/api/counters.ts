/** Counter arithmetic shared by the chunk activity and the workflow (pure). */
import type { MigrationCounters } from './migration';

export const zeroCounters = (): MigrationCounters => ({
  migrated: 0,
  rewritten: 0,
  conflicts: 0,
  notFound: 0,
  failed: 0,
  chunks: 0,
  listRestarts: 0,
  tokenResumes: 0,
});

export function addCounters(a: MigrationCounters, b: MigrationCounters): MigrationCounters {
  const out = zeroCounters();
  for (const k of Object.keys(out) as Array<keyof MigrationCounters>) out[k] = a[k] + b[k];
  return out;
}
