/**
 * One load budget for the whole cluster, whatever the number of replicas
 * Each replica holds a membership Lease
 * (svm-worker-<identity>, labelled app.kubernetes.io/component=svm-worker-member)
 * that it renews every refresh, lists the members every refresh, and spends
 * its share of SVM_QPS through its RateLimiter: an even split among the live
 * members, weighted by demand (below). Why the sum of the shares never
 * exceeds SVM_QPS:
 *
 * - Fresh views only. A replica spends only while its last successful member
 *   list was sent less than `freshMs` ago; otherwise it holds its bucket shut.
 *   Lists without a resourceVersion are consistent reads.
 * - Joining. A new replica spends nothing until `joinDelayMs` (> freshMs) after
 *   its lease was created: by then every replica still spending has listed
 *   since, counts it, and has shrunk its share. So a join never overshoots.
 * - Leaving. A member is counted until its lease has stayed unchanged for the
 *   lease duration on the counter's own clock, measured from when the counter
 *   first saw that version (never before the renewal was sent). A replica
 *   stops spending `marginMs` before its own lease could expire anywhere:
 *   at lastRenewSent + duration - margin. So the others grow only after a
 *   dead (or cut-off) replica has stopped. A graceful stop deletes the lease
 *   after the worker stopped spending, and the others grow at once.
 * - Bursts. Each bucket's burst is a fifth of a second of its share: over any
 *   window of T seconds the replicas together spend at most
 *   SVM_QPS * (T + 0.2) plus one token each, about 4% over on 5 s at 60 QPS.
 *
 * Shares follow demand. A migration runs one chunk at a time on one replica,
 * so an even split would give a lone migration SVM_QPS / replicas. Instead,
 * with N live members, each holds a floor f = SVM_QPS / (4N), and the members
 * that want more (updates wait for their bucket's tokens, or were served in
 * the last `idleAfterMs`) announce it on their lease (annotation
 * migration.k8s.io/budget-demand) and split the rest: with A of them active,
 * each spends (SVM_QPS - (N - A) f) / A. Alone, a member spends the whole.
 * The sum stays within SVM_QPS because demand moves like membership:
 *
 * - Becoming active. A member spends its floor, which was always reserved for
 *   it, until `joinDelayMs` after the write that announced its demand was
 *   answered: by then every member still spending has listed since and
 *   counts it among the A, which only shrinks their shares.
 * - Becoming idle. A member drops to its floor first and announces it after;
 *   the others grow only once they read that. A member counted active by
 *   others while it spends its floor only makes their shares smaller.
 * - A view with more members or more active ones gives every member a
 *   smaller share, so views that lag in any of these ways err on the side of
 *   spending less.
 *
 * Expired member leases (replicas that died) are deleted by whoever sees them
 * expired, with their resourceVersion as precondition.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client';
import { createLease, deleteLease, getLease, listLeases, LeaseObserver, microTime, updateLease, type Lease } from '../kube/leases';
import { monotonicNow, type RateLimiter } from '../kube/rate-limit';
import type { MigratorMetrics } from './metrics';

export const MEMBER_LABEL_KEY = 'app.kubernetes.io/component';
export const MEMBER_LABEL_VALUE = 'svm-worker-member';
export const MEMBER_SELECTOR = `${MEMBER_LABEL_KEY}=${MEMBER_LABEL_VALUE}`;
/** On a member's lease: "true" while it wants more than its floor. */
export const DEMAND_ANNOTATION = 'migration.k8s.io/budget-demand';
/** Each member's floor is the budget / (FLOOR_DIVISOR x members). */
export const FLOOR_DIVISOR = 4;

export interface BudgetTiming {
  leaseDurationSeconds: number;
  /** Renew our lease and list the members this often. */
  refreshMs: number;
  /** A share computed from a list older than this is not spent. */
  freshMs: number;
  /** A new member waits this long after creating its lease. */
  joinDelayMs: number;
  /** Stop spending this long before our lease could expire in anyone's view. */
  marginMs: number;
  /** Seconds of share a bucket may hold. */
  burstSeconds: number;
  /** A member with no update waiting for a token, and none served this long, has no demand (spends its floor). */
  idleAfterMs: number;
}

export const DEFAULT_BUDGET_TIMING: BudgetTiming = {
  leaseDurationSeconds: 15,
  refreshMs: 2000,
  freshMs: 5000,
  joinDelayMs: 7000,
  marginMs: 3000,
  burstSeconds: 0.2,
  idleAfterMs: 3000,
};

