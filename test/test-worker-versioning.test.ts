/**
 * Upgrading svm while migrations run, with Worker Versioning
 * (docs/deploy.md, "Upgrading svm"): two worker processes of the same code,
 * versions N and N+1 of one Worker Deployment, each with
 * SVM_PROMOTE_VERSION as the shipped manifests set it. Migrations of several
 * resources (long lists that continue-as-new) start on N; N+1 starts and
 * makes itself Current; N is stopped (SIGTERM, as a rolling update does);
 * every migration finishes on N+1 (its versioningInfo says so, and `svm
 * status`), no workflow task of any run failed (no non-determinism), and
 * etcd holds every object at v2 with its content unchanged.
 *
 * Needs temporal-server: runs on the suite's one server plane
 * (serverPlane(), shared with test-temporal-server*.test.ts, which run just
 * before it). Each test uses a Worker Deployment and task queue of its own
 * and changes no dynamic config or namespace of the plane.
 *
 * Across the 0.2.0 release boundary (docs/deploy.md, "From a build before 0.2.0: drain or pin"): a worker built
 * from the last commit before the boundary runs a migration pinned to its version to its end, while the boundary
 * build is Current and migrates another resource.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { Migrator, deploymentVersionOf, type MigrationHandle } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { svmBuild } from '../src/config/build-info';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { toolPath } from '../src/dev/tools';
import { defaultBuildId, describeDeployment } from '../src/worker/versioning';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { serverPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

const run = promisify(execFile);
let plane: TestPlane | undefined;

before(async () => {
  plane = await serverPlane();
  assert.equal(plane.state.temporalMode, 'server');
  await installCrds(plane.kube);
});

after(async () => plane?.close());

const p = () => plane!;

interface WorkerProcess {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

/** `svm worker` as deploy/deployment.yaml runs it, one version of the deployment (of the checkout at `root`). */
function startWorker(taskQueue: string, deploymentName: string, buildId?: string, root = path.join(__dirname, '..')): WorkerProcess {
  const child = spawn(process.execPath, [path.join(root, 'bin', 'svm.js'), 'worker'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      KUBECONFIG: p().env.KUBECONFIG,
      TEMPORAL_ADDRESS: p().temporal.address,
      TEMPORAL_NAMESPACE: p().env.TEMPORAL_NAMESPACE ?? 'default',
      TEMPORAL_TASK_QUEUE: taskQueue,
      TEMPORAL_DEPLOYMENT_NAME: deploymentName,
      ...(buildId ? { TEMPORAL_WORKER_BUILD_ID: buildId } : {}),
      SVM_PROMOTE_VERSION: 'true',
      SVM_BRIDGE: 'false',
      SVM_WATCH_AGREEMENT: 'false',
      SVM_QPS: '0',
      SVM_LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const w: WorkerProcess = { child, lines: [], exited: new Promise((r) => child.once('exit', (code) => r(code))) };
  for (const s of [child.stdout!, child.stderr!])
    s.on('data', (b: Buffer) => w.lines.push(...b.toString('utf8').split('\n').filter(Boolean)));
  return w;
}

async function currentBuildId(client: Client, deploymentName: string): Promise<string | undefined> {
  return (await describeDeployment(client, deploymentName))?.view.current;
}

/** Every run of a workflow's continue-as-new chain, newest first, walked back from the latest run's history. */
async function runsOf(client: Client, workflowId: string) {
  const runs: Array<{ runId: string; events: temporal.api.history.v1.IHistoryEvent[] }> = [];
  let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    const history: temporal.api.history.v1.IHistory = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events: temporal.api.history.v1.IHistoryEvent[] = history.events ?? [];
    runs.push({ runId, events });
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return runs;
}

void test('migrations started on version N finish on N+1 after N+1 becomes Current and N stops: continue-as-new across, no non-determinism, etcd clean', async () => {
  const RESOURCES = 3;
  const COUNT = 600;
  const taskQueue = uniq('tq');
  const deploymentName = uniq('svm-worker');
  // N: svm's own build ID (<version>-<revision>, no TEMPORAL_WORKER_BUILD_ID); N+1: set, as the Worker Controller does.
  const buildN = defaultBuildId(svmBuild());
  const buildN1 = `${buildN}-next`;

  const crds: TestCrd[] = [];
  const before = new Map<string, Map<string, unknown>>();
  for (let i = 0; i < RESOURCES; i++) {
    const crd = testCrd(`${uniq(`ver${i}`)}.svm.test`);
    await applyCrd(p().kube, crd, 'v1');
    await createObjects(p().kube, crd, 'v1', COUNT, { namespace: uniq('ns'), payload: (j) => ({ index: j, resource: i }) });
    const stored = await readStoredObjects(p().etcd, `/registry/${crd.group}/${crd.plural}/`);
    before.set(crd.name, new Map(stored.map((o) => [o.key, o.object.spec])));
    await applyCrd(p().kube, crd, 'v2');
    crds.push(crd);
  }

  const client = p().temporal.client;
  const m = await Migrator.connect({ temporal: { address: p().temporal.address, taskQueue }, kubeconfig: p().env.KUBECONFIG });
  const workerN = startWorker(taskQueue, deploymentName);
  let workerN1: WorkerProcess | undefined;
  const t0 = Date.now();
  const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
  try {
    await eventually('version N to make itself Current', async () => (await currentBuildId(client, deploymentName)) === buildN, 180_000);
    process.stderr.write(`  N (${buildN}) Current after ${secs()}s\n`);

    // Slow enough to be mid-way when N+1 arrives; maxChunksPerRun 3 makes each pass several runs (continue-as-new).
    const handles: MigrationHandle[] = [];
    for (const crd of crds) handles.push(await m.start(crd.name, { chunkSize: 25, concurrency: 2, qps: 15, maxChunksPerRun: 3 }));
    for (const h of handles) {
      await eventually(`${h.workflowId} to run chunks on N`, async () => (await h.progress()).counters.chunks >= 2, 90_000);
      const v = deploymentVersionOf(await h.workflow.describe());
      assert.deepEqual(v, { deploymentName, buildId: buildN, behavior: 'AUTO_UPGRADE' }, `${h.workflowId} runs on N`);
    }
    process.stderr.write(`  every migration running on N after ${secs()}s\n`);

    workerN1 = startWorker(taskQueue, deploymentName, buildN1);
    await eventually('version N+1 to make itself Current', async () => (await currentBuildId(client, deploymentName)) === buildN1, 180_000);
    process.stderr.write(`  N+1 (${buildN1}) Current after ${secs()}s\n`);
    // The upgrade happens under running migrations, not after them.
    for (const h of handles)
      assert.equal((await h.workflow.describe()).status.name, 'RUNNING', `${h.workflowId} still runs when N+1 is Current`);

    // N stops as a rolling update stops it; it does not take the deployment back.
    workerN.child.kill('SIGTERM');
    assert.equal(await workerN.exited, 0, 'version N stops cleanly on SIGTERM');
    process.stderr.write(`  N stopped after ${secs()}s\n`);

    for (const h of handles) {
      const result = await migrationResult(h);
      assert.equal(result.phase, 'Succeeded', `${h.workflowId}: ${result.message}`);
      assert.equal(result.counters.migrated + result.counters.conflicts, COUNT, `${h.workflowId} accounts for every object`);
      assert.equal(result.counters.failed, 0);
      assert.ok(result.runs > 2, `${h.workflowId} continued as new (${result.runs} runs)`);
      const v = deploymentVersionOf(await h.workflow.describe());
      assert.deepEqual(v, { deploymentName, buildId: buildN1, behavior: 'AUTO_UPGRADE' }, `${h.workflowId} finished on N+1`);
    }
    process.stderr.write(`  every migration Succeeded on N+1 after ${secs()}s\n`);
    assert.equal(await currentBuildId(client, deploymentName), buildN1);

    // No workflow task of any run failed: nothing replayed differently on N+1 (a non-determinism error fails one).
    for (const h of handles) {
      const runs = await runsOf(client, h.workflowId);
      assert.ok(runs.length > 2, `${h.workflowId}: ${runs.length} runs`);
      for (const r of runs) {
        const failed = r.events.filter((e) => e.workflowTaskFailedEventAttributes);
        assert.deepEqual(
          failed.map((e) => e.workflowTaskFailedEventAttributes?.failure?.message),
          [],
          `${h.workflowId} run ${r.runId}: failed workflow tasks`,
        );
      }
      // Runs on both versions: the chain started on N, and its last run is on N+1.
      const completedBy = new Set(
        runs.flatMap((r) =>
          r.events.flatMap((e) => {
            const b = e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId;
            return b ? [b] : [];
          }),
        ),
      );
      assert.deepEqual([...completedBy].sort(), [buildN, buildN1].sort(), `${h.workflowId}: workflow tasks completed by N and N+1`);
    }
    for (const w of [workerN, workerN1])
      assert.deepEqual(
        w.lines.filter((l) => /nondetermin/i.test(l)),
        [],
        'no non-determinism in the workers’ logs',
      );

    // svm status names the version that ran each migration.
    for (const crd of crds) {
      const [s] = await m.status(crd.name);
      assert.deepEqual(s?.deploymentVersion, { deploymentName, buildId: buildN1, behavior: 'AUTO_UPGRADE' });
    }
    const { stdout } = await run(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'status', crds[0]!.name, '-o', 'wide'], {
      env: { ...process.env, KUBECONFIG: p().env.KUBECONFIG, TEMPORAL_ADDRESS: p().temporal.address, TEMPORAL_TASK_QUEUE: taskQueue },
    });
    assert.match(
      stdout,
      new RegExp(
        `^${crds[0]!.name.replace(/\./g, '\\.')} +Succeeded .* ${deploymentName}\\.${buildN1.replace(/\./g, '\\.')} \\(AUTO_UPGRADE\\) `,
        'm',
      ),
    );

    // etcd, the judge: every object at v2, content unchanged.
    for (const crd of crds) {
      const prefix = `/registry/${crd.group}/${crd.plural}/`;
      assert.deepEqual((await storedVersions(p().etcd, prefix)).byApiVersion, { [`${crd.group}/v2`]: COUNT });
      const was = before.get(crd.name)!;
      for (const o of await readStoredObjects(p().etcd, prefix)) assert.deepEqual(o.object.spec, was.get(o.key), `content of ${o.key}`);
    }
  } finally {
    workerN.child.kill('SIGKILL');
    workerN1?.child.kill('SIGKILL');
    await m.close();
  }
});

void test('a restarted worker of an older version does not take the deployment back', async () => {
  // After the test above: start N again on a fresh deployment where N+1 is newer and Current.
  const taskQueue = uniq('tq');
  const deploymentName = uniq('svm-worker');
  const client = p().temporal.client;
  const a = startWorker(taskQueue, deploymentName, 'old');
  let b: WorkerProcess | undefined;
  let again: WorkerProcess | undefined;
  try {
    await eventually('old to become Current', async () => (await currentBuildId(client, deploymentName)) === 'old', 180_000);
    b = startWorker(taskQueue, deploymentName, 'new');
    await eventually('new to become Current', async () => (await currentBuildId(client, deploymentName)) === 'new', 180_000);
    a.child.kill('SIGTERM');
    await a.exited;
    again = startWorker(taskQueue, deploymentName, 'old');
    await eventually(
      'the restarted old worker to say it is older',
      async () => again!.lines.some((l) => l.includes('a newer version of this deployment exists')),
      180_000,
    );
    assert.equal(await currentBuildId(client, deploymentName), 'new');
  } finally {
    for (const w of [a, b, again]) w?.child.kill('SIGKILL');
  }
});

/**
 * The last commit before the 0.2.0 release boundary (docs/development.md, "The patch ledger"): its workflows still
 * ask patched(); the boundary folded them.
 */
const PRE_BOUNDARY = '011f753996480f1c88d116ed2b275ad641e83a5b';

/**
 * A checkout of PRE_BOUNDARY beside this one (git archive, node_modules linked from this checkout), built as the
 * image builds (build:fast, build:workflows, build:kube); kept in the temporary directory under its commit, so a
 * second run reuses it.
 */
async function preBoundaryBuild(): Promise<string> {
  const repo = path.join(__dirname, '..');
  try {
    await run('git', ['-C', repo, 'cat-file', '-e', `${PRE_BOUNDARY}^{commit}`]);
  } catch {
    assert.fail(
      `commit ${PRE_BOUNDARY} (the last before the 0.2.0 release boundary) is not in this checkout's history: ` +
        `run \`git fetch --unshallow\` (or \`git fetch origin ${PRE_BOUNDARY}\`) in ${repo}, then this test again`,
    );
  }
  const dir = path.join(os.tmpdir(), `svm-pre-boundary-${PRE_BOUNDARY.slice(0, 12)}`);
  const stamp = path.join(dir, '.built');
  if (fs.existsSync(stamp)) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  await run('sh', ['-c', `git -C "${repo}" archive ${PRE_BOUNDARY} | tar -x -C "${dir}"`]);
  fs.symlinkSync(path.join(repo, 'node_modules'), path.join(dir, 'node_modules'));
  for (const script of ['build:fast', 'build:workflows', 'build:kube'])
    await run('npm', ['run', '--silent', script], { cwd: dir, maxBuffer: 16 << 20 });
  fs.writeFileSync(stamp, `${PRE_BOUNDARY}\n`);
  return dir;
}

/** The build IDs whose workers completed a workflow task of any run of the workflow, and the failed tasks' messages. */
async function tasksOf(client: Client, workflowId: string): Promise<{ builds: string[]; failed: string[] }> {
  const builds = new Set<string>();
  const failed: string[] = [];
  for (const r of await runsOf(client, workflowId))
    for (const e of r.events) {
      const b = e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId;
      if (b) builds.add(b);
      if (e.workflowTaskFailedEventAttributes) failed.push(e.workflowTaskFailedEventAttributes.failure?.message ?? '(no message)');
    }
  return { builds: [...builds].sort(), failed };
}

void test('across the 0.2.0 boundary: a migration pinned to the pre-boundary build finishes there while the boundary build is Current and migrates another resource', async () => {
  const COUNT = 40;
  const t0 = Date.now();
  const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
  const oldRoot = await preBoundaryBuild();
  process.stderr.write(`  the pre-boundary build (${PRE_BOUNDARY.slice(0, 7)}) ready after ${secs()}s\n`);

  const taskQueue = uniq('tq');
  const deploymentName = uniq('svm-worker');
  const buildOld = `0.1.0-${PRE_BOUNDARY.slice(0, 7)}`;
  const buildNew = defaultBuildId(svmBuild());
  const crds: TestCrd[] = [];
  for (const i of [0, 1]) {
    const crd = testCrd(`${uniq(`bound${i}`)}.svm.test`);
    await applyCrd(p().kube, crd, 'v1');
    await createObjects(p().kube, crd, 'v1', COUNT, { namespace: uniq('ns'), payload: (j) => ({ index: j }) });
    await applyCrd(p().kube, crd, 'v2');
    crds.push(crd);
  }
  const [crdOld, crdNew] = crds as [TestCrd, TestCrd];

  const client = p().temporal.client;
  const m = await Migrator.connect({ temporal: { address: p().temporal.address, taskQueue }, kubeconfig: p().env.KUBECONFIG });
  const workerOld = startWorker(taskQueue, deploymentName, buildOld, oldRoot);
  let workerNew: WorkerProcess | undefined;
  try {
    await eventually(
      'the pre-boundary version to make itself Current',
      async () => (await currentBuildId(client, deploymentName)) === buildOld,
      180_000,
    );
    // Four chunks of 10 at 4 objects/s: paused after its first, so that it is still running when the boundary build arrives.
    const a = await m.start(crdOld.name, { chunkSize: 10, concurrency: 1, qps: 4 });
    await eventually(
      `${a.workflowId} to run a chunk on the pre-boundary build`,
      async () => (await a.progress()).counters.chunks >= 1,
      90_000,
    );
    await a.steer('pause');
    // Pinned to the version that runs it, as docs/deploy.md says, with the Temporal CLI.
    await run(toolPath('temporal-cli'), [
      'workflow',
      'update-options',
      '--address',
      p().temporal.address,
      '--namespace',
      p().env.TEMPORAL_NAMESPACE ?? 'default',
      '--workflow-id',
      a.workflowId,
      '--versioning-override-behavior',
      'pinned',
      '--versioning-override-deployment-name',
      deploymentName,
      '--versioning-override-build-id',
      buildOld,
    ]);
    assert.deepEqual(deploymentVersionOf(await a.workflow.describe()), { deploymentName, buildId: buildOld, behavior: 'PINNED' });
    process.stderr.write(`  ${a.workflowId} paused and pinned to ${buildOld} after ${secs()}s\n`);

    workerNew = startWorker(taskQueue, deploymentName, buildNew);
    await eventually(
      'the boundary build to make itself Current',
      async () => (await currentBuildId(client, deploymentName)) === buildNew,
      180_000,
    );
    process.stderr.write(`  the boundary build (${buildNew}) Current after ${secs()}s\n`);
    assert.equal((await a.workflow.describe()).status.name, 'RUNNING', `${a.workflowId} still runs when the boundary build is Current`);

    const b = await m.start(crdNew.name, { chunkSize: 10, concurrency: 1, qps: 20 });
    await a.resume();
    for (const [h, build] of [
      [a, buildOld],
      [b, buildNew],
    ] as const) {
      const result = await migrationResult(h);
      assert.equal(result.phase, 'Succeeded', `${h.workflowId}: ${result.message}`);
      assert.equal(result.counters.migrated + result.counters.conflicts, COUNT, `${h.workflowId} accounts for every object`);
      const tasks = await tasksOf(client, h.workflowId);
      assert.deepEqual(tasks.failed, [], `${h.workflowId}: failed workflow tasks`);
      assert.deepEqual(tasks.builds, [build], `${h.workflowId}: every workflow task completed by ${build}`);
    }
    process.stderr.write(`  both Succeeded, each on its own build, after ${secs()}s\n`);
    assert.equal(await currentBuildId(client, deploymentName), buildNew);
    for (const w of [workerOld, workerNew])
      assert.deepEqual(
        w.lines.filter((l) => /nondetermin/i.test(l)),
        [],
        'no non-determinism in the workers’ logs',
      );

    // etcd, the judge: every object of both resources at v2.
    for (const crd of crds)
      assert.deepEqual((await storedVersions(p().etcd, `/registry/${crd.group}/${crd.plural}/`)).byApiVersion, {
        [`${crd.group}/v2`]: COUNT,
      });
  } finally {
    workerOld.child.kill('SIGKILL');
    workerNew?.child.kill('SIGKILL');
    await m.close();
  }
});
