/**
 * What the outside world may know of the migration workflow: its input (a zod
 * schema, checked before anything is written), its options and their
 * defaults, its progress, and its signals and queries. Side-effect free:
 * clients, the bridge, the agreement watcher and tests import this module
 * without pulling in workflow code.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { z } from 'zod';
import { ClusterRefSchema } from '../api/cluster';
import type { Agreement } from './agreement';
import type { PassRecord } from './pass-record';
import type { MigrationCounters, MigrationPhase, ObjectFailure } from '../api/migration';

const whole = (name: string, min: number, max: number) => {
  const message = `${name} must be a whole number between ${min} and ${max}`;
  return z.number({ error: message }).int(message).min(min, message).max(max, message);
};

/** Load and timing settings of one migration; every field has a default. */
/** The most updates one migration may run at once (its concurrency option). */
export const MAX_MIGRATION_CONCURRENCY = 256;

export const MigrationOptionsSchema = z
  .object({
    /** Objects per list page (one chunk). */
    chunkSize: whole('chunkSize', 1, 10_000),
    /**
     * A list page is also bounded by bytes: the API server builds a page whole in memory. After each
     * chunk the next page's limit is cut so that a page of objects like the last ones stays near this.
     */
    pageBytes: whole('pageBytes', 1024 * 1024, 1024 * 1024 * 1024),
    /** No-op updates in flight at once within a chunk. */
    concurrency: whole('concurrency', 1, MAX_MIGRATION_CONCURRENCY),
    /** Per-migration QPS ceiling; 0 = only the worker's shared budget. */
    qps: whole('qps', 0, 100_000),
    /** Continue-as-new after this many chunks even if Temporal does not suggest it. */
    maxChunksPerRun: whole('maxChunksPerRun', 1, 10_000),
    /** A chunk whose worker went silent this long is retried elsewhere (resuming from its last heartbeat). */
    heartbeatTimeoutSeconds: whole('heartbeatTimeoutSeconds', 2, 3600),
    /**
     * A task (a chunk, an agreement check) that no worker has started this long after it was scheduled is
     * scheduled again, with twice the wait each time up to an hour: workers away, or a task the Temporal
     * server lost (seen after its PostgreSQL crashed), never stall a migration for good.
     */
    taskStartTimeoutSeconds: whole('taskStartTimeoutSeconds', 5, 3600),
    /** While waiting for agreement, re-check at least this often (a signal wakes it sooner). */
    agreementPollSeconds: whole('agreementPollSeconds', 1, 3600),
    /**
     * An agreement svm cannot verify per API server (fewer addresses answer than identity leases
     * exist: a managed cluster behind one address, or a server starting or stopping) is accepted
     * only after it has held, unchanged, this long.
     */
    unverifiedAgreementSeconds: whole('unverifiedAgreementSeconds', 0, 86_400),
  })
  .strict();
export type MigrationOptions = z.infer<typeof MigrationOptionsSchema>;

/**
 * The first page of a migration listed with content (objects rewritten by PUT), with no object size to go by, holds
 * at most this many objects; later pages are cut to options.pageBytes (nextPageLimit). A page listed as metadata only
 * (the empty patch, the default) holds the chunk size from the first: its objects come as a few hundred bytes each.
 */
export const FIRST_PAGE_LIMIT = 10;

/**
 * The next page's limit: the chunk size, cut so that a page of objects as big
 * as the last page's stays near pageBytes (the API server builds a page whole
 * in memory, and so does etcd's answer).
 */
export function nextPageLimit(
  options: Pick<MigrationOptions, 'chunkSize' | 'pageBytes'>,
  last: { listed: number; listedBytes?: number } | undefined,
): number {
  const { chunkSize, pageBytes } = options;
  if (!last) return Math.min(chunkSize, FIRST_PAGE_LIMIT);
  if (last.listedBytes === undefined || last.listed === 0 || last.listedBytes === 0) return chunkSize;
  const fits = Math.floor(pageBytes / (last.listedBytes / last.listed));
  return Math.max(1, Math.min(chunkSize, fits));
}

