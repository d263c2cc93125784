/**
 * The conditions kubectl users wait on, derived from a migration's phase
 * (kube-storage-version-migrator compatible: Running, Succeeded, Failed).
 * Pure: used by activities to write status and by tests.
 */
import type { MigrationCondition, MigrationPhase } from './migration';
import { ABORTED, COMPLETED, FAILED } from '../contract/reasons';

/**
 * The conditions of a phase. `failedReason` names why a Failed phase failed
 * (e.g. ContinueTokenRefused, WorkflowTerminated) on its Failed condition;
 * it defaults to Failed.
 */
export function conditionsFor(
  phase: MigrationPhase,
  message: string | undefined,
  now: string,
  failedReason: string = FAILED,
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
      return [c('Running', 'False', COMPLETED), c('Succeeded', 'True', 'Succeeded')];
    case 'Failed':
      return [c('Running', 'False', COMPLETED), c('Failed', 'True', failedReason)];
    case 'Aborted':
      return [c('Running', 'False', ABORTED), c('Failed', 'True', ABORTED)];
    case 'Pending':
      return [c('Running', 'Unknown', 'Pending')];
    default:
      return [c('Running', 'True', phase)];
  }
}
