/**
 * Listing the next page ahead (src/kube/list-ahead.ts): a chunk that has read its page whole lists the next one in
 * the background, and the next chunk with that continue token and limit takes it instead of listing. Pure logic on a
 * fake kube layer that pages by continue token; what it must keep: every object updated once, the same results as
 * without it, and the API server asked for each page once (a failed, expired or mismatched page: the chunk lists).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { migrateChunk, type ChunkResult } from '../src/activities/migrate-chunk';
import type { ResourceRef } from '../src/api/resource';
import type { KubeClient, ListedObject, ListMeta } from '../src/kube/client';
import { KubeError } from '../src/kube/errors';
import { ListAhead, listAheadEnabled } from '../src/kube/list-ahead';
import { RateLimiter } from '../src/kube/rate-limit';

const ref: ResourceRef = {
  group: 'svm.test',
  version: 'v2',
  resource: 'widgets',
  kind: 'Widget',
  namespaced: true,
  storageVersionHash: '',
  custom: true,
};

/** n objects listed in pages by continue token `after-<index>`; failOnce: tokens whose first listing fails with a 500. */
function pagedKube(n: number, opts: { failOnce?: string[] } = {}) {
  const seen = { lists: [] as Array<{ token?: string; limit: number; content: boolean }>, patched: [] as string[] };
  const failing = new Set(opts.failOnce ?? []);
  const kube = {
    async listEach(
      _ref: ResourceRef,
      o: { limit: number; continueToken?: string; content?: boolean },
      onItem: (obj: ListedObject, bytes: number) => void | Promise<void>,
    ): Promise<ListMeta> {
      seen.lists.push({ token: o.continueToken, limit: o.limit, content: o.content === true });
      await new Promise((r) => setTimeout(r, 1)); // an answer takes a while, as a real one does
      if (o.continueToken !== undefined && failing.delete(o.continueToken)) throw new KubeError('unavailable', 'HTTP 500', 500);
      const from = o.continueToken === undefined ? 0 : Number(o.continueToken.slice('after-'.length));
      const to = Math.min(n, from + o.limit);
      for (let i = from; i < to; i++) {
        const name = `w-${String(i).padStart(4, '0')}`;
        const obj: ListedObject = { namespace: 'ns', name, resourceVersion: String(100 + i) };
        if (o.content) obj.raw = JSON.stringify({ metadata: { name } });
        await onItem(obj, 60);
      }
      return { items: to - from, bytes: (to - from) * 60, ...(to < n ? { continueToken: `after-${to}`, remainingItemCount: n - to } : {}) };
    },
    async reencode(_ref: ResourceRef, obj: ListedObject): Promise<string> {
      seen.patched.push(obj.name);
      return String(Number(obj.resourceVersion) + 1000);
    },
    async putAsListed(_ref: ResourceRef, obj: ListedObject): Promise<string> {
      seen.patched.push(obj.name);
      return String(Number(obj.resourceVersion) + 1000);
    },
  };
  return { kube: kube as unknown as KubeClient, seen };
}

/** Chunk after chunk as the workflow runs them, each with the previous one's continue token, until the list ends. */
async function pass(kube: KubeClient, listAhead: ListAhead | undefined, limits: (chunk: number) => number, rewrite?: 'put') {
  const results: ChunkResult[] = [];
  let token: string | undefined;
  do {
    const r: ChunkResult = await new MockActivityEnvironment().run(
      migrateChunk,
      { kube, budget: new RateLimiter(0), limiterFor: () => undefined, listAhead },
      {
        resource: ref,
        continueToken: token,
        options: { chunkSize: limits(results.length), concurrency: 4, qps: 0 },
        ...(rewrite ? { rewrite } : {}),
      },
    );
    results.push(r);
    token = r.continueToken;
  } while (token);
  return results;
}

const summary = (rs: ChunkResult[]) => rs.map((r) => ({ listed: r.listed, token: r.continueToken, migrated: r.counters.migrated }));
const allOnce = (n: number) => Array.from({ length: n }, (_, i) => `w-${String(i).padStart(4, '0')}`);

