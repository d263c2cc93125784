/**
 * A pool's one activity worker serving all its clusters (docs/fleet.md, "A pool of workers in a management
 * cluster"): every task a pool takes names its cluster in the CLUSTER_HEADER (src/workflows/cluster-context.ts puts
 * it there), and is run with that cluster's activities: its kube client, budget, adaptive rate, leases, metrics.
 * Before it runs, the cluster's identity is checked as a worker of its own checks it (src/worker/cluster-check.ts).
 *
 * A task of a cluster the pool does not serve (notServed):
 *   - one this replica let go (its kubeconfig removed from the pool's directory or Secrets): it waits for the
 *     cluster to come back for LET_GO_GRACE_MS (a retryable failure, tried again later and later:
 *     notServedRetrySeconds), and runs if it does (a kubeconfig replaced, a Secret recreated, `clusterctl move`);
 *     past that it fails at once, non-retryable (ClusterLetGo), saying when and why the cluster was let go and what
 *     to do, rather than waiting out its retry policy's attempts (about 27 to 37 minutes) and ending on a
 *     "not served here" that tells nothing;
 *   - one whose registration names this pool's queue but that this replica does not serve: the pool reads its
 *     source again at once (another replica took a new cluster first, or this one had not rescanned yet) and runs
 *     the task if the cluster is now served; a source that cannot be read makes it wait (retryable); a source read
 *     without it fails it, ClusterLetGo, naming what is missing;
 *   - any other: WrongCluster, non-retryable, as on a worker of another cluster.
 * A campaign's probe (clusterIdentity with no header) names the cluster it asks in its argument (`{ name }`), as a
 * pool serves many; without one it is refused.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';
import { CLUSTER_IDENTITY_ACTIVITY, WRONG_CLUSTER, type ClusterRef } from '../api/cluster';
import { clusterOfHeaders, refusal, type IdentityCheck } from './cluster-check';

/** The failure types of a task whose cluster this pool has not taken (retried) or let go for good (not): src/contract/reasons.ts. */
import { CLUSTER_LET_GO, CLUSTER_NOT_SERVED_HERE } from '../contract/reasons';
export { CLUSTER_LET_GO, CLUSTER_NOT_SERVED_HERE };

/**
 * How long the tasks of a cluster let go wait for it to come back: 10 minutes (a kubeconfig Secret replaced or
 * recreated, a cluster moved between management clusters); past it they fail, ClusterLetGo.
 */
export const LET_GO_GRACE_MS = 10 * 60_000;

/**
 * How long a task of a cluster not served here waits before it is tried again: 30 s times its attempt, at most 5
 * minutes (a migration's short activities, 10 attempts, wait about 27 minutes in all; its chunks, 12, about 37).
 */
export const NOT_SERVED_RETRY_SECONDS = 30;
export const NOT_SERVED_RETRY_MAX_SECONDS = 300;
export const notServedRetrySeconds = (attempt: number): number =>
  Math.min(NOT_SERVED_RETRY_SECONDS * Math.max(1, attempt), NOT_SERVED_RETRY_MAX_SECONDS);

/** What the pool holds of one served cluster, for its tasks. */
export interface PoolMember<A> {
  name: string;
  activities: A;
  identity: IdentityCheck | undefined;
  /** Activities of it running now: it is let go once none runs. */
  running: number;
}

/**
 * Why the pool does not serve a cluster: 'wait' (let go a moment ago, or its source could not be read), 'wrong' (not
 * this pool's), 'taken' (served now: the source read again had it), or gone (let go and not back, or not in the
 * pool's source although its registration names the pool), with the reason its tasks fail with.
 */
export type Absence = 'wait' | 'wrong' | 'taken' | { gone: string };

/** What the pool knows of a cluster it does not serve now, to tell its tasks why (notServed). */
export interface NotServedFacts {
  name: string;
  pool: string;
  /** When this replica let it go (epoch ms) and why; undefined if it did not serve it since it started. */
  letGo: { at: number; why: string } | undefined;
  now: number;
  /** The queue its registration names (undefined: no registration). */
  registeredQueue(): Promise<string | undefined>;
  /** The pool's own queue. */
  taskQueue: string;
  /** Reads the pool's source again (taking what is new): false when it could not be read. */
  reread(): Promise<boolean>;
  /** Whether the pool serves it now. */
  served(): boolean;
}