/** On a member's lease: the identity the process runs as (SVM_IDENTITY or its Pod name), whole. */
export const IDENTITY_ANNOTATION = 'migration.k8s.io/budget-identity';

/**
 * The lease name of a member process: a DNS label, readable from the start of its identity, unique by a
 * hash of the whole identity and the process's instance ID. Two processes never share a lease, whatever
 * their identities' length or prefix, even when both run as one SVM_IDENTITY: each is a member and spends
 * only its share.
 */
export function memberLeaseName(identity: string, instance: string): string {
  const clean = identity
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 30)
    .replace(/-+$/, '');
  const hash = createHash('sha256').update(`${identity}\n${instance}`).digest('hex').slice(0, 16);
  return `svm-worker-${clean ? `${clean}-` : ''}${hash}`;
}

export interface ShareInput {
  qps: number;
  /** Live members in the last list, and whether we were among them. */
  liveMembers: number;
  selfCounted: boolean;
  now: number;
  /** When our lease was (re)created (the create's answer arrived). */
  joinedAt: number | undefined;
  /** When our last successful renewal was sent. */
  lastRenewSent: number | undefined;
  /** When our last successful member list was sent. */
  lastListSent: number | undefined;
  /** Live members other than us that announce demand, in the last list. */
  activeOthers: number;
  /** Whether the last list showed our own lease announcing demand. */
  selfActiveListed: boolean;
  /** When the write announcing our demand was answered; undefined while we have none (or it is not announced yet). */
  activeSince: number | undefined;
}

export type Share =
  | {
      spend: true;
      qps: number;
      members: number;
      active: number;
      /** Set when the Lease API does not answer: the fallback share (fallbackShare), and why. */
      fallback?: string;
    }
  | { spend: false; why: string };

/** The reasons shareOf holds for want of the Lease API (a renewal or a list that did not come back in time). */
const LEASE_API_REASONS = new Set(['membership lease not renewed in time', 'no recent list of the members']);

/**
 * When the Lease API is slow or unavailable, a replica that was spending does not stop: it spends the
 * even split of the membership it last saw, budget / members (no demand weighting). While the Lease API
 * fails for every replica alike (an outage, a policy, an API server restart) nobody can join, so the
 * replicas together stay within the budget. (If it failed for some replicas only, the others would drop
 * them once their leases expired, and the total could exceed the budget by those replicas' fallback
 * shares: said in docs/load.md.) A replica that never had a share (joining) keeps holding.
 */
export function fallbackShare(held: Share, lastKnownMembers: number | undefined, qps: number): Share {
  if (held.spend || lastKnownMembers === undefined || !LEASE_API_REASONS.has(held.why)) return held;
  const members = Math.max(1, lastKnownMembers);
  return { spend: true, qps: qps / members, members, active: 0, fallback: held.why };
}

/** This replica's share of the budget right now (pure: the rules above). */
export function shareOf(i: ShareInput, t: BudgetTiming = DEFAULT_BUDGET_TIMING): Share {
  if (i.joinedAt === undefined || i.lastRenewSent === undefined) return { spend: false, why: 'no membership lease yet' };
  if (i.now - i.lastRenewSent >= t.leaseDurationSeconds * 1000 - t.marginMs)
    return { spend: false, why: 'membership lease not renewed in time' };
  if (i.lastListSent === undefined || i.now - i.lastListSent >= t.freshMs) return { spend: false, why: 'no recent list of the members' };
  if (!i.selfCounted) return { spend: false, why: 'not counted among the members yet' };
  if (i.now - i.joinedAt < t.joinDelayMs) return { spend: false, why: 'joining: waiting until every member counts us' };
  const members = Math.max(1, i.liveMembers);
  if (members === 1) return { spend: true, qps: i.qps, members, active: 1 };
  const floor = i.qps / (FLOOR_DIVISOR * members);
  // Counted active by every member still spending: announced joinDelay ago, and our own list shows it.
  const counted = i.activeSince !== undefined && i.now - i.activeSince >= t.joinDelayMs && i.selfActiveListed;
  const active = Math.min(members, i.activeOthers + 1);
  if (!counted) return { spend: true, qps: floor, members, active: Math.min(members, i.activeOthers) };
  return { spend: true, qps: (i.qps - (members - active) * floor) / active, members, active };
}

