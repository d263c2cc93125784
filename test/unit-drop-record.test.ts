/**
 * Unit tests of src/kube/migration-record.ts: the one check a run at a migration's ID passes before its result
 * counts (the drop check, the trigger, `svm plan`, migrateAll's join and a campaign's step all read records through
 * it). Each forged record someone with the Temporal namespace's credentials can make is refused, the reason saying
 * why; an honest record counts, and so does a single-cluster install's record from before records named a uid or a
 * resource. Then the reader over a fake Temporal client: what a refused record becomes for its readers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { loadDataConverter } from '@temporalio/common/lib/internal-non-workflow';
import { zeroCounters } from '../src/api/counters';
import { Placement } from '../src/contract/placement';
import type { PassRecord } from '../src/contract/pass-record';
import { checkRecord, migrationRecords, type MigrationRun, type RecordExpectation } from '../src/kube/migration-record';
import { migrationCheck } from '../src/kube/drop-storage';
import type { Agreement } from '../src/contract/agreement';

const WIDGETS = { group: 'example.com', resource: 'widgets' };
const record: PassRecord = {
  by: 'svm',
  encodingVersion: 'v2',
  storageVersionHash: 'h2',
  verified: true,
  checked: '2 of 2 API servers',
  token: 't',
  clusterUid: 'u-east',
  resource: 'widgets.example.com',
};
const east: RecordExpectation = { resource: WIDGETS, placement: Placement.of('svm', { name: 'east', uid: 'u-east' }) };
const honest: MigrationRun = {
  workflowId: 'migrate/east/widgets.example.com',
  type: 'migrateResource',
  taskQueue: 'svm/cluster/east',
  input: {
    resource: { ...WIDGETS, version: 'v2', kind: 'Widget', namespaced: true, storageVersionHash: 'h2', custom: true },
    cluster: { name: 'east', uid: 'u-east' },
  },
  result: { phase: 'Succeeded', counters: zeroCounters(), message: 'migrated', record, migrationObjects: [] },
};
const why = (run: MigrationRun, expect = east) => {
  const c = checkRecord(run, expect);
  return c.counts ? undefined : c.why;
};

void test("an honest record counts: a migration of the resource, on the cluster's queue, started in the cluster, its result a migration's", () => {
  const c = checkRecord(honest, east);
  assert.ok(c.counts);
  assert.equal(c.verdict.record?.clusterUid, 'u-east');
  // delegateToBuiltIn's (the deferring mode) likewise; the minimal start's plural name, resolved by the workflow.
  assert.equal(why({ ...honest, type: 'delegateToBuiltIn' }), undefined);
  assert.equal(why({ ...honest, input: { resource: 'widgets.example.com', cluster: { name: 'east' } } }), undefined);
  assert.equal(why({ ...honest, input: { resource: 'widgets', group: 'example.com', cluster: { name: 'east' } } }), undefined);
  assert.equal(why({ ...honest, input: { resource: 'widgets', cluster: { name: 'east' } } }), undefined);
  // A Failed or Aborted migration's result passes the check too: its phase says no pass, the check does not.
  assert.equal(why({ ...honest, result: { phase: 'Aborted', counters: zeroCounters() } }), undefined);
});

void test('a single-cluster install: its records count on its base queue, those from before records carried a uid or the resource too', () => {
  const single: RecordExpectation = { resource: WIDGETS, placement: Placement.of('svm') };
  const { clusterUid: _u, resource: _r, ...old } = record;
  const run: MigrationRun = {
    ...honest,
    workflowId: 'migrate/widgets.example.com',
    taskQueue: 'svm',
    input: { resource: 'widgets.example.com' },
    result: { phase: 'Succeeded', counters: zeroCounters(), record: old },
  };
  const c = checkRecord(run, single);
  assert.ok(c.counts);
  assert.equal(c.verdict.record?.token, 't');
  // A result from before records were kept at all: it counts as a result (the drop check says Unknown, no record).
  assert.equal(why({ ...run, result: { phase: 'Succeeded', counters: zeroCounters() } }, single), undefined);
  // The install's placement expects its base queue, and no cluster.
  assert.match(why({ ...run, taskQueue: 'svm/cluster/east' }, single)!, /ran on task queue svm\/cluster\/east, not svm /);
});

void test('each forged record is refused, saying why', () => {
  const cases: Array<[string, MigrationRun, RegExp, RecordExpectation?]> = [
    ['another workflow type', { ...honest, type: 'forgedMigration' }, /is a forgedMigration workflow, not a migration/],
    [
      'another task queue',
      { ...honest, taskQueue: 'attacker' },
      /ran on task queue attacker, not svm\/cluster\/east \(the one svm's workers of this cluster poll\)/,
    ],
    ['no input', { ...honest, input: undefined }, /was started without a migration input/],
    [
      'an input naming no resource',
      { ...honest, input: { cluster: { name: 'east' } } },
      /was started with an input that names no resource/,
    ],
    [
      'an input naming another resource',
      { ...honest, input: { resource: 'gadgets.example.com', cluster: { name: 'east' } } },
      /was started for gadgets\.example\.com/,
    ],
    [
      'an input naming the resource of another group',
      { ...honest, input: { resource: 'widgets', group: 'other.io', cluster: { name: 'east' } } },
      /was started for widgets\.other\.io/,
    ],
    [
      'an input naming another cluster',
      { ...honest, input: { resource: 'widgets.example.com', cluster: { name: 'west' } } },
      /was started in cluster west/,
    ],
    ['an input naming no cluster', { ...honest, input: { resource: 'widgets.example.com' } }, /was started in no cluster/],
    [
      'an input naming another uid',
      { ...honest, input: { resource: 'widgets.example.com', cluster: { name: 'east', uid: 'u-west' } } },
      /was started against kube-system uid u-west, but the cluster is pinned to u-east: another cluster's verdict does not count/,
    ],
    [
      'a single-cluster install, an input naming a cluster',
      { ...honest, taskQueue: 'svm' },
      /was started in cluster east, and this install names none/,
      { resource: WIDGETS, placement: Placement.of('svm') },
    ],
    ['a result that is no object', { ...honest, result: 'Ready' }, /ended with a result that is not a migration's \(result: /],
    [
      'a result without counters',
      { ...honest, result: { phase: 'Succeeded', record } },
      /ended with a result that is not a migration's \(counters: /,
    ],
    [
      'a result with another phase',
      { ...honest, result: { phase: 'Ready', counters: zeroCounters(), record } },
      /ended with a result that is not a migration's \(phase: /,
    ],
    [
      'a pass record that is not one',
      { ...honest, result: { phase: 'Succeeded', counters: zeroCounters(), record: { by: 'svm' } } },
      /ended with a result that is not a migration's \(record\.encodingVersion: /,
    ],
    [
      'a pass record of another resource',
      { ...honest, result: { phase: 'Succeeded', counters: zeroCounters(), record: { ...record, resource: 'gadgets.example.com' } } },
      /recorded a pass of gadgets\.example\.com/,
    ],
    [
      'a pass record of another uid',
      { ...honest, result: { phase: 'Succeeded', counters: zeroCounters(), record: { ...record, clusterUid: 'u-west' } } },
      /was made against kube-system uid u-west, but the cluster is pinned to u-east: another cluster's verdict does not count/,
    ],
    [
      'a named cluster, a pass record naming no uid',
      { ...honest, result: { phase: 'Succeeded', counters: zeroCounters(), record: { ...record, clusterUid: undefined } } },
      /names no cluster uid \(made before svm recorded one\), so it cannot be shown to be this cluster's/,
    ],
  ];
  for (const [what, run, reason, expect] of cases) {
    const c = checkRecord(run, expect ?? east);
    assert.equal(c.counts, false, `${what}: counted`);
    assert.match((c as { why: string }).why, reason, what);
  }
  // A start input against another uid with a pass record of that uid: named by the pass record, as issue 58 words it.
  assert.match(
    why({
      ...honest,
      input: { resource: 'widgets.example.com', cluster: { name: 'east', uid: 'u-west' } },
      result: { phase: 'Succeeded', counters: zeroCounters(), record: { ...record, clusterUid: 'u-west' } },
    })!,
    /^its last whole pass \(migrate\/east\/widgets\.example\.com\) was made against kube-system uid u-west, but the cluster is pinned to u-east: another cluster's verdict does not count$/,
  );
  // Each refusal (but the uid's, which names the pass) names the run and what it is not.
  assert.match(
    why({ ...honest, type: 'x' })!,
    /^its last run \(migrate\/east\/widgets\.example\.com\) .*: not svm's record of widgets\.example\.com in cluster east, so it does not count$/,
  );
});

/** A Temporal client holding one run at each ID given: its description, its first history event, its result. */
function fakeTemporal(runs: Record<string, MigrationRun & { status?: string }>): Client {
  const converter = loadDataConverter();
  const notFound = () => Object.assign(new Error('not found'), { name: 'WorkflowNotFoundError' });
  return {
    options: { namespace: 'default', loadedDataConverter: converter },
    workflow: {
      getHandle: (id: string) => ({
        describe: async () => {
          const r = runs[id];
          if (!r) throw notFound();
          return { runId: 'r1', type: r.type, taskQueue: r.taskQueue, status: { name: r.status ?? 'COMPLETED' } };
        },
        result: async () => runs[id]?.result,
      }),
    },
    workflowService: {
      getWorkflowExecutionHistory: async ({ execution }: { execution: { workflowId: string } }) => ({
        history: {
          events: [
            {
              workflowExecutionStartedEventAttributes: {
                input: { payloads: [defaultPayloadConverter.toPayload(runs[execution.workflowId]!.input)] },
              },
            },
          ],
        },
      }),
    },
  } as unknown as Client;
}

