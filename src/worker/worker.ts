/**
 * The worker process: runs migration workflows and their activities; beside
 * them, on every replica, its share of the cluster-wide load budget
 * (src/worker/budget.ts), and on the elected leader only
 * (src/worker/leader.ts), the singletons: the StorageVersionMigration bridge
 * and the agreement watcher. How the process is tuned (V8) and its load held
 * (the rate, the budget, adaptive concurrency, memory): ./tuning.ts.
 */
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createLogger, installRuntime } from './logging';
import { createActivities } from '../activities';
import { warnIfRewriteForced } from '../activities/migrate-chunk';
import { kubernetesEndpoints } from '../kube/apiservers';
import { clusterUidReader } from '../kube/cluster-uid';
import { credentialExposure, exposureMessage, parseSecretRefs } from '../kube/credential-exposure';
import { fleetTaskQueue } from '../api/cluster';
import { Placement } from '../contract/placement';
import { createFleetActivities } from '../activities/fleet';
import { FleetDomains } from '../activities/fleet-domains';
import { ClusterIdentity, startRegistration } from './registration';
import { clusterCheck } from './cluster-check';
import { workerRequestSampler } from '../kube/request-samples';
import { KubeClient } from '../kube/client';
import { workflowBundleOption } from './workflow-bundle';
import { explainTemporalConnectError, temporalConnectionOptions } from '../config/temporal';
import type { WorkerSettings } from './config';
import { startVersioning } from './services';
import { ClusterMembership } from './membership';
import { createMetrics, serveMetrics, type MigratorMetrics } from './metrics';
import { randomUUID } from 'node:crypto';
import { svmBuild } from '../config/build-info';
import { workerDeploymentOptions } from './versioning';
import { activityPolls, loadControls, tuneV8 } from './tuning';

export { createFileLogger, createLogger, installRuntime, readableLine } from './logging';
export { activityPolls, limitHeapGrowth, limitYoungGeneration, loadControls, memoryBudget, optimizeForSize, tuneV8 } from './tuning';

/** Identities of the workers of this process: a second worker in one process (tests) gets a suffix. */
const identitiesInUse = new Set<string>();
function claimIdentity(wanted: string): string {
  let id = wanted;
  for (let i = 2; identitiesInUse.has(id); i++) id = `${wanted}-${i}`;
  identitiesInUse.add(id);
  return id;
}
function releaseIdentity(id: string): void {
  identitiesInUse.delete(id);
}

export interface MigratorWorker {
  worker: Worker;
  kube: KubeClient;
  metrics?: MigratorMetrics;
  /**
   * The port /metrics is served on while the worker runs: the one bound, which SVM_METRICS_PORT=0 leaves to the OS.
   * Undefined before run or runUntil serves it, after they end, and when the worker serves none (no port set, in a pool).
   */
  readonly metricsPort: number | undefined;
  /** Runs the worker (and the bridge) until fn settles, then shuts both down. */
  runUntil<T>(fn: Promise<T> | (() => Promise<T>)): Promise<T>;
  /** Closes what a worker that never ran holds (its connection, clients, sampler); run and runUntil do it themselves. */
  close(): Promise<void>;
  /** Runs until the process is asked to stop (SIGINT/SIGTERM). */
  run(): Promise<void>;
}

/** A named cluster's identity (confirmed before it serves, src/worker/registration.ts); none for a single cluster. */
function clusterIdentity(
  settings: WorkerSettings,
  placement: Placement,
  deps: {
    client: Client;
    uid: () => Promise<string>;
    apiservers: ReturnType<typeof kubernetesEndpoints>;
    kube: KubeClient;
    log: Logger;
    metrics?: MigratorMetrics;
  },
): ClusterIdentity | undefined {
  const name = placement.name;
  if (name === undefined) return undefined;
  return ClusterIdentity.of({
    ...deps,
    fleetQueue: fleetTaskQueue(placement.base),
    name,
    // Its own queue, said in its registration: start paths place the cluster's workflows there (and not on a pool's).
    queue: placement.taskQueue,
    where: `kubeconfig ${settings.kubeconfig ?? process.env.KUBECONFIG ?? '(in-cluster)'}, server ${deps.kube.server}`,
    svmVersion: svmBuild().version,
  });
}

