/**
 * The contract from outside TypeScript: examples/shell/*.sh drive
 * migrateResource with nothing but the Temporal CLI, and examples/go (the
 * Temporal Go SDK, built into the tools cache) does the same from Go, against the real plane
 * (etcd as judge): the minimal start, the synchronous resolution, pause,
 * resume, progress and result; an abort that leaves storedVersions as they
 * were; a second start that joins the running migration; and refusals
 * before anything is written (a bad resource, an invalid input answered in
 * the Update-with-Start, a workflow ID that is not the resource's).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { WithStartWorkflowOperation, WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, type Workflow } from '@temporalio/common';
import { startOptions } from '../src/contract/start-options';
import { MigrationCluster } from '../src/contract/search-attributes';
import type { WorkerSettings } from '../src/worker/config';
import { storedVersions } from '../src/dev/etcd-truth';
import { getCrd } from '../src/kube/crds';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker, workflowResult } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { forgetNames, freeIdentity } from './helpers/identity';

const run = promisify(execFile);
const EXAMPLES = path.join(__dirname, '..', 'examples', 'shell');
let plane: TestPlane;
/** The Go example's binary: scripts/tools.d/go-example.sh builds it into the tools cache when missing. */
let upgradetool: string;
before(async () => {
  plane = await testPlane();
  const { stdout } = await run('bash', [path.join(__dirname, '..', 'scripts', 'tools.d', 'go-example.sh')], { timeout: 1_800_000 });
  upgradetool = /^upgradetool=(.+)$/m.exec(stdout)![1]!;
});
after(async () => plane?.close());

const cli = (taskQueue: string) => ({
  ...process.env,
  TEMPORAL_CLI: plane.env.TEMPORAL_CLI!,
  TEMPORAL_ADDRESS: plane.env.TEMPORAL_ADDRESS!,
  TEMPORAL_NAMESPACE: plane.env.TEMPORAL_NAMESPACE!,
  SVM_TASK_QUEUE: taskQueue,
});

/** The JSON documents a script printed after each "== step" line. */
function sections(stdout: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const part of stdout.split(/^== /m).slice(1)) {
    const nl = part.indexOf('\n');
    out[part.slice(0, nl).trim()] = JSON.parse(part.slice(nl + 1));
  }
  return out;
}

