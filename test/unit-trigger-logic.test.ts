/** The trigger's decisions (design-docs/001 and its HA extension), case by case. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UNKNOWN, type StateSnapshot, type TriggerMemory } from '../src/contract/trigger';
import { decide } from '../src/workflows/trigger-logic';

const P = 10_000; // period
const cfg = { periodMs: P, stalenessMs: 3 * P, maxBackoffMs: 8 * P };
const T0 = Date.parse('2026-11-22T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const empty = (): TriggerMemory => ({ consensus: {}, backoff: {} });
const res = (hashes: Record<string, string>) => [{ name: 'widgets.example.com', group: 'example.com', resource: 'widgets', hashes }];
const W = 'widgets.example.com';
const state = (
  persisted: string[],
  current: string | undefined,
  at = T0,
  reporters: StateSnapshot['reporters'] = [],
): Record<string, StateSnapshot> => ({
  [W]: { persisted, current, lastHeartbeatTime: iso(at), reporters },
});

void test('a new resource: created as Unknown with the current hash, migrated only after one stable period', () => {
  const first = decide(res({ a: 'h1', b: 'h1' }), {}, {}, empty(), cfg, T0, true);
  const a = first.actions[0]!;
  assert.equal(a.write.create, true);
  assert.deepEqual(a.write.persisted, [UNKNOWN]);
  assert.equal(a.write.current, 'h1');
  assert.equal(a.startMigration, undefined, 'not before the hashes agreed for a period');
  assert.equal(a.write.reporters.length, 2);
  const second = decide(res({ a: 'h1', b: 'h1' }), state([UNKNOWN], 'h1'), { [W]: 'none' }, first.memory, cfg, T0 + P, true);
  assert.equal(second.actions[0]!.startMigration, true);
  assert.equal(second.actions[0]!.write.create, false);
});

void test('unchanged and settled: only the heartbeat moves', () => {
  const d = decide(
    res({ a: 'h1' }),
    state(['h1'], 'h1'),
    {},
    { consensus: { [W]: { hash: 'h1', since: T0 - 5 * P } }, backoff: {} },
    cfg,
    T0 + P,
    true,
  );
  const a = d.actions[0]!;
  assert.deepEqual(a.write.persisted, ['h1']);
  assert.equal(a.write.current, 'h1');
  assert.equal(a.write.lastHeartbeatTime, iso(T0 + P));
  assert.equal(a.startMigration, undefined);
  assert.equal(a.stopMigration, undefined);
});

void test('the hash changes: the running migration is stopped, current moves and is appended to persisted in one write', () => {
  const d = decide(
    res({ a: 'h2', b: 'h2' }),
    state(['h1'], 'h1'),
    { [W]: 'running' },
    { consensus: { [W]: { hash: 'h1', since: T0 - 5 * P } }, backoff: {} },
    cfg,
    T0 + P,
    true,
  );
  const a = d.actions[0]!;
  assert.match(a.stopMigration ?? '', /changed from h1 to h2/);
  assert.equal(a.write.current, 'h2');
  assert.deepEqual(a.write.persisted, ['h1', 'h2']);
  assert.equal(a.startMigration, undefined, 'h2 has not been agreed for a period yet');
  const later = decide(res({ a: 'h2', b: 'h2' }), state(['h1', 'h2'], 'h2'), { [W]: 'aborted' }, d.memory, cfg, T0 + 2 * P, true);
  assert.equal(later.actions[0]!.startMigration, true);
});

void test('HA: diverging reporters stop a running migration, add the new hash to persisted, keep current, start nothing', () => {
  const d = decide(
    res({ a: 'h1', b: 'h2' }),
    state(['h1'], 'h1'),
    { [W]: 'running' },
    { consensus: { [W]: { hash: 'h1', since: T0 - 5 * P } }, backoff: {} },
    cfg,
    T0 + P,
    false,
  );
  const a = d.actions[0]!;
  assert.match(a.stopMigration ?? '', /different storage version hashes.*a=h1.*b=h2/);
  assert.equal(a.write.current, 'h1');
  assert.deepEqual(a.write.persisted, ['h1', 'h2']);
  assert.equal(a.write.discoveryConsistent, false);
  assert.equal(a.startMigration, undefined);
  assert.equal(d.memory.consensus[W], undefined, 'no consensus while they diverge');
});

void test('HA: a reporter silent for three periods is dropped; a silent one younger than that still counts', () => {
  const reporters = [
    { reporterID: 'a', currentStorageVersionHash: 'h1', lastHeartbeatTime: iso(T0) },
    { reporterID: 'gone', currentStorageVersionHash: 'h0', lastHeartbeatTime: iso(T0 - 3 * P) },
    { reporterID: 'quiet', currentStorageVersionHash: 'h1', lastHeartbeatTime: iso(T0 - P) },
  ];
  const d = decide(res({ a: 'h1' }), state(['h1'], 'h1', T0, reporters), {}, empty(), cfg, T0, true);
  assert.deepEqual(
    d.actions[0]!.write.reporters.map((r) => r.reporterID),
    ['a', 'quiet'],
  );
  assert.equal(d.actions[0]!.write.current, 'h1', 'the dropped reporter no longer blocks agreement');
});

void test('the trigger away past the staleness bound: persisted is reset to Unknown, and a migration follows', () => {
  const d = decide(
    res({ a: 'h1' }),
    state(['h1'], 'h1', T0 - 4 * P),
    {},
    { consensus: { [W]: { hash: 'h1', since: T0 - 10 * P } }, backoff: {} },
    cfg,
    T0,
    true,
  );
  assert.deepEqual(d.actions[0]!.write.persisted, [UNKNOWN]);
  assert.match(d.actions[0]!.note ?? '', /staleness/);
  assert.equal(d.actions[0]!.startMigration, true);
});

void test('Unknown covers every version: hashes are not appended to it', () => {
  const d = decide(res({ a: 'h1', b: 'h2' }), state([UNKNOWN], 'h1'), {}, empty(), cfg, T0, true);
  assert.deepEqual(d.actions[0]!.write.persisted, [UNKNOWN]);
});

void test('a failed migration is retried with growing backoff, not in a tight loop', () => {
  let memory: TriggerMemory = { consensus: { [W]: { hash: 'h2', since: T0 - 10 * P } }, backoff: {} };
  const st = state(['h1', 'h2'], 'h2');
  let now = T0;
  const step = (status: 'failed' | 'running' | 'none') => {
    const d = decide(res({ a: 'h2' }), st, { [W]: status }, memory, cfg, now, true);
    memory = d.memory;
    return d.actions[0]!;
  };
  assert.equal(step('failed').startMigration, undefined, 'not at once');
  assert.equal(memory.backoff[W]!.failures, 1);
  now += P;
  assert.equal(step('failed').startMigration, undefined, 'still backing off');
  now += P;
  assert.equal(step('failed').startMigration, true, 'after 2 periods');
  now += P;
  assert.equal(step('running').startMigration, undefined);
  now += P;
  step('failed');
  assert.equal(memory.backoff[W]!.failures, 2);
  const wait = memory.backoff[W]!.notBefore - now;
  assert.equal(wait, 4 * P, 'the second wait doubles');
});

void test('a slow period of a running trigger is not absence: heartbeats it wrote itself are never stale', () => {
  const memory: TriggerMemory = { since: T0 - 100 * P, consensus: { [W]: { hash: 'h1', since: T0 - 100 * P } }, backoff: {} };
  const d = decide(res({ a: 'h1' }), state(['h1'], 'h1', T0 - 10 * P), {}, memory, cfg, T0, true);
  assert.deepEqual(d.actions[0]!.write.persisted, ['h1']);
  assert.equal(d.memory.since, T0 - 100 * P, 'carried on');
});

void test('a trigger that ran but applied no period for longer than the bound was away too: persisted reset to Unknown', () => {
  const blindCfg = { ...cfg, blindGapIsAbsence: true };
  const memory: TriggerMemory = {
    since: T0 - 100 * P,
    lastApplied: T0 - 10 * P,
    failing: true,
    consensus: { [W]: { hash: 'h1', since: T0 - 100 * P } },
    backoff: {},
  };
  const d = decide(res({ a: 'h1' }), state(['h1'], 'h1', T0 - 10 * P), {}, memory, blindCfg, T0, true);
  assert.deepEqual(d.actions[0]!.write.persisted, [UNKNOWN]);
  assert.match(d.actions[0]!.note ?? '', /observed nothing for longer than the staleness bound/);
  assert.equal(d.memory.lastApplied, T0, 'this period counts from now on');

  assert.equal(d.memory.failing, undefined, 'an applied period ends the failing stretch');
  // A slow period that succeeded is not absence, however long it took.
  const slowOk = decide(res({ a: 'h1' }), state(['h1'], 'h1', T0 - 10 * P), {}, { ...memory, failing: undefined }, blindCfg, T0, true);
  assert.deepEqual(slowOk.actions[0]!.write.persisted, ['h1']);
  // A slow period within the bound is not absence.
  const slow = decide(res({ a: 'h1' }), state(['h1'], 'h1', T0 - 2 * P), {}, { ...memory, lastApplied: T0 - 2 * P }, blindCfg, T0, true);
  assert.deepEqual(slow.actions[0]!.write.persisted, ['h1']);
  // Histories from before the patch decide as they did.
  const old = decide(res({ a: 'h1' }), state(['h1'], 'h1', T0 - 10 * P), {}, memory, cfg, T0, true);
  assert.deepEqual(old.actions[0]!.write.persisted, ['h1']);
  assert.equal(old.memory.lastApplied, undefined);
});

void test('a settled resource clears its backoff', () => {
  const d = decide(
    res({ a: 'h2' }),
    state(['h2'], 'h2'),
    { [W]: 'succeeded' },
    { consensus: {}, backoff: { [W]: { failures: 3, notBefore: T0 + 99 * P } } },
    cfg,
    T0,
    true,
  );
  assert.equal(d.memory.backoff[W], undefined);
});

void test('by the record: a StorageState settled at current with no pass on record migrates; a recorded pass, remembered past retention, or a legacy result does not', () => {
  const rcfg = { ...cfg, recordDecides: true };
  const stable = { ...empty(), consensus: { [W]: { hash: 'h1', since: T0 - P } } };
  // Forged, or past retention with a trigger that never saw the pass: the mirror alone does not count.
  const forged = decide(res({ a: 'h1' }), state(['h1'], 'h1'), { [W]: 'none' }, stable, rcfg, T0, true, {});
  const a = forged.actions[0]!;
  assert.equal(a.startMigration, true);
  assert.equal(a.mirrorWithoutRecord, true);
  assert.match(a.note ?? '', /the StorageState says objects are persisted only in h1, but no whole pass at h1 is on record in Temporal/);
  assert.deepEqual(a.write.persisted, ['h1'], 'the mirror itself is left as it is');
  // The pass on record (its result names h1): settled, and remembered.
  const recorded = decide(res({ a: 'h1' }), state(['h1'], 'h1'), { [W]: 'succeeded' }, stable, rcfg, T0, true, { [W]: { hash: 'h1' } });
  assert.equal(recorded.actions[0]!.startMigration, undefined);
  assert.equal(recorded.actions[0]!.mirrorWithoutRecord, undefined);
  assert.deepEqual(recorded.memory.recorded, { [W]: 'h1' });
  // Later, the workflow gone past retention (nothing observed): the trigger's memory still counts.
  const later = decide(res({ a: 'h1' }), state(['h1'], 'h1'), {}, recorded.memory, rcfg, T0 + P, true, {});
  assert.equal(later.actions[0]!.startMigration, undefined);
  assert.deepEqual(later.memory.recorded, { [W]: 'h1' });
  // A pass on record at another hash does not count for this one.
  const other = decide(res({ a: 'h1' }), state(['h1'], 'h1'), { [W]: 'succeeded' }, stable, rcfg, T0, true, { [W]: { hash: 'h0' } });
  assert.equal(other.actions[0]!.startMigration, true);
  // A Succeeded result of an svm that kept no record: the StorageState is believed, as before.
  const legacy = decide(res({ a: 'h1' }), state(['h1'], 'h1'), { [W]: 'succeeded' }, stable, rcfg, T0, true, { [W]: { legacy: true } });
  assert.equal(legacy.actions[0]!.startMigration, undefined);
  // Without recordDecides (histories from before the patch): the StorageState alone, as they ran.
  const before = decide(res({ a: 'h1' }), state(['h1'], 'h1'), {}, stable, cfg, T0, true);
  assert.equal(before.actions[0]!.startMigration, undefined);
  assert.equal(before.memory.recorded, undefined);
});
