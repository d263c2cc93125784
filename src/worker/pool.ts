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
 * Clusters come and go (src/worker/cluster-pool.ts, diffClusters): every SVM_POOL_RESCAN_SECONDS the pool reads its
 * directory or Secrets again; a new cluster is taken; a removed one is let go once its running activities end (its
 * later tasks fail retryably here and wait for a worker that serves it); a changed kubeconfig is let go and taken
 * again, its identity confirmed anew (a recreated cluster is an identity conflict until `svm fleet pin`).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { fleetTaskQueue, poolTaskQueue } from '../api/cluster';
import { createActivities } from '../activities';
import { warnIfRewriteForced } from '../activities/migrate-chunk';
import { svmBuild } from '../config/build-info';
import { explainTemporalConnectError, temporalConnectionOptions } from '../config/temporal';
import { Placement } from '../contract/placement';
import { kubernetesEndpoints } from '../kube/apiservers';
import { pinOf } from '../kube/cluster-identity';
import { clusterUidReader } from '../kube/cluster-uid';
import { KubeClient } from '../kube/client';
import { workerRequestSampler } from '../kube/request-samples';
import { diffClusters, type PoolSource, type ServedCluster } from './cluster-pool';
import type { WorkerSettings } from './config';
import { installRuntime } from './logging';
import { ClusterMembership } from './membership';
import { createMetrics, processMetrics, serveMetrics, type MigratorMetrics } from './metrics';
import { poolDispatch, type Absence, type PoolMember } from './pool-dispatch';
import { ClusterIdentity, startRegistration } from './registration';
import { startVersioning } from './services';
import { workerDeploymentOptions } from './versioning';
import { activityPolls, alongside, fleetWorker, loadControls, memoryBudget, tuneV8 } from './worker';
import { workflowBundleOption } from './workflow-bundle';

type Activities = ReturnType<typeof createActivities>;

/** A served cluster: what the pool holds of it beside its activities. */
interface Member extends PoolMember<Activities> {
  served: ServedCluster;
  metrics: MigratorMetrics | undefined;
  stop(): Promise<void>;
}

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

