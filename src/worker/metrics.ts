/**
 * The worker's Prometheus endpoint: the migrator's own metrics (prom-client)
 * followed by the Temporal SDK's (scraped from the runtime's own exporter on
 * a loopback port), on one /metrics. Labels carry resource names and outcomes
 * only: never object data.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Placement } from '../contract/placement';

export interface MigratorMetrics {
  registry: Registry;
  /** Objects processed, by resource and outcome (migrated, conflict, notFound, failed). */
  objects: Counter<'resource' | 'outcome'>;
  /** Objects whose update re-encoded them in etcd. */
  rewritten: Counter<'resource'>;
  /** Latency of one no-op update (seconds). */
  updateLatency: Histogram<'resource'>;
  /** Migrations that ended, by result (Succeeded, Failed, Aborted). */
  migrations: Counter<'resource' | 'result'>;
  /** Migrations currently waiting for the API servers to agree on a storage version. */
  waiting: Gauge<'resource'>;
  /** Objects svm acts on whose status another controller writes too (never two controllers). */
  sharedObjects: Counter;
  /** StorageVersionMigration status writes given up after their retries (the migration went on; repaired later). */
  mirrorFailures: Counter;
  /** Standard StorageVersionMigration objects no controller has acted on in time (deferring mode; src/worker/unattended.ts). */
  unattended: Gauge;
  /** Standard objects svm (own mode) left to another controller (the built-in migrator) that wrote them first. */
  leftToBuiltIn: Counter;
  /** Per resource: its StorageState says migrated with no whole pass on record in Temporal (the trigger; 1 or 0). */
  mirrorsWithoutRecord: Gauge;
  /** Updates this worker keeps in flight at most now (src/kube/adaptive-concurrency.ts); unset without it. */
  concurrencyLimit: Gauge;
  /** When this worker last wrote a migration's status (unix seconds): with several replicas, the latest one holds its phase. */
  statusReported: Gauge<'resource'>;
  /** 1 while this replica is the elected leader (runs the singletons), else 0; unset when no singleton is enabled. */
  leader: Gauge;
  /** A named cluster's worker: 1 while its API is not the cluster pinned to its name (it serves nothing), else 0. */
  identityConflict: Gauge;
  /** 1 when a Secret holding the worker's Temporal credential is readable with its own token, else 0 (src/kube/credential-exposure.ts). */
  credentialReadable: Gauge;
  /** This replica's share of the cluster-wide budget, updates per second (0 while holding); unset when the budget is unlimited. */
  budgetShare: Gauge;
  /** Updates waiting for a token of the budget on this replica now; unset when the budget is unlimited. */
  budgetWaiting: Gauge;
  /** 1 while this replica spends the fallback share because the Lease API does not answer. */
  budgetFallback: Gauge;
  /** The worker's memory budget (SVM_MEMORY_BUDGET_BYTES), bytes; unset when there is none. */
  memoryBudget: Gauge;
  /** Bytes of listed objects the chunks of this worker hold now under the memory budget. */
  memoryHeld: Gauge;
  /** Chunks waiting for room in the memory budget now. */
  memoryWaiting: Gauge;
  /** Objects whose chunk had to wait for room in the memory budget. */
  memoryWaits: Counter;
  /** Seconds chunks spent waiting for room in the memory budget, in all. */
  memoryWaitSeconds: Counter;
  /** 1 on the series of this worker's Worker Deployment version; unset when the worker is unversioned. */
  versionInfo: Gauge<VersionLabel>;
  /** 1 on the series of its deployment's Current Version as this worker last read it; none while none is Current. */
  currentVersion: Gauge<VersionLabel>;
}

/** The labels of a Worker Deployment version: the Temporal namespace, the deployment, the build ID. */
export type VersionLabel = 'temporal_namespace' | 'deployment_name' | 'build_id';
const VERSION_LABELS: VersionLabel[] = ['temporal_namespace', 'deployment_name', 'build_id'];

