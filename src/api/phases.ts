/**
 * What a migration's phase means, apart from its schema (src/api/migration.ts): workflow code imports this,
 * and importing that module would evaluate its zod schemas in every run.
 */
import type { MigrationPhase } from './migration';

/** The phases a migration ends in: after one, nothing more happens to it or to its StorageVersionMigration objects. */
export const FINAL_PHASES = ['Succeeded', 'Failed', 'Aborted'] as const;
export type FinalPhase = (typeof FINAL_PHASES)[number];

/** Is this phase final? The one test of it: the workflow, the bridge, the status writers and the metrics ask this. */
export function isTerminalPhase(phase: MigrationPhase | undefined): phase is FinalPhase {
  return (FINAL_PHASES as readonly (MigrationPhase | undefined)[]).includes(phase);
}
