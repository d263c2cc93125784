/**
 * A campaign across clusters at fleet scale (docs/fleet.md, "Campaigns"): `svm-campaign/<name>` (type
 * windowedCampaign) on the fleet task queue. Each cluster is a member workflow of its own (src/workflows/campaign-member.ts:
 * its probe, its step, its row), started with ParentClosePolicy ABANDON; the campaign keeps only what does not grow
 * with the fleet's history: the clusters not started yet (names, in order), how many stand in each phase, the failed
 * clusters (at most CAMPAIGN_FAILURES_KEPT, their first failures), the clusters in flight, and its position. It
 * continues as new carrying that state when Temporal suggests it or its run passes limits.campaignHistoryEvents
 * (default 4,000), so its history is bounded whatever the number of clusters and however long they are away.
 *
 * The canary goes first, alone: the first cluster (the named canary, or the first in order) whose member ends; one
 * that is away leaves its turn to the next, and is still probed by its member. Then an in-flight window: at most
 * `parallel` clusters running at once (a cluster away leaves the window; one coming back is let in over it), the
 * next started as soon as one ends or goes away, never waiting for the slowest. `pauseBetweenWavesSeconds` pauses
 * after the canary and after each `parallel` clusters started (a wave: the numbers `--dry-run` prints). The failure
 * budget is checked at each cluster's end: the first failure stops it, or failures above maxFailureRatio of the
 * clusters ended. Stopped, it tells its members in flight to end as they stand (their steps go on); aborted, it
 * cancels them (their steps' migrations end Aborted). Pause holds back the clusters not started.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { fleetBaseQueue } from '../api/cluster';
import { Placement } from '../contract/placement';
import { explainInput } from '../contract/definitions';
import {
  campaignAbortSignal,
  CampaignInputSchema,
  campaignMemberId,
  campaignMemberReportSignal,
  campaignPauseSignal,
  campaignResumeSignal,
  campaignStatusQuery,
  CAMPAIGN_FAILURE_DETAIL,
  CAMPAIGN_FAILURES_KEPT,
  CAMPAIGN_INFLIGHT_NAMED,
  CAMPAIGN_MEMBER_WORKFLOW_TYPE,
  CAMPAIGN_SKIPPED_NAMED,
  memberGiveUpSignal,
  type CampaignCounts,
  type CampaignFailure,
  type CampaignInFlight,
  type CampaignInput,
  type CampaignLimits,
  type CampaignMemberInput,
  type CampaignPhase,
  type CampaignRow,
  type CampaignSettings,
  type CampaignStatus,
  type ClusterPhase,
  type MemberReport,
} from '../contract/fleet';
import { MigrationCampaign, MigrationPhase } from '../contract/search-attributes';
import { rootMessage } from './failures';
import { compactRow, emptyRow, type campaignMember } from './campaign-member';
import { INVALID_INPUT, NOT_ENABLED } from '../contract/reasons';

interface FleetActivities {
  resolveCampaignNames(input: { clusters?: string[]; where?: string }): Promise<string[]>;
}

/** A campaign's run continues as new past this many events (CampaignLimits.campaignHistoryEvents). */
export const CAMPAIGN_HISTORY_EVENTS = 4000;
/** Members in flight told at once (give up, cancel) before the run may continue as new. */
const TELL_BATCH = 100;
/** After its deadline, how long the campaign waits for its members' last reports (each ends at the deadline itself). */
const REPORT_GRACE_MS = 10 * 60_000;

/**
 * A cluster in flight, as the carried state holds it: its wave, when it started (epoch ms), whether it is away (1),
 * and whether it was told of a stop or an abort (1). A tuple: ten thousand clusters away are about 0.9 MB carried
 * (names of 63 characters), where objects with named fields were 1.6 MB.
 */
export type InFlight = [wave: number, since: number, away: 0 | 1, told: 0 | 1];
const phaseOf = (f: InFlight): 'Running' | 'Unreachable' => (f[2] ? 'Unreachable' : 'Running');

/** What a campaign carries from run to run: nothing grows with the clusters done. */
export interface CampaignState {
  runId: string;
  startedAt: string;
  deadline: number;
  /** The clusters not started yet, in the campaign's order (shrinks as they start). */
  remaining: string[];
  total: number;
  /** The canary's turn is over (a cluster ended first, alone). */
  canaryDone: boolean;
  /** The cluster trying its turn as the canary. */
  canary?: string;
  wave: number;
  /** Clusters started in the current wave (after the canary). */
  inWave: number;
  /** The wave whose pause is over, and the end of the pause under way. */
  pausedBefore: number;
  pauseUntil?: number;
  /** How many clusters ended in each phase (a cluster given up on ends in the phase it stood in). */
  ended: Record<ClusterPhase, number>;
  failures: CampaignFailure[];
  failuresLeftOff: number;
  inflight: Record<string, InFlight>;
  skipped?: { clusters: string[]; leftOff: number; note: string };
  paused?: string;
  aborted?: string;
  stopped?: string;
  /** Every member in flight has been told of the stop or abort. */
  told: boolean;
}

