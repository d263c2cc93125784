/**
 * A pool: one process serving several clusters of one trust domain (docs/fleet.md, "A pool of workers in a
 * management cluster"). What is really per process is made once: one connection to Temporal, one workflow worker
 * and one activity worker (a single Temporal Worker) on the pool's task queue `<base>/pool/<pool>`, the fleet's
 * worker when SVM_FLEET_WORKER, the Worker Deployment version (`<deployment>-pool-<pool>`), one /metrics, the memory
 * budget. What is really per cluster is made per cluster, without a Temporal worker: its kube client, its identity
 * and registration (reported on change, a heartbeat hourly), its load budget and adaptive rate, its leases (budget
 * membership, leader election and the singletons the leader runs: the bridge, the agreement watcher), its request
 * samples and its metrics (labelled with it), and its activities, which the pool's activity worker runs for the
 * cluster a task's header names (src/worker/pool-dispatch.ts).
 *
 * The workflow code does not depend on the cluster (it travels in the input and the activity header), so one
 * workflow isolate serves every cluster. Each cluster's registration names the pool's queue, where start paths
 * place its workflows (Placement's queue, src/contract/placement.ts).
 *
 * Clusters come and go (src/worker/cluster-pool.ts, diffClusters; PoolRescan below): every SVM_POOL_RESCAN_SECONDS
 * the pool reads its directory or Secrets again; a new cluster is taken; a removed one is let go once its running
 * activities end (its later tasks wait ten minutes for it to come back, then fail ClusterLetGo:
 * src/worker/pool-dispatch.ts); a changed kubeconfig is let go and taken again, its identity confirmed anew (a
 * recreated cluster is an identity conflict until `svm fleet pin`).
 *
 * The parts, each a class whose state is its own fields: ServedMember (src/worker/pool-member.ts), one served
 * cluster; PoolDispatcher, the clusters served and let go, and which one a task runs with; PoolRescan, the source
 * read again; Pool, the process's connection and worker and what lives beside them. createClusterPool makes them.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { poolTaskQueue } from '../api/cluster';
import { warnIfRewriteForced } from '../activities/migrate-chunk';
import { svmBuild } from '../config/build-info';
import { explainTemporalConnectError, temporalConnectionOptions } from '../config/temporal';
import { pinOf } from '../kube/cluster-identity';
import { diffClusters, type PoolSource, type ServedCluster } from './cluster-pool';
import type { WorkerSettings } from './config';
import { installRuntime } from './logging';
import { processMetrics, serveMetrics, type MigratorMetrics } from './metrics';
import { notServed, poolDispatch, type Absence } from './pool-dispatch';
import { ServedMember, type PoolShared } from './pool-member';
import { startVersioning } from './services';
import { workerDeploymentOptions } from './versioning';
import { activityPolls, alongside, fleetWorker, memoryBudget, tuneV8 } from './worker';
import { workflowBundleOption } from './workflow-bundle';

/**
 * The least workflows a pool's fleet worker keeps cached: a campaign's window (its `parallel`, at most 100 members
 * running) and the campaign itself, with room for members coming back and registrations reporting. With the
 * default 100, a window of 100 members and the campaign are 101 workflows taking turns in a cache of 100: each
 * task evicted the one needed next, so every task of the campaign replayed its whole history (up to 4,000 events,
 * about a megabyte, fetched from Temporal each time): the campaign slowed as it grew (bench:fleet, 300 clusters, on
 * 2026-12-07: 0.78 CPU-s of pool and 0.37 of Temporal per cluster, against 0.51 and 0.27 at 100; with the cache
 * large enough, 0.53 and 0.29).
 */
export const FLEET_CACHED_WORKFLOWS = 250;
/**
 * The least workflows a pool's own worker keeps cached: a campaign's window of clusters each runs a step, its
 * migrateAll and its migrations (three or more workflows a cluster); below that, every workflow task starts its
 * workflow afresh (about 30 ms of CPU each, and its garbage).
 */
