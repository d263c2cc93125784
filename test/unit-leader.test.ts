/**
 * Unit tests of the pure rules of leader election (src/worker/leader.ts), the
 * budget shares (src/worker/budget.ts), lease expiry as seen from one process
 * (src/kube/leases.ts) and the adjustable RateLimiter (src/kube/rate-limit.ts).
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import test from 'node:test';
import { LeaseObserver, microTime, type Lease } from '../src/kube/leases';
import { RateLimiter, WaitAbortedError } from '../src/kube/rate-limit';
import {
  DEFAULT_BUDGET_TIMING,
  FLOOR_DIVISOR,
  memberLeaseName,
  shareOf,
  fallbackShare,
  type Share,
  startClusterBudget,
  type ClusterBudget,
  type ShareInput,
} from '../src/worker/budget';
import { fakeApi } from './helpers/fake-api';
import { createMetrics } from '../src/worker/metrics';
import { DEFAULT_TIMING, electionStep, heldSpec, startLeaderElection, stillLeader } from '../src/worker/leader';

const lease = (holder: string | undefined, rv = '1', extra: Partial<Lease['spec']> = {}): Lease => ({
  metadata: { name: 'svm-leader', namespace: 'svm-system', resourceVersion: rv },
  spec: { holderIdentity: holder, leaseDurationSeconds: 15, ...extra },
});

// --- election ---------------------------------------------------------------------------

void test('electionStep: the table of src/worker/leader.ts', () => {
  assert.deepEqual(electionStep(undefined, 'me', false), { action: 'create' });
  assert.deepEqual(electionStep(lease('me'), 'me', false), { action: 'renew' });
  assert.deepEqual(electionStep(lease('me'), 'me', true), { action: 'renew' }, 'our own lease, even if it looks expired: renew it');
  assert.deepEqual(electionStep(lease('other'), 'me', false), { action: 'follow', holder: 'other' });
  assert.deepEqual(electionStep(lease('other'), 'me', true), { action: 'takeOver', reason: 'expired' });
  assert.deepEqual(electionStep(lease(undefined), 'me', false), { action: 'takeOver', reason: 'released' });
  assert.deepEqual(electionStep(lease(''), 'me', false), { action: 'takeOver', reason: 'released' });
});

void test('heldSpec: a renewal keeps acquireTime and transitions; a take-over counts one more transition', () => {
  const now = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
  const mine = heldSpec({ holderIdentity: 'me', acquireTime: 'A', leaseTransitions: 4 }, 'me', now, 15);
  assert.equal(mine.acquireTime, 'A');
  assert.equal(mine.leaseTransitions, 4);
  assert.equal(mine.renewTime, '2025-01-02T03:04:05.678000Z');
  const taken = heldSpec({ holderIdentity: 'other', acquireTime: 'A', leaseTransitions: 4 }, 'me', now, 15);
  assert.equal(taken.holderIdentity, 'me');
  assert.equal(taken.acquireTime, '2025-01-02T03:04:05.678000Z');
  assert.equal(taken.leaseTransitions, 5);
  assert.equal(taken.leaseDurationSeconds, 15);
  assert.equal(heldSpec(undefined, 'me', now, 15).leaseTransitions, 0);
});

void test('stillLeader: a leader steps down renewDeadline after its last renewal was sent, before anyone may take over', () => {
  assert.ok(
    DEFAULT_TIMING.renewDeadlineMs < DEFAULT_TIMING.leaseDurationSeconds * 1000,
    'the leader stops before the lease can expire elsewhere',
  );
  assert.ok(DEFAULT_TIMING.renewIntervalMs < DEFAULT_TIMING.renewDeadlineMs, 'at least one retry of the renewal before stepping down');
  assert.equal(stillLeader(undefined, 1000, DEFAULT_TIMING), false);
  assert.equal(stillLeader(1000, 1000 + DEFAULT_TIMING.renewDeadlineMs - 1, DEFAULT_TIMING), true);
  assert.equal(stillLeader(1000, 1000 + DEFAULT_TIMING.renewDeadlineMs, DEFAULT_TIMING), false);
});

void test('microTime: RFC 3339 with microseconds, as the API server writes MicroTime', () => {
  assert.equal(microTime(Date.UTC(2025, 5, 1, 0, 0, 0, 5)), '2025-06-01T00:00:00.005000Z');
});

// --- expiry on our own clock ----------------------------------------------------------------

void test('LeaseObserver: a lease expires once unchanged for its duration since we first saw that version', () => {
  const o = new LeaseObserver();
  // A renewTime far in the past (another machine's clock) does not matter: first sight counts as just renewed.
  const l = lease('other', '7', { renewTime: '2000-01-01T00:00:00.000000Z' });
  assert.equal(o.expired(l, 10_000, 15), false);
  assert.equal(o.expired(l, 24_999, 15), false);
  assert.equal(o.expired(l, 25_000, 15), true);
  // A renewal (new resourceVersion) restarts the clock.
  assert.equal(o.expired(lease('other', '8'), 25_000, 15), false);
  assert.equal(o.expired(lease('other', '8'), 39_999, 15), false);
  // Forgotten when deleted, then seen again: first sight again.
  o.retain([]);
  assert.equal(o.expired(lease('other', '8'), 100_000, 15), false);
});

// --- budget shares --------------------------------------------------------------------------

const t = DEFAULT_BUDGET_TIMING;
const base: ShareInput = {
  qps: 60,
  liveMembers: 3,
  selfCounted: true,
  now: 100_000,
  joinedAt: 50_000,
  lastRenewSent: 99_000,
  lastListSent: 99_000,
  activeOthers: 2,
  selfActiveListed: true,
  activeSince: 50_000,
};
const floor = (qps: number, members: number) => qps / (FLOOR_DIVISOR * members);

void test('shareOf: every member active: the budget divided by the live members; alone: the whole budget', () => {
  assert.deepEqual(shareOf(base), { spend: true, qps: 20, members: 3, active: 3 });
  assert.deepEqual(shareOf({ ...base, liveMembers: 1, activeOthers: 0 }), { spend: true, qps: 60, members: 1, active: 1 });
  assert.deepEqual(shareOf({ ...base, liveMembers: 1, activeOthers: 0, activeSince: undefined }), {
    spend: true,
    qps: 60,
    members: 1,
    active: 1,
  });
});

void test('shareOf: shares follow demand: idle members keep a floor, the active ones split the rest', () => {
  // 60/s, 3 members, floor 60 / 12 = 5.
  assert.equal(floor(60, 3), 5);
  assert.deepEqual(shareOf({ ...base, activeOthers: 0 }), { spend: true, qps: 50, members: 3, active: 1 }, 'the only active one');
  assert.deepEqual(shareOf({ ...base, activeOthers: 1 }), { spend: true, qps: 27.5, members: 3, active: 2 });
  assert.deepEqual(shareOf({ ...base, activeSince: undefined }), { spend: true, qps: 5, members: 3, active: 2 }, 'idle: the floor');
});

void test('shareOf: announced demand counts only once every member still spending has listed since, and our own list shows it', () => {
  assert.ok(t.joinDelayMs > t.freshMs);
  assert.deepEqual(shareOf({ ...base, activeOthers: 0, activeSince: base.now - t.joinDelayMs + 1 }), {
    spend: true,
    qps: 5,
    members: 3,
    active: 0,
  });
  assert.equal((shareOf({ ...base, activeOthers: 0, activeSince: base.now - t.joinDelayMs }) as { qps: number }).qps, 50);
  assert.equal((shareOf({ ...base, activeOthers: 0, selfActiveListed: false }) as { qps: number }).qps, 5);
});

void test('shareOf: whatever the members and the active ones, the shares of one view add up to the budget; a view that lags (more members, more active) gives less', () => {
  const spend = (i: ShareInput) => {
    const s = shareOf(i);
    assert.ok(s.spend);
    return s.qps;
  };
  for (const qps of [1, 20, 60, 100, 1000]) {
    for (let n = 2; n <= 6; n++) {
      for (let a = 0; a <= n; a++) {
        const view = { ...base, qps, liveMembers: n };
        const activeShare = a > 0 ? spend({ ...view, activeOthers: a - 1 }) : 0;
        const idleShare = spend({ ...view, activeOthers: a, activeSince: undefined });
        const sum = a * activeShare + (n - a) * idleShare;
        // Nobody wanting more leaves the rest unspent; anyone wanting more takes it.
        const expected = a === 0 ? n * floor(qps, n) : qps;
        assert.ok(Math.abs(sum - expected) < 1e-9 * qps, `qps ${qps}, ${n} members, ${a} active: the shares add up to ${sum}`);
        assert.ok(idleShare <= qps / n + 1e-9, 'a floor is never more than an even share');
        if (a > 0) {
          assert.ok(activeShare >= qps / n - 1e-9, 'an active member never gets less than an even share');
          if (a < n) assert.ok(spend({ ...view, activeOthers: a }) < activeShare, 'one more active: less');
          assert.ok(spend({ ...view, liveMembers: n + 1, activeOthers: a - 1 }) < activeShare, 'one more member: less');
        }
        assert.ok(
          spend({ ...view, liveMembers: n + 1, activeOthers: a, activeSince: undefined }) < idleShare,
          'one more member: a lower floor',
        );
      }
    }
  }
});

void test('shareOf: a new member spends nothing until every member has listed since it joined', () => {
  assert.ok(t.joinDelayMs > t.freshMs, 'anyone spending has listed since we joined');
  assert.equal(shareOf({ ...base, joinedAt: base.now - t.joinDelayMs + 1 }).spend, false);
  assert.equal(shareOf({ ...base, joinedAt: base.now - t.joinDelayMs }).spend, true);
  assert.equal(shareOf({ ...base, joinedAt: undefined }).spend, false);
  assert.equal(shareOf({ ...base, selfCounted: false }).spend, false);
});

void test('shareOf: nothing is spent on a stale view or a lease that may have expired elsewhere', () => {
  assert.equal(shareOf({ ...base, lastListSent: base.now - t.freshMs }).spend, false);
  assert.equal(shareOf({ ...base, lastListSent: undefined }).spend, false);
  assert.equal(shareOf({ ...base, lastRenewSent: base.now - (t.leaseDurationSeconds * 1000 - t.marginMs) }).spend, false);
  assert.equal(shareOf({ ...base, lastRenewSent: base.now - (t.leaseDurationSeconds * 1000 - t.marginMs) + 1 }).spend, true);
  assert.ok(t.refreshMs * 2 < t.leaseDurationSeconds * 1000 - t.marginMs, 'several refreshes before a member stops spending');
});

void test('shareOf + bursts: N members spend at most the budget plus their bursts over 5 s, within 10%', () => {
  for (const qps of [10, 60, 100, 1000]) {
    for (const n of [1, 2, 3, 5]) {
      for (let a = 0; a <= n; a++) {
        const view = { ...base, qps, liveMembers: n };
        const shares = [
          ...Array.from({ length: a }, () => shareOf({ ...view, activeOthers: a - 1 })),
          ...Array.from({ length: n - a }, () => shareOf({ ...view, activeOthers: a, activeSince: undefined })),
        ];
        const bursts = shares.reduce((sum, s) => (assert.ok(s.spend), sum + Math.max(1, Math.ceil(s.qps * t.burstSeconds))), 0);
        const worst = bursts + qps * 5;
        if (qps >= 60) assert.ok(worst <= qps * 5 * 1.1, `qps ${qps}, ${n} members, ${a} active: ${worst} in 5 s`);
      }
    }
  }
});

void test('memberLeaseName: a DNS label, readable from the identity, unique per identity and process whatever the length', () => {
  const dns = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  assert.match(memberLeaseName('svm-worker-7d9f-abcde-12', 'i1'), /^svm-worker-svm-worker-7d9f-abcde-12-[0-9a-f]{16}$/);
  assert.match(memberLeaseName('Host_Name.local-42', 'i1'), /^svm-worker-host-name-local-42-[0-9a-f]{16}$/);
  // Pod names of one Deployment with a long name share their first 60 characters.
  const prefix = 'storage-version-migrator-with-a-very-long-deployment-name-abc';
  const names = ['-7d9f5-x2k4q', '-7d9f5-p9z8m', '-7d9f5-l3n1v'].map((s) => memberLeaseName(prefix + s, 'i1'));
  for (const n of names) assert.ok(n.length <= 63 && dns.test(n), n);
  assert.equal(new Set(names).size, 3, names.join(' '));
  // Two processes with one SVM_IDENTITY: two leases.
  assert.notEqual(memberLeaseName('svm', 'i1'), memberLeaseName('svm', 'i2'));
  assert.equal(memberLeaseName('svm', 'i1'), memberLeaseName('svm', 'i1'));
  for (const odd of ['x'.repeat(200), '___', 'A.B.C'.repeat(40)]) {
    const n = memberLeaseName(odd, 'i1');
    assert.ok(n.length <= 63 && dns.test(n), n);
  }
});

// --- the adjustable bucket ------------------------------------------------------------------

void test('fallbackShare: without the Lease API a replica that was spending spends budget / the members it last saw; joining ones and other holds stay held', () => {
  const noRenew: Share = { spend: false, why: 'membership lease not renewed in time' };
  const noList: Share = { spend: false, why: 'no recent list of the members' };
  assert.deepEqual(fallbackShare(noRenew, 3, 60), { spend: true, qps: 20, members: 3, active: 0, fallback: noRenew.why });
  assert.deepEqual(fallbackShare(noList, 1, 60), { spend: true, qps: 60, members: 1, active: 0, fallback: noList.why });
  // Never spending before: holds.
  assert.deepEqual(fallbackShare(noList, undefined, 60), noList);
  // Membership reasons are not the Lease API's: held.
  for (const why of ['joining: waiting until every member counts us', 'not counted among the members yet', 'no membership lease yet'])
    assert.deepEqual(fallbackShare({ spend: false, why }, 3, 60), { spend: false, why });
  // A share already spent is kept.
  const spending: Share = { spend: true, qps: 50, members: 3, active: 1 };
  assert.equal(fallbackShare(spending, 3, 60), spending);
  // Every replica falling back at once (the Lease API down for all) stays within the budget.
  assert.equal(
    [1, 2, 3].reduce((sum) => sum + (fallbackShare(noRenew, 3, 60) as { qps: number }).qps, 0),
    60,
  );
});

void test('RateLimiter: a held bucket gives up a wait at once when its signal aborts, and the given-up turn takes no token', async () => {
  const l = new RateLimiter(1000, { burst: 1 });
  l.hold();
  const cancelled = new AbortController();
  const first = l.take(cancelled.signal);
  const second = l.take(); // behind the first, no signal
  setTimeout(() => cancelled.abort(), 50);
  // The bucket stays held throughout: only giving the wait up can end it.
  await assert.rejects(first, WaitAbortedError);
  // The second caller still waits for the hold to end, then gets its token: the abandoned turn took none.
  let served = false;
  void second.then(() => (served = true));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(served, false, 'still held');
  l.setQps(1000, 1);
  await second;
  assert.equal(l.waiting, 0);
  // Already aborted: rejected without waiting.
  await assert.rejects(l.take(AbortSignal.abort()), WaitAbortedError);
});

void test('RateLimiter: a token on hand is served at once, but never ahead of a caller already waiting, and the rate still binds', async () => {
  // Unlimited: every take is served at once, with or without a signal; an aborted signal is still refused.
  const open = new RateLimiter(0);
  const signal = new AbortController().signal;
  for (let i = 0; i < 1000; i++) await open.take(signal);
  assert.equal(open.waiting, 0);
  await assert.rejects(open.take(AbortSignal.abort()), WaitAbortedError);

  // 10/s, burst 2: two at once, the third waits ~100 ms; a fourth taken while the third waits is served after it.
  const l = new RateLimiter(10, { burst: 2 });
  await l.take();
  await l.take();
  const order: number[] = [];
  const t0 = performance.now();
  const third = l.take(signal).then(() => order.push(3));
  const fourth = l.take().then(() => order.push(4));
  await Promise.all([third, fourth]);
  const took = performance.now() - t0;
  assert.deepEqual(order, [3, 4], 'served in the order taken');
  assert.ok(took >= 150, `two tokens beyond the burst at 10/s came after ${took.toFixed(0)} ms, not ~200`);
  // Paused: a token on hand waits for the pause.
  const p = new RateLimiter(0);
  p.pause(100);
  const t1 = performance.now();
  await p.take();
  assert.ok(performance.now() - t1 >= 80, 'a paused bucket serves nothing before the pause ends');
});

void test('RateLimiter: hold shuts the bucket until setQps opens it; the burst follows the rate', async () => {
  const l = new RateLimiter(1000);
  l.hold();
  assert.equal(l.isHeld, true);
  let got = false;
  const p = l.take().then(() => (got = true));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(got, false, 'a held bucket gives nothing');
  l.setQps(1000, 5);
  await p;
  assert.equal(got, true, 'opened by setQps');
  assert.equal(l.rate, 1000);
  // A bucket never holds more than its burst: after idle time, two tokens (the burst), and the third waits for the rate.
  l.setQps(1, 2);
  await new Promise((r) => setTimeout(r, 100));
  await l.take();
  await l.take();
  let third = false;
  const p3 = l.take().then(() => (third = true));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(third, false, 'the third waits for the rate (1/s)');
  l.setQps(1000);
  await p3;
});

/** A fake API server with just the Lease endpoints (optimistic concurrency as the real one). */
async function leaseApi(opts: { dropFirstCreate?: boolean } = {}) {
  const leases = new Map<string, Lease>();
  let rv = 1;
  const counts = { creates: 0 };
  const api = await fakeApi((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const name = /\/leases\/([^/]+)$/.exec(url.pathname)?.[1];
      const answer = (status: number, obj: unknown) => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(obj));
      };
      const notFound = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 };
      if (req.method === 'POST') {
        const lease = JSON.parse(body) as Lease;
        lease.metadata.resourceVersion = String(rv++);
        leases.set(lease.metadata.name, lease);
        if (++counts.creates === 1 && opts.dropFirstCreate) return req.socket.destroy(); // applied, never answered
        return answer(201, lease);
      }
      if (req.method === 'GET' && name) return leases.has(name) ? answer(200, leases.get(name)) : answer(404, notFound);
      if (req.method === 'GET')
        return answer(200, { kind: 'LeaseList', apiVersion: 'coordination.k8s.io/v1', metadata: {}, items: [...leases.values()] });
      if (req.method === 'PUT' && name) {
        const lease = JSON.parse(body) as Lease;
        if (leases.get(name)?.metadata.resourceVersion !== lease.metadata.resourceVersion)
          return answer(409, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Conflict', code: 409 });
        lease.metadata.resourceVersion = String(rv++);
        leases.set(name, lease);
        return answer(200, lease);
      }
      if (req.method === 'DELETE' && name) return leases.delete(name) ? answer(200, {}) : answer(404, notFound);
      answer(405, {});
    });
  });
  return { ...api, leases, counts };
}