void test("the reader: a refused run keeps its phase, loses its record, and says why; the drop check's migration verdict is Unknown", async () => {
  const placement = Placement.of('svm', { name: 'east', uid: 'u-east' });
  const read = migrationRecords(
    fakeTemporal({
      'migrate/east/widgets.example.com': honest,
      'migrate/east/gadgets.example.com': { ...honest, workflowId: 'migrate/east/gadgets.example.com', taskQueue: 'attacker' },
    }),
    placement,
  );
  const counted = await read(WIDGETS);
  assert.equal(counted?.phase, 'Succeeded');
  assert.equal(counted?.record?.token, 't');
  assert.equal(counted?.refused, undefined);
  const forged = await read({ group: 'example.com', resource: 'gadgets' });
  assert.equal(forged?.phase, 'Succeeded');
  assert.equal(forged?.record, undefined);
  assert.match(forged?.refused ?? '', /ran on task queue attacker, not svm\/cluster\/east/);
  assert.equal(await read({ group: 'example.com', resource: 'sprockets' }), undefined);
  const now = { agreed: true, verified: true, checked: '2 of 2', token: 't', encodingVersion: 'v2', source: 'discovery' } as Agreement;
  const target = { groupVersion: 'example.com/v1', group: 'example.com', version: 'v1' } as Parameters<typeof migrationCheck>[0];
  const m = migrationCheck(target, 'gadgets.example.com', { storageVersion: 'example.com/v2', agreement: now }, { found: forged! });
  assert.equal(m.verdict, 'Unknown');
  assert.match(m.reason, /not svm's record of gadgets\.example\.com in cluster east, so it does not count/);
  assert.equal(
    migrationCheck(target, 'widgets.example.com', { storageVersion: 'example.com/v2', agreement: now }, { found: counted! }).verdict,
    'Ready',
  );
});
