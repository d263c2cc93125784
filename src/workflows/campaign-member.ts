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
 * With trust domains (docs/fleet.md "Trust domains"), when its pin names the domain its cluster is bound to, none of
 * the above crosses into the cluster's namespace: the fleet's activities (src/activities/fleet-domain.ts) start or
 * join its step there, await it, and judge its row from the domain's own migration records (checkRecord); no probe.
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
import type { DomainCluster, DomainStepState, DomainVerdict } from '../activities/fleet-domain';
import { failureType, rootMessage } from './failures';
import { neverStarted } from './task-start';
import type { clusterCampaignStep } from './campaign-step';
import { INVALID_INPUT } from '../contract/reasons';

interface MemberActivities {
  campaignClusterPin(name: string): Promise<CampaignCluster>;
}
/** The fleet's activities toward a trust domain (src/activities/fleet-domain.ts): a member in a domain reaches it through these only. */
interface DomainActivities {
  startDomainStep(input: { cluster: DomainCluster; campaign: string; step: CampaignMemberInput['step'] }): Promise<DomainStepRun>;
  awaitDomainStep(input: DomainStepRun & { domain: string; waitMs: number }): Promise<DomainStepState>;
  judgeDomainStep(input: { cluster: DomainCluster; campaign: string; dropCheck?: string; named?: string[] }): Promise<DomainVerdict>;
  cancelDomainStep(input: { cluster: DomainCluster; campaign: string }): Promise<void>;
}
interface ProbeActivities {
  clusterIdentity(asked?: { name: string }): Promise<{ name?: string; uid: string }>;
}

/** A member's run continues as new past this many events, while its cluster is away (CampaignLimits.memberHistoryEvents). */
export const MEMBER_HISTORY_EVENTS = 1000;

/** The longest one awaitDomainStep waits for a domain's step: one activity's events per 5 minutes of a step. */
const DOMAIN_AWAIT_MS = 300_000;

