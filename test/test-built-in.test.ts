/**
 * svm beside the real built-in migrator (kube-controller-manager's
 * storage-version-migrator-controller, GA in 1.37) on the plane:
 *  - defer: svm's delegateToBuiltIn creates a standard object only once the
 *    API servers agree, the built-in migrates it, svm records success; etcd
 *    holds only the new version, and the built-in pruned storedVersions;
 *  - own while the built-in still runs (the misconfiguration): svm leaves
 *    what the built-in wrote first to it and says so (an Event); once the
 *    built-in is off, a new object is taken SVM_OWN_TAKE_AFTER_SECONDS after
 *    its creation (two minutes by default; TAKE_AFTER_SECONDS here), not
 *    before (etcd: its resource's objects not rewritten, the object itself
 *    unwritten, up to that moment) and migrated by svm (etcd at the new
 *    version).
 * kube-controller-manager runs for this file only.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { etcdPrefix, storedVersions } from '../src/dev/etcd-truth';
import { startControllerManager, stopControllerManager } from '../src/dev/plane';
import { getCrd } from '../src/kube/crds';
import { findStandardMigration } from '../src/kube/standard-migrations';
import { deleteBuiltInObjects } from './helpers/parity';
import { WORKFLOW_ID_ANNOTATION } from '../src/kube/migrations';
import { LEFT_TO_BUILT_IN_REASON, WAITING_FOR_BUILT_IN_REASON } from '../src/worker/bridge';
import { resolveResource } from '../src/kube/resolve';
import { startOptions } from '../src/contract/start-options';
import type { delegateToBuiltIn } from '../src/workflows/delegate-to-built-in';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { etcdRevision, rewrittenSince } from './helpers/etcd-interval';
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
    // give each new standard object two minutes for a built-in it believes still runs (for 10 minutes).
    await deleteBuiltInObjects(plane);
  }
  await plane?.close();
});

void test('defer: svm hands the pass to the built-in under agreement and records success only after it; etcd holds only v2', async () => {
  const crd = testCrd(`${uniq('bi')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 50, { namespace: uniq('ns') });
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
      `built-in via svm (defer): 50 objects in ${seconds.toFixed(1)}s; the built-in reported: ${JSON.stringify(obj?.status?.conditions?.map((c) => `${c.type}=${c.status}: ${c.message}`))}`,
    );
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 50,
  });
  // storedVersions are the built-in's to prune (its generation check), and it did.
  await eventually('the built-in pruned storedVersions', async () => {
    const c = await getCrd(plane.kube, { group: crd.group, resource: crd.plural });
    return c.status?.storedVersions?.join() === 'v2';
  });
});

const standardPath = '/apis/storagemigration.k8s.io/v1/storageversionmigrations';

/**
 * Own mode's wait for the built-in here (SVM_OWN_TAKE_AFTER_SECONDS; the product's default is two minutes, which
 * test/unit-own-take-after.test.ts holds): long enough to look at etcd several times before it ends on a loaded
 * machine (the Event comes within seconds of the creation).
 */
const TAKE_AFTER_SECONDS = 30;

async function createStandard(name: string, crd: { group: string; plural: string }): Promise<number> {
  await plane.kube.request('POST', standardPath, {
    body: JSON.stringify({
      apiVersion: 'storagemigration.k8s.io/v1',
      kind: 'StorageVersionMigration',
      metadata: { name },
      spec: { resource: { group: crd.group, resource: crd.plural } },
    }),
  });
  const created = (await findStandardMigration(plane.kube, name))?.metadata.creationTimestamp;
  return Date.parse(created ?? '');
}

async function eventOn(name: string, reason: string): Promise<{ message?: string }> {
  return eventually(`a ${reason} Event on ${name}`, async () => {
    const events = await plane.kube.getJson<{
      items: Array<{ reason?: string; message?: string; involvedObject: { name?: string } }>;
    }>('/api/v1/namespaces/default/events', { fieldSelector: `involvedObject.name=${name}` });
    return events.items.find((e) => e.reason === reason);
  });
}

const statusWriters = (o: Awaited<ReturnType<typeof findStandardMigration>>) =>
  (o?.metadata.managedFields ?? []).filter((f) => f.subresource === 'status').map((f) => ({ manager: f.manager, time: f.time }));

