/**
 * A named cluster's worker reports its cluster to the cluster's registration in Temporal (docs/fleet.md): on start
 * and every SVM_CLUSTER_REPORT_SECONDS, a signal-with-start of `svm-cluster/<name>` (clusterRegistration, on the
 * fleet task queue) carrying kube-system's uid, each API server's Kubernetes version, svm's version and the time.
 * A failed report is logged and tried again at the next period; nothing else waits on it.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { fleetTaskQueue } from '../api/cluster';
import type { ApiServerSource } from '../kube/apiservers';
import { CLUSTER_REGISTRATION_WORKFLOW_TYPE, clusterRegistrationId, clusterSeenSignal, type ClusterReport } from '../contract/fleet';
import { MigrationCluster } from '../contract/search-attributes';
import { TypedSearchAttributes } from '@temporalio/common';

/** The report of the cluster as its API servers answer now: each one's /version at its own address. */
export async function clusterReport(opts: {
  name: string;
  uid: () => Promise<string>;
  apiservers: ApiServerSource;
  svmVersion: string;
  now?: () => number;
}): Promise<ClusterReport> {
  const found = await opts.apiservers.find();
  const servers = found.endpoints.length > 0 ? found.endpoints : [{ id: found.via.server, kube: found.via }];
  const versions = await Promise.all(
    servers.map(async (s) => {
      const v = await s.kube.getJson<{ gitVersion?: string }>('/version').catch(() => undefined);
      return { server: s.id, version: v?.gitVersion ?? 'unknown' };
    }),
  );
  return {
    name: opts.name,
    uid: await opts.uid(),
    servers: versions.sort((a, b) => (a.server < b.server ? -1 : a.server > b.server ? 1 : 0)),
    svmVersion: opts.svmVersion,
    seenAt: new Date((opts.now ?? Date.now)()).toISOString(),
  };
}

export function startRegistration(opts: {
  client: Client;
  baseTaskQueue: string;
  name: string;
  uid: () => Promise<string>;
  apiservers: ApiServerSource;
  svmVersion: string;
  intervalSeconds: number;
  log: Logger;
}): { stop(): void; reported: Promise<void> } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const report = async () => {
    try {
      const r = await clusterReport(opts);
      await opts.client.workflow.signalWithStart(CLUSTER_REGISTRATION_WORKFLOW_TYPE, {
        workflowId: clusterRegistrationId(opts.name),
        taskQueue: fleetTaskQueue(opts.baseTaskQueue),
        args: [{ name: opts.name }],
        signal: clusterSeenSignal,
        signalArgs: [r],
        typedSearchAttributes: new TypedSearchAttributes([{ key: MigrationCluster, value: opts.name }]),
        staticSummary: `Cluster ${opts.name}`,
      });
      opts.log.debug({ cluster: opts.name, uid: r.uid, servers: r.servers.length }, 'cluster reported to its registration');
    } catch (err) {
      opts.log.warn({ cluster: opts.name, err: String(err) }, 'could not report the cluster to its registration; tried again next period');
    }
  };
  const loop = async () => {
    await report();
    if (!stopped) timer = setTimeout(() => void loop(), opts.intervalSeconds * 1000);
  };
  const reported = loop();
  return {
    reported,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
