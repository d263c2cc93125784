/**
 * Leader election over one coordination.k8s.io/v1 Lease:
 * exactly one replica runs the singletons (the StorageVersionMigration
 * bridge, the agreement watcher) at a time. The same protocol as client-go's
 * leaderelection, in a few lines:
 *
 *   lease / situation                         step
 *   ----------------------------------------  ------------------------------------------------
 *   missing                                   create it, holder = us            -> leader
 *   held by us                                renew (PUT with its resourceVersion)
 *   held by another, changing                 wait (follower)
 *   held by another, unchanged for its        take it over (PUT with its resourceVersion,
 *     leaseDurationSeconds on OUR clock          leaseTransitions + 1)            -> leader
 *   released (holderIdentity empty)           take it over                      -> leader
 *   any write answered 409                    someone else wrote first: read again next step
 *
 * Safety: a leader that cannot renew stops its singletons after renewDeadline
 * (two thirds of the lease duration) since its last successful renewal was
 * sent, while the others take over only after the lease has stayed unchanged
 * for the whole duration, measured from when they saw it (never earlier than
 * the renewal was sent). The gap between the two is the margin for slow
 * requests and clocks that run at slightly different speeds; no two replicas'
 * wall clocks are ever compared.
 *
 * On a graceful stop the leader stops its singletons, then releases the lease
 * (holderIdentity cleared), so another replica takes over at its next step
 * instead of after expiry.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client';
import { createLease, getLease, LeaseObserver, microTime, updateLease, type Lease, type LeaseSpec } from '../kube/leases';
import { monotonicNow } from '../kube/rate-limit';

export const LEADER_LEASE = 'svm-leader';
const STOPPING = 'stopping';

export interface ElectionTiming {
  /** How long a lease that stopped changing stays the holder's. */
  leaseDurationSeconds: number;
  /** The leader renews this often. */
  renewIntervalMs: number;
  /** A follower looks again this often. */
  retryIntervalMs: number;
  /** A leader that has not renewed for this long stops its singletons. */
  renewDeadlineMs: number;
}

export const DEFAULT_TIMING: ElectionTiming = {
  leaseDurationSeconds: 15,
  renewIntervalMs: 5000,
  retryIntervalMs: 2000,
  renewDeadlineMs: 10_000,
};

export type ElectionStep =
  | { action: 'create' }
  | { action: 'renew' }
  | { action: 'takeOver'; reason: 'expired' | 'released' }
  | { action: 'follow'; holder: string };

/** What to do with the lease as read (pure: the table above). */
export function electionStep(lease: Lease | undefined, identity: string, expired: boolean): ElectionStep {
  if (!lease) return { action: 'create' };
  const holder = lease.spec.holderIdentity;
  if (holder === identity) return { action: 'renew' };
  if (!holder) return { action: 'takeOver', reason: 'released' };
  if (expired) return { action: 'takeOver', reason: 'expired' };
  return { action: 'follow', holder };
}

/** The lease spec for a step that makes or keeps us the holder. */
export function heldSpec(prev: LeaseSpec | undefined, identity: string, now: number, durationSeconds: number): LeaseSpec {
  const keeping = prev?.holderIdentity === identity;
  return {
    ...prev,
    holderIdentity: identity,
    leaseDurationSeconds: durationSeconds,
    acquireTime: keeping && prev?.acquireTime ? prev.acquireTime : microTime(now),
    renewTime: microTime(now),
    leaseTransitions: keeping ? (prev?.leaseTransitions ?? 0) : prev ? (prev.leaseTransitions ?? 0) + 1 : 0,
  };
}

/** Whether a leader whose last successful renewal was sent at lastRenewSent may still act as one at now. */
export function stillLeader(lastRenewSent: number | undefined, now: number, timing: Pick<ElectionTiming, 'renewDeadlineMs'>): boolean {
  return lastRenewSent !== undefined && now - lastRenewSent < timing.renewDeadlineMs;
}

export interface LeaderElectionOptions {
  kube: KubeClient;
  namespace: string;
  identity: string;
  log: Logger;
  name?: string;
  timing?: Partial<ElectionTiming>;
  /** Starts the singletons; called when this replica becomes the leader. */
  onStartedLeading(): void;
  /** Stops them; called when it stops being the leader (lost, deadline passed, or stop()). */
  onStoppedLeading(): void;
}

