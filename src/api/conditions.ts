/**
 * The conditions kubectl users wait on, derived from a migration's phase
 * (kube-storage-version-migrator compatible: Running, Succeeded, Failed).
 * Pure: used by activities to write status and by tests.
 */
import type { MigrationCondition, MigrationPhase } from './migration';

// Reasons src/api itself names (the CRD's description, the standard API's built-in message): defined here, below
// the contract, and listed with every other reason and failure type in src/contract/reasons.ts.

/** The Failed condition's reason when a new object carries spec.continueToken. */
export const CONTINUE_TOKEN_REFUSED = 'ContinueTokenRefused';
/** The resource a spec names is not one svm can migrate: a Failed condition's reason, and a failure type. */
export const INVALID_RESOURCE = 'InvalidResource';
/** A migration that ended Failed: its workflow's failure type, and the reason of its CRD's StorageMigrating condition. */
export const MIGRATION_FAILED = 'MigrationFailed';

/**
 * The conditions of a phase. `failedReason` names why a Failed phase failed
 * (e.g. ContinueTokenRefused, WorkflowTerminated) on its Failed condition;
 * it defaults to Failed.
 */
export function conditionsFor(
  phase: MigrationPhase,
  message: string | undefined,
  now: string,
  failedReason = 'Failed',
): MigrationCondition[] {
  const c = (type: MigrationCondition['type'], status: MigrationCondition['status'], reason: string): MigrationCondition => ({
    type,
    status,
    lastUpdateTime: now,
    reason,
    ...(message ? { message } : {}),
  });
  switch (phase) {
    case 'Succeeded':
      return [c('Running', 'False', 'Completed'), c('Succeeded', 'True', 'Succeeded')];
    case 'Failed':
      return [c('Running', 'False', 'Completed'), c('Failed', 'True', failedReason)];
    case 'Aborted':
      return [c('Running', 'False', 'Aborted'), c('Failed', 'True', 'Aborted')];
    case 'Pending':
      return [c('Running', 'Unknown', 'Pending')];
    default:
      return [c('Running', 'True', phase)];
  }
}
