/**
 * Unit tests of src/kube/prune.ts (`svm prune`, SVM_PRUNE=operator): a CRD's status.storedVersions is pruned to its
 * storage version only on a record that counts (src/kube/migration-record.ts) of a whole pass, verified, to the
 * version stored now, under the agreement that holds now; every other case is refused with why, and nothing is
 * written. The table and exit codes the CLI prints.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CustomResourceDefinition } from '../src/api/custom-resource-definition';
import type { Agreement } from '../src/contract/agreement';
import type { KubeClient } from '../src/kube/client';
import type { MigrationRecord } from '../src/kube/drop-shared';
import type { RecordLookup } from '../src/kube/drop-storage';
import { pruneCrds, pruneDecision, pruneExitCode } from '../src/kube/prune';
import { pruneTable } from '../src/client/cli-prune';

const token = (crd: string, ids = 'a=1') => `discovery:crd=${crd}:ids=${ids}:eps=a:6443=h2:via=h2`;
const now = (crd = 'v2@2', ids = 'a=1'): Agreement =>
  ({
    agreed: true,
    verified: true,
    encodingVersion: 'v2',
    hash: 'h2',
    token: token(crd, ids),
    checked: '1 of 1',
    source: 'discovery',
  }) as Agreement;

function crd(o: { storedVersions?: string[]; storage?: string; generation?: number; name?: string } = {}): CustomResourceDefinition {
  const storage = o.storage ?? 'v2';
  return {
    metadata: { name: o.name ?? 'widgets.example.com', resourceVersion: '7', generation: o.generation ?? 2 },
    spec: {
      group: 'example.com',
      names: { plural: (o.name ?? 'widgets.example.com').split('.')[0]!, kind: 'Widget' },
      versions: ['v1', 'v2'].map((v) => ({ name: v, served: true, storage: v === storage })),
    },
    status: { storedVersions: o.storedVersions ?? ['v1', 'v2'] },
  } as CustomResourceDefinition;
}

const found = (o: Partial<MigrationRecord> = {}, rec: Partial<NonNullable<MigrationRecord['record']>> = {}): RecordLookup => ({
  found: {
    workflowId: 'migrate/widgets.example.com',
    status: 'COMPLETED',
    phase: 'Succeeded',
    closeTime: '2026-12-07T10:00:00.000Z',
    record: {
      by: 'svm',
      encodingVersion: 'v2',
      verified: true,
      checked: '1 of 1',
      token: token('v2@2'),
      resource: 'widgets.example.com',
      ...rec,
    },
    ...o,
  },
});

void test('pruned on a counted record of a whole pass to the storage version, under the agreement that holds now', () => {
  const d = pruneDecision(crd(), found(), now());
  assert.deepEqual(d.prune && d.to, 'v2');
  assert.match(d.reason, /a whole pass by svm to v2, under the agreement that holds now/);
});

void test('refused, saying why: no record, a record that does not count, not Succeeded, unverified, moved since, another version', () => {
  const cases: Array<[string, ReturnType<typeof pruneDecision>, RegExp]> = [
    [
      'no workflow',
      pruneDecision(crd(), { missing: 'Temporal holds no migration workflow migrate/widgets.example.com' }, now()),
      /Temporal holds no migration workflow/,
    ],
    [
      'a forged record (refused by the record check)',
      pruneDecision(
        crd(),
        found({ refused: "its last run (migrate/widgets.example.com) ran on task queue attacker, not svm: not svm's record" }),
        now(),
      ),
      /ran on task queue attacker/,
    ],
    ['running', pruneDecision(crd(), found({ status: 'RUNNING' }), now()), /is running/],
    ['failed', pruneDecision(crd(), found({ phase: 'Failed' }), now()), /ended Failed.*no whole pass is on record/],
    ['no pass record', pruneDecision(crd(), found({ record: undefined }), now()), /without a record of its pass/],
    ['unverified', pruneDecision(crd(), found({}, { verified: false }), now()), /its agreement was not verified per API server/],
    ['a server restarted since', pruneDecision(crd(), found(), now('v2@2', 'a=2')), /under an agreement that no longer holds/],
    [
      'the CRD changed since (its generation)',
      pruneDecision(crd({ generation: 3 }), found(), now('v2@3')),
      /under an agreement that no longer holds/,
    ],
    ['no agreement now', pruneDecision(crd(), found(), undefined), /no agreement now/],
    [
      'a pass to another version than stored now',
      pruneDecision(crd(), found({}, { encodingVersion: 'v1', token: token('v2@2') }), { ...now(), encodingVersion: 'v2' } as Agreement),
      /its last whole pass was to v1, but the CRD stores v2 now/,
    ],
    [
      'storedVersions without the storage version',
      pruneDecision(crd({ storedVersions: ['v1'] }), found(), now()),
      /does not name the storage version v2/,
    ],
  ];
  for (const [what, d, reason] of cases) {
    assert.equal(d.prune, false, `${what}: pruned`);
    assert.match(d.reason, reason, what);
    assert.equal((d as { nothing: boolean }).nothing, false, what);
  }
  // Nothing to prune: not a refusal.
  const nothing = pruneDecision(crd({ storedVersions: ['v2'] }), found(), now());
  assert.deepEqual(nothing, { prune: false, nothing: true, reason: 'status.storedVersions is [v2] already' });
});

/** A kube client holding CRDs: lists them, answers the prune's read and its status write (recorded). */
function fakeKube(crds: CustomResourceDefinition[]) {
  const writes: Array<{ path: string; body: unknown; resourceVersion?: string }> = [];
  const byName = new Map(crds.map((c) => [c.metadata.name, c]));
  const kube = {
    getJson: async () => ({ items: crds }),
    request: async (_m: string, path: string) => ({ status: 200, body: JSON.stringify(byName.get(path.split('/').pop()!)) }),
    patchStatus: async (path: string, body: unknown, resourceVersion?: string) => {
      writes.push({ path, body, resourceVersion });
    },
  } as unknown as KubeClient;
  return { kube, writes };
}