/** The second argument: the state of the run before (continue-as-new) and the bounds (tests pass smaller ones). */
export interface CampaignCarry {
  limits?: CampaignLimits;
  state?: CampaignState;
}

/** How many clusters stand in each phase: those ended, in flight, and not started (Pending). */
export function campaignCounts(s: CampaignState): CampaignCounts {
  const c: CampaignCounts = { clusters: s.total, ...s.ended };
  c.Pending += s.remaining.length;
  for (const f of Object.values(s.inflight)) c[phaseOf(f)]++;
  return c;
}

/**
 * The campaign's result and campaignStatus query from its state: no rows (its members hold them), so its size is
 * bounded by the caps (failures, clusters in flight and skipped named), not by the number of clusters.
 */
export function campaignStatusOf(name: string, phase: CampaignPhase, s: CampaignState): CampaignStatus {
  const all = Object.entries(s.inflight).map(([cluster, f]): CampaignInFlight => ({
    cluster,
    phase: phaseOf(f),
    wave: f[0],
    since: new Date(f[1]).toISOString(),
  }));
  // The running ones first (at most `parallel` and those back), then those away.
  all.sort((a, b) => (a.phase === b.phase ? 0 : a.phase === 'Running' ? -1 : 1));
  const inflight = all.slice(0, CAMPAIGN_INFLIGHT_NAMED);
  const message = s.aborted ? `aborted: ${s.aborted}` : s.stopped;
  return {
    name,
    phase,
    wave: s.wave,
    rows: [],
    ...(message ? { message } : {}),
    counts: campaignCounts(s),
    failures: s.failures,
    ...(s.failuresLeftOff > 0 ? { failuresLeftOff: s.failuresLeftOff } : {}),
    inflight,
    ...(all.length > inflight.length ? { inflightLeftOff: all.length - inflight.length } : {}),
    ...(s.skipped ? { skipped: s.skipped } : {}),
    runId: s.runId,
    startedAt: s.startedAt,
  };
}

const zero = (): Record<ClusterPhase, number> => ({
  Pending: 0,
  Running: 0,
  Unreachable: 0,
  Succeeded: 0,
  Failed: 0,
  Skipped: 0,
  Aborted: 0,
});

export async function windowedCampaign(raw: CampaignInput, carry: CampaignCarry = {}): Promise<CampaignStatus> {
  const parsed = CampaignInputSchema.safeParse(raw);
  if (!parsed.success)
    throw ApplicationFailure.create({
      type: INVALID_INPUT,
      message: `invalid campaign: ${explainInput(parsed.error)}`,
      nonRetryable: true,
    });
  const input = parsed.data;
  const id = workflowInfo().workflowId;
  const name = id.startsWith('svm-campaign/') ? id.slice('svm-campaign/'.length) : id;
  let state = carry.state;
  if (!state) {
    // Asked while its clusters are resolved (`svm fleet migrate --wait` asks at once): none counted yet. Signals
    // sent meanwhile wait for their handlers (the SDK buffers them).
    setHandler(campaignStatusQuery, () => ({
      name,
      phase: 'Running',
      wave: 0,
      rows: [],
      counts: { clusters: 0, ...zero() },
      message: 'resolving its clusters',
    }));
    const { resolveCampaignNames } = proxyActivities<FleetActivities>({
      startToCloseTimeout: '5 minutes',
      retry: { maximumAttempts: 5, nonRetryableErrorTypes: [INVALID_INPUT, NOT_ENABLED] },
    });
    const names = await resolveCampaignNames({ clusters: input.clusters, where: input.where });
    if (names.length === 0)
      throw ApplicationFailure.create({
        type: INVALID_INPUT,
        message: 'the campaign names no cluster (its query matched none)',
        nonRetryable: true,
      });
    if (input.canary && !names.includes(input.canary))
      throw ApplicationFailure.create({
        type: INVALID_INPUT,
        message: `the canary ${input.canary} is not one of the campaign's clusters`,
        nonRetryable: true,
      });
    const order = input.canary ? [input.canary, ...names.filter((n) => n !== input.canary)] : names;
    state = {
      runId: workflowInfo().firstExecutionRunId,
      startedAt: new Date(Date.now()).toISOString(),
      deadline: Date.now() + input.deadlineSeconds * 1000,
      remaining: order,
      total: order.length,
      canaryDone: false,
      wave: 0,
      inWave: 0,
      pausedBefore: 0,
      ended: zero(),
      failures: [],
      failuresLeftOff: 0,
      inflight: {},
      told: false,
    };
    upsertSearchAttributes([
      { key: MigrationPhase, value: 'Running' },
      { key: MigrationCampaign, value: name },
    ]);
  }
  return new WindowedCampaign(name, input, state, carry.limits ?? {}).run();
}