/** Runs the fleet's worker (if any) while main runs, and shuts it down once main has ended. */
export async function alongside<T>(fleet: Worker | undefined, main: Promise<T>): Promise<T> {
  if (!fleet) return main;
  const running = fleet.run();
  try {
    return await main;
  } finally {
    if (fleet.getState() === 'RUNNING') fleet.shutdown();
    await running;
  }
}

/** The Temporal worker on the settings' task queue, with the activities given, sized for a handful of migrations. */
async function temporalWorker(
  connection: NativeConnection,
  settings: WorkerSettings,
  activities: ReturnType<typeof createActivities>,
  deployment: ReturnType<typeof workerDeploymentOptions>,
  identity: ClusterIdentity | undefined,
  placement: Placement,
): Promise<Worker> {
  return Worker.create({
    connection,
    namespace: settings.temporal.namespace,
    // A named cluster's own queue (SVM_CLUSTER); the configured one otherwise.
    taskQueue: placement.taskQueue,
    // Every activity checks first that it belongs to the cluster this worker serves, and that the API is that cluster.
    interceptors: { activity: [clusterCheck(placement.name, identity)] },
    workerDeploymentOptions: deployment,
    // Prebuilt at build time (npm run build:workflows, the image) when up to date; bundled here otherwise.
    workflowBundle: await workflowBundleOption(),
    activities,
    maxConcurrentActivityTaskExecutions: settings.maxConcurrentChunks * 2,
    // Two activity polls, not one per slot (the SDK's default, up to 10): a poll holds a slot while it waits, and
    // a server with eager activity dispatch (system.enableActivityEagerExecution) hands an activity to the worker
    // that completed the workflow task only when that worker has a slot free. With every slot held by a poll it
    // never does, and each step of a migration waits for the server's dispatch instead (docs/benchmarks.md:
    // about 45 ms a step, twice per activity with the workflow task).
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: activityPolls(settings.maxConcurrentChunks * 2) },
    // A handful of workflows run at once: a small cache and few workflow task slots (and so pollers)
    // instead of the SDK's defaults sized for thousands (docs/benchmarks.md: peak RSS).
    maxCachedWorkflows: settings.maxCachedWorkflows,
    maxConcurrentWorkflowTaskExecutions: settings.maxConcurrentWorkflowTasks,
    // Cancellation (abort) reaches a chunk through its heartbeats: send them often enough.
    maxHeartbeatThrottleInterval: '2 seconds',
  });
}

/**
 * The fleet's worker beside a named cluster's (SVM_FLEET_WORKER): campaigns and registrations on the fleet task
 * queue, with the one activity that lists registrations. No Kubernetes, no cluster check: they belong to no cluster.
 */
export async function fleetWorker(
  connection: NativeConnection,
  settings: WorkerSettings,
  client: Client,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Worker> {
  const t = settings.temporal;
  // Trust domains (SVM_FLEET_DOMAINS, docs/fleet.md): this worker alone holds a client per domain; unset: one namespace.
  const domains = FleetDomains.fromEnv(env, t);
  const worker = await Worker.create({
    connection,
    namespace: t.namespace,
    taskQueue: fleetTaskQueue(t.taskQueue),
    workflowBundle: await workflowBundleOption(),
    activities: createFleetActivities({ temporal: { client }, ...(domains ? { domains } : {}) }),
    maxCachedWorkflows: settings.maxCachedWorkflows,
    maxConcurrentWorkflowTaskExecutions: settings.maxConcurrentWorkflowTasks,
    // With domains, each member in flight holds a slot while it awaits its step (awaitDomainStep): room for a window's.
    maxConcurrentActivityTaskExecutions: domains ? 200 : 2,
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: domains ? 2 : 1 },
  });
  if (domains) {
    // The domains' connections end with the worker (runUntil runs through run).
    const run = worker.run.bind(worker);
    worker.run = () => run().finally(() => domains.close());
  }
  return worker;
}

