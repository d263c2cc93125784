/**
 * Unit tests of src/contract/migration-status.ts: the one builder of a StorageVersionMigration status (the
 * workflow's, the admission's refusal, the bridge's copies, repairs, refusals and Pending writes), and the one
 * test of a final phase. Pure.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { MigrationPhase } from '../src/api/migration';
import { FINAL_PHASES } from '../src/api/phases';
import { isTerminalPhase, migrationStatus } from '../src/contract/migration-status';
import { zeroCounters } from '../src/api/counters';
import type { MigrationProgress } from '../src/contract/definitions';

const STARTED = Date.UTC(2024, 4, 6, 7, 8, 9);
const ENDED = STARTED + 90_000;

function progress(over: Partial<MigrationProgress> = {}): MigrationProgress {
  return {
    resource: 'widgets.example.com',
    phase: 'Running',
    counters: { ...zeroCounters(), migrated: 7, rewritten: 5, chunks: 2 },
    failures: [{ name: 'w-1', reason: 'denied by a webhook' }],
    continueTokenPresent: true,
    remainingEstimate: 40,
    objectsPerSecond: 3.5,
    startedAt: STARTED,
    runs: 1,
    restarts: 0,
    message: 'going',
    migrationObjects: ['widgets.example.com-1'],
    ...over,
  };
}

void test('migrationStatus: a running migration, every field it knows; no completionTime', () => {
  const p = progress();
  assert.deepEqual(migrationStatus({ phase: p.phase, message: p.message, workflowId: 'migrate/widgets.example.com', progress: p }), {
    phase: 'Running',
    message: 'going',
    workflowId: 'migrate/widgets.example.com',
    progress: { ...p.counters, remainingEstimate: 40 },
    failures: p.failures,
    startTime: '2024-05-06T07:08:09.000Z',
  });
});

void test('migrationStatus: an ended one says when (endedAt), and keeps its estimate and start (a repaired result too)', () => {
  const p = progress({ phase: 'Succeeded' });
  const status = migrationStatus({ phase: 'Succeeded', message: 'done', workflowId: 'w', progress: p, endedAt: ENDED });
  assert.equal(status.completionTime, '2024-05-06T07:09:39.000Z');
  assert.equal(status.startTime, '2024-05-06T07:08:09.000Z');
  assert.equal(status.progress?.remainingEstimate, 40);
});

void test('migrationStatus: no estimate, no remainingEstimate field', () => {
  const status = migrationStatus({ phase: 'Running', progress: progress({ remainingEstimate: undefined }) });
  assert.ok(status.progress && !('remainingEstimate' in status.progress));
});

void test('migrationStatus: without progress (a refusal, a Pending write), only what is known', () => {
  assert.deepEqual(migrationStatus({ phase: 'Pending', message: 'starting' }), { phase: 'Pending', message: 'starting' });
  assert.deepEqual(migrationStatus({ phase: 'Failed', message: 'refused', endedAt: ENDED }), {
    phase: 'Failed',
    message: 'refused',
    completionTime: '2024-05-06T07:09:39.000Z',
  });
  // The admission's refusal: the workflow that refused it.
  assert.deepEqual(Object.keys(migrationStatus({ phase: 'Failed', message: 'm', workflowId: 'w', endedAt: ENDED })), [
    'phase',
    'message',
    'workflowId',
    'completionTime',
  ]);
});

void test('migrationStatus: deterministic (the time is given, never read)', () => {
  const facts = { phase: 'Aborted' as const, message: 'aborted', workflowId: 'w', progress: progress(), endedAt: ENDED };
  assert.deepEqual(migrationStatus(facts), migrationStatus(structuredClone(facts)));
});

void test('isTerminalPhase: Succeeded, Failed and Aborted, and no other phase', () => {
  assert.deepEqual([...FINAL_PHASES].sort(), ['Aborted', 'Failed', 'Succeeded']);
  for (const phase of MigrationPhase.options)
    assert.equal(isTerminalPhase(phase), ['Succeeded', 'Failed', 'Aborted'].includes(phase), phase);
  assert.equal(isTerminalPhase(undefined), false);
});
