/**
 * One cluster a pool serves (src/worker/pool.ts): what is really per cluster, made when the pool takes the cluster
 * and stopped when it lets it go. Its kube client, its identity and registration (reported on change, a heartbeat
 * hourly), its load budget and adaptive rate, its leases (budget membership, leader election and the singletons the
 * leader runs), its request samples, its metrics (labelled with it) and its activities, which the pool's one
 * activity worker runs for the tasks that name it (src/worker/pool-dispatch.ts). Nothing here talks to Temporal
 * through a connection of its own: the pool's client is shared.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { fleetTaskQueue } from '../api/cluster';
import { createActivities } from '../activities';
import { Placement } from '../contract/placement';
import { kubernetesEndpoints, type ApiServerSource } from '../kube/apiservers';
import { clusterUidReader } from '../kube/cluster-uid';
import { KubeClient } from '../kube/client';
import type { MemoryBudget } from '../kube/memory-budget';
import { workerRequestSampler } from '../kube/request-samples';
import type { ServedCluster } from './cluster-pool';
import type { WorkerSettings } from './config';
import { ClusterMembership } from './membership';
import { createMetrics, type MigratorMetrics } from './metrics';
import type { PoolMember } from './pool-dispatch';
import { ClusterIdentity, startRegistration } from './registration';
import { loadControls } from './worker';

export type PoolActivities = ReturnType<typeof createActivities>;

/** What every member of one pool shares, made once per process. */
export interface PoolShared {
  settings: WorkerSettings;
  client: Client;
  /** The pool's task queue: the one each member's registration names. */
  taskQueue: string;
  /** The process's memory budget (SVM_MEMORY_BUDGET_BYTES), shared by the members. */
  memory: MemoryBudget | undefined;
  svmVersion: string;
  log: Logger;
}

/** A served cluster: its activities for the pool's dispatch, and what it holds until it is let go. */
export class ServedMember implements PoolMember<PoolActivities> {
  readonly name: string;
  /** Activities of it running now (the dispatch counts them): it is stopped once none runs. */
  running = 0;

  private constructor(
    readonly served: ServedCluster,
    readonly activities: PoolActivities,
    readonly identity: ClusterIdentity,
    readonly metrics: MigratorMetrics | undefined,
    private readonly holds: {
      kube: KubeClient;
      apiservers: ApiServerSource;
      sampler: { stop(): void };
      registration: { stop(): void };
      membership: ClusterMembership;
    },
  ) {
    this.name = served.name;
  }

  /** The cluster taken: undefined (said in the log) when its kubeconfig cannot be used. */
  static take(c: ServedCluster, shared: PoolShared): ServedMember | undefined {
    const { settings, client, taskQueue, log } = shared;
    const t = settings.temporal;
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
    const sampler = workerRequestSampler(apiservers, settings.requestSampleSeconds, clog);
    const controls = loadControls(settings, metrics, { memory: shared.memory });
    const identity = ClusterIdentity.of({
      client,
      fleetQueue: fleetTaskQueue(t.taskQueue),
      name: c.name,
      where: `kubeconfig ${c.kubeconfig}, server ${kube.server}`,
      uid: clusterUid,
      apiservers,
      svmVersion: shared.svmVersion,
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
      holder: `${settings.identity}_${instance}`,
      instance,
      fixedQps: controls.fixedQps,
      budget: controls.budget,
      log: clog,
      metrics,
    });
    void identity.confirmed.then(() => membership.join());
    return new ServedMember(c, activities, identity, metrics, { kube, apiservers, sampler, registration, membership });
  }

  /** Stops what it holds: its registration's reports, its leases (left), its samples, its clients. */
  async stop(): Promise<void> {
    const h = this.holds;
    h.registration.stop();
    await h.membership.leave();
    h.sampler.stop();
    h.apiservers.close();
    h.kube.close();
  }
}
