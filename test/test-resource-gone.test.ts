/**
 * A 404 for the resource itself is not "object deleted" (issue item 6).
 *
 * First the real API server's 404 bodies: a deleted object (custom and core)
 * names the object in details; a version set served:false and a deleted CRD
 * answer Go's plain "404 page not found", which names nothing.
 * Then the chunk activity, run for real against the plane: objects deleted
 * under it count as notFound; the version it migrates stopping being served
 * mid-chunk, or the CRD gone before the list, stop it with a non-retryable
 * ResourceGone and no object counted as notFound. etcd judges that no
 * object was lost.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ResourceRef } from '../src/api/resource';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, stopApiserver } from '../src/dev/plane';
import { endpointAddresses, listKubernetesEndpointSlices } from '../src/kube/apiservers';
import { isObjectNotFound, migrateChunk, RESOURCE_GONE, type ChunkDeps, type ChunkResult } from '../src/activities/migrate-chunk';
import { classifyResponse } from '../src/kube/errors';
import { RateLimiter } from '../src/kube/rate-limit';
import { applyCrd, createObjects, deleteCrd, ensureNamespace, testCrd, type TestCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
});
after(async () => plane?.close());

const refOf = (c: TestCrd, version: 'v1' | 'v2'): ResourceRef => ({
  group: c.group,
  version,
  resource: c.plural,
  kind: c.kind,
  namespaced: true,
  storageVersionHash: '',
  custom: true,
});

interface Outcomes {
  migrated: number;
  conflict: number;
  notFound: number;
  failed: number;
}

function chunkDeps(qps: number, onObserve?: (o: Outcomes) => void): { deps: ChunkDeps; outcomes: Outcomes } {
  const outcomes: Outcomes = { migrated: 0, conflict: 0, notFound: 0, failed: 0 };
  return {
    outcomes,
    deps: {
      kube: plane.kube,
      budget: new RateLimiter(qps),
      limiterFor: () => undefined,
      observe(_r, outcome) {
        outcomes[outcome]++;
        onObserve?.(outcomes);
      },
    },
  };
}

/** Runs the chunk activity as Temporal would, in an activity context; returns its result or its failure. */
async function runChunk(deps: ChunkDeps, resource: ResourceRef, chunkSize: number): Promise<ChunkResult | ApplicationFailure> {
  try {
    return await new MockActivityEnvironment().run(migrateChunk, deps, { resource, options: { chunkSize, concurrency: 4, qps: 0 } });
  } catch (err) {
    if (err instanceof ApplicationFailure) return err;
    throw err;
  }
}

/** Waits until version v of the CRD answers 404 on every API server. */
async function untilNotServed(c: TestCrd, v: string, ns: string): Promise<void> {
  for (let i = 0; i < plane.state.apiservers.length; i++) {
    const k = plane.kubeOf(i);
    await eventually(
      `${c.name}/${v} not served by API server ${i}`,
      async () => (await k.raw('GET', `/apis/${c.group}/${v}/namespaces/${ns}/${c.plural}`)).status === 404,
    );
  }
}

/** svm's re-encode (the empty merge patch with the object's resourceVersion) as a raw request: the answer whatever it is. */
const reencodeRaw = (url: string, o: Record<string, unknown>) =>
  plane.kube.raw('PATCH', url, {
    body: JSON.stringify({
      apiVersion: o.apiVersion,
      kind: o.kind,
      metadata: { resourceVersion: (o.metadata as { resourceVersion: string }).resourceVersion },
    }),
    contentType: 'application/merge-patch+json',
  });