/**
 * The worker's metrics. A named cluster's carry it as the label `cluster` (its placement's labels: SVM_CLUSTER; each cluster of a pool
 * its own), so that one Prometheus and the dashboard's cluster variable tell the clusters apart; svm_worker_up
 * says which clusters a process serves. The process's own (memory, CPU) are left out in a pool, whose
 * processMetrics() has them once, unlabelled. They keep prom-client's standard names (process_*, nodejs_*; no
 * prefix), which stock Node.js dashboards and alerts read; every Node.js process Prometheus scrapes exports the
 * same names, so a query of svm's selects its targets by svm_worker_up (the dashboard joins on job and instance).
 */
export function createMetrics(opts: { placement?: Placement; processMetrics?: boolean } = {}): MigratorMetrics {
  const registry = new Registry();
  registry.setDefaultLabels(opts.placement?.labels ?? {});
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'svm_worker_up',
    help: 'A worker of this process serves the cluster of its label (1); no label: the only cluster',
    registers: [registry],
  }).set(1);
  // Registered in this order, which is their order on /metrics.
  return {
    registry,
    ...objectMetrics(registry),
    ...migrationMetrics(registry),
    ...mirrorMetrics(registry),
    ...replicaMetrics(registry),
    ...budgetMetrics(registry),
    ...memoryMetrics(registry),
    ...versionMetrics(registry),
  };
}

/** The objects the no-op updates processed and rewrote, and how long one update took. */
function objectMetrics(registry: Registry): Pick<MigratorMetrics, 'objects' | 'rewritten' | 'updateLatency'> {
  return {
    objects: new Counter({
      name: 'svm_objects_total',
      help: 'Objects processed by no-op updates, by outcome',
      labelNames: ['resource', 'outcome'],
      registers: [registry],
    }),
    rewritten: new Counter({
      name: 'svm_objects_rewritten_total',
      help: 'Objects re-encoded in etcd by their no-op update',
      labelNames: ['resource'],
      registers: [registry],
    }),
    updateLatency: new Histogram({
      name: 'svm_update_duration_seconds',
      help: 'Latency of one no-op update (PUT)',
      labelNames: ['resource'],
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5],
      registers: [registry],
    }),
  };
}

/** Migrations ended, and those waiting for agreement. */
function migrationMetrics(registry: Registry): Pick<MigratorMetrics, 'migrations' | 'waiting'> {
  return {
    migrations: new Counter({
      name: 'svm_migrations_total',
      help: 'Migrations that ended, by result',
      labelNames: ['resource', 'result'],
      registers: [registry],
    }),
    waiting: new Gauge({
      name: 'svm_migrations_waiting_for_agreement',
      help: 'Migrations waiting for the API servers to agree on the storage version',
      labelNames: ['resource'],
      registers: [registry],
    }),
  };
}

/** The StorageVersionMigration and StorageState objects svm mirrors its record to, and the controllers beside it. */
function mirrorMetrics(
  registry: Registry,
): Pick<MigratorMetrics, 'sharedObjects' | 'unattended' | 'mirrorsWithoutRecord' | 'leftToBuiltIn' | 'mirrorFailures'> {
  return {
    sharedObjects: new Counter({
      name: 'svm_migration_objects_shared_total',
      help: 'StorageVersionMigration objects svm acts on whose status another controller (the built-in migrator) writes too',
      registers: [registry],
    }),
    unattended: new Gauge({
      name: 'svm_standard_migrations_unattended',
      help: 'storagemigration.k8s.io objects no controller has acted on within the bound after their creation (svm defers them to a built-in migrator that does not seem to run)',
      registers: [registry],
    }),
    mirrorsWithoutRecord: new Gauge({
      name: 'svm_storage_state_without_record',
      help: 'per resource, 1 while its StorageState says migrated but no whole pass at that hash is on record in Temporal (a mirror the worker token can write: the trigger migrates it rather than believe it)',
      labelNames: ['resource'],
      registers: [registry],
    }),
    leftToBuiltIn: new Counter({
      name: 'svm_standard_migrations_left_to_builtin_total',
      help: 'storagemigration.k8s.io objects svm was configured to own but left to another controller (the built-in migrator), which wrote their status first',
      registers: [registry],
    }),
    mirrorFailures: new Counter({
      name: 'svm_status_mirror_failures_total',
      help: 'StorageVersionMigration status writes given up after their retries: the migration goes on, the bridge repairs the status later',
      registers: [registry],
    }),
  };
}

