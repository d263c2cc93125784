/**
 * kubectl users: `kubectl create` a StorageVersionMigration, `kubectl wait`
 * for it, delete one to abort. Runs the real kubectl built by `npm run tools`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { svmPath } from '../src/activities';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

const run = promisify(execFile);
let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const kubectl = (args: string[], input?: string) => {
  const p = run(plane.env.KUBECTL!, ['--kubeconfig', plane.env.KUBECONFIG!, ...args], { timeout: 120_000 });
  if (input !== undefined) {
    p.child.stdin!.end(input);
  }
  return p;
};

const manifest = (name: string, group: string, resource: string) =>
  JSON.stringify({ apiVersion: 'migration.k8s.io/v1alpha1', kind: 'StorageVersionMigration', metadata: { name }, spec: { resource: { group, version: 'v2', resource } } });

void test('kubectl create starts the migration and kubectl wait --for=condition=Succeeded returns when it is done', async () => {
  const crd = testCrd(`${uniq('k')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 400, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('widgets');
  await withWorker(
    plane,
    async (m) => {
      await kubectl(['create', '-f', '-'], manifest(name, crd.group, crd.plural));
      const wait = await kubectl(['wait', '--for=condition=Succeeded', `storageversionmigration/${name}`, '--timeout=90s']);
      assert.match(wait.stdout, /condition met/);
      await (await m.handle(crd.name)).wait(); // let the workflow close before its worker goes
    },
    { settings: { bridge: true } },
  );
  const got = await kubectl(['get', 'storageversionmigration', name, '-o', 'json']);
  const obj = JSON.parse(got.stdout) as { status: { phase: string; progress: { migrated: number } } };
  assert.equal(obj.status.phase, 'Succeeded');
  assert.equal(obj.status.progress.migrated, 400);
  const table = await kubectl(['get', 'storageversionmigrations', name]);
  assert.match(table.stdout, /RESOURCE\s+GROUP\s+PHASE\s+MIGRATED/);
  assert.match(table.stdout, new RegExp(`${name}\\s+${crd.plural}\\s+${crd.group.replace(/\./g, '\\.')}\\s+Succeeded\\s+400`));
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, { [`${crd.group}/v2`]: 400 });
});

void test('a StorageVersionMigration for a resource that is not stored is refused in its status', async () => {
  const name = uniq('bad');
  await withWorker(
    plane,
    async () => {
      await kubectl(['create', '-f', '-'], JSON.stringify({ apiVersion: 'migration.k8s.io/v1alpha1', kind: 'StorageVersionMigration', metadata: { name }, spec: { resource: { group: 'authentication.k8s.io', resource: 'tokenreviews' } } }));
      const wait = await kubectl(['wait', '--for=condition=Failed', `storageversionmigration/${name}`, '--timeout=60s']);
      assert.match(wait.stdout, /condition met/);
    },
    { settings: { bridge: true } },
  );
  const obj = await plane.kube.getJson<{ status: { message: string } }>(svmPath(name));
  assert.match(obj.status.message, /not persisted/);
});

void test('deleting the StorageVersionMigration aborts its migration', async () => {
  const crd = testCrd(`${uniq('kd')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 800, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('slow');
  const result = await withWorker(
    plane,
    async (m) => {
      await kubectl(['create', '-f', '-'], JSON.stringify({ apiVersion: 'migration.k8s.io/v1alpha1', kind: 'StorageVersionMigration', metadata: { name }, spec: { resource: { group: crd.group, resource: crd.plural } } }));
      const h = await m.handle(crd.name);
      await eventually('the migration to start', async () => (await h.progress()).counters.chunks >= 1);
      await kubectl(['delete', 'storageversionmigration', name]);
      return h.wait();
    },
    { settings: { bridge: true, qps: 100 } },
  );
  assert.equal(result.phase, 'Aborted');
  assert.match(result.message ?? '', new RegExp(`StorageVersionMigration ${name} was deleted`));
  assert.ok(result.counters.migrated < 800);
});