void test('startClusterBudget: a membership lease created but whose answer was lost is taken up, and its share spent after the join delay', async () => {
  // The first create is applied, then its connection dropped unanswered.
  const api = await leaseApi({ dropFirstCreate: true });
  const kube = api.kube;
  const limiter = new RateLimiter(10);
  const metrics = createMetrics();
  const budget = startClusterBudget({
    kube,
    namespace: 'svm-system',
    identity: 'replica-a',
    qps: 10,
    limiter,
    metrics,
    log: pino({ level: 'silent' }),
    timing: { refreshMs: 100, freshMs: 500, joinDelayMs: 300, marginMs: 300, leaseDurationSeconds: 2 },
  });
  try {
    const deadline = Date.now() + 5000;
    while (!budget.share().spend && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(budget.share(), { spend: true, qps: 10, members: 1, active: 1 }, `still holding: ${JSON.stringify(budget.share())}`);
    assert.equal(api.counts.creates, 1, 'the lease was created once, its lost answer not repeated as a second create');
    assert.equal(limiter.isHeld, false);
    // The share is exported (svm_budget_share_qps): the alerts on a starved or holding budget read it.
    const share = (await metrics.registry.getSingleMetric('svm_budget_share_qps')!.get()).values[0]?.value;
    assert.equal(share, 10);
  } finally {
    await budget.stop();
    await api.close();
  }
});

void test('startClusterBudget: three members, demand moving between them: the sum of their rates never exceeds the budget, and the one with demand gets most of it', async () => {
  const api = await leaseApi();
  const qps = 60;
  const timing = { refreshMs: 100, freshMs: 300, joinDelayMs: 450, marginMs: 300, leaseDurationSeconds: 2, idleAfterMs: 400 };
  const members: Array<{ limiter: RateLimiter; budget: ClusterBudget; demand: boolean }> = ['a', 'b', 'c'].map((id) => {
    const limiter = new RateLimiter(qps);
    const budget = startClusterBudget({
      kube: api.kube,
      namespace: 'svm-system',
      identity: id,
      qps,
      limiter,
      log: pino({ level: 'silent' }),
      timing,
    });
    return { limiter, budget, demand: false };
  });
  // Each member with demand takes tokens as fast as its bucket gives them (as updates waiting on the budget do).
  let running = true;
  const takers = members.map(async (m) => {
    while (running) {
      if (m.demand) await m.limiter.take();
      else await new Promise((r) => setTimeout(r, 10));
    }
  });
  // Sampled together, synchronously: what the three buckets would give per second at that instant.
  let worst = 0;
  const best = [0, 0, 0];
  const rate = (l: RateLimiter) => (l.isHeld ? 0 : l.rate);
  const sampler = setInterval(() => {
    const rates = members.map((m) => rate(m.limiter));
    worst = Math.max(
      worst,
      rates.reduce((a, b) => a + b, 0),
    );
    rates.forEach((r, i) => (best[i] = Math.max(best[i]!, m(i) ? r : 0)));
  }, 2);
  const m = (i: number) => members[i]!.demand;
  const phase = async (demand: boolean[], ms: number) => {
    demand.forEach((d, i) => (members[i]!.demand = d));
    await new Promise((r) => setTimeout(r, ms));
  };
  try {
    // The demand hops a -> b -> c -> a (as a migration's chunks move between replicas): each, alone with it, gets
    // all but the others' floors, 60 - 2 x 5 = 50/s, once counted.
    for (const i of [0, 1, 2, 0]) {
      best.fill(0);
      await phase(
        [0, 1, 2].map((k) => k === i),
        1500,
      );
      assert.equal(best[i], qps - 2 * floor(qps, 3), `member ${i}, alone with demand, got ${best[i]}/s`);
    }
    best.fill(0);
    await phase([true, false, true], 2000); // a and c: (60 - 5) / 2 = 27.5/s each, b its floor
    assert.deepEqual(
      members.map((x) => rate(x.limiter)),
      [(qps - floor(qps, 3)) / 2, floor(qps, 3), (qps - floor(qps, 3)) / 2],
    );
    assert.ok(worst <= qps + 1e-9, `the three buckets together gave up to ${worst}/s, over the budget ${qps}/s`);
    const annotations = [...api.leases.values()].map((l) => l.metadata.annotations?.['migration.k8s.io/budget-demand']).sort();
    assert.deepEqual(annotations, ['false', 'true', 'true'], 'the leases say who wants more');
  } finally {
    running = false;
    clearInterval(sampler);
    for (const x of members) await x.budget.stop();
    members.forEach((x) => x.limiter.setQps(1000)); // release takers waiting on a held bucket
    await Promise.all(takers);
    await api.close();
  }
});

void test('startLeaderElection: a leader that stops gracefully says so at info (no warning on a terminal), and releases the lease', async () => {
  const api = await leaseApi();
  const entries: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void entries.push(JSON.parse(line) as { level: number; msg: string }) });
  let leading = false;
  const election = startLeaderElection({
    kube: api.kube,
    namespace: 'svm-system',
    identity: 'replica-a',
    log,
    timing: { leaseDurationSeconds: 2, renewIntervalMs: 100, retryIntervalMs: 100, renewDeadlineMs: 1000 },
    onStartedLeading: () => (leading = true),
    onStoppedLeading: () => (leading = false),
  });
  try {
    const deadline = Date.now() + 5000;
    while (!election.isLeader() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(leading, 'became the leader');
  } finally {
    await election.stop();
    await api.close();
  }
  assert.equal(leading, false);
  const stopped = entries.find((e) => e.msg.startsWith('no longer leader'));
  assert.ok(stopped, JSON.stringify(entries));
  assert.equal(stopped.level, 30, `a graceful stop is info: ${JSON.stringify(stopped)}`);
  assert.ok(!entries.some((e) => e.level >= 40), JSON.stringify(entries));
  assert.equal(api.leases.get('svm-leader')?.spec.holderIdentity, undefined, 'released');
});
