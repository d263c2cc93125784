/**
 * The chunk's rewrite (DESIGN.md rule 14): metadata-only lists and the empty
 * merge patch by default; the PUT as listed only where the server refuses the
 * patch (405, 415) or the metadata-only list (406), going on after what is
 * finished, counting nothing twice, and saying so in the result. A fake kube
 * layer: the policy is pure logic here; the real servers' side is in
 * test-rbac.test.ts (the empty patch) and test-migrate-large.test.ts (the PUT path).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { migrateChunk, type ChunkDeps, type ChunkResult } from '../src/activities/migrate-chunk';
import type { ResourceRef } from '../src/api/resource';
import type { KubeClient, ListedObject, ListMeta } from '../src/kube/client';
import { KubeError } from '../src/kube/errors';
import { RateLimiter } from '../src/kube/rate-limit';
import { zeroCounters } from '../src/api/counters';

const ref: ResourceRef = {
  group: 'svm.test',
  version: 'v2',
  resource: 'widgets',
  kind: 'Widget',
  namespaced: true,
  storageVersionHash: '',
  custom: true,
};

/** A fake API of n objects; `refuse` says how the patch or the metadata list is refused. */
function fakeKube(n: number, refuse: { patchStatus?: number; listStatus?: number; patchAfter?: number }) {
  const seen = { lists: [] as boolean[], limits: [] as number[], patched: [] as string[], put: [] as string[], rawSeenByPatch: 0 };
  const kube = {
    async listEach(
      _ref: ResourceRef,
      opts: { limit: number; continueToken?: string; content?: boolean },
      onItem: (o: ListedObject, bytes: number) => void | Promise<void>,
    ): Promise<ListMeta> {
      const content = opts.content === true;
      seen.lists.push(content);
      seen.limits.push(opts.limit);
      if (!content && refuse.listStatus) throw new KubeError('other', `HTTP ${refuse.listStatus}`, refuse.listStatus);
      const listed = Math.min(n, opts.limit);
      for (let i = 0; i < listed; i++) {
        const name = `w-${String(i).padStart(3, '0')}`;
        const o: ListedObject = { namespace: 'ns', name, resourceVersion: String(100 + i) };
        if (content) o.raw = JSON.stringify({ apiVersion: 'svm.test/v2', kind: 'Widget', metadata: { name } });
        await onItem(o, content ? 200 : 60);
      }
      return { items: listed, bytes: listed * (content ? 200 : 60), ...(listed < n ? { continueToken: `after-${listed}` } : {}) };
    },
    async reencode(_ref: ResourceRef, obj: ListedObject): Promise<string> {
      if (obj.raw !== undefined) seen.rawSeenByPatch++;
      if (refuse.patchStatus && seen.patched.length >= (refuse.patchAfter ?? 0))
        throw new KubeError('methodNotAllowed', `HTTP ${refuse.patchStatus}`, refuse.patchStatus);
      seen.patched.push(obj.name);
      return String(Number(obj.resourceVersion) + 1000);
    },
    async putAsListed(_ref: ResourceRef, obj: ListedObject): Promise<string> {
      assert.ok(obj.raw, `PUT of ${obj.name} without its content`);
      seen.put.push(obj.name);
      return String(Number(obj.resourceVersion) + 1000);
    },
  };
  return { kube: kube as unknown as KubeClient, seen };
}

const deps = (kube: KubeClient): ChunkDeps => ({ kube, budget: new RateLimiter(0), limiterFor: () => undefined });
const run = (kube: KubeClient, concurrency = 1): Promise<ChunkResult> =>
  new MockActivityEnvironment().run(migrateChunk, deps(kube), { resource: ref, options: { chunkSize: 500, concurrency, qps: 0 } });

void test('by default: one metadata-only list, an empty patch per object, no content anywhere, no PUT', async () => {
  const { kube, seen } = fakeKube(20, {});
  const r = await run(kube, 4);
  assert.deepEqual(seen.lists, [false]);
  assert.equal(seen.patched.length, 20);
  assert.equal(seen.put.length, 0);
  assert.equal(seen.rawSeenByPatch, 0);
  assert.equal(r.counters.migrated, 20);
  assert.equal(r.rewrite, undefined);
});

for (const status of [405, 406, 415]) {
  void test(`a patch refused with ${status} after 5 objects: the page is listed again with content and PUT after them, each counted once`, async () => {
    const { kube, seen } = fakeKube(20, { patchStatus: status, patchAfter: 5 });
    const r = await run(kube);
    assert.deepEqual(seen.lists, [false, true]);
    assert.equal(seen.patched.length, 5);
    assert.deepEqual(
      seen.put,
      Array.from({ length: 15 }, (_, i) => `w-${String(i + 5).padStart(3, '0')}`),
    );
    assert.equal(r.counters.migrated, 20);
    assert.equal(r.counters.failed, 0);
    assert.equal(r.rewrite, 'put');
  });
}

