/**
 * Unit tests of src/api/conditions.ts: the conditions written to a
 * StorageVersionMigration for each phase. `kubectl wait
 * --for=condition=Succeeded` waits for a condition of type Succeeded with
 * status True; `--for=condition=Failed` likewise for Failed. Pure.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { conditionsFor } from '../src/api/conditions';
import { MigrationCondition, MigrationPhase } from '../src/api/migration';

const NOW = '2024-05-06T07:08:09Z';

/** What `kubectl wait --for=condition=<type>` (status True by default) sees. */
function kubectlWaitMet(conds: MigrationCondition[], type: string, status = 'True'): boolean {
  return conds.some((c) => c.type === type && c.status === status);
}

function byType(conds: MigrationCondition[]): Record<string, string> {
  return Object.fromEntries(conds.map((c) => [c.type, c.status]));
}

const PHASES = MigrationPhase.options;

void test('conditionsFor: the phases under test are the schema phases', () => {
  assert.deepEqual([...PHASES].sort(), ['Aborted', 'Failed', 'Paused', 'Pending', 'Running', 'Succeeded', 'WaitingForAgreement']);
});

void test('conditionsFor: Succeeded gives Succeeded=True and Running=False, and no Failed', () => {
  const conds = conditionsFor('Succeeded', undefined, NOW);
  assert.deepEqual(byType(conds), { Running: 'False', Succeeded: 'True' });
  assert.equal(kubectlWaitMet(conds, 'Succeeded'), true);
  assert.equal(kubectlWaitMet(conds, 'Failed'), false);
  assert.equal(kubectlWaitMet(conds, 'Running'), false);
});

void test('conditionsFor: Failed gives Failed=True and Running=False, and no Succeeded', () => {
  const conds = conditionsFor('Failed', 'the list failed: forbidden', NOW);
  assert.deepEqual(byType(conds), { Running: 'False', Failed: 'True' });
  assert.equal(kubectlWaitMet(conds, 'Failed'), true);
  assert.equal(kubectlWaitMet(conds, 'Succeeded'), false);
  assert.equal(conds.find((c) => c.type === 'Failed')!.reason, 'Failed');
});

void test('conditionsFor: Aborted counts as Failed (reason Aborted), never as Succeeded', () => {
  const conds = conditionsFor('Aborted', 'aborted by user', NOW);
  assert.deepEqual(byType(conds), { Running: 'False', Failed: 'True' });
  assert.equal(kubectlWaitMet(conds, 'Failed'), true);
  assert.equal(kubectlWaitMet(conds, 'Succeeded'), false);
  for (const c of conds) assert.equal(c.reason, 'Aborted');
});

void test('conditionsFor: Pending gives only Running=Unknown', () => {
  const conds = conditionsFor('Pending', undefined, NOW);
  assert.deepEqual(conds, [{ type: 'Running', status: 'Unknown', lastUpdateTime: NOW, reason: 'Pending' }]);
  assert.equal(kubectlWaitMet(conds, 'Succeeded'), false);
  assert.equal(kubectlWaitMet(conds, 'Failed'), false);
});

void test('conditionsFor: Running, WaitingForAgreement and Paused give only Running=True with the phase as reason', () => {
  for (const phase of ['Running', 'WaitingForAgreement', 'Paused'] as const) {
    const conds = conditionsFor(phase, undefined, NOW);
    assert.deepEqual(conds, [{ type: 'Running', status: 'True', lastUpdateTime: NOW, reason: phase }], phase);
    assert.equal(kubectlWaitMet(conds, 'Running'), true, phase);
    assert.equal(kubectlWaitMet(conds, 'Succeeded'), false, phase);
    assert.equal(kubectlWaitMet(conds, 'Failed'), false, phase);
  }
});

void test('conditionsFor: Succeeded and Failed are never both True, and terminal phases are exactly Succeeded/Failed/Aborted', () => {
  for (const phase of PHASES) {
    const conds = conditionsFor(phase, 'm', NOW);
    const succeeded = kubectlWaitMet(conds, 'Succeeded');
    const failed = kubectlWaitMet(conds, 'Failed');
    assert.ok(!(succeeded && failed), phase);
    const terminal = phase === 'Succeeded' || phase === 'Failed' || phase === 'Aborted';
    assert.equal(succeeded || failed, terminal, `${phase}: a wait ends iff the phase is terminal`);
    // Running is True exactly while the migration is in progress.
    assert.equal(kubectlWaitMet(conds, 'Running'), !terminal && phase !== 'Pending', phase);
  }
});

void test('conditionsFor: each type appears at most once and the conditions are schema-valid', () => {
  for (const phase of PHASES) {
    const conds = conditionsFor(phase, 'something happened', NOW);
    const types = conds.map((c) => c.type);
    assert.equal(new Set(types).size, types.length, phase);
    for (const c of conds) assert.doesNotThrow(() => MigrationCondition.parse(c), `${phase} ${c.type}`);
  }
});

void test('conditionsFor: the message is carried on every condition', () => {
  const message = 'migrated 12 of 12 objects; 1 "quoted" failure';
  for (const phase of PHASES) {
    const conds = conditionsFor(phase, message, NOW);
    assert.ok(conds.length > 0, phase);
    for (const c of conds) assert.equal(c.message, message, `${phase} ${c.type}`);
  }
});

void test('conditionsFor: no message (undefined or empty) leaves the message field out', () => {
  for (const message of [undefined, '']) {
    for (const phase of PHASES) {
      for (const c of conditionsFor(phase, message, NOW)) {
        assert.equal('message' in c, false, `${phase} ${c.type} with ${JSON.stringify(message)}`);
      }
    }
  }
});

void test('conditionsFor: lastUpdateTime is the given time on every condition, and every condition has a reason', () => {
  const now = '2030-01-02T03:04:05.678Z';
  for (const phase of PHASES) {
    for (const c of conditionsFor(phase, undefined, now)) {
      assert.equal(c.lastUpdateTime, now);
      assert.ok(c.reason && c.reason.length > 0);
      assert.match(c.reason, /^[A-Z][A-Za-z]*$/, 'reasons are CamelCase like Kubernetes reasons');
    }
  }
});

void test('conditionsFor: exact output for Succeeded with a message', () => {
  assert.deepEqual(conditionsFor('Succeeded', 'done', NOW), [
    { type: 'Running', status: 'False', lastUpdateTime: NOW, reason: 'Completed', message: 'done' },
    { type: 'Succeeded', status: 'True', lastUpdateTime: NOW, reason: 'Succeeded', message: 'done' },
  ]);
});

void test('conditionsFor: a Failed phase carries the given reason on its Failed condition', () => {
  const conds = conditionsFor('Failed', 'refused: spec.continueToken is set', NOW, 'ContinueTokenRefused');
  assert.deepEqual(byType(conds), { Running: 'False', Failed: 'True' });
  assert.equal(conds.find((c) => c.type === 'Failed')!.reason, 'ContinueTokenRefused');
  assert.equal(conds.find((c) => c.type === 'Running')!.reason, 'Completed');
  // Other phases ignore it.
  assert.deepEqual(conditionsFor('Aborted', 'm', NOW, 'X'), conditionsFor('Aborted', 'm', NOW));
  assert.deepEqual(conditionsFor('Succeeded', 'm', NOW, 'X'), conditionsFor('Succeeded', 'm', NOW));
});
