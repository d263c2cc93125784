/**
 * Controlling a migration against real servers: bad input refused before
 * anything is written, idempotent start, pause/resume/abort, progress,
 * continue-as-new, and an expired continue token.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { MIGRATION_API_VERSION } from '../src/api/migration';
import { installCrds } from '../src/client/cli-migrate';
import { InvalidResourceError } from '../src/client';
import { compactEtcd, storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { chunksOfPass, eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';
import { EXIT } from '../src/client/exit-codes';

const run = promisify(execFile);
let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

async function migrationObjectCount(): Promise<number> {
  return (await plane.kube.getJson<{ items: unknown[] }>(`/apis/${MIGRATION_API_VERSION}/storageversionmigrations`)).items.length;
}

async function svm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), ...args], {
      env: {
        ...process.env,
        KUBECONFIG: plane.env.KUBECONFIG,
        TEMPORAL_ADDRESS: plane.temporal.address,
        TEMPORAL_TASK_QUEUE: 'nobody-listens',
      },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** The latest run of each workflow ID, or 'none': compared before and after, so earlier tests' runs do not matter. */
async function latestRuns(ids: string[]): Promise<string[]> {
  return Promise.all(
    ids.map((id) =>
      plane.temporal.client.workflow
        .getHandle(id)
        .describe()
        .then(
          (d) => d.runId,
          () => 'none',
        ),
    ),
  );
}

void test('bad input is refused with a clear message, and nothing is written or started', async () => {
  const objectsBefore = await migrationObjectCount();
  const ids = ['migrate/nosuchthings', 'migrate/tokenreviews.authentication.k8s.io', 'migrate/secrets', 'migrate/pods', 'migrate/bindings'];
  const runsBefore = await latestRuns(ids);
  const cases: Array<[string[], RegExp]> = [
    [['migrate', 'nosuchthings'], /unknown resource "nosuchthings"/],
    [['migrate', 'pods/status'], /subresource/],
    [['migrate', 'tokenreviews'], /not persisted/],
    [['migrate', 'bindings'], /cannot be migrated|not persisted/],
    [['migrate', 'secrets', '--chunk-size', 'abc'], /--chunk-size must be a whole number/],
    [['migrate', 'secrets', '--concurrency', '0'], /--concurrency must be between 1 and 256/],
    [['migrate', 'secrets', '--qps', '-3'], /--qps must be a whole number|unknown option/],
  ];
  for (const [args, message] of cases) {
    const r = await svm(args);
    assert.notEqual(r.code, 0, `svm ${args.join(' ')} should fail`);
    assert.match(r.stderr, message, `svm ${args.join(' ')}: ${r.stderr}`);
  }
  assert.equal(await migrationObjectCount(), objectsBefore, 'a StorageVersionMigration object was written');
  assert.deepEqual(await latestRuns(ids), runsBefore, 'a workflow was started for bad input');
  // The programmatic API refuses the same way.
  await withWorker(plane, async (m) => {
    await assert.rejects(m.start('tokenreviews'), InvalidResourceError);
    await assert.rejects(m.start('configmaps', { chunkSize: 0 }), /chunkSize must be a whole number between 1 and 10000/);
  });
});