/** The pool on its source's clusters: one connection and one Temporal worker for all of them. */
export async function createClusterPool(settings: WorkerSettings, source: PoolSource, log: Logger): Promise<ClusterPool> {
  const t = settings.temporal;
  if (!t.address) throw new Error('TEMPORAL_ADDRESS is not set');
  tuneV8(settings);
  const sdkUrl = await installRuntime(log, settings.metricsPort !== undefined);
  const name = settings.poolName ?? source.defaultName;
  const taskQueue = poolTaskQueue(t.taskQueue, name);
  const initial = await source.initial();
  const connection = await NativeConnection.connect(temporalConnectionOptions({ ...t, address: t.address })).catch(async (e: unknown) => {
    throw await explainTemporalConnectError(e, { ...t, address: t.address! });
  });
  warnIfRewriteForced(log);
  const client = new Client({ connection, namespace: t.namespace });
  const members = new Map<string, Member>();
  const letGo = new Set<string>();
  const memory = settings.memoryBudgetBytes > 0 ? memoryBudget(settings.memoryBudgetBytes, undefined) : undefined;
  const svmVersion = svmBuild().version;

  /** A cluster taken: its client, identity, registration, controls, leases and activities; undefined when its kubeconfig cannot be used. */
  const take = (c: ServedCluster): Member | undefined => {
    const clog = log.child({ cluster: c.name });
    let kube: KubeClient;
    try {
      kube = KubeClient.fromKubeconfig(c.kubeconfig, { maxSockets: 128 });
    } catch (err) {
      clog.error({ kubeconfig: c.kubeconfig, err: String(err) }, "a cluster's kubeconfig cannot be used: it is not served");
      return undefined;
    }
    const placement = Placement.of(t.taskQueue, { name: c.name, queue: taskQueue });
    const metrics = settings.metricsPort !== undefined ? createMetrics({ placement, processMetrics: false }) : undefined;
    const clusterUid = clusterUidReader(kube);
    const apiservers = kubernetesEndpoints(kube);
    const instance = randomUUID().slice(0, 8);
    const holder = `${settings.identity}_${instance}`;
    const sampler = workerRequestSampler(apiservers, settings.requestSampleSeconds, clog);
    const controls = loadControls(settings, metrics, { memory });
    const identity = ClusterIdentity.of({
      client,
      fleetQueue: fleetTaskQueue(t.taskQueue),
      name: c.name,
      where: `kubeconfig ${c.kubeconfig}, server ${kube.server}`,
      uid: clusterUid,
      apiservers,
      svmVersion,
      queue: taskQueue,
      log: clog,
      metrics,
    });
    const activities = createActivities({
      kube,
      budget: controls.budget,
      concurrency: controls.concurrency,
      memory: controls.memory,
      metrics,
      apiservers,
      requestSamples: sampler.samples,
      temporal: { client, placement },
      clusterUid,
      triggerApi: settings.triggerApi,
      standardMigrations: settings.standardMigrations,
      managedFieldsAs: settings.managedFieldsAs,
      requireStaticFence: settings.requireStaticFence,
      requireFence: settings.requireFence,
    });
    // Confirmed and reported now and every SVM_CLUSTER_REPORT_SECONDS (nothing sent while nothing changed but an
    // hourly heartbeat); its leases joined once its identity is confirmed.
    const registration = startRegistration(identity, settings.clusterReportSeconds, clog);
    const membership = new ClusterMembership({
      settings,
      kube,
      client,
      placement,
      identity: settings.identity,
      holder,
      instance,
      fixedQps: controls.fixedQps,
      budget: controls.budget,
      log: clog,
      metrics,
    });
    void identity.confirmed.then(() => membership.join());
    return {
      name: c.name,
      served: c,
      activities,
      identity,
      running: 0,
      metrics,
      async stop() {
        registration.stop();
        await membership.leave();
        sampler.stop();
        apiservers.close();
        kube.close();
      },
    };
  };

  const takeAll = (clusters: ServedCluster[]) => {
    for (const c of clusters) {
      const m = take(c);
      if (!m) continue;
      members.set(c.name, m);
      letGo.delete(c.name);
      log.info({ cluster: c.name, taskQueue }, 'cluster taken into the pool');
    }
  };

  /**
   * A cluster let go: from now on no new task of it runs here (at once, before anything is awaited); once its running
   * ones end, what it holds is stopped. Draining does not hold up the rescan that let it go (a cluster taken meanwhile).
   */
  const draining = new Set<Promise<void>>();
  const release = (n: string, why: string): Promise<void> => {
    const m = members.get(n);
    if (!m) return Promise.resolve();
    members.delete(n);
    letGo.add(n);
    const drained = (async () => {
      while (m.running > 0) await delay(200);
      await m.stop().catch((err: unknown) => log.warn({ cluster: n, err: String(err) }, 'a cluster let go did not stop cleanly'));
      log.info({ cluster: n }, `cluster let go by the pool: ${why}`);
    })();
    draining.add(drained);
    void drained.finally(() => draining.delete(drained));
    return drained;
  };

  takeAll(initial);
  if (members.size === 0) {
    await connection.close();
    throw new Error(`pool ${name}: no cluster's kubeconfig can be used (logged)`);
  }

  const absent = async (n: string): Promise<Absence> => {
    if (letGo.has(n)) return 'wait';
    // Not taken yet (a replica that read the change first, or this one before its next rescan): its registration names this pool.
    return (await pinOf(client, n))?.queue === taskQueue ? 'wait' : 'wrong';
  };
  const names = Object.keys(members.values().next().value!.activities);
  const dispatch = poolDispatch({ names, members, absent, pool: name });
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
    maxCachedWorkflows: settings.maxCachedWorkflows,
    maxConcurrentWorkflowTaskExecutions: settings.maxConcurrentWorkflowTasks,
    maxHeartbeatThrottleInterval: '2 seconds',
  });
  const fleet = settings.fleetWorker ? await fleetWorker(connection, settings, client) : undefined;

  let rescanning: Promise<void> | undefined;
  const rescanNow = async () => {
    const found = await source.rescan();
    if (!found) return;
    const diff = diffClusters(new Map([...members].map(([n, m]) => [n, m.served.digest])), found);
    const kept = new Set(found.map((c) => c.name));
    for (const n of diff.letGo) void release(n, kept.has(n) ? 'its kubeconfig changed (taken again)' : 'its kubeconfig is gone');
    takeAll(diff.take);
  };
  const rescan = () => (rescanning ??= rescanNow().finally(() => (rescanning = undefined)));

  /** Runs main with what lives beside the worker: /metrics, the version's promotion, the rescans; then lets every cluster go. */
  const withServices = async <T>(main: () => Promise<T>): Promise<T> => {
    const endpoint =
      settings.metricsPort !== undefined
        ? await serveMetrics(
            (() => {
              const proc = processMetrics();
              return () => [...[...members.values()].flatMap((m) => (m.metrics ? [m.metrics] : [])), proc];
            })(),
            settings.metricsPort,
            settings.metricsHost,
            sdkUrl,
          )
        : undefined;
    if (endpoint) log.info({ port: endpoint.port, host: settings.metricsHost, clusters: members.size }, 'metrics on /metrics');
    const holder = `${settings.identity}_pool`;
    const versioning = deployment ? startVersioning({ client, deployment, settings, holder, log, metrics: undefined }) : undefined;
    const timer =
      settings.poolRescanSeconds > 0
        ? setInterval(
            () => void rescan().catch((err: unknown) => log.warn({ err: String(err) }, 'the pool could not follow its clusters this time')),
            settings.poolRescanSeconds * 1000,
          )
        : undefined;
    log.info(
      {
        pool: name,
        taskQueue,
        clusters: [...members.keys()],
        namespace: t.namespace,
        address: t.address,
        deploymentVersion: deployment ? `${deployment.version.deploymentName}.${deployment.version.buildId}` : 'unversioned',
      },
      'serving a pool of clusters',
    );
    try {
      return await main();
    } finally {
      if (timer) clearInterval(timer);
      await rescanning?.catch(() => undefined);
      for (const n of [...members.keys()]) void release(n, 'the pool stops');
      await Promise.all([...draining]);
      await versioning?.stop();
      await endpoint?.close();
      await connection.close();
      source.cleanup();
    }
  };

  return {
    name,
    taskQueue,
    served: () => [...members.keys()].sort(),
    rescan,
    runUntil: (fn) => withServices(() => alongside(fleet, worker.runUntil(fn))),
    run: () => withServices(() => alongside(fleet, worker.run())),
  };
}
