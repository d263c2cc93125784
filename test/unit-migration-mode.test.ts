/**
 * Unit tests of src/workflows/migration-mode.ts: where one run of migrateResource is, as its steering messages see
 * it, and how each message moves it. Pure: no workflow, no server.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { abortAsked, end, firstMode, pauseHeld, recordFailed, startRecording, withAbort, withPause } from '../src/workflows/migration-mode';

void test('a run starts running, or paused when the run before it was', () => {
  assert.deepEqual(firstMode(false), { is: 'running' });
  assert.deepEqual(firstMode(true), { is: 'paused' });
});

void test('pause and resume move between running and paused', () => {
  const paused = withPause(firstMode(false), true);
  assert.deepEqual(paused, { is: 'paused' });
  assert.equal(pauseHeld(paused), true);
  assert.deepEqual(withPause(paused, true), { is: 'paused' }, 'a second pause (a signal) changes nothing');
  assert.deepEqual(withPause(paused, false), { is: 'running' });
  assert.deepEqual(withPause(firstMode(false), false), { is: 'running' });
});

void test('an abort keeps its reason and whether a pause holds; a later abort replaces the reason', () => {
  const aborting = withAbort(firstMode(true), 'rollback');
  assert.deepEqual(aborting, { is: 'aborting', reason: 'rollback', paused: true });
  assert.equal(abortAsked(aborting), 'rollback');
  assert.equal(pauseHeld(aborting), true);
  assert.deepEqual(withPause(aborting, false), { is: 'aborting', reason: 'rollback', paused: false }, 'a resume signal: still aborting');
  assert.deepEqual(withAbort(aborting, 'again'), { is: 'aborting', reason: 'again', paused: true });
  assert.deepEqual(withAbort(firstMode(false), 'x'), { is: 'aborting', reason: 'x', paused: false });
});

void test('recording: signals move the mode under it, which a failed record returns to', () => {
  const recording = startRecording(firstMode(false));
  assert.deepEqual(recording, { is: 'recording', then: { is: 'running' } });
  assert.equal(abortAsked(recording), undefined);
  const signalled = withAbort(withPause(recording, true), 'late');
  assert.deepEqual(signalled, { is: 'recording', then: { is: 'aborting', reason: 'late', paused: true } });
  assert.equal(abortAsked(signalled), 'late');
  assert.equal(pauseHeld(signalled), true);
  assert.deepEqual(recordFailed(signalled), { is: 'aborting', reason: 'late', paused: true });
  assert.deepEqual(recordFailed(firstMode(false)), { is: 'running' }, 'not recording: unchanged');
});

void test('ended: no message moves it', () => {
  const ended = end();
  assert.deepEqual(withPause(ended, true), { is: 'ended' });
  assert.deepEqual(withAbort(ended, 'late'), { is: 'ended' });
  assert.deepEqual(startRecording(ended), { is: 'ended' });
  assert.equal(pauseHeld(ended), false);
  assert.equal(abortAsked(ended), undefined);
});
