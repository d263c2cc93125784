/**
 * The fleet's contract (docs/fleet.md): how clusters are registered in Temporal, and the campaign workflow that
 * migrates many clusters in waves. Any SDK starts a campaign with the workflow type, the task queue and the input
 * below (its JSON Schema: contract/v<N>/campaign-input.schema.json) and reads its table with the status query.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import { z } from 'zod';
import { ClusterNameSchema } from '../api/cluster';

// ------------------------------------------------------------------ the registry

/**
 * One workflow per cluster holds its registration: `svm-cluster/<name>`, on the fleet task queue. Its memo's `uid`
 * is the cluster's identity, pinned at its first registration (the start's memo) and never replaced by a report;
 * only an operator's `svm fleet pin` moves it (a new run, started with the new uid).
 */
export const CLUSTER_REGISTRATION_WORKFLOW_TYPE = 'clusterRegistration';
export const clusterRegistrationId = (cluster: string) => `svm-cluster/${cluster}`;

/**
 * The other side of a pin: one workflow per pinned uid, `svm-cluster-uid/<uid>`, whose memo names the cluster the
 * uid is pinned to, so that no second name can take it (a worker named for one cluster with another's kubeconfig).
 * A workflow ID is unique: two workers racing for one uid cannot both have it.
 */
export const CLUSTER_UID_CLAIM_WORKFLOW_TYPE = 'clusterUidClaim';
export const clusterUidClaimId = (uid: string) => `svm-cluster-uid/${uid}`;

/** A report that disagrees with the cluster's pinned identity, as its registration keeps it until an operator's pin. */
export const IdentityConflictSchema = z
  .object({
    /** The uid the reporting worker's API answers. */
    uid: z.string().min(1).max(64),
    /** What is wrong, in a sentence (both uids, and where the worker's API is). */
    message: z.string().max(2000),
    /** When it was reported (RFC 3339). */
    seenAt: z.string().max(40),
  })
  .strict();
export type IdentityConflict = z.infer<typeof IdentityConflictSchema>;

/** A registration's memo: the pinned uid, the latest matching report, and the conflict while one is open. */
export interface RegistrationMemo {
  uid?: string;
  servers?: Array<{ server: string; version: string }>;
  svmVersion?: string;
  seenAt?: string;
  conflict?: IdentityConflict;
  /** The task queue that serves the cluster (a pool's, or its own): where its workflows are started (Placement's queue). */
  queue?: string;
}

/** What a cluster's worker reports of it (on start and every SVM_CLUSTER_REPORT_SECONDS). No object data. */
export const ClusterReportSchema = z
  .object({
    name: ClusterNameSchema,
    /** The uid of its kube-system namespace: the de-facto cluster ID. */
    uid: z.string().min(1).max(64),
    /** Each API server found (address:port) and the Kubernetes version it answers (/version's gitVersion). */
    servers: z.array(z.object({ server: z.string().max(300), version: z.string().max(100) }).strict()).max(100),
    /** svm's version on the reporting worker. */
    svmVersion: z.string().max(100),
    /** When the worker reported (RFC 3339). */
    seenAt: z.string().max(40),
    /** Set when the worker found its API is not the cluster pinned to this name: why (the report counts for nothing else). */
    conflict: z.string().max(2000).optional(),
    /** The task queue the reporting worker serves the cluster on: its own (`<base>/cluster/<name>`) or its pool's. */
    queue: z.string().min(1).max(1000).optional(),
  })
  .strict();
export type ClusterReport = z.infer<typeof ClusterReportSchema>;

export const clusterSeenSignal = defineSignal<[ClusterReport]>('clusterSeen');
/** The uid claim's input: the uid and the cluster it is pinned to. */
export interface ClusterUidClaimInput {
  uid: string;
  name: string;
}

export const clusterReportQuery = defineQuery<ClusterReport | undefined>('clusterReport');

/** The Kubernetes versions a report names (distinct, sorted): the registration's MigrationKubeVersions. */
export function kubeVersionsOf(report: Pick<ClusterReport, 'servers'>): string[] {
  return [...new Set(report.servers.map((s) => s.version))].sort();
}

// ------------------------------------------------------------------ campaigns

/**
 * A campaign's workflow (src/workflows/campaign-window.ts): an in-flight window over a member per cluster, its own
 * history bounded by continue-as-new. Campaigns started before it are of the type `fleetCampaign`
 * (LEGACY_CAMPAIGN_WORKFLOW_TYPE, src/workflows/campaign.ts, kept so that they replay and finish).
 */
