/**
 * The worker's memory budget (src/kube/memory-budget.ts): a semaphore counted
 * in bytes, fair, never stuck on one object larger than the budget, and
 * cancellable; then the chunk activity (src/activities/migrate-chunk.ts) on a
 * fake list and update, in Temporal's activity context: chunks running at
 * once never hold more than the budget together, give back every byte, and
 * a cancel ends a chunk that waits for room. The real plane's test:
 * test/test-memory-budget.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { migrateChunk, type ChunkDeps, type ChunkResult } from '../src/activities/migrate-chunk';
import type { ResourceRef } from '../src/api/resource';
import type { KubeClient, ListedObject, ListMeta } from '../src/kube/client';
import { MemoryBudget } from '../src/kube/memory-budget';
import { RateLimiter, WaitAbortedError } from '../src/kube/rate-limit';
import { DEFAULT_MEMORY_BUDGET_BYTES, loadWorkerSettings, SettingsError } from '../src/worker/config';

const tick = () => new Promise((r) => setImmediate(r));

/** Acquires bytes and records the order in which grants arrive. */
function track(b: MemoryBudget, order: string[], name: string, bytes: number, signal?: AbortSignal): Promise<void> {
  return b.acquire(bytes, signal).then(() => {
    order.push(name);
  });
}

void test('within the budget: granted at once and counted; released bytes admit the next waiter', async () => {
  const seen: Array<[number, number]> = [];
  const b = new MemoryBudget(100, { changed: (held, waiting) => seen.push([held, waiting]) });
  await b.acquire(60);
  await b.acquire(40);
  assert.equal(b.held, 100);
  const order: string[] = [];
  const c = track(b, order, 'c', 30);
  await tick();
  assert.deepEqual(order, [], 'waits while the budget is full');
  assert.equal(b.waiting, 1);
  b.release(40);
  await c;
  assert.deepEqual(order, ['c']);
  assert.equal(b.held, 90);
  assert.equal(b.waiting, 0);
  b.release(60);
  b.release(30);
  assert.equal(b.held, 0);
  assert.equal(b.peakHeld, 100);
  assert.deepEqual(seen.at(-1), [0, 0]);
});

void test('fair: first in, first out; a request that does not fit holds up smaller ones behind it', async () => {
  const b = new MemoryBudget(100);
  await b.acquire(70);
  const order: string[] = [];
  const big = track(b, order, 'big', 60);
  const small = track(b, order, 'small', 10); // would fit now, but comes after big
  await tick();
  assert.deepEqual(order, [], 'the small request does not overtake the big one');
  // A newcomer that would fit queues too.
  const later = track(b, order, 'later', 5);
  await tick();
  assert.deepEqual(order, []);
  b.release(70);
  await Promise.all([big, small, later]);
  assert.deepEqual(order, ['big', 'small', 'later']);
  assert.equal(b.held, 75);
});

void test('an object larger than the whole budget proceeds alone, once nothing else is held', async () => {
  const b = new MemoryBudget(100);
  // Alone: granted at once.
  await b.acquire(250);
  assert.equal(b.held, 250);
  const order: string[] = [];
  const next = track(b, order, 'next', 1);
  await tick();
  assert.deepEqual(order, [], 'nothing runs beside it');
  b.release(250);
  await next;
  // Behind others: waits until they are all released, then runs alone.
  const huge = track(b, order, 'huge', 500);
  const after = track(b, order, 'after', 1);
  await tick();
  assert.deepEqual(order, ['next']);
  b.release(1);
  await huge;
  await tick();
  assert.deepEqual(order, ['next', 'huge'], 'granted alone, and the one behind it waits');
  b.release(500);
  await after;
  assert.deepEqual(order, ['next', 'huge', 'after']);
  b.release(1);
  assert.equal(b.held, 0);
});

void test('cancellable: an aborted wait rejects at once, takes nothing, and the waiters behind it move up', async () => {
  const b = new MemoryBudget(100);
  await b.acquire(90);
  const order: string[] = [];
  const ac = new AbortController();
  const big = b.acquire(80, ac.signal);
  const small = track(b, order, 'small', 10);
  await tick();
  assert.deepEqual(order, [], 'held up behind the big request');
  ac.abort();
  await assert.rejects(big, WaitAbortedError);
  await small;
  assert.deepEqual(order, ['small'], 'granted once the request ahead of it gave up');
  assert.equal(b.held, 100, 'the aborted request took nothing');
  // Already aborted: rejected without waiting, nothing taken.
  await assert.rejects(b.acquire(1, AbortSignal.abort()), WaitAbortedError);
  // An abort after the grant changes nothing.
  b.release(100);
  const ac2 = new AbortController();
  await b.acquire(50, ac2.signal);
  ac2.abort();
  assert.equal(b.held, 50);
  assert.equal(b.waiting, 0);
});