/** This replica: its concurrency, its status reports, its cluster identity, its leadership. */
function replicaMetrics(
  registry: Registry,
): Pick<MigratorMetrics, 'concurrencyLimit' | 'statusReported' | 'identityConflict' | 'credentialReadable' | 'leader'> {
  return {
    concurrencyLimit: new Gauge({
      name: 'svm_update_concurrency_limit',
      help: 'No-op updates this worker keeps in flight at most, adapted to the API servers latency',
      registers: [registry],
    }),
    statusReported: new Gauge({
      name: 'svm_migration_status_timestamp_seconds',
      help: "When this worker last reported a migration's status (unix seconds): the replica with the latest report holds its phase",
      labelNames: ['resource'],
      registers: [registry],
    }),
    identityConflict: new Gauge({
      name: 'svm_cluster_identity_conflict',
      help: '1 while the API this worker reaches is not the cluster pinned to its name (it serves nothing until resolved: svm fleet pin), else 0; unset on a single-cluster worker',
      registers: [registry],
    }),
    credentialReadable: new Gauge({
      name: 'svm_temporal_credential_readable',
      help: "1 when a Secret holding this worker's Temporal credential (SVM_TEMPORAL_CREDENTIAL_SECRETS) can be read with the worker's own Kubernetes token (get or list), else 0; unset when none is named",
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'svm_leader',
      help: 'Whether this replica holds the leader Lease and runs the singletons (the bridge, the agreement watcher)',
      registers: [registry],
    }),
  };
}

/** This replica's share of the cluster-wide load budget. */
function budgetMetrics(registry: Registry): Pick<MigratorMetrics, 'budgetShare' | 'budgetWaiting' | 'budgetFallback'> {
  return {
    budgetShare: new Gauge({
      name: 'svm_budget_share_qps',
      help: "This replica's share of the cluster-wide load budget, updates per second (0 while holding)",
      registers: [registry],
    }),
    budgetWaiting: new Gauge({
      name: 'svm_budget_waiting_updates',
      help: 'Updates waiting for a token of the load budget on this replica',
      registers: [registry],
    }),
    budgetFallback: new Gauge({
      name: 'svm_budget_fallback',
      help: '1 while this replica spends the fallback share (the even split of the members last seen) because the Lease API does not answer',
      registers: [registry],
    }),
  };
}

/** The worker's memory budget. */
function memoryMetrics(
  registry: Registry,
): Pick<MigratorMetrics, 'memoryBudget' | 'memoryHeld' | 'memoryWaiting' | 'memoryWaits' | 'memoryWaitSeconds'> {
  return {
    memoryBudget: new Gauge({
      name: 'svm_memory_budget_bytes',
      help: "The worker's memory budget (SVM_MEMORY_BUDGET_BYTES): bytes of listed objects all its chunks hold at most",
      registers: [registry],
    }),
    memoryHeld: new Gauge({
      name: 'svm_memory_budget_held_bytes',
      help: 'Bytes of listed objects (waiting for or in their update) the chunks of this worker hold now under the memory budget',
      registers: [registry],
    }),
    memoryWaiting: new Gauge({
      name: 'svm_memory_budget_waiting_chunks',
      help: 'Chunks waiting for room in the memory budget now (their list responses are not read meanwhile)',
      registers: [registry],
    }),
    memoryWaits: new Counter({
      name: 'svm_memory_budget_waits_total',
      help: 'Objects whose chunk had to wait for room in the memory budget before reading its list further',
      registers: [registry],
    }),
    memoryWaitSeconds: new Counter({
      name: 'svm_memory_budget_wait_seconds_total',
      help: 'Seconds chunks spent waiting for room in the memory budget, in all',
      registers: [registry],
    }),
  };
}

/** Worker Versioning: this worker's version, and its deployment's Current one. */
function versionMetrics(registry: Registry): Pick<MigratorMetrics, 'versionInfo' | 'currentVersion'> {
  return {
    versionInfo: new Gauge({
      name: 'svm_worker_version_info',
      help: "This worker's Worker Deployment version (Worker Versioning): 1 on the series of its deployment and build ID",
      labelNames: VERSION_LABELS,
      registers: [registry],
    }),
    currentVersion: new Gauge({
      name: 'svm_worker_deployment_current_version',
      help: "The Current Version of this worker's Worker Deployment as the worker last read it from Temporal: 1 on the series of its build ID, none while no version is Current",
      labelNames: VERSION_LABELS,
      registers: [registry],
    }),
  };
}

