/**
 * A pool: one process serving several clusters (docs/fleet.md, "A pool of workers in a management cluster"), each
 * by its own kubeconfig, from a directory (SVM_KUBECONFIG_DIR: a file per cluster, named by the file) or from the
 * kubeconfig Secrets Cluster API writes (SVM_KUBECONFIG_SECRETS: label `cluster.x-k8s.io/cluster-name`, key
 * `value`). Each cluster gets a worker of its own, as if it ran in that cluster with SVM_CLUSTER set: its task
 * queue, its cluster check, its budget, adaptive rate and leases, its registration. They share the process and one
 * metrics endpoint (each cluster's series labelled with it); the first also runs the fleet's workflows.
 *
 * The clusters are those found at start: a cluster added later is served after a restart.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from 'pino';
import YAML from 'yaml';
import { CLUSTER_NAME_PATTERN, CLUSTER_NAME_RULE } from '../api/cluster-name';
import { KubeClient } from '../kube/client';
import type { WorkerSettings } from './config';
import { processMetrics, serveMetrics, type MigratorMetrics } from './metrics';
import { createMigratorWorker, installRuntime, type MigratorWorker } from './worker';

/** One cluster of a pool: its name and the kubeconfig that reaches its API. */
export interface ServedCluster {
  name: string;
  kubeconfig: string;
}

/** The label Cluster API puts on a workload cluster's kubeconfig Secret (`<cluster>-kubeconfig`, key `value`). */
export const CAPI_CLUSTER_LABEL = 'cluster.x-k8s.io/cluster-name';

const KUBECONFIG_EXTENSIONS = ['.kubeconfig', '.yaml', '.yml', '.conf'];

/**
 * The clusters of a directory: each file (a symlink to one counts: a mounted Secret's keys are symlinks) is a
 * kubeconfig, its name without a kubeconfig extension the cluster's. Hidden entries (a mounted volume's ..data) are
 * skipped; a name that is not a DNS label is refused, as is an empty directory.
 */
export function clustersFromDir(dir: string): ServedCluster[] {
  let entries: string[];
  try {
    entries = fs.readdirSync(dir);
  } catch (err) {
    throw new Error(`SVM_KUBECONFIG_DIR ${dir}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  const clusters: ServedCluster[] = [];
  for (const entry of entries.sort()) {
    if (entry.startsWith('.')) continue;
    const file = path.join(dir, entry);
    if (!fs.statSync(file).isFile()) continue;
    const ext = KUBECONFIG_EXTENSIONS.find((e) => entry.endsWith(e));
    const name = ext ? entry.slice(0, -ext.length) : entry;
    if (!CLUSTER_NAME_PATTERN.test(name)) throw new Error(`SVM_KUBECONFIG_DIR ${dir}: file ${entry}: ${CLUSTER_NAME_RULE}, got "${name}"`);
    const twin = clusters.find((c) => c.name === name);
    if (twin) throw new Error(`SVM_KUBECONFIG_DIR ${dir}: ${path.basename(twin.kubeconfig)} and ${entry} both name cluster "${name}"`);
    clusters.push({ name, kubeconfig: file });
  }
  if (clusters.length === 0) throw new Error(`SVM_KUBECONFIG_DIR ${dir} holds no kubeconfig: a file per cluster, named by the cluster`);
  return clusters;
}

interface SecretList {
  items: Array<{ metadata: { name: string; labels?: Record<string, string> }; data?: Record<string, string> }>;
}

/**
 * Why a kubeconfig read from a Secret is not served, or undefined: it must parse, and no user of it may run a
 * program (`exec`) or an auth-provider plugin. Whoever may write a Secret in that namespace would otherwise run a
 * program of their choosing inside the process that holds every cluster's credentials. A cluster whose kubeconfig
 * needs a plugin is served from SVM_KUBECONFIG_DIR, whose files the operator mounts.
 */
export function secretKubeconfigRefusal(text: string): string | undefined {
  let doc: unknown;
  try {
    doc = YAML.parse(text);
  } catch (err) {
    return `its kubeconfig does not parse: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  }
  const users = (doc as { users?: Array<{ name?: string; user?: Record<string, unknown> }> } | null)?.users ?? [];
  for (const u of Array.isArray(users) ? users : []) {
    const plugin = u?.user?.exec !== undefined ? 'exec' : u?.user?.['auth-provider'] !== undefined ? 'auth-provider' : undefined;
    if (plugin)
      return `its kubeconfig's user ${u.name ?? '(unnamed)'} runs a plugin (${plugin}), which a pool never runs from a Secret: serve this cluster from SVM_KUBECONFIG_DIR instead`;
  }
  return undefined;
}

/**
 * The clusters whose Cluster API kubeconfig Secret (`<cluster>-kubeconfig`, labelled with the cluster, its kubeconfig
 * in `value`) is in namespace, read through the management cluster's API. Each kubeconfig is written to a file of
 * its own, readable only by this process's user, in a directory made for the pool. A Secret that cannot be served (a
 * label that is no cluster name, a kubeconfig that does not parse or runs a plugin) is left out and said, through
 * `refused`: the other clusters are served.
 */
export async function clustersFromSecrets(
  management: KubeClient,
  namespace: string,
  into: string,
  refused: (secret: string, why: string) => void = () => {},
): Promise<ServedCluster[]> {
  const list = await management.getJson<SecretList>(
    `/api/v1/namespaces/${namespace}/secrets?labelSelector=${encodeURIComponent(CAPI_CLUSTER_LABEL)}`,
  );
  const clusters: ServedCluster[] = [];
  let left = 0;
  for (const s of list.items.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))) {
    const name = s.metadata.labels?.[CAPI_CLUSTER_LABEL] ?? '';
    // Cluster API labels other Secrets of a cluster too (its CA, its service-account keys): only its kubeconfig.
    if (s.metadata.name !== `${name}-kubeconfig` || !s.data?.value) continue;
    const text = Buffer.from(s.data.value, 'base64').toString('utf8');
    const why = CLUSTER_NAME_PATTERN.test(name) ? secretKubeconfigRefusal(text) : `${CLUSTER_NAME_RULE}, got "${name}"`;
    if (why) {
      refused(`${namespace}/${s.metadata.name}`, why);
      left++;
      continue;
    }
    const file = path.join(into, `${name}.kubeconfig`);
    fs.writeFileSync(file, text, { mode: 0o600 });
    clusters.push({ name, kubeconfig: file });
  }
  if (clusters.length === 0)
    throw new Error(
      `no Cluster API kubeconfig Secret in ${namespace} to serve (label ${CAPI_CLUSTER_LABEL}, named <cluster>-kubeconfig, key value)${left > 0 ? `: ${left} left out (logged)` : ''}`,
    );
  return clusters;
}