class WindowedCampaign {
  private readonly base = fleetBaseQueue(workflowInfo().taskQueue);
  private phase: CampaignPhase = 'Running';
  /** Set by timers (history records them): no decision reads the workflow's clock (docs/development.md). */
  private deadlinePassed = false;
  private graceOver = false;
  private graceTimer = false;

  constructor(
    private readonly name: string,
    private readonly input: CampaignSettings,
    private readonly s: CampaignState,
    private readonly limits: CampaignLimits,
  ) {
    setHandler(campaignStatusQuery, () => this.status());
    setHandler(campaignPauseSignal, (why) => {
      if (this.stopping() || this.phase !== 'Running') return;
      this.s.paused = why || 'paused';
      this.report();
    });
    setHandler(campaignResumeSignal, () => {
      this.s.paused = undefined;
      this.report();
    });
    setHandler(campaignAbortSignal, (why) => {
      if (this.s.aborted || this.phase !== 'Running') return;
      this.s.aborted = why || 'aborted';
      this.report();
    });
    setHandler(campaignMemberReportSignal, (r) => this.onReport(r));
    void sleep(Math.max(1, s.deadline - Date.now())).then(
      () => void (this.deadlinePassed = true),
      () => undefined,
    );
  }

  async run(): Promise<CampaignStatus> {
    this.report();
    for (;;) {
      if (this.shouldContinue()) return this.continue();
      if (this.stopping() || this.s.remaining.length === 0) break;
      if (!this.s.canaryDone) {
        const c = this.s.canary;
        if (c !== undefined) {
          const f = this.s.inflight[c];
          if (f && !f[2]) {
            await condition(() => !this.s.inflight[c] || this.s.inflight[c][2] === 1 || this.stopping() || this.shouldContinue());
            continue;
          }
          // It ended (the canary's turn is over) or it is away (the next cluster tries its turn; it is still probed).
          this.s.canary = undefined;
          if (!f) {
            this.s.canaryDone = true;
            continue;
          }
        }
        const turn = await this.turn();
        if (turn === 'again') continue;
        if (turn === 'stop') break;
        const next = this.s.remaining.shift()!;
        this.s.canary = next;
        await this.start(next, 0);
        continue;
      }
      // A pause before each wave (after the canary, and after each `parallel` started).
      if (this.s.inWave === 0 && this.input.pauseBetweenWavesSeconds > 0 && this.s.pausedBefore < this.s.wave + 1) {
        this.s.pauseUntil ??= Date.now() + this.input.pauseBetweenWavesSeconds * 1000;
        const until = this.s.pauseUntil;
        if (await condition(() => this.stopping() || this.shouldContinue(), Math.max(1, until - Date.now()))) continue;
        this.s.pausedBefore = this.s.wave + 1;
        this.s.pauseUntil = undefined;
      }
      const turn = await this.turn();
      if (turn === 'again') continue;
      if (turn === 'stop') break;
      if (this.running() >= this.input.parallel) {
        await condition(
          () =>
            this.running() < this.input.parallel ||
            this.stopping() ||
            this.s.paused !== undefined ||
            this.shouldContinue() ||
            this.deadlinePassed,
        );
        continue;
      }
      if (this.s.inWave === 0) this.s.wave++;
      this.s.inWave = (this.s.inWave + 1) % this.input.parallel;
      await this.start(this.s.remaining.shift()!, this.s.wave);
    }
    if (this.s.remaining.length > 0) this.skipRemaining();
    // Those in flight end by themselves (their step's end, the deadline) or as told (a stop, an abort).
    for (;;) {
      if (this.shouldContinue()) return this.continue();
      if (Object.keys(this.s.inflight).length === 0) break;
      if (this.stopping() && !this.s.told) {
        await this.tellBatch();
        continue;
      }
      if (!this.graceTimer) {
        this.graceTimer = true;
        void sleep(Math.max(1, this.s.deadline + REPORT_GRACE_MS - Date.now())).then(
          () => void (this.graceOver = true),
          () => undefined,
        );
      }
      await condition(
        () => Object.keys(this.s.inflight).length === 0 || (this.stopping() && !this.s.told) || this.shouldContinue() || this.graceOver,
      );
      if (this.graceOver) this.unreported();
    }
    this.phase = this.finalPhase();
    upsertSearchAttributes([{ key: MigrationPhase, value: this.phase }]);
    this.report();
    return this.status();
  }