void test('the real 404 bodies of the re-encode: a deleted object names itself; a version no longer served and a deleted CRD do not', async (t) => {
  const crd = testCrd(`${uniq('gone')}.svm.test`);
  const ns = uniq('gone');
  await applyCrd(plane.kube, crd, 'v2');
  try {
    await createObjects(plane.kube, crd, 'v1', 2, { namespace: ns });
    const url = (v: string, name: string) => `/apis/${crd.group}/${v}/namespaces/${ns}/${crd.plural}/${name}`;
    const w0 = await plane.kube.getJson<Record<string, unknown>>(url('v1', 'w-000000'));
    const w1 = await plane.kube.getJson<Record<string, unknown>>(url('v1', 'w-000001'));

    // A deleted custom object.
    await plane.kube.request('DELETE', url('v1', 'w-000000'));
    const deleted = await reencodeRaw(url('v1', 'w-000000'), w0);
    t.diagnostic(`deleted custom object: ${deleted.status} ${deleted.body}`);
    assert.equal(deleted.status, 404);
    const deletedStatus = JSON.parse(deleted.body) as { reason: string; details: Record<string, string> };
    assert.equal(deletedStatus.reason, 'NotFound');
    assert.deepEqual(deletedStatus.details, { name: 'w-000000', group: crd.group, kind: crd.plural });
    const deletedErr = classifyResponse(deleted.status, deleted.body);
    assert.equal(isObjectNotFound(deletedErr, refOf(crd, 'v1'), { name: 'w-000000' }), true);
    assert.equal(isObjectNotFound(deletedErr, refOf(crd, 'v1'), { name: 'w-000001' }), false, 'another object');

    // A deleted Secret: the core group, no details.group.
    await ensureNamespace(plane.kube, ns);
    const secret = JSON.parse(
      (
        await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
          body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'gone' }, stringData: { a: 'b' } }),
        })
      ).body,
    ) as Record<string, unknown>;
    await plane.kube.request('DELETE', `/api/v1/namespaces/${ns}/secrets/gone`);
    const deletedSecret = await reencodeRaw(`/api/v1/namespaces/${ns}/secrets/gone`, secret);
    t.diagnostic(`deleted secret: ${deletedSecret.status} ${deletedSecret.body}`);
    assert.equal(deletedSecret.status, 404);
    assert.deepEqual((JSON.parse(deletedSecret.body) as { details: unknown }).details, { name: 'gone', kind: 'secrets' });
    const secrets: ResourceRef = {
      group: '',
      version: 'v1',
      resource: 'secrets',
      kind: 'Secret',
      namespaced: true,
      storageVersionHash: '',
      custom: false,
    };
    assert.equal(isObjectNotFound(classifyResponse(404, deletedSecret.body), secrets, { name: 'gone' }), true);

    // v1 set served:false.
    await applyCrd(plane.kube, crd, 'v2', { served: ['v2'] });
    await untilNotServed(crd, 'v1', ns);
    const unserved = await reencodeRaw(url('v1', 'w-000001'), w1);
    t.diagnostic(`version not served, PATCH: ${unserved.status} ${unserved.body}`);
    assert.equal(unserved.status, 404);
    assert.equal(unserved.body, '404 page not found\n', 'the body unit-errors.test.ts classifies');
    const unservedErr = classifyResponse(unserved.status, unserved.body);
    assert.equal(unservedErr.info.resourceNotServed, true);
    assert.equal(isObjectNotFound(unservedErr, refOf(crd, 'v1'), { name: 'w-000001' }), false);
    const unservedList = await plane.kube.raw('GET', `/apis/${crd.group}/v1/${crd.plural}`, { query: { limit: 10 } });
    t.diagnostic(`version not served, LIST: ${unservedList.status} ${unservedList.body}`);
    assert.equal(unservedList.status, 404);
    assert.equal(classifyResponse(404, unservedList.body).info.resourceNotServed, true);

    // The CRD deleted.
    await deleteCrd(plane.kube, crd);
    await untilNotServed(crd, 'v2', ns);
    const crdGone = await reencodeRaw(url('v2', 'w-000001'), { ...w1, apiVersion: `${crd.group}/v2` });
    t.diagnostic(`CRD deleted, PATCH: ${crdGone.status} ${crdGone.body}`);
    assert.equal(crdGone.status, 404);
    const crdGoneErr = classifyResponse(crdGone.status, crdGone.body);
    assert.equal(crdGoneErr.info.resourceNotServed, true);
    assert.equal(isObjectNotFound(crdGoneErr, refOf(crd, 'v2'), { name: 'w-000001' }), false);
  } finally {
    await deleteCrd(plane.kube, crd);
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});

