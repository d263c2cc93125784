/**
 * A migration's StorageVersionMigration status, built from its progress: what the workflow writes to the
 * objects it lists, and what the bridge copies to those it does not (more than MAX_MIGRATION_OBJECTS). One
 * builder, so kubectl users read the same fields whoever wrote them. Pure, and bundled into the workflows
 * (types only from src/api).
 */
import type { StorageVersionMigrationStatus } from '../api/migration';
import type { MigrationProgress } from './definitions';

/** Is this phase final? One test everywhere (src/api/phases.ts, free of zod: workflows import it). */
export { isTerminalPhase, type FinalPhase } from '../api/phases';

/**
 * The status of a migration at `progress`, run by the workflow `workflowId`. `completedAt` (ms): when it ended,
 * written as completionTime; the workflow gives it with its terminal status, the bridge never (it copies a
 * running workflow's progress).
 */
export function migrationStatus(progress: MigrationProgress, workflowId: string, completedAt?: number): StorageVersionMigrationStatus {
  const { counters, remainingEstimate } = progress;
  return {
    phase: progress.phase,
    message: progress.message,
    workflowId,
    progress: { ...counters, ...(remainingEstimate !== undefined ? { remainingEstimate } : {}) },
    failures: progress.failures,
    startTime: new Date(progress.startedAt).toISOString(),
    ...(completedAt !== undefined ? { completionTime: new Date(completedAt).toISOString() } : {}),
  };
}