/** The pool's clusters, from the directory or the Secrets its settings name. */
export async function poolClusters(settings: WorkerSettings, log?: Logger): Promise<{ clusters: ServedCluster[]; cleanup(): void }> {
  if (settings.kubeconfigDir) return { clusters: clustersFromDir(settings.kubeconfigDir), cleanup: () => {} };
  const into = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pool-'));
  const cleanup = () => fs.rmSync(into, { recursive: true, force: true });
  const management = KubeClient.fromKubeconfig(settings.kubeconfig);
  try {
    const refused = (secret: string, why: string) => log?.error({ secret }, `a cluster's Secret left out of the pool: ${why}`);
    return { clusters: await clustersFromSecrets(management, settings.kubeconfigSecrets!, into, refused), cleanup };
  } catch (err) {
    cleanup();
    throw err;
  } finally {
    management.close();
  }
}

export interface ClusterPool {
  clusters: ServedCluster[];
  workers: MigratorWorker[];
  /** Runs every cluster's worker until fn settles. */
  runUntil<T>(fn: Promise<T> | (() => Promise<T>)): Promise<T>;
  /** Runs until the process is asked to stop; a cluster whose worker fails is logged, and the others go on. */
  run(): Promise<void>;
}

/** A worker per cluster, in this process, with one metrics endpoint for all of them. */
export async function createClusterPool(settings: WorkerSettings, clusters: ServedCluster[], log: Logger): Promise<ClusterPool> {
  const sdkUrl = await installRuntime(log, settings.metricsPort !== undefined);
  const workers: MigratorWorker[] = [];
  try {
    for (const [i, c] of clusters.entries()) {
      const own: WorkerSettings = {
        ...settings,
        kubeconfig: c.kubeconfig,
        kubeconfigDir: undefined,
        kubeconfigSecrets: undefined,
        temporal: { ...settings.temporal, cluster: c.name },
        fleetWorker: settings.fleetWorker && i === 0,
      };
      workers.push(await createMigratorWorker(own, log.child({ cluster: c.name }), { metricsServedByPool: true }));
    }
  } catch (err) {
    // A cluster whose worker could not be made (a bad kubeconfig, say): what the others opened is closed.
    await Promise.all(workers.map((w) => w.close()));
    throw err;
  }
  const withEndpoint = async <T>(fn: () => Promise<T>): Promise<T> => {
    // Each cluster's series under its label; the process's own (memory, CPU) once, under none: they are all of them.
    const metrics: Array<Pick<MigratorMetrics, 'registry'>> = workers.flatMap((w) => (w.metrics ? [w.metrics] : []));
    if (metrics.length > 0) metrics.push(processMetrics());
    const endpoint = metrics.length > 0 ? await serveMetrics(metrics, settings.metricsPort!, settings.metricsHost, sdkUrl) : undefined;
    if (endpoint) log.info({ port: endpoint.port, host: settings.metricsHost, clusters: clusters.length }, 'metrics on /metrics');
    try {
      return await fn();
    } finally {
      await endpoint?.close();
    }
  };
  return {
    clusters,
    workers,
    runUntil: (fn) =>
      withEndpoint(async () => {
        const until = typeof fn === 'function' ? fn() : fn;
        // Every worker runs until fn settles; the first to fail ends it as a failure once all have stopped.
        const runs = workers.map((w) => w.runUntil(until));
        const settled = await Promise.allSettled(runs);
        const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
        if (failed) throw failed.reason;
        return (settled[0] as PromiseFulfilledResult<Awaited<typeof until>>).value;
      }),
    run: () =>
      withEndpoint(async () => {
        log.info({ clusters: clusters.map((c) => c.name) }, 'serving a pool of clusters');
        const settled = await Promise.allSettled(workers.map((w) => w.run()));
        settled.forEach((s, i) => {
          if (s.status === 'rejected')
            log.error({ cluster: clusters[i]!.name, err: String(s.reason) }, "the cluster's worker stopped with an error");
        });
        if (settled.some((s) => s.status === 'rejected')) throw new Error('a cluster of the pool stopped with an error (logged)');
      }),
  };
}