void test('objects deleted under a chunk count as notFound; the rest migrate', async () => {
  const crd = testCrd(`${uniq('gone')}.svm.test`);
  const ns = uniq('gone');
  const COUNT = 120;
  await applyCrd(plane.kube, crd, 'v2');
  try {
    await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: ns });
    let deleting: Promise<void> | undefined;
    const doomed = ['w-000100', 'w-000101', 'w-000102', 'w-000103', 'w-000104'];
    // Once the chunk has listed and started, delete five objects it has not reached yet.
    const { deps, outcomes } = chunkDeps(40, (o) => {
      if (o.migrated === 5 && !deleting)
        deleting = Promise.all(
          doomed.map((n) => plane.kube.request('DELETE', `/apis/${crd.group}/v1/namespaces/${ns}/${crd.plural}/${n}`)),
        ).then(() => undefined);
    });
    const result = await runChunk(deps, refOf(crd, 'v1'), 500);
    await deleting;
    assert.ok(!(result instanceof ApplicationFailure), `the chunk failed: ${String(result)}`);
    assert.equal(result.listed, COUNT);
    assert.equal(result.counters.notFound, doomed.length);
    assert.equal(outcomes.notFound, doomed.length);
    assert.equal(result.counters.migrated, COUNT - doomed.length);
    const stored = await readStoredObjects(plane.etcd, `/registry/${crd.group}/${crd.plural}/${ns}/`);
    assert.equal(stored.length, COUNT - doomed.length);
    for (const o of stored) assert.equal(o.object.apiVersion, `${crd.group}/v2`, o.key);
  } finally {
    await deleteCrd(plane.kube, crd);
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});

void test('the version being migrated stops being served mid-chunk: ResourceGone, no object counted as notFound, none lost', async () => {
  const crd = testCrd(`${uniq('gone')}.svm.test`);
  const ns = uniq('gone');
  const COUNT = 300;
  await applyCrd(plane.kube, crd, 'v2');
  try {
    await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: ns });
    let unserve: Promise<void> | undefined;
    const { deps, outcomes } = chunkDeps(25, (o) => {
      if (o.migrated === 10 && !unserve) unserve = applyCrd(plane.kube, crd, 'v2', { served: ['v2'] });
    });
    const result = await runChunk(deps, refOf(crd, 'v1'), 500);
    await unserve;
    assert.ok(result instanceof ApplicationFailure, `the chunk should fail, got ${JSON.stringify(result)}`);
    assert.equal(result.type, RESOURCE_GONE);
    assert.equal(result.nonRetryable, true);
    assert.match(
      result.message,
      new RegExp(
        `${crd.plural}\\.${crd.group.replace(/\./g, '\\.')} version v1 is not served \\(HTTP 404 NotFound: the requested resource is not served\\)$`,
      ),
    );
    assert.equal(outcomes.notFound, 0, 'no object was counted as deleted');
    assert.ok(outcomes.migrated >= 10 && outcomes.migrated < COUNT, `migrated ${outcomes.migrated} before the version went away`);
    const stored = await readStoredObjects(plane.etcd, `/registry/${crd.group}/${crd.plural}/${ns}/`);
    assert.equal(stored.length, COUNT, 'every object is still in etcd');
  } finally {
    await deleteCrd(plane.kube, crd);
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});

