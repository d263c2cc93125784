/**
 * The cluster a workflow works on, when one Temporal namespace serves several (src/api/cluster.ts). Every workflow
 * that runs in a cluster calls enterCluster first, and gets its Placement (src/contract/placement.ts): where it and
 * what it starts run. In a named cluster, from then on every activity it schedules carries the cluster (name and
 * the uid recorded at the start) in a header, which the worker checks before it runs the activity
 * (src/worker/cluster-check.ts). Module state is the workflow run's own (the SDK evaluates this module per run).
 * A workflow with no cluster (a single-cluster worker's, and every history recorded before clusters) sends no
 * header and schedules nothing more: its commands are the same as before.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { proxyActivities, workflowInfo, type WorkflowInterceptorsFactory } from '@temporalio/workflow';
import { CLUSTER_HEADER, WRONG_CLUSTER, type ClusterRef } from '../api/cluster';
import { Placement } from '../contract/placement';

let current: ClusterRef | undefined;

interface IdentityActivities {
  clusterIdentity(): Promise<{ name?: string; uid: string }>;
}

/**
 * Enters the workflow's cluster, and returns where the workflow runs (unnamed: the identity placement, and nothing
 * happens). Without a uid, it is read first from the API the cluster's worker talks to (the clusterIdentity
 * activity, under the name check), and recorded: the placement carries it, for the input of a continue-as-new and
 * of children (`here.input(...)`).
 */
export async function enterCluster(cluster: ClusterRef | undefined): Promise<Placement> {
  const queue = workflowInfo().taskQueue;
  if (!cluster) return Placement.running(queue);
  current = { name: cluster.name, ...(cluster.uid ? { uid: cluster.uid } : {}) };
  if (!cluster.uid) {
    const { clusterIdentity } = proxyActivities<IdentityActivities>({
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 10, maximumInterval: '30s', nonRetryableErrorTypes: [WRONG_CLUSTER] },
    });
    const { uid } = await clusterIdentity();
    current = { name: cluster.name, uid };
  }
  return Placement.running(queue, current);
}

/** The cluster this workflow run entered (with its uid), or undefined: the uid a verdict it makes is made against. */
export function currentCluster(): ClusterRef | undefined {
  return current;
}

const withCluster = <T extends { headers: Record<string, unknown> }>(input: T): T =>
  current ? { ...input, headers: { ...input.headers, [CLUSTER_HEADER]: defaultPayloadConverter.toPayload(current) } } : input;

/** Registered in the workflow bundle (bundleOptions' workflowInterceptorModules). */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity: (input, next) => next(withCluster(input)),
      scheduleLocalActivity: (input, next) => next(withCluster(input)),
    },
  ],
});
