/**
 * Activity tasks that no worker starts in time are scheduled again.
 *
 * Heartbeat and start-to-close timeouts count from a task's start: a task that
 * is never started is noticed by nothing else. That happens when workers are
 * away (the task waits in its queue) and, seen on temporal-server v1.32.2, when
 * PostgreSQL crashed (pg_ctl stop -m immediate) just as the task was scheduled:
 * the history said Scheduled, the task queue held nothing, and the migration
 * waited forever with a worker polling.
 *
 * So every activity gets a schedule-to-start timeout. Temporal never retries
 * one (it would only put the task back in the same queue), so the workflow
 * does: the same call is scheduled again as a new task, which the server hands
 * to matching afresh. The wait doubles each time up to an hour, so tasks that
 * queue legitimately behind busy workers are never starved by their own
 * re-scheduling. Every svm activity may run again: a chunk scheduled again is
 * a new activity (no heartbeat of the lost one, its retry attempts counted
 * afresh) that lists its page again from the same continue token, its
 * objects updated and counted once more as a whole; the others read or
 * write idempotently. The trigger does not use this: its period fails and the
 * next observes again (its decisions must not be applied late).
 *
 * Below them, migrateResource's own activities and their timeouts and retries: one proxy for the short activities,
 * and one per chunk (MigrationActivities).
 */
import { ActivityCancellationType, deprecatePatch, log, proxyActivities, TimeoutFailure, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { defaultMigrationOptions } from '../contract/definitions';
import { AGREEMENT_CHANGED, INVALID_RESOURCE, PROGRAMMING_ERRORS } from '../contract/reasons';
import { causeOfKind } from './failures';

/** The first wait for a worker to start a task, when a workflow has no option for it (a migration's default). */
export const DEFAULT_TASK_START_SECONDS = defaultMigrationOptions.taskStartTimeoutSeconds;
/** The wait doubles each time a task is scheduled again, up to this. */
export const MAX_TASK_START_SECONDS = 3600;

/** An activity's failure because no worker started its task within the schedule-to-start timeout. */
export function neverStarted(err: unknown): boolean {
  return causeOfKind(err, TimeoutFailure)?.timeoutType === 'SCHEDULE_TO_START';
}

/**
 * The first wait for this run's tasks (`seconds`, the default unless given). Every workflow asks it first; the marker
 * of the patch folded at 0.2.0 stays as deprecatePatch for one release (docs/development.md, "The patch ledger").
 */
export function taskStartWait(seconds: number = DEFAULT_TASK_START_SECONDS): number {
  deprecatePatch('reschedule-tasks-no-worker-starts');
  return seconds;
}

type Callable<A> = { [K in keyof A]: A[K] };

/**
 * A proxy of the activities `A`: each call's task gets the schedule-to-start
 * timeout `firstWaitSeconds` and is scheduled again (the wait doubled, up to
 * MAX_TASK_START_SECONDS) each time no worker started it; cancellation and
 * every other failure pass through.
 */
export function reschedulingActivities<A extends object>(options: ActivityOptions, firstWaitSeconds: number): Callable<A> {
  const first = firstWaitSeconds;
  return new Proxy({} as Callable<A>, {
    get(_target, name) {
      if (typeof name !== 'string' || name === 'then') return undefined;
      return async (...args: unknown[]): Promise<unknown> => {
        for (let wait = first; ; wait = Math.min(wait * 2, MAX_TASK_START_SECONDS)) {
          const act = proxyActivities<Record<string, (...a: unknown[]) => Promise<unknown>>>({
            ...options,
            scheduleToStartTimeout: `${wait} seconds`,
          });
          try {
            return await act[name]!(...args);
          } catch (err) {
            if (!neverStarted(err)) throw err;
            const next = Math.min(wait * 2, MAX_TASK_START_SECONDS);
            log.warn('no worker started an activity task in time; it is scheduled again', {
              activity: name,
              waitedSeconds: wait,
              nextWaitSeconds: next,
            });
          }
        }
      };
    },
  });
}

// ------------------------------------------------------------ migrateResource's activities

/** A proxy per chunk, so that each chunk carries its own summary in the UI's event history. */
const chunkActivities = (heartbeatTimeoutSeconds: number, summary: string, taskStartWait: number) =>
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
export const shortActivities = (taskStartWait: number) =>
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

/**
 * One run of migrateResource's activities: the short ones, and the chunk's (a proxy per chunk). Each task is scheduled
 * again when no worker starts it within `taskStartWait` seconds.
 */
export class MigrationActivities {
  readonly short: ShortActivities;

  constructor(
    private readonly taskStartWait: number,
    private readonly heartbeatTimeoutSeconds: number,
  ) {
    this.short = shortActivities(taskStartWait);
  }

  /** The chunk activity, its task named by `summary` in the UI's event history. */
  chunk(summary: string): Activities['migrateChunk'] {
    return chunkActivities(this.heartbeatTimeoutSeconds, summary, this.taskStartWait).migrateChunk;
  }
}