export interface BudgetOptions {
  kube: KubeClient;
  namespace: string;
  identity: string;
  /** This process's instance ID (default: a random one): with the identity, it names our lease and holds it. */
  instance?: string;
  /** The cluster-wide budget, updates per second (> 0). */
  qps: number;
  limiter: RateLimiter;
  log: Logger;
  timing?: Partial<BudgetTiming>;
  /** The share and the updates waiting for it, exported (svm_budget_share_qps, svm_budget_waiting_updates). */
  metrics?: Pick<MigratorMetrics, 'budgetShare' | 'budgetWaiting' | 'budgetFallback'>;
}

export interface ClusterBudget {
  /** The share last applied (undefined: holding). */
  share(): Share;
  /** Stops spending, deletes our lease (the others' shares grow at their next refresh). */
  stop(): Promise<void>;
}

export function startClusterBudget(opts: BudgetOptions): ClusterBudget {
  const member = new BudgetMember(opts);
  member.start();
  return { share: () => member.share(), stop: () => member.stop() };
}

/** The lease as we write it: renewed, announcing our demand. */
function withDemand(l: Lease, demand: boolean): Lease {
  return { ...l, metadata: { ...l.metadata, annotations: { ...l.metadata.annotations, [DEMAND_ANNOTATION]: String(demand) } } };
}

/** What one list of the members says, as shareOf reads it. */
type MembersListed = Pick<ShareInput, 'liveMembers' | 'selfCounted' | 'selfActiveListed' | 'activeOthers'>;

/**
 * This process as a member of the budget: its lease, the view of the membership the share is computed from
 * (shareOf's input), and the share applied to the limiter. A refresh renews the lease, then lists the members,
 * every refreshMs (at once on a change of demand); the share is applied after each refresh and every 500 ms.
 */
