/**
 * One cluster of a windowed campaign (src/workflows/campaign-window.ts, docs/fleet.md): `svm-campaign-member/<name>/<cluster>`
 * on the fleet task queue, started by the campaign (ParentClosePolicy ABANDON: it outlives the campaign's run, which
 * continues as new). It does for its cluster what a legacy campaign did for each of its clusters, in a history of its
 * own:
 *
 * - it reads the cluster's pin (the uid registered, an open identity conflict: nothing is started then);
 * - it probes the cluster's worker (the clusterIdentity activity on the cluster's task queue, with
 *   unreachableAfterSeconds as its schedule-to-start timeout, doubled each miss up to an hour: probeWait), checks who
 *   answers (the cluster's name, its pinned uid, a WrongCluster refusal), and tells the campaign when the cluster goes
 *   away and comes back;
 * - once the cluster answers, it starts the step (clusterCampaignStep, a child on the cluster's placement) and waits
 *   for its end without probing (the step's end says);
 * - it checks the step's verdict against the pinned uid, and ends at the deadline, or when the campaign gives up
 *   (memberGiveUpSignal) or aborts (a cancellation: its step is cancelled, its migrations end Aborted).
 *
 * Its row is its memo (`row`, failures capped at MEMBER_MEMO_FAILURES) and its search attributes (MigrationCampaign,
 * MigrationCluster, MigrationPhase), where `svm fleet status` pages them; its result is the whole row; at its end it
 * signals the row to the campaign by workflow ID (the campaign's current run). While its cluster is away it continues
 * as new past a history bound (limits.memberHistoryEvents, default 1,000 events), carrying its row and its probe
 * count: a cluster away for days has a history no longer than one away for an hour.
 */