/** Why a task of a cluster the pool does not serve is not run: wait, wrong, taken (run it), or gone (fail, with why). */
export async function notServed(f: NotServedFacts): Promise<Absence> {
  const what = `cluster "${f.name}"`;
  if (f.letGo) {
    if (f.now - f.letGo.at < LET_GO_GRACE_MS) return 'wait';
    return {
      gone: `${what} was let go by pool "${f.pool}" at ${new Date(f.letGo.at).toISOString()} (${f.letGo.why}) and has not come back within ${LET_GO_GRACE_MS / 60_000} minutes: nothing was done. Serve it again (its kubeconfig back in the pool's directory or Secrets, or a worker of its own), then start the migration again (svm migrate --cluster ${f.name}, or its trigger's next period); a cluster decommissioned: svm fleet forget ${f.name}`,
    };
  }
  if ((await f.registeredQueue()) !== f.taskQueue) return 'wrong';
  // Its registration names this pool: another replica took a new cluster first, or this one has not read it yet.
  if (!(await f.reread())) return 'wait';
  if (f.served()) return 'taken';
  return {
    gone: `${what}'s registration names pool "${f.pool}", but the pool's directory or Secrets, read just now, hold no kubeconfig of it that can be used (the pool's log says why): nothing was done. Put its kubeconfig back, or register the cluster where it is served`,
  };
}

/** The cluster a task asks for: its header's; a headerless probe's argument (`{ name }`). */
export function wantedCluster(
  headers: ActivityExecuteInput['headers'],
  activityType: string,
  args: unknown[],
): { ref?: ClusterRef; probe: boolean } {
  const ref = clusterOfHeaders(headers);
  if (ref) return { ref, probe: false };
  if (activityType !== CLUSTER_IDENTITY_ACTIVITY) return { probe: false };
  const asked = args[0] as { name?: unknown } | undefined;
  return typeof asked?.name === 'string' ? { ref: { name: asked.name }, probe: true } : { probe: true };
}

/**
 * The member a task runs with, or the failure it ends with (thrown). Pure of Temporal's context: the activity type
 * and arguments are given.
 */
export async function memberFor<A>(
  members: ReadonlyMap<string, PoolMember<A>>,
  absent: (name: string) => Promise<Absence>,
  pool: string,
  input: { headers: ActivityExecuteInput['headers']; args: unknown[]; activityType: string; attempt?: number },
): Promise<PoolMember<A>> {
  const { ref, probe } = wantedCluster(input.headers, input.activityType, input.args);
  if (!ref)
    throw ApplicationFailure.create({
      type: WRONG_CLUSTER,
      message: `this task names no cluster, but the worker that took it is pool "${pool}", which serves several: nothing was done (a single-cluster workflow belongs on its cluster's worker)`,
      nonRetryable: true,
    });
  let member = members.get(ref.name);
  if (!member) {
    const why = await absent(ref.name);
    if (why === 'taken') member = members.get(ref.name);
    if (why === 'wait' || (why === 'taken' && !member))
      throw ApplicationFailure.create({
        type: CLUSTER_NOT_SERVED_HERE,
        message: `cluster "${ref.name}" is not served by this replica of pool "${pool}" now (let go a moment ago, or not taken yet): the task waits for a worker that serves it`,
        nextRetryDelay: `${notServedRetrySeconds(input.attempt ?? 1)}s`,
      });
    if (typeof why === 'object') throw ApplicationFailure.create({ type: CLUSTER_LET_GO, message: why.gone, nonRetryable: true });
    if (!member)
      throw ApplicationFailure.create({
        type: WRONG_CLUSTER,
        message: `this task belongs to cluster "${ref.name}" but the worker that took it is pool "${pool}", which does not serve it: nothing was done; check the cluster's registration and the pool's kubeconfigs`,
        nonRetryable: true,
      });
  }
  // The name matches by construction; the identity (pinned uid, the API's answer now, the workflow's recorded uid) as
  // on a worker of its own. A probe skips the name check there only, as it does on a worker of its own.
  const why = await refusal(probe ? undefined : ref, probe ? undefined : member.name, member.identity, input.activityType);
  if (why) throw ApplicationFailure.create({ type: WRONG_CLUSTER, message: why, nonRetryable: true });
  return member;
}

/**
 * The pool's activities and their interceptor: each activity of `names` runs the member's own, for the member its
 * task names (memberFor); a member's running count follows its tasks.
 */
export function poolDispatch<A extends object>(o: {
  names: string[];
  members: ReadonlyMap<string, PoolMember<A>>;
  absent: (name: string) => Promise<Absence>;
  pool: string;
}) {
  const current = new AsyncLocalStorage<PoolMember<A>>();
  const activities = Object.fromEntries(
    o.names.map((name) => [
      name,
      (...args: unknown[]) => {
        const member = current.getStore();
        if (!member) throw new Error(`activity ${name} ran outside the pool's dispatch`);
        return (member.activities as Record<string, (...a: unknown[]) => unknown>)[name]!(...args);
      },
    ]),
  );
  const interceptor = (): { inbound: ActivityInboundCallsInterceptor } => ({
    inbound: {
      async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
        const { activityType, attempt } = Context.current().info;
        const member = await memberFor(o.members, o.absent, o.pool, { headers: input.headers, args: input.args, activityType, attempt });
        member.running++;
        try {
          return await current.run(member, () => next(input));
        } finally {
          member.running--;
        }
      },
    },
  });
  return { activities, interceptor };
}