type DomainStepRun = { workflowId: string; runId: string };

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
  /** With trust domains: the domain its cluster is bound to (its pin said so), its step there, and the pin's note. */
  private domain?: string;
  private stepRun?: DomainStepRun;
  private pinNote?: string;

  constructor(private readonly input: CampaignMemberInput) {
    const c = input.carried;
    this.row = c?.row ?? { ...emptyRow(input.cluster), wave: input.wave };
    this.uid = c?.uid;
    this.queue = c?.queue;
    this.misses = c?.misses ?? 0;
    this.probes = c?.probes ?? 0;
    this.runs = (c?.runs ?? 0) + 1;
    this.domain = c?.domain;
    this.stepRun = c?.stepRun;
    this.pinNote = c?.pinNote;
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
      if (isCancellation(err)) {
        // In a domain, its step is there: cancelled through the fleet's client of the domain (its migrations end Aborted).
        if (this.domain && this.stepRun) await CancellationScope.nonCancellable(() => this.cancelDomainStep());
        this.end('Aborted', 'aborted: the campaign was aborted');
      } else this.end('Failed', rootMessage(err));
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
      // Bound to a trust domain (the fleet's configuration): reached there only, through the fleet's activities.
      // A pin recorded before domains names none: today's path, unchanged (the branch follows the recorded result).
      if (pin.domain) {
        this.domain = pin.domain;
        this.pinNote = pin.note;
      }
    }
    if (this.domain) return this.inDomain(this.domain);
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

  /** Its cluster as the domain's activities take it. */
  private domainCluster(domain: string): DomainCluster {
    return {
      domain,
      name: this.input.cluster,
      ...(this.uid ? { uid: this.uid } : {}),
      ...(this.queue ? { queue: this.queue } : {}),
    };
  }

  /**
   * A cluster in a trust domain: its step started (or joined) in its domain's namespace, awaited there (each wait
   * bounded), then its row judged from the domain's own records (judgeDomainStep: checkRecord on each migration),
   * never from the step's result. No probe: a step whose first task no worker takes within unreachableAfterSeconds
   * is reported away, and back once it is taken.
   */
  private async inDomain(domain: string): Promise<'ended' | 'continue'> {
    const over = () => this.givenUp !== undefined || this.deadlinePassed;
    if (over()) return this.giveUp(this.stepRun !== undefined);
    const acts = proxyActivities<DomainActivities>({
      startToCloseTimeout: '2 minutes',
      retry: { maximumAttempts: 10, maximumInterval: '30s', nonRetryableErrorTypes: [INVALID_INPUT] },
    });
    const cluster = this.domainCluster(domain);
    this.stepRun ??= await acts.startDomainStep({ cluster, campaign: this.input.campaign, step: this.input.step });
    const run = this.stepRun;
    const { awaitDomainStep } = proxyActivities<DomainActivities>({
      startToCloseTimeout: DOMAIN_AWAIT_MS + 120_000,
      heartbeatTimeout: '1 minute',
      retry: { maximumAttempts: 10, maximumInterval: '30s', nonRetryableErrorTypes: [INVALID_INPUT] },
    });
    const bound = Math.max(50, this.input.limits?.memberHistoryEvents ?? MEMBER_HISTORY_EVENTS);
    for (;;) {
      const taken = this.row.phase === 'Running';
      const waitMs = Math.max(1000, Math.min(taken ? DOMAIN_AWAIT_MS : this.every, this.input.deadline - Date.now()));
      const state = await Promise.race([awaitDomainStep({ ...run, domain, waitMs }), condition(over).then(() => 'given-up' as const)]);
      if (state === 'given-up') return this.giveUp(true);
      if (state.ended) {
        if (state.status !== 'completed')
          return this.end('Failed', `its step in domain ${domain} ${state.status}${state.message ? `: ${state.message}` : ''}`);
        const verdict = await acts.judgeDomainStep({
          cluster,
          campaign: this.input.campaign,
          ...(this.input.step.dropCheck ? { dropCheck: this.input.step.dropCheck } : {}),
          ...(Array.isArray(this.input.step.migrate) ? { named: this.input.step.migrate } : {}),
        });
        return this.judged(domain, verdict);
      }
      if (state.started && !taken) this.reachable();
      else if (!state.started) await this.away('unreachable');
      if (workflowInfo().historyLength >= bound || workflowInfo().continueAsNewSuggested) return 'continue';
      if (over()) return this.giveUp(true);
    }
  }

  private async cancelDomainStep(): Promise<void> {
    const { cancelDomainStep } = proxyActivities<DomainActivities>({
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 5, maximumInterval: '10s' },
    });
    await cancelDomainStep({ cluster: this.domainCluster(this.domain!), campaign: this.input.campaign }).catch(() => undefined);
  }

  /** The row from the domain's checked records: Succeeded only when every migration's record counts and succeeded. */
  private judged(domain: string, v: DomainVerdict): 'ended' {
    if (v.clusterUid) this.row.uid = v.clusterUid;
    this.row.resources = v.resources;
    this.row.objects = v.objects;
    this.row.failures = v.failures;
    if (v.drop) this.row.drop = v.drop;
    const notes = [
      ...(v.failures.length > 0 ? [`${v.failures.length} migration(s) did not succeed`] : []),
      ...(v.refused > 0 ? [`${v.refused} record(s) in domain ${domain} refused by the check`] : []),
      ...(v.drop && v.drop.verdict !== 'Ready' ? [`drop check: ${v.drop.verdict}`] : []),
      ...(this.pinNote ? [this.pinNote] : []),
    ];
    return this.end(v.failures.length === 0 ? 'Succeeded' : 'Failed', notes.length > 0 ? notes.join('; ') : undefined);
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
        ...(this.domain ? { domain: this.domain } : {}),
        ...(this.stepRun ? { stepRun: this.stepRun } : {}),
        ...(this.pinNote ? { pinNote: this.pinNote } : {}),
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
