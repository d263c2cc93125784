/**
 * The fleet's programmatic API (docs/fleet.md): the clusters registered in Temporal, and campaigns across them.
 * Only Temporal is needed: each cluster's worker does the cluster's work.
 *
 * With trust domains (docs/fleet.md "Trust domains": the file SVM_FLEET_DOMAINS names, given to connect), the
 * client is the fleet namespace's (campaigns start and are read there) and each cluster's registration, pin and
 * identity are read and acted on in its domain's namespace, through a client of that domain; a registration of a
 * name outside the domain the file binds it to is not listed. Without the file: one namespace, as before.
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
import { FleetDomains, FLEET_DOMAINS_ENV, type Domain } from '../config/fleet-domains';
import { CAMPAIGN_NAME_PATTERN, CAMPAIGN_NAME_RULE } from '../api/cluster-name';
import {
  campaignAbortSignal,
  CampaignInputSchema,
  campaignPauseSignal,
  campaignResumeSignal,
  campaignStatusQuery,
  campaignWorkflowId,
  CAMPAIGN_MEMBER_WORKFLOW_TYPE,
  CAMPAIGN_WORKFLOW_TYPE,
  CLUSTER_REGISTRATION_WORKFLOW_TYPE,
  clusterRegistrationId,
  type CampaignInput,
  type CampaignRow,
  type CampaignStatus,
  type IdentityConflict,
  type RegistrationMemo,
} from '../contract/fleet';
import { forget, pinOf, repin, type Pin, type Repin } from '../kube/cluster-identity';
import { explainInput } from '../contract/definitions';
import { MigrationCampaign, MigrationKubeVersions, MigrationLastSeen, MigrationPhase } from '../contract/search-attributes';
import { connectTemporal, type TemporalTarget } from './connect';
import { loadTemporalSettings, TemporalSettings as TemporalSettingsSchema } from '../config/temporal';
import type { fleetCampaign } from '../workflows/campaign';
import type { windowedCampaign } from '../workflows/campaign-window';

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
  /** With trust domains: the domain it is bound to, whose namespace holds the registration read. */
  domain?: string;
}

/** Members' rows per page of the visibility list: each memo at most ~20 KiB (MEMBER_MEMO_FAILURES), a page well under gRPC's 4 MiB. */
export const ROWS_PAGE = 100;

/** The phases a campaign ends in. */
const CAMPAIGN_ENDED = new Set(['Succeeded', 'Failed', 'Stopped', 'Aborted', 'DeadlineExceeded']);

export class CampaignHandle {
  constructor(
    readonly name: string,
    readonly workflow: WorkflowHandle<typeof windowedCampaign> | WorkflowHandle<typeof fleetCampaign>,
    private readonly client?: Client,
  ) {}

  /**
   * The table now, with a row per cluster started: a windowed campaign's summary (the query while it runs, its
   * result once ended: an ended campaign needs no worker) and its members' rows, paged from visibility; a legacy
   * campaign's table as it is.
   */
  async status(): Promise<CampaignStatus> {
    const s = await this.summary();
    return s.runId ? { ...s, rows: await this.rows(s) } : s;
  }

  /** The campaign's own status, without its members' rows (a windowed one's counts, failures and clusters in flight). */
  async summary(): Promise<CampaignStatus> {
    const d = await this.describe();
    if (d.status.name === 'RUNNING') return this.workflow.query(campaignStatusQuery);
    if (d.status.name === 'COMPLETED') return (await this.workflow.result()) as CampaignStatus;
    return {
      name: this.name,
      phase: 'Aborted',
      wave: 0,
      rows: [],
      message: `the campaign's workflow ended ${d.status.name.toLowerCase()}${d.status.name === 'FAILED' ? `: ${await this.failure()}` : ''}`,
    };
  }

  /** The table once the campaign has ended. */
  async result(): Promise<CampaignStatus> {
    await this.workflow.result();
    return this.status();
  }

