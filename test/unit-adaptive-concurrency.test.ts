/**
 * The worker's adaptive update concurrency (src/kube/adaptive-concurrency.ts):
 * slots, and the limit's answer to latency, without a server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdaptiveConcurrency, sizeClass } from '../src/kube/adaptive-concurrency';

/** Feeds n answers of the given latency (for objects of `bytes`), keeping every slot busy (the limit is reached). */
async function answers(c: AdaptiveConcurrency, n: number, seconds: number | undefined, bytes?: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const busy = c.limit - 1;
    for (let j = 0; j < busy; j++) await c.acquire();
    await c.acquire();
    c.release(seconds, bytes);
    for (let j = 0; j < busy; j++) c.release();
  }
}

void test('no more in flight than the limit: the next acquire waits for a release, in order', async () => {
  const c = new AdaptiveConcurrency({ initial: 2, max: 8 });
  await c.acquire();
  await c.acquire();
  const order: number[] = [];
  const third = c.acquire().then(() => order.push(3));
  const fourth = c.acquire().then(() => order.push(4));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [], 'both wait while two are in flight');
  c.release();
  await third;
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [3], 'one release admits one');
  c.release();
  await fourth;
  assert.deepEqual(order, [3, 4]);
});

void test('answers at the baseline: the limit grows by one per window up to max', async () => {
  const limits: number[] = [];
  const c = new AdaptiveConcurrency({ initial: 4, max: 6, onChange: (l) => limits.push(l) });
  await answers(c, 10, 0.01); // the first window sets the baseline
  assert.equal(c.limit, 4);
  assert.equal(c.baseline(), 0.01);
  await answers(c, 200, 0.011);
  assert.equal(c.limit, 6, 'grown to max, not beyond');
  assert.deepEqual(limits, [4, 5, 6]);
});

void test('answers twice as slow as the baseline: the limit falls to 3/4 per window, never below 1; in between it holds', async () => {
  const c = new AdaptiveConcurrency({ initial: 8, max: 8 });
  await answers(c, 16, 0.01);
  assert.equal(c.limit, 8);
  await answers(c, 16, 0.015); // 1.5x: neither grow nor fall
  assert.equal(c.limit, 8);
  await answers(c, 16, 0.02);
  assert.equal(c.limit, 6);
  await answers(c, 12, 0.05);
  assert.equal(c.limit, 4);
  await answers(c, 200, 0.5);
  assert.equal(c.limit, 1, 'at least one update in flight, however slow');
});

void test('a limit nobody reaches is not raised: one update at a time at the baseline leaves it where it is', async () => {
  const c = new AdaptiveConcurrency({ initial: 4, max: 64 });
  for (let i = 0; i < 500; i++) {
    await c.acquire();
    c.release(0.01);
  }
  assert.equal(c.limit, 4);
});

void test('objects of different sizes are compared with their own kind: 1 MB Secrets ten times slower than 1 KB ones are not load', async () => {
  assert.deepEqual([0, 1000, 4096, 16_384, 65_536, 262_144, 1_000_000, 1_048_576, 5e6].map(sizeClass), [0, 0, 1, 2, 3, 4, 4, 5, 5]);
  const c = new AdaptiveConcurrency({ initial: 2, max: 8 });
  for (let round = 0; round < 20; round++) {
    await answers(c, 10, 0.01, 1000);
    await answers(c, 10, 0.1, 900_000);
  }
  assert.equal(c.limit, 8, 'grown, never cut');
  assert.equal(c.baseline(1000), 0.01);
  assert.equal(c.baseline(900_000), 0.1);
  await answers(c, 32, 0.3, 900_000); // three times as slow for their size: load
  assert.ok(c.limit < 8, `cut (${c.limit})`);
});

void test('answers that say nothing about load (429s, errors, cancels) are not sampled', async () => {
  const c = new AdaptiveConcurrency({ initial: 4, max: 8 });
  await answers(c, 10, 0.01);
  await answers(c, 100, undefined);
  assert.equal(c.limit, 4, 'no window completed');
  assert.equal(c.baseline(), 0.01);
});

void test('a server slower for good becomes the baseline: the limit grows again after BASELINE_WINDOWS windows', async () => {
  const c = new AdaptiveConcurrency({ initial: 4, max: 4 });
  await answers(c, 10, 0.01);
  await answers(c, 10 * 4, 0.05); // bigger objects from now on: the limit falls to 1
  assert.equal(c.limit, 1);
  await answers(c, 10 * 80, 0.05);
  assert.equal(c.baseline(), 0.05, 'the fast windows have left the baseline');
  assert.equal(c.limit, 4);
});