class BudgetMember {
  private readonly t: BudgetTiming;
  private readonly name: string;
  /** Who holds our lease: this process, and no other (checked on every read of it). */
  private readonly holder: string;
  private readonly observer = new LeaseObserver();
  private readonly sameIdentity: SameIdentityWarning;
  /** What shareOf reads (its `now` is taken at each apply). */
  private readonly state: ShareInput;
  /** Our lease as last written (undefined: not created yet, or not heard back from its create). */
  private own: Lease | undefined;
  private current: Share = { spend: false, why: 'starting' };
  /** Live members in the last view we spent by (not a fallback): the fallback share divides by it. */
  private lastKnownMembers: number | undefined;
  private stopped = false;
  /** Refreshes failed in a row (one warning in ten). */
  private failures = 0;
  /** The pause between refreshes: its timer, and what ends it early (a change of demand, stop). */
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  /** Re-applies the share between refreshes. */
  private guard: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly opts: BudgetOptions) {
    this.t = { ...DEFAULT_BUDGET_TIMING, ...opts.timing };
    const instance = opts.instance ?? randomUUID();
    this.name = memberLeaseName(opts.identity, instance);
    this.holder = `${opts.identity}_${instance}`;
    this.sameIdentity = new SameIdentityWarning(opts, this.name);
    this.state = {
      qps: opts.qps,
      liveMembers: 0,
      selfCounted: false,
      now: monotonicNow(),
      joinedAt: undefined,
      lastRenewSent: undefined,
      lastListSent: undefined,
      activeOthers: 0,
      selfActiveListed: false,
      activeSince: undefined,
    };
  }

  start(): void {
    this.opts.limiter.hold();
    // Re-checked between refreshes: the deadlines hold even when a refresh hangs.
    this.guard = setInterval(() => this.apply(), 500);
    this.guard.unref?.();
    this.running = this.loop();
  }

  share(): Share {
    return this.current;
  }

  async stop(): Promise<void> {
    const { kube, namespace, limiter } = this.opts;
    this.stopped = true;
    clearInterval(this.guard);
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    limiter.hold();
    this.current = { spend: false, why: 'stopped' };
    await this.running;
    if (this.own) await deleteLease(kube, namespace, this.name, this.own.metadata.resourceVersion).catch(() => false);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.renew();
        if (!this.stopped) await this.list();
        this.failures = 0;
      } catch (err) {
        if (this.failures++ % 10 === 0)
          this.opts.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'load budget refresh failed; retrying');
      }
      this.apply();
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, this.t.refreshMs);
      });
    }
  }

  /** Demand: updates waiting for tokens now, or served lately (the next chunk of a migration follows shortly). */
  private wantsMore(): boolean {
    const { limiter } = this.opts;
    return limiter.waiting > 0 || monotonicNow() - limiter.lastTakeAt < this.t.idleAfterMs;
  }

  private announced(): boolean {
    return this.own?.metadata.annotations?.[DEMAND_ANNOTATION] === 'true';
  }

  /** The share of the view as it is now, given to the limiter, the log and the metrics. */
  private apply(): void {
    if (this.stopped) return;
    const { qps, limiter, metrics } = this.opts;
    const demand = this.wantsMore();
    // No demand: back to the floor now, announced at the next renewal (never the other way round).
    if (!demand) this.state.activeSince = undefined;
    // A change of demand is announced at once, not at the next refresh.
    if (demand !== this.announced()) this.wake?.();
    const next = fallbackShare(shareOf({ ...this.state, now: monotonicNow() }, this.t), this.lastKnownMembers, qps);
    if (next.spend && !next.fallback) this.lastKnownMembers = next.members;
    this.reportFallback(next);
    metrics?.budgetFallback.set(next.spend && next.fallback ? 1 : 0);
    if (next.spend) this.spend(next);
    else {
      limiter.hold();
      if (this.current.spend) this.opts.log.warn({ why: next.why }, 'load budget: holding (no share)');
    }
    this.current = next;
    metrics?.budgetShare.set(next.spend ? next.qps : 0);
    metrics?.budgetWaiting.set(limiter.waiting);
  }

  /** Says when the fallback share (the Lease API does not answer) begins and ends. */
  private reportFallback(next: Share): void {
    const { log, qps } = this.opts;
    const was = this.current.spend && this.current.fallback;
    if (next.spend && next.fallback && !was) {
      log.warn(
        { share: Number(next.qps.toFixed(2)), members: next.members, budget: qps, why: next.fallback },
        'load budget: the Lease API does not answer; spending the even split of the members last seen',
      );
    }
    if (was && !(next.spend && next.fallback)) log.info(next.spend ? {} : { why: next.why }, 'load budget: the Lease API answers again');
  }

  private spend(next: Extract<Share, { spend: true }>): void {
    const { log, qps, limiter } = this.opts;
    const current = this.current;
    limiter.setQps(next.qps, Math.max(1, Math.ceil(next.qps * this.t.burstSeconds)));
    if (current.spend && current.qps === next.qps) return;
    const fields = { share: Number(next.qps.toFixed(2)), members: next.members, active: next.active, budget: qps };
    // Members coming and going are news; shares following demand (every hop of a chunk) are detail.
    if (!current.spend || current.members !== next.members) log.info(fields, 'load budget share');
    else log.debug(fields, 'load budget share');
  }

  /** renewTime on the wall clock (read by others); every duration here on the monotonic clock. */
  private spec() {
    return { holderIdentity: this.holder, leaseDurationSeconds: this.t.leaseDurationSeconds, renewTime: microTime(Date.now()) };
  }

  private async renew(): Promise<void> {
    const sent = monotonicNow();
    const demand = this.wantsMore();
    if (!demand) {
      // Down to the floor before the write that says so is sent: the others may grow as soon as they read it.
      this.state.activeSince = undefined;
      this.apply();
    }
    const updated = this.own ? await updateLease(this.opts.kube, withDemand(this.own, demand), this.spec()) : 'conflict';
    const r = updated === 'conflict' ? await this.rewrite(demand) : updated;
    if (r === 'conflict') return; // written by someone else meanwhile: next refresh
    this.renewed(r, sent, demand);
  }

  /** Our lease is not as we last wrote it (or never was): read it, then update or create it. */
  private async rewrite(demand: boolean): Promise<Lease | 'conflict'> {
    const { kube, namespace, log } = this.opts;
    const found = await getLease(kube, namespace, this.name);
    if (!found) return this.create(demand);
    if (found.spec.holderIdentity !== this.holder) {
      // Held by another process (it cannot be ours by name alone): never taken over; we do not spend.
      log.error(
        { lease: `${namespace}/${this.name}`, holder: found.spec.holderIdentity },
        'load budget: our membership lease is held by another process; not spending',
      );
      return 'conflict';
    }
    const r = await updateLease(kube, withDemand(found, demand), this.spec());
    // Ours, but we never heard it created (the create's answer was lost on a reset connection, or a
    // restart kept the identity): join from now, so every member has counted us before we spend.
    if (r !== 'conflict' && this.state.joinedAt === undefined) {
      this.state.joinedAt = monotonicNow();
      log.info({ lease: `${namespace}/${this.name}` }, 'load budget: joined (the lease was there already)');
    }
    return r;
  }

  private async create(demand: boolean): Promise<Lease | 'conflict'> {
    const { kube, namespace, identity, log } = this.opts;
    const r = await createLease(
      kube,
      namespace,
      this.name,
      this.spec(),
      { [MEMBER_LABEL_KEY]: MEMBER_LABEL_VALUE },
      { [DEMAND_ANNOTATION]: String(demand), [IDENTITY_ANNOTATION]: identity },
    );
    if (r !== 'conflict') {
      this.state.joinedAt = monotonicNow();
      log.info({ lease: `${namespace}/${this.name}` }, 'load budget: joined');
    }
    return r;
  }

  /** Our renewal, sent at `sent` announcing `demand`, was answered with the lease. */
  private renewed(lease: Lease, sent: number, demand: boolean): void {
    const state = this.state;
    // Our lease lapsed (not renewed in time): the others may have dropped us, so join again.
    if (state.lastRenewSent !== undefined && sent - state.lastRenewSent >= this.t.leaseDurationSeconds * 1000 - this.t.marginMs)
      state.joinedAt = monotonicNow();
    // Joined now (again): our demand counts from this write's answer, like a first announcement.
    if (state.joinedAt !== undefined && state.joinedAt >= sent) state.activeSince = undefined;
    this.own = lease;
    state.lastRenewSent = sent;
    // Demand announced (this answer is the first to say so): counted once every member has listed since.
    if (demand && this.wantsMore() && state.activeSince === undefined) state.activeSince = monotonicNow();
    if (!demand) state.activeSince = undefined;
  }

  private async list(): Promise<void> {
    const sent = monotonicNow();
    const leases = await listLeases(this.opts.kube, this.opts.namespace, MEMBER_SELECTOR);
    const listed = await this.count(leases, monotonicNow());
    this.observer.retain(leases.map((l) => l.metadata.name));
    Object.assign(this.state, listed);
    this.state.lastListSent = sent;
  }

  /** The members of a list: the live ones, ourselves among them or not, and who announces demand. */
  private async count(leases: Lease[], now: number): Promise<MembersListed> {
    const { kube, namespace } = this.opts;
    const listed: MembersListed = { liveMembers: 0, selfCounted: false, selfActiveListed: false, activeOthers: 0 };
    const active = (l: Lease) => l.metadata.annotations?.[DEMAND_ANNOTATION] === 'true';
    for (const l of leases) {
      if (l.metadata.name === this.name && l.spec.holderIdentity === this.holder) {
        listed.selfCounted = true; // renewed just before this list
        listed.selfActiveListed = active(l);
        listed.liveMembers++;
        continue;
      }
      if (this.observer.expired(l, now, this.t.leaseDurationSeconds)) {
        // A replica that died: gone for good once deleted (a live one renewing meanwhile wins: precondition).
        await deleteLease(kube, namespace, l.metadata.name, l.metadata.resourceVersion).catch(() => false);
        continue;
      }
      listed.liveMembers++;
      if (active(l)) listed.activeOthers++;
      this.sameIdentity.check(l);
    }
    return listed;
  }
}