  /**
   * A windowed campaign's rows: its members (MigrationCampaign = its name, of its first run: a campaign of the same
   * name before is another's), each member's latest run's memo, paged; a member still running in visibility once
   * the campaign has ended (visibility a moment behind) is asked its row; then the clusters skipped, as the
   * campaign names them. Sorted by wave, then name.
   */
  async rows(s: CampaignStatus): Promise<CampaignRow[]> {
    if (!this.client) return s.rows;
    const ended = CAMPAIGN_ENDED.has(s.phase);
    const rows = new Map<string, CampaignRow>();
    const late: Array<Promise<void>> = [];
    const query = `WorkflowType = '${CAMPAIGN_MEMBER_WORKFLOW_TYPE}' AND ${MigrationCampaign.name} = '${this.name}'`;
    for await (const w of this.client.workflow.list({ query, pageSize: ROWS_PAGE })) {
      const memo = (w.memo ?? {}) as { row?: CampaignRow; campaignRun?: string };
      // An earlier run of a member (continued as new) holds an older row: its latest run is listed too.
      if (memo.campaignRun !== s.runId || !memo.row || w.status.name === 'CONTINUED_AS_NEW') continue;
      const row = memo.row;
      rows.set(row.cluster, row);
      // Visibility lags: a member it still lists as running may have ended. Its describe holds the memo as the member
      // last wrote it, from the server alone (a query would wait for a worker, and the fleet's may be gone).
      if (ended && w.status.name === 'RUNNING')
        late.push(
          this.client.workflow
            .getHandle(w.workflowId)
            .describe()
            .then((d) => {
              const m = (d.memo ?? {}) as { row?: CampaignRow; campaignRun?: string };
              if (m.row && m.campaignRun === s.runId) rows.set(row.cluster, m.row);
            })
            .catch(() => undefined),
        );
    }
    await Promise.all(late);
    for (const cluster of s.skipped?.clusters ?? [])
      if (!rows.has(cluster))
        rows.set(cluster, {
          cluster,
          phase: 'Skipped',
          reachable: false,
          resources: { asked: 0, succeeded: 0 },
          objects: 0,
          failures: [],
          note: s.skipped!.note,
        });
    const wave = (r: CampaignRow) => r.wave ?? Number.MAX_SAFE_INTEGER;
    return [...rows.values()].sort((a, b) => wave(a) - wave(b) || (a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0));
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
    /** The trust domains (docs/fleet.md), when a domains file was given: each cluster is read in its domain. */
    readonly domains?: FleetDomains,
  ) {}

  /**
   * Connects to the fleet's namespace. `domains`: a trust domains file (the fleet worker's SVM_FLEET_DOMAINS), and
   * where it was given (named in refusals); a malformed one, or one with a cluster in two domains, is refused.
   */
  static async connect(opts: { temporal?: TemporalTarget; domains?: { file: string; source?: string } } = {}): Promise<Fleet> {
    // The domains file first: one that is malformed is refused before anything is connected.
    const target = opts.temporal ? TemporalSettingsSchema.parse(opts.temporal) : loadTemporalSettings(process.env);
    const domains = opts.domains ? FleetDomains.load(opts.domains.file, target, opts.domains.source ?? FLEET_DOMAINS_ENV) : undefined;
    const { client, connection, settings } = await connectTemporal(opts.temporal);
    return new Fleet(client, fleetTaskQueue(settings.taskQueue), connection, domains);
  }

