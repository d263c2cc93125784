/**
 * Replay safety: recorded histories of migrations (success, failure, abort,
 * continue-as-new, agreement lost, refused input) are replayed against the
 * current workflow code. A change that would break running migrations
 * (non-determinism) fails here. No server is needed.
 *
 * Record them again with `SVM_RECORD_HISTORIES=1 npm test -- test/test-workflow-migrate.test.ts`
 * (the campaign's: `node --import tsx bench/campaign-histories.ts`) only when a change is meant to be
 * incompatible and is guarded (docs/development.md, "Changing workflow code").
 *
 * Since 0.2.0 (the release boundary, docs/development.md's patch ledger) the set holds only histories of paths a
 * published build takes: those recorded before a patch (`*-before-*`) left it with the patches' old paths.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { bundleOptions } from '../src/worker/workflow-bundle';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type WorkflowBundle } from '@temporalio/worker';

const dir = path.join(__dirname, 'fixtures', 'histories');
const fixtures = fs.existsSync(dir)
  ? fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  : [];

let bundle: WorkflowBundle;
before(async () => {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  bundle = await bundleWorkflowCode(bundleOptions(require.resolve('../src/workflows')));
});

void test('there are recorded histories of every kind of ending', () => {
  const kinds = [
    'a-whole-pass',
    'waiting-for-agreement-continues-as-new',
    'agreement-lost-mid-chunk',
    'abort-mid-chunk',
    'an-activity-that-exhausts',
    'the-resource-not-served',
    'cancelling-the-workflow',
    'a-continue-token-from-outside',
    'a-task-no-worker-starts-in-time',
  ];
  for (const k of kinds)
    assert.ok(
      fixtures.some((f) => f.includes(k)),
      `no recorded history for ${k} in ${dir}`,
    );
  assert.ok(
    fixtures.some((f) => /-1\.json$/.test(f)),
    'at least one history continued as new',
  );
  // The trigger's (test/test-workflow-trigger.test.ts): its decisions over periods, failing periods, continue-as-new.
  const triggerKinds = [
    'trig-a-new-resource',
    'trig-the-storage-version-hash-changes',
    'trig-api-servers-diverge',
    'trig-a-failing-period',
    'trig-the-trigger-away-past-its-staleness',
    'trig-continue-as-new-carries',
  ];
  for (const k of triggerKinds)
    assert.ok(
      fixtures.some((f) => f.startsWith(k)),
      `no recorded history for ${k} in ${dir}`,
    );
  assert.ok(
    fixtures.some((f) => /^trig-.*-1\.json$/.test(f)),
    'at least one trigger history continued as new',
  );
  // The initializer's (test/test-workflow-migrate-all.test.ts): children, a joined migration, a failed one, cancel.
  for (const k of [
    'all-every-resource-migrated-once',
    'all-a-migration-already-running-is-joined',
    'all-a-failed-migration',
    'all-cancelling',
    // The drop check's (test/test-plan.test.ts): a refused input, a report.
    'drop-a-bad-input-is-refused',
    'drop-a-report-of-a-migrated-resource',
    // The managedFields rewrite's (test/test-plan.test.ts): every entry rewritten, nothing left.
    'mf-a-rewrite-of-every-entry',
    'mf-nothing-left-to-rewrite',
    // The deferring mode's (delegateToBuiltIn, recorded from the code of 2026-12-01 before its split into phases): a
    // success, agreement broken or moved, failures, no controller acting, the object deleted, continue-as-new while
    // waiting and while the built-in runs, an abort, signals, a bad input.
    'deleg-success',
    'deleg-broke',
    'deleg-moved',
    'deleg-failed-maxpasses',
    'deleg-no-action',
    'deleg-gone',
    'deleg-continue-as-new-running',
    'deleg-abort-running',
    'deleg-invalid-input',
    // The windowed campaign's (bench/campaign-histories.ts, real runs with test doubles for the activities): a
    // cluster that succeeds, one whose step fails, one in conflict and one away (its member continued as new
    // twice), then an abort; a campaign that continues as new; the first failure stopping a campaign.
    'camp-ok-failed-away-campaign',
    'camp-ok-failed-away-member-ok',
    'camp-ok-failed-away-member-bad',
    'camp-ok-failed-away-member-conflict',
    'camp-ok-failed-away-member-away-2',
    'camp-ok-failed-away-step-ok',
    'camp-ok-failed-away-step-bad',
    'camp-continues-as-new-campaign-1',
    'camp-first-failure-stops-campaign',
  ])
    assert.ok(
      fixtures.some((f) => f.startsWith(k)),
      `no recorded history for ${k} in ${dir}`,
    );
});

void test("campaign members' histories are among them: recorded by the code before trust domains (one namespace), and members in a domain", () => {
  // smember-*: campaignMember as of ab0cb7e, before trust domains (a cluster that answers; one away, continuing as new, then back),
  // on a dev server with stub activities; dmember-*: test/test-fleet-domains.test.ts under SVM_RECORD_HISTORIES=1.
  for (const k of [
    'smember-a-cluster-that-answers',
    'smember-a-cluster-away-then-back-1',
    'dmember-a-campaign-over-two-domains',
    'dmember-a-forged-step',
  ])
    assert.ok(
      fixtures.some((f) => f.startsWith(k)),
      `no recorded member history ${k}* in ${dir}`,
    );
});

void test('every recorded history replays against the current workflow code', async () => {
  // Each replayed under its own workflow ID (a campaign's name is its ID's, and its members' IDs are made of it);
  // the results come in the order given, which names the file.
  const histories = fixtures.map((f) => {
    const { workflowId, history } = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { workflowId: string; history: unknown };
    return { workflowId, history: historyFromJSON(history) };
  });
  const failures: string[] = [];
  let replayed = 0;
  for await (const r of Worker.runReplayHistories({ workflowBundle: bundle, replayName: 'svm-replay' }, histories)) {
    if (r.error) failures.push(`${r.workflowId} (${fixtures[replayed]}): ${r.error.message}`);
    replayed++;
  }
  assert.equal(replayed, histories.length);
  assert.deepEqual(failures, [], `histories that no longer replay:\n${failures.join('\n')}`);
});

/**
 * Every event's time moved away from the first by a factor: what a workflow
 * reads as its clock on replay (each workflow task's start) then differs from
 * what the run saw. Nothing may decide by that clock: a retried workflow
 * task's time is not guaranteed to replay as the run saw it, and a decision
 * that differs on replay wedges the workflow (a non-determinism error).
 * Time-based decisions use clock readings that activities returned, which
 * are recorded in history (Agreement.at, Observation.at).
 */
