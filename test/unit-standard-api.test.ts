/**
 * The pure parts of the standard-API adapter: the conditions svm writes (as
 * the built-in writes them, plus its Progress condition), who else writes an
 * object's status, what the built-in's conditions say, and the exact-form
 * rule for spec.resource.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { builtInView } from '../src/activities/built-in';
import {
  kubectlName,
  otherStatusWriters,
  PROGRESS_CONDITION,
  lastOtherStatusWrite,
  standardConditions,
  standardName,
  standardRef,
  type StandardCondition,
  type StandardMigration,
} from '../src/api/standard-migration';
import type { DiscoveredResource } from '../src/kube/client';
import { standardState } from '../src/kube/migration-objects';
import { matchExact } from '../src/kube/resolve-exact';

const obj = (conditions?: StandardCondition[], managers: string[] = []) =>
  ({
    metadata: { name: 'm', managedFields: managers.map((manager) => ({ manager, operation: 'Update', subresource: 'status' })) },
    spec: { resource: { group: 'apps', resource: 'deployments' } },
    status: { conditions },
  }) as StandardMigration;

void test('conditions as the built-in writes them, with svm facts in its own condition; unchanged statuses keep their transition time', () => {
  const running = standardConditions(
    undefined,
    { phase: 'Running', progress: { migrated: 10, remainingEstimate: 90 }, workflowId: 'migrate/x' },
    't1',
  );
  assert.deepEqual(
    running.map((c) => [c.type, c.status, c.reason]),
    [
      ['Running', 'True', 'MigrationRunning'],
      [PROGRESS_CONDITION, 'True', 'Running'],
    ],
  );
  assert.match(running[1]!.message!, /migrated 10 .*~90 remaining.*workflow migrate\/x/);
  const later = standardConditions(running, { phase: 'Running', progress: { migrated: 50 } }, 't2');
  assert.equal(later.find((c) => c.type === 'Running')!.lastTransitionTime, 't1');
  const done = standardConditions(later, { phase: 'Succeeded', message: 'migrated every object' }, 't3');
  assert.deepEqual(
    done.map((c) => [c.type, c.status, c.reason]),
    [
      ['Running', 'False', 'MigrationCompleted'],
      [PROGRESS_CONDITION, 'False', 'Succeeded'],
      ['Succeeded', 'True', 'StorageVersionMigrationSucceeded'],
    ],
  );
  assert.equal(done.find((c) => c.type === 'Running')!.lastTransitionTime, 't3');
  assert.equal(
    done.find((c) => c.type === 'Succeeded')!.message,
    'Migration completed',
    "the built-in's words; svm's in its own condition",
  );
  assert.match(done.find((c) => c.type === PROGRESS_CONDITION)!.message!, /migrated every object/);
  // v1beta1 (1.36): the built-in's Succeeded has no message.
  assert.equal(
    standardConditions(undefined, { phase: 'Succeeded' }, 't', undefined, 'v1beta1').find((c) => c.type === 'Succeeded')!.message,
    '',
  );
});

void test("failures in the built-in's words: its reason, its message shapes; svm's reason and words in the Progress condition", () => {
  const missing = standardConditions(
    undefined,
    { phase: 'Failed', message: 'the API servers serve no resource "gizmos" in group "x.io": ...' },
    't',
    'InvalidResource',
  );
  const f = missing.find((c) => c.type === 'Failed')!;
  assert.equal(f.reason, 'StorageVersionMigrationFailed');
  assert.match(f.message!, /^resource does not exist in discovery: the API servers serve no resource "gizmos"/);
  assert.match(missing.find((c) => c.type === PROGRESS_CONDITION)!.message!, /reason InvalidResource/);
  const denied = standardConditions(
    undefined,
    { phase: 'Failed', message: '1 object(s) of w could not be updated: ns/a (denied)', progress: { migrated: 9, failed: 1 } },
    't',
  );
  assert.match(
    denied.find((c) => c.type === 'Failed')!.message!,
    /^1\/10 not yet migrated\. migration encountered unhandled error: 1 object\(s\)/,
  );
  const denied136 = standardConditions(undefined, { phase: 'Failed', message: 'boom', progress: { failed: 1 } }, 't', undefined, 'v1beta1');
  assert.equal(denied136.find((c) => c.type === 'Failed')!.message, 'migration encountered unhandled error: boom');
  assert.equal(standardConditions(undefined, { phase: 'Aborted' }, 't').find((c) => c.type === 'Failed')?.reason, 'Aborted');
  assert.equal(
    standardConditions(undefined, { phase: 'Failed' }, 't').find((c) => c.type === 'Failed')?.reason,
    'StorageVersionMigrationFailed',
  );
});

void test('while svm waits for agreement or is paused, Running is False (the built-in has no such state; Running=True means rewriting)', () => {
  for (const phase of ['Pending', 'WaitingForAgreement', 'Paused'] as const) {
    const c = standardConditions(undefined, { phase, message: 'waiting for agreement: a=v1, b=v2' }, 't');
    const running = c.find((x) => x.type === 'Running')!;
    assert.deepEqual([running.status, running.reason], ['False', phase]);
    assert.equal(running.message, 'waiting for agreement: a=v1, b=v2');
  }
});

void test('a standard entry of the workflow is told from a migration.k8s.io one by its prefix', () => {
  assert.equal(standardName(standardRef('a')), 'a');
  assert.equal(standardName('a'), undefined);
});

void test('who acts on an object: svm (its Progress condition), another controller (Running without it), other status writers', () => {
  assert.equal(standardState(obj(undefined)), 'new');
  assert.equal(standardState(obj([{ type: 'Running', status: 'True', reason: 'MigrationRunning' }])), 'upstreamRunning');
  assert.equal(
    standardState(
      obj([
        { type: 'Running', status: 'True' },
        { type: PROGRESS_CONDITION, status: 'True' },
      ]),
    ),
    'inProgress',
  );
  assert.equal(standardState(obj([{ type: 'Failed', status: 'True' }])), 'finished');
  assert.deepEqual(otherStatusWriters(obj(undefined, ['svm', 'kube-controller-manager', 'kube-controller-manager'])), [
    'kube-controller-manager',
  ]);
  assert.deepEqual(otherStatusWriters(obj(undefined, ['svm'])), []);
});

void test('what the built-in conditions say', () => {
  assert.deepEqual(builtInView(undefined), { state: 'gone' });
  assert.equal(builtInView(obj(undefined)).state, 'pending');
  assert.equal(builtInView(obj([{ type: 'Running', status: 'True', message: 'm' }])).state, 'running');
  assert.deepEqual(
    builtInView(
      obj([
        { type: 'Running', status: 'True' },
        { type: 'Failed', status: 'True', message: 'boom' },
      ]),
    ),
    {
      state: 'failed',
      message: 'boom',
    },
  );
  assert.equal(builtInView(obj([{ type: 'Succeeded', status: 'True' }])).state, 'succeeded');
});

const d = (group: string, name: string, version = 'v1', extra: Partial<DiscoveredResource> = {}): DiscoveredResource =>
  ({
    group,
    name,
    version,
    preferred: true,
    kind: 'K',
    namespaced: true,
    verbs: ['list', 'update'],
    singularName: name.slice(0, -1),
    storageVersionHash: 'h',
    ...extra,
  }) as DiscoveredResource;
const discovered = [
  d('apps', 'deployments', 'v1', { shortNames: ['deploy'], kind: 'Deployment', singularName: 'deployment' }),
  d('apps', 'deployments/scale'),
  d('', 'secrets'),
  d('example.com', 'widgets', 'v2'),
  d('example.com', 'widgets', 'v1', { preferred: false }),
];

void test('spec.resource is taken exactly: plural and group; every other form is refused naming the exact form', () => {
  assert.equal(matchExact({ group: 'apps', resource: 'deployments' }, discovered).name, 'deployments');
  assert.equal(matchExact({ resource: 'secrets' }, discovered).group, '');
  assert.equal(matchExact({ group: 'example.com', resource: 'widgets', version: 'v1' }, discovered).version, 'v1');
  assert.equal(matchExact({ group: 'example.com', resource: 'widgets' }, discovered).version, 'v2');
  const refused: Array<[Parameters<typeof matchExact>[0], RegExp]> = [
    [{ resource: 'deployments' }, /no resource "deployments" in the core group.*did you mean \{group: "apps", resource: "deployments"\}/],
    [{ resource: 'deployments', version: 'apps' }, /core group.*did you mean \{group: "apps", resource: "deployments"\}/],
    [{ group: 'apps', resource: 'deploy' }, /no resource "deploy" in group "apps"/],
    [{ group: 'apps', resource: 'deployment' }, /no resource "deployment"/],
    [{ group: 'apps', resource: 'Deployment' }, /no resource "Deployment"/],
    [{ group: 'apps', resource: 'deployments/scale' }, /subresource.*\{group: "apps", resource: "deployments"\}/],
    [{ group: 'example.com', resource: 'widgets', version: 'v9' }, /not served in version "v9"/],
  ];
  for (const [spec, message] of refused) assert.throws(() => matchExact(spec, discovered), message, JSON.stringify(spec));
});

void test('the CLI names each mirror object with its group', () => {
  assert.equal(kubectlName('widgets-v2'), 'storageversionmigrations.migration.k8s.io/widgets-v2');
  assert.equal(kubectlName(standardRef('w')), 'storageversionmigrations.storagemigration.k8s.io/w');
});

void test('when another controller last wrote the status: its managedFields time (the built-in acting lately, or long ago)', () => {
  const o = {
    metadata: {
      name: 'm',
      managedFields: [
        { manager: 'svm', operation: 'Update', subresource: 'status', time: '2026-11-26T07:00:00Z' },
        { manager: 'kube-controller-manager', operation: 'Update', subresource: 'status', time: '2026-11-26T06:00:00Z' },
        { manager: 'kube-controller-manager', operation: 'Apply', subresource: 'status', time: '2026-11-26T06:30:00Z' },
        { manager: 'kubectl', operation: 'Update', time: '2026-11-26T07:30:00Z' },
      ],
    },
    spec: { resource: { group: 'apps', resource: 'deployments' } },
  } as StandardMigration;
  assert.equal(lastOtherStatusWrite(o), Date.parse('2026-11-26T06:30:00Z'));
  assert.equal(lastOtherStatusWrite({ ...o, metadata: { name: 'm' } }), undefined);
});
