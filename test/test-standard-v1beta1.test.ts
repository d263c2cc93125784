/**
 * On Kubernetes 1.36 the standard API is storagemigration.k8s.io/v1beta1
 * (served with StorageVersionMigrator=true and its runtime-config): svm in
 * own mode migrates an object of it created with kubectl, with the status the
 * built-in writes, so `kubectl wait --for=condition=Succeeded` returns; and
 * the status it leaves is that of the real built-in (1.36's
 * kube-controller-manager) for a success, a webhook denial and a missing
 * resource (test/helpers/parity.ts), as recorded on that release in
 * test/fixtures/built-in-reference.json (test/helpers/built-in-reference.ts;
 * with SVM_RECORD_BUILT_IN=1, `npm run reference:built-in`, this file runs
 * the built-in alone and records it). On the run's previous-release plane
 * (test/helpers/plane.ts previousPlane, test-worker-rights' too; one of this
 * file's own when it runs alone).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { startControllerManager, stopControllerManager } from '../src/dev/plane';
import { compareOutcomes, parityOutcomes } from './helpers/parity';
import { builtInReference, recordedNote, recordReference, recording, type V1beta1Reference } from './helpers/built-in-reference';
import { kubeVersions } from '../src/dev/tools';
import { findStandardMigration, standardVersion } from '../src/kube/standard-migrations';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { withWorker } from './helpers/migrate';
import { previousPlane, removePlanes, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';
import { createStandardAndWait } from './helpers/kubectl';

const quiet = () => undefined;
let reference: V1beta1Reference | undefined;
let plane: TestPlane;
/** The plane's directory when this file brought it up itself (run alone), to take down when it ends. */
let own: string | undefined;
before(async () => {
  // First, before any server starts: a reference recorded on another release fails the file at once, with the command.
  if (!recording) reference = builtInReference('v1beta1');
  // The run's previous-release plane (test-worker-rights' too): two API servers serving v1beta1.
  ({ plane, own } = await previousPlane());
});
after(async () => {
  await plane?.close();
  if (own) await removePlanes(own);
});

void test(`${kubeVersions().previous}: a storagemigration.k8s.io/v1beta1 object created with kubectl is migrated by svm (own mode); kubectl wait returns; etcd holds only v2`, async (t) => {
  if (recording) {
    t.skip('recording the built-in (SVM_RECORD_BUILT_IN=1)');
    return;
  }
  await installCrds(plane.kube);
  assert.equal(await standardVersion(plane.kube, true), 'v1beta1');
  const crd = testCrd(`${uniq('b1')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 50, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('beta');
  await withWorker(
    plane,
    async (m) => {
      await createStandardAndWait(plane, 'storagemigration.k8s.io/v1beta1', name, { group: crd.group, resource: crd.plural });
      await migrationResult(await m.handle(crd.name));
    },
    { settings: { bridge: true, standardMigrations: 'own' } },
  );
  const obj = await findStandardMigration(plane.kube, name);
  assert.equal(obj?.status?.conditions?.find((c) => c.type === 'Succeeded')?.reason, 'StorageVersionMigrationSucceeded');
  assert.match(obj?.status?.resourceVersion ?? '', /^\d+$/);
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 50,
  });
});

void test(`${kubeVersions().previous}: status parity with the real built-in migrator (v1beta1, its recorded reference): a success, a webhook denial, a missing resource; differences only where documented`, async () => {
  const dir = plane.dir;
  if (recording) {
    // The built-in alone, as its live control ran: 1.36's kube-controller-manager with its migrator.
    const builtIn = await parityOutcomes(plane, 'built-in', async (fn) => {
      await startControllerManager(dir, { builtInMigrator: true }, quiet);
      try {
        return await fn();
      } finally {
        await stopControllerManager(dir);
      }
    });
    recordReference('v1beta1', { kubernetes: kubeVersions().previous, recordedAt: new Date().toISOString(), parity: builtIn });
    return;
  }
  const svm = await parityOutcomes(plane, 'svm', (fn) =>
    withWorker(plane, () => fn(), { settings: { bridge: true, standardMigrations: 'own' } }),
  );
  const { undocumented, table } = compareOutcomes(reference!.parity, svm);
  console.log(
    `\n=== status parity on ${kubeVersions().previous} (v1beta1; the built-in ${recordedNote(reference!)}): case | condition | built-in | svm | ===\n${table.join('\n')}\n`,
  );
  assert.deepEqual(undocumented, [], `svm reports what the built-in reports (${recordedNote(reference!)}), but for documented differences`);
});
