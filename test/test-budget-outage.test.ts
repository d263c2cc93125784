/**
 * Budget waits are cancellable and bounded (issue 20, point 4), on the real
 * plane: an admission policy denies every write of the budget's membership
 * Leases, as a Lease API outage or a bad policy would.
 *
 * - From the start: a worker that never held a share holds (it cannot know
 *   how many replicas spend): the API servers count no rewrite of the
 *   resource, and an abort ends the migration all the same (the time it
 *   takes is printed, not asserted); etcd still holds every object at v1.
 * - Mid-run: a worker that had a share falls back to the even split of the
 *   members it last saw (alone: the whole budget) and says so in its log; the
 *   API servers' own count shows the migration going on through the outage
 *   and within the share the worker says it spends, and within the budget
 *   over the whole run; once the policy goes it says the Lease API answers
 *   again, and the migration ends Succeeded with etcd clean.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { storedVersions } from '../src/dev/etcd-truth';
import { KubeError } from '../src/kube/errors';
import { MEMBER_LABEL_KEY, MEMBER_LABEL_VALUE } from '../src/worker/budget';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { budgetCeiling, busiestWindow, countPuts, putSampler } from './helpers/puts';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await ensureNamespace(NAMESPACE);
});
after(async () => {
  await allowLeaseWrites();
  await plane?.close();
});

const NAMESPACE = 'svm-system';
const QPS = 20;
const POLICY = 'svm-test-deny-budget-leases';
const VAP = '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies';
const BINDING = '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings';

async function ensureNamespace(name: string): Promise<void> {
  const body = JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  await plane.kube.request('POST', '/api/v1/namespaces', { body }).catch((err: unknown) => {
    if (!(err instanceof KubeError && err.kind === 'conflict')) throw err;
  });
}

/** Denies CREATE, UPDATE and DELETE of the budget's membership Leases, for everyone; returns once a probe write is denied. */
async function denyLeaseWrites(): Promise<void> {
  const policy = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: POLICY },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [
          { apiGroups: ['coordination.k8s.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE', 'DELETE'], resources: ['leases'] },
        ],
        objectSelector: { matchLabels: { [MEMBER_LABEL_KEY]: MEMBER_LABEL_VALUE } },
      },
      validations: [{ expression: 'false', message: 'budget lease writes denied (test: a Lease API outage)' }],
    },
  };
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: POLICY },
    spec: { policyName: POLICY, validationActions: ['Deny'] },
  };
  await plane.kube.request('POST', VAP, { body: JSON.stringify(policy) });
  await plane.kube.request('POST', BINDING, { body: JSON.stringify(binding) });
  const probe = JSON.stringify({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: uniq('probe'), labels: { [MEMBER_LABEL_KEY]: MEMBER_LABEL_VALUE } },
    spec: {},
  });
  await eventually('the policy to deny lease writes', async () => {
    try {
      await plane.kube.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`, { body: probe });
      return false;
    } catch (err) {
      return err instanceof KubeError && /denied/.test(err.message);
    }
  });
}

async function allowLeaseWrites(): Promise<void> {
  for (const path of [`${BINDING}/${POLICY}`, `${VAP}/${POLICY}`])
    await plane?.kube.request('DELETE', path).catch((err: unknown) => {
      if (!(err instanceof KubeError && err.kind === 'notFound')) throw err;
    });
}

/** The rewrites of the CRD's objects the API servers have counted (apiserver_request_total, summed over the servers). */
async function rewritesCounted(crd: { group: string; plural: string }): Promise<number> {
  const bodies = await Promise.all(plane.apiserverUrls.map(async (_, i) => (await plane.kubeOf(i).request('GET', '/metrics')).body));
  return bodies.reduce((sum, b) => sum + countPuts(b, [crd]), 0);
}

/** The worker's log lines, parsed. */
function logSink() {
  const lines: Array<Record<string, unknown>> = [];
  // Each line stamped when it arrived, by the test's clock (the windows of the API servers' counts are on it too).
  return {
    lines,
    stream: { write: (s: string) => void lines.push({ ...(JSON.parse(s) as Record<string, unknown>), seenAt: Date.now() }) },
  };
}

async function crdWithObjects(count: number) {
  const crd = testCrd(`${uniq('bo')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', count, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  return crd;
}

void test('Lease writes denied from the start: the worker holds, and an abort still ends the migration (the time it took printed)', async () => {
  const crd = await crdWithObjects(100);
  await denyLeaseWrites();
  try {
    const log = logSink();
    const took = await withWorker(
      plane,
      async (m) => {
        const before = await rewritesCounted(crd);
        const h = await m.start(crd.name, { chunkSize: 50, concurrency: 2 });
        await eventually('the chunk to wait for budget', async () => (await h.progress()).phase === 'Running');
        await new Promise((r) => setTimeout(r, 3000));
        // Nothing spent without a share, by the API servers' count (not the migration's own counters).
        assert.equal((await rewritesCounted(crd)) - before, 0, 'the API servers counted rewrites of a worker that holds no share');
        const t0 = Date.now();
        await h.abort('the Lease API is down');
        // Bounded: a chunk stuck waiting for a held budget would never end (what this test guards against).
        const result = await Promise.race([
          migrationResult(h),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the abort did not end the migration in 30 s')), 30_000)),
        ]);
        assert.equal(result.phase, 'Aborted', result.message);
        return Date.now() - t0;
      },
      { settings: { qps: QPS, kubeNamespace: NAMESPACE }, logTo: log.stream },
    );
    console.log(`budget outage from the start: aborted ${(took / 1000).toFixed(1)} s after the abort`);
    assert.ok(
      log.lines.some((l) => l.msg === 'load budget refresh failed; retrying'),
      'the worker says its budget cannot be refreshed',
    );
  } finally {
    await allowLeaseWrites();
  }
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v1`]: 100,
  });
});

void test('Lease writes denied mid-run: the fallback share keeps the migration going within the budget (API servers count), then the Lease API answers again; etcd clean', async () => {
  // Enough for the phases at 20/s: the first chunk (100), the policy in force and the fallback taken (about 5 s),
  // the 10 s of outage, and the refresh that finds the Lease API again (every 2 s) before the pass ends; under load
  // each phase takes fewer objects, not more. 1200 before (a minute more of pass and of creating objects).
  const COUNT = 600;
  const crd = await crdWithObjects(COUNT);
  const puts = putSampler(plane, [crd]);
  const log = logSink();
  const outage = { from: 0, to: 0 };
  try {
    const result = await withWorker(
      plane,
      async (m) => {
        const h = await m.start(crd.name, { chunkSize: 100, concurrency: 2 });
        await eventually('a chunk done under the budget', async () => (await h.progress()).counters.chunks >= 1, 120_000);
        await denyLeaseWrites();
        outage.from = Date.now();
        await eventually(
          'the fallback share',
          async () => log.lines.some((l) => String(l.msg).startsWith('load budget: the Lease API does not answer')),
          60_000,
        );
        await new Promise((r) => setTimeout(r, 10_000));
        outage.to = Date.now();
        await allowLeaseWrites();
        return migrationResult(h);
      },
      { settings: { qps: QPS, kubeNamespace: NAMESPACE }, logTo: log.stream },
    );
    assert.equal(result.phase, 'Succeeded', result.message);
  } finally {
    await allowLeaseWrites();
    await puts.sample().catch(() => undefined);
    await puts.stop();
  }
  const fallback = log.lines.find((l) => String(l.msg).startsWith('load budget: the Lease API does not answer'))!;
  // The fallback begins when the worker finds its list of the members stale (5 s without one), after the policy is in
  // force: until then it spends its last share (one run here, 2 members, one idle: 86 rewrites in the outage's first
  // 6.2 s, above the 10/s of its fallback). Its share is judged from the moment it said so to the outage's end (10 s).
  const fallbackFrom = Number(fallback.seenAt);
  const during = busiestWindow(puts.samples, fallbackFrom, outage.to);
  const worst = busiestWindow(puts.samples, -Infinity, Infinity);
  // The objects rewritten during the outage, by the API servers' count (the migration's own counters move by whole
  // chunks: a run here saw 0 of them move in 16 s of outage).
  // From the first sample begun after the fallback began to the last one ended before the outage ended.
  const first = puts.samples.find((x) => x.t0 >= fallbackFrom);
  const last = puts.samples.filter((x) => x.t1 <= outage.to).at(-1);
  const progressed = first && last ? last.puts - first.puts : 0;
  console.log(
    `budget outage mid-run: fallback share ${String(fallback.share)}/s of ${String(fallback.members)} member(s); ${progressed} rewrites counted by the API servers during ${((outage.to - fallbackFrom) / 1000).toFixed(0)} s of fallback (${((outage.to - outage.from) / 1000).toFixed(0)} s of outage); busiest window of the fallback ${during.puts} in ${during.seconds.toFixed(1)} s = ${during.rate.toFixed(1)}/s, overall ${worst.rate.toFixed(1)}/s (budget ${QPS}/s)`,
  );
  // The fallback divides by the members the worker last saw spending (leftover leases of earlier tests count too).
  const before = log.lines.filter((l) => l.msg === 'load budget share' && log.lines.indexOf(l) < log.lines.indexOf(fallback)).at(-1);
  assert.equal(fallback.members, before?.members, 'the fallback divides by the members last seen');
  assert.equal(Number(fallback.share), Number((QPS / Number(fallback.members)).toFixed(2)));
  assert.ok(progressed > 0, 'the API servers counted no rewrite during the fallback: the migration did not go on');
  // Within the share the worker says it spends: its one bucket, its two requests in flight.
  const fallbackCeiling = budgetCeiling(Number(fallback.share), during.seconds, { buckets: 1, inFlight: 2 });
  assert.ok(
    during.puts <= fallbackCeiling,
    `${during.puts} rewrites in ${during.seconds.toFixed(1)} s of outage: more than the fallback share of ${String(fallback.share)}/s allows (${fallbackCeiling})`,
  );
  // One worker, one bucket, one migration of concurrency 2 (budgetCeiling).
  const ceiling = budgetCeiling(QPS, worst.seconds, { buckets: 1, inFlight: 2 });
  assert.ok(
    worst.puts <= ceiling,
    `${worst.puts} PUTs in ${worst.seconds.toFixed(1)} s (${worst.rate.toFixed(1)}/s): more than the budget of ${QPS}/s allows (${ceiling})`,
  );
  assert.ok(
    log.lines.some((l) => l.msg === 'load budget: the Lease API answers again'),
    'the worker says when the Lease API answers again',
  );
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: COUNT,
  });
});
