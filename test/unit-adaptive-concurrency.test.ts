/**
 * The worker's adaptive update concurrency (src/kube/adaptive-concurrency.ts):
 * slots, and the limit's answer to latency, without a server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdaptiveConcurrency, PROBE_EVERY, sizeClass } from '../src/kube/adaptive-concurrency';

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

void test("'queue' rule: at the baseline the limit grows to max; with more than QUEUE_HIGH waiting it falls by one; in between it holds", async () => {
  const c = new AdaptiveConcurrency({ initial: 1, max: 8, rule: 'queue' });
  await answers(c, 10, 0.01); // the baseline
  await answers(c, 300, 0.011);
  assert.equal(c.limit, 8, 'answers near the baseline: grown to the migrations’ concurrency');
  // 8 in flight, answers 3x the baseline: 8 x (1 - 1/3) = 5.3 wait at the servers, more than QUEUE_HIGH.
  await answers(c, 16, 0.03);
  assert.equal(c.limit, 7);
  // 7 in flight at 2x: 3.5 wait, between QUEUE_LOW and QUEUE_HIGH: it holds.
  await answers(c, 14, 0.02);
  assert.equal(c.limit, 7);
  await answers(c, 14, 0.02);
  assert.equal(c.limit, 7);
  // A busy server whose answers grow with the limit settles where 2-4 of ours wait: 1 + the queue.
  const saturated = new AdaptiveConcurrency({ initial: 1, max: 64, rule: 'queue' });
  await answers(saturated, 10, 0.01);
  for (let i = 0; i < 200; i++) await answers(saturated, Math.max(10, 2 * saturated.limit), 0.01 * saturated.limit);
  assert.ok(saturated.limit >= 3 && saturated.limit <= 6, `settled at ${saturated.limit}`);
});

void test("'queue' rule: answers ten times slower than the baseline halve the limit; the 'ratio' rule is unchanged by the option", async () => {
  const c = new AdaptiveConcurrency({ initial: 1, max: 8, rule: 'queue' });
  await answers(c, 10, 0.01);
  await answers(c, 300, 0.01);
  assert.equal(c.limit, 8);
  await answers(c, 16, 0.1);
  assert.equal(c.limit, 4);
  const ratio = new AdaptiveConcurrency({ initial: 8, max: 8, overloadRatio: 1.1 });
  await answers(ratio, 16, 0.01);
  await answers(ratio, 16, 0.015);
  assert.equal(ratio.limit, 8, 'the ratio rule holds at 1.5x whatever overloadRatio says');
});

void test('a 429 halves the limit at once, once per second however many arrive; never below 1', () => {
  const limits: number[] = [];
  const c = new AdaptiveConcurrency({ initial: 8, max: 8, rule: 'queue', onChange: (l) => limits.push(l) });
  c.throttled(10_000);
  c.throttled(10_100);
  c.throttled(10_900);
  assert.equal(c.limit, 4, 'one burst of rejections is one signal');
  c.throttled(11_000);
  assert.equal(c.limit, 2);
  c.throttled(12_000);
  c.throttled(13_000);
  c.throttled(14_000);
  assert.equal(c.limit, 1);
  assert.deepEqual(limits, [8, 4, 2, 1]);
});

void test('a halved limit admits no one new until enough in flight have finished', async () => {
  const c = new AdaptiveConcurrency({ initial: 4, max: 4, rule: 'queue' });
  for (let i = 0; i < 4; i++) await c.acquire();
  c.throttled(0);
  let admitted = false;
  const next = c.acquire().then(() => (admitted = true));
  c.release();
  c.release();
  await new Promise((r) => setImmediate(r));
  assert.equal(admitted, false, 'two still in flight: the new limit of 2 is full');
  c.release();
  await next;
  assert.equal(admitted, true);
});

void test("'queue' rule: every PROBE_EVERY windows one window at a limit of one re-reads the baseline, then the limit goes back", async () => {
  const limits: number[] = [];
  const c = new AdaptiveConcurrency({ initial: 8, max: 8, rule: 'queue', onChange: (l) => limits.push(l) });
  await answers(c, 16, 0.01);
  for (let w = 0; w < PROBE_EVERY; w++) await answers(c, 16, 0.01); // the first window above only set the baseline
  assert.deepEqual(limits, [8, 1], 'the probe');
  // The servers got faster meanwhile: the probe's window (10 answers at a limit of one) is the new baseline.
  await answers(c, 10, 0.004);
  assert.deepEqual(limits, [8, 1, 8], 'and back');
  assert.equal(c.baseline(), 0.004);
});