/** How a worker lives beside others in one process (a pool of clusters, src/worker/cluster-pool.ts). */
export interface InPool {
  /** The pool serves every cluster's metrics on one endpoint, and the process's own once: this worker serves none. */
  metricsServedByPool: boolean;
}

export async function createMigratorWorker(settings: WorkerSettings, log: Logger = createLogger(), pool?: InPool): Promise<MigratorWorker> {
  const t = settings.temporal;
  if (!t.address) throw new Error('TEMPORAL_ADDRESS is not set');
  tuneV8(settings);
  const sdkUrl = await installRuntime(log, settings.metricsPort !== undefined, pool !== undefined);
  // Where this worker's workflows and activities run, made once from its settings: its cluster's task queue when one
  // is named.
  const placement = Placement.of(t.taskQueue, t.cluster);
  const metrics = settings.metricsPort !== undefined ? createMetrics({ placement, processMetrics: pool === undefined }) : undefined;
  // The kubeconfig first: a malformed one (a pool's Secret, say) throws before a connection is opened.
  const kube = KubeClient.fromKubeconfig(settings.kubeconfig, { maxSockets: 128, context: settings.kubeContext });
  const connection = await NativeConnection.connect(temporalConnectionOptions({ ...t, address: t.address })).catch(async (e: unknown) => {
    kube.close();
    throw await explainTemporalConnectError(e, { ...t, address: t.address! });
  });
  warnIfRewriteForced(log);
  const parts = workerParts(settings, { placement, kube, connection, log, metrics });
  try {
    const worker = await temporalWorker(
      connection,
      settings,
      createActivities(activityDeps(settings, parts)),
      parts.deployment,
      parts.clusterId,
      parts.placement,
    );
    const fleet = t.cluster && settings.fleetWorker ? await fleetWorker(connection, settings, parts.client) : undefined;
    return new WorkerProcess({ ...parts, settings, pool, sdkUrl, worker, fleet });
  } catch (err) {
    // Refused (a namespace it may not use, say): what was opened for it is closed, or the process never exits.
    closeParts(parts);
    await connection.close().catch(() => undefined);
    throw explainWorkerCreateError(err, t);
  }
}

/** What workerParts opened, closed (the connection is closed by its owner). */
function closeParts(p: Pick<WorkerParts, 'sampler' | 'kube' | 'apiservers'>): void {
  p.sampler.stop();
  p.kube.close();
  p.apiservers.close();
}

/** A worker the server refuses its namespace: said as svm's client says it (the Rust core's words kept). */
function explainWorkerCreateError(err: unknown, t: WorkerSettings['temporal']): unknown {
  const message = err instanceof Error ? err.message : String(err);
  if (!/PermissionDenied|PERMISSION_DENIED/.test(message)) return err;
  const e = new Error(
    `cannot use Temporal: the Temporal server at ${t.address} refused svm's credential for namespace ${t.namespace}: ${t.apiKey ? "the API key (TEMPORAL_API_KEY or the profile's api_key) is expired, signed by a key the server does not trust, or grants nothing there" : 'svm has none (set TEMPORAL_API_KEY)'} (${message.split('\n')[0]})`,
  );
  (e as { cause?: unknown }).cause = err;
  return e;
}

