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
  const candidate = new LeaderCandidate(opts);
  candidate.start();
  return { isLeader: () => candidate.isLeader(), stop: () => candidate.stop() };
}

/**
 * This replica in the election: the lease as it last wrote it, whether it leads, and when its last successful
 * renewal was sent. One step (read the lease, act on the table above) every renewIntervalMs while leading,
 * every retryIntervalMs while following.
 */
class LeaderCandidate {
  private readonly timing: ElectionTiming;
  private readonly name: string;
  /** namespace/name, as logged. */
  private readonly leaseRef: string;
  private readonly observer = new LeaseObserver();
  private leading = false;
  /** The lease as our last successful write left it (undefined while not leading). */
  private held: Lease | undefined;
  private lastRenewSent: number | undefined;
  /** Steps down when no renewal succeeded in renewDeadlineMs, even while a step hangs. */
  private deadline: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Steps failed in a row (one warning in ten). */
  private failures = 0;
  /** The pause between steps: its timer, and what ends it early (stop). */
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly opts: LeaderElectionOptions) {
    this.timing = { ...DEFAULT_TIMING, ...opts.timing };
    this.name = opts.name ?? LEADER_LEASE;
    this.leaseRef = `${opts.namespace}/${this.name}`;
  }

  start(): void {
    this.running = this.loop();
  }

  isLeader(): boolean {
    return this.leading;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    await this.running;
    const release = this.leading ? this.held : undefined;
    this.become(false, STOPPING);
    if (release) await this.release(release);
  }

  /** Released: holder cleared, so the next replica takes over at its next step. */
  private async release(lease: Lease): Promise<void> {
    const r = await updateLease(this.opts.kube, lease, {
      ...lease.spec,
      holderIdentity: undefined,
      leaseDurationSeconds: 1,
      renewTime: microTime(Date.now()),
    }).catch(() => 'error' as const);
    if (r === 'conflict' || r === 'error')
      this.opts.log.warn({ lease: this.leaseRef }, 'could not release the leader lease; another replica takes over when it expires');
  }

  private async loop(): Promise<void> {
    const timing = this.timing;
    while (!this.stopped) {
      try {
        await this.step();
        this.failures = 0;
      } catch (err) {
        if (this.failures++ % 10 === 0)
          this.opts.log.warn(
            { err: err instanceof Error ? err.message : String(err), lease: this.leaseRef },
            'leader election step failed; retrying',
          );
      }
      if (this.leading && !stillLeader(this.lastRenewSent, monotonicNow(), timing))
        this.become(false, `no renewal for ${timing.renewDeadlineMs} ms`);
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, this.leading ? timing.renewIntervalMs : timing.retryIntervalMs);
      });
    }
  }

  private async step(): Promise<void> {
    const { kube, namespace, identity } = this.opts;
    // Durations on the monotonic clock; the wall clock only for the renewTime written.
    const sent = monotonicNow();
    const sentWall = Date.now();
    const lease = await getLease(kube, namespace, this.name);
    if (this.stopped) return;
    const expired = lease ? this.observer.expired(lease, monotonicNow(), this.timing.leaseDurationSeconds) : false;
    const s = electionStep(lease, identity, expired);
    if (s.action === 'follow') {
      if (this.leading) this.become(false, `the lease is held by ${s.holder}`);
      return;
    }
    if (s.action === 'create') return this.create(sent, sentWall);
    await this.renewOrTakeOver(lease!, s, sent, sentWall);
  }

  private async create(sent: number, sentWall: number): Promise<void> {
    const { kube, namespace, identity } = this.opts;
    const created = await createLease(
      kube,
      namespace,
      this.name,
      heldSpec(undefined, identity, sentWall, this.timing.leaseDurationSeconds),
    );
    if (created === 'conflict' || this.stopped) return;
    this.renewed(created, sent);
    this.become(true, 'created the lease');
  }

  /** Renews the lease we hold, or takes over one released or expired. */
  private async renewOrTakeOver(
    lease: Lease,
    s: Extract<ElectionStep, { action: 'renew' | 'takeOver' }>,
    sent: number,
    sentWall: number,
  ): Promise<void> {
    const { kube, identity } = this.opts;
    if (s.action === 'takeOver' && this.leading) this.become(false, 'the lease was released or expired under us');
    const updated = await updateLease(kube, lease, heldSpec(lease.spec, identity, sentWall, this.timing.leaseDurationSeconds));
    if (updated === 'conflict' || this.stopped) return; // someone else wrote first: look again
    this.renewed(updated, sent);
    if (s.action === 'takeOver')
      this.become(true, s.reason === 'released' ? 'the lease was released' : `the lease of ${lease.spec.holderIdentity} expired`);
    // The lease already names this identity (an earlier worker of this process could not release it): ours.
    else if (!this.leading) this.become(true, 'the lease already named this identity');
  }

  private renewed(lease: Lease, sent: number): void {
    this.held = lease;
    this.lastRenewSent = sent;
    this.observer.observe(lease, sent);
    if (this.deadline) clearTimeout(this.deadline);
    // Step down on time even if the next renewal hangs.
    this.deadline = setTimeout(() => {
      if (!stillLeader(this.lastRenewSent, monotonicNow(), this.timing))
        this.become(false, `no renewal for ${this.timing.renewDeadlineMs} ms`);
    }, this.timing.renewDeadlineMs);
    this.deadline.unref?.();
  }

  private become(leader: boolean, why: string): void {
    if (leader === this.leading) return;
    const { identity, log } = this.opts;
    this.leading = leader;
    if (leader) {
      log.info({ lease: this.leaseRef, identity }, `leader: running the singletons (${why})`);
      this.opts.onStartedLeading();
      return;
    }
    if (this.deadline) clearTimeout(this.deadline);
    this.held = undefined;
    // A graceful stop is news, not trouble; losing the lease while running is.
    log[why === STOPPING ? 'info' : 'warn']({ lease: this.leaseRef, identity }, `no longer leader: singletons stopped (${why})`);
    this.opts.onStoppedLeading();
  }
}
