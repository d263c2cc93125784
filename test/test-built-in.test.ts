/**
 * svm beside the real built-in migrator (kube-controller-manager's
 * storage-version-migrator-controller, GA in 1.37) on the plane:
 *  - defer: svm's delegateToBuiltIn creates a standard object only once the
 *    API servers agree, the built-in migrates it, svm records success; etcd
 *    holds only the new version, and the built-in pruned storedVersions;
 *  - own while the built-in still runs (the misconfiguration): svm reports
 *    the object both act on.
 * kube-controller-manager runs for this file only.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { startControllerManager, stopControllerManager } from '../src/dev/plane';
import { getCrd } from '../src/kube/crds';
import { findStandardMigration } from '../src/kube/standard-migrations';
import { deleteBuiltInObjects } from './helpers/parity';
import { WORKFLOW_ID_ANNOTATION } from '../src/kube/migrations';
import { LEFT_TO_BUILT_IN_REASON } from '../src/worker/bridge';
import { resolveResource } from '../src/kube/resolve';
import { startOptions } from '../src/contract/start-options';
import type { delegateToBuiltIn } from '../src/workflows/delegate-to-built-in';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker, workflowResult } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
  await startControllerManager(plane.dir, { builtInMigrator: true }, () => undefined);
});
after(async () => {
  if (plane) {
    await stopControllerManager(plane.dir);
    // The built-in's objects go with it: an own-mode svm of a later file would see its recent status writes and
    // rightly leave new standard objects to a built-in it believes still runs (for 10 minutes).
    await deleteBuiltInObjects(plane);
  }
  await plane?.close();
});

void test('defer: svm hands the pass to the built-in under agreement and records success only after it; etcd holds only v2', async () => {
  const crd = testCrd(`${uniq('bi')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 200, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const ref = await resolveResource(plane.kube, crd.name);
  await withWorker(plane, async (_m, taskQueue) => {
    const started = Date.now();
    const handle = await plane.temporal.client.workflow.start<typeof delegateToBuiltIn>('delegateToBuiltIn', {
      ...startOptions(ref, taskQueue),
      args: [{ resource: ref, pollSeconds: 1 }],
    });
    const result = await workflowResult(handle);
    const seconds = (Date.now() - started) / 1000;
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.match(result.message ?? '', /the built-in migrator migrated .* agreed on v2 from its creation to its success/);
    const [entry] = result.migrationObjects;
    const name = entry!.replace('storagemigration.k8s.io/', '');
    const obj = await findStandardMigration(plane.kube, name);
    // The built-in's own conditions: svm did not write this object's status.
    assert.equal(obj?.status?.conditions?.find((c) => c.type === 'Succeeded')?.status, 'True');
    assert.equal(
      obj?.status?.conditions?.find((c) => c.type === 'migration.k8s.io/Progress'),
      undefined,
    );
    assert.ok((obj?.metadata.managedFields ?? []).every((f) => f.subresource !== 'status' || f.manager !== 'svm'));
    console.log(
      `built-in via svm (defer): 200 objects in ${seconds.toFixed(1)}s; the built-in reported: ${JSON.stringify(obj?.status?.conditions?.map((c) => `${c.type}=${c.status}: ${c.message}`))}`,
    );
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 200,
  });
  // storedVersions are the built-in's to prune (its generation check), and it did.
  await eventually('the built-in pruned storedVersions', async () => {
    const c = await getCrd(plane.kube, { group: crd.group, resource: crd.plural });
    return c.status?.storedVersions?.join() === 'v2';
  });
});

void test('own while the built-in still runs: svm reports the standard object another controller acts on, then takes no new one', async () => {
  const crd = testCrd(`${uniq('both')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 20, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('both');
  const lines: string[] = [];
  const logTo = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  await withWorker(
    plane,
    async () => {
      await plane.kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
        body: JSON.stringify({
          apiVersion: 'storagemigration.k8s.io/v1',
          kind: 'StorageVersionMigration',
          metadata: { name },
          spec: { resource: { group: crd.group, resource: crd.plural } },
        }),
      });
      const reported = await eventually(
        'svm reported the object',
        async () =>
          lines
            .map((l) => JSON.parse(l) as { name?: string; writers?: string[]; msg: string; level: string })
            .find((l) => l.name === name && l.level === 'error' && (l.writers ?? []).some((w) => w.startsWith('kube-controller-manager'))),
        90_000,
      );
      assert.match(reported.msg, /another controller \(kube-controller-manager/);
      // Having seen the built-in act, svm takes no new standard object: it says why, and writes nothing to it.
      const next = uniq('after-built-in');
      await plane.kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
        body: JSON.stringify({
          apiVersion: 'storagemigration.k8s.io/v1',
          kind: 'StorageVersionMigration',
          metadata: { name: next },
          spec: { resource: { group: crd.group, resource: crd.plural } },
        }),
      });
      const left = await eventually(
        'svm said it leaves the new object to the built-in',
        async () =>
          lines
            .map((l) => JSON.parse(l) as { name?: string; msg: string; level: string })
            // Said either way: the built-in may already have marked it Running when svm looks (then it is its).
            .find(
              (l) =>
                l.name === next &&
                (/^not taking StorageVersionMigration .*the built-in migrator runs in this cluster/.test(l.msg) ||
                  /another controller .* runs StorageVersionMigration/.test(l.msg)),
            ),
        60_000,
      );
      process.stderr.write(`[built-in] svm on a new object once the built-in acted: ${left.msg.slice(0, 160)}\n`);
      if (/^not taking/.test(left.msg)) {
        // Said on the object too, where `kubectl describe` shows it, with when svm takes it.
        const event = await eventually('an Event on the object left to the built-in', async () => {
          const events = await plane.kube.getJson<{
            items: Array<{ reason?: string; message?: string; involvedObject: { name?: string } }>;
          }>('/api/v1/namespaces/default/events', { fieldSelector: `involvedObject.name=${next}` });
          return events.items.find((e) => e.reason === LEFT_TO_BUILT_IN_REASON);
        });
        assert.match(
          event.message ?? '',
          /^svm leaves this object to the built-in migrator, which acted on StorageVersionMigration .* at .*: svm \(SVM_STANDARD_MIGRATIONS=own\) takes no new object while another controller acts, and takes this one after \d{4}-\d\d-\d\dT.* if no controller has started it by then$/,
        );
        process.stderr.write(`[built-in] the Event on ${next}: ${event.message}\n`);
      }
      const obj = await findStandardMigration(plane.kube, next);
      // (Its creation here is svm's too: the test's client names itself svm. Its status is what svm would write.)
      assert.ok(
        !(obj?.metadata.managedFields ?? []).some((f) => f.manager === 'svm' && f.subresource === 'status'),
        'svm wrote no status to the object it left to the built-in',
      );
      assert.equal(obj?.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], undefined, 'nor attached it to a workflow');
      // Not left Running behind by a built-in that stops with this file.
      for (const n of [name, next]) await plane.kube.raw('DELETE', `/apis/storagemigration.k8s.io/v1/storageversionmigrations/${n}`);
    },
    { settings: { bridge: true, standardMigrations: 'own' }, logTo },
  );
});
