/**
 * Unit tests of src/worker/bridge-decision.ts: the StorageVersionMigration bridge's decision table, one test per
 * row, from the observed situation to the action. Pure.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { decide, OWN_TAKE_AFTER_MS, type BridgeSituation, type WorkflowSeen } from '../src/worker/bridge-decision';
import { zeroCounters } from '../src/api/counters';
import { migrationWorkflowId } from '../src/api/resource';
import { idInCluster } from '../src/api/cluster';
import type { MigrationProgress } from '../src/contract/definitions';
import {
  ABORTED,
  CONTINUE_TOKEN_REFUSED,
  FAILED,
  WORKFLOW_ANNOTATION_REFUSED,
  WORKFLOW_CLOSED,
  WORKFLOW_NOT_FOUND,
  WORKFLOW_TERMINATED,
  WORKFLOW_TIMED_OUT,
} from '../src/contract/reasons';

const WID = migrationWorkflowId({ group: 'example.com', resource: 'widgets' });
const OTHER = migrationWorkflowId({ group: 'example.com', resource: 'gadgets' });

type Obj = BridgeSituation['object'];
const object = (over: Partial<Obj> = {}): Obj => ({
  state: 'new',
  ref: 'w-1',
  resource: { group: 'example.com', resource: 'widgets' },
  otherWriters: [],
  ...over,
});
const NOW = Date.UTC(2026, 11, 7, 12);
const situation = (over: Partial<BridgeSituation> = {}): BridgeSituation => ({
  object: object(),
  api: 'sigs',
  builtInActing: false,
  now: NOW,
  ...over,
});
const attached = (workflow: WorkflowSeen | undefined, over: Partial<Obj> = {}, workflowId = WID): BridgeSituation =>
  situation({ object: object({ state: 'inProgress', workflowId, ...over }), workflow });

function progress(over: Partial<MigrationProgress> = {}): MigrationProgress {
  return {
    resource: 'widgets.example.com',
    phase: 'Running',
    counters: { ...zeroCounters(), migrated: 3 },
    failures: [],
    continueTokenPresent: false,
    remainingEstimate: 9,
    objectsPerSecond: 1,
    startedAt: Date.UTC(2024, 0, 1),
    runs: 1,
    restarts: 0,
    migrationObjects: ['w-0'],
    ...over,
  };
}
const running = (p: MigrationProgress, unlistedForMs = 0): WorkflowSeen => ({
  state: 'running',
  progress: p,
  unlistedForMs,
  graceMs: 10_000,
});

// ------------------------------------------------------------ unattached

void test('finished: nothing, attached or not, whatever its workflow', () => {
  assert.deepEqual(decide(situation({ object: object({ state: 'finished' }) })), { act: 'none' });
  assert.deepEqual(decide(attached(undefined, { state: 'finished' })), { act: 'none' });
  assert.deepEqual(decide(attached({ state: 'missing' }, { state: 'finished' })), { act: 'none' });
});

void test('standard API, marked Running by another controller: left to it', () => {
  assert.deepEqual(decide(situation({ api: 'standard', object: object({ state: 'upstreamRunning' }) })), { act: 'leaveToOtherController' });
});

void test('standard API, not annotated, another controller wrote its status first (only its resourceVersion, or Running): left to it', () => {
  // The built-in's first write is status.resourceVersion (its resource-version controller): no condition yet.
  const first = object({ state: 'new', otherWriters: ['kube-controller-manager'], createdAt: NOW - 5_000 });
  assert.deepEqual(decide(situation({ api: 'standard', object: first })), { act: 'leaveToOtherController' });
  assert.deepEqual(decide(situation({ api: 'standard', object: first, builtInActing: true })), { act: 'leaveToOtherController' });
  // Long after its creation too: whoever wrote first keeps it.
  assert.deepEqual(decide(situation({ api: 'standard', object: { ...first, createdAt: NOW - 3_600_000 } })), {
    act: 'leaveToOtherController',
  });
  // svm's own objects are not another controller's: the sigs API has no other writers to look at.
  assert.deepEqual(decide(situation({ api: 'sigs', object: first })), { act: 'attach', takeover: false });
});

void test('standard API, new, nobody wrote it, the built-in acted lately: taken two minutes after its creation, not before', () => {
  const young = object({ createdAt: NOW - 30_000 });
  assert.equal(OWN_TAKE_AFTER_MS, 120_000);
  assert.deepEqual(decide(situation({ api: 'standard', builtInActing: true, object: young })), {
    act: 'waitForOtherController',
    takeAt: NOW - 30_000 + OWN_TAKE_AFTER_MS,
    afterMs: 90_000,
  });
  // At two minutes (and after): nobody wrote it, so svm takes it.
  for (const age of [OWN_TAKE_AFTER_MS, OWN_TAKE_AFTER_MS + 1, 3_600_000])
    assert.deepEqual(decide(situation({ api: 'standard', builtInActing: true, object: object({ createdAt: NOW - age }) })), {
      act: 'attach',
      takeover: false,
    });
  // The built-in not seen lately: at once.
  assert.deepEqual(decide(situation({ api: 'standard', object: young })), { act: 'attach', takeover: false });
  // On the sigs API the built-in plays no part.
  assert.deepEqual(decide(situation({ api: 'sigs', builtInActing: true, object: young })), { act: 'attach', takeover: false });
  // A spec.continueToken is refused once svm takes it, not before.
  assert.equal(
    decide(situation({ api: 'standard', builtInActing: true, object: { ...young, continueToken: 'x' } })).act,
    'waitForOtherController',
  );
});

void test('new, spec.continueToken set: refused, ContinueTokenRefused', () => {
  const a = decide(situation({ object: object({ continueToken: 'abc' }) }));
  assert.equal(a.act, 'end');
  if (a.act !== 'end') return;
  assert.equal(a.reason, CONTINUE_TOKEN_REFUSED);
  assert.equal(a.facts.phase, 'Failed');
  assert.match(a.facts.message ?? '', /spec\.continueToken is set/);
});

void test('new: attached', () => {
  assert.deepEqual(decide(situation()), { act: 'attach', takeover: false });
  // An empty continue token is a token all the same.
  assert.equal(decide(situation({ object: object({ continueToken: '' }) })).act, 'end');
});

void test('upstreamRunning (sigs): taken over, its continue token ignored', () => {
  assert.deepEqual(decide(situation({ object: object({ state: 'upstreamRunning', continueToken: 'abc' }) })), {
    act: 'attach',
    takeover: true,
  });
});

// ------------------------------------------------------------ attached

void test('annotated, its workflow not looked at yet: look at it', () => {
  assert.deepEqual(decide(attached(undefined)), { act: 'lookAtWorkflow', workflowId: WID });
});

void test('annotated, its workflow does not exist: WorkflowNotFound if svm wrote its status, WorkflowAnnotationRefused if never', () => {
  const written = decide(attached({ state: 'missing' }, { statusFromWorkflow: WID }));
  assert.ok(written.act === 'end' && written.reason === WORKFLOW_NOT_FOUND && /no longer exists in Temporal/.test(written.facts.message!));
  const never = decide(attached({ state: 'missing' }, { state: 'new' }));
  assert.ok(never.act === 'end' && never.reason === WORKFLOW_ANNOTATION_REFUSED && /names a workflow that does not exist/.test(never.log));
});

void test('annotated, its workflow running and listing it: nothing', () => {
  assert.deepEqual(decide(attached(running(progress({ migrationObjects: ['w-1'] })))), { act: 'none' });
});

void test('annotated, one of more objects than the workflow lists: its progress copied, with the reason of a final phase', () => {
  const a = decide(attached(running(progress({ message: 'going' }))));
  assert.equal(a.act, 'copyProgress');
  if (a.act !== 'copyProgress') return;
  assert.equal(a.reason, undefined);
  assert.equal(a.status.phase, 'Running');
  assert.equal(a.status.workflowId, WID);
  assert.equal(a.status.progress?.remainingEstimate, 9);
  assert.equal(a.status.completionTime, undefined);
  assert.match(a.status.message!, /^going \(status copied by svm's bridge/);
  const failed = decide(attached(running(progress({ phase: 'Failed' }))));
  assert.ok(failed.act === 'copyProgress' && failed.reason === FAILED);
  const aborted = decide(attached(running(progress({ phase: 'Aborted' }))));
  assert.ok(aborted.act === 'copyProgress' && aborted.reason === ABORTED);
});

void test('annotated, its workflow running without it, svm wrote its status before: an earlier run, WorkflowClosed', () => {
  const a = decide(attached(running(progress()), { statusFromWorkflow: OTHER }, OTHER));
  assert.ok(a.act === 'end' && a.reason === WORKFLOW_CLOSED && /an earlier run/.test(a.facts.message!));
});

void test('annotated, its workflow running without it, never written: looked at again within the grace, then refused', () => {
  assert.deepEqual(decide(attached(running(progress(), 0), {}, OTHER)), { act: 'recheckLater', afterMs: 3000 });
  assert.deepEqual(decide(attached(running(progress(), 9_999), {}, OTHER)), { act: 'recheckLater', afterMs: 3000 });
  const short = attached({ state: 'running', progress: progress(), unlistedForMs: 0, graceMs: 1000 }, {}, OTHER);
  assert.deepEqual(decide(short), { act: 'recheckLater', afterMs: 1000 });
  const a = decide(attached(running(progress(), 10_000), {}, OTHER));
  assert.ok(a.act === 'end' && a.reason === WORKFLOW_ANNOTATION_REFUSED && /does not list it/.test(a.facts.message!));
});

void test('annotated, its workflow closed, the object finished or gone when read again: nothing', () => {
  assert.deepEqual(decide(attached({ state: 'closed', status: 'COMPLETED', objectFinished: true })), { act: 'none' });
});

void test('annotated, its workflow closed with a result that lists it (or it follows): the result, its progress kept', () => {
  const result = progress({ phase: 'Succeeded', message: 'migrated every object', migrationObjects: ['w-1'] });
  const a = decide(attached({ state: 'closed', status: 'COMPLETED', objectFinished: false, result }));
  assert.equal(a.act, 'end');
  if (a.act !== 'end') return;
  assert.deepEqual(a.facts, { phase: 'Succeeded', message: 'migrated every object', workflowId: WID, progress: result });
  assert.equal(a.reason, FAILED); // as before: a Succeeded condition takes no reason
  const aborted = decide(attached({ state: 'closed', status: 'COMPLETED', objectFinished: false, result: progress({ phase: 'Aborted' }) }));
  assert.ok(aborted.act === 'end' && aborted.reason === ABORTED && aborted.facts.message === 'the migration ended Aborted');
  // Not listed, but its own resource's workflow: a follower gets the result too.
  const follower = decide(
    attached({ state: 'closed', status: 'COMPLETED', objectFinished: false, result: progress({ phase: 'Succeeded' }) }),
  );
  assert.ok(follower.act === 'end' && follower.facts.phase === 'Succeeded' && follower.facts.message === 'the migration succeeded');
});

void test('annotated, its workflow closed with a result that does not list it: WorkflowClosed if written before, else refused', () => {
  const result = progress({ phase: 'Succeeded' });
  const earlier = decide(
    attached({ state: 'closed', status: 'COMPLETED', objectFinished: false, result }, { statusFromWorkflow: OTHER }, OTHER),
  );
  assert.ok(earlier.act === 'end' && earlier.reason === WORKFLOW_CLOSED && earlier.facts.phase === 'Failed');
  assert.match(earlier.facts.message!, /its latest run \(Succeeded\) did not include this object/);
  const never = decide(attached({ state: 'closed', status: 'COMPLETED', objectFinished: false, result }, {}, OTHER));
  assert.ok(never.act === 'end' && never.reason === WORKFLOW_ANNOTATION_REFUSED && /completed without it/.test(never.facts.message!));
});

void test('annotated, its workflow closed without a result: Failed, the reason it closed', () => {
  const a = decide(attached({ state: 'closed', status: 'TERMINATED', objectFinished: false, cause: 'reason: by hand' }));
  assert.ok(a.act === 'end' && a.reason === WORKFLOW_TERMINATED);
  assert.equal(a.facts.message, `the migration workflow ${WID} was terminated (reason: by hand) without recording a result`);
  assert.match(a.log, /^repairing the status of a StorageVersionMigration: /);
  const timedOut = decide(attached({ state: 'closed', status: 'TIMED_OUT', objectFinished: false, cause: 'x' }));
  assert.ok(timedOut.act === 'end' && timedOut.reason === WORKFLOW_TIMED_OUT);
  const unknown = decide(attached({ state: 'closed', status: 'PAUSED', objectFinished: false, cause: 'x' }));
  assert.ok(unknown.act === 'end' && unknown.reason === WORKFLOW_CLOSED && /closed \(PAUSED\)/.test(unknown.facts.message!));
});

void test('a named cluster: the follower test reads the workflow ID in the cluster', () => {
  const inEast = idInCluster(migrationWorkflowId({ group: 'example.com', resource: 'widgets' }), 'east');
  const s = attached(running(progress()), {}, inEast);
  assert.equal(decide({ ...s, cluster: 'east' }).act, 'copyProgress');
  assert.equal(decide(s).act, 'recheckLater');
});
