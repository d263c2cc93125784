/**
 * A campaign across clusters (docs/fleet.md): one workflow, `svm-campaign/<name>` on the fleet task queue, that
 * migrates a set of clusters in waves. The canary goes first, alone; then waves of at most `parallel` clusters, with
 * an optional pause between them; it stops on the first failure, or once failures exceed a ratio of the clusters
 * ended. In each cluster a step (clusterCampaignStep, a child on that cluster's task queue, run by its worker)
 * migrates what it is asked and, where asked, checks drop readiness.
 *
 * A cluster whose worker takes no task within unreachableAfterSeconds (a probe: the clusterIdentity activity with
 * that schedule-to-start timeout) is reported Unreachable and leaves its wave, which goes on without it; it is
 * probed again until the deadline, each probe waiting in its queue twice as long as the one before (at most an hour),
 * so that it is taken the moment its worker is back, and goes on (its step started, or continued: a step waits in
 * Temporal while its worker is away) once it answers. A cluster whose step runs is not probed: its step's end says. Pause holds back clusters not started; resume lets them go; abort
 * cancels every step (their migrations end Aborted) and skips the rest. The table is the result, the
 * campaignStatus query while it runs, and the workflow's current details in the UI.
 *
 * The campaign asks Temporal for at most `parallel` steps at once (plus those coming back from Unreachable), and
 * each cluster's load stays its own: its worker's budget, adaptive rate and API Priority and Fairness objects.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  deprecatePatch,
  isCancellation,
  ParentClosePolicy,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { fleetBaseQueue, WRONG_CLUSTER } from '../api/cluster';
import { Placement } from '../contract/placement';
import { explainInput } from '../contract/definitions';
import {
  campaignAbortSignal,
  CampaignInputSchema,
  campaignPauseSignal,
  campaignResumeSignal,
  campaignStatusQuery,
  CAMPAIGN_STEP_WORKFLOW_TYPE,
  type CampaignInput,
  type CampaignPhase,
  type CampaignRow,
  type CampaignSettings,
  type CampaignStatus,
  type CampaignStepInput,
  type CampaignStepResult,
} from '../contract/fleet';
import { MigrationPhase } from '../contract/search-attributes';
import type { CampaignCluster } from '../activities/fleet';
import { failureType, rootMessage } from './failures';
import { neverStarted } from './task-start';
import type { clusterCampaignStep } from './campaign-step';
import { INVALID_INPUT, NOT_ENABLED } from '../contract/reasons';

interface FleetActivities {
  resolveCampaignClusters(input: { clusters?: string[]; where?: string }): Promise<CampaignCluster[]>;
}
interface ProbeActivities {
  clusterIdentity(asked?: { name: string }): Promise<{ name?: string; uid: string }>;
}

type Life = 'waiting' | 'active' | 'away' | 'done';

interface Member {
  c: CampaignCluster;
  row: CampaignRow;
  life: Life;
  scope?: CancellationScope;
}

const ENDED = new Set(['Succeeded', 'Failed', 'Aborted', 'Skipped']);

export async function fleetCampaign(raw: CampaignInput): Promise<CampaignStatus> {
  const parsed = CampaignInputSchema.safeParse(raw);
  if (!parsed.success)
    throw ApplicationFailure.create({
      type: INVALID_INPUT,
      message: `invalid campaign: ${explainInput(parsed.error)}`,
      nonRetryable: true,
    });
  const input = parsed.data;
  const id = workflowInfo().workflowId;
  const campaign = new Campaign(id.startsWith('svm-campaign/') ? id.slice('svm-campaign/'.length) : id, input);
  campaign.listen();
  const { resolveCampaignClusters } = proxyActivities<FleetActivities>({
    startToCloseTimeout: '2 minutes',
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: [INVALID_INPUT, NOT_ENABLED] },
  });
  const clusters = await resolveCampaignClusters({ clusters: input.clusters, where: input.where });
  if (clusters.length === 0)
    throw ApplicationFailure.create({
      type: INVALID_INPUT,
      message: 'the campaign names no cluster (its query matched none)',
      nonRetryable: true,
    });
  if (input.canary && !clusters.some((c) => c.name === input.canary))
    throw ApplicationFailure.create({
      type: INVALID_INPUT,
      message: `the canary ${input.canary} is not one of the campaign's clusters`,
      nonRetryable: true,
    });
  return campaign.run(clusters);
}

class Campaign {
  private readonly members: Member[] = [];
  private phase: CampaignPhase = 'Running';
  private wave = 0;
  private paused?: string;
  private aborted?: string;
  private message?: string;
  private readonly deadline: number;
  /** Past the deadline, or stopped: the clusters still away or running are reported as they are. */
  private givenUp = false;
  private readonly base = fleetBaseQueue(workflowInfo().taskQueue);

  constructor(
    private readonly name: string,
    private readonly input: CampaignSettings,
  ) {
    this.deadline = Date.now() + input.deadlineSeconds * 1000;
  }

  listen(): void {
    setHandler(campaignStatusQuery, () => this.status());
    setHandler(campaignPauseSignal, (why) => {
      if (this.aborted || this.ended()) return;
      this.paused = why || 'paused';
      this.report();
    });
    setHandler(campaignResumeSignal, () => {
      this.paused = undefined;
      this.report();
    });
    setHandler(campaignAbortSignal, (why) => {
      if (this.aborted || this.ended()) return;
      this.aborted = why || 'aborted';
      for (const m of this.members) m.scope?.cancel();
      this.report();
    });
  }

  async run(clusters: CampaignCluster[]): Promise<CampaignStatus> {
    const order = this.input.canary
      ? [...clusters.filter((c) => c.name === this.input.canary), ...clusters.filter((c) => c.name !== this.input.canary)]
      : clusters;
    for (const c of order) this.members.push({ c, life: 'waiting', row: emptyRow(c.name) });
    upsertSearchAttributes([{ key: MigrationPhase, value: 'Running' }]);
    this.report();
    const pending = [...this.members];
    // The canary: the first cluster that answers, alone. One that does not is left to come back later.
    while (pending.length > 0 && !this.stopping()) {
      const m = pending.shift()!;
      if (!(await this.turn())) break;
      this.begin(m, 0);
      await condition(() => m.life === 'done' || m.life === 'away');
      if (m.life === 'done') break;
    }
    this.checkFailures();
    // The waves: at most `parallel` at once, each waiting for its members to end or leave as unreachable.
    while (pending.length > 0 && !this.stopping()) {
      if (this.input.pauseBetweenWavesSeconds > 0) await this.sleepUntil(Date.now() + this.input.pauseBetweenWavesSeconds * 1000);
      if (!(await this.turn())) break;
      this.wave++;
      const wave = pending.splice(0, this.input.parallel);
      for (const m of wave) this.begin(m, this.wave);
      await condition(() => wave.every((m) => m.life === 'done' || m.life === 'away'));
      this.checkFailures();
    }
    for (const m of pending)
      this.skip(
        m,
        this.aborted ? `not started: the campaign was aborted (${this.aborted})` : `not started: ${this.message ?? 'the campaign stopped'}`,
      );
    // Those unreachable come back until the deadline (once the campaign stopped, they are reported as they are).
    const settled = () => this.members.every((m) => m.life === 'done' || m.life === 'waiting');
    if (!this.stopping()) await condition(settled, Math.max(0, this.deadline - Date.now()));
    // The rest are given up on (their steps go on, and finish once their workers are back).
    this.givenUp = true;
    await condition(settled);
    this.phase = this.finalPhase();
    upsertSearchAttributes([{ key: MigrationPhase, value: this.phase }]);
    this.report();
    return this.status();
  }

  /** Waits while paused; false once aborted, stopped or past the deadline (nothing more starts). */
  private async turn(): Promise<boolean> {
    if (this.paused) {
      this.report();
      await condition(() => !this.paused || this.aborted !== undefined, Math.max(0, this.deadline - Date.now()));
    }
    return !this.stopping() && Date.now() < this.deadline;
  }

  private stopping(): boolean {
    return this.aborted !== undefined || this.phase === 'Stopped';
  }

  private ended(): boolean {
    return !['Running', 'Paused'].includes(this.phase);
  }

  /** Stops the campaign on the first failure, or once failures exceed maxFailureRatio of the clusters ended. */
  private checkFailures(): void {
    const ended = this.members.filter((m) => m.row.phase === 'Succeeded' || m.row.phase === 'Failed');
    const failed = ended.filter((m) => m.row.phase === 'Failed');
    if (failed.length === 0) return;
    const ratio = this.input.maxFailureRatio;
    if (ratio !== undefined && failed.length / ended.length <= ratio) return;
    this.phase = 'Stopped';
    this.message =
      ratio === undefined
        ? `stopped on the first failure (${failed.map((m) => m.c.name).join(', ')})`
        : `stopped: ${failed.length} of ${ended.length} clusters ended failed, more than ${ratio}`;
    this.report();
  }

  private begin(m: Member, wave: number): void {
    m.row.wave = wave;
    m.life = 'active';
    m.scope = new CancellationScope();
    void m.scope
      .run(() => this.life(m))
      .catch((err: unknown) => {
        this.end(
          m,
          isCancellation(err) ? 'Aborted' : 'Failed',
          isCancellation(err) ? `aborted: ${this.aborted ?? 'cancelled'}` : rootMessage(err),
        );
      });
  }

  /** One cluster, from its first probe to its step's end (or until the campaign gives up on it). */
  private async life(m: Member): Promise<void> {
    // A cluster whose identity is in conflict gets nothing started: its worker would refuse it anyway.
    if (m.c.conflict) return this.end(m, 'Failed', `its identity is in conflict: ${m.c.conflict}`);
    let step: ChildWorkflowHandle<typeof clusterCampaignStep> | undefined;
    let result: CampaignStepResult | undefined;
    let failed: unknown;
    const every = this.input.unreachableAfterSeconds * 1000;
    // Bounded history: a cluster away is asked again by a probe that waits in its queue longer each time (taken the
    // moment its worker is back), and one whose step runs is not probed: the step's end reports it.
    // Folded at 0.2.0: deprecatePatch for one release (docs/development.md, "The patch ledger").
    deprecatePatch('campaign-probe-backoff');
    // A long probe does not hold the campaign past its deadline or its stop: it is left behind, as when it times out.
    const givenUp = condition(() => this.givenUp).then(() => 'given-up' as const);
    let misses = 0;
    for (;;) {
      const probe = await Promise.race([
        this.probe(m, Math.min(probeWait(every, misses), Math.max(1, this.deadline - Date.now()))),
        givenUp,
      ]);
      if (typeof probe === 'object') return this.end(m, 'Failed', probe.wrong);
      if (probe === 'given-up') {
        // nothing learnt: reported below as it stands
      } else if (probe !== 'ok') {
        this.away(m, probe);
        misses++;
      } else {
        misses = 0;
        if (this.stopping() && !step) return this.skip(m, `not started: ${this.message ?? 'the campaign stopped'}`);
        this.reachable(m);
        if (!step) {
          step = await this.startStep(m);
          step.result().then(
            (r) => void (result = r),
            (err: unknown) => void (failed = err ?? new Error('the step failed')),
          );
        }
      }
      // Until the step ends, the next probe is due, or the campaign gives up. A probe no worker took has waited already.
      const settled = () => result !== undefined || failed !== undefined || this.givenUp;
      if (probe === 'given-up') {
        // the campaign gave up while the probe waited: nothing to wait for
      } else if (probe === 'ok' && step) await condition(settled);
      else if (probe === 'error') await condition(settled, Math.min(probeWait(every, misses), Math.max(1, this.deadline - Date.now())));
      if (result) return this.succeeded(m, result);
      if (failed) {
        if (isCancellation(failed)) throw failed;
        return this.end(m, 'Failed', `its step failed: ${rootMessage(failed)}`);
      }
      if (this.givenUp) {
        m.row.note = `${m.row.note ?? m.row.phase}; ${this.stopping() ? 'the campaign stopped' : 'the deadline passed'}${step ? ' (its step goes on, and ends once its worker is back)' : ''}`;
        m.life = 'done';
        this.report();
        return;
      }
    }
  }

  private reachable(m: Member): void {
    m.life = 'active';
    m.row.reachable = true;
    m.row.phase = 'Running';
    m.row.note = undefined;
    m.row.startedAt ??= new Date(Date.now()).toISOString();
    this.report();
  }

  /** Where a member's step and probe run: its cluster, with the uid its registration or its probe gave. */
  private placement(m: Member): Placement {
    return Placement.of(this.base, m.c);
  }

  /** The cluster's step: a child on its task queue, with the uid its registration or its probe gave. */
  private startStep(m: Member): Promise<ChildWorkflowHandle<typeof clusterCampaignStep>> {
    const step = this.placement(m).child({
      type: CAMPAIGN_STEP_WORKFLOW_TYPE,
      id: `svm-campaign/${this.name}`,
      input: {
        migrate: this.input.migrate,
        parallelism: this.input.parallelism,
        ...(this.input.dropCheck ? { dropCheck: this.input.dropCheck } : {}),
        ...(this.input.dropCheckWindowSeconds !== undefined ? { dropCheckWindowSeconds: this.input.dropCheckWindowSeconds } : {}),
      },
      summary: `Campaign ${this.name}`,
    });
    return startChild<typeof clusterCampaignStep>(CAMPAIGN_STEP_WORKFLOW_TYPE, {
      ...step,
      args: step.args as [CampaignStepInput], // a named placement: the cluster is there
      // A step goes on if the campaign ends (stopped, past its deadline): its migrations finish once its worker is back.
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  }

  /** Asks the cluster's worker who it is: unreachable when no worker takes the probe within waitMs. */
  private async probe(m: Member, waitMs: number): Promise<'ok' | 'unreachable' | 'error' | { wrong: string }> {
    const { clusterIdentity } = proxyActivities<ProbeActivities>({
      taskQueue: this.placement(m).taskQueue,
      scheduleToStartTimeout: waitMs,
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 1 },
    });
    try {
      const who = await clusterIdentity({ name: m.c.name });
      if (who.name !== m.c.name)
        return { wrong: `the worker on ${m.c.name}'s task queue serves ${who.name ? `cluster "${who.name}"` : 'no named cluster'}` };
      if (m.c.uid && who.uid !== m.c.uid)
        return {
          wrong: `cluster ${m.c.name} answers with kube-system uid ${who.uid}, not the ${m.c.uid} it registered: not the same cluster`,
        };
      m.c.uid ??= who.uid;
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

  private away(m: Member, why: 'unreachable' | 'error'): void {
    if (m.life !== 'away')
      m.row.note = `${why === 'unreachable' ? `no worker took a task in ${this.input.unreachableAfterSeconds}s` : 'its worker could not read its API'} (since ${new Date(Date.now()).toISOString()})`;
    m.life = 'away';
    m.row.reachable = false;
    m.row.phase = 'Unreachable';
    this.report();
  }

  private succeeded(m: Member, r: CampaignStepResult): void {
    // The verdict counts only against the uid pinned to the cluster (the one the campaign gave its step).
    if (r.clusterUid) m.row.uid = r.clusterUid;
    if (m.c.uid && r.clusterUid !== m.c.uid)
      return this.end(
        m,
        'Failed',
        `its step's verdict was made against kube-system uid ${r.clusterUid ?? '(none recorded)'}, not ${m.c.uid}, the uid pinned to ${m.c.name}: it does not count`,
      );
    m.row.resources = r.resources;
    m.row.objects = r.objects;
    m.row.failures = r.failures;
    if (r.drop) m.row.drop = r.drop;
    // A drop verdict other than Ready is a finding, not a failure of the cluster's migrations: the row says it.
    const notReady = r.drop && r.drop.verdict !== 'Ready' ? `drop check: ${r.drop.verdict}` : undefined;
    this.end(
      m,
      r.failures.length === 0 ? 'Succeeded' : 'Failed',
      r.failures.length > 0 ? `${r.failures.length} migration(s) did not succeed` : notReady,
    );
  }

  private end(m: Member, phase: CampaignRow['phase'], note?: string): void {
    m.row.phase = phase;
    m.row.note = note;
    m.row.endedAt = new Date(Date.now()).toISOString();
    m.life = 'done';
    this.report();
  }

  private skip(m: Member, note: string): void {
    m.row.phase = 'Skipped';
    m.row.note = note;
    m.life = 'done';
  }

  private async sleepUntil(at: number): Promise<void> {
    await condition(() => this.aborted !== undefined, Math.max(0, at - Date.now()));
  }

  private finalPhase(): CampaignPhase {
    if (this.aborted) return 'Aborted';
    if (this.phase === 'Stopped') return 'Stopped';
    if (this.members.some((m) => !ENDED.has(m.row.phase))) return 'DeadlineExceeded';
    return this.members.some((m) => m.row.phase === 'Failed') ? 'Failed' : 'Succeeded';
  }

  status(): CampaignStatus {
    const phase = this.phase === 'Running' && this.paused ? 'Paused' : this.phase;
    return {
      name: this.name,
      phase,
      wave: this.wave,
      rows: this.members.map((m) => ({ ...m.row, failures: [...m.row.failures] })),
      ...(this.message || this.aborted ? { message: this.aborted ? `aborted: ${this.aborted}` : this.message } : {}),
    };
  }

  private report(): void {
    const s = this.status();
    setCurrentDetails(
      [
        `**campaign ${s.name}**: ${s.phase}, wave ${s.wave}${s.message ? ` (${s.message})` : ''}`,
        '',
        '| cluster | phase | wave | resources | objects | drop | note |',
        '|---|---|---|---|---|---|---|',
        ...s.rows.map(
          (r) =>
            `| ${r.cluster} | ${r.phase} | ${r.wave ?? ''} | ${r.resources.succeeded}/${r.resources.asked} | ${r.objects} | ${r.drop?.verdict ?? ''} | ${r.note ?? ''} |`,
        ),
      ].join('\n'),
    );
  }
}

function emptyRow(cluster: string): CampaignRow {
  return { cluster, phase: 'Pending', reachable: false, resources: { asked: 0, succeeded: 0 }, objects: 0, failures: [] };
}

/** The longest a probe waits in an away cluster's queue: an hour, or unreachableAfterSeconds when that is longer. */
const PROBE_WAIT_CAP_MS = 3_600_000;

/** How long the probe after `misses` unanswered ones waits: unreachableAfterSeconds, doubled each miss, capped. */
export function probeWait(everyMs: number, misses: number): number {
  return Math.min(everyMs * 2 ** Math.min(misses, 30), Math.max(everyMs, PROBE_WAIT_CAP_MS));
}
