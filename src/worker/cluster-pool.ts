/**
 * A pool's clusters (docs/fleet.md, "A pool of workers in a management cluster"): where they come from and how they
 * change. A pool serves several clusters from one process, each by its own kubeconfig, from a directory
 * (SVM_KUBECONFIG_DIR: a file per cluster, named by the file) or from the kubeconfig Secrets Cluster API writes
 * (SVM_KUBECONFIG_SECRETS: label `cluster.x-k8s.io/cluster-name`, key `value`, served only while the cluster's
 * `Cluster` object exists). The pool reads them again every SVM_POOL_RESCAN_SECONDS (diffClusters): a new cluster
 * is taken, a removed one let go, a changed kubeconfig let go and taken again. How the pool serves them:
 * src/worker/pool.ts.
 *
 * In a pool, a kubeconfig may run no plugin (`exec`, `auth-provider`) unless the operator allows it by name
 * (SVM_POOL_KUBECONFIG_PLUGINS): the process holds every cluster's credentials. One kubeconfig that cannot be
 * served is said and left out; the others are served.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Logger } from 'pino';
import YAML from 'yaml';
import { CLUSTER_NAME_PATTERN, CLUSTER_NAME_RULE } from '../api/cluster-name';
import { KubeClient } from '../kube/client';
import { KubeError } from '../kube/errors';
import type { WorkerSettings } from './config';

/** One cluster of a pool: its name, the kubeconfig that reaches its API, and a digest of that kubeconfig's content. */
export interface ServedCluster {
  name: string;
  kubeconfig: string;
  /** sha256 of the kubeconfig's content: a change of it is a cluster let go and taken again. */
  digest?: string;
}

/** The label Cluster API puts on a workload cluster's kubeconfig Secret (`<cluster>-kubeconfig`, key `value`). */
export const CAPI_CLUSTER_LABEL = 'cluster.x-k8s.io/cluster-name';

const KUBECONFIG_EXTENSIONS = ['.kubeconfig', '.yaml', '.yml', '.conf'];

const digestOf = (text: string | Buffer) => createHash('sha256').update(text).digest('hex');

/** Says why a cluster's kubeconfig is left out: where it came from (a file, a Secret) and why. */
export type Refused = (where: string, why: string) => void;

/**
 * Why a pool does not serve a kubeconfig, or undefined: it must parse, and each user's plugin (`exec` command as
 * written, or `auth-provider` name) must be one the operator allows (SVM_POOL_KUBECONFIG_PLUGINS). Whoever may write
 * a kubeconfig the pool reads (a Secret in its namespace) would otherwise run a program of their choosing inside
 * the process that holds every cluster's credentials.
 */
export function kubeconfigPluginRefusal(text: string, allowed: readonly string[] = []): string | undefined {
  let doc: unknown;
  try {
    doc = YAML.parse(text);
  } catch (err) {
    return `its kubeconfig does not parse: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  }
  const users = (doc as { users?: Array<{ name?: string; user?: Record<string, unknown> }> } | null)?.users ?? [];
  for (const u of Array.isArray(users) ? users : []) {
    const exec = u?.user?.exec as { command?: unknown } | undefined;
    const provider = u?.user?.['auth-provider'] as { name?: unknown } | undefined;
    const plugin =
      exec !== undefined
        ? { kind: 'exec', name: typeof exec?.command === 'string' ? exec.command : '' }
        : provider !== undefined
          ? { kind: 'auth-provider', name: typeof provider?.name === 'string' ? provider.name : '' }
          : undefined;
    if (plugin && !(plugin.name && allowed.includes(plugin.name)))
      return `its kubeconfig's user ${u.name ?? '(unnamed)'} runs a plugin (${plugin.kind} ${JSON.stringify(plugin.name)}), which a pool runs only when SVM_POOL_KUBECONFIG_PLUGINS names it`;
  }
  return undefined;
}

/**
 * The clusters of a directory: each file (a symlink to one counts: a mounted Secret's keys are symlinks) is a
 * kubeconfig, its name without a kubeconfig extension the cluster's. Hidden entries (a mounted volume's ..data) are
 * skipped. A file that cannot be served (a name that is not a DNS label, a second file for one name, a plugin not
 * allowed) is said through `refused` and left out.
 */
