/**
 * The fleet's programmatic API (docs/fleet.md): the clusters registered in Temporal, and campaigns across them.
 * Only Temporal is needed: each cluster's worker does the cluster's work.
 *
 *   const fleet = await Fleet.connect();
 *   const c = await fleet.startCampaign('to-1.37', { where: "MigrationKubeVersions = 'v1.36.3'", migrate: 'all' });
 *   const table = await c.result();
 */
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type Client,
  type Connection,
  type WorkflowHandle,
} from '@temporalio/client';
import { fleetTaskQueue } from '../api/cluster';
import { CAMPAIGN_NAME_PATTERN, CAMPAIGN_NAME_RULE } from '../api/cluster-name';
import {
  campaignAbortSignal,
  CampaignInputSchema,
  campaignPauseSignal,
  campaignResumeSignal,
  campaignStatusQuery,
  campaignWorkflowId,
  CAMPAIGN_WORKFLOW_TYPE,
  CLUSTER_REGISTRATION_WORKFLOW_TYPE,
  clusterRegistrationId,
  type CampaignInput,
  type CampaignStatus,
  type IdentityConflict,
  type RegistrationMemo,
} from '../contract/fleet';
import { forget, pinOf, repin, type Pin, type Repin } from '../kube/cluster-identity';
import { explainInput } from '../contract/definitions';
import { MigrationKubeVersions, MigrationLastSeen, MigrationPhase } from '../contract/search-attributes';
import { connectTemporal, type TemporalTarget } from './connect';
import type { fleetCampaign } from '../workflows/campaign';

export type { CampaignInput, CampaignRow, CampaignStatus, ClusterPhase, CampaignPhase } from '../contract/fleet';

/** A registered cluster, as its registration in Temporal holds it (its workers' last report). */
export interface RegisteredCluster {
  name: string;
  /** The uid of its kube-system namespace. */
  uid?: string;
  /** Each API server and its Kubernetes version. */
  servers: Array<{ server: string; version: string }>;
  kubeVersions: string[];
  svmVersion?: string;
  lastSeen?: string;
  /** Its identity's open conflict: a worker of this name reached another cluster (svm fleet pin resolves it). */
  conflict?: IdentityConflict;
}

export class CampaignHandle {
  constructor(
    readonly name: string,
    readonly workflow: WorkflowHandle<typeof fleetCampaign>,
  ) {}

  /** The table now: the query while it runs, its result once ended (an ended campaign needs no worker). */
  async status(): Promise<CampaignStatus> {
    const d = await this.describe();
    if (d.status.name === 'RUNNING') return this.workflow.query(campaignStatusQuery);
    if (d.status.name === 'COMPLETED') return this.workflow.result();
    return {
      name: this.name,
      phase: 'Aborted',
      wave: 0,
      rows: [],
      message: `the campaign's workflow ended ${d.status.name.toLowerCase()}${d.status.name === 'FAILED' ? `: ${await this.failure()}` : ''}`,
    };
  }

  /** The table once the campaign has ended. */
  result(): Promise<CampaignStatus> {
    return this.workflow.result();
  }

  /** Holds back the clusters not started. A signal: taken once the fleet's worker runs, if it does not now. */
  async pause(reason?: string): Promise<void> {
    await this.running();
    await this.workflow.signal(campaignPauseSignal, reason);
  }

  async resume(): Promise<void> {
    await this.running();
    await this.workflow.signal(campaignResumeSignal);
  }

  /** Cancels every cluster's step (their migrations end Aborted) and skips the clusters not started. */
  async abort(reason?: string): Promise<void> {
    await this.running();
    await this.workflow.signal(campaignAbortSignal, reason);
  }

  /** Refuses, in a sentence, to signal a campaign that does not exist or has ended (Temporal's describe: no worker needed). */
  private async running(): Promise<void> {
    const d = await this.describe();
    if (d.status.name !== 'RUNNING')
      throw new Error(`campaign "${this.name}" has ended (${d.status.name.toLowerCase()}): svm fleet status ${this.name}`);
  }

  /** The campaign's workflow as Temporal describes it; one that does not exist is said in a sentence. */
  private describe() {
    return this.workflow.describe().catch((err: unknown) => {
      throw err instanceof WorkflowNotFoundError ? new Error(`no campaign "${this.name}" (workflow ${this.workflow.workflowId})`) : err;
    });
  }

  private async failure(): Promise<string> {
    try {
      await this.workflow.result();
      return 'no failure recorded';
    } catch (err) {
      let e: unknown = err;
      while (e instanceof Error && e.cause instanceof Error) e = e.cause;
      return e instanceof Error ? e.message : String(e);
    }
  }
}

export class Fleet {
  private constructor(
    readonly client: Client,
    /** The fleet task queue: campaigns and registrations run there. */
    readonly taskQueue: string,
    private readonly connection: Connection,
  ) {}