void test('waits are reported with their duration; released bytes never count below zero', async () => {
  const waits: number[] = [];
  const b = new MemoryBudget(10, { waited: (s) => waits.push(s) });
  await b.acquire(10);
  const w = b.acquire(5);
  await new Promise((r) => setTimeout(r, 20));
  b.release(10);
  await w;
  assert.equal(waits.length, 1);
  assert.ok(waits[0]! >= 0.015, `waited ${waits[0]} s`);
  b.release(50);
  assert.equal(b.held, 0);
  assert.throws(() => new MemoryBudget(0), RangeError);
});

// -- the chunk activity under one budget

const OBJECT_BYTES = 1000;

const resourceOf = (name: string): ResourceRef => ({
  group: 'svm.test',
  version: 'v2',
  resource: name,
  kind: 'Widget',
  namespaced: true,
  storageVersionHash: '',
  custom: true,
});

/**
 * A fake API: `count` objects of OBJECT_BYTES (or sizeOf) per resource, listed one by one (onItem awaited, as the real
 * stream is), each update taking `updateMs`. Counts what is held outside the budget's view: objects handed to
 * the chunk and not yet updated, over every chunk at once.
 */
function fakeKube(count: number, updateMs: number, sizeOf: (i: number) => number = () => OBJECT_BYTES) {
  const state = { outstanding: 0, maxOutstanding: 0, updates: 0 };
  const kube = {
    async listEach(
      ref: ResourceRef,
      _opts: { limit: number; continueToken?: string },
      onItem: (o: ListedObject, bytes: number) => void | Promise<void>,
    ): Promise<ListMeta> {
      for (let i = 0; i < count; i++) {
        const name = `w-${String(i).padStart(4, '0')}`;
        state.outstanding++;
        state.maxOutstanding = Math.max(state.maxOutstanding, state.outstanding);
        await onItem({ namespace: 'ns', name, resourceVersion: String(i + 1), raw: 'x'.repeat(sizeOf(i)) }, sizeOf(i));
      }
      return { items: count, bytes: count * OBJECT_BYTES };
    },
    async reencode(_ref: ResourceRef, obj: ListedObject): Promise<string> {
      await new Promise((r) => setTimeout(r, updateMs));
      state.outstanding--;
      state.updates++;
      return String(Number(obj.resourceVersion) + 1000);
    },
  };
  return { kube: kube as unknown as KubeClient, state };
}

const chunkDeps = (kube: KubeClient, memory: MemoryBudget): ChunkDeps => ({
  kube,
  budget: new RateLimiter(0),
  memory,
  limiterFor: () => undefined,
  // A chunk's own buffer far above the worker's budget: only the budget holds them back.
  listBufferBytes: 1000 * OBJECT_BYTES,
});

const runChunk = (env: MockActivityEnvironment, deps: ChunkDeps, resource: string, concurrency: number): Promise<ChunkResult> =>
  env.run(migrateChunk, deps, { resource: resourceOf(resource), options: { chunkSize: 500, concurrency, qps: 0 } });

void test('four chunks at once under one budget: never more held than the budget, every object migrated, every byte given back', async () => {
  const BUDGET = 6 * OBJECT_BYTES;
  const memory = new MemoryBudget(BUDGET);
  const { kube, state } = fakeKube(40, 2);
  const results = await Promise.all(
    ['a', 'b', 'c', 'd'].map((r) => runChunk(new MockActivityEnvironment(), chunkDeps(kube, memory), r, 4)),
  );
  for (const r of results) {
    assert.equal(r.counters.migrated, 40);
    assert.equal(r.counters.rewritten, 40);
    assert.equal(r.counters.failed, 0);
  }
  assert.equal(state.updates, 160);
  assert.ok(memory.peakHeld <= BUDGET, `held ${memory.peakHeld} bytes at most, budget ${BUDGET}`);
  assert.ok(memory.peakHeld >= 4 * OBJECT_BYTES, `the budget was used (peak ${memory.peakHeld})`);
  // Objects listed but not updated, over the four chunks: the budget's bytes plus the one object each chunk holds
  // while it waits for room (the list is not read further meanwhile).
  assert.ok(state.maxOutstanding <= BUDGET / OBJECT_BYTES + 4, `at most ${state.maxOutstanding} objects outstanding`);
  assert.equal(memory.held, 0, 'every byte given back');
  assert.equal(memory.waiting, 0);
});

