/**
 * Crashes mid-migration, for real: the worker process is SIGKILLed several
 * times, the Temporal dev server is restarted (its SQLite file kept), an API
 * server is killed and restarted. Each time the migration completes and etcd
 * shows every object migrated.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Migrator, type MigrationHandle } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, restartTemporal, stopApiserver } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { eventually, startWorkerProcess, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

async function crdAtV2WithObjects(count: number): Promise<TestCrd> {
  const crd = testCrd(`${uniq('cr')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', count, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  return crd;
}

async function assertAllAtV2(crd: TestCrd, count: number): Promise<void> {
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: count,
  });
}

const chunksDone = async (h: MigrationHandle) => (await h.progress()).counters.chunks;

void test('the worker is SIGKILLed three times mid-migration: the migration completes, etcd shows every object migrated', async () => {
  const COUNT = 3000;
  const crd = await crdAtV2WithObjects(COUNT);
  const taskQueue = uniq('tq');
  const m = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  let worker = startWorkerProcess(plane, taskQueue);
  try {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 250, heartbeatTimeoutSeconds: 5 });
    for (let kill = 1; kill <= 3; kill++) {
      const before = await eventually(
        'the migration to move',
        async () => {
          const c = await chunksDone(h);
          return c >= kill * 3 && c;
        },
        120_000,
      );
      worker.kill('SIGKILL');
      await new Promise((r) => worker.once('exit', r));
      worker = startWorkerProcess(plane, taskQueue);
      // A restart is the new process starting (tsx here), the dead one's sticky task and chunk timing out: give it room.
      await eventually('progress after restart', async () => (await chunksDone(h)) > before, 240_000);
    }
    const result = await migrationResult(h);
    assert.equal(result.phase, 'Succeeded', result.message);
    const c = result.counters;
    assert.ok(c.migrated + c.conflicts >= COUNT, `only ${c.migrated} + ${c.conflicts} of ${COUNT} accounted for`);
    assert.equal(c.notFound + c.failed, 0);
    await assertAllAtV2(crd, COUNT);
  } finally {
    worker.kill('SIGKILL');
    await m.close();
  }
});

void test('the Temporal dev server is restarted mid-migration: the migration completes, etcd clean', async () => {
  const COUNT = 2000;
  const crd = await crdAtV2WithObjects(COUNT);
  const result = await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 250 });
    await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
    await restartTemporal(plane.dir, () => undefined);
    // The old connection may see errors while the server was away: poll until the end.
    return eventually(
      'the migration to end',
      async () => {
        const d = await h.workflow.describe();
        return d.status.name !== 'RUNNING' && migrationResult(h);
      },
      240_000,
    );
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  await assertAllAtV2(crd, COUNT);
});

void test('the API server the worker talks to is killed and restarted mid-migration: the migration completes, etcd clean', async () => {
  const COUNT = 2000;
  const crd = await crdAtV2WithObjects(COUNT);
  const result = await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 250 });
    await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
    await stopApiserver(plane.dir, 0, { kill: true });
    await new Promise((r) => setTimeout(r, 3000));
    await restartApiserver(plane.dir, 0, undefined, () => undefined);
    return migrationResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  await assertAllAtV2(crd, COUNT);
});