void test('a metadata-only list refused with 406: the page is listed with content and every object PUT', async () => {
  const { kube, seen } = fakeKube(7, { listStatus: 406 });
  const r = await run(kube, 3);
  assert.deepEqual(seen.lists, [false, true]);
  assert.equal(seen.put.length, 7);
  assert.equal(r.counters.migrated, 7);
  assert.equal(r.rewrite, 'put');
});

void test('a chunk told the resource is rewritten by PUT lists with content at once', async () => {
  const { kube, seen } = fakeKube(4, { patchStatus: 405 });
  const r: ChunkResult = await new MockActivityEnvironment().run(migrateChunk, deps(kube), {
    resource: ref,
    options: { chunkSize: 500, concurrency: 2, qps: 0 },
    rewrite: 'put' as const,
  });
  assert.deepEqual(seen.lists, [true]);
  assert.equal(seen.put.length, 4);
  assert.equal(r.rewrite, 'put');
});

void test('a 403 on the patch is a per-object failure, never a reason to PUT', async () => {
  const { kube, seen } = fakeKube(3, {});
  (kube as unknown as { reencode: () => Promise<string> }).reencode = () =>
    Promise.reject(new KubeError('forbidden', 'HTTP 403 Forbidden (RBAC: cannot patch)', 403));
  const r = await run(kube);
  assert.deepEqual(seen.lists, [false]);
  assert.equal(seen.put.length, 0);
  assert.equal(r.counters.failed, 3);
  assert.equal(r.rewrite, undefined);
});

// A migration's first page is asked as a metadata page of the chunk size with a content limit (FIRST_PAGE_LIMIT):
// listed with content, its objects' size not known yet, it holds no more than that.
const firstPage = (kube: KubeClient, extra: { rewrite?: 'put'; heartbeatDetails?: unknown } = {}): Promise<ChunkResult> =>
  new MockActivityEnvironment(extra.heartbeatDetails ? { heartbeatDetails: extra.heartbeatDetails } : undefined).run(
    migrateChunk,
    deps(kube),
    {
      resource: ref,
      options: { chunkSize: 500, contentLimit: 10, concurrency: 2, qps: 0 },
      ...(extra.rewrite ? { rewrite: extra.rewrite } : {}),
    },
  );

void test('first page, the patch refused at its first object: listed again with content cut to the content limit, the rest left to the next chunk', async () => {
  const { kube, seen } = fakeKube(40, { patchStatus: 405 });
  const r = await firstPage(kube);
  assert.deepEqual(seen.lists, [false, true]);
  assert.deepEqual(seen.limits, [500, 10]);
  assert.equal(seen.put.length, 10);
  assert.equal(r.listed, 10);
  assert.equal(r.continueToken, 'after-10', 'the next chunk goes on after the 10 objects PUT');
  assert.equal(r.counters.migrated, 10);
  assert.equal(r.rewrite, 'put');
  assert.equal(r.contentLimited, true);
});

void test('first page, the metadata-only list refused (406): listed with content cut to the content limit', async () => {
  const { kube, seen } = fakeKube(40, { listStatus: 406 });
  const r = await firstPage(kube);
  assert.deepEqual(seen.limits, [500, 10]);
  assert.equal(r.listed, 10);
  assert.equal(r.counters.migrated, 10);
});

void test('first page of a chunk told to PUT: listed with content at the content limit at once', async () => {
  const { kube, seen } = fakeKube(40, {});
  const r = await firstPage(kube, { rewrite: 'put' });
  assert.deepEqual(seen.lists, [true]);
  assert.deepEqual(seen.limits, [10]);
  assert.equal(r.counters.migrated, 10);
});

void test('first page, the patch refused after 5 objects: the page keeps its limit (a shorter one would leave finished objects to be counted again)', async () => {
  const { kube, seen } = fakeKube(40, { patchStatus: 415, patchAfter: 5 });
  const r = await firstPage(kube);
  assert.deepEqual(seen.limits, [500, 500]);
  assert.equal(seen.patched.length + seen.put.length, 40);
  assert.equal(r.counters.migrated, 40);
  assert.equal(r.continueToken, undefined);
  assert.equal(r.contentLimited, undefined);
});

void test('a retry of a first page listed with content cut: listed cut again, after what the heartbeat says is finished', async () => {
  const { kube, seen } = fakeKube(40, {});
  const r = await firstPage(kube, {
    heartbeatDetails: {
      lastKey: 'ns/w-003',
      counters: { ...zeroCounters(), migrated: 4, rewritten: 4 },
      failures: [],
      tokenResumed: false,
      listRestarted: false,
      rewrite: 'put',
      contentLimited: true,
    },
  });
  assert.deepEqual(seen.limits, [10]);
  assert.deepEqual(
    seen.put,
    Array.from({ length: 6 }, (_, i) => `w-${String(i + 4).padStart(3, '0')}`),
  );
  assert.equal(r.counters.migrated, 10);
  assert.equal(r.continueToken, 'after-10');
});