  async close(): Promise<void> {
    await this.domains?.close();
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
      const h = await this.client.workflow.start<typeof windowedCampaign>(CAMPAIGN_WORKFLOW_TYPE, {
        workflowId: campaignWorkflowId(name),
        taskQueue: this.taskQueue,
        args: [input],
        typedSearchAttributes: [
          { key: MigrationPhase, value: 'Running' },
          { key: MigrationCampaign, value: name },
        ],
        staticSummary: `Campaign ${name}`,
      });
      return new CampaignHandle(name, h, this.client);
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError)
        throw new Error(`a campaign "${name}" is already running (svm fleet status ${name})`);
      throw err;
    }
  }

  /** A campaign by name: a windowed one, or a legacy one (fleetCampaign) started before (its table is read as it is). */
  campaign(name: string): CampaignHandle {
    return new CampaignHandle(name, this.client.workflow.getHandle<typeof windowedCampaign>(campaignWorkflowId(name)), this.client);
  }

  /**
   * The registered clusters (sorted by name), those whose registration matches `where` when given. With trust
   * domains: each domain's registrations, read in its namespace, of the names bound to it (a registration of a name
   * in a domain it is not bound to is not listed: it counts for nothing), each with its domain.
   */
  async clusters(where?: string): Promise<RegisteredCluster[]> {
    const d = this.domains;
    const clusters: RegisteredCluster[] = [];
    if (!d) clusters.push(...(await registrations(this.client, where)));
    else
      for (const domain of d.all)
        for (const c of await registrations(await d.client(domain.name), where))
          if (d.domainOf(c.name)?.name === domain.name) clusters.push({ ...c, domain: domain.name });
    return clusters.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** With trust domains: the domain a cluster is bound to; a name bound to none is refused in a sentence. */
  domainOf(name: string): Domain | undefined {
    const d = this.domains;
    if (!d) return undefined;
    const domain = d.domainOf(name);
    if (!domain)
      throw new Error(
        `cluster "${name}" is in no trust domain of ${d.source} (domains: ${d.all.map((x) => x.name).join(', ')}): the fleet reads and acts on a cluster in its domain only`,
      );
    return domain;
  }

  /** Where a cluster's registration is read and acted on: its domain's client and fleet task queue, or the fleet's own. */
  private async registry(name: string): Promise<{ client: Client; taskQueue: string }> {
    const domain = this.domainOf(name);
    if (!domain) return { client: this.client, taskQueue: this.taskQueue };
    return { client: await this.domains!.client(domain.name), taskQueue: fleetTaskQueue(domain.taskQueue) };
  }

  /** A cluster's pin (in its domain, with domains): the uid pinned to its name and its open conflict; undefined when it is not registered. */
  async pinOf(name: string): Promise<Pin | undefined> {
    return pinOf((await this.registry(name)).client, name);
  }

  /** The operator's act: pins `name` to `uid` (a cluster recreated under its name, or a conflict resolved), in its domain with domains. */
  async pin(name: string, uid: string, by = 'svm fleet pin'): Promise<Repin> {
    const r = await this.registry(name);
    return repin(r.client, r.taskQueue, name, uid, by);
  }

  /** The operator's act for a decommissioned cluster: its registration and its uid's pin end. What it held, or undefined. */
  async forget(name: string, by = 'svm fleet forget'): Promise<Pin | undefined> {
    return forget((await this.registry(name)).client, name, by);
  }

  /**
   * The campaign's table with each row's verdict checked against the uid pinned to its cluster now: a row made
   * against another uid (or whose cluster's identity is in conflict) does not count; its phase becomes Refused's
   * reason in its note, and `refused` names those rows. Rows from before verdicts carried a uid are left as they are.
   */
  async checkedStatus(s: CampaignStatus): Promise<{ status: CampaignStatus; refused: string[] }> {
    const refused: string[] = [];
    // The pins of many rows: one paged list of the registrations (a describe per cluster for a few).
    const listed = s.rows.length > 20 ? new Map((await this.clusters()).map((c) => [c.name, c])) : undefined;
    // A cluster bound to no domain (its row failed at once) has no pin to check against.
    const pinFor = async (cluster: string) => (listed ? listed.get(cluster) : await this.pinOf(cluster).catch(() => undefined));
    const rows = await Promise.all(
      s.rows.map(async (r) => {
        if (!r.uid || !['Succeeded', 'Failed'].includes(r.phase)) return r;
        const pin = await pinFor(r.cluster);
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

/** The running registrations of a namespace (matching `where` when given), as its client lists them. */
async function registrations(client: Client, where?: string): Promise<RegisteredCluster[]> {
  const prefix = clusterRegistrationId('');
  const clusters: RegisteredCluster[] = [];
  // The running run of each registration holds its latest report (a closed one is an earlier run, continued as new).
  const query = `WorkflowType = '${CLUSTER_REGISTRATION_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'${where ? ` AND (${where})` : ''}`;
  for await (const w of client.workflow.list({ query })) {
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
  return clusters;
}