export interface LeaderElection {
  isLeader(): boolean;
  /** Stops campaigning; a leader stops its singletons and releases the lease. */
  stop(): Promise<void>;
}

export function startLeaderElection(opts: LeaderElectionOptions): LeaderElection {
  const timing = { ...DEFAULT_TIMING, ...opts.timing };
  const name = opts.name ?? LEADER_LEASE;
  const { kube, namespace, identity, log } = opts;
  const observer = new LeaseObserver();
  let leading = false;
  let lastRenewSent: number | undefined;
  let held: Lease | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let deadline: NodeJS.Timeout | undefined;
  let failures = 0;
  let wake: (() => void) | undefined;

  const become = (leader: boolean, why: string) => {
    if (leader === leading) return;
    leading = leader;
    if (leader) {
      log.info({ lease: `${namespace}/${name}`, identity }, `leader: running the singletons (${why})`);
      opts.onStartedLeading();
    } else {
      if (deadline) clearTimeout(deadline);
      held = undefined;
      // A graceful stop is news, not trouble; losing the lease while running is.
      log[why === STOPPING ? 'info' : 'warn']({ lease: `${namespace}/${name}`, identity }, `no longer leader: singletons stopped (${why})`);
      opts.onStoppedLeading();
    }
  };

  const renewed = (lease: Lease, sent: number) => {
    held = lease;
    lastRenewSent = sent;
    observer.observe(lease, sent);
    if (deadline) clearTimeout(deadline);
    // Step down on time even if the next renewal hangs.
    deadline = setTimeout(() => {
      if (!stillLeader(lastRenewSent, monotonicNow(), timing)) become(false, `no renewal for ${timing.renewDeadlineMs} ms`);
    }, timing.renewDeadlineMs);
    deadline.unref?.();
  };

  const step = async () => {
    // Durations on the monotonic clock; the wall clock only for the renewTime written.
    const sent = monotonicNow();
    const sentWall = Date.now();
    const lease = await getLease(kube, namespace, name);
    if (stopped) return;
    const expired = lease ? observer.expired(lease, monotonicNow(), timing.leaseDurationSeconds) : false;
    const s = electionStep(lease, identity, expired);
    if (s.action === 'follow') {
      if (leading) become(false, `the lease is held by ${s.holder}`);
      return;
    }
    if (s.action === 'create') {
      const created = await createLease(kube, namespace, name, heldSpec(undefined, identity, sentWall, timing.leaseDurationSeconds));
      if (created === 'conflict' || stopped) return;
      renewed(created, sent);
      become(true, 'created the lease');
      return;
    }
    if (s.action === 'takeOver' && leading) become(false, 'the lease was released or expired under us');
    const updated = await updateLease(kube, lease!, heldSpec(lease!.spec, identity, sentWall, timing.leaseDurationSeconds));
    if (updated === 'conflict' || stopped) return; // someone else wrote first: look again
    renewed(updated, sent);
    if (s.action === 'takeOver')
      become(true, s.reason === 'released' ? 'the lease was released' : `the lease of ${lease!.spec.holderIdentity} expired`);
    // The lease already names this identity (an earlier worker of this process could not release it): ours.
    else if (!leading) become(true, 'the lease already named this identity');
  };

  const loop = async () => {
    while (!stopped) {
      try {
        await step();
        failures = 0;
      } catch (err) {
        if (failures++ % 10 === 0)
          log.warn(
            { err: err instanceof Error ? err.message : String(err), lease: `${namespace}/${name}` },
            'leader election step failed; retrying',
          );
      }
      if (leading && !stillLeader(lastRenewSent, monotonicNow(), timing)) become(false, `no renewal for ${timing.renewDeadlineMs} ms`);
      if (stopped) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, leading ? timing.renewIntervalMs : timing.retryIntervalMs);
      });
    }
  };
  const running = loop();

  return {
    isLeader: () => leading,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      wake?.();
      await running;
      const release = leading ? held : undefined;
      become(false, STOPPING);
      if (release) {
        // Released: holder cleared, so the next replica takes over at its next step.
        const r = await updateLease(kube, release, {
          ...release.spec,
          holderIdentity: undefined,
          leaseDurationSeconds: 1,
          renewTime: microTime(Date.now()),
        }).catch(() => 'error' as const);
        if (r === 'conflict' || r === 'error')
          log.warn({ lease: `${namespace}/${name}` }, 'could not release the leader lease; another replica takes over when it expires');
      }
    },
  };
}