void test('starting twice joins the running migration; pause, progress, resume and abort work', async () => {
  const crd = testCrd(`${uniq('c')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 600, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  await withWorker(plane, async (m) => {
    const opts = { chunkSize: 50, concurrency: 2, qps: 100 };
    const h1 = await m.start(crd.name, opts);
    const h2 = await m.start(crd.name, opts);
    assert.equal(h1.workflowId, `migrate/${crd.name}`);
    const [d1, d2] = await Promise.all([h1.workflow.describe(), h2.workflow.describe()]);
    assert.equal(d1.runId, d2.runId, 'a second start must join the running workflow');

    await eventually('a first chunk', async () => (await h1.progress()).counters.chunks >= 1);
    await h1.pause();
    const paused = await eventually('Paused', async () => {
      const p = await h1.progress();
      return p.phase === 'Paused' && p;
    });
    await new Promise((r) => setTimeout(r, 1500));
    const still = await h1.progress();
    assert.equal(still.counters.migrated, paused.counters.migrated, 'objects were migrated while paused');
    assert.ok(paused.counters.migrated < 600);
    assert.equal(paused.continueTokenPresent, true);

    await h1.resume();
    await eventually('progress after resume', async () => (await h1.progress()).counters.migrated > paused.counters.migrated);
    await h1.abort('test says stop');
    const result = await migrationResult(h1);
    assert.equal(result.phase, 'Aborted');
    assert.match(result.message ?? '', /test says stop/);
    assert.ok(result.counters.migrated < 600, 'abort came too late to test anything');
    const etcd = await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true });
    assert.equal(etcd.byApiVersion[`${crd.group}/v2`], result.counters.rewritten, 'etcd disagrees with the counters');
    // A signal to a migration that ended says so in words.
    await assert.rejects(
      h1.pause(),
      (e: Error) =>
        e.name === 'MigrationNotRunningError' && /is not running \(its last run is completed\): nothing to pause/.test(e.message),
    );
  });
});

void test('svm pause, resume and abort: acknowledged by the migration, or refused with its reason (exit 1)', async () => {
  const crd = testCrd(`${uniq('c')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 600, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const id = `migrate/${crd.name}`;
  await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 50, concurrency: 2, qps: 30 });
    await eventually('a first chunk', async () => (await h.progress()).counters.chunks >= 1);
    const pause = await svm(['pause', crd.name]);
    assert.equal(pause.code, 0, pause.stderr);
    assert.match(pause.stderr, /: pause acknowledged at \d+ objects migrated \(phase (Running|Paused)\)/);
    assert.ok(pause.stderr.startsWith(`${id}: `), pause.stderr);
    await eventually('Paused', async () => (await h.progress()).phase === 'Paused');
    const again = await svm(['pause', crd.name]);
    assert.equal(again.code, EXIT.refused, again.stderr);
    assert.ok(again.stderr.includes(`cannot pause: the migration of ${crd.name} is paused already`), again.stderr);
    const resume = await svm(['resume', crd.name]);
    assert.equal(resume.code, 0, resume.stderr);
    assert.match(resume.stderr, /: resume acknowledged at \d+ objects migrated/);
    const abort = await svm(['abort', crd.name, '--reason', 'the CLI says stop']);
    assert.equal(abort.code, 0, abort.stderr);
    assert.match(abort.stderr, /: abort \(the CLI says stop\) acknowledged at \d+ objects migrated/);
    const result = await migrationResult(h);
    assert.equal(result.phase, 'Aborted', result.message);
    assert.match(result.message ?? '', /the CLI says stop/);
    assert.ok(result.counters.migrated < 600, 'the abort came too late to test anything');
    const late = await svm(['resume', crd.name]);
    assert.equal(late.code, EXIT.refused, late.stderr);
    assert.match(late.stderr, /is not running \(its last run is completed\): nothing to resume/);
  });
});