/**
 * Another live process claiming our identity (one SVM_IDENTITY given to two replicas): each is a member with a
 * lease of its own and spends only its share, but the operator should know. Warned once per lease, when it was
 * renewed since we first saw it: the lease of our own previous process, left by a crash, is not renewed.
 */
class SameIdentityWarning {
  /** Other members' leases that carry our identity, with the resourceVersion first seen. */
  private readonly firstSeen = new Map<string, string>();
  private readonly warned = new Set<string>();

  constructor(
    private readonly opts: Pick<BudgetOptions, 'identity' | 'namespace' | 'log'>,
    private readonly ownName: string,
  ) {}

  check(l: Lease): void {
    const { identity, namespace } = this.opts;
    const rv = l.metadata.resourceVersion;
    const firstRv = this.firstSeen.get(l.metadata.name);
    if (l.metadata.annotations?.[IDENTITY_ANNOTATION] === identity && firstRv === undefined) this.firstSeen.set(l.metadata.name, rv);
    else if (firstRv !== undefined && firstRv !== rv && !this.warned.has(l.metadata.name)) {
      this.warned.add(l.metadata.name);
      this.opts.log.warn(
        { identity, lease: `${namespace}/${l.metadata.name}`, own: `${namespace}/${this.ownName}` },
        'load budget: another process runs with this identity; both count as members (give each replica its own SVM_IDENTITY)',
      );
    }
  }
}