export const POOL_CACHED_WORKFLOWS = 400;

export interface ClusterPool {
  /** The pool's name and task queue. */
  readonly name: string;
  readonly taskQueue: string;
  /** The clusters served now, by name. */
  served(): string[];
  /** Reads the source again and takes and lets go what changed (what the rescan timer does). */
  rescan(): Promise<void>;
  /** Runs the pool until fn settles. */
  runUntil<T>(fn: Promise<T> | (() => Promise<T>)): Promise<T>;
  /** Runs until the process is asked to stop (SIGINT/SIGTERM). */
  run(): Promise<void>;
}

/**
 * The clusters a pool serves now and those it let go, and which one a task runs with (the dispatch of
 * src/worker/pool-dispatch.ts reads `members`; `absent` says why a cluster is not among them).
 */
export class PoolDispatcher {
  readonly members = new Map<string, ServedMember>();
  /** Clusters let go (or being let go), when and why: their tasks wait for them a while (notServed). */
  private readonly letGo = new Map<string, { at: number; why: string }>();
  /** Members let go whose running tasks have not ended yet. */
  private readonly draining = new Set<Promise<void>>();

  constructor(
    private readonly shared: PoolShared,
    private readonly pool: string,
    /** Reads the pool's source again now (PoolRescan.now): false when it could not be read. */
    private readonly reread: () => Promise<boolean>,
  ) {}

  /** Takes each cluster whose kubeconfig can be used (one that cannot is said and left out). */
  take(clusters: ServedCluster[]): void {
    for (const c of clusters) {
      const m = ServedMember.take(c, this.shared);
      if (!m) continue;
      this.members.set(c.name, m);
      this.letGo.delete(c.name);
      this.shared.log.info({ cluster: c.name, taskQueue: this.shared.taskQueue }, 'cluster taken into the pool');
    }
  }

  /**
   * A cluster let go: from now on no new task of it runs here (at once, before anything is awaited); once its running
   * ones end, what it holds is stopped. Draining does not hold up the rescan that let it go (a cluster taken meanwhile).
   */
  release(name: string, why: string): Promise<void> {
    const m = this.members.get(name);
    if (!m) return Promise.resolve();
    this.members.delete(name);
    this.letGo.set(name, { at: Date.now(), why });
    const log = this.shared.log;
    const drained = (async () => {
      while (m.running > 0) await delay(200);
      await m.stop().catch((err: unknown) => log.warn({ cluster: name, err: String(err) }, 'a cluster let go did not stop cleanly'));
      log.info({ cluster: name }, `cluster let go by the pool: ${why}`);
    })();
    this.draining.add(drained);
    void drained.finally(() => this.draining.delete(drained));
    return drained;
  }

  /** Lets every cluster go and waits until each has stopped. */
  async releaseAll(why: string): Promise<void> {
    for (const n of [...this.members.keys()]) void this.release(n, why);
    await Promise.all([...this.draining]);
  }

  /** Why a task's cluster is not served here (src/worker/pool-dispatch.ts, notServed). */
  absent(name: string): Promise<Absence> {
    return notServed({
      name,
      pool: this.pool,
      letGo: this.letGo.get(name),
      now: Date.now(),
      registeredQueue: async () => (await pinOf(this.shared.client, name))?.queue,
      taskQueue: this.shared.taskQueue,
      reread: this.reread,
      served: () => this.members.has(name),
    });
  }

  /** The pool's activities (every member has the same names) and the interceptor that runs each with its member. */
  dispatch() {
    const first = this.members.values().next().value;
    if (!first) throw new Error(`pool ${this.pool}: no cluster served`);
    return poolDispatch({ names: Object.keys(first.activities), members: this.members, absent: (n) => this.absent(n), pool: this.pool });
  }

  /** The kubeconfig digest of each served cluster (what a rescan compares). */
  digests(): Map<string, string | undefined> {
    return new Map([...this.members].map(([n, m]) => [n, m.served.digest]));
  }