void test('a chunk cancelled while it waits for room ends at once, holding nothing; the others go on', async () => {
  const memory = new MemoryBudget(2 * OBJECT_BYTES);
  // Updates of resource "slow" hang until released: it holds the whole budget.
  let releaseSlow!: () => void;
  const slowGate = new Promise<void>((r) => (releaseSlow = r));
  const slow = fakeKube(2, 1);
  const slowKube = {
    listEach: slow.kube.listEach.bind(slow.kube),
    async reencode(ref: ResourceRef, obj: ListedObject) {
      await slowGate;
      return slow.kube.reencode(ref, obj);
    },
  } as unknown as KubeClient;
  const waiting = fakeKube(5, 1);
  const slowRun = runChunk(new MockActivityEnvironment(), chunkDeps(slowKube, memory), 'slow', 2);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(memory.held, 2 * OBJECT_BYTES, 'the slow chunk holds the whole budget');

  const env = new MockActivityEnvironment();
  const cancelled = runChunk(env, chunkDeps(waiting.kube, memory), 'waiting', 2);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(memory.waiting, 1, 'the second chunk waits for room');
  const t0 = performance.now();
  env.cancel();
  await assert.rejects(cancelled, (err: unknown) => err instanceof CancelledFailure);
  assert.ok(performance.now() - t0 < 1000, 'the cancel did not wait for memory');
  assert.equal(memory.waiting, 0, 'its wait was given up');
  assert.equal(memory.held, 2 * OBJECT_BYTES, 'it took nothing');
  assert.equal(waiting.state.updates, 0);

  releaseSlow();
  const r = await slowRun;
  assert.equal(r.counters.migrated, 2);
  assert.equal(memory.held, 0);
});

void test('a fatal update error stops the chunk while it waits for room, and gives its bytes back', async () => {
  const memory = new MemoryBudget(3 * OBJECT_BYTES);
  // The fourth object is twice the size: the bytes the failed update gives back do not make room for it.
  const { kube } = fakeKube(10, 1, (i) => (i === 3 ? 2 : 1) * OBJECT_BYTES);
  const failing = {
    listEach: kube.listEach.bind(kube),
    async reencode(_ref: ResourceRef, obj: ListedObject): Promise<string> {
      await new Promise((r) => setTimeout(r, 5));
      if (obj.name === 'w-0000') throw new Error('boom');
      // The others never end on their own: only the stop ends the chunk.
      return new Promise<string>(() => undefined);
    },
  } as unknown as KubeClient;
  // Concurrency 1: the failing object is updated while the list waits for room behind the queued ones, which
  // only the chunk's end gives back: without the stop, the wait (and every chunk behind it) would never end.
  const run = runChunk(new MockActivityEnvironment(), { ...chunkDeps(failing, memory), listBufferBytes: 100 * OBJECT_BYTES }, 'f', 1);
  await assert.rejects(run, /boom/);
  assert.equal(memory.held, 0, 'queued objects given back');
  assert.equal(memory.waiting, 0);
});

void test('SVM_MEMORY_BUDGET_BYTES: 64 MiB by default, 0 for none, a bad value stops the worker with its name', () => {
  assert.equal(DEFAULT_MEMORY_BUDGET_BYTES, 64 * 2 ** 20);
  assert.equal(loadWorkerSettings({}).memoryBudgetBytes, DEFAULT_MEMORY_BUDGET_BYTES);
  assert.equal(loadWorkerSettings({ SVM_MEMORY_BUDGET_BYTES: '0' }).memoryBudgetBytes, 0);
  assert.equal(loadWorkerSettings({ SVM_MEMORY_BUDGET_BYTES: '268435456' }).memoryBudgetBytes, 256 * 2 ** 20);
  for (const bad of ['64Mi', '-1', '1.5', ' ']) {
    assert.throws(
      () => loadWorkerSettings({ SVM_MEMORY_BUDGET_BYTES: bad }),
      (err: unknown) => err instanceof SettingsError && err.message.includes('SVM_MEMORY_BUDGET_BYTES'),
      bad,
    );
  }
});