/**
 * The body of a 200 answer to GET url (plain http), through node:http, which the worker has loaded anyway. Not
 * the global fetch: its first call loads and compiles undici, ~25 MiB of RSS for a moment, which was the
 * worker's peak under load (docs/benchmarks.md).
 */
function getText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`${res.statusCode}`)),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

/** A pool's process metrics (memory, CPU, event loop; process_*, nodejs_*), once for all its clusters and labelled with none. */
export function processMetrics(): Pick<MigratorMetrics, 'registry'> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return { registry };
}

/** Serves /metrics; appends the text of sdkMetricsUrl (the Temporal runtime's exporter) when given. */
export async function serveMetrics(
  metrics: Pick<MigratorMetrics, 'registry'> | Array<Pick<MigratorMetrics, 'registry'>> | (() => Array<Pick<MigratorMetrics, 'registry'>>),
  port: number,
  host: string,
  sdkMetricsUrl?: string,
): Promise<{ port: number; close(): Promise<void> }> {
  // A function: read at every scrape (a pool's clusters come and go).
  const current = typeof metrics === 'function' ? metrics : () => (Array.isArray(metrics) ? metrics : [metrics]);
  const server = http.createServer((req, res) => {
    const registries = current().map((m) => m.registry);
    if (req.url !== '/metrics') {
      res.statusCode = req.url === '/healthz' ? 200 : 404;
      res.end(req.url === '/healthz' ? 'ok\n' : 'not found\n');
      return;
    }
    void (async () => {
      let text = mergeExpositions(await Promise.all(registries.map((r) => r.metrics())));
      if (sdkMetricsUrl) {
        const sdk = await getText(sdkMetricsUrl).catch(() => undefined); // undefined: the runtime exporter is not up yet
        if (sdk !== undefined) text += '\n# Temporal SDK metrics\n' + sdk;
      }
      res.setHeader('Content-Type', registries[0]!.contentType);
      res.end(text);
    })();
  });
  // A port that cannot be had (taken, privileged) is said with the setting that names it, not thrown as an unhandled 'error'.
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(`cannot serve /metrics on ${host}:${port} (SVM_METRICS_PORT, SVM_METRICS_HOST): ${err.code ?? err.message}`)),
    );
    server.listen(port, host, () => resolve());
  });
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * Several registries' text expositions as one: each metric family once (its HELP and TYPE from the first that has
 * it), with the samples of all of them (told apart by their `cluster` label). The text format allows one block
 * per family: two registries' texts joined as they are would repeat a family, which Prometheus refuses.
 */
export function mergeExpositions(texts: string[]): string {
  if (texts.length === 1) return texts[0]!;
  const families = new Map<string, { head: string[]; samples: string[] }>();
  for (const text of texts) {
    let current: { head: string[]; samples: string[] } | undefined;
    for (const line of text.split('\n')) {
      const head = /^# (HELP|TYPE) (\S+)/.exec(line);
      if (head) {
        const name = head[2]!;
        const known = families.get(name);
        current = known ?? { head: [], samples: [] };
        if (!known) families.set(name, current);
        if (current.head.length < 2 && !current.head.some((h) => h.startsWith(`# ${head[1]} `))) current.head.push(line);
      } else if (line !== '' && current) current.samples.push(line);
    }
  }
  return [...families.values()].map((f) => [...f.head, ...f.samples].join('\n')).join('\n\n') + '\n';
}

/** Quantile estimate from a histogram's cumulative buckets (linear within a bucket). */
export function histogramQuantile(q: number, buckets: Array<{ le: number; count: number }>): number {
  const total = buckets[buckets.length - 1]?.count ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (!Number.isFinite(b.le)) return prevLe;
      return prevLe + ((b.le - prevLe) * (rank - prevCount)) / Math.max(1, b.count - prevCount);
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

/** The names of every metric the worker registers itself (the Temporal SDK's, appended to /metrics, are not among them). */
export async function metricNames(): Promise<string[]> {
  return (await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name);
}
