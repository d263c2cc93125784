/**
 * followMigration: waits for a migration workflow that somebody else started
 * (the trigger, the bridge, a person) to end, for the initializer
 * (src/workflows/migrate-all.ts), which joins such a migration instead of
 * starting a second one. It heartbeats while it waits, so a worker that dies
 * hands the wait to another; cancelling it stops the following, never the
 * migration followed.
 */
import { Context } from '@temporalio/activity';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { zeroCounters } from '../api/counters';
import type { MigrationCounters, MigrationPhase } from '../api/migration';

export interface FollowedMigration {
  phase: MigrationPhase;
  counters: MigrationCounters;
  message?: string;
}

const HEARTBEAT_MS = 10_000;

export function createFollowActivities(temporal: { client: Client } | undefined) {
  return {
    async followMigration(workflowId: string): Promise<FollowedMigration> {
      if (!temporal) throw ApplicationFailure.nonRetryable('this worker has no Temporal client to follow a migration with');
      const ctx = Context.current();
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
        return { phase: r.phase ?? 'Succeeded', counters: r.counters ?? zeroCounters(), ...(r.message ? { message: r.message } : {}) };
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type FollowActivities = ReturnType<typeof createFollowActivities>;
