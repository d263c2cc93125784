/**
 * The standard API (storagemigration.k8s.io, GA as v1 in Kubernetes 1.37)
 * next to svm's own (migration.k8s.io/v1alpha1): what svm does with a
 * standard object in each mode, exactly the status the built-in writes, the
 * exact-form rule for spec.resource, and what `kubectl get
 * storageversionmigrations` returns with both APIs installed.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { svmPath } from '../src/activities';
import { PROGRESS_CONDITION, type StandardMigration } from '../src/api/standard-migration';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { getCrd, pruneStoredVersions } from '../src/kube/crds';
import { WORKFLOW_ID_ANNOTATION } from '../src/kube/migrations';
import { findStandardMigration, standardVersion } from '../src/kube/standard-migrations';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import pino from 'pino';
import { lookForUnattended, UNATTENDED_REASON } from '../src/worker/unattended';
import { createMetrics } from '../src/worker/metrics';
import { migrationResult } from './helpers/waits';
import { createStandardAndWait, kubectlOn } from './helpers/kubectl';

let plane: TestPlane;
let apiVersion: string;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
  const v = await standardVersion(plane.kube);
  assert.ok(v, 'the plane serves storagemigration.k8s.io (Kubernetes >= 1.35)');
  apiVersion = `storagemigration.k8s.io/${v}`;
});
after(async () => plane?.close());

const kubectl = (args: string[], input?: string) => kubectlOn(plane, args, input);

const standardManifest = (name: string, group: string, resource: string) =>
  JSON.stringify({ apiVersion, kind: 'StorageVersionMigration', metadata: { name }, spec: { resource: { group, resource } } });

const condition = (o: StandardMigration | undefined, type: string) => o?.status?.conditions?.find((c) => c.type === type);

void test('own: a standard StorageVersionMigration created with kubectl is migrated by svm with the built-in status, kubectl wait returns, etcd holds only the new version', async () => {
  const crd = testCrd(`${uniq('std')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('std-widgets');
  let workflowId = '';
  await withWorker(
    plane,
    async (m) => {
      await createStandardAndWait(plane, apiVersion, name, { group: crd.group, resource: crd.plural });
      const h = await m.handle(crd.name);
      workflowId = h.workflowId;
      await migrationResult(h);
    },
    { settings: { bridge: true, standardMigrations: 'own' } },
  );
  const obj = await findStandardMigration(plane.kube, name);
  assert.equal(obj?.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], workflowId);
  // What tools written for the built-in read: its condition types, statuses and reasons, and status.resourceVersion.
  assert.equal(condition(obj, 'Succeeded')?.status, 'True');
  assert.equal(condition(obj, 'Succeeded')?.reason, 'StorageVersionMigrationSucceeded');
  assert.equal(condition(obj, 'Running')?.status, 'False');
  assert.equal(condition(obj, 'Running')?.reason, 'MigrationCompleted');
  assert.equal(condition(obj, 'Failed'), undefined);
  assert.match(obj?.status?.resourceVersion ?? '', /^\d+$/);
  // svm's facts in its own condition.
  const progress = condition(obj, PROGRESS_CONDITION);
  assert.equal(progress?.reason, 'Succeeded');
  assert.match(progress?.message ?? '', /migrated 300 \(rewritten 300,/);
  assert.match(progress?.message ?? '', new RegExp(`workflow ${workflowId.replace(/[./]/g, '\\$&')}`));
  // The ground truth: every object re-encoded in v2, and only then storedVersions pruned.
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 300,
  });
  const after = await getCrd(plane.kube, { group: crd.group, resource: crd.plural });
  assert.deepEqual(after.status?.storedVersions, ['v2']);
  const migrating = after.status?.conditions?.find((c) => c.type === 'StorageMigrating') as
    { status: string; message?: string } | undefined;
  assert.equal(migrating?.status, 'False');
  assert.match(migrating?.message ?? '', /stored versions have been updated \(svm\)/);
});

void test('own: spec.resource must name the plural and the group exactly; other forms are refused naming the exact form, and nothing is migrated', async () => {
  const testStart = Date.now();
  const wrongGroup = uniq('std-core-deploy');
  const shortName = uniq('std-deploy');
  const sigsVersionAsGroup = uniq('sigs-deploy');
  await withWorker(
    plane,
    async () => {
      await kubectl(['create', '-f', '-'], standardManifest(wrongGroup, '', 'deployments'));
      await kubectl(['create', '-f', '-'], standardManifest(shortName, 'apps', 'deploy'));
      // The sigs API had a version field: a version is never read as a group.
      await kubectl(
        ['create', '-f', '-'],
        JSON.stringify({
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageVersionMigration',
          metadata: { name: sigsVersionAsGroup },
          spec: { resource: { version: 'apps', resource: 'deployments' } },
        }),
      );
      for (const n of [wrongGroup, shortName]) {
        const wait = await kubectl([
          'wait',
          '--for=condition=Failed',
          `storageversionmigrations.storagemigration.k8s.io/${n}`,
          '--timeout=60s',
        ]);
        assert.match(wait.stdout, /condition met/);
      }
      const wait = await kubectl([
        'wait',
        '--for=condition=Failed',
        `storageversionmigrations.migration.k8s.io/${sigsVersionAsGroup}`,
        '--timeout=60s',
      ]);
      assert.match(wait.stdout, /condition met/);
    },
    { settings: { bridge: true, standardMigrations: 'own' } },
  );
  const core = await findStandardMigration(plane.kube, wrongGroup);
  assert.match(
    condition(core, 'Failed')?.message ?? '',
    /no resource "deployments" in the core group.*did you mean \{group: "apps", resource: "deployments"\}/,
  );
  const short = await findStandardMigration(plane.kube, shortName);
  assert.match(
    condition(short, 'Failed')?.message ?? '',
    /no resource "deploy" in group "apps".*did you mean \{group: "apps", resource: "deployments"\}/,
  );
  const sigs = await plane.kube.getJson<{ status: { message: string } }>(svmPath(sigsVersionAsGroup));
  assert.match(sigs.status.message, /no resource "deployments" in the core group/);
  // Nothing was started for apps/deployments by these objects (the shared plane may hold older migrations of it).
  const started: string[] = [];
  for await (const w of plane.temporal.client.workflow.list({ query: `WorkflowId = 'migrate/deployments.apps'` })) {
    if (w.startTime.getTime() >= testStart) started.push(w.runId);
  }
  assert.deepEqual(started, []);
});

void test('defer (the default): svm leaves standard objects to the built-in controller and writes nothing to them', async () => {
  const crd = testCrd(`${uniq('dfr')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 5, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const barrier = testCrd(`${uniq('bar')}.svm.test`);
  await applyCrd(plane.kube, barrier, 'v1');
  const standard = uniq('std-deferred');
  const sigs = uniq('sigs-barrier');
  await withWorker(
    plane,
    async () => {
      await kubectl(['create', '-f', '-'], standardManifest(standard, crd.group, crd.plural));
      // The bridge handles events in order: once it finished this later object, it has seen the standard one too.
      await kubectl(
        ['create', '-f', '-'],
        JSON.stringify({
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageVersionMigration',
          metadata: { name: sigs },
          spec: { resource: { group: barrier.group, resource: barrier.plural } },
        }),
      );
      await kubectl(['wait', '--for=condition=Succeeded', `storageversionmigrations.migration.k8s.io/${sigs}`, '--timeout=90s']);
    },
    { settings: { bridge: true } },
  );
  const obj = await findStandardMigration(plane.kube, standard);
  assert.equal(obj?.status?.conditions, undefined);
  assert.equal(obj?.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], undefined);
  // Left to a built-in that does not run on this plane: gone before svm would say nobody acts on it (later tests'
  // workers would log it).
  await kubectl(['delete', `storageversionmigrations.storagemigration.k8s.io/${standard}`]);
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v1`]: 5,
  });
});

void test('defer with no built-in running: a standard object nobody acts on gets one Warning Event (kubectl describe shows it), a log line and the gauge; nothing is written to it', async () => {
  const name = uniq('std-nobody');
  await kubectl(['create', '-f', '-'], standardManifest(name, '', 'configmaps'));
  const metrics = createMetrics();
  const lines: Array<{ msg?: string; name?: string }> = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { msg?: string; name?: string }) });
  const ns = 'default';
  const said = new Set<string>();
  const opts = { kube: plane.kube, log, metrics, afterSeconds: 2 };
  // Not yet: created less than the bound ago.
  assert.ok(!(await lookForUnattended(opts, said)).includes(name));
  await new Promise((r) => setTimeout(r, 2500));
  assert.ok((await lookForUnattended(opts, said)).includes(name));
  assert.ok((await lookForUnattended(opts, said)).includes(name), 'still unattended at the next look (said once, below)');
  const events = await plane.kube.getJson<{
    items: Array<{ reason?: string; type?: string; message?: string; involvedObject?: { name?: string } }>;
  }>(`/api/v1/namespaces/${ns}/events`);
  const mine = events.items.filter((e) => e.involvedObject?.name === name);
  assert.equal(mine.length, 1, 'one Event for the object, however many looks');
  assert.equal(mine[0]!.reason, UNATTENDED_REASON);
  assert.equal(mine[0]!.type, 'Warning');
  assert.match(mine[0]!.message!, /no controller has acted on StorageVersionMigration/);
  assert.equal(lines.filter((l) => l.name === name && /no controller has acted/.test(l.msg ?? '')).length, 1);
  const gauge = (await metrics.registry.getSingleMetric('svm_standard_migrations_unattended')?.get())?.values[0]?.value;
  assert.ok((gauge ?? 0) >= 1, `svm_standard_migrations_unattended is ${gauge}`);
  const { stdout } = await kubectl(['describe', `storageversionmigrations.storagemigration.k8s.io/${name}`]);
  assert.match(stdout, new RegExp(UNATTENDED_REASON), 'kubectl describe shows the Event');
  const obj = await findStandardMigration(plane.kube, name);
  assert.equal(obj?.status?.conditions, undefined, 'svm wrote nothing to the object');
  await kubectl(['delete', `storageversionmigrations.storagemigration.k8s.io/${name}`]);
});

void test('with both APIs installed, kubectl get storageversionmigrations means the standard API; the group names svm own', async () => {
  const standard = uniq('std-names');
  const sigs = uniq('sigs-names');
  await kubectl(['create', '-f', '-'], standardManifest(standard, '', 'secrets'));
  await plane.kube.request('POST', '/apis/migration.k8s.io/v1alpha1/storageversionmigrations', {
    body: JSON.stringify({
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageVersionMigration',
      metadata: { name: sigs },
      spec: { resource: { resource: 'secrets' } },
    }),
  });
  try {
    const plain = (await kubectl(['get', 'storageversionmigrations', '-o', 'name'])).stdout;
    const std = (await kubectl(['get', 'storageversionmigrations.storagemigration.k8s.io', '-o', 'name'])).stdout;
    const own = (await kubectl(['get', 'storageversionmigrations.migration.k8s.io', '-o', 'name'])).stdout;
    console.log(`kubectl get storageversionmigrations -o name:\n${plain}`);
    console.log(`kubectl get storageversionmigrations.migration.k8s.io -o name:\n${own}`);
    assert.match(plain, new RegExp(`^storageversionmigration\\.storagemigration\\.k8s\\.io/${standard}$`, 'm'));
    assert.doesNotMatch(plain, new RegExp(sigs));
    assert.equal(plain, std);
    assert.match(own, new RegExp(`^storageversionmigration\\.migration\\.k8s\\.io/${sigs}$`, 'm'));
    assert.doesNotMatch(own, new RegExp(standard));
  } finally {
    await kubectl(['delete', 'storageversionmigrations.storagemigration.k8s.io', standard]);
    await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', sigs]);
  }
  await eventually('both deleted', async () => !(await findStandardMigration(plane.kube, standard)));
});

void test('CRD storedVersions follow the built-in protocol: pruned only at the generation recorded at the start, and the StorageMigrating condition says why not', async () => {
  const crd = testCrd(`${uniq('gen')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 3, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const gr = { group: crd.group, resource: crd.plural };
  const before = await getCrd(plane.kube, gr);
  assert.deepEqual(before.status?.storedVersions, ['v1', 'v2']);
  const generation = before.metadata.generation!;
  // A pass that started at an older generation: nothing pruned, and the CRD says why.
  const stale = await pruneStoredVersions(plane.kube, gr, { generation: generation - 1, storageVersion: 'v2' }, 'svm');
  assert.equal(stale.pruned, false);
  const kept = await getCrd(plane.kube, gr);
  assert.deepEqual(kept.status?.storedVersions, ['v1', 'v2']);
  const cond = kept.status?.conditions?.find((c) => c.type === 'StorageMigrating') as { status: string; message: string } | undefined;
  assert.equal(cond?.status, 'False');
  assert.match(
    cond?.message ?? '',
    new RegExp(`stored versions have not been updated: the CRD's generation is ${generation}, not ${generation - 1}`),
  );
  // Other conditions of the CRD survive the status write.
  assert.ok(kept.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'));
  // At the recorded generation: pruned, and said so.
  const ok = await pruneStoredVersions(plane.kube, gr, { generation, storageVersion: 'v2' }, 'svm');
  assert.deepEqual(ok, { pruned: true, storedVersions: ['v2'] });
  const after = await getCrd(plane.kube, gr);
  assert.deepEqual(after.status?.storedVersions, ['v2']);
  assert.match(
    String((after.status?.conditions?.find((c) => c.type === 'StorageMigrating') as { message?: string } | undefined)?.message),
    /stored versions have been updated/,
  );
});
