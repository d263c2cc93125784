/**
 * Crashes mid-migration, for real: the Temporal dev server is restarted (its
 * SQLite file kept), an API server is killed and restarted. Each crash is
 * shown to fall mid-migration from outside the product: etcd still holds
 * objects at the old version while the process is down (and the API server
 * killed is shown, by its own request counts, to have served the worker's
 * writes). Each time the migration then completes and etcd shows every object
 * migrated. The worker process SIGKILLed mid-migration (twice, before and after
 * a continue-as-new, etcd read while it is down) is test-temporal-server-durability's:
 * it ran here too, three times on the dev server, proving the same.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { MigrationHandle } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, restartTemporal, stopApiserver } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { apiserverSamples } from './helpers/apiserver-metrics';
import { eventually, withWorker } from './helpers/migrate';
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

/**
 * etcd, read while a process is down: objects still at v1, so the crash fell mid-migration (not after its end).
 * Answers how many are left.
 */
async function assertMidMigration(crd: TestCrd, what: string): Promise<number> {
  const left =
    (await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion[`${crd.group}/v1`] ?? 0;
  assert.ok(left > 0, `${what}: etcd already held every object at v2, so the crash did not fall mid-migration`);
  process.stderr.write(`[crash] ${what}: ${left} objects still at v1 in etcd\n`);
  return left;
}

void test('the Temporal dev server is restarted mid-migration: the migration completes, etcd clean', async () => {
  // 10 chunks at 100 objects/s: the server goes down about 3 s in, with some 7 s of the pass left.
  const COUNT = 1000;
  const crd = await crdAtV2WithObjects(COUNT);
  const result = await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 100 });
    await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
    // Judged while the server is down, asserted once it is back (a failure here must not leave the plane without it).
    let whileDown: unknown;
    await restartTemporal(
      plane.dir,
      () => undefined,
      () =>
        assertMidMigration(crd, 'Temporal dev server down').then(
          () => undefined,
          (err: unknown) => void (whileDown = err),
        ),
    );
    if (whileDown) throw whileDown;
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
  const COUNT = 1000;
  const crd = await crdAtV2WithObjects(COUNT);
  const result = await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 100 });
    await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
    // The worker has one address (the plane's, in front of both servers), and its connections may all have gone to
    // one of them: the server killed is the one whose own counts show it served more of the worker's writes of this
    // resource (the test only creates; the migration patches). Fixing server 0 failed when none went there.
    const written = (await apiserverSamples(plane, 'apiserver_request_total', { group: crd.group, resource: crd.plural })).map((own) =>
      own.filter((x) => ['PATCH', 'UPDATE', 'APPLY'].includes(x.labels.verb ?? '')).reduce((a, x) => a + x.value, 0),
    );
    const index = written.indexOf(Math.max(...written));
    const writes = written[index]!;
    assert.ok(writes > 0, `no API server served the worker's writes of ${crd.plural} (${JSON.stringify(written)})`);
    process.stderr.write(
      `[crash] server ${index} served ${writes} of the worker's writes (each server: ${JSON.stringify(written)}); killed\n`,
    );
    await stopApiserver(plane.dir, index, { kill: true });
    // Judged while it is down, asserted once it is back (a failure must not leave the plane without it).
    const whileDown = await assertMidMigration(crd, `API server ${index} killed`).then(
      () => undefined,
      (err: unknown) => err,
    );
    await new Promise((r) => setTimeout(r, 3000));
    await restartApiserver(plane.dir, index, undefined, () => undefined);
    if (whileDown) throw whileDown;
    return migrationResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  await assertAllAtV2(crd, COUNT);
});