  static async connect(opts: { temporal?: TemporalTarget } = {}): Promise<Fleet> {
    const { client, connection, settings } = await connectTemporal(opts.temporal);
    return new Fleet(client, fleetTaskQueue(settings.taskQueue), connection);
  }

  async close(): Promise<void> {
    await this.connection.close();
  }

  /**
   * Starts a campaign (fleetCampaign, `svm-campaign/<name>` on the fleet task queue). The input is checked here
   * first, as the workflow checks it; a campaign of that name already running is refused, not joined.
   */
  async startCampaign(name: string, input: CampaignInput): Promise<CampaignHandle> {
    if (!CAMPAIGN_NAME_PATTERN.test(name)) throw new RangeError(`campaign "${name}": ${CAMPAIGN_NAME_RULE}`);
    const parsed = CampaignInputSchema.safeParse(input);
    if (!parsed.success) throw new RangeError(`invalid campaign: ${explainInput(parsed.error)}`);
    try {
      const h = await this.client.workflow.start<typeof fleetCampaign>(CAMPAIGN_WORKFLOW_TYPE, {
        workflowId: campaignWorkflowId(name),
        taskQueue: this.taskQueue,
        args: [input],
        typedSearchAttributes: [{ key: MigrationPhase, value: 'Running' }],
        staticSummary: `Campaign ${name}`,
      });
      return new CampaignHandle(name, h);
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError)
        throw new Error(`a campaign "${name}" is already running (svm fleet status ${name})`);
      throw err;
    }
  }

  campaign(name: string): CampaignHandle {
    return new CampaignHandle(name, this.client.workflow.getHandle<typeof fleetCampaign>(campaignWorkflowId(name)));
  }

  /** The registered clusters (sorted by name), those whose registration matches `where` when given. */
  async clusters(where?: string): Promise<RegisteredCluster[]> {
    const prefix = clusterRegistrationId('');
    const clusters: RegisteredCluster[] = [];
    // The running run of each registration holds its latest report (a closed one is an earlier run, continued as new).
    const query = `WorkflowType = '${CLUSTER_REGISTRATION_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'${where ? ` AND (${where})` : ''}`;
    for await (const w of this.client.workflow.list({ query })) {
      if (!w.workflowId.startsWith(prefix)) continue;
      const memo = (w.memo ?? {}) as RegistrationMemo;
      const seen = w.typedSearchAttributes.get(MigrationLastSeen);
      clusters.push({
        name: w.workflowId.slice(prefix.length),
        ...(memo.uid ? { uid: memo.uid } : {}),
        servers: memo.servers ?? [],
        kubeVersions: w.typedSearchAttributes.get(MigrationKubeVersions) ?? [],
        ...(memo.svmVersion ? { svmVersion: memo.svmVersion } : {}),
        ...(seen ? { lastSeen: seen.toISOString() } : memo.seenAt ? { lastSeen: memo.seenAt } : {}),
        ...(memo.conflict ? { conflict: memo.conflict } : {}),
      });
    }
    return clusters.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** A cluster's pin: the uid pinned to its name and its open conflict; undefined when it is not registered. */
  pinOf(name: string): Promise<Pin | undefined> {
    return pinOf(this.client, name);
  }

  /** The operator's act: pins `name` to `uid` (a cluster recreated under its name, or a conflict resolved). */
  pin(name: string, uid: string, by = 'svm fleet pin'): Promise<Repin> {
    return repin(this.client, this.taskQueue, name, uid, by);
  }

  /** The operator's act for a decommissioned cluster: its registration and its uid's pin end. What it held, or undefined. */
  forget(name: string, by = 'svm fleet forget'): Promise<Pin | undefined> {
    return forget(this.client, name, by);
  }

  /**
   * The campaign's table with each row's verdict checked against the uid pinned to its cluster now: a row made
   * against another uid (or whose cluster's identity is in conflict) does not count; its phase becomes Refused's
   * reason in its note, and `refused` names those rows. Rows from before verdicts carried a uid are left as they are.
   */
  async checkedStatus(s: CampaignStatus): Promise<{ status: CampaignStatus; refused: string[] }> {
    const refused: string[] = [];
    const rows = await Promise.all(
      s.rows.map(async (r) => {
        if (!r.uid || !['Succeeded', 'Failed'].includes(r.phase)) return r;
        const pin = await pinOf(this.client, r.cluster);
        const why = pin?.conflict
          ? `its identity is in conflict now (${pin.conflict.message})`
          : pin?.uid && pin.uid !== r.uid
            ? `its verdict was made against kube-system uid ${r.uid}, but ${r.cluster} is pinned to ${pin.uid} now`
            : undefined;
        if (!why) return r;
        refused.push(r.cluster);
        return { ...r, note: `NOT COUNTED: ${why}${r.note ? `; ${r.note}` : ''}` };
      }),
    );
    return { status: { ...s, rows }, refused };
  }
}