export const CAMPAIGN_WORKFLOW_TYPE = 'windowedCampaign';
export const LEGACY_CAMPAIGN_WORKFLOW_TYPE = 'fleetCampaign';
/** One cluster of a campaign (src/workflows/campaign-member.ts): its probe, its step, its row. */
export const CAMPAIGN_MEMBER_WORKFLOW_TYPE = 'campaignMember';
export const CAMPAIGN_STEP_WORKFLOW_TYPE = 'clusterCampaignStep';
export const campaignWorkflowId = (name: string) => `svm-campaign/${name}`;
/** A member's ID: a prefix of its own, so that no step's ID (`svm-campaign/<cluster>/<name>`) can be the same. */
export const campaignMemberId = (name: string, cluster: string) => `svm-campaign-member/${name}/${cluster}`;

const seconds = (min: number, max: number, what: string) => z.number().int().min(min).max(max).describe(what);

export const CampaignInputSchema = z
  .object({
    /** The clusters by name. */
    clusters: z.array(ClusterNameSchema).max(5000).optional().describe('the clusters, by name'),
    /** Or the registered clusters a visibility query over their registrations matches, e.g. MigrationKubeVersions = 'v1.37.2'. */
    where: z
      .string()
      .min(1)
      .max(1000)
      .optional()
      .describe("the registered clusters whose registration matches this visibility query, e.g. MigrationKubeVersions = 'v1.37.2'"),
    /** What to migrate in each: every migratable resource, what `svm plan` lists there, or the named ones. */
    migrate: z
      .union([z.literal('all'), z.literal('plan'), z.array(z.string().min(1).max(320)).min(1).max(2000)])
      .describe(
        '"all" (every migratable resource), "plan" (what svm plan lists in each cluster: what must be migrated before the next step) or the resources, as svm migrate names them',
      ),
    /** Then, where given, the drop-readiness check of this group/version in each cluster. */
    dropCheck: z
      .string()
      .max(320)
      .optional()
      .describe('a group/version whose drop readiness is checked in each cluster after its migrations'),
    dropCheckWindowSeconds: seconds(0, 3600, "the drop check's request window").optional(),
    /** The cluster that goes first, alone; default: the first that answers. */
    canary: ClusterNameSchema.optional().describe('the cluster migrated first, alone (default: the first that answers)'),
    /** Clusters at once after the canary. */
    parallel: z.number().int().min(1).max(100).default(2).describe('clusters at once after the canary'),
    /** Migrations at once within each cluster. */
    parallelism: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(2)
      .describe("migrations at once within each cluster (its migrateAll's parallelism)"),
    pauseBetweenWavesSeconds: seconds(0, 7 * 86_400, 'a wait between waves').default(0),
    /** Stop on the first failure (unset), or once failures exceed this share of the clusters ended. */
    maxFailureRatio: z
      .number()
      .min(0)
      .max(1)
      .optional()
      .describe('stop once failed / ended clusters exceeds this (default: stop on the first failure)'),
    /** A cluster whose worker takes no task in this long is reported unreachable (and asked again as often). */
    unreachableAfterSeconds: seconds(5, 3600, 'a cluster whose worker takes no task in this long is unreachable').default(60),
    /** When the campaign gives up on the clusters not done (reported Unreachable, or Pending if never started). */
    deadlineSeconds: seconds(60, 30 * 86_400, 'when the campaign stops waiting for clusters').default(86_400),
  })
  .strict()
  .refine((i) => (i.clusters?.length ?? 0) > 0 || i.where !== undefined, { message: 'name the clusters (clusters) or a query (where)' })
  .describe('the input of windowedCampaign (and of fleetCampaign, before it); minimal: {"clusters": ["a", "b"], "migrate": "all"}');
export type CampaignInput = z.input<typeof CampaignInputSchema>;
export type CampaignSettings = z.output<typeof CampaignInputSchema>;

export const ClusterPhase = z.enum(['Pending', 'Running', 'Unreachable', 'Succeeded', 'Failed', 'Skipped', 'Aborted']);
export type ClusterPhase = z.infer<typeof ClusterPhase>;

const Failure = z.object({ resource: z.string(), reason: z.string() }).strict();
const DropVerdict = z.object({ groupVersion: z.string(), verdict: z.string(), exitCode: z.number().int() }).strict();