  /** Each served cluster's metrics (read at every scrape: clusters come and go). */
  metrics(): MigratorMetrics[] {
    return [...this.members.values()].flatMap((m) => (m.metrics ? [m.metrics] : []));
  }
}

/** The pool following its source: read again every SVM_POOL_RESCAN_SECONDS, one reading at a time. */
export class PoolRescan {
  private reading: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly source: PoolSource,
    private readonly dispatcher: PoolDispatcher,
    private readonly log: Logger,
  ) {}

  /**
   * Reads the source now (joins a reading under way): takes what is new, lets go what is gone or changed. False
   * when the source could not be read (nothing changed then).
   */
  now(): Promise<boolean> {
    return (this.reading ??= this.once().finally(() => (this.reading = undefined)));
  }

  private async once(): Promise<boolean> {
    const found = await this.source.rescan();
    if (!found) return false;
    const diff = diffClusters(this.dispatcher.digests(), found);
    const kept = new Set(found.map((c) => c.name));
    for (const n of diff.letGo)
      void this.dispatcher.release(n, kept.has(n) ? 'its kubeconfig changed (taken again)' : 'its kubeconfig is gone');
    this.dispatcher.take(diff.take);
    return true;
  }

  /** Reads it every `seconds` from now on (0: never). */
  start(seconds: number): void {
    if (seconds <= 0) return;
    this.timer = setInterval(
      () =>
        void this.now().catch((err: unknown) => this.log.warn({ err: String(err) }, 'the pool could not follow its clusters this time')),
      seconds * 1000,
    );
  }

  /** No more readings; the one under way ends first. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.reading?.catch(() => undefined);
  }
}

/** The process: its connection, its worker (and the fleet's), and what lives beside them while it runs. */
class Pool implements ClusterPool {
  constructor(
    readonly name: string,
    readonly taskQueue: string,
    private readonly o: {
      settings: WorkerSettings;
      log: Logger;
      sdkUrl: string | undefined;
      source: PoolSource;
      connection: NativeConnection;
      client: Client;
      worker: Worker;
      fleet: Worker | undefined;
      deployment: ReturnType<typeof workerDeploymentOptions>;
      dispatcher: PoolDispatcher;
      rescanner: PoolRescan;
    },
  ) {}

  served(): string[] {
    return [...this.o.dispatcher.members.keys()].sort();
  }

  async rescan(): Promise<void> {
    await this.o.rescanner.now();
  }

  runUntil<T>(fn: Promise<T> | (() => Promise<T>)): Promise<T> {
    return this.withServices(() => alongside(this.o.fleet, this.o.worker.runUntil(fn)));
  }

  run(): Promise<void> {
    return this.withServices(() => alongside(this.o.fleet, this.o.worker.run()));
  }

  /** Runs main with what lives beside the worker: /metrics, the version's promotion, the rescans; then lets every cluster go. */
  private async withServices<T>(main: () => Promise<T>): Promise<T> {
    const { settings, log, dispatcher, deployment, client } = this.o;
    const endpoint =
      settings.metricsPort !== undefined
        ? await serveMetrics(
            ((proc) => () => [...dispatcher.metrics(), proc])(processMetrics()),
            settings.metricsPort,
            settings.metricsHost,
            this.o.sdkUrl,
          )
        : undefined;
    if (endpoint) log.info({ port: endpoint.port, host: settings.metricsHost, clusters: dispatcher.members.size }, 'metrics on /metrics');
    const holder = `${settings.identity}_pool`;
    const versioning = deployment ? startVersioning({ client, deployment, settings, holder, log, metrics: undefined }) : undefined;
    this.o.rescanner.start(settings.poolRescanSeconds);
    log.info(
      {
        pool: this.name,
        taskQueue: this.taskQueue,
        clusters: [...dispatcher.members.keys()],
        namespace: settings.temporal.namespace,
        address: settings.temporal.address,
        deploymentVersion: deployment ? `${deployment.version.deploymentName}.${deployment.version.buildId}` : 'unversioned',
      },
      'serving a pool of clusters',
    );
    try {
      return await main();
    } finally {
      await this.o.rescanner.stop();
      await dispatcher.releaseAll('the pool stops');
      await versioning?.stop();
      await endpoint?.close();
      await this.o.connection.close();
      this.o.source.cleanup();
    }
  }
}

