/**
 * Which cluster a workflow belongs to, when one Temporal namespace serves a fleet (docs/fleet.md). Pure data and
 * string logic: safe to import from workflow code.
 *
 * A worker that names its cluster (SVM_CLUSTER) polls that cluster's task queue, and every workflow of the cluster
 * carries the name in its ID (as the ID's second segment: `migrate/<cluster>/<resource>`), in the MigrationCluster
 * search attribute, in its summary and in its input (`cluster`). An unnamed worker keeps the single-cluster IDs and
 * task queue. Activities of a named workflow carry its cluster in a header (CLUSTER_HEADER) that the worker checks
 * before it runs any (src/worker/cluster-check.ts).
 */
import { z } from 'zod';
import { CLUSTER_NAME_PATTERN, CLUSTER_NAME_RULE } from './cluster-name';

/** A cluster's name (./cluster-name.ts). */
export const ClusterNameSchema = z.string().regex(CLUSTER_NAME_PATTERN, CLUSTER_NAME_RULE);

/** The cluster a workflow runs against: its name, and the uid of its kube-system namespace once known. */
export const ClusterRefSchema = z
  .object({
    name: ClusterNameSchema,
    /** The uid of the cluster's `kube-system` namespace (the de-facto cluster ID), recorded when the workflow started. */
    uid: z.string().min(1).max(64).optional(),
  })
  .strict();
export type ClusterRef = z.infer<typeof ClusterRefSchema>;

/** The activity header that carries a workflow's cluster to the worker that runs its activities. */
export const CLUSTER_HEADER = 'svm-cluster';

/** The failure type of a task refused because it belongs to another cluster, or the worker's identity is in conflict (named in src/contract/reasons.ts). */
export { WRONG_CLUSTER } from '../contract/reasons';

/** The activity every named workflow runs first when it has no uid yet: the served cluster's name and uid. */
export const CLUSTER_IDENTITY_ACTIVITY = 'clusterIdentity';

/** The task queue of a named cluster (`<base>/cluster/<name>`). Where a cluster may be unnamed, a Placement (src/contract/placement.ts) chooses. */
export function clusterTaskQueue(base: string, cluster: string): string {
  return `${base}/cluster/${cluster}`;
}

/**
 * A pool's task queue (`<base>/pool/<pool>`): one process (and its replicas) serving many clusters of one trust domain
 * polls it for all of them (src/worker/cluster-pool.ts); each task names its cluster in the CLUSTER_HEADER.
 */
export function poolTaskQueue(base: string, pool: string): string {
  return `${base}/pool/${pool}`;
}

/** The fleet's own task queue: campaigns and the cluster registry, which talk only to Temporal (`<base>/fleet`). */
export function fleetTaskQueue(base: string): string {
  return `${base}/fleet`;
}

/**
 * A workflow ID in a named cluster: the cluster inserted as the second segment (`migrate/secrets` ->
 * `migrate/prod-1/secrets`, `migrate-all` -> `migrate-all/prod-1`). Where a cluster may be unnamed, a Placement
 * (src/contract/placement.ts) chooses.
 */
export function idInCluster(id: string, cluster: string): string {
  const slash = id.indexOf('/');
  return slash < 0 ? `${id}/${cluster}` : `${id.slice(0, slash)}/${cluster}${id.slice(slash)}`;
}

/** Why a task of one cluster must not run on a worker of another: both named, or undefined when they are the same. */
export function wrongClusterMessage(wanted: string | undefined, served: string | undefined): string | undefined {
  if (wanted === served) return undefined;
  const name = (c: string | undefined) => (c ? `cluster "${c}"` : 'no named cluster (a single-cluster worker)');
  return `this task belongs to ${name(wanted)} but the worker that took it serves ${name(served)}: nothing was done; check the worker's SVM_CLUSTER and the task queue it polls`;
}

/** The base task queue of a fleet queue (fleetTaskQueue's inverse); the queue itself when it is not one. */
export function fleetBaseQueue(queue: string): string {
  return queue.endsWith('/fleet') ? queue.slice(0, -'/fleet'.length) : queue;
}