export function scanDir(dir: string, refused: Refused, allowed: readonly string[] = []): ServedCluster[] {
  let entries: string[];
  try {
    entries = fs.readdirSync(dir);
  } catch (err) {
    throw new Error(`SVM_KUBECONFIG_DIR ${dir}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  const clusters: ServedCluster[] = [];
  const twins = new Set<string>();
  for (const entry of entries.sort()) {
    if (entry.startsWith('.')) continue;
    const file = path.join(dir, entry);
    let text: Buffer;
    try {
      if (!fs.statSync(file).isFile()) continue;
      text = fs.readFileSync(file);
    } catch {
      continue; // gone between the listing and the read (a Secret's volume swapping its data): the next scan sees it
    }
    const ext = KUBECONFIG_EXTENSIONS.find((e) => entry.endsWith(e));
    const name = ext ? entry.slice(0, -ext.length) : entry;
    if (!CLUSTER_NAME_PATTERN.test(name)) {
      refused(`${dir}/${entry}`, `file ${entry}: ${CLUSTER_NAME_RULE}, got "${name}"`);
      continue;
    }
    const twin = clusters.find((c) => c.name === name);
    if (twin || twins.has(name)) {
      refused(`${dir}/${entry}`, `${twin ? path.basename(twin.kubeconfig) : 'another file'} and ${entry} both name cluster "${name}"`);
      if (twin) clusters.splice(clusters.indexOf(twin), 1);
      twins.add(name);
      continue;
    }
    const why = kubeconfigPluginRefusal(text.toString('utf8'), allowed);
    if (why) {
      refused(`${dir}/${entry}`, why);
      continue;
    }
    clusters.push({ name, kubeconfig: file, digest: digestOf(text) });
  }
  return clusters;
}

/** The clusters of a directory at a pool's start (scanDir): a file that cannot be served, or none, is refused. */
export function clustersFromDir(dir: string, allowed: readonly string[] = []): ServedCluster[] {
  const clusters = scanDir(
    dir,
    (_where, why) => {
      throw new Error(`SVM_KUBECONFIG_DIR ${dir}: ${why}`);
    },
    allowed,
  );
  if (clusters.length === 0) throw new Error(`SVM_KUBECONFIG_DIR ${dir} holds no kubeconfig: a file per cluster, named by the cluster`);
  return clusters;
}

interface SecretList {
  items: Array<{ metadata: { name: string; labels?: Record<string, string> }; data?: Record<string, string> }>;
}

/**
 * The names of the Cluster API `Cluster` objects of namespace, read at the group's preferred version; none when
 * Cluster API is not installed (its group not served).
 */
export async function capiClusterNames(management: Pick<KubeClient, 'getJson'>, namespace: string): Promise<Set<string>> {
  let preferred: string | undefined;
  try {
    preferred = (await management.getJson<{ preferredVersion?: { groupVersion?: string } }>('/apis/cluster.x-k8s.io')).preferredVersion
      ?.groupVersion;
  } catch (err) {
    if (err instanceof KubeError && err.kind === 'notFound') return new Set();
    throw err;
  }
  if (!preferred) return new Set();
  const list = await management.getJson<{ items: Array<{ metadata: { name: string } }> }>(
    `/apis/${preferred}/namespaces/${namespace}/clusters`,
  );
  return new Set(list.items.map((c) => c.metadata.name));
}

/**
 * The clusters whose Cluster API kubeconfig Secret (`<cluster>-kubeconfig`, labelled with the cluster, its kubeconfig
 * in `value`) is in namespace, read through the management cluster's API, each served only while its `Cluster`
 * object exists there. Each kubeconfig is written to a file of its own, readable only by this process's user, in a
 * directory made for the pool. A Secret that cannot be served (a label that is no cluster name, no Cluster object, a
 * kubeconfig that does not parse or runs a plugin not allowed) is left out and said, through `refused`.
 */
export async function scanSecrets(
  management: Pick<KubeClient, 'getJson'>,
  namespace: string,
  into: string,
  refused: Refused,
  allowed: readonly string[] = [],
): Promise<ServedCluster[]> {
  const list = await management.getJson<SecretList>(
    `/api/v1/namespaces/${namespace}/secrets?labelSelector=${encodeURIComponent(CAPI_CLUSTER_LABEL)}`,
  );
  const exists = await capiClusterNames(management, namespace);
  const clusters: ServedCluster[] = [];
  for (const s of list.items.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))) {
    const name = s.metadata.labels?.[CAPI_CLUSTER_LABEL] ?? '';
    // Cluster API labels other Secrets of a cluster too (its CA, its service-account keys): only its kubeconfig.
    if (s.metadata.name !== `${name}-kubeconfig` || !s.data?.value) continue;
    const text = Buffer.from(s.data.value, 'base64').toString('utf8');
    const why = !CLUSTER_NAME_PATTERN.test(name)
      ? `${CLUSTER_NAME_RULE}, got "${name}"`
      : !exists.has(name)
        ? `no Cluster API Cluster object "${name}" in ${namespace}: a kubeconfig Secret alone is not a cluster the pool serves`
        : kubeconfigPluginRefusal(text, allowed);
    if (why) {
      refused(`${namespace}/${s.metadata.name}`, why);
      continue;
    }
    const file = path.join(into, `${name}.kubeconfig`);
    const digest = digestOf(text);
    // Written only when it changed: a served cluster's client read it already.
    if (!fs.existsSync(file) || digestOf(fs.readFileSync(file)) !== digest) fs.writeFileSync(file, text, { mode: 0o600 });
    clusters.push({ name, kubeconfig: file, digest });
  }
  return clusters;
}

/** The clusters of the Secrets at a pool's start (scanSecrets): none to serve is refused, saying how many were left out. */
export async function clustersFromSecrets(
  management: Pick<KubeClient, 'getJson'>,
  namespace: string,
  into: string,
  refused: Refused = () => {},
  allowed: readonly string[] = [],
): Promise<ServedCluster[]> {
  let left = 0;
  const clusters = await scanSecrets(
    management,
    namespace,
    into,
    (where, why) => {
      left++;
      refused(where, why);
    },
    allowed,
  );
  if (clusters.length === 0)
    throw new Error(
      `no Cluster API kubeconfig Secret in ${namespace} to serve (label ${CAPI_CLUSTER_LABEL}, named <cluster>-kubeconfig, key value, with its Cluster object)${left > 0 ? `: ${left} left out (logged)` : ''}`,
    );
  return clusters;
}

/** What a rescan changes: clusters to take, and served ones to let go (a changed kubeconfig is both). */
export interface ClusterDiff {
  take: ServedCluster[];
  letGo: string[];
}

/** The change from the served clusters (name -> digest) to those a scan found. */
export function diffClusters(served: ReadonlyMap<string, string | undefined>, found: readonly ServedCluster[]): ClusterDiff {
  const byName = new Map(found.map((c) => [c.name, c]));
  const letGo = [...served.keys()].filter((n) => !byName.has(n) || byName.get(n)!.digest !== served.get(n)).sort();
  const take = found.filter((c) => !served.has(c.name) || letGo.includes(c.name));
  return { take, letGo };
}

/** Where a pool's clusters come from: read at start (refusing none to serve), and again at each rescan. */
export interface PoolSource {
  /** The pool's name where SVM_POOL_NAME does not give one: the Secrets' namespace, or the directory's base name. */
  defaultName: string;
  initial(): Promise<ServedCluster[]>;
  /** The clusters now; undefined when they cannot be read now (the management API away): nothing changes then. */
  rescan(): Promise<ServedCluster[] | undefined>;
  cleanup(): void;
}

/** A DNS label from a directory's base name (lowercase, other characters as -), or `pool`. */
export function poolNameOf(dir: string): string {
  const label = path
    .basename(path.resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
  return label || 'pool';
}

/** The pool's source from its settings (SVM_KUBECONFIG_DIR or SVM_KUBECONFIG_SECRETS). */
export function poolSource(settings: WorkerSettings, log?: Logger): PoolSource {
  const allowed = settings.poolKubeconfigPlugins;
  // Each left-out kubeconfig said once while it stays as it is (a rescan finds it again), and again once it changes.
  let said = new Map<string, string>();
  let now = new Map<string, string>();
  const refused: Refused = (where, why) => {
    now.set(where, why);
    if (said.get(where) !== why) log?.error({ kubeconfig: where }, `a cluster's kubeconfig left out of the pool: ${why}`);
  };
  const settle = (clusters: ServedCluster[]) => {
    said = now;
    now = new Map();
    return clusters;
  };
  if (settings.kubeconfigDir) {
    const dir = settings.kubeconfigDir;
    return {
      defaultName: poolNameOf(dir),
      initial: () => Promise.resolve(settle(clustersFromDir(dir, allowed))),
      rescan: () => {
        try {
          return Promise.resolve(settle(scanDir(dir, refused, allowed)));
        } catch (err) {
          log?.warn({ err: String(err) }, 'could not read the pool directory again; the clusters served stay as they are');
          return Promise.resolve(undefined);
        }
      },
      cleanup: () => {},
    };
  }
  const namespace = settings.kubeconfigSecrets!;
  const into = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pool-'));
  const management = KubeClient.fromKubeconfig(settings.kubeconfig, { context: settings.kubeContext });
  return {
    defaultName: namespace,
    initial: async () => settle(await clustersFromSecrets(management, namespace, into, refused, allowed)),
    rescan: async () => {
      try {
        return settle(await scanSecrets(management, namespace, into, refused, allowed));
      } catch (err) {
        log?.warn({ err: String(err) }, "could not read the pool's Secrets again; the clusters served stay as they are");
        return undefined;
      }
    },
    cleanup: () => {
      management.close();
      fs.rmSync(into, { recursive: true, force: true });
    },
  };
}