void test('shell, Temporal CLI only: minimal start, resolution, pause, progress, resume, result; etcd holds only v2', async () => {
  const crd = testCrd(`${uniq('sh')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 200, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  await withWorker(plane, async (_m, taskQueue) => {
    const { stdout } = await run(path.join(EXAMPLES, 'migrate.sh'), [crd.name], {
      env: { ...cli(taskQueue), SVM_OPTIONS: '{"qps": 40, "chunkSize": 50}' },
      timeout: 180_000,
    });
    const s = sections(stdout) as Record<string, Record<string, unknown>>;
    console.log(stdout.split('\n').slice(0, 3).join('\n'));
    // The Update-with-Start's answer: the workflow it started (or joined) and the resolved resource.
    assert.equal(s.resolution!.workflowId, `migrate/${crd.name}`);
    assert.equal((s.resolution!.updateResult as { resource: string } | undefined)?.resource, crd.plural);
    const paused = (s.pause!.result ?? s.pause) as { paused: boolean; resource: string };
    assert.equal(paused.paused, true);
    assert.equal(paused.resource, crd.name);
    const result = (s.result!.result ?? s.result) as { phase: string; counters: { migrated: number } };
    assert.equal(result.phase, 'Succeeded');
    assert.equal(result.counters.migrated, 200);
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 200,
  });
});

void test('shell: a second start joins the running migration; an abort is acknowledged and storedVersions stay as they were', async () => {
  const crd = testCrd(`${uniq('ab')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const id = `migrate/${crd.name}`;
  await withWorker(plane, async (_m, taskQueue) => {
    const start = () =>
      run(
        plane.env.TEMPORAL_CLI!,
        [
          'workflow',
          'start',
          '--type',
          'migrateResource',
          '--task-queue',
          taskQueue,
          '--workflow-id',
          id,
          '--id-conflict-policy',
          'UseExisting',
          '--input',
          JSON.stringify({ resource: crd.name, options: { qps: 10 } }),
          '-o',
          'json',
        ],
        { env: cli(taskQueue) },
      );
    const first = JSON.parse((await start()).stdout) as { runId: string };
    const second = JSON.parse((await start()).stdout) as { runId: string };
    assert.equal(second.runId, first.runId, 'the second start joined the first');
    await eventually(
      'running',
      async () => (await plane.temporal.client.workflow.getHandle(id).query<{ phase: string }>('progress')).phase === 'Running',
    );
    const { stdout } = await run(path.join(EXAMPLES, 'abort.sh'), [crd.name, 'rollback of the upgrade'], {
      env: cli(taskQueue),
      timeout: 120_000,
    });
    const s = sections(stdout) as Record<string, Record<string, unknown>>;
    const ack = (s.abort!.result ?? s.abort) as { abortRequested?: string };
    assert.equal(ack.abortRequested, 'rollback of the upgrade');
    const result = (s.result!.result ?? s.result) as { phase: string; message: string };
    assert.equal(result.phase, 'Aborted');
    // An abort of a migration that has ended is refused with the reason.
    await assert.rejects(
      run(path.join(EXAMPLES, 'abort.sh'), [crd.name], { env: cli(taskQueue), timeout: 60_000 }),
      (err: { stderr?: string }) => /completed|ended|not found|NotFound/i.test(err.stderr ?? ''),
    );
  });
  assert.deepEqual((await getCrd(plane.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions?.sort(), ['v1', 'v2']);
});

void test('a bad minimal start is refused at once with the accepted forms, in the same call (resolution update), and nothing is written', async () => {
  await withWorker(plane, async (_m, taskQueue) => {
    for (const [resource, problem] of [
      ['deployments/scale', /subresource/],
      ['nosuchthings.example.com', /serve no resource \\?"nosuchthings\\?" in group \\?"example.com\\?"/],
      ['tokenreviews.authentication.k8s.io', /not persisted/],
    ] as const) {
      const id = `migrate/${resource}`;
      // As examples/shell/migrate.sh sends it: the start and the resolution update in one call (Update-with-Start).
      const refused = await run(
        plane.env.TEMPORAL_CLI!,
        [
          'workflow',
          'execute-update-with-start',
          '--type',
          'migrateResource',
          '--task-queue',
          taskQueue,
          '--workflow-id',
          id,
          '--id-conflict-policy',
          'UseExisting',
          '--input',
          JSON.stringify({ resource }),
          '--update-name',
          'resolution',
          '--update-input',
          '{}',
        ],
        {
          env: cli(taskQueue),
        },
      ).then(
        () => '',
        (err: { stderr?: string; stdout?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
      );
      assert.match(refused, problem, resource);
      assert.match(refused, /accepted forms/);
      const desc = await plane.temporal.client.workflow.getHandle(id).describe();
      await eventually('failed', async () => (await plane.temporal.client.workflow.getHandle(id).describe()).status.name === 'FAILED');
      assert.ok(desc);
    }
  });
});

/** A start of the resource with the Temporal CLI alone (how a shell tool starts it); answers the run ID. */
async function cliStart(taskQueue: string, resource: string, options: Record<string, unknown>): Promise<string> {
  const { stdout } = await run(
    plane.env.TEMPORAL_CLI!,
    ['workflow', 'start', '--type', 'migrateResource', '--task-queue', taskQueue, '--workflow-id', `migrate/${resource}`].concat([
      '--id-conflict-policy',
      'UseExisting',
      '--input',
      JSON.stringify({ resource, options }),
      '-o',
      'json',
    ]),
    { env: cli(taskQueue) },
  );
  return (JSON.parse(stdout) as { runId: string }).runId;
}

type Steer = { paused: boolean; resource: string; phase: string; abortRequested?: string };
type Result = { phase: string; counters: { migrated: number }; message?: string };

void test('Go SDK: Update-with-Start (minimal input) answers the resolution, pause and resume are acknowledged, progress and result decode with the contract types; etcd holds only v2', async () => {
  const crd = testCrd(`${uniq('go')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 200, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  await withWorker(plane, async (_m, taskQueue) => {
    const { stdout } = await run(upgradetool, ['migrate', crd.name, '{"qps": 40, "chunkSize": 50}'], {
      env: cli(taskQueue),
      timeout: 180_000,
    });
    const s = sections(stdout);
    const resolved = s.resolution as { resource: string; group: string; version: string; custom: boolean };
    assert.deepEqual([resolved.resource, resolved.group, resolved.version, resolved.custom], [crd.plural, crd.group, 'v2', true]);
    assert.equal((s.started as { workflowId: string }).workflowId, `migrate/${crd.name}`);
    assert.equal((s.pause as Steer).paused, true);
    assert.equal((s.progress as Steer).resource, crd.name);
    assert.equal((s.resume as Steer).paused, false);
    const result = s.result as Result;
    assert.equal(result.phase, 'Succeeded');
    assert.equal(result.counters.migrated, 200);
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 200,
  });
  assert.deepEqual((await getCrd(plane.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions, ['v2']);
});

void test("Go SDK in a fleet (SVM_CLUSTER): migrate/<cluster>/<resource> on the cluster's task queue, MigrationCluster set, run by that cluster's worker; etcd holds only v2", async () => {
  const crd = testCrd(`${uniq('gc')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 50, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const cluster = uniq('go');
  // The plane stands for cluster `cluster` in this test: its uid free for that name, and forgotten with it after.
  await freeIdentity(plane.temporal.client, plane.kube, cluster);
  try {
    await withWorker(
      plane,
      async (_m, taskQueue) => {
        const { stdout } = await run(upgradetool, ['migrate', crd.name], {
          env: { ...cli(taskQueue), SVM_CLUSTER: cluster },
          timeout: 180_000,
        });
        const s = sections(stdout);
        const id = `migrate/${cluster}/${crd.name}`;
        assert.equal((s.started as { workflowId: string }).workflowId, id);
        assert.equal((s.result as Result).phase, 'Succeeded');
        const d = await plane.temporal.client.workflow.getHandle(id).describe();
        assert.equal(d.taskQueue, `${taskQueue}/cluster/${cluster}`);
        assert.equal(d.typedSearchAttributes.get(MigrationCluster), cluster);
      },
      // Only the cluster: workerSettings lays the overrides' temporal over the test's own (its task queue).
      { settings: { temporal: { cluster } as WorkerSettings['temporal'] } },
    );
  } finally {
    await forgetNames(plane.temporal.client, [cluster]);
  }
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 50,
  });
});

void test('Go SDK joins a migration a shell tool started (same run), and aborts another: Aborted with the reason, storedVersions kept', async () => {
  const joined = testCrd(`${uniq('gj')}.svm.test`);
  const aborted = testCrd(`${uniq('ga')}.svm.test`);
  for (const crd of [joined, aborted]) {
    await applyCrd(plane.kube, crd, 'v1');
    await createObjects(plane.kube, crd, 'v1', 150, { namespace: uniq('ns') });
    await applyCrd(plane.kube, crd, 'v2');
  }
  await withWorker(plane, async (_m, taskQueue) => {
    const first = await cliStart(taskQueue, joined.name, { qps: 30, chunkSize: 50 });
    const { stdout } = await run(upgradetool, ['migrate', joined.name], { env: cli(taskQueue), timeout: 180_000 });
    const s = sections(stdout);
    assert.equal((s.started as { runId: string }).runId, first, 'the Go tool joined the running migration');
    assert.equal((s.result as Result).phase, 'Succeeded');
    assert.equal((s.result as Result).counters.migrated, 150);

    await cliStart(taskQueue, aborted.name, { qps: 10, chunkSize: 20 });
    const id = `migrate/${aborted.name}`;
    await eventually(
      'running',
      async () => (await plane.temporal.client.workflow.getHandle(id).query<{ phase: string }>('progress')).phase === 'Running',
    );
    const a = sections((await run(upgradetool, ['abort', aborted.name, 'rollback'], { env: cli(taskQueue), timeout: 120_000 })).stdout);
    assert.equal((a.abort as Steer).abortRequested, 'rollback');
    assert.equal((a.result as Result).phase, 'Aborted');
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: joined.group, resource: joined.plural, custom: true })).byApiVersion, {
    [`${joined.group}/v2`]: 150,
  });
  assert.deepEqual((await getCrd(plane.kube, { group: aborted.group, resource: aborted.plural })).status?.storedVersions?.sort(), [
    'v1',
    'v2',
  ]);
});

void test('Go SDK: a bad resource is refused in the same call (exit 2, the reason and the accepted forms), and nothing is written', async () => {
  await withWorker(plane, async (_m, taskQueue) => {
    for (const [resource, problem] of [
      ['deployments/scale', /subresource/],
      ['nosuchthings.example.com', /nosuchthings/],
    ] as const) {
      const refused = await run(upgradetool, ['migrate', resource], { env: cli(taskQueue), timeout: 60_000 }).then(
        () => ({ code: 0, stderr: '' }),
        (err: { code?: number; stderr?: string }) => ({ code: err.code, stderr: err.stderr ?? '' }),
      );
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /refused \(InvalidResource\)/);
      assert.match(refused.stderr, problem);
      assert.match(refused.stderr, /accepted forms/);
    }
  });
});

/** What etcd holds of a resource, and its CRD's storedVersions: a refusal must leave both as they were. */
async function untouched(crd: ReturnType<typeof testCrd>, objects: number): Promise<void> {
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v1`]: objects,
  });
  assert.deepEqual((await getCrd(plane.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions?.sort(), ['v1', 'v2']);
}

/** The ApplicationFailure an Update-with-Start of `resolution` was answered with. */
async function resolutionRefusal(op: WithStartWorkflowOperation<Workflow>): Promise<ApplicationFailure> {
  try {
    await plane.temporal.client.workflow.executeUpdateWithStart('resolution', { args: [{}], startWorkflowOperation: op });
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) return err.cause;
    throw err;
  }
  assert.fail('the resolution update should have been refused');
}

async function workflowFailure(id: string): Promise<ApplicationFailure> {
  try {
    await workflowResult(plane.temporal.client.workflow.getHandle(id));
  } catch (err) {
    if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) return err.cause;
    throw err;
  }
  assert.fail(`${id} should have failed`);
}

void test('an Update-with-Start whose input is invalid is answered InvalidInput naming the field (TypeScript and Go), the workflow fails the same, and nothing is written', async () => {
  const crd = testCrd(`${uniq('bad')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 20, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const id = `migrate/${crd.name}`;
  await withWorker(plane, async (_m, taskQueue) => {
    const refused = await resolutionRefusal(
      new WithStartWorkflowOperation('migrateResource', {
        taskQueue,
        workflowId: id,
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ resource: crd.name, options: { chunkSize: 0 } }],
      }),
    );
    assert.equal(refused.type, 'InvalidInput');
    assert.match(refused.message, /options\.chunkSize: chunkSize must be a whole number between 1 and 10000/);
    const failed = await workflowFailure(id);
    assert.equal(failed.type, 'InvalidInput');
    assert.equal(failed.message, refused.message);

    // The Go tool's Update-with-Start (a new run: the refused one has ended).
    const go = await run(upgradetool, ['migrate', crd.name, '{"qps": 1000000}'], { env: cli(taskQueue), timeout: 60_000 }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code?: number; stderr?: string }) => ({ code: err.code, stderr: err.stderr ?? '' }),
    );
    assert.equal(go.code, 2, go.stderr);
    assert.match(go.stderr, /refused \(InvalidInput\): .*options\.qps: qps must be a whole number between 0 and 100000/);
  });
  await untouched(crd, 20);
});

void test("a full-reference start under an ID that is not its resource's is refused (InvalidInput) before anything is written", async () => {
  const crd = testCrd(`${uniq('wid')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 20, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  await withWorker(plane, async (m, taskQueue) => {
    const ref = await m.resolve(crd.name);
    const id = `migrate/${crd.name}-mine`;
    const refused = await resolutionRefusal(
      new WithStartWorkflowOperation('migrateResource', {
        taskQueue,
        workflowId: id,
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ resource: ref }],
      }),
    );
    assert.equal(refused.type, 'InvalidInput');
    assert.match(
      refused.message,
      new RegExp(`the workflow ID must be migrate/${crd.name.replace(/\./g, '\\.')} .*, not ${id.replace(/\./g, '\\.')}$`),
    );
    assert.equal((await workflowFailure(id)).type, 'InvalidInput');
    await untouched(crd, 20);
    // The same input under the resource's own ID (start options) runs.
    const h = await plane.temporal.client.workflow.start('migrateResource', { ...startOptions(ref, taskQueue), args: [{ resource: ref }] });
    assert.equal(((await workflowResult(h)) as { phase: string }).phase, 'Succeeded');
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 20,
  });
});