/** One cluster's line of the campaign's table. */
export const CampaignRowSchema = z
  .object({
    cluster: z.string(),
    phase: ClusterPhase,
    /** The wave it ran in (0: the canary); absent until started. */
    wave: z.number().int().optional(),
    /** Its worker answered the last probe. */
    reachable: z.boolean(),
    /** The kube-system uid its verdict was made against (its step's); absent in rows from before verdicts carried it. */
    uid: z.string().optional(),
    /** Resources migrated (Succeeded) of those asked. */
    resources: z.object({ asked: z.number().int(), succeeded: z.number().int() }).strict(),
    /** Objects handled by its migrations. */
    objects: z.number().int(),
    /** The migrations that did not succeed, and why. */
    failures: z.array(Failure),
    /** The drop check's verdict, where asked. */
    drop: DropVerdict.optional(),
    /** Why it is as it is, in a sentence (unreachable since, skipped because, failed because). */
    note: z.string().optional(),
    startedAt: z.string().optional(),
    endedAt: z.string().optional(),
  })
  .strict();
export type CampaignRow = z.infer<typeof CampaignRowSchema>;

export const CampaignPhaseSchema = z.enum(['Running', 'Paused', 'Succeeded', 'Failed', 'Stopped', 'Aborted', 'DeadlineExceeded']);
export type CampaignPhase = z.infer<typeof CampaignPhaseSchema>;

/** How many clusters of a campaign stand in each phase. */
export const CampaignCountsSchema = z
  .object({
    clusters: z.number().int(),
    Pending: z.number().int(),
    Running: z.number().int(),
    Unreachable: z.number().int(),
    Succeeded: z.number().int(),
    Failed: z.number().int(),
    Skipped: z.number().int(),
    Aborted: z.number().int(),
  })
  .strict();
export type CampaignCounts = z.infer<typeof CampaignCountsSchema>;

/** A failed cluster as the campaign keeps it: its note and its first failures (at most CAMPAIGN_FAILURE_DETAIL). */
export const CampaignFailureSchema = z
  .object({ cluster: z.string(), note: z.string().optional(), failures: z.array(Failure), more: z.number().int().optional() })
  .strict();
export type CampaignFailure = z.infer<typeof CampaignFailureSchema>;

/** A cluster in flight: its member runs (its step, or its probe while it is away). */
export const CampaignInFlightSchema = z
  .object({
    cluster: z.string(),
    phase: z.enum(['Pending', 'Running', 'Unreachable']),
    wave: z.number().int(),
    since: z.string().optional(),
  })
  .strict();
export type CampaignInFlight = z.infer<typeof CampaignInFlightSchema>;

/**
 * The campaign's table: its result, the campaignStatus query, and `svm fleet status -o json`. A windowed campaign's
 * result and query carry no rows (they live in its members, whose memo holds each cluster's row): counts, the failed
 * clusters (at most CAMPAIGN_FAILURES_KEPT), the clusters in flight and those skipped (at most CAMPAIGN_SKIPPED_NAMED
 * named); `svm fleet status` adds the rows, paged from the members. A legacy campaign's (fleetCampaign) carry rows.
 */
export const CampaignStatusSchema = z
  .object({
    name: z.string(),
    phase: CampaignPhaseSchema,
    /** The wave running now (0: the canary). */
    wave: z.number().int(),
    rows: z.array(CampaignRowSchema),
    /** Why it stopped, when it did. */
    message: z.string().optional(),
    /** A windowed campaign's: how many clusters in each phase. */
    counts: CampaignCountsSchema.optional(),
    /** A windowed campaign's: the failed clusters, the first CAMPAIGN_FAILURES_KEPT; failuresLeftOff says how many more. */
    failures: z.array(CampaignFailureSchema).optional(),
    failuresLeftOff: z.number().int().optional(),
    /** A windowed campaign's: the clusters in flight (running, or away and probed by their member). */
    inflight: z.array(CampaignInFlightSchema).optional(),
    inflightLeftOff: z.number().int().optional(),
    /** A windowed campaign's: the clusters skipped (never started), the first CAMPAIGN_SKIPPED_NAMED, and why. */
    skipped: z
      .object({ clusters: z.array(z.string()), leftOff: z.number().int(), note: z.string() })
      .strict()
      .optional(),
    /** A windowed campaign's first run: its members carry it (a campaign of the same name before is another's). */
    runId: z.string().optional(),
    startedAt: z.string().optional(),
  })
  .strict()
  .describe(
    "windowedCampaign's (and fleetCampaign's) result and campaignStatus query, and the output of svm fleet status -o json (with the members' rows)",
  );