  /** Waits while paused: 'go', 'stop' (stopped, aborted, past the deadline) or 'again' (the run is to continue as new). */
  private async turn(): Promise<'go' | 'stop' | 'again'> {
    if (this.s.paused && !this.stopping()) {
      this.report();
      await condition(() => !this.s.paused || this.stopping() || this.shouldContinue() || this.deadlinePassed);
      if (this.s.paused && this.shouldContinue()) return 'again';
    }
    return this.stopping() || this.deadlinePassed ? 'stop' : 'go';
  }

  private stopping(): boolean {
    return this.s.aborted !== undefined || this.s.stopped !== undefined;
  }

  private running(): number {
    let n = 0;
    for (const f of Object.values(this.s.inflight)) if (!f[2]) n++;
    return n;
  }

  private shouldContinue(): boolean {
    const info = workflowInfo();
    // Never below 100 events: a run must get past its own start before it continues as new again.
    return info.continueAsNewSuggested || info.historyLength >= Math.max(100, this.limits.campaignHistoryEvents ?? CAMPAIGN_HISTORY_EVENTS);
  }

  private async continue(): Promise<CampaignStatus> {
    await condition(allHandlersFinished);
    const carry: CampaignCarry = { limits: this.limits, state: this.s };
    return continueAsNew<typeof windowedCampaign>(this.input, carry);
  }

