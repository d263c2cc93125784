/**
 * storageVersionTrigger: the periodic trigger of the automated-migration design. One instance
 * (workflow ID svm-trigger), so it is the leader by construction. Each period
 * it observes every API server's discovery, decides per resource (see
 * trigger-logic.ts) and applies: StorageState writes, stopping migrations
 * whose storage version moved or whose API servers diverge, starting
 * migrations where objects may be persisted in another version. It keeps its
 * memory (how long hashes have agreed, backoff of failing migrations) in
 * workflow state and continues as new every few dozen periods.
 */
import {
  condition,
  continueAsNew,
  deprecatePatch,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { enterCluster } from './cluster-context';
import type { Activities } from '../activities';
import { decide } from './trigger-logic';
import { taskStartWait } from './task-start';
import type { TriggerInput, TriggerMemory } from '../contract/trigger';

export type { TriggerInput };

import { pollNowSignal } from '../contract/definitions';
export { TRIGGER_WORKFLOW_ID, pollNowSignal } from '../contract/definitions';

const ACTIVITY_OPTIONS = {
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '2s', maximumInterval: '1 minute', maximumAttempts: 5 },
} as const;

const PERIODS_PER_RUN = 30;

export async function storageVersionTrigger(input: TriggerInput): Promise<void> {
  const cfg = {
    periodMs: input.periodSeconds * 1000,
    stalenessMs: (input.stalenessSeconds ?? input.periodSeconds * 3) * 1000,
    maxBackoffMs: (input.maxBackoffSeconds ?? 3600) * 1000,
  };
  let memory: TriggerMemory = input.memory ?? { consensus: {}, backoff: {} };
  const here = await enterCluster(input.cluster);
  let pollNow = false;
  setHandler(pollNowSignal, () => void (pollNow = true));
  // The markers of the patches folded at 0.2.0, asked in the order their patched() calls were: deprecatePatch for one
  // release (docs/development.md, "The patch ledger").
  deprecatePatch('trigger-keeps-pollnow-sent-during-a-period');
  deprecatePatch('trigger-blind-gap-is-absence');
  deprecatePatch('trigger-migrated-from-record');
  // A trigger that ran but applied no period for longer than the staleness bound was away too; "migrated" needs a
  // whole pass on record in Temporal, not the StorageState alone (the worker's token can write it).
  const decideCfg = { ...cfg, blindGapIsAbsence: true, recordDecides: true };
  // A task no worker starts in time (one the server lost) fails its period instead of holding the trigger for ever;
  // the next period observes again (an apply is never scheduled again late, with stale decisions).
  const { observeStorage, applyTriggerActions } = proxyActivities<Activities>({
    ...ACTIVITY_OPTIONS,
    scheduleToStartTimeout: `${taskStartWait()} seconds`,
  });

  for (let period = 0; period < PERIODS_PER_RUN; period++) {
    try {
      // A pollNow that arrives from here on asks for the next period at once (it is not lost).
      pollNow = false;
      const o = await observeStorage(memory.recorded ?? {});
      // Decided by the observation's own time, recorded in history (Observation.at); older histories had none.
      const decided = decide(o.observed, o.states, o.migrations, memory, decideCfg, o.at ?? Date.now(), o.discoveryConsistent, o.recorded);
      const applied = await applyTriggerActions(decided.actions);
      // Only a period whose decisions were applied counts (a start lost with a failed apply is not a failure of that migration).
      memory = decided.memory;
      const notes = decided.actions.filter((a) => a.note || a.startMigration || a.stopMigration);
      for (const a of notes)
        log.info('storage state', { resource: a.name, note: a.note, start: a.startMigration ?? false, stop: a.stopMigration });
      setCurrentDetails(
        [
          `**storage version trigger**: every ${input.periodSeconds}s; checked ${o.checked}; discovery ${o.discoveryConsistent ? 'consistent' : '**not verified consistent** (servers differ, or not every server could be asked)'}`,
          `last period: ${applied.written} StorageStates written${applied.conflicts.length ? ` (${applied.conflicts.length} changed meanwhile, decided again next period)` : ''}; started ${applied.started.join(', ') || 'none'}; stopped ${applied.stopped.join(', ') || 'none'}`,
          ...notes
            .slice(0, 10)
            .map(
              (a) =>
                `- ${a.name}: ${a.note ?? ''}${a.startMigration ? ' → migration started' : ''}${a.stopMigration ? ` → migration stopped (${a.stopMigration})` : ''}`,
            ),
        ].join('\n'),
      );
    } catch (err) {
      // A bad period (API servers away) is logged and retried next period, not fatal; failing long is absence.
      log.warn('trigger period failed', { error: err instanceof Error ? err.message : String(err) });
      memory = { ...memory, failing: true };
    }
    await condition(() => pollNow, cfg.periodMs);
    if (workflowInfo().continueAsNewSuggested) break;
  }
  await continueAsNew<typeof storageVersionTrigger>(here.input({ ...input, memory }));
}
