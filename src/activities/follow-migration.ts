/**
 * followMigration: waits for a migration workflow that somebody else started
 * (the trigger, the bridge, a person) to end, for the initializer
 * (src/workflows/migrate-all.ts), which joins such a migration instead of
 * starting a second one. It heartbeats while it waits, so a worker that dies
 * hands the wait to another; cancelling it stops the following, never the
 * migration followed.
 *
 * What it followed counts only once checked (src/kube/migration-record.ts,
 * checkRecord): a run at the migration's ID that anyone with the namespace's
 * credentials started (another workflow type, another task queue, an input
 * naming another resource or cluster, a result that is not a migration's, a
 * pass of another resource or uid) is reported Failed, saying why, with none
 * of its counters: the initializer never reports Succeeded on a forged run. One still running when the
 * initializer comes to it is not waited on: it is terminated (evictForeignRun), and the row says so.
 */
import { Context } from '@temporalio/activity';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { zeroCounters } from '../api/counters';
import type { MigrationCounters, MigrationPhase } from '../api/migration';
import { Placement } from '../contract/placement';
import { checkRecord, evictForeignRun, expectationOf, readMigrationRun } from '../kube/migration-record';

export interface FollowedMigration {
  phase: MigrationPhase;
  counters: MigrationCounters;
  message?: string;
}

const HEARTBEAT_MS = 10_000;

/** The resource a migration's workflow ID names: its last segment (`migrate/<cluster>/<plural>.<group>`). */
function resourceOfId(workflowId: string): { group: string; resource: string } {
  const name = workflowId.slice(workflowId.lastIndexOf('/') + 1);
  const dot = name.indexOf('.');
  return dot < 0 ? { group: '', resource: name } : { group: name.slice(dot + 1), resource: name.slice(0, dot) };
}

/**
 * temporal.placement: the worker's (its cluster); pinnedUid: the uid pinned to a named cluster. The queue expected
 * of the followed run is the one this activity runs on: the initializer's, where its own migrations run.
 */
export function createFollowActivities(temporal: { client: Client; placement?: Placement } | undefined, pinnedUid?: () => Promise<string>) {
  /** Why the run that ended at workflowId is not svm's migration of its resource here, or undefined when it is. */
  const refusal = async (client: Client, workflowId: string): Promise<string | undefined> => {
    const found = await readMigrationRun(client, workflowId);
    if (!found) return `${workflowId} is no longer in Temporal: its result cannot be checked`;
    if (found.status !== 'COMPLETED') return undefined;
    const placement = Placement.running(Context.current().info.taskQueue, temporal?.placement?.cluster).withUid(await pinnedUid?.());
    const checked = checkRecord(found.run, expectationOf(placement, resourceOfId(workflowId)));
    return checked.counts ? undefined : checked.why;
  };

  return {
    async followMigration(workflowId: string): Promise<FollowedMigration> {
      if (!temporal) throw ApplicationFailure.nonRetryable('this worker has no Temporal client to follow a migration with');
      const ctx = Context.current();
      // A run at the ID that is not svm's migration is not waited on (a forged one, on a queue nobody polls, would
      // hold the initializer forever): terminated, and this row Failed, saying so.
      const placement = Placement.running(ctx.info.taskQueue, temporal.placement?.cluster);
      const evicted = await evictForeignRun(temporal.client, workflowId, expectationOf(placement, resourceOfId(workflowId)));
      if (evicted)
        return { phase: 'Failed', counters: zeroCounters(), message: `${evicted}; nothing of it counts: migrate the resource again` };
      const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
      try {
        // result() follows the migration across continue-as-new to its last run.
        const ended = temporal.client.workflow.getHandle(workflowId).result() as Promise<Partial<FollowedMigration> | undefined>;
        const outcome = await Promise.race([
          ended.then(
            (r) => ({ r }),
            (e: unknown) => ({ e }),
          ),
          ctx.cancelled.then(() => ({ cancelled: true as const })),
        ]);
        if ('cancelled' in outcome) throw new Error('unreachable: cancelled rejects');
        if ('e' in outcome) {
          const e = outcome.e;
          if (e instanceof WorkflowFailedError) {
            const cause = e.cause;
            const details =
              cause instanceof ApplicationFailure ? (cause.details?.[0] as Partial<FollowedMigration> | undefined) : undefined;
            return { phase: 'Failed', counters: details?.counters ?? zeroCounters(), message: cause?.message ?? e.message };
          }
          throw e;
        }
        const r = outcome.r ?? {};
        const refused = await refusal(temporal.client, workflowId);
        if (refused) return { phase: 'Failed', counters: zeroCounters(), message: `the joined migration does not count: ${refused}` };
        return { phase: r.phase ?? 'Succeeded', counters: r.counters ?? zeroCounters(), ...(r.message ? { message: r.message } : {}) };
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type FollowActivities = ReturnType<typeof createFollowActivities>;