void test('each page after the first is taken from the list made ahead: one listing per page, every object once, the same results', async () => {
  const without = pagedKube(1050);
  const plain = await pass(without.kube, undefined, () => 400);
  const withIt = pagedKube(1050);
  const ahead = new ListAhead(withIt.kube);
  const rs = await pass(withIt.kube, ahead, () => 400);
  assert.deepEqual(summary(rs), summary(plain));
  assert.deepEqual(summary(rs), [
    { listed: 400, token: 'after-400', migrated: 400 },
    { listed: 400, token: 'after-800', migrated: 400 },
    { listed: 250, token: undefined, migrated: 250 },
  ]);
  // The API server is asked for each page once either way; with listing ahead pages 2 and 3 were asked for
  // by the chunk before (in the background) and never again.
  assert.deepEqual(
    withIt.seen.lists.map((l) => l.token),
    [undefined, 'after-400', 'after-800'],
  );
  assert.equal(without.seen.lists.length, 3);
  assert.deepEqual([...withIt.seen.patched].sort(), allOnce(1050));
  assert.equal(ahead.size, 0, 'nothing left behind');
});

void test('a page whose listing ahead failed is listed by its chunk; so is one asked with another limit', async () => {
  const failed = pagedKube(900, { failOnce: ['after-300'] });
  const ahead = new ListAhead(failed.kube);
  const rs = await pass(failed.kube, ahead, () => 300);
  assert.deepEqual(
    summary(rs).map((r) => r.listed),
    [300, 300, 300],
  );
  // after-300 listed ahead (500), then by its chunk; after-600 listed ahead and taken.
  assert.deepEqual(
    failed.seen.lists.map((l) => l.token),
    [undefined, 'after-300', 'after-300', 'after-600'],
  );
  assert.deepEqual([...failed.seen.patched].sort(), allOnce(900));

  const other = pagedKube(900);
  const ahead2 = new ListAhead(other.kube);
  // The second chunk asks for 200 where 300 was listed ahead: it lists its own page; the one listed ahead stays unused.
  const rs2 = await pass(other.kube, ahead2, (i) => (i === 1 ? 200 : 300));
  assert.deepEqual(
    summary(rs2).map((r) => r.token),
    ['after-300', 'after-500', 'after-800', undefined],
  );
  assert.deepEqual(
    other.seen.lists.map((l) => `${l.token ?? 'first'}:${l.limit}`),
    ['first:300', 'after-300:300', 'after-300:200', 'after-500:200', 'after-500:300', 'after-800:300'],
  );
  assert.deepEqual([...other.seen.patched].sort(), allOnce(900));
  assert.equal(ahead2.size, 2, 'the two unused pages wait to expire');
});

void test('a page listed ahead longer ago than its time to live is not used; nor is any page with content (the PUT)', async () => {
  let now = 0;
  const { kube, seen } = pagedKube(200);
  const ahead = new ListAhead(kube, { ttlMs: 1000, now: () => now });
  ahead.start(ref, 'after-100', 100);
  now = 1500;
  assert.equal(await ahead.take(ref, 'after-100', 100), undefined);
  assert.equal(seen.lists.length, 1, 'it was listed ahead, and dropped');
  // Dropped by its timer too, with no chunk asking again.
  const idle = new ListAhead(kube, { ttlMs: 50 });
  idle.start(ref, 'after-100', 100);
  assert.equal(idle.size, 1);
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(idle.size, 0, 'expired without a take');

  const put = pagedKube(300);
  const ahead2 = new ListAhead(put.kube);
  await pass(put.kube, ahead2, () => 100, 'put');
  assert.deepEqual(
    put.seen.lists.map((l) => `${l.token ?? 'first'}:${l.content}`),
    ['first:true', 'after-100:true', 'after-200:true'],
  );
  assert.equal(ahead2.size, 0);
});

void test('at most `max` pages wait at once; SVM_LIST_AHEAD=false turns it off', async () => {
  const { kube, seen } = pagedKube(1000);
  const ahead = new ListAhead(kube, { max: 2 });
  for (const t of ['after-100', 'after-200', 'after-300']) ahead.start(ref, t, 100);
  ahead.start(ref, 'after-100', 100); // already listed ahead: not again
  assert.equal(ahead.size, 2);
  assert.deepEqual(
    seen.lists.map((l) => l.token),
    ['after-100', 'after-200'],
  );
  const page = await ahead.take(ref, 'after-200', 100);
  assert.equal(page?.items.length, 100);
  assert.equal(page?.items[0]?.obj.name, 'w-0200');
  assert.equal(page?.meta.continueToken, 'after-300');
  assert.equal(await ahead.take(ref, 'after-200', 100), undefined, 'taken once');

  assert.equal(listAheadEnabled({}), true);
  assert.equal(listAheadEnabled({ SVM_LIST_AHEAD: 'false' }), false);
  assert.equal(listAheadEnabled({ SVM_LIST_AHEAD: '0' }), false);
  assert.equal(listAheadEnabled({ SVM_LIST_AHEAD: 'true' }), true);
});