import {
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  ParentClosePolicy,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { fleetBaseQueue, WRONG_CLUSTER } from '../api/cluster';
import { Placement } from '../contract/placement';
import {
  campaignMemberReportSignal,
  campaignMemberStateQuery,
  CAMPAIGN_STEP_WORKFLOW_TYPE,
  MEMBER_MEMO_FAILURES,
  memberGiveUpSignal,
  type CampaignMemberInput,
  type CampaignRow,
  type CampaignStepInput,
  type CampaignStepResult,
  type MemberReport,
} from '../contract/fleet';
import { MigrationPhase } from '../contract/search-attributes';
import type { CampaignCluster } from '../activities/fleet';
import { failureType, rootMessage } from './failures';
import { neverStarted } from './task-start';
import type { clusterCampaignStep } from './campaign-step';
import { INVALID_INPUT } from '../contract/reasons';

interface MemberActivities {
  campaignClusterPin(name: string): Promise<CampaignCluster>;
}
interface ProbeActivities {
  clusterIdentity(asked?: { name: string }): Promise<{ name?: string; uid: string }>;
}

/** A member's run continues as new past this many events, while its cluster is away (CampaignLimits.memberHistoryEvents). */
export const MEMBER_HISTORY_EVENTS = 1000;

/** The longest a probe waits in an away cluster's queue: an hour, or unreachableAfterSeconds when that is longer. */
const PROBE_WAIT_CAP_MS = 3_600_000;

/** How long the probe after `misses` unanswered ones waits: unreachableAfterSeconds, doubled each miss, capped. */
export function memberProbeWait(everyMs: number, misses: number): number {
  return Math.min(everyMs * 2 ** Math.min(misses, 30), Math.max(everyMs, PROBE_WAIT_CAP_MS));
}

export function emptyRow(cluster: string): CampaignRow {
  return { cluster, phase: 'Pending', reachable: false, resources: { asked: 0, succeeded: 0 }, objects: 0, failures: [] };
}

/** The row as a memo and a signal carry it: failures capped, each reason shortened. */
export function compactRow(row: CampaignRow): CampaignRow {
  const failures = row.failures.slice(0, MEMBER_MEMO_FAILURES).map((f) => ({ resource: f.resource, reason: f.reason.slice(0, 500) }));
  const more = row.failures.length - failures.length;
  return {
    ...row,
    failures,
    ...(more > 0 ? { note: `${row.note ? `${row.note}; ` : ''}${more} more failure(s) in its member's result` } : {}),
  };
}

export async function campaignMember(input: CampaignMemberInput): Promise<CampaignRow> {
  const member = new Member(input);
  return member.run();
}

class Member {
  private readonly row: CampaignRow;
  private uid?: string;
  /** The task queue its registration names (a pool's, which serves its clusters on one queue), or its own. */
  private queue?: string;
  private misses: number;
  private probes: number;
  private readonly runs: number;
  private givenUp?: string;
  /** Set by a timer (history records it): no decision reads the workflow's clock (docs/development.md). */
  private deadlinePassed = false;
  private readonly every: number;
  private readonly placementBase = fleetBaseQueue(workflowInfo().taskQueue);

  constructor(private readonly input: CampaignMemberInput) {
    const c = input.carried;
    this.row = c?.row ?? { ...emptyRow(input.cluster), wave: input.wave };
    this.uid = c?.uid;
    this.queue = c?.queue;
    this.misses = c?.misses ?? 0;
    this.probes = c?.probes ?? 0;
    this.runs = (c?.runs ?? 0) + 1;
    this.every = input.unreachableAfterSeconds * 1000;
    setHandler(campaignMemberStateQuery, () => ({ row: this.row, probes: this.probes, runs: this.runs }));
    setHandler(memberGiveUpSignal, (why) => void (this.givenUp ??= why || 'the campaign stopped'));
    void sleep(Math.max(1, input.deadline - Date.now())).then(
      () => void (this.deadlinePassed = true),
      () => undefined,
    );
  }

  async run(): Promise<CampaignRow> {
    let done: 'ended' | 'continue' = 'ended';
    try {
      done = await this.life();
    } catch (err) {
      if (isCancellation(err)) this.end('Aborted', 'aborted: the campaign was aborted');
      else this.end('Failed', rootMessage(err));
    }
    // Continued as new outside the catch: continueAsNew ends the run by throwing.
    if (done === 'continue') return this.continue();
    await CancellationScope.nonCancellable(() => this.tell('ended'));
    return this.row;
  }

  /** The cluster, from its pin to its step's end: 'ended' with the row set, or 'continue' (its history is long). */
  private async life(): Promise<'ended' | 'continue'> {
    if (!this.input.carried) {
      const { campaignClusterPin } = proxyActivities<MemberActivities>({
        startToCloseTimeout: '1 minute',
        retry: { maximumAttempts: 10, maximumInterval: '30s', nonRetryableErrorTypes: [INVALID_INPUT] },
      });
      const pin = await campaignClusterPin(this.input.cluster);
      // A cluster whose identity is in conflict gets nothing started: its worker would refuse it anyway.
      if (pin.conflict) return this.end('Failed', `its identity is in conflict: ${pin.conflict}`);
      this.uid = pin.uid;
      this.queue = pin.queue;
    }
    const deadlineLeft = () => Math.max(1, this.input.deadline - Date.now());
    const over = () => this.givenUp !== undefined || this.deadlinePassed;
    for (;;) {
      if (over()) return this.giveUp(false);
      const wait = Math.min(this.input.limits?.probeWaitMs ?? memberProbeWait(this.every, this.misses), deadlineLeft());
      const probe = await Promise.race([this.probe(wait), condition(over).then(() => 'given-up' as const)]);
      if (probe === 'given-up') return this.giveUp(false);
      this.probes++;
      if (typeof probe === 'object') return this.end('Failed', probe.wrong);
      if (probe === 'ok') {
        this.misses = 0;
        return this.step();
      }
      await this.away(probe);
      this.misses++;
      // A worker that took the probe and failed (its API away) answered at once: wait before asking again.
      if (probe === 'error')
        await condition(over, Math.min(this.input.limits?.probeWaitMs ?? memberProbeWait(this.every, this.misses), deadlineLeft()));
      const bound = Math.max(50, this.input.limits?.memberHistoryEvents ?? MEMBER_HISTORY_EVENTS);
      if (workflowInfo().historyLength >= bound || workflowInfo().continueAsNewSuggested) return 'continue';
    }
  }

  /** The cluster answered: its step, then its verdict (or the deadline, or the campaign's giving up). */
  private async step(): Promise<'ended'> {
    if (this.givenUp) return this.end('Skipped', `not started: ${this.givenUp}`);
    this.reachable();
    const step = await this.startStep();
    let result: CampaignStepResult | undefined;
    let failed: unknown;
    step.result().then(
      (r) => void (result = r),
      (err: unknown) => void (failed = err ?? new Error('the step failed')),
    );
    await condition(() => result !== undefined || failed !== undefined || this.givenUp !== undefined || this.deadlinePassed);
    if (result) return this.succeeded(result);
    if (failed) {
      if (isCancellation(failed)) throw failed;
      return this.end('Failed', `its step failed: ${rootMessage(failed)}`);
    }
    return this.giveUp(true);
  }

  /** Past the deadline, or the campaign stopped: the row as it stands, saying why. */
  private giveUp(stepRuns: boolean): 'ended' {
    const why = this.givenUp ?? 'the deadline passed';
    if (this.row.phase === 'Pending' && this.givenUp) return this.end('Skipped', `not started: ${why}`);
    this.row.note = `${this.row.note ?? this.row.phase}; ${why}${stepRuns ? ' (its step goes on, and ends once its worker is back)' : ''}`;
    this.publish();
    return 'ended';
  }

  private continue(): Promise<CampaignRow> {
    return continueAsNew<typeof campaignMember>({
      ...this.input,
      carried: {
        row: this.row,
        ...(this.uid ? { uid: this.uid } : {}),
        ...(this.queue ? { queue: this.queue } : {}),
        misses: this.misses,
        probes: this.probes,
        runs: this.runs,
      },
    });
  }

  /** Where its step and probe run: its cluster, with the uid and the task queue its registration gave. */
  private placement(): Placement {
    return Placement.of(this.placementBase, {
      name: this.input.cluster,
      ...(this.uid ? { uid: this.uid } : {}),
      ...(this.queue ? { queue: this.queue } : {}),
    });
  }

  private startStep(): Promise<ChildWorkflowHandle<typeof clusterCampaignStep>> {
    const step = this.placement().child({
      type: CAMPAIGN_STEP_WORKFLOW_TYPE,
      id: `svm-campaign/${this.input.campaign}`,
      input: this.input.step,
      summary: `Campaign ${this.input.campaign}`,
    });
    return startChild<typeof clusterCampaignStep>(CAMPAIGN_STEP_WORKFLOW_TYPE, {
      ...step,
      args: step.args as [CampaignStepInput], // a named placement: the cluster is there
      // A step goes on if its member ends (the campaign stopped, its deadline): its migrations finish once its worker is back.
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  }

  /** Asks the cluster's worker who it is: unreachable when no worker takes the probe within waitMs. */
  private async probe(waitMs: number): Promise<'ok' | 'unreachable' | 'error' | { wrong: string }> {
    const name = this.input.cluster;
    const { clusterIdentity } = proxyActivities<ProbeActivities>({
      taskQueue: this.placement().taskQueue,
      scheduleToStartTimeout: waitMs,
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 1 },
    });
    try {
      // named: a pool's worker answers for the cluster asked (its own worker, for the one it serves)
      const who = await clusterIdentity({ name: this.input.cluster });
      if (who.name !== name)
        return { wrong: `the worker on ${name}'s task queue serves ${who.name ? `cluster "${who.name}"` : 'no named cluster'}` };
      if (this.uid && who.uid !== this.uid)
        return {
          wrong: `cluster ${name} answers with kube-system uid ${who.uid}, not the ${this.uid} it registered: not the same cluster`,
        };
      this.uid ??= who.uid;
      return 'ok';
    } catch (err) {
      if (neverStarted(err)) return 'unreachable';
      if (isCancellation(err)) throw err;
      // Its worker refused: it serves another cluster, or its identity is in conflict (the message says which).
      if (failureType(err) === WRONG_CLUSTER) return { wrong: rootMessage(err) };
      // It took the task and failed (its API away, say): not reachable for a campaign either, and asked again later.
      return 'error';
    }
  }

  private reachable(): void {
    const wasAway = this.row.phase === 'Unreachable';
    this.row.reachable = true;
    this.row.phase = 'Running';
    this.row.note = undefined;
    this.row.startedAt ??= new Date(Date.now()).toISOString();
    this.publish();
    if (wasAway) void this.tell('back');
  }

  private async away(why: 'unreachable' | 'error'): Promise<void> {
    if (this.row.phase === 'Unreachable') return;
    this.row.note = `${why === 'unreachable' ? `no worker took a task in ${this.input.unreachableAfterSeconds}s` : 'its worker could not read its API'} (since ${new Date(Date.now()).toISOString()})`;
    this.row.reachable = false;
    this.row.phase = 'Unreachable';
    this.publish();
    await this.tell('away');
  }

  private succeeded(r: CampaignStepResult): 'ended' {
    // The verdict counts only against the uid pinned to the cluster (the one the member gave its step).
    if (r.clusterUid) this.row.uid = r.clusterUid;
    if (this.uid && r.clusterUid !== this.uid)
      return this.end(
        'Failed',
        `its step's verdict was made against kube-system uid ${r.clusterUid ?? '(none recorded)'}, not ${this.uid}, the uid pinned to ${this.input.cluster}: it does not count`,
      );
    this.row.resources = r.resources;
    this.row.objects = r.objects;
    this.row.failures = r.failures;
    if (r.drop) this.row.drop = r.drop;
    // A drop verdict other than Ready is a finding, not a failure of the cluster's migrations: the row says it.
    const notReady = r.drop && r.drop.verdict !== 'Ready' ? `drop check: ${r.drop.verdict}` : undefined;
    return this.end(
      r.failures.length === 0 ? 'Succeeded' : 'Failed',
      r.failures.length > 0 ? `${r.failures.length} migration(s) did not succeed` : notReady,
    );
  }

  private end(phase: CampaignRow['phase'], note?: string): 'ended' {
    this.row.phase = phase;
    this.row.note = note;
    this.row.endedAt = new Date(Date.now()).toISOString();
    this.publish();
    return 'ended';
  }

  /** The row where readers page it: the memo (failures capped) and the phase attribute. */
  private publish(): void {
    upsertMemo({ row: compactRow(this.row) });
    upsertSearchAttributes([{ key: MigrationPhase, value: this.row.phase }]);
  }

  /** Tells the campaign (its current run, by ID). A campaign that has ended is told nothing: it no longer asks. */
  private async tell(event: MemberReport['event']): Promise<void> {
    const report: MemberReport = {
      cluster: this.input.cluster,
      campaignRun: this.input.campaignRun,
      event,
      ...(event === 'ended' ? { row: compactRow(this.row) } : {}),
    };
    try {
      await getExternalWorkflowHandle(this.input.campaignWorkflowId).signal(campaignMemberReportSignal, report);
    } catch (err) {
      if (isCancellation(err)) throw err;
      // The campaign has ended (or was terminated): nothing waits for this report.
    }
  }
}