export type CampaignStatus = z.infer<typeof CampaignStatusSchema>;

export const campaignStatusQuery = defineQuery<CampaignStatus>('campaignStatus');

/** The failed clusters a campaign's status names (the others are counted); each with at most CAMPAIGN_FAILURE_DETAIL failures, each reason at most 200 characters. */
export const CAMPAIGN_FAILURES_KEPT = 200;
export const CAMPAIGN_FAILURE_DETAIL = 3;
/** The clusters in flight a campaign's status names (running ones first; those away beyond it are counted). */
export const CAMPAIGN_INFLIGHT_NAMED = 1000;
/** The skipped clusters a campaign's status names. */
export const CAMPAIGN_SKIPPED_NAMED = 1000;
/** A member's memo keeps its row with at most this many failures (its result has them all), each reason at most 500 characters. */
export const MEMBER_MEMO_FAILURES = 20;

/** What a member tells its campaign (by workflow ID: the campaign's current run): away, back, or its end and row. */
export interface MemberReport {
  cluster: string;
  /** The campaign's first run ID, as the member was given it. */
  campaignRun: string;
  event: 'away' | 'back' | 'ended';
  /** With `ended`: the row (failures capped as in the memo). */
  row?: CampaignRow;
}
export const campaignMemberReportSignal = defineSignal<[MemberReport]>('campaignMemberReport');
/** The campaign stopped (or passed its deadline): the member ends as it stands; its step, if any, goes on. */
export const memberGiveUpSignal = defineSignal<[string]>('giveUpCampaignMember');

/** A member's input (src/workflows/campaign-member.ts); `carried` is its own, across continue-as-new. */
export interface CampaignMemberInput {
  campaign: string;
  campaignWorkflowId: string;
  campaignRun: string;
  cluster: string;
  wave: number;
  step: Omit<CampaignStepInput, 'cluster'>;
  unreachableAfterSeconds: number;
  /** When it gives up (epoch ms): the campaign's deadline. */
  deadline: number;
  limits?: CampaignLimits;
  carried?: {
    row: CampaignRow;
    uid?: string;
    /** The task queue its registration names (a pool's), when not the cluster's own. */
    queue?: string;
    /** With trust domains: the domain its cluster is bound to, its step there (started), and its pin's note. */
    domain?: string;
    stepRun?: { workflowId: string; runId: string };
    pinNote?: string;
    misses: number;
    probes: number;
    runs: number;
  };
}

/** Bounds a campaign and its members hold; smaller ones are for tests (a history crossing runs in seconds). */
export interface CampaignLimits {
  /** A campaign's run continues as new past this many events (or when Temporal suggests it). Default 4,000. */
  campaignHistoryEvents?: number;
  /** A member's run continues as new past this many events. Default 1,000. */
  memberHistoryEvents?: number;
  /** Every probe waits this long (no doubling): a test's hundreds of probe periods in seconds. Default: unset. */
  probeWaitMs?: number;
}

/** What a member's `campaignMemberState` query answers: its row, and its probes so far (all runs). */
export const campaignMemberStateQuery = defineQuery<{ row: CampaignRow; probes: number; runs: number }>('campaignMemberState');
export const campaignPauseSignal = defineSignal<[string?]>('pauseCampaign');
export const campaignResumeSignal = defineSignal('resumeCampaign');
export const campaignAbortSignal = defineSignal<[string?]>('abortCampaign');

/** What one cluster's step runs (the child workflow on the cluster's task queue). */
export interface CampaignStepInput {
  cluster: { name: string; uid?: string };
  migrate: 'all' | 'plan' | string[];
  parallelism: number;
  dropCheck?: string;
  dropCheckWindowSeconds?: number;
}

export interface CampaignStepResult {
  /** The kube-system uid the step ran against (its cluster's pinned one, checked by every activity); absent before it was recorded. */
  clusterUid?: string;
  resources: { asked: number; succeeded: number };
  objects: number;
  failures: Array<{ resource: string; reason: string }>;
  drop?: { groupVersion: string; verdict: string; exitCode: number };
}
