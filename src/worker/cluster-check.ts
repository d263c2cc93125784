/**
 * A migration never runs against the wrong cluster (docs/fleet.md). Every activity a named workflow schedules
 * carries the workflow's cluster in a header (src/workflows/cluster-context.ts); before the worker runs one it checks
 *
 * - the name: the cluster the workflow names is the one this worker serves (SVM_CLUSTER). A worker that polls
 *   another cluster's task queue by mistake fails those tasks at once, non-retryable (WrongCluster), naming both;
 *   a task with no cluster on a named worker, or a named task on a single-cluster worker, likewise;
 * - the uid: the API this worker talks to is the cluster the workflow recorded when it started (the uid of its
 *   kube-system namespace). Read from the API at most every UID_CACHE_MS (src/kube/cluster-uid.ts), so a kubeconfig or load balancer that now
 *   leads elsewhere is found within seconds, before a chunk writes anything.
 *
 * The clusterIdentity activity (the uid a workflow records, and the campaign's reachability probe) passes on the
 * name alone, and with no header at all (a campaign, which belongs to no cluster, compares the name it answers).
 */
import { ApplicationFailure, defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';
import { Context } from '@temporalio/activity';
import { CLUSTER_HEADER, CLUSTER_IDENTITY_ACTIVITY, ClusterRefSchema, wrongClusterMessage, type ClusterRef } from '../api/cluster';

/** The cluster a task's header names; undefined for none (a single-cluster workflow, or one recorded before clusters). */
export function clusterOfHeaders(headers: Record<string, Payload> | undefined): ClusterRef | undefined {
  const p = headers?.[CLUSTER_HEADER];
  if (!p) return undefined;
  const parsed = ClusterRefSchema.safeParse(defaultPayloadConverter.fromPayload(p));
  if (!parsed.success)
    throw ApplicationFailure.create({
      type: 'WrongCluster',
      message: `the task's ${CLUSTER_HEADER} header is not a cluster`,
      nonRetryable: true,
    });
  return parsed.data;
}

/**
 * Why a task must not run here, or undefined: the header's cluster against the served one (name), and against the
 * uid the API answers (when the workflow recorded one).
 */
export async function refusal(
  wanted: ClusterRef | undefined,
  served: string | undefined,
  uid: () => Promise<string>,
  activityType: string,
): Promise<string | undefined> {
  if (activityType === CLUSTER_IDENTITY_ACTIVITY && wanted === undefined) return undefined;
  const byName = wrongClusterMessage(wanted?.name, served);
  if (byName) return byName;
  if (!wanted?.uid || activityType === CLUSTER_IDENTITY_ACTIVITY) return undefined;
  const now = await uid();
  return now === wanted.uid
    ? undefined
    : `the API this worker talks to is not cluster "${wanted.name}" as its workflow recorded it: kube-system's uid is ${now}, the workflow started against ${wanted.uid}; nothing was written (check the worker's kubeconfig and the address it leads to)`;
}

/** The activity interceptor of a worker serving cluster `served` (undefined: a single-cluster worker). */
export function clusterCheck(served: string | undefined, uid: () => Promise<string>) {
  return (): { inbound: ActivityInboundCallsInterceptor } => ({
    inbound: {
      async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
        const why = await refusal(clusterOfHeaders(input.headers), served, uid, Context.current().info.activityType);
        if (why) throw ApplicationFailure.create({ type: 'WrongCluster', message: why, nonRetryable: true });
        return next(input);
      },
    },
  });
}