  /** Starts a cluster's member (ABANDON: it outlives this run). One that cannot start is a failed row. */
  private async start(cluster: string, wave: number): Promise<void> {
    this.s.inflight[cluster] = [wave, Date.now(), 0, 0];
    const input: CampaignMemberInput = {
      campaign: this.name,
      campaignWorkflowId: workflowInfo().workflowId,
      campaignRun: this.s.runId,
      cluster,
      wave,
      step: {
        migrate: this.input.migrate,
        parallelism: this.input.parallelism,
        ...(this.input.dropCheck ? { dropCheck: this.input.dropCheck } : {}),
        ...(this.input.dropCheckWindowSeconds !== undefined ? { dropCheckWindowSeconds: this.input.dropCheckWindowSeconds } : {}),
      },
      unreachableAfterSeconds: this.input.unreachableAfterSeconds,
      deadline: this.s.deadline,
      ...(Object.keys(this.limits).length > 0 ? { limits: this.limits } : {}),
    };
    const row: CampaignRow = { ...emptyRow(cluster), wave };
    try {
      await startChild<typeof campaignMember>(CAMPAIGN_MEMBER_WORKFLOW_TYPE, {
        workflowId: campaignMemberId(this.name, cluster),
        args: [input],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // The cluster's attribute as its placement gives it; the campaign's name and the row's phase besides.
        typedSearchAttributes: [
          ...Placement.of(this.base, cluster).attributes,
          { key: MigrationCampaign, value: this.name },
          { key: MigrationPhase, value: 'Pending' },
        ],
        memo: { row, campaignRun: this.s.runId },
        staticSummary: `Campaign ${this.name} in cluster ${cluster}`,
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      this.onReport({
        cluster,
        campaignRun: this.s.runId,
        event: 'ended',
        row: { ...row, phase: 'Failed', note: `its member could not start: ${rootMessage(err)}` },
      });
    }
    this.report();
  }

  private onReport(r: MemberReport): void {
    if (r.campaignRun !== this.s.runId) return;
    const f = this.s.inflight[r.cluster];
    if (!f) return;
    if (r.event === 'away') f[2] = 1;
    else if (r.event === 'back') f[2] = 0;
    else {
      delete this.s.inflight[r.cluster];
      const row = r.row ? compactRow(r.row) : { ...emptyRow(r.cluster), note: 'its member ended without a row' };
      this.s.ended[row.phase]++;
      if (row.phase === 'Failed') this.failed(row);
      this.checkFailures();
    }
    this.report();
  }

  private failed(row: CampaignRow): void {
    if (this.s.failures.length >= CAMPAIGN_FAILURES_KEPT) {
      this.s.failuresLeftOff++;
      return;
    }
    const failures = row.failures
      .slice(0, CAMPAIGN_FAILURE_DETAIL)
      .map((f) => ({ resource: f.resource.slice(0, 200), reason: f.reason.slice(0, 200) }));
    this.s.failures.push({
      cluster: row.cluster,
      ...(row.note ? { note: row.note.slice(0, 500) } : {}),
      failures,
      ...(row.failures.length > failures.length ? { more: row.failures.length - failures.length } : {}),
    });
  }

  /** Stops the campaign on the first failure, or once failures exceed maxFailureRatio of the clusters ended. */
  private checkFailures(): void {
    if (this.stopping()) return;
    const failed = this.s.ended.Failed;
    if (failed === 0) return;
    const ended = failed + this.s.ended.Succeeded;
    const ratio = this.input.maxFailureRatio;
    if (ratio !== undefined && failed / ended <= ratio) return;
    const named = this.s.failures.slice(0, 10).map((f) => f.cluster);
    this.s.stopped =
      ratio === undefined
        ? `stopped on the first failure (${named.join(', ')})`
        : `stopped: ${failed} of ${ended} clusters ended failed, more than ${ratio}`;
  }

  private skipRemaining(): void {
    const note = this.s.aborted
      ? `not started: the campaign was aborted (${this.s.aborted})`
      : `not started: ${this.s.stopped ?? (this.deadlinePassed ? 'the deadline passed' : 'the campaign stopped')}`;
    const named = this.s.remaining.slice(0, CAMPAIGN_SKIPPED_NAMED);
    this.s.skipped = { clusters: named, leftOff: this.s.remaining.length - named.length, note };
    this.s.ended.Skipped += this.s.remaining.length;
    this.s.remaining = [];
    this.report();
  }

  /** Tells a batch of the members in flight of the stop (give up) or abort (cancel); all told, `told` is set. */
  private async tellBatch(): Promise<void> {
    const batch = Object.entries(this.s.inflight)
      .filter(([, f]) => !f[3])
      .slice(0, TELL_BATCH);
    await Promise.all(
      batch.map(async ([cluster, f]) => {
        f[3] = 1;
        const member = getExternalWorkflowHandle(campaignMemberId(this.name, cluster));
        try {
          if (this.s.aborted) await member.cancel();
          else await member.signal(memberGiveUpSignal, 'the campaign stopped');
        } catch (err) {
          if (isCancellation(err)) throw err;
          // It has ended already: its report is on its way.
        }
      }),
    );
    if (Object.values(this.s.inflight).every((f) => f[3])) this.s.told = true;
  }

  /** Past the deadline and its grace: members that never reported are counted as they stood. */
  private unreported(): void {
    for (const [cluster, f] of Object.entries(this.s.inflight)) {
      delete this.s.inflight[cluster];
      this.s.ended[phaseOf(f)]++;
      if (this.s.failures.length < CAMPAIGN_FAILURES_KEPT)
        this.s.failures.push({ cluster, note: `its member did not report by the deadline (it stood ${phaseOf(f)})`, failures: [] });
      else this.s.failuresLeftOff++;
    }
  }

  private finalPhase(): CampaignPhase {
    if (this.s.aborted) return 'Aborted';
    if (this.s.stopped) return 'Stopped';
    const e = this.s.ended;
    if (e.Pending + e.Running + e.Unreachable > 0) return 'DeadlineExceeded';
    return e.Failed > 0 ? 'Failed' : 'Succeeded';
  }

  status(): CampaignStatus {
    const phase = this.phase === 'Running' && this.s.paused && !this.stopping() ? 'Paused' : this.phase;
    return campaignStatusOf(this.name, phase, this.s);
  }

  private report(): void {
    const s = this.status();
    const c = s.counts!;
    setCurrentDetails(
      [
        `**campaign ${s.name}**: ${s.phase}, wave ${s.wave}${s.message ? ` (${s.message})` : ''}`,
        '',
        `${c.clusters} clusters: ${c.Succeeded} succeeded, ${c.Failed} failed, ${c.Running} running, ${c.Unreachable} unreachable, ${c.Pending} pending, ${c.Skipped} skipped, ${c.Aborted} aborted`,
        '',
        '| in flight | phase | wave | since |',
        '|---|---|---|---|',
        ...(s.inflight ?? []).slice(0, 50).map((f) => `| ${f.cluster} | ${f.phase} | ${f.wave} | ${f.since ?? ''} |`),
        '',
        ...(s.failures ?? []).slice(0, 20).map((f) => `- ${f.cluster} failed: ${f.note ?? ''}`),
        `(each cluster's row: the workflows with MigrationCampaign = '${s.name}', or svm fleet status ${s.name})`,
      ].join('\n'),
    );
  }
}