void test('pruneCrds: --all prunes those with a counted record, refuses the others, leaves those with nothing to prune; exit 1 on a refusal', async () => {
  const { kube, writes } = fakeKube([
    crd(),
    crd({ name: 'gadgets.example.com' }),
    crd({ name: 'done.example.com', storedVersions: ['v2'] }),
  ]);
  const records: Record<string, MigrationRecord | undefined> = {
    widgets: (found() as { found: MigrationRecord }).found,
    gadgets: {
      ...(found() as { found: MigrationRecord }).found,
      record: undefined,
      refused: 'its last run (migrate/gadgets.example.com) is a forgedMigration workflow, not a migration',
    },
  };
  const outcomes = await pruneCrds(kube, 'all', {
    migrationOf: async (r) => records[r.resource],
    agreementOf: async () => now(),
  });
  assert.deepEqual(
    outcomes.map((o) => [o.crd, o.action]),
    [
      ['gadgets.example.com', 'refused'],
      ['widgets.example.com', 'pruned'],
    ],
  );
  assert.match(outcomes[0]!.reason, /is a forgedMigration workflow, not a migration/);
  assert.deepEqual(outcomes[1]!.now, ['v2']);
  // One write: the widgets CRD's status, on exactly the CRD read, storedVersions pruned with the condition.
  assert.equal(writes.length, 1);
  assert.equal(writes[0]!.path, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com');
  assert.equal(writes[0]!.resourceVersion, '7');
  const body = writes[0]!.body as { storedVersions: string[]; conditions: Array<{ type: string; message: string }> };
  assert.deepEqual(body.storedVersions, ['v2']);
  assert.match(body.conditions[0]!.message, /\(svm prune\)$/);
  assert.equal(pruneExitCode(outcomes), 1);
  const printed = pruneTable(outcomes);
  console.log(printed);
  assert.match(printed, /^CRD +ACTION +STORED VERSIONS +WHY\n/);
  assert.match(printed, /\nwidgets\.example\.com +pruned +\[v1, v2\] -> \[v2\] +its last migration workflow/);
  // Named: one that does not exist is refused; nothing to prune is exit 0.
  const named = await pruneCrds(kube, ['nope.example.com', 'done.example.com'], {
    migrationOf: async () => undefined,
    agreementOf: async () => now(),
  });
  assert.deepEqual(
    named.map((o) => [o.crd, o.action, o.reason]),
    [
      ['done.example.com', 'nothing', 'status.storedVersions is [v2] already'],
      ['nope.example.com', 'refused', 'no CustomResourceDefinition nope.example.com'],
    ],
  );
  assert.equal(pruneExitCode(named.slice(0, 1)), 0);
});
