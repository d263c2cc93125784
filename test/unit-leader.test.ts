/**
 * Unit tests of the pure rules of leader election (src/worker/leader.ts), the
 * budget shares (src/worker/budget.ts), lease expiry as seen from one process
 * (src/kube/leases.ts) and the adjustable RateLimiter (src/kube/rate-limit.ts).
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import test from 'node:test';
import { LeaseObserver, microTime, type Lease } from '../src/kube/leases';
import { RateLimiter } from '../src/kube/rate-limit';
import { DEFAULT_BUDGET_TIMING, memberLeaseName, shareOf, startClusterBudget, type ShareInput } from '../src/worker/budget';
import { fakeApi } from './helpers/fake-api';
import { DEFAULT_TIMING, electionStep, heldSpec, stillLeader } from '../src/worker/leader';

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
};

void test('shareOf: the budget divided by the live members', () => {
  assert.deepEqual(shareOf(base), { spend: true, qps: 20, members: 3 });
  assert.deepEqual(shareOf({ ...base, liveMembers: 1 }), { spend: true, qps: 60, members: 1 });
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
      const s = shareOf({ ...base, qps, liveMembers: n });
      assert.ok(s.spend);
      const bursts = n * Math.max(1, Math.ceil(s.qps * t.burstSeconds));
      const worst = bursts + qps * 5;
      if (qps >= 60) assert.ok(worst <= qps * 5 * 1.1, `qps ${qps}, ${n} members: ${worst} in 5 s`);
    }
  }
});

void test('memberLeaseName: a DNS label from the identity', () => {
  assert.equal(memberLeaseName('svm-worker-7d9f-abcde-12'), 'svm-worker-svm-worker-7d9f-abcde-12');
  assert.equal(memberLeaseName('Host_Name.local-42'), 'svm-worker-host-name-local-42');
  const long = memberLeaseName('x'.repeat(200));
  assert.ok(long.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(long), long);
});

// --- the adjustable bucket ------------------------------------------------------------------

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

void test('startClusterBudget: a membership lease created but whose answer was lost is taken up, and its share spent after the join delay', async () => {
  // A fake API server with just the Lease endpoints; the first create is applied, then its connection dropped unanswered.
  const leases = new Map<string, Lease>();
  let rv = 1;
  let creates = 0;
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
        if (++creates === 1) return req.socket.destroy(); // applied, never answered
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
  const kube = api.kube;
  const limiter = new RateLimiter(10);
  const budget = startClusterBudget({
    kube,
    namespace: 'svm-system',
    identity: 'replica-a',
    qps: 10,
    limiter,
    log: pino({ level: 'silent' }),
    timing: { refreshMs: 100, freshMs: 500, joinDelayMs: 300, marginMs: 300, leaseDurationSeconds: 2 },
  });
  try {
    const deadline = Date.now() + 5000;
    while (!budget.share().spend && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(budget.share(), { spend: true, qps: 10, members: 1 }, `still holding: ${JSON.stringify(budget.share())}`);
    assert.equal(creates, 1, 'the lease was created once, its lost answer not repeated as a second create');
    assert.equal(limiter.isHeld, false);
  } finally {
    await budget.stop();
    await api.close();
  }
});