/** What a worker is made of beside its Temporal worker: made once, from its settings, its API and its connection. */
function workerParts(
  settings: WorkerSettings,
  o: { placement: Placement; kube: KubeClient; connection: NativeConnection; log: Logger; metrics: MigratorMetrics | undefined },
) {
  const { placement, kube, connection, log, metrics } = o;
  const t = settings.temporal;
  const clusterUid = clusterUidReader(kube);
  // Every API server, found through the one API address (the `kubernetes` EndpointSlice and identity leases).
  const apiservers = kubernetesEndpoints(kube);
  const identity = claimIdentity(settings.identity);
  // This process's instance: with the identity, it holds the leader and budget leases, so two processes given one
  // SVM_IDENTITY never both lead, nor share one budget membership.
  const instance = randomUUID().slice(0, 8);
  // The bridge, the agreement watcher and the activities start and signal workflows over the worker's own
  // connection (the Rust core's), not a second one through grpc-js.
  const client = new Client({ connection, namespace: t.namespace });
  return {
    kube,
    connection,
    log,
    metrics,
    client,
    clusterUid,
    apiservers,
    identity,
    instance,
    holder: `${identity}_${instance}`,
    placement,
    // A day of every API server's request counters, for the drop check this worker runs (SVM_REQUEST_SAMPLE_SECONDS).
    sampler: workerRequestSampler(apiservers, settings.requestSampleSeconds, log),
    controls: loadControls(settings, metrics),
    // A version of a Worker Deployment when TEMPORAL_DEPLOYMENT_NAME is set; unversioned otherwise.
    // A named cluster's own deployment (src/worker/versioning.ts, deploymentNameOf): its builds become Current alone.
    deployment: workerDeploymentOptions(settings.versioning, () => svmBuild(), { cluster: placement.name }),
    clusterId: clusterIdentity(settings, placement, { client, uid: clusterUid, apiservers, kube, log, metrics }),
  };
}
type WorkerParts = ReturnType<typeof workerParts>;

/** The activities' dependencies, from the worker's parts. */
function activityDeps(settings: WorkerSettings, p: WorkerParts): Parameters<typeof createActivities>[0] {
  const { budget, concurrency, memory } = p.controls;
  return {
    kube: p.kube,
    budget,
    concurrency,
    memory,
    metrics: p.metrics,
    apiservers: p.apiservers,
    requestSamples: p.sampler.samples,
    temporal: { client: p.client, placement: p.placement },
    clusterUid: p.clusterUid,
    triggerApi: settings.triggerApi,
    standardMigrations: settings.standardMigrations,
    managedFieldsAs: settings.managedFieldsAs,
    requireStaticFence: settings.requireStaticFence,
    requireFence: settings.requireFence,
    prune: settings.prune,
  };
}

/** A worker made and not yet run, or running: what lives beside its Temporal worker is started by run and runUntil. */
class WorkerProcess implements MigratorWorker {
  readonly worker: Worker;
  readonly kube: KubeClient;
  readonly metrics: MigratorMetrics | undefined;
  /** The port /metrics is served on while it runs. */
  metricsPort: number | undefined;

  constructor(
    private readonly o: WorkerParts & {
      settings: WorkerSettings;
      pool: InPool | undefined;
      sdkUrl: string | undefined;
      worker: Worker;
      fleet: Worker | undefined;
    },
  ) {
    this.worker = o.worker;
    this.kube = o.kube;
    this.metrics = o.metrics;
  }

  async close(): Promise<void> {
    closeParts(this.o);
    await this.o.connection.close();
  }

  async runUntil<T>(fn: Promise<T> | (() => Promise<T>)): Promise<T> {
    try {
      return await this.withServices(() => alongside(this.o.fleet, this.worker.runUntil(fn)));
    } finally {
      await this.close();
    }
  }

  async run(): Promise<void> {
    const { settings, placement, deployment, identity, holder } = this.o;
    const t = settings.temporal;
    this.o.log.info(
      {
        taskQueue: placement.taskQueue,
        cluster: placement.name, // none (left out of the line) in a single-cluster install
        namespace: t.namespace,
        address: t.address,
        qps: settings.qps,
        memoryBudgetBytes: settings.memoryBudgetBytes,
        identity,
        holder,
        leases: settings.kubeNamespace,
        deploymentVersion: deployment ? `${deployment.version.deploymentName}.${deployment.version.buildId}` : 'unversioned',
      },
      'worker started',
    );
    try {
      await this.withServices(() => alongside(this.o.fleet, this.worker.run()));
    } finally {
      await this.close();
    }
  }

