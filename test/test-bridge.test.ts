/**
 * kubectl users: `kubectl create` a StorageVersionMigration, `kubectl wait`
 * for it, delete one to abort. Runs the real kubectl built by `npm run tools`.
 * Also: what the bridge refuses (a given continue token, a workflow-id
 * annotation set by the creator), kube-storage-version-migrator's objects
 * (finished ones left alone, a Running one taken over), the status of an
 * object whose workflow was terminated, and which delete aborts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import { svmPath, WORKFLOW_ID_ANNOTATION } from '../src/activities';
import { MAX_MIGRATION_OBJECTS } from '../src/contract/definitions';
import { CONTINUE_TOKEN_REFUSED_MESSAGE, TAKEOVER_MESSAGE, type StorageVersionMigrationStatus } from '../src/api/migration';
import { watchForever } from '../src/kube/watch';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

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
  JSON.stringify({
    apiVersion: 'migration.k8s.io/v1alpha1',
    kind: 'StorageVersionMigration',
    metadata: { name },
    spec: { resource: { group, version: 'v2', resource } },
  });

void test('kubectl create starts the migration and kubectl wait --for=condition=Succeeded returns when it is done', async () => {
  const crd = testCrd(`${uniq('k')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  // 50 objects: kubectl's wait, the status' count and etcd's judge a whole pass of any size (400 until 2026-12-07).
  await createObjects(plane.kube, crd, 'v1', 50, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('widgets');
  await withWorker(
    plane,
    async (m) => {
      await kubectl(['create', '-f', '-'], manifest(name, crd.group, crd.plural));
      const wait = await kubectl([
        'wait',
        '--for=condition=Succeeded',
        `storageversionmigrations.migration.k8s.io/${name}`,
        '--timeout=90s',
      ]);
      assert.match(wait.stdout, /condition met/);
      await migrationResult(await m.handle(crd.name)); // let the workflow close before its worker goes
    },
    { settings: { bridge: true } },
  );
  const got = await kubectl(['get', 'storageversionmigrations.migration.k8s.io', name, '-o', 'json']);
  const obj = JSON.parse(got.stdout) as { status: { phase: string; progress: { migrated: number } } };
  assert.equal(obj.status.phase, 'Succeeded');
  assert.equal(obj.status.progress.migrated, 50);
  const table = await kubectl(['get', 'storageversionmigrations.migration.k8s.io', name]);
  assert.match(table.stdout, /RESOURCE\s+GROUP\s+PHASE\s+MIGRATED/);
  assert.match(table.stdout, new RegExp(`${name}\\s+${crd.plural}\\s+${crd.group.replace(/\./g, '\\.')}\\s+Succeeded\\s+50`));
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 50,
  });
});

void test('a StorageVersionMigration for a resource that is not stored is refused in its status', async () => {
  const name = uniq('bad');
  await withWorker(
    plane,
    async () => {
      await kubectl(
        ['create', '-f', '-'],
        JSON.stringify({
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageVersionMigration',
          metadata: { name },
          spec: { resource: { group: 'authentication.k8s.io', resource: 'tokenreviews' } },
        }),
      );
      const wait = await kubectl(['wait', '--for=condition=Failed', `storageversionmigrations.migration.k8s.io/${name}`, '--timeout=60s']);
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
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('slow');
  const result = await withWorker(
    plane,
    async (m) => {
      await kubectl(
        ['create', '-f', '-'],
        JSON.stringify({
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageVersionMigration',
          metadata: { name },
          spec: { resource: { group: crd.group, resource: crd.plural } },
        }),
      );
      const h = await m.handle(crd.name);
      // Under way, by etcd: the 300 objects are one page (a metadata-only page holds the chunk size from the first),
      // so no chunk ends before the migration does. At 30/s, 8 s of updates are left once 50 are done: time for
      // kubectl delete and the bridge to abort it.
      await eventually(
        'the migration to be under way',
        async () =>
          ((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion[`${crd.group}/v2`] ??
            0) >= 50,
      );
      await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', name]);
      return migrationResult(h);
    },
    { settings: { bridge: true, qps: 30 } },
  );
  assert.equal(result.phase, 'Aborted');
  assert.match(result.message ?? '', new RegExp(`StorageVersionMigration ${name} was deleted`));
  assert.ok(result.counters.migrated < 300);
});

type SvmObject = { metadata: { annotations?: Record<string, string> }; status?: StorageVersionMigrationStatus };
const getSvm = (name: string) => plane.kube.getJson<SvmObject>(svmPath(name));
const failedCondition = (o: SvmObject) => o.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
const workflowOf = async (name: string) =>
  eventually(`${name} to be attached`, async () => (await getSvm(name)).metadata.annotations?.[WORKFLOW_ID_ANNOTATION]);
const noWorkflow = async (workflowId: string) =>
  assert.rejects(
    plane.temporal.client.workflow.getHandle(workflowId).describe(),
    (err: unknown) => err instanceof WorkflowNotFoundError,
    `a workflow ${workflowId} exists`,
  );
const svmJson = (
  name: string,
  crd: { group: string; plural: string },
  extra: { annotations?: Record<string, string>; continueToken?: string } = {},
) =>
  JSON.stringify({
    apiVersion: 'migration.k8s.io/v1alpha1',
    kind: 'StorageVersionMigration',
    metadata: { name, ...(extra.annotations ? { annotations: extra.annotations } : {}) },
    spec: { resource: { group: crd.group, resource: crd.plural }, ...(extra.continueToken ? { continueToken: extra.continueToken } : {}) },
  });
const createSvm = (body: string) => plane.kube.request('POST', '/apis/migration.k8s.io/v1alpha1/storageversionmigrations', { body });

void test('a new StorageVersionMigration with spec.continueToken is refused before anything is written', async () => {
  const crd = testCrd(`${uniq('kt')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  // 20 objects, a page of 10: a real continue token with objects past it (150 and a page of 100 until 2026-12-07).
  await createObjects(plane.kube, crd, 'v1', 20, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const token = (await plane.kube.getJson<{ metadata: { continue: string } }>(`/apis/${crd.group}/v2/${crd.plural}`, { limit: 10 }))
    .metadata.continue;
  assert.ok(token);
  const name = uniq('token');
  await withWorker(
    plane,
    async () => {
      await kubectl(['create', '-f', '-'], svmJson(name, crd, { continueToken: token }));
      const wait = await kubectl(['wait', '--for=condition=Failed', `storageversionmigrations.migration.k8s.io/${name}`, '--timeout=60s']);
      assert.match(wait.stdout, /condition met/);
    },
    { settings: { bridge: true } },
  );
  const obj = await getSvm(name);
  assert.equal(obj.status?.phase, 'Failed');
  assert.equal(obj.status?.message, CONTINUE_TOKEN_REFUSED_MESSAGE);
  assert.equal(failedCondition(obj)?.reason, 'ContinueTokenRefused');
  assert.equal(obj.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], undefined, 'not attached to any workflow');
  await noWorkflow(`migrate/${crd.name}`);
  assert.deepEqual(
    (await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion,
    { [`${crd.group}/v1`]: 20 },
    'nothing was migrated',
  );
});

void test('kube-storage-version-migrator objects: finished ones are never run again; a Running one is taken over with a whole pass, its continue token unused', async () => {
  const crd = testCrd(`${uniq('ku')}.svm.test`);
  const other = testCrd(`${uniq('kf')}.svm.test`);
  // 30 objects each, the token after a page of 10: a whole pass counts 30, one from the token 20 (300 and a page of
  // 100 until 2026-12-07 showed the same).
  for (const c of [crd, other]) {
    await applyCrd(plane.kube, c, 'v1');
    await createObjects(plane.kube, c, 'v1', 30, { namespace: uniq('ns') });
    await applyCrd(plane.kube, c, 'v2');
  }
  // As kube-storage-version-migrator leaves them: conditions only, no phase; the Running one mid-list.
  const token = (await plane.kube.getJson<{ metadata: { continue: string } }>(`/apis/${crd.group}/v2/${crd.plural}`, { limit: 10 }))
    .metadata.continue;
  const now = new Date().toISOString();
  const running = uniq('upstream-running');
  const succeeded = uniq('upstream-succeeded');
  const failed = uniq('upstream-failed');
  await createSvm(svmJson(running, crd, { continueToken: token }));
  await plane.kube.patchStatus(svmPath(running), { conditions: [{ type: 'Running', status: 'True', lastUpdateTime: now }] });
  await createSvm(svmJson(succeeded, other, { continueToken: token }));
  await plane.kube.patchStatus(svmPath(succeeded), { conditions: [{ type: 'Succeeded', status: 'True', lastUpdateTime: now }] });
  await createSvm(svmJson(failed, other));
  await plane.kube.patchStatus(svmPath(failed), {
    conditions: [{ type: 'Failed', status: 'True', lastUpdateTime: now, reason: 'Timeout' }],
  });

  // Every status the taken-over object goes through.
  const messages: string[] = [];
  const watch = watchForever(
    plane.kube,
    '/apis/migration.k8s.io/v1alpha1/storageversionmigrations',
    {
      onList: (items) => items.forEach((o) => messages.push((o as SvmObject).status?.message ?? '')),
      onEvent: (_t, o) => messages.push((o as SvmObject).status?.message ?? ''),
      onError: () => undefined,
    },
    { fieldSelector: `metadata.name=${running}` },
  );
  try {
    await withWorker(
      plane,
      async (m) => {
        const wait = await kubectl([
          'wait',
          '--for=condition=Succeeded',
          `storageversionmigrations.migration.k8s.io/${running}`,
          '--timeout=90s',
        ]);
        assert.match(wait.stdout, /condition met/);
        await migrationResult(await m.handle(crd.name));
      },
      { settings: { bridge: true } },
    );
  } finally {
    watch.stop();
  }
  assert.ok(messages.includes(TAKEOVER_MESSAGE), `the takeover was said; messages seen: ${JSON.stringify(messages)}`);
  const obj = await getSvm(running);
  assert.equal(obj.status?.phase, 'Succeeded');
  assert.equal(obj.status?.progress?.migrated, 30, 'a whole pass, not the 20 objects after the token');
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 30,
  });

  // The finished ones: untouched, nothing started for their resource.
  for (const name of [succeeded, failed]) {
    const o = await getSvm(name);
    assert.equal(o.status?.phase, undefined, name);
    assert.equal(o.metadata.annotations?.[WORKFLOW_ID_ANNOTATION], undefined, name);
  }
  await noWorkflow(`migrate/${other.name}`);
  assert.deepEqual((await storedVersions(plane.etcd, { group: other.group, resource: other.plural, custom: true })).byApiVersion, {
    [`${other.group}/v1`]: 30,
  });
});

void test('a StorageVersionMigration whose workflow is terminated ends Failed and says so (kubectl wait --for=condition=Failed returns)', async () => {
  const crd = testCrd(`${uniq('kx')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  // 300 objects at 20/s: 15 s of updates, still running when it is terminated.
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const name = uniq('terminated');
  let workflowId = '';
  let waited = '';
  await withWorker(
    plane,
    async (m) => {
      await kubectl(['create', '-f', '-'], svmJson(name, crd));
      workflowId = await workflowOf(name);
      const h = await m.handle(crd.name);
      await eventually('the migration to run', async () => (await h.progress()).phase === 'Running');
      await plane.temporal.client.workflow.getHandle(workflowId).terminate('an operator ended it');
      const started = Date.now();
      const wait = await kubectl(['wait', '--for=condition=Failed', `storageversionmigrations.migration.k8s.io/${name}`, '--timeout=90s']);
      assert.match(wait.stdout, /condition met/);
      waited = `${Math.round((Date.now() - started) / 1000)}s`;
    },
    { settings: { bridge: true, qps: 20 } },
  );
  const obj = await getSvm(name);
  assert.equal(obj.status?.phase, 'Failed', `after ${waited}`);
  assert.equal(
    obj.status?.message,
    `the migration workflow ${workflowId} was terminated (reason: an operator ended it) without recording a result`,
  );
  assert.equal(failedCondition(obj)?.reason, 'WorkflowTerminated');
  assert.equal(failedCondition(obj)?.message, obj.status?.message);
  assert.ok(obj.status?.completionTime);
});

void test("the workflow-id annotation does not let a creator abort someone else's migration; deleting the last attached object does", async () => {
  const crd = testCrd(`${uniq('ka')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 1000, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const owner = uniq('owner');
  const second = uniq('second');
  const result = await withWorker(
    plane,
    async (m) => {
      await kubectl(['create', '-f', '-'], svmJson(owner, crd));
      const workflowId = await workflowOf(owner);
      const h = await m.handle(crd.name);
      await eventually('the migration to run', async () => (await h.progress()).phase === 'Running');
      const stillRunning = async (what: string) => {
        await new Promise((r) => setTimeout(r, 3000)); // time for the bridge to (wrongly) abort
        const p = await h.progress();
        assert.equal(p.phase, 'Running', `${what}: ${p.message}`);
      };

      // A creator sets the annotation to someone else's workflow, then deletes its object at once.
      const quick = uniq('forged-quick');
      await kubectl(['create', '-f', '-'], svmJson(quick, crd, { annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } }));
      await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', quick]);
      await stillRunning('after deleting an object whose creator set the annotation');

      // One that stays and names its own resource's workflow asks for that migration's status: it gets it,
      // copied by the bridge, without being listed (its deletion aborts nothing).
      const forged = uniq('forged');
      await kubectl(['create', '-f', '-'], svmJson(forged, crd, { annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } }));
      const copied = await eventually('the status copied to an object the workflow does not list', async () => {
        const o = await getSvm(forged);
        return o.status?.workflowId === workflowId && /status copied by svm's bridge/.test(o.status?.message ?? '') ? o : undefined;
      });
      assert.equal(copied.status?.phase, 'Running');
      await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', forged]);
      await stillRunning('after deleting an object whose creator set the annotation');

      // One whose annotation names a workflow that is not its resource's is refused in its status.
      const other = uniq('forged-other');
      await kubectl(['create', '-f', '-'], svmJson(other, crd, { annotations: { [WORKFLOW_ID_ANNOTATION]: 'migrate/nothing.svm.test' } }));
      const wait = await kubectl(['wait', '--for=condition=Failed', `storageversionmigrations.migration.k8s.io/${other}`, '--timeout=60s']);
      assert.match(wait.stdout, /condition met/);
      const refused = await getSvm(other);
      assert.match(refused.status?.message ?? '', /names a workflow that does not exist \(migrate\/nothing\.svm\.test\); only svm sets it/);
      assert.equal(failedCondition(refused)?.reason, 'WorkflowAnnotationRefused');
      await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', other]);
      assert.deepEqual((await h.progress()).migrationObjects, [owner]);

      // A second kubectl user waits on the same migration: deleting the first object does not abort it.
      await kubectl(['create', '-f', '-'], svmJson(second, crd));
      await eventually('the second object to be attached', async () => (await h.progress()).migrationObjects.includes(second));
      await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', owner]);
      await stillRunning('after deleting one of two attached objects');

      // Deleting the last one does.
      await kubectl(['delete', 'storageversionmigrations.migration.k8s.io', second]);
      return migrationResult(h);
    },
    { settings: { bridge: true, qps: 20 } },
  );
  assert.equal(result.phase, 'Aborted');
  assert.match(result.message ?? '', new RegExp(`StorageVersionMigration ${second} was deleted`));
  assert.ok(result.counters.migrated < 1000);
});

void test('more StorageVersionMigrations for one resource than its workflow lists: the set stays bounded and deduplicated across continue-as-new, and every object gets the result', async () => {
  const crd = testCrd(`${uniq('kn')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 400, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const prefix = uniq('many');
  const names = Array.from({ length: MAX_MIGRATION_OBJECTS + 10 }, (_, i) => `${prefix}-${i}`);
  const outcome = await withWorker(
    plane,
    async (m) => {
      await kubectl(['create', '-f', '-'], svmJson(names[0]!, crd));
      const h = await m.handle(crd.name);
      await eventually('the migration to run', async () => (await h.progress()).phase === 'Running');
      await h.pause();
      // Many kubectl users (or a loop) ask for the same migration while it is paused.
      for (let i = 1; i < names.length; i += 10) await Promise.all(names.slice(i, i + 10).map((n) => createSvm(svmJson(n, crd))));
      // Listed ones get their status at the workflow's next report (it is paused); the others from the bridge now.
      const p = await eventually(
        'every object tied to the workflow: listed by it, or with its status copied',
        async () => {
          const [now, all] = await Promise.all([h.progress(), Promise.all(names.map(getSvm))]);
          const tied = all.every(
            (o, i) =>
              o.metadata.annotations?.[WORKFLOW_ID_ANNOTATION] !== undefined &&
              (now.migrationObjects.includes(names[i]!) || /status copied by svm's bridge/.test(o.status?.message ?? '')),
          );
          return tied ? now : undefined;
        },
        120_000,
      );
      assert.equal(p.migrationObjects.length, MAX_MIGRATION_OBJECTS, 'the workflow lists at most MAX_MIGRATION_OBJECTS');
      assert.equal(new Set(p.migrationObjects).size, p.migrationObjects.length, 'each once');
      assert.equal(names.filter((n) => !p.migrationObjects.includes(n)).length, 10, 'the others follow');
      await h.resume();
      const result = await migrationResult(h);
      // The objects it does not list get the result from the bridge (at once, or at its next resync): it must run.
      const phases = await eventually(
        'every object to say Succeeded',
        async () => {
          const all = await Promise.all(names.map(getSvm));
          return all.every((o) => o.status?.phase === 'Succeeded') ? all : undefined;
        },
        90_000,
      );
      return { result, phases };
    },
    { settings: { bridge: true, qps: 50 } },
  );
  const { result, phases } = outcome;
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.ok(
    result.runs >= 2,
    `the attached set was carried across continue-as-new (runs ${result.runs}; the suite's plane suggests it after 300 events)`,
  );
  assert.ok(result.migrationObjects.length <= MAX_MIGRATION_OBJECTS);
  assert.equal(phases.length, names.length);
  phases.forEach((o, i) => assert.equal(o.status?.progress?.migrated, 400, names[i]));
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 400,
  });
  await Promise.all(names.map((n) => plane.kube.request('DELETE', svmPath(n)).catch(() => undefined)));
});
