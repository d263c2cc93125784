/**
 * migrateAll: the initializer (`svm migrate --all`, the pre-upgrade Job) as a
 * durable workflow. It runs the migration of every resource it is given,
 * `parallelism` at a time, as child workflows with the usual per-resource
 * workflow IDs, so each one is the same migration the trigger, the bridge or
 * a person would start, under the same shared budget of the workers. A
 * resource whose migration is already running is joined, not started twice:
 * an activity follows that workflow to its end. The client that started it
 * may go away; starting it again joins it (MIGRATE_ALL_WORKFLOW_ID).
 *
 * Cancelling it asks every child to stop (they end Aborted); joined
 * migrations belong to whoever started them and keep running.
 */
import {
  ApplicationFailure,
  ChildWorkflowFailure,
  ParentClosePolicy,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
  isCancellation,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { FollowActivities } from '../activities/follow-migration';
import { zeroCounters } from '../api/counters';
import { groupResourceString, migrationWorkflowId, type ResourceRef } from '../api/resource';
import {
  explainInput,
  MigrateAllInputSchema,
  migrateAllProgressQuery,
  objectsHandled,
  type MigrateAllInput,
  type MigrateAllRow,
  type MigrationResult,
} from '../contract/definitions';
import { migrateResource } from './migrate-resource';
import { MigrationPhase } from '../contract/search-attributes';
import { migrationStart } from '../contract/start-options';
import { Placement, placedId } from '../contract/placement';
import { rootMessage } from './failures';
import { reschedulingActivities, taskStartWait } from './task-start';
import { compareStrings } from '../api/order';
import { enterCluster } from './cluster-context';
import { INVALID_INPUT } from '../contract/reasons';

const FOLLOW_OPTIONS = {
  // A joined migration may run for hours: the activity heartbeats while it follows it.
  startToCloseTimeout: '30 days',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '2s', maximumInterval: '1 minute' },
} as const;
type Follow = FollowActivities['followMigration'];

/** The progress a failed migration carries in its failure (MigrationFailed details), or just its message. */
function failedProgress(err: ChildWorkflowFailure): Pick<MigrationResult, 'phase' | 'counters' | 'message'> {
  const cause = err.cause;
  const details = cause instanceof ApplicationFailure ? (cause.details?.[0] as Partial<MigrationResult> | undefined) : undefined;
  return {
    phase: 'Failed',
    counters: details?.counters ?? zeroCounters(),
    message: rootMessage(err),
  };
}

export async function migrateAll(raw: MigrateAllInput): Promise<MigrateAllRow[]> {
  const parsed = MigrateAllInputSchema.safeParse(raw);
  if (!parsed.success)
    throw ApplicationFailure.create({
      type: INVALID_INPUT,
      message: `invalid input: ${explainInput(parsed.error)}`,
      nonRetryable: true,
    });
  const here = await enterCluster(parsed.data.cluster);
  const input = here.input({ ...(parsed.data as MigrateAllInput) });
  // A task no worker starts in time (one the server lost) is scheduled again, not waited on for ever.
  const { followMigration } = reschedulingActivities<FollowActivities>(
    FOLLOW_OPTIONS,
    taskStartWait(input.options?.taskStartTimeoutSeconds),
  );
  const queue = [...input.resources];
  const total = queue.length;
  const done: MigrateAllRow[] = [];
  const running = new Set<string>();
  setHandler(migrateAllProgressQuery, () => ({ total, done: [...done], running: [...running].sort(), pending: queue.length }));

  const report = () => {
    const failed = done.filter((r) => r.result !== 'Succeeded');
    setCurrentDetails(
      [
        `**migrating every resource**: ${done.length} of ${total} done, ${running.size} running, ${queue.length} waiting; ${input.parallelism} at a time`,
        failed.length ? `not succeeded: ${failed.map((r) => `${r.resource} (${r.result})`).join(', ')}` : 'none failed so far',
        running.size ? `running: ${[...running].sort().join(', ')}` : '',
      ]
        .filter(Boolean)
        .join('\n'),
    );
  };
  upsertSearchAttributes([{ key: MigrationPhase, value: 'Running' }]);
  report();

  const worker = async () => {
    for (let ref = queue.shift(); ref; ref = queue.shift()) {
      const name = groupResourceString(ref);
      running.add(name);
      report();
      const row = await migrateOne(ref, input, followMigration);
      running.delete(name);
      done.push(row);
      report();
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(input.parallelism, total) }, worker));
  } catch (err) {
    // Cancelled: the children were asked to stop (each records Aborted); the UI shows this run as Aborted.
    if (isCancellation(err)) upsertSearchAttributes([{ key: MigrationPhase, value: 'Aborted' }]);
    throw err;
  }

  const ok = done.every((r) => r.result === 'Succeeded');
  upsertSearchAttributes([{ key: MigrationPhase, value: ok ? 'Succeeded' : 'Failed' }]);
  return done.sort((a, b) => compareStrings(a.resource, b.resource));
}

/** One resource: a child migration, or the running one followed to its end. Never throws but for cancellation. */
async function migrateOne(ref: ResourceRef, input: MigrateAllInput, followMigration: Follow): Promise<MigrateAllRow> {
  const name = groupResourceString(ref);
  const workflowId = placedId(migrationWorkflowId(ref), input.cluster?.name);
  const started = Date.now();
  const row = (result: Pick<MigrationResult, 'phase' | 'counters' | 'message'> | undefined, joined: boolean, error?: string) => ({
    resource: name,
    workflowId,
    result: error !== undefined ? 'Error' : (result?.phase ?? 'Error'),
    objects: result ? objectsHandled(result.counters) : 0,
    durationMs: Date.now() - started,
    joined,
    ...(error !== undefined || result?.phase !== 'Succeeded' ? { message: error ?? result?.message } : {}),
  });
  // A child cannot join a running migration: joining is done below, when its start is refused.
  const here = Placement.running(workflowInfo().taskQueue, input.cluster);
  try {
    const child = await startChild(migrateResource, {
      ...here.child(migrationStart({ resource: ref, ...(input.options ? { options: input.options } : {}) })),
      // Cancelling the initializer stops its own migrations (they record Aborted); ending it otherwise leaves nothing behind.
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    });
    try {
      return row(await child.result(), false);
    } catch (err) {
      if (isCancellation(err)) throw err;
      // A migration that failed ends its workflow with the failure (MigrationFailed) after recording its status.
      if (err instanceof ChildWorkflowFailure) return row(failedProgress(err), false);
      throw err;
    }
  } catch (err) {
    if (isCancellation(err)) throw err;
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      try {
        return row(await followMigration(workflowId), true);
      } catch (followErr) {
        if (isCancellation(followErr)) throw followErr;
        return row(undefined, true, `could not follow the running migration ${workflowId}: ${rootMessage(followErr)}`);
      }
    }
    return row(undefined, false, rootMessage(err));
  }
}
