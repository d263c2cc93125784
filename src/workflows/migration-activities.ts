/**
 * The activities of migrateResource and their timeouts and retries: a proxy per chunk, and one for the short
 * activities. Every proxy here schedules a task again when no worker starts it within taskStartWait seconds
 * (task-start.ts); undefined in runs from before that (their histories replay as they ran).
 */
import { ActivityCancellationType } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { AGREEMENT_CHANGED, INVALID_RESOURCE, PROGRAMMING_ERRORS } from '../contract/reasons';
import { reschedulingActivities } from './task-start';

/** A proxy per chunk, so that each chunk carries its own summary in the UI's event history. */
export const chunkActivities = (heartbeatTimeoutSeconds: number, summary: string, taskStartWait: number | undefined) =>
  reschedulingActivities<Activities>(
    {
      summary,
      // An abort waits for the chunk to stop, so its partial counters arrive.
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      startToCloseTimeout: '10 minutes',
      heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
      retry: {
        initialInterval: '2s',
        backoffCoefficient: 2,
        maximumInterval: '1 minute',
        maximumAttempts: 12,
        nonRetryableErrorTypes: PROGRAMMING_ERRORS,
      },
    },
    taskStartWait,
  );

/** The short activities: an agreement check, recording success, the StorageVersionMigration objects, resolving. */
export const shortActivities = (taskStartWait: number | undefined) =>
  reschedulingActivities<Activities>(
    {
      startToCloseTimeout: '1 minute',
      retry: {
        initialInterval: '1s',
        maximumInterval: '30s',
        maximumAttempts: 10,
        nonRetryableErrorTypes: [...PROGRAMMING_ERRORS, AGREEMENT_CHANGED, INVALID_RESOURCE],
      },
    },
    taskStartWait,
  );
export type ShortActivities = ReturnType<typeof shortActivities>;
