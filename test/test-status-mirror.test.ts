/**
 * The StorageVersionMigration status is a mirror, not the migration: while
 * its status writes are denied (an admission policy here), the migration
 * still runs, its data pass is whole (etcd), storedVersions are pruned, and
 * the workflow ends Succeeded in Temporal; once writes are allowed again, the
 * bridge repairs the mirror with the workflow's result.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { svmPath } from '../src/activities';
import type { StorageVersionMigrationStatus } from '../src/api/migration';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { getCrd } from '../src/kube/crds';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const VAP = '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies';
const BINDING = '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings';

/** Denies every status write of migration.k8s.io StorageVersionMigrations whose name starts with prefix. */
async function denyStatusWrites(prefix: string): Promise<() => Promise<void>> {
  const name = uniq('deny-svm-status');
  await plane.kube.request('POST', VAP, {
    body: JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            { apiGroups: ['migration.k8s.io'], apiVersions: ['*'], operations: ['UPDATE'], resources: ['storageversionmigrations/status'] },
          ],
        },
        validations: [{ expression: `!object.metadata.name.startsWith('${prefix}')`, message: 'status writes denied by the test' }],
      },
    }),
  });
  await plane.kube.request('POST', BINDING, {
    body: JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name },
      spec: { policyName: name, validationActions: ['Deny'] },
    }),
  });
  // In force once a probe's status write is refused (policies reach every API server within a moment).
  const probe = `${prefix}-probe`;
  await plane.kube.request('POST', '/apis/migration.k8s.io/v1alpha1/storageversionmigrations', {
    body: JSON.stringify({
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageVersionMigration',
      metadata: { name: probe, annotations: { 'migration.k8s.io/workflow-id': 'probe' } },
      spec: { resource: { resource: 'nothing' } },
    }),
  });
  await eventually(
    'the policy denies status writes',
    async () => {
      for (let i = 0; i < 4; i++) {
        const res = await plane.kube.raw('PATCH', `${svmPath(probe)}/status`, {
          body: JSON.stringify({ status: { message: 'probe' } }),
          contentType: 'application/merge-patch+json',
        });
        if (res.status < 400) return false;
      }
      return true;
    },
    30_000,
  );
  return async () => {
    await plane.kube.request('DELETE', `${BINDING}/${name}`);
    await plane.kube.request('DELETE', `${VAP}/${name}`);
    await plane.kube.request('DELETE', svmPath(probe), { allow: [404] });
  };
}

void test('a status mirror that cannot be written does not fail a finished migration, and is repaired once it can', async () => {
  const crd = testCrd(`${uniq('mir')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 60, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const prefix = uniq('mirror');
  const name = `${prefix}-widgets`;
  const allow = await denyStatusWrites(prefix);
  let allowed = false;
  try {
    await withWorker(
      plane,
      async (m) => {
        await plane.kube.request('POST', '/apis/migration.k8s.io/v1alpha1/storageversionmigrations', {
          body: JSON.stringify({
            apiVersion: 'migration.k8s.io/v1alpha1',
            kind: 'StorageVersionMigration',
            metadata: { name },
            spec: { resource: { group: crd.group, resource: crd.plural } },
          }),
        });
        const handle = await eventually('the bridge started the migration', async () => {
          const h = await m.handle(crd.name);
          await plane.temporal.client.workflow.getHandle(h.workflowId).describe();
          return h;
        });
        const result = await migrationResult(handle);
        assert.equal(result.phase, 'Succeeded', result.message);
        assert.ok(result.migrationObjects.includes(name));
        // The pass was whole and recorded although no status could be written.
        assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
          [`${crd.group}/v2`]: 60,
        });
        assert.deepEqual((await getCrd(plane.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions, ['v2']);
        const stale = await plane.kube.getJson<{ status?: StorageVersionMigrationStatus }>(svmPath(name));
        assert.notEqual(stale.status?.phase, 'Succeeded');
        await allow();
        allowed = true;
        // The bridge's resync (every 30 s) writes the closed workflow's result.
        const repaired = await eventually(
          'the bridge repaired the status',
          async () => {
            const o = await plane.kube.getJson<{ status?: StorageVersionMigrationStatus }>(svmPath(name));
            return o.status?.phase === 'Succeeded' ? o : undefined;
          },
          90_000,
        );
        assert.equal(repaired.status?.progress?.migrated, 60);
        assert.ok(repaired.status?.conditions?.some((c) => c.type === 'Succeeded' && c.status === 'True'));
      },
      { settings: { bridge: true } },
    );
  } finally {
    if (!allowed) await allow();
  }
});
