/**
 * Worker settings, from the environment and flags, validated with zod: a bad
 * value stops the process at start with a message naming it. The Temporal part
 * (shared with the client) is src/config/temporal.ts, re-exported here.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { z } from 'zod';
import { explainSettings, SettingsError, settingBool as bool } from '../config/settings';
import { TemporalSettings, temporalFromEnv, temporalSettingSources } from '../config/temporal';
import { parseSecretRefs } from '../kube/credential-exposure';
import { OWN_TAKE_AFTER_MS } from './bridge-decision';
import { VersioningSettings, versioningFromEnv, versioningSettingSources } from './versioning';

export { SettingsError } from '../config/settings';
export { explainTemporalConnectError, loadTemporalSettings, TemporalSettings, temporalConnectionOptions } from '../config/temporal';

// A blank value is an error, not 0 (which would mean "unlimited" for a QPS).
const blankIsNaN = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? NaN : v);
const int = (min: number, max: number) =>
  z.preprocess(
    blankIsNaN,
    z.coerce
      .number({ error: 'must be a number' })
      .int('must be a whole number')
      .min(min, `must be at least ${min}`)
      .max(max, `must be at most ${max}`),
  );

/** SVM_QPS=auto (any case, spaces around it): the budget follows the API servers. Unset means auto too. */
const isAuto = (v: unknown) => typeof v === 'string' && v.trim().toLowerCase() === 'auto';

/** SVM_MEMORY_BUDGET_BYTES by default: 64 MiB (how it was chosen: docs/configuration.md). */
export const DEFAULT_MEMORY_BUDGET_BYTES = 64 * 1024 * 1024;

