/**
 * Unit tests of SVM_OWN_TAKE_AFTER_SECONDS: own mode's wait for the built-in migrator before svm takes a new
 * standard object, read by the worker's settings (src/worker/config.ts) and used by the bridge's decision
 * (src/worker/bridge-decision.ts). The default is OWN_TAKE_AFTER_MS, two minutes, as before the setting. Pure.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { decide, OWN_TAKE_AFTER_MS, takeAfterText, type BridgeSituation } from '../src/worker/bridge-decision';
import { loadWorkerSettings, SettingsError } from '../src/worker/config';

const NOW = Date.UTC(2026, 11, 7, 12);
const young = (ageMs: number): BridgeSituation => ({
  object: {
    state: 'new',
    ref: 'w-1',
    resource: { group: 'example.com', resource: 'widgets' },
    otherWriters: [],
    createdAt: NOW - ageMs,
  },
  api: 'standard',
  builtInActing: true,
  now: NOW,
});

void test('SVM_OWN_TAKE_AFTER_SECONDS: unset, two minutes (the default unchanged); set, its seconds', () => {
  assert.equal(OWN_TAKE_AFTER_MS, 120_000);
  assert.equal(loadWorkerSettings({}).ownTakeAfterSeconds, 120);
  assert.equal(loadWorkerSettings({ SVM_OWN_TAKE_AFTER_SECONDS: '' }).ownTakeAfterSeconds, 120);
  assert.equal(loadWorkerSettings({ SVM_OWN_TAKE_AFTER_SECONDS: '20' }).ownTakeAfterSeconds, 20);
  assert.equal(loadWorkerSettings({ SVM_OWN_TAKE_AFTER_SECONDS: '1' }).ownTakeAfterSeconds, 1);
  assert.equal(loadWorkerSettings({ SVM_OWN_TAKE_AFTER_SECONDS: '3600' }).ownTakeAfterSeconds, 3600);
});

void test('SVM_OWN_TAKE_AFTER_SECONDS: a bad value is refused at start, naming the variable', () => {
  for (const [value, why] of [
    ['0', 'must be at least 1'],
    ['3601', 'must be at most 3600'],
    ['1.5', 'must be a whole number'],
    ['soon', 'must be a number'],
    ['  ', 'must be a number'],
  ] as const) {
    let caught: unknown;
    try {
      loadWorkerSettings({ SVM_OWN_TAKE_AFTER_SECONDS: value });
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof SettingsError, `${JSON.stringify(value)}: expected a SettingsError, got ${String(caught)}`);
    assert.match(caught.message, /SVM_OWN_TAKE_AFTER_SECONDS/);
    assert.ok(caught.message.includes(why), `${JSON.stringify(value)}: ${caught.message} says ${why}`);
  }
});

void test('the decision: without the setting two minutes from creation; with it, its delay, not before', () => {
  // Without ownTakeAfterMs: the default, as before.
  assert.deepEqual(decide(young(30_000)), { act: 'waitForOtherController', takeAt: NOW - 30_000 + 120_000, afterMs: 90_000 });
  assert.deepEqual(decide(young(120_000)), { act: 'attach', takeover: false });
  // 20 s: waits at 5 s and 19.999 s, takes at 20 s and after.
  const at = (ageMs: number) => decide({ ...young(ageMs), ownTakeAfterMs: 20_000 });
  assert.deepEqual(at(5_000), { act: 'waitForOtherController', takeAt: NOW - 5_000 + 20_000, afterMs: 15_000 });
  assert.deepEqual(at(19_999), { act: 'waitForOtherController', takeAt: NOW - 19_999 + 20_000, afterMs: 1 });
  assert.deepEqual(at(20_000), { act: 'attach', takeover: false });
  assert.deepEqual(at(60_000), { act: 'attach', takeover: false });
  // The built-in not seen lately: at once, whatever the setting.
  assert.deepEqual(decide({ ...young(1_000), builtInActing: false, ownTakeAfterMs: 20_000 }), { act: 'attach', takeover: false });
});

void test("the Event's words: the default reads as before (2 minutes), other delays in seconds", () => {
  assert.equal(takeAfterText(OWN_TAKE_AFTER_MS), '2 minutes');
  assert.equal(takeAfterText(180_000), '3 minutes');
  assert.equal(takeAfterText(30_000), '30 seconds');
  assert.equal(takeAfterText(90_000), '90 seconds');
});
