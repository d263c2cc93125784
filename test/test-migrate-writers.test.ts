/**
 * The world does not stop for a migration: concurrent writers win, deleted
 * objects stay deleted, and a webhook that refuses some updates makes the run
 * Failed with names and reasons while the rest migrates.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { readStoredObjects } from '../src/dev/etcd-truth';
import { beforeMigration } from '../src/dev/migration-judge';
import { installCrds } from '../src/client/cli-migrate';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, migrationResult, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { denyUpdatesOf } from './helpers/webhook';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

void test('concurrent writers win, deleted objects never come back, nothing is lost', async () => {
  const COUNT = 1500;
  const crd = testCrd(`${uniq('wr')}.svm.test`);
  const ns = uniq('ns');
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: ns });
  await applyCrd(plane.kube, crd, 'v2');
  const prefix = `/registry/${crd.group}/${crd.plural}/${ns}/`;
  const before = await beforeMigration(plane.etcd, prefix);
  assert.equal(before.objects.size, COUNT);
  const url = (i: number) => `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}/w-${String(i).padStart(6, '0')}`;

  const lastWrite = new Map<number, number>();
  const deleted = new Set<number>();
  let stop = false;
  let writes = 0;
  // Each writer owns half of the objects (i % 2 === part): two writers racing on one object would
  // make one's PATCH hit the other's DELETE, a failure of the test, not of the migration.
  const writer = async (seed: number, part: number) => {
    let x = seed;
    while (!stop) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const i = (x % (COUNT / 2)) * 2 + part;
      if (deleted.has(i)) continue;
      if (x % 3 === 0) {
        deleted.add(i);
        await plane.kube.request('DELETE', url(i));
      } else {
        const n = ++writes;
        lastWrite.set(i, n);
        await plane.kube.request('PATCH', url(i), {
          body: JSON.stringify({ spec: { writer: n } }),
          contentType: 'application/merge-patch+json',
        });
      }
    }
  };

  const result = await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 150 });
    await eventually('a first chunk', async () => (await h.progress()).counters.chunks >= 1);
    const writers = [writer(7, 0), writer(99, 1)];
    await eventually('the migration to pass half way', async () => (await h.progress()).counters.chunks >= 7);
    stop = true;
    await Promise.all(writers);
    return migrationResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.ok(deleted.size > 10 && lastWrite.size > 10, `too few concurrent writes (${deleted.size} deletes, ${lastWrite.size} updates)`);

  const stored = await readStoredObjects(plane.etcd, prefix);
  const index = (key: string) => Number(key.split('/w-')[1]);
  const byIndex = new Map(stored.map((o) => [index(o.key), o.object]));
  assert.equal(stored.length, COUNT - deleted.size, 'objects were lost or resurrected');
  for (const i of deleted) assert.ok(!byIndex.has(i), `deleted object ${i} came back`);
  for (const [i, n] of lastWrite) {
    if (deleted.has(i)) continue;
    assert.equal((byIndex.get(i)!.spec as { writer?: number }).writer, n, `object ${i} lost the writer's update`);
  }
  for (const o of stored) assert.equal(o.object.apiVersion, `${crd.group}/v2`, `${o.key} is not at v2`);

  // The counters against etcd. The writers began after the first page, so the pass lists (from its first page's
  // snapshot) every key etcd held before: each is counted once, as migrated, or as a conflict (409: a writer changed
  // it after the list) or not found (404: a writer deleted it), and only an object a writer touched can be either.
  const c = result.counters;
  const json = JSON.stringify(c);
  assert.equal(c.failed, 0, json);
  assert.equal(c.migrated + c.conflicts + c.notFound, before.objects.size, `every key stored before counted once: ${json}`);
  assert.ok(c.notFound <= deleted.size, `${c.notFound} not found, ${deleted.size} deleted: ${json}`);
  const touched = new Set([...lastWrite.keys(), ...deleted]).size;
  assert.ok(
    c.conflicts + c.notFound <= touched,
    `${c.conflicts + c.notFound} conflicts and not found, ${touched} objects written or deleted: ${json}`,
  );
  // An object no writer touched was rewritten by the migrator alone: etcd wrote it after the migration began, and it is
  // among the migrated. Every object was at v1 when listed, so every update that succeeded re-encoded it.
  const untouched = stored.filter((o) => !lastWrite.has(index(o.key)));
  for (const o of untouched) assert.ok(o.modRevision > before.revision, `${o.key} was not rewritten by the migration`);
  assert.ok(c.migrated >= untouched.length, `${untouched.length} objects only the migrator wrote, ${c.migrated} migrated: ${json}`);
  assert.equal(c.rewritten, c.migrated, `every successful update re-encoded an object stored at v1: ${json}`);
  process.stderr.write(
    `writers: ${lastWrite.size} updated, ${deleted.size} deleted; migration: migrated ${c.migrated}, conflicts ${c.conflicts}, notFound ${c.notFound}\n`,
  );
});

void test('a webhook that denies some updates: they are reported by name and reason, the rest migrates, the run ends Failed', async () => {
  const crd = testCrd(`${uniq('wh')}.svm.test`);
  const ns = uniq('ns');
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: ns });
  await createObjects(plane.kube, crd, 'v1', 5, { namespace: ns, prefix: 'deny' });
  await applyCrd(plane.kube, crd, 'v2');
  const unwebhook = await denyUpdatesOf(plane, crd, ns);
  try {
    const deniedBefore = unwebhook.denied;
    const result = await withWorker(plane, async (m) => migrationResult(await m.start(crd.name, { chunkSize: 100 })));
    assert.equal(result.phase, 'Failed');
    assert.equal(result.counters.failed, 5);
    assert.equal(result.counters.migrated, 300);
    assert.deepEqual(result.failures.map((f) => f.name).sort(), [
      'deny-000000',
      'deny-000001',
      'deny-000002',
      'deny-000003',
      'deny-000004',
    ]);
    for (const f of result.failures)
      assert.equal(
        f.reason,
        'HTTP 403 Forbidden: admission webhook "deny.svm.test" denied the request',
        'the webhook named, its message (which could quote a value) not',
      );
    assert.match(
      result.message ?? '',
      /5 object\(s\) of .* could not be updated: .*deny-00000\d \(HTTP 403 Forbidden: admission webhook "deny\.svm\.test" denied the request\)/,
    );
    // Not retried in a loop: the webhook saw one update of each denied object.
    assert.equal(unwebhook.denied - deniedBefore, 5, 'updates the webhook denied during the migration');

    const stored = await readStoredObjects(plane.etcd, `/registry/${crd.group}/${crd.plural}/${ns}/`);
    for (const o of stored) {
      const denied = o.key.includes('/deny-');
      assert.equal(o.object.apiVersion, `${crd.group}/${denied ? 'v1' : 'v2'}`, o.key);
    }
    // The CRD keeps v1 in storedVersions: the migration did not succeed.
    const crdNow = await plane.kube.getJson<{ status: { storedVersions: string[] } }>(
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
    );
    assert.deepEqual(crdNow.status.storedVersions.sort(), ['v1', 'v2']);
  } finally {
    await unwebhook();
  }
});
