/**
 * The cluster a workflow works on, when one Temporal namespace serves several (src/api/cluster.ts). Every workflow
 * that runs in a cluster calls enterCluster first, and gets its Placement (src/contract/placement.ts): where it and
 * what it starts run. In a named cluster, from then on every activity it schedules carries the cluster (name and
 * the uid recorded at the start) in a header, which the worker checks before it runs the activity
 * (src/worker/cluster-check.ts). Module state is the workflow run's own (the SDK evaluates this module per run).
 * A workflow with no cluster (a single-cluster worker's, and every history recorded before clusters) sends no
 * header and schedules nothing more: its commands are the same as before.
 */
import type { Payload } from '@temporalio/common';
import { proxyActivities, workflowInfo, type WorkflowInterceptorsFactory } from '@temporalio/workflow';
import type { ClusterRef } from '../api/cluster';
import { Placement } from '../contract/placement';
import { WRONG_CLUSTER } from '../contract/reasons';

/**
 * Where this run works: its activities' headers come from it. Until the run enters its cluster (and in a workflow
 * that never does), an unnamed placement: headers as given. Only its headers are read before enterCluster.
 */
let here: Placement = Placement.of('');

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
  here = Placement.running(workflowInfo().taskQueue, cluster);
  if (here.name !== undefined && here.uid === undefined) {
    const { clusterIdentity } = proxyActivities<IdentityActivities>({
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 10, maximumInterval: '30s', nonRetryableErrorTypes: [WRONG_CLUSTER] },
    });
    const { uid } = await clusterIdentity();
    here = here.withUid(uid);
  }
  return here;
}

/** The cluster this workflow run entered (with its uid), or undefined: the uid a verdict it makes is made against. */
export function currentCluster(): ClusterRef | undefined {
  return here.cluster;
}

const withCluster = <T extends { headers: Record<string, Payload> }>(input: T): T => ({ ...input, headers: here.headers(input.headers) });

/** Registered in the workflow bundle (bundleOptions' workflowInterceptorModules). */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity: (input, next) => next(withCluster(input)),
      scheduleLocalActivity: (input, next) => next(withCluster(input)),
    },
  ],
});
