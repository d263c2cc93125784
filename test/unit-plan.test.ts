/** `svm plan`'s pure rules: what is listed, counts, estimates, verdicts and exit codes, and the table. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  countFromFirstPage,
  crdStoredVersionsLeft,
  estimateSeconds,
  finishPlan,
  planVerdict,
  storageStateReason,
  type CrdInfo,
  type PlanItem,
} from '../src/kube/plan';
import { formatDuration, planTable } from '../src/client/plan-report';
import { unbackedReason } from '../src/kube/drop-storage';
import type { PassRecord } from '../src/contract/pass-record';

const crd = (storage: string, storedVersions?: string[]): CrdInfo => ({
  metadata: { name: 'widgets.example.com' },
  spec: {
    group: 'example.com',
    names: { plural: 'widgets', kind: 'Widget' },
    versions: [
      { name: 'v1', storage: storage === 'v1' },
      { name: 'v2', storage: storage === 'v2' },
    ],
  },
  status: storedVersions ? { storedVersions } : undefined,
});

void test('a CRD is left behind when storedVersions hold any version besides its storage version', () => {
  assert.deepEqual(crdStoredVersionsLeft(crd('v2', ['v1', 'v2'])), { storageVersion: 'v2', storedVersions: ['v1', 'v2'], left: ['v1'] });
  assert.deepEqual(crdStoredVersionsLeft(crd('v2', ['v2'])).left, []);
  assert.deepEqual(crdStoredVersionsLeft(crd('v1', ['v1'])).left, []);
  // Pruned by hand to the old one only (storage moved afterwards): still left behind.
  assert.deepEqual(crdStoredVersionsLeft(crd('v2', ['v1'])).left, ['v1']);
  // No status yet: nothing stored.
  assert.deepEqual(crdStoredVersionsLeft(crd('v1')).left, []);
});

void test('a StorageState asks for a migration unless its persisted hashes are exactly the served one', () => {
  assert.match(storageStateReason(['Unknown'], undefined, 'H2')!, /\[Unknown\]: objects may be stored in any version/);
  assert.match(
    storageStateReason(undefined, undefined, undefined)!,
    /\[Unknown\]/,
    'no status yet means Unknown, as the trigger writes it',
  );
  assert.match(storageStateReason(['H1', 'H2'], 'H2', 'H2')!, /\[H1, H2\]: objects are stored in more than one version/);
  assert.match(storageStateReason(['H1'], 'H1', 'H2')!, /\[H1\], but the API servers now serve H2/);
  // Served hash unknown (servers disagree): the state's own current is the reference.
  assert.match(storageStateReason(['H1'], 'H2', undefined)!, /now serve H2/);
  assert.equal(storageStateReason(['H2'], 'H2', 'H2'), undefined);
  assert.equal(storageStateReason(['H2'], undefined, undefined), undefined);
});

void test('a settled StorageState counts only on a Succeeded pass at its hash in Temporal, or a result from before records', () => {
  const id = 'migrate/widgets.example.com';
  const record = (hash?: string) => ({ ...(hash ? { storageVersionHash: hash } : {}) }) as PassRecord;
  const found = (status: string, phase?: string, rec?: PassRecord) => ({
    found: { workflowId: id, status, ...(phase ? { phase } : {}), ...(rec ? { record: rec } : {}) },
  });
  assert.equal(unbackedReason(found('COMPLETED', 'Succeeded', record('H2')), 'H2'), undefined);
  // From an svm that kept no record, or a record that read no hash: believed, as the trigger believes it.
  assert.equal(unbackedReason(found('COMPLETED', 'Succeeded'), 'H2'), undefined);
  assert.equal(unbackedReason(found('COMPLETED', 'Succeeded', record()), 'H2'), undefined);
  assert.equal(unbackedReason(found('COMPLETED', 'Succeeded', record('H1')), 'H2'), `its last whole pass on record (${id}) was at H1`);
  assert.equal(unbackedReason(found('RUNNING'), 'H2'), `its migration workflow ${id} is running`);
  assert.equal(unbackedReason(found('COMPLETED', 'Aborted'), 'H2'), `its last migration workflow ${id} ended Aborted`);
  assert.equal(unbackedReason(found('TERMINATED'), 'H2'), `its last migration workflow ${id} ended TERMINATED`);
  assert.equal(unbackedReason({ missing: 'Temporal holds none' }, 'H2'), 'Temporal holds none');
});

void test('counts come from the first page: exact when complete, items + remainingItemCount, unknown without it', () => {
  assert.deepEqual(countFromFirstPage({ items: [], metadata: {} }), { objects: 0 });
  assert.deepEqual(countFromFirstPage({ items: [{}] }), { objects: 1 });
  assert.deepEqual(countFromFirstPage({ items: [{}], metadata: { continue: 'abc', remainingItemCount: 1233 } }), { objects: 1234 });
  assert.deepEqual(countFromFirstPage({ items: [{}], metadata: { continue: 'abc' } }), {
    objects: null,
    note: 'the API server gave no remainingItemCount',
  });
  assert.deepEqual(
    countFromFirstPage({ items: [{}], metadata: { continue: '', remainingItemCount: 5 } }),
    { objects: 1 },
    'an empty continue token: the list is complete',
  );
});

void test('estimates are objects / qps; none when the count is unknown or the budget unlimited', () => {
  assert.equal(estimateSeconds(1234, 100), 12.34);
  assert.equal(estimateSeconds(0, 100), 0);
  assert.equal(estimateSeconds(null, 100), null);
  assert.equal(estimateSeconds(1234, 0), null);
  assert.deepEqual(
    ['0.4s', '9.9s', '12s', '59s', '1m00s', '3m20s', '1h00m', '2h05m', '1d00h', '3d04h'],
    [0.4, 9.94, 12.3, 59.4, 60, 200, 3600, 7500, 86_400, 3 * 86_400 + 4 * 3600 + 59].map(formatDuration),
  );
});

void test('exit codes: 0 nothing to migrate, 1 migrations needed, 2 anything blocked', () => {
  assert.deepEqual(planVerdict([]), { verdict: 'NothingToMigrate', exitCode: 0 });
  assert.deepEqual(planVerdict([{ action: 'migrate' }, { action: 'migrate' }]), { verdict: 'MigrationsNeeded', exitCode: 1 });
  assert.deepEqual(planVerdict([{ action: 'migrate' }, { action: 'blocked' }]), { verdict: 'Blocked', exitCode: 2 });
});

const item = (resource: string, over: Partial<PlanItem> = {}): PlanItem => ({
  resource,
  group: resource.split('.').slice(1).join('.'),
  name: resource.split('.')[0]!,
  action: 'migrate',
  sources: ['storedVersions'],
  reasons: ['CRD status.storedVersions [v1, v2] holds v1 besides the storage version v2'],
  storedVersions: ['v1', 'v2'],
  storageVersion: 'v2',
  objects: 1234,
  estimateSeconds: 12.34,
  ...over,
});

void test('the plan: blocked first, totals, and a table a person can read', () => {
  const plan = finishPlan(
    [
      item('widgets.example.com'),
      item('gadgets.example.com', { objects: null, objectsNote: 'the API server gave no remainingItemCount', estimateSeconds: null }),
      item('deviceclasses.resource.k8s.io', {
        action: 'blocked',
        sources: ['disagreement'],
        storedVersions: undefined,
        storageVersion: undefined,
        reasons: ['API servers disagree'],
        blockedBy:
          'API servers disagree on the storage version of deviceclasses.resource.k8s.io: 198.18.2.10:6443=A (resource.k8s.io/v1), 198.18.2.11:6443=B (resource.k8s.io/v1beta2)',
        objects: 7,
        estimateSeconds: 0.07,
      }),
    ],
    100,
    '2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases) by their discovery',
    [],
  );
  assert.equal(plan.verdict, 'Blocked');
  assert.equal(plan.exitCode, 2);
  assert.deepEqual(
    plan.items.map((i) => i.resource),
    ['deviceclasses.resource.k8s.io', 'gadgets.example.com', 'widgets.example.com'],
  );
  assert.deepEqual(plan.totals, { resources: 3, blocked: 1, objects: 1241, objectsUnknown: 1, estimateSeconds: 12.41 });
  assert.equal(
    planTable(plan),
    [
      'RESOURCE                       ACTION   OBJECTS  ESTIMATE  WHY',
      'deviceclasses.resource.k8s.io  blocked        7      0.1s  servers disagree',
      'gadgets.example.com            migrate  unknown         -  storedVersions [v1,v2], storage v2',
      'widgets.example.com            migrate     1234       12s  storedVersions [v1,v2], storage v2',
      '',
      'deviceclasses.resource.k8s.io blocked: API servers disagree on the storage version of deviceclasses.resource.k8s.io: 198.18.2.10:6443=A (resource.k8s.io/v1), 198.18.2.11:6443=B (resource.k8s.io/v1beta2)',
      '',
      'gadgets.example.com objects: the API server gave no remainingItemCount',
      '',
      'agreement checked: 2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases) by their discovery',
      '3 resource(s), at least 1241 objects (1 resource(s) uncounted), about 12s at 100 updates/s: blocked: 1 resource(s) cannot be migrated now (see above) (exit 2)',
      '',
    ].join('\n'),
  );
});

void test('nothing to migrate: one line with the verdict and what was checked', () => {
  const plan = finishPlan([], 100, '2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases) by their discovery', [
    'no StorageState objects',
  ]);
  assert.equal(plan.exitCode, 0);
  assert.equal(
    planTable(plan),
    'note: no StorageState objects\nagreement checked: 2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases) by their discovery\nnothing to migrate (exit 0)\n',
  );
  const unlimited = finishPlan([item('widgets.example.com', { estimateSeconds: null })], 0, 'x', []);
  assert.equal(unlimited.totals.estimateSeconds, null);
  assert.match(planTable(unlimited), /1 resource\(s\), 1234 objects: migrations needed, all can run now \(exit 1\)\n$/);
});