  /**
   * Runs fn with what lives beside the worker: the metrics endpoint, the
   * budget membership (always, when the budget is limited), and the
   * singletons while this replica is the leader.
   */
  private async withServices<T>(fn: () => Promise<T>): Promise<T> {
    const { settings, log, clusterId, deployment, client, holder, metrics } = this.o;
    const endpoint = await this.serveMetrics();
    void this.reportCredentialReach();
    // A named cluster confirms its identity and reports itself to its registration in Temporal (where campaigns find
    // it), before its worker polls: a conflict is said at start.
    const registration = clusterId ? startRegistration(clusterId, settings.clusterReportSeconds, log) : undefined;
    await registration?.reported;
    const membership = this.joinMembership();
    const versioning = deployment ? startVersioning({ client, deployment, settings, holder, log, metrics }) : undefined;
    try {
      return await fn();
    } finally {
      registration?.stop();
      await versioning?.stop();
      await membership.leave();
      releaseIdentity(this.o.identity);
      this.metricsPort = undefined;
      await endpoint?.close();
    }
  }

  /**
   * Whether the Secrets named as holding this worker's Temporal credential can be read with its own token: said at
   * start, as a warning and svm_temporal_credential_readable (src/kube/credential-exposure.ts). Never fatal.
   */
  private async reportCredentialReach(): Promise<void> {
    const { settings, kube, log, metrics, pool } = this.o;
    if (pool) return; // a pool's kubeconfigs reach the served clusters, not where its own credential is kept
    const refs = parseSecretRefs(settings.temporalCredentialSecrets, settings.kubeNamespace);
    if (refs.length === 0) return;
    try {
      const found = await credentialExposure(kube, refs);
      metrics?.credentialReadable.set(found.length > 0 ? 1 : 0);
      if (found.length > 0) log.warn({ secrets: found.map((f) => f.secret) }, exposureMessage('this worker', found));
      else
        log.info(
          { secrets: refs.map((r) => `${r.namespace}/${r.name}`) },
          "the Temporal credential's Secrets are beyond this worker's token",
        );
    } catch (err) {
      log.warn({ err: (err as Error).message }, "could not check whether this worker's token can read its Temporal credential's Secrets");
    }
  }

  /** The metrics endpoint, unless none is set or the pool serves every cluster's. */
  private async serveMetrics() {
    const { metrics, pool, settings, sdkUrl, log } = this.o;
    const endpoint =
      metrics && !pool?.metricsServedByPool ? await serveMetrics(metrics, settings.metricsPort!, settings.metricsHost, sdkUrl) : undefined;
    if (endpoint) log.info({ port: endpoint.port, host: settings.metricsHost }, 'metrics on /metrics');
    this.metricsPort = endpoint?.port;
    return endpoint;
  }

  /**
   * The budget membership and leader election, joined now, or once the cluster's identity is confirmed. Note: a
   * worker whose identity is in conflict reaches another cluster's API: its Leases there would take the leadership
   * and budget of that cluster's own workers.
   */
  private joinMembership(): ClusterMembership {
    const { settings, kube, client, placement, identity, holder, instance, log, metrics, clusterId } = this.o;
    const { fixedQps, budget } = this.o.controls;
    const membership = new ClusterMembership({
      settings,
      kube,
      client,
      placement,
      identity,
      holder,
      instance,
      fixedQps,
      budget,
      log,
      metrics,
    });
    if (!clusterId || clusterId.pinned) membership.join();
    else void clusterId.confirmed.then(() => membership.join());
    return membership;
  }
}