void test('svm pause with no worker running the migration: no answer within --answer-within, so it is sent as a signal, which waits in the history', async () => {
  const crd = testCrd(`${uniq('c')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const id = `migrate/${crd.name}`;
  // The worker stops after the first chunk; the migration stays running with nobody to run its tasks.
  await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 50, concurrency: 1, qps: 10 });
    await eventually('a first chunk', async () => (await h.progress()).counters.chunks >= 1);
  });
  const handle = plane.temporal.client.workflow.getHandle(id);
  try {
    assert.equal((await handle.describe()).status.name, 'RUNNING');
    const started = Date.now();
    const pause = await svm(['pause', crd.name, '--answer-within', '3']);
    assert.equal(pause.code, 0, pause.stderr);
    assert.ok(
      pause.stderr.includes(`${id}: no worker answered within 3s; pause sent as a signal instead, taken once a worker runs the migration`),
      pause.stderr,
    );
    assert.ok(Date.now() - started < 30_000, 'the CLI waited far longer than --answer-within');
    const history = await handle.fetchHistory();
    const signals = (history.events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'pause');
    assert.equal(signals.length, 1, 'the pause signal is in the history');
    const bad = await svm(['pause', crd.name, '--answer-within', '0']);
    assert.equal(bad.code, EXIT.usage, bad.stderr);
    assert.match(bad.stderr, /--answer-within/);
  } finally {
    await handle.terminate('test: the migration had no worker').catch(() => undefined);
  }
});

void test('a pause stops the chunk in flight; resume finishes that page from where it stopped, each object counted once', async () => {
  const crd = testCrd(`${uniq('pm')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  await withWorker(plane, async (m) => {
    // 300 objects at 20 updates/s: 15 s, and pages of up to 300 after the first, so the pause lands inside one.
    const v2 = async () =>
      (await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion[`${crd.group}/v2`] ?? 0;
    const h = await m.start(crd.name, { chunkSize: 300, concurrency: 2, qps: 20 });
    // The workflow's counters move when a chunk ends; etcd shows the page being rewritten.
    await eventually('some objects of the first page rewritten', async () => (await v2()) >= 40);
    await h.pause();
    const paused = await eventually('Paused', async () => {
      const p = await h.progress();
      return p.phase === 'Paused' && p;
    });
    // The chunk in flight was cancelled, not waited for, and what it did counts: the counters match etcd.
    const history = await h.workflow.fetchHistory();
    assert.ok(
      (history.events ?? []).some((e) => e.activityTaskCanceledEventAttributes),
      'the pause waited for the chunk to end instead of stopping it',
    );
    assert.ok(paused.counters.migrated < 300, `migrated ${paused.counters.migrated} when paused`);
    assert.equal(paused.counters.migrated, await v2(), 'the counters at the pause disagree with etcd');
    const atPause = await v2();
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(await v2(), atPause, 'objects were rewritten in etcd while paused');
    assert.equal((await h.progress()).counters.migrated, paused.counters.migrated);
    await h.resume();
    const result = await migrationResult(h);
    assert.equal(result.phase, 'Succeeded');
    assert.equal(result.counters.migrated + result.counters.conflicts, 300, 'each object counted once');
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 300,
  });
});

void test('a long list continues-as-new and progress is continuous across runs', async () => {
  const crd = testCrd(`${uniq('can')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 200, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  // 10 chunks of 20, at most 3 a run: runs of 3, 3, 3 and 1, each after the first going on from the token the one before left.
  const result = await withWorker(plane, async (m) =>
    migrationResult(await m.start(crd.name, { chunkSize: 20, concurrency: 8, maxChunksPerRun: 3 })),
  );
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.ok(result.runs >= 4, `expected several runs, got ${result.runs}`);
  assert.equal(result.counters.chunks, chunksOfPass(200, 20));
  assert.equal(result.counters.migrated, 200);
  assert.equal(result.counters.rewritten, 200);
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 200,
  });
});

void test('an expired continue token resumes from the inconsistent token, not from the start', async () => {
  const crd = testCrd(`${uniq('exp')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 500, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const result = await withWorker(plane, async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4, qps: 200 });
    await eventually('a first chunk', async () => (await h.progress()).counters.chunks >= 1);
    await h.pause();
    await eventually('Paused with a continue token', async () => {
      const p = await h.progress();
      return p.phase === 'Paused' && p.continueTokenPresent;
    });
    // Expire the token: compact etcd past the revision it was issued at.
    await plane.kube.request('POST', `/api/v1/namespaces/default/configmaps`, {
      body: JSON.stringify({ metadata: { generateName: 'bump-' } }),
    });
    await compactEtcd(plane.etcd);
    await h.resume();
    return migrationResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.equal(result.counters.tokenResumes, 1, 'the expired token was not resumed');
  assert.equal(result.counters.listRestarts, 0);
  assert.equal(result.counters.migrated, 500, 'objects were migrated twice: the list restarted');
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 500,
  });
});
