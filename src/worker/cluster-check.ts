/**
 * A migration never runs against the wrong cluster (docs/fleet.md). Every activity a named workflow schedules
 * carries the workflow's cluster in a header (src/workflows/cluster-context.ts); before the worker runs one it checks
 *
 * - the name: the cluster the workflow names is the one this worker serves (SVM_CLUSTER). A worker that polls
 *   another cluster's task queue by mistake fails those tasks at once, non-retryable (WrongCluster), naming both;
 *   a task with no cluster on a named worker, or a named task on a single-cluster worker, likewise;
 * - the identity: the worker's cluster is not in conflict (its API is the cluster pinned to its name, and its uid is
 *   pinned to no other name: src/worker/registration.ts), and the API answers the pinned uid now (read at most every
 *   UID_CACHE_MS, src/kube/cluster-uid.ts), so a kubeconfig or load balancer that now leads elsewhere is found
 *   within seconds, before a chunk writes anything;
 * - the uid the workflow recorded when it started is the pinned one.
 *
 * The clusterIdentity activity with no header (a campaign's probe: a campaign belongs to no cluster, and compares
 * the name it answers) skips the name check only: a worker in conflict refuses it too.
 */
import { ApplicationFailure, defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';
import { Context } from '@temporalio/activity';
import { CLUSTER_HEADER, CLUSTER_IDENTITY_ACTIVITY, ClusterRefSchema, wrongClusterMessage, type ClusterRef } from '../api/cluster';
import { WRONG_CLUSTER } from '../contract/reasons';

/** The cluster a task's header names; undefined for none (a single-cluster workflow, or one recorded before clusters). */
export function clusterOfHeaders(headers: Record<string, Payload> | undefined): ClusterRef | undefined {
  const p = headers?.[CLUSTER_HEADER];
  if (!p) return undefined;
  const parsed = ClusterRefSchema.safeParse(defaultPayloadConverter.fromPayload(p));
  if (!parsed.success)
    throw ApplicationFailure.create({
      type: WRONG_CLUSTER,
      message: `the task's ${CLUSTER_HEADER} header is not a cluster`,
      nonRetryable: true,
    });
  return parsed.data;
}

/** What a named worker checks its tasks against: the identity it confirmed (src/worker/registration.ts). */
export interface IdentityCheck {
  readonly pinned: string | undefined;
  refusal(): Promise<string | undefined>;
}

/**
 * Why a task must not run here, or undefined: the header's cluster against the served one (name); then, on a named
 * worker, its identity (in conflict, or an API that now answers another uid than the pinned one); then the uid the
 * workflow recorded against the pinned one.
 */
export async function refusal(
  wanted: ClusterRef | undefined,
  served: string | undefined,
  identity: IdentityCheck | undefined,
  activityType: string,
): Promise<string | undefined> {
  const probe = activityType === CLUSTER_IDENTITY_ACTIVITY && wanted === undefined;
  if (!probe) {
    const byName = wrongClusterMessage(wanted?.name, served);
    if (byName) return byName;
  }
  if (!identity) return undefined;
  const why = await identity.refusal();
  if (why) return why;
  if (!wanted?.uid || wanted.uid === identity.pinned) return undefined;
  return `this task's workflow started against kube-system uid ${wanted.uid}, but cluster "${wanted.name}" is pinned to ${identity.pinned}: not the same cluster; nothing was done`;
}

/** The activity interceptor of a worker serving cluster `served` (undefined: a single-cluster worker, with no identity). */
export function clusterCheck(served: string | undefined, identity: IdentityCheck | undefined) {
  return (): { inbound: ActivityInboundCallsInterceptor } => ({
    inbound: {
      async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
        const why = await refusal(clusterOfHeaders(input.headers), served, identity, Context.current().info.activityType);
        if (why) throw ApplicationFailure.create({ type: WRONG_CLUSTER, message: why, nonRetryable: true });
        return next(input);
      },
    },
  });
}
