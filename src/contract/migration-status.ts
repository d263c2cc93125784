/**
 * A migration's StorageVersionMigration status: one builder for every write of it, so kubectl users read the
 * same fields whoever wrote them. The workflow writes its progress to the objects it lists (and its refusal of
 * an input, admission.ts); the bridge copies a running workflow's progress to those it does not list (more
 * than MAX_MIGRATION_OBJECTS), writes a closed workflow's result where its last write did not land, and writes
 * its own refusals and Pending statuses. Pure and deterministic (the time is given), bundled into the workflows
 * (types only from src/api, and the zod-free phases).
 */
import type { MigrationPhase, StorageVersionMigrationStatus } from '../api/migration';
import type { MigrationProgress } from './definitions';

/** Is this phase final? One test everywhere (src/api/phases.ts, free of zod: workflows import it). */
export { isTerminalPhase, type FinalPhase } from '../api/phases';

/** What a status says; each part known is written, each unknown left out. */
export interface StatusFacts {
  phase: MigrationPhase;
  message?: string;
  /** The migration workflow that runs it (or ran it). */
  workflowId?: string;
  /** What the migration has counted so far: its counters, failures, remaining estimate and start. */
  progress?: Pick<MigrationProgress, 'counters' | 'failures' | 'remainingEstimate' | 'startedAt'>;
  /** When it ended (ms since the epoch), written as completionTime: given with a final phase only. */
  endedAt?: number;
}

/** The status a StorageVersionMigration gets for `facts`. */
export function migrationStatus(facts: StatusFacts): StorageVersionMigrationStatus {
  const { phase, message, workflowId, progress, endedAt } = facts;
  const remaining = progress?.remainingEstimate;
  return {
    phase,
    message,
    ...(workflowId !== undefined ? { workflowId } : {}),
    ...(progress
      ? {
          progress: { ...progress.counters, ...(remaining !== undefined ? { remainingEstimate: remaining } : {}) },
          failures: progress.failures,
          startTime: new Date(progress.startedAt).toISOString(),
        }
      : {}),
    ...(endedAt !== undefined ? { completionTime: new Date(endedAt).toISOString() } : {}),
  };
}