/** The defaults, in a module of their own (no zod) that `svm migrate --help` reads. */
export { defaultMigrationOptions } from './defaults';

export const ResourceRefSchema = z
  .object({
    group: z.string().max(253),
    resource: z.string().min(1).max(253),
    version: z.string().min(1).max(63),
    kind: z.string().min(1).max(253),
    namespaced: z.boolean(),
    storageVersionHash: z.string().max(64),
    custom: z.boolean(),
  })
  .strict();

const CountersSchema = z.object({
  migrated: z.number().int().min(0),
  rewritten: z.number().int().min(0),
  conflicts: z.number().int().min(0),
  notFound: z.number().int().min(0),
  failed: z.number().int().min(0),
  chunks: z.number().int().min(0),
  listRestarts: z.number().int().min(0),
  tokenResumes: z.number().int().min(0),
});

const AgreementSchema = z
  .object({
    agreed: z.boolean(),
    encodingVersion: z.string().optional(),
    token: z.string(),
  })
  .loose();

/**
 * State that travels across continue-as-new. Only a run continued from an
 * earlier run of the same workflow may carry it (workflowInfo().continuedFromExecutionRunId):
 * a continue token therefore only ever resumes a pass this workflow started.
 */
export const CarriedStateSchema = z
  .object({
    continueToken: z.string().min(1).max(8192).optional(),
    counters: CountersSchema,
    failures: z.array(z.object({ namespace: z.string().optional(), name: z.string(), reason: z.string() })).max(1000),
    /** The agreement this pass started under; undefined until the servers agree. */
    agreement: AgreementSchema.optional(),
    startedAt: z.number(),
    runs: z.number().int().min(0),
    /** Times the whole resource was started over (storage version moved). */
    restarts: z.number().int().min(0),
    remainingEstimate: z.number().int().optional(),
    message: z.string().optional(),
    /** The next list page's limit: the chunk size, cut for big objects (nextPageLimit). */
    pageLimit: z.number().int().min(1).max(10_000).optional(),
    /** 'put' once the API server refused the empty merge patch for this resource (its objects are PUT as listed). */
    rewrite: z.literal('put').optional(),
    /** The migration is paused: a new run (continue-as-new, a start over) stays paused until resumed. */
    paused: z.literal(true).optional(),
    /** Where the chunk at continueToken stopped when a pause stopped it (keys namespace/name: no object data). */
    resume: z
      .object({
        afterKey: z.string().max(400).optional(),
        doneAfter: z.array(z.string().max(400)).max(10_000).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** The version of the workflow contract: in a module of its own, which `svm version` reads without zod or the SDK. */
export { CONTRACT_VERSION } from './version';

/** How a caller names the resource in the minimal start: `plural.group` (`gizmos.example.com`), or a core plural (`secrets`). */
export const RESOURCE_FORMS =
  'accepted forms: {"resource": "gizmos.example.com"} (plural.group), {"resource": "secrets"} (a core resource), {"group": "example.com", "resource": "gizmos"}';

/**
 * How many StorageVersionMigration objects one migration workflow mirrors its status into (the set is carried
 * across continue-as-new, so it is bounded). More objects for the same resource still get its status: the bridge
 * copies it into those the workflow does not list (src/worker/bridge.ts).
 */
export const MAX_MIGRATION_OBJECTS = 100;

/** What a status write found: the objects that no longer exist (the workflow stops listing them). */
export interface StatusReport {
  gone: string[];
}

export const MigrateResourceInputSchema = z
  .object({
    /**
     * The resource: a plural name (`secrets`), `plural.group` (`gizmos.example.com`), or the fully resolved
     * reference svm's own client sends. A name is resolved by the workflow itself, in an activity.
     */
    resource: z.union([z.string().min(1).max(253), ResourceRefSchema]),
    /** With a plural name in `resource`: its API group ("" or omitted for the core group). */
    group: z.string().max(253).optional(),
    options: MigrationOptionsSchema.partial().optional(),
    /** StorageVersionMigration objects that mirror this migration's status (at most MAX_MIGRATION_OBJECTS). */
    migrationObjects: z.array(z.string().min(1).max(320)).max(MAX_MIGRATION_OBJECTS).optional(),
    /**
     * The cluster, when one Temporal namespace serves several (docs/fleet.md): the workflow ID and task queue must
     * be its (migrationWorkflowId, clusterTaskQueue). Without a uid, the workflow reads it first and records it.
     */
    cluster: ClusterRefSchema.optional(),
    carried: CarriedStateSchema.optional(),
  })
  .strict();

export type MigrateResourceInput = Omit<z.infer<typeof MigrateResourceInputSchema>, 'carried'> & { carried?: CarriedState };
/** The input once the resource is resolved (what a migration runs with, and continues as new with). */
export type ResolvedInput = Omit<MigrateResourceInput, 'resource' | 'group'> & { resource: z.infer<typeof ResourceRefSchema> };
/** The agreement travels as the activity returned it (the schema checks only what the workflow relies on). */
export type CarriedState = Omit<z.infer<typeof CarriedStateSchema>, 'agreement'> & { agreement?: Agreement };

/** Readable reasons for a refused input, naming each field. */
export function explainInput(error: z.ZodError, root = 'input'): string {
  return error.issues
    .map((i) => {
      const where = i.path.join('.') || root;
      if (i.code === 'unrecognized_keys') {
        const keys = i.keys.join(', ');
        return i.keys.includes('continueToken')
          ? `${where}: continueToken is not accepted: a migration succeeds only after a whole pass from the beginning of the list, started by svm itself`
          : `${where}: unknown field(s) ${keys}`;
      }
      return `${where}: ${i.message}`;
    })
    .join('; ');
}

export interface MigrationProgress {
  resource: string;
  phase: MigrationPhase;
  counters: MigrationCounters;
  failures: ObjectFailure[];
  continueTokenPresent: boolean;
  remainingEstimate?: number;
  objectsPerSecond: number;
  startedAt: number;
  runs: number;
  restarts: number;
  message?: string;
  /** On a Succeeded result only: the record of the whole pass a verdict rests on (contract/pass-record.ts). */
  record?: PassRecord;
  migrationObjects: string[];
}

export type MigrationResult = MigrationProgress;
export type { PassRecord } from './pass-record';

/**
 * The argument of each signal and update, as the workflow checks it and contract/v<N>/ publishes it: one JSON
 * object (the Go SDK sends exactly one argument). Extra fields are ignored, as before.
 */
export const EmptyArgSchema = z.object({}).describe('an empty object (the Go SDK sends exactly one argument)');
export const AbortArgSchema = z.object({ reason: z.string().optional() });
export const AttachArgSchema = z.object({ name: z.string().min(1).max(320) });

/**
 * What the handlers accept: the contract's object, or no argument at all (a TypeScript caller, the Temporal CLI
 * without --input); abort and attachMigrationObject also take the older bare string (read as the reason, the
 * name). Anything else is refused: a signal is logged and ignored, an update rejected by its validator (it
 * never enters history).
 */
export const HandlerArgSchemas = {
  empty: EmptyArgSchema.nullish(),
  abort: z.preprocess((a) => (typeof a === 'string' ? { reason: a } : a), AbortArgSchema.nullish()),
  attachMigrationObject: z.preprocess((a) => (typeof a === 'string' ? { name: a } : a), AttachArgSchema),
  /** The watcher's why (never read by the workflow: a re-check reads the agreement itself). */
  agreementChanged: z.string().nullish(),
} as const;

/** Why a handler's argument is refused, naming the field; undefined when it is valid. */
export function argumentRefusal(name: string, schema: z.ZodType, arg: unknown): string | undefined {
  const parsed = schema.safeParse(arg);
  return parsed.success ? undefined : `invalid argument to ${name}: ${explainInput(parsed.error, 'argument')}`;
}

/** Signals take one JSON object (the Go SDK sends exactly one argument); the older bare string still works. */
export const abortSignal = defineSignal<[arg?: string | { reason?: string }]>('abort');
export const pauseSignal = defineSignal<[arg?: Record<string, never>]>('pause');
export const resumeSignal = defineSignal<[arg?: Record<string, never>]>('resume');
export const attachMigrationObjectSignal = defineSignal<[arg: string | { name: string }]>('attachMigrationObject');

/** The reason in an abort signal's argument, whichever shape it came in. */
export const abortReason = (arg: unknown): string | undefined =>
  typeof arg === 'string'
    ? arg || undefined
    : typeof (arg as { reason?: unknown })?.reason === 'string'
      ? (arg as { reason: string }).reason
      : undefined;
/** The object name in an attachMigrationObject signal's argument. */
export const attachedName = (arg: unknown): string | undefined =>
  typeof arg === 'string' ? arg : typeof (arg as { name?: unknown })?.name === 'string' ? (arg as { name: string }).name : undefined;

/** What a steering update answers: the progress, and what the migration will do next. */
export interface SteerResult extends MigrationProgress {
  paused: boolean;
  /** Set once an abort is requested (it takes effect within the chunk in flight). */
  abortRequested?: string;
}
/** Steering with an acknowledgement (Workflow Updates): refused with a reason when it cannot apply, e.g. after the verdict. */
export const pauseUpdate = defineUpdate<SteerResult, [arg: Record<string, unknown> | undefined]>('pauseMigration');
export const resumeUpdate = defineUpdate<SteerResult, [arg: Record<string, unknown> | undefined]>('resumeMigration');
export const abortUpdate = defineUpdate<SteerResult, [arg: { reason?: string } | undefined]>('abortMigration');
/**
 * The synchronous answer to a start (Update-with-Start, or an update right after it): the resolved
 * resource, or the refusal naming the problem: ApplicationFailure type InvalidInput for the input itself (a
 * field, carried state, a workflow ID that is not the resource's), InvalidResource when the named resource
 * cannot be resolved (with the accepted forms).
 */
export const resolutionUpdate = defineUpdate<z.infer<typeof ResourceRefSchema>, [arg: Record<string, unknown> | undefined]>('resolution');
/** Sent by the agreement watcher when a StorageVersion or CRD of this resource changed. */
export const agreementChangedSignal = defineSignal<[why?: string]>('agreementChanged');
export const progressQuery = defineQuery<MigrationProgress>('progress');

// ------------------------------------------------------------ migrating every resource

/** The initializer's workflow: one at a time per cluster (starting it again joins the running one). */
export const MIGRATE_ALL_WORKFLOW_ID = 'svm-migrate-all';

export const MigrateAllInputSchema = z
  .object({
    /** Resolved and checked by the caller (every migratable resource of the cluster, or a chosen list). */
    resources: z.array(ResourceRefSchema).min(1).max(2000),
    /** Migrations running at once; each draws on the workers' shared budget. */
    parallelism: whole('parallelism', 1, 64),
    options: MigrationOptionsSchema.partial().optional(),
    /** The cluster, when one Temporal namespace serves several: its migrations are started in it. */
    cluster: ClusterRefSchema.optional(),
  })
  .strict();
export type MigrateAllInput = z.infer<typeof MigrateAllInputSchema>;

/** How one resource's migration ended within the initializer. */
export interface MigrateAllRow {
  resource: string;
  workflowId: string;
  /** Succeeded, Failed, Aborted; Error when it could not be started or followed. */
  result: string;
  /** Objects handled (migrated, conflicts, gone, failed). */
  objects: number;
  durationMs: number;
  /** Joined a migration of this resource that was already running (started by the trigger, the bridge or a person). */
  joined: boolean;
  message?: string;
}

export interface MigrateAllProgress {
  total: number;
  done: MigrateAllRow[];
  running: string[];
  pending: number;
}

export const migrateAllProgressQuery = defineQuery<MigrateAllProgress>('migrateAllProgress');

/** Objects a migration handled, whatever became of each. */
export const objectsHandled = (c: MigrationCounters): number => c.migrated + c.conflicts + c.notFound + c.failed;

// ------------------------------------------------------------ the trigger

/** The trigger's one instance (the automated-migration design of kube-storage-version-migrator): starting it again joins the running one. */
export const TRIGGER_WORKFLOW_ID = 'svm-trigger';
/** Observe now instead of at the end of the period. */
export const pollNowSignal = defineSignal('pollNow');