/** The pool on its source's clusters: one connection and one Temporal worker for all of them. */
export async function createClusterPool(settings: WorkerSettings, source: PoolSource, log: Logger): Promise<ClusterPool> {
  const t = settings.temporal;
  if (!t.address) throw new Error('TEMPORAL_ADDRESS is not set');
  const address = t.address;
  tuneV8(settings);
  const sdkUrl = await installRuntime(log, settings.metricsPort !== undefined);
  const name = settings.poolName ?? source.defaultName;
  const taskQueue = poolTaskQueue(t.taskQueue, name);
  const initial = await source.initial();
  const connection = await NativeConnection.connect(temporalConnectionOptions({ ...t, address })).catch(async (e: unknown) => {
    throw await explainTemporalConnectError(e, { ...t, address });
  });
  warnIfRewriteForced(log);
  const client = new Client({ connection, namespace: t.namespace });
  const dispatcher: PoolDispatcher = new PoolDispatcher(
    {
      settings,
      client,
      taskQueue,
      memory: settings.memoryBudgetBytes > 0 ? memoryBudget(settings.memoryBudgetBytes, undefined) : undefined,
      svmVersion: svmBuild().version,
      log,
    },
    name,
    // A task of a cluster not served here reads the source again (the rescanner, made below, before any task runs).
    () => rescanner.now(),
  );
  const rescanner: PoolRescan = new PoolRescan(source, dispatcher, log);
  dispatcher.take(initial);
  if (dispatcher.members.size === 0) {
    await connection.close();
    throw new Error(`pool ${name}: no cluster's kubeconfig can be used (logged)`);
  }
  const dispatch = dispatcher.dispatch();
  const deployment = workerDeploymentOptions(settings.versioning, () => svmBuild(), { pool: name });
  const worker = await Worker.create({
    connection,
    namespace: t.namespace,
    taskQueue,
    // Every activity runs with the cluster its header names, checked first as a worker of that cluster checks it.
    interceptors: { activity: [dispatch.interceptor] },
    workerDeploymentOptions: deployment,
    workflowBundle: await workflowBundleOption(),
    activities: dispatch.activities,
    // The pool's slots, shared by its clusters: SVM_MAX_CONCURRENT_CHUNKS is the pool's (docs/fleet.md).
    maxConcurrentActivityTaskExecutions: settings.maxConcurrentChunks * 2,
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: activityPolls(settings.maxConcurrentChunks * 2) },
    // Its clusters' workflows in flight stay cached (see POOL_CACHED_WORKFLOWS).
    maxCachedWorkflows: Math.max(settings.maxCachedWorkflows, POOL_CACHED_WORKFLOWS),
    maxConcurrentWorkflowTaskExecutions: settings.maxConcurrentWorkflowTasks,
    maxHeartbeatThrottleInterval: '2 seconds',
  });
  // The fleet worker's cache holds a campaign's whole window (see FLEET_CACHED_WORKFLOWS).
  const fleet = settings.fleetWorker
    ? await fleetWorker(
        connection,
        { ...settings, maxCachedWorkflows: Math.max(settings.maxCachedWorkflows, FLEET_CACHED_WORKFLOWS) },
        client,
      )
    : undefined;
  return new Pool(name, taskQueue, {
    settings,
    log,
    sdkUrl,
    source,
    connection,
    client,
    worker,
    fleet,
    deployment,
    dispatcher,
    rescanner,
  });
}