void test('a chunk of a deleted CRD: the 404 on the list is ResourceGone', async () => {
  const crd = testCrd(`${uniq('gone')}.svm.test`);
  const ns = uniq('gone');
  await applyCrd(plane.kube, crd, 'v2');
  await createObjects(plane.kube, crd, 'v2', 3, { namespace: ns });
  await deleteCrd(plane.kube, crd);
  try {
    await untilNotServed(crd, 'v2', ns);
    const { deps, outcomes } = chunkDeps(0);
    const result = await runChunk(deps, refOf(crd, 'v2'), 500);
    assert.ok(result instanceof ApplicationFailure, `the chunk should fail, got ${JSON.stringify(result)}`);
    assert.equal(result.type, RESOURCE_GONE);
    assert.equal(result.nonRetryable, true);
    assert.match(result.message, /^listing .* version v2 is not served \(HTTP 404 NotFound: the requested resource is not served\)$/);
    assert.deepEqual(outcomes, { migrated: 0, conflict: 0, notFound: 0, failed: 0 });
  } finally {
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});

void test('a version withdrawn while its migration waits for agreement: the migration goes on through the version served now; a CRD deleted meanwhile ends Failed with the reason (etcd judges)', async () => {
  // Two CRDs whose objects are stored at v2, the version their migrations resolve to (the preferred one).
  const moved = testCrd(`${uniq('withdrawn')}.svm.test`);
  const deleted = testCrd(`${uniq('deleted')}.svm.test`);
  const ns = uniq('withdrawn');
  for (const c of [moved, deleted]) {
    await applyCrd(plane.kube, c, 'v2');
    await createObjects(plane.kube, c, 'v2', 40, { namespace: ns });
  }
  try {
    const [result, gone] = await withWorker(plane, async (m) => {
      // An API server that vanished (killed: its identity lease and address stay behind): agreement cannot be
      // reached, so both migrations wait.
      // Both listed and both holding an identity lease first (a server just restarted by an earlier test creates
      // its lease a moment after it is ready; without it, one server would look like the whole cluster).
      await eventually('the kubernetes EndpointSlice and the identity leases to show both API servers', async () => {
        const leases = await plane.kube.getJson<{ items: Array<{ metadata: { labels?: Record<string, string> } }> }>(
          '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases',
          { labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver' },
        );
        const hosts = new Set(leases.items.map((l) => l.metadata.labels?.['kubernetes.io/hostname']));
        return endpointAddresses(await listKubernetesEndpointSlices(plane.kube)).length === 2 && hosts.size === 2;
      });
      await stopApiserver(plane.dir, 1, { kill: true });
      let back = false;
      try {
        const h = await m.start(moved.name, { agreementPollSeconds: 2 });
        const g = await m.start(deleted.name, { agreementPollSeconds: 2 });
        assert.equal(h.resource.version, 'v2');
        await eventually('both migrations to wait for agreement', async () => {
          const [a, b] = await Promise.all([h.progress(), g.progress()]);
          return a.phase === 'WaitingForAgreement' && b.phase === 'WaitingForAgreement';
        });
        // v2 is withdrawn (storage back to v1, v2 no longer served); the other CRD is deleted.
        await applyCrd(plane.kube, moved, 'v1', { served: ['v1'], everyServer: false });
        await deleteCrd(plane.kube, deleted);
        const said = await eventually(
          'the migration to say it goes on through v1',
          async () => {
            const p = await h.progress();
            return p.message?.includes('is no longer served at v2; it is migrated through v1 now') && p;
          },
          90_000,
        );
        process.stderr.write(`[withdrawn] ${said.phase}: ${said.message}\n`);
        const goneResult = await migrationResult(g);
        await restartApiserver(plane.dir, 1, undefined, () => undefined);
        back = true;
        return [await migrationResult(h), goneResult] as const;
      } finally {
        if (!back) await restartApiserver(plane.dir, 1, undefined, () => undefined).catch(() => undefined);
      }
    });
    process.stderr.write(`[withdrawn] ${result.phase}: ${result.message}\n[deleted] ${gone.phase}: ${gone.message}\n`);
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.match(result.message ?? '', / to v1 in one whole pass/);
    assert.deepEqual((await storedVersions(plane.etcd, { group: moved.group, resource: moved.plural, custom: true })).byApiVersion, {
      [`${moved.group}/v1`]: 40,
    });
    assert.equal(gone.phase, 'Failed', gone.message);
    assert.match(gone.message ?? '', /no longer served|not served|gone/i);
  } finally {
    await deleteCrd(plane.kube, moved).catch(() => undefined);
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});