void test('own: an object the built-in wrote first is left to it (an Event says so); once it stops, a new object nobody writes is taken SVM_OWN_TAKE_AFTER_SECONDS after its creation, not before (etcd), and migrated by svm', async () => {
  const builtInCrd = testCrd(`${uniq('both')}.svm.test`);
  const svmCrd = testCrd(`${uniq('own')}.svm.test`);
  for (const crd of [builtInCrd, svmCrd]) {
    await applyCrd(plane.kube, crd, 'v1');
    await createObjects(plane.kube, crd, 'v1', 20, { namespace: uniq('ns') });
    await applyCrd(plane.kube, crd, 'v2');
  }
  // Before svm runs, the built-in acts on one object: the worker finds it at its first list.
  const seed = uniq('seed');
  await createStandard(seed, builtInCrd);
  await eventually('the built-in wrote the first object', async () =>
    statusWriters(await findStandardMigration(plane.kube, seed)).some((w) => w.manager?.startsWith('kube-controller-manager')),
  );
  const lines: string[] = [];
  const logTo = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  const logged = () =>
    lines.map((l) => JSON.parse(l) as { name?: string; writers?: string[]; msg: string; level: string; takeAt?: string });
  const names = [seed];
  await withWorker(
    plane,
    async () => {
      const reported = await eventually(
        'svm reported the object the built-in acts on',
        async () =>
          logged().find(
            (l) => l.name === seed && l.level === 'error' && (l.writers ?? []).some((w) => w.startsWith('kube-controller-manager')),
          ),
        90_000,
      );
      assert.match(reported.msg, /another controller \(kube-controller-manager/);
      // (Most likely finished by the built-in by now: svm writes nothing to a finished object, and posts no Event.)

      // A new object while the built-in runs: svm waits, the built-in writes it first, svm steps back and says so.
      // Of a resource just created: the built-in's garbage-collector cache learns it at its next discovery (every
      // 30 s), so it does not finish the object before svm has looked at it (svm leaves finished objects be).
      const racedCrd = testCrd(`${uniq('new')}.svm.test`);
      await applyCrd(plane.kube, racedCrd, 'v1');
      await createObjects(plane.kube, racedCrd, 'v1', 20, { namespace: uniq('ns') });
      await applyCrd(plane.kube, racedCrd, 'v2');
      const raced = uniq('raced');
      names.push(raced);
      await createStandard(raced, racedCrd);
      const leftEvent = await eventOn(raced, LEFT_TO_BUILT_IN_REASON);
      process.stderr.write(`[built-in] the Event on ${raced}, which the built-in wrote first: ${leftEvent.message}\n`);
      assert.match(
        leftEvent.message ?? '',
        /^svm leaves this object to another controller \(kube-controller-manager.*\), which wrote its status first/,
      );
      await eventually(
        'the built-in finished the object it wrote first',
        async () => {
          const o = await findStandardMigration(plane.kube, raced);
          return o?.status?.conditions?.some((c) => c.type === 'Succeeded' && c.status === 'True');
        },
        120_000,
      );
      const racedObj = await findStandardMigration(plane.kube, raced);
      assert.ok(!statusWriters(racedObj).some((w) => w.manager === 'svm'), 'svm wrote no status to the object the built-in wrote first');
      assert.equal(racedObj?.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], undefined, 'nor attached it to a workflow');
      assert.equal(
        racedObj?.status?.conditions?.find((c) => c.type === 'migration.k8s.io/Progress'),
        undefined,
      );

      // The operator turns the built-in off (kube-controller-manager --controllers=...,-storage-version-migrator-controller).
      await startControllerManager(plane.dir, { builtInMigrator: false }, () => undefined);
      const mine = uniq('own');
      names.push(mine);
      const svmPrefix = etcdPrefix({ group: svmCrd.group, resource: svmCrd.plural, custom: true });
      const revisionBefore = await etcdRevision(plane.etcd);
      const createdAt = await createStandard(mine, svmCrd);
      const created = await findStandardMigration(plane.kube, mine);
      const waiting = await eventOn(mine, WAITING_FOR_BUILT_IN_REASON);
      process.stderr.write(`[built-in] the Event on ${mine}, created with the built-in seen lately: ${waiting.message}\n`);
      const takeAt = Date.parse(/takes this object at (\S+),/.exec(waiting.message ?? '')?.[1] ?? '');
      assert.equal(takeAt, createdAt + TAKE_AFTER_SECONDS * 1000, `svm takes it ${TAKE_AFTER_SECONDS} s after its creation`);
      assert.match(waiting.message ?? '', new RegExp(`, ${TAKE_AFTER_SECONDS} seconds after its creation,`));
      // Not before its time, judged from etcd over the whole wait: every look that ended before takeAt found none
      // of the resource's objects rewritten since before the object's creation (etcd's revisions, not a sample) and
      // the object itself as created (its resourceVersion, etcd's revision of its key: no annotation, no status).
      let looks = 0;
      let lastLookEnded = 0;
      for (;;) {
        const rewritten = await rewrittenSince(plane.etcd, svmPrefix, revisionBefore);
        const obj = await findStandardMigration(plane.kube, mine);
        const v1 = (await storedVersions(plane.etcd, { group: svmCrd.group, resource: svmCrd.plural, custom: true })).byApiVersion;
        const ended = Date.now();
        if (ended >= takeAt) break; // svm may take it from here on: this look judges nothing
        assert.deepEqual(rewritten, [], `svm rewrote objects of ${svmCrd.name} before ${new Date(takeAt).toISOString()}`);
        assert.equal(obj?.metadata.resourceVersion, created?.metadata.resourceVersion, `${mine} written before its time`);
        assert.deepEqual(v1, { [`${svmCrd.group}/v1`]: 20 });
        looks++;
        lastLookEnded = ended;
        if (takeAt - Date.now() < 1500) break;
        await sleep(Math.min(2000, takeAt - Date.now() - 1000));
      }
      assert.ok(looks > 0, `no look at etcd ended before ${new Date(takeAt).toISOString()} (raise TAKE_AFTER_SECONDS on a slower machine)`);
      process.stderr.write(
        `[built-in] ${mine}: ${looks} looks at etcd before takeAt found nothing rewritten, the last ${((takeAt - lastLookEnded) / 1000).toFixed(1)} s before it\n`,
      );
      const done = await eventually(
        `svm took ${mine} and it Succeeded`,
        async () => {
          const o = await findStandardMigration(plane.kube, mine);
          return o?.status?.conditions?.some((c) => c.type === 'Succeeded' && c.status === 'True') ? o : undefined;
        },
        TAKE_AFTER_SECONDS * 1000 + 120_000,
      );
      const writers = statusWriters(done);
      assert.deepEqual([...new Set(writers.map((w) => w.manager))], ['svm'], 'svm alone wrote its status');
      assert.ok(done.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], 'attached to its migration workflow');
      assert.ok(done.status?.conditions?.some((c) => c.type === 'migration.k8s.io/Progress'));
      // Not before its time either by svm's own writes: its first status write comes once the wait passed (managedFields' seconds).
      const firstWrite = Math.min(...writers.map((w) => Date.parse(w.time ?? '')));
      assert.ok(
        firstWrite >= Math.floor(takeAt / 1000) * 1000,
        `svm wrote ${mine} at ${new Date(firstWrite).toISOString()}, before ${new Date(takeAt).toISOString()}`,
      );
      process.stderr.write(
        `[built-in] ${mine}: created ${new Date(createdAt).toISOString()}, Succeeded by svm ${((Date.now() - createdAt) / 1000).toFixed(1)} s after its creation; svm's status writes: ${JSON.stringify(writers)}\n`,
      );
      const took = logged().find((l) => l.name === mine && l.msg === 'StorageVersionMigration attached to its migration workflow');
      assert.ok(took, 'svm logged that it took it');
    },
    { settings: { bridge: true, standardMigrations: 'own', ownTakeAfterSeconds: TAKE_AFTER_SECONDS }, logTo },
  );
  assert.deepEqual((await storedVersions(plane.etcd, { group: svmCrd.group, resource: svmCrd.plural, custom: true })).byApiVersion, {
    [`${svmCrd.group}/v2`]: 20,
  });
  for (const n of names) await plane.kube.raw('DELETE', `${standardPath}/${n}`);
});