function stretched(history: { events?: Array<{ eventTime?: string }> }, factor: number): typeof history {
  const events = history.events ?? [];
  const t0 = Date.parse(events[0]?.eventTime ?? '');
  return {
    ...history,
    events: events.map((e) =>
      e.eventTime ? { ...e, eventTime: new Date(t0 + (Date.parse(e.eventTime) - t0) * factor).toISOString() } : e,
    ),
  };
}

/**
 * Histories of the delegation whose no-action bound (`Delegation.noControllerActs`) the run judged by the workflow
 * clock, with no reading in history to judge it by: stretched, the bound falls due at another workflow task. Until
 * 0.2.0 the bound sat behind `patched('delegate-no-action-bound')`, which a replay answers false where the run did
 * not ask it, so stretching could not move the decision; folded, it can. They replay as recorded (the test above).
 * The bound should be judged by a clock reading an activity returns, as Agreement.at is (docs/development.md).
 */
const DELEGATION_CLOCK = ['deleg-no-action-', 'deleg-moved-'];

void test('every recorded history replays the same when its workflow tasks ran at other times (no decision by the workflow clock)', async () => {
  const files = fixtures.filter((f) => !DELEGATION_CLOCK.some((k) => f.startsWith(k)));
  assert.ok(files.length > fixtures.length - 10, `${fixtures.length - files.length} histories left out of the stretched replay`);
  const histories = files.map((f) => {
    const { workflowId, history } = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as {
      workflowId: string;
      history: { events?: Array<{ eventTime?: string }> };
    };
    return { workflowId, history: historyFromJSON(stretched(history, 1000)) };
  });
  assert.ok(
    fixtures.some((f) => f.startsWith('wf-an-agreement-svm-cannot-verify-per-server')),
    'a history whose decisions are timed (an unverified agreement held for a while) is among them',
  );
  const failures: string[] = [];
  let i = 0;
  for await (const r of Worker.runReplayHistories({ workflowBundle: bundle, replayName: 'svm-replay-stretched' }, histories))
    if (r.error) failures.push(`${r.workflowId} (${files[i++]}): ${r.error.message}`);
    else i++;
  assert.deepEqual(failures, [], `histories that replay differently when their workflow tasks ran at other times:\n${failures.join('\n')}`);
});