export const WorkerSettings = z.object({
  temporal: TemporalSettings,
  /** Worker Versioning (src/worker/versioning.ts): off unless TEMPORAL_DEPLOYMENT_NAME is set. */
  versioning: VersioningSettings.default({ promote: false, checkSeconds: 30 }),
  kubeconfig: z.string().min(1).optional(),
  /** The kubeconfig's context to use instead of its current-context (`svm worker --context`, as kubectl's). */
  kubeContext: z.string().min(1).optional(),
  /**
   * A pool serving several clusters from one process (src/worker/cluster-pool.ts, docs/fleet.md): every file of
   * this directory is a cluster's kubeconfig, named by the file (east.kubeconfig serves cluster "east").
   */
  kubeconfigDir: z.string().min(1).optional(),
  /**
   * Or: the kubeconfig Secrets of this namespace that Cluster API labels `cluster.x-k8s.io/cluster-name` (key
   * `value`), read at start through `kubeconfig` (the management cluster); each serves the cluster its label names.
   */
  kubeconfigSecrets: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a namespace name (lowercase letters, digits and -, at most 63)')
    .optional(),
  /**
   * A pool's name (SVM_POOL_NAME): its clusters' workflows and activities run on `<task queue>/pool/<name>`, which
   * every replica of the pool polls, and its Worker Deployment is `<deployment>-pool-<name>`. Unset: the Secrets'
   * namespace, or the directory's base name (src/worker/cluster-pool.ts, poolNameOf). Two pools on one Temporal
   * namespace and task queue need two names.
   */
  poolName: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a DNS label (lowercase letters, digits and -, at most 63)')
    .optional(),
  /**
   * In a pool only: the kubeconfig plugins a served cluster's kubeconfig may run (SVM_POOL_KUBECONFIG_PLUGINS, comma
   * separated): an `exec` command exactly as the kubeconfig writes it, or an `auth-provider`'s name. A kubeconfig
   * whose user names any other is not served (said, and the other clusters are). Empty (the default): none.
   */
  poolKubeconfigPlugins: z
    .preprocess(
      (v) =>
        typeof v === 'string'
          ? v
              .split(',')
              .map((x) => x.trim())
              .filter((x) => x.length > 0)
          : v,
      z.array(z.string().min(1).max(1000)).max(100),
    )
    .default([]),
  /** In a pool: how often it reads its directory or Secrets again, to serve a new cluster and let a removed one go. 0: once. */
  poolRescanSeconds: int(0, 3600).default(15),
  /**
   * The load budget: 'auto' (the default) follows what the API servers can take, through the adaptive
   * concurrency's queue rule (src/kube/adaptive-concurrency.ts): no fixed rate, more updates in flight while
   * their answers stay near the servers' own baseline, fewer when answers queue up or a 429 arrives. A number
   * is a fixed cap of no-op updates per second shared by every replica and migration (src/worker/budget.ts);
   * 0 is no budget at all.
   */
  qps: z
    .preprocess((v) => (isAuto(v) ? undefined : v), int(0, 100_000).optional())
    .transform((v): number | 'auto' => (v === undefined ? 'auto' : v)),
  /** How many chunks (of any migrations) this worker runs at once. */
  maxConcurrentChunks: int(1, 64).default(4),
  /**
   * The worker's memory budget: bytes of listed objects that all chunks of all migrations in this process hold
   * at once (src/kube/memory-budget.ts); 0 = none (each chunk is bounded by its list buffer only). The default
   * keeps the worker's peak RSS well within the Deployment's 1Gi limit with objects near 1 MB (docs/configuration.md).
   */
  memoryBudgetBytes: int(0, 2 ** 40).default(DEFAULT_MEMORY_BUDGET_BYTES),
  /**
   * Adapt how many updates this worker keeps in flight to the API servers'
   * latency (src/kube/adaptive-concurrency.ts): fewer when they slow down,
   * up to each migration's concurrency when they answer at their baseline.
   */
  adaptiveConcurrency: bool.default(true),
  /**
   * Workflow executions kept in the worker's sticky cache: more than run at
   * once (migrateAll's --parallel is at most 64, plus migrateAll and the
   * trigger); the SDK's default sizes the cache from the heap limit (thousands).
   */
  maxCachedWorkflows: int(0, 10_000).default(100),
  /** Workflow tasks this worker runs at once (the SDK's default is 40, with 10 pollers). */
  maxConcurrentWorkflowTasks: int(2, 1000).default(4),
  /**
   * V8's young generation, in MiB per semi-space: the workflow thread's is
   * capped at this (--max-semi-space-size), the main thread's stops growing
   * at start (--semi-space-growth-factor=1: its flags were fixed when the
   * process started). 0 leaves V8's defaults (up to 16 MiB each, two of them
   * per isolate, grown under allocation-heavy load: list pages).
   */
  semiSpaceMiB: int(0, 64).default(2),
  /**
   * How far V8 lets the old generation grow past what survived the last full
   * collection before it collects again, in percent (--heap-growing-percent).
   * 0 leaves V8's own factor (up to 4x on a small heap that allocates fast:
   * ~55 MB of heap under a migration where ~30 MB is live).
   */
  heapGrowingPercent: int(0, 400).default(10),
  /**
   * V8's --optimize-for-size, turned on once the worker's modules are loaded: its old generation then grows by at
   * least 2 MB past what is live between full collections instead of 8, and its collector compacts more. Worth
   * ~2-4 MiB of RSS under a migration for no measured CPU (docs/benchmarks.md).
   */
  v8OptimizeForSize: bool.default(true),
  /** Watch StorageVersionMigration objects and turn them into workflows. */
  bridge: bool.default(true),
  /** Watch StorageVersion objects and CRDs and signal migrations when agreement may have changed. */
  watchAgreement: bool.default(true),
  /**
   * Who acts on standard StorageVersionMigrations (storagemigration.k8s.io, served by Kubernetes >= 1.35):
   * 'defer' (the default, safe where kube-controller-manager runs its built-in migrator): svm never acts on
   * them; its trigger creates them for the built-in, only once the API servers agree, and checks that the
   * agreement held until the built-in reported success. 'own': svm migrates them (turn the built-in off:
   * kube-controller-manager --controllers=*,-storage-version-migrator-controller); an object another
   * controller also writes is reported. 'off': svm neither reads nor creates them.
   */
  standardMigrations: z.enum(['defer', 'own', 'off'], { error: 'must be defer, own or off' }).default('defer'),
  /**
   * Own mode, the built-in migrator seen acting lately: how long svm leaves a new standard object to whichever
   * controller writes it first, from its creation, before it takes it (seconds; OWN_TAKE_AFTER_MS by default, the
   * time a running built-in takes to act on a new object). Shorter risks taking an object a slow built-in would
   * have taken too; the default suits a cluster.
   */
  ownTakeAfterSeconds: int(1, 3600).default(OWN_TAKE_AFTER_MS / 1000),
  /**
   * The API the trigger migrates through when a storageVersionHash changes: 'svm' (default) starts svm's own
   * migration (migrateResource: budget, counts, agreement throughout); 'standard' creates a
   * storagemigration.k8s.io object for the built-in migrator once the API servers agree and follows it,
   * creating another when the agreement did not hold (needs SVM_STANDARD_MIGRATIONS=defer).
   */
  triggerApi: z.enum(['svm', 'standard'], { error: 'must be svm or standard' }).default('svm'),
  /**
   * Admission objects (admissionregistration.k8s.io), which admission policies made through the API never guard,
   * are rewritten only while a dry run finds the fence loaded from a manifest (deploy/static-fence, Kubernetes
   * >= 1.37) in force for this worker; otherwise their migration fails before anything is written, saying so.
   * deploy/ and the chart set it: their worker is fenced, and a grant on such objects would let its token change
   * them. Off (the default): as any other resource (a worker of the dev plane, with an administrator's kubeconfig).
   */
  requireStaticFence: bool.default(false),
  /**
   * Every other resource is rewritten only while a dry run (a change of one object's labels, nothing stored) finds
   * svm's fence refusing it: made through the API (deploy/worker-policy.yaml) or loaded from a manifest. Where the
   * fence is not installed, or an aggregated API server serves the resource (kube-apiserver proxies its requests
   * past its admission), the migration fails before anything is written, saying so. deploy/ and the chart set it.
   * Off (the default): no probe (a worker with an administrator's kubeconfig, which no fence matches).
   */
  requireFence: bool.default(false),
  /**
   * Who prunes a CRD's status.storedVersions after a whole pass: 'worker' (the default) in the pass's own last step,
   * with the worker's token; 'operator': the worker leaves it, and `svm prune` (the operator's kubeconfig, or the
   * pre-upgrade Job) prunes it on the pass's checked record. With 'operator' the worker's token needs no right on
   * customresourcedefinitions/status (docs/security.md, "The prune").
   */
  prune: z.enum(['worker', 'operator']).default('worker'),
  /**
   * The Secrets that hold this worker's Temporal credential (`namespace/name`, or `name` in the worker's namespace,
   * comma-separated; the chart sets it from temporal.apiKeySecret and temporal.tls.clientCertSecret). At start the
   * worker asks whether its own token can read them, and says so (a log line, svm_temporal_credential_readable,
   * a note in `svm plan`). Unset: nothing to check (a CSI volume, or no credential).
   */
  temporalCredentialSecrets: z.string().optional(),
  /**
   * The ServiceAccount the managedFields rewrite (rewriteManagedFields, `svm managed-fields`) writes as, by
   * impersonation: its username, system:serviceaccount:<namespace>:<name>. Unset (the default): the rewrite is off
   * and refused. deploy/managed-fields.yaml creates that identity, lets the worker impersonate it and fences it.
   */
  managedFieldsAs: z
    .string()
    .regex(/^system:serviceaccount:[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/, {
      error: 'must be a ServiceAccount username, system:serviceaccount:<namespace>:<name>',
    })
    .optional(),
  /**
   * How often the worker samples every API server's request counters (/metrics), keeping a day of samples: the drop
   * check it runs (checkVersionDrop) counts each server's requests at a version since its oldest sample, not only in
   * the check's own window. 0: no samples.
   */
  requestSampleSeconds: int(0, 86400).default(3600),
  /**
   * With a cluster named (SVM_CLUSTER): how often the worker reports its cluster to its registration in Temporal
   * (svm-cluster/<name>: kube-system's uid, each API server's Kubernetes version, svm's version, when), confirming its
   * identity each time (src/worker/registration.ts). 0: only at start (the identity is confirmed before it serves).
   */
  clusterReportSeconds: int(0, 86400).default(600),
  /**
   * With a cluster named: also run the fleet's workflows (campaigns and registrations, on `<task queue>/fleet`),
   * which talk only to Temporal. Any named worker can; at least one must for a campaign to run.
   */
  fleetWorker: bool.default(true),
  /** Prometheus /metrics port; unset: no endpoint. */
  metricsPort: int(0, 65535).optional(),
  /** Where the metrics endpoint listens (0.0.0.0 in a container so Prometheus can reach it). */
  metricsHost: z.string().min(1).default('127.0.0.1'),
  /** Where the worker's leases live (leader election, budget membership): the worker's own namespace. */
  kubeNamespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a namespace name (lowercase letters, digits and -, at most 63)')
    .default(() => defaultNamespace()),
  /** This replica's name in the leases: pod name (hostname) and pid by default. */
  identity: z
    .string()
    .regex(/^[A-Za-z0-9][-A-Za-z0-9_.]{0,127}$/, 'must be 1-128 letters, digits, -, _ or . (starting with a letter or digit)')
    .default(() => defaultIdentity()),
});
export type WorkerSettings = z.infer<typeof WorkerSettings>;

/** Environment variable behind each setting, for messages and docs. */
export const settingSources: Record<string, string> = {
  ...temporalSettingSources,
  ...versioningSettingSources,
  kubeconfig: 'KUBECONFIG',
  kubeContext: 'SVM_KUBE_CONTEXT',
  kubeconfigDir: 'SVM_KUBECONFIG_DIR',
  kubeconfigSecrets: 'SVM_KUBECONFIG_SECRETS',
  poolName: 'SVM_POOL_NAME',
  poolKubeconfigPlugins: 'SVM_POOL_KUBECONFIG_PLUGINS',
  poolRescanSeconds: 'SVM_POOL_RESCAN_SECONDS',
  qps: 'SVM_QPS',
  maxConcurrentChunks: 'SVM_MAX_CONCURRENT_CHUNKS',
  memoryBudgetBytes: 'SVM_MEMORY_BUDGET_BYTES',
  adaptiveConcurrency: 'SVM_ADAPTIVE_CONCURRENCY',
  maxCachedWorkflows: 'SVM_MAX_CACHED_WORKFLOWS',
  maxConcurrentWorkflowTasks: 'SVM_MAX_CONCURRENT_WORKFLOW_TASKS',
  semiSpaceMiB: 'SVM_SEMI_SPACE_MIB',
  heapGrowingPercent: 'SVM_HEAP_GROWING_PERCENT',
  v8OptimizeForSize: 'SVM_V8_OPTIMIZE_FOR_SIZE',
  bridge: 'SVM_BRIDGE',
  watchAgreement: 'SVM_WATCH_AGREEMENT',
  standardMigrations: 'SVM_STANDARD_MIGRATIONS',
  ownTakeAfterSeconds: 'SVM_OWN_TAKE_AFTER_SECONDS',
  triggerApi: 'SVM_TRIGGER_API',
  requireStaticFence: 'SVM_REQUIRE_STATIC_FENCE',
  requireFence: 'SVM_REQUIRE_FENCE',
  prune: 'SVM_PRUNE',
  temporalCredentialSecrets: 'SVM_TEMPORAL_CREDENTIAL_SECRETS',
  managedFieldsAs: 'SVM_MANAGED_FIELDS_AS',
  requestSampleSeconds: 'SVM_REQUEST_SAMPLE_SECONDS',
  clusterReportSeconds: 'SVM_CLUSTER_REPORT_SECONDS',
  fleetWorker: 'SVM_FLEET_WORKER',
  metricsPort: 'SVM_METRICS_PORT',
  metricsHost: 'SVM_METRICS_HOST',
  kubeNamespace: 'SVM_NAMESPACE',
  identity: 'SVM_IDENTITY',
};

/** Where a Pod finds its own namespace. */
export const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The worker's namespace when SVM_NAMESPACE is unset: the Pod's own (in a cluster), else svm-system. */
export function defaultNamespace(read: (path: string) => string = (p) => readFileSync(p, 'utf8')): string {
  try {
    const ns = read(IN_CLUSTER_NAMESPACE_FILE).trim();
    if (ns) return ns;
  } catch {
    // not in a cluster
  }
  return 'svm-system';
}

/** The replica's identity when SVM_IDENTITY is unset: hostname (the pod name in a cluster) and pid. */
export function defaultIdentity(host = hostname(), pid = process.pid): string {
  const clean =
    host
      .replace(/[^-A-Za-z0-9_.]+/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '')
      .slice(0, 100) || 'svm';
  return `${clean}-${pid}`;
}

const fromEnv = (env: NodeJS.ProcessEnv) => ({
  temporal: temporalFromEnv(env),
  versioning: versioningFromEnv(env),
  kubeconfig: env.KUBECONFIG || undefined,
  kubeContext: env.SVM_KUBE_CONTEXT || undefined,
  kubeconfigDir: env.SVM_KUBECONFIG_DIR || undefined,
  kubeconfigSecrets: env.SVM_KUBECONFIG_SECRETS || undefined,
  poolName: env.SVM_POOL_NAME || undefined,
  poolKubeconfigPlugins: env.SVM_POOL_KUBECONFIG_PLUGINS || undefined,
  poolRescanSeconds: env.SVM_POOL_RESCAN_SECONDS || undefined,
  qps: env.SVM_QPS || undefined,
  maxConcurrentChunks: env.SVM_MAX_CONCURRENT_CHUNKS || undefined,
  memoryBudgetBytes: env.SVM_MEMORY_BUDGET_BYTES || undefined,
  adaptiveConcurrency: env.SVM_ADAPTIVE_CONCURRENCY || undefined,
  maxCachedWorkflows: env.SVM_MAX_CACHED_WORKFLOWS || undefined,
  maxConcurrentWorkflowTasks: env.SVM_MAX_CONCURRENT_WORKFLOW_TASKS || undefined,
  semiSpaceMiB: env.SVM_SEMI_SPACE_MIB || undefined,
  heapGrowingPercent: env.SVM_HEAP_GROWING_PERCENT || undefined,
  v8OptimizeForSize: env.SVM_V8_OPTIMIZE_FOR_SIZE || undefined,
  bridge: env.SVM_BRIDGE || undefined,
  watchAgreement: env.SVM_WATCH_AGREEMENT || undefined,
  standardMigrations: env.SVM_STANDARD_MIGRATIONS || undefined,
  ownTakeAfterSeconds: env.SVM_OWN_TAKE_AFTER_SECONDS || undefined,
  triggerApi: env.SVM_TRIGGER_API || undefined,
  requireStaticFence: env.SVM_REQUIRE_STATIC_FENCE || undefined,
  requireFence: env.SVM_REQUIRE_FENCE || undefined,
  prune: env.SVM_PRUNE || undefined,
  temporalCredentialSecrets: env.SVM_TEMPORAL_CREDENTIAL_SECRETS || undefined,
  managedFieldsAs: env.SVM_MANAGED_FIELDS_AS || undefined,
  requestSampleSeconds: env.SVM_REQUEST_SAMPLE_SECONDS || undefined,
  clusterReportSeconds: env.SVM_CLUSTER_REPORT_SECONDS || undefined,
  fleetWorker: env.SVM_FLEET_WORKER || undefined,
  metricsPort: env.SVM_METRICS_PORT || undefined,
  metricsHost: env.SVM_METRICS_HOST || undefined,
  kubeNamespace: env.SVM_NAMESPACE || undefined,
  identity: env.SVM_IDENTITY || undefined,
});

/** Settings from the environment, overridden by flags (already camel-cased by the CLI). */
export function loadWorkerSettings(
  env: NodeJS.ProcessEnv,
  flags: Partial<Record<keyof WorkerSettings | keyof TemporalSettings, unknown>> = {},
): WorkerSettings {
  const base = fromEnv(env);
  const pick = <T>(v: T | undefined, d: unknown) => (v === undefined ? d : v);
  const merged = {
    temporal: {
      ...base.temporal,
      address: pick(flags.address, base.temporal.address),
      namespace: pick(flags.namespace, base.temporal.namespace),
      taskQueue: pick(flags.taskQueue, base.temporal.taskQueue),
      cluster: pick(flags.cluster, base.temporal.cluster),
      apiKey: pick(flags.apiKey, base.temporal.apiKey),
      tls: pick(flags.tls, base.temporal.tls),
    },
    versioning: base.versioning,
    kubeconfig: pick(flags.kubeconfig, base.kubeconfig),
    kubeContext: pick(flags.kubeContext, base.kubeContext),
    kubeconfigDir: pick(flags.kubeconfigDir, base.kubeconfigDir),
    kubeconfigSecrets: pick(flags.kubeconfigSecrets, base.kubeconfigSecrets),
    poolName: base.poolName,
    poolKubeconfigPlugins: base.poolKubeconfigPlugins,
    poolRescanSeconds: base.poolRescanSeconds,
    qps: pick(flags.qps, base.qps),
    maxConcurrentChunks: pick(flags.maxConcurrentChunks, base.maxConcurrentChunks),
    memoryBudgetBytes: base.memoryBudgetBytes,
    adaptiveConcurrency: base.adaptiveConcurrency,
    maxCachedWorkflows: base.maxCachedWorkflows,
    maxConcurrentWorkflowTasks: base.maxConcurrentWorkflowTasks,
    semiSpaceMiB: base.semiSpaceMiB,
    heapGrowingPercent: base.heapGrowingPercent,
    v8OptimizeForSize: base.v8OptimizeForSize,
    bridge: pick(flags.bridge, base.bridge),
    watchAgreement: pick(flags.watchAgreement, base.watchAgreement),
    standardMigrations: pick(flags.standardMigrations, base.standardMigrations),
    ownTakeAfterSeconds: base.ownTakeAfterSeconds,
    triggerApi: pick(flags.triggerApi, base.triggerApi),
    requireStaticFence: base.requireStaticFence,
    requireFence: base.requireFence,
    prune: base.prune,
    temporalCredentialSecrets: base.temporalCredentialSecrets,
    managedFieldsAs: base.managedFieldsAs,
    requestSampleSeconds: base.requestSampleSeconds,
    clusterReportSeconds: base.clusterReportSeconds,
    fleetWorker: base.fleetWorker,
    metricsPort: pick(flags.metricsPort, base.metricsPort),
    metricsHost: pick(flags.metricsHost, base.metricsHost),
    kubeNamespace: base.kubeNamespace,
    identity: pick(flags.identity, base.identity),
  };
  const parsed = WorkerSettings.safeParse(merged);
  if (!parsed.success) throw new SettingsError(`invalid setting: ${explainSettings(parsed.error, settingSources)}`);
  if (parsed.data.qps === 'auto' && !parsed.data.adaptiveConcurrency) {
    throw new SettingsError(
      'invalid setting: SVM_QPS=auto (the default) follows the API servers through adaptive concurrency, which SVM_ADAPTIVE_CONCURRENCY=false turns off: give SVM_QPS a number (a fixed budget, 0 for none)',
    );
  }
  if (parsed.data.triggerApi === 'standard' && parsed.data.standardMigrations !== 'defer') {
    throw new SettingsError(
      `invalid setting: SVM_TRIGGER_API=standard hands migrations to the built-in migrator, which needs SVM_STANDARD_MIGRATIONS=defer (it is ${parsed.data.standardMigrations})`,
    );
  }
  try {
    parseSecretRefs(parsed.data.temporalCredentialSecrets, parsed.data.kubeNamespace);
  } catch (err) {
    throw new SettingsError(`invalid setting: SVM_TEMPORAL_CREDENTIAL_SECRETS: ${(err as Error).message}`);
  }
  const pool = parsed.data.kubeconfigDir !== undefined || parsed.data.kubeconfigSecrets !== undefined;
  if (parsed.data.kubeconfigDir !== undefined && parsed.data.kubeconfigSecrets !== undefined)
    throw new SettingsError('invalid setting: SVM_KUBECONFIG_DIR and SVM_KUBECONFIG_SECRETS name two pools of clusters: give one');
  if (pool && parsed.data.temporal.cluster !== undefined)
    throw new SettingsError(
      `invalid setting: SVM_CLUSTER names one cluster, and ${parsed.data.kubeconfigDir !== undefined ? 'SVM_KUBECONFIG_DIR' : 'SVM_KUBECONFIG_SECRETS'} a pool whose kubeconfigs name each of theirs: give one`,
    );
  return parsed.data;
}
