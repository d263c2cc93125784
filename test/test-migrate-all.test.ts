/**
 * The initializer: `svm migrate --all` migrates every migratable resource as
 * one durable workflow and prints a correct summary. The client that started
 * it is killed mid-run: the workflow goes on, and the same command run again
 * joins it and prints the summary.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { migratableResources } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { endLeftovers, eventually, withWorker } from './helpers/migrate';
import { bounded, workflowResult } from './helpers/waits';
import { MIGRATE_ALL_WORKFLOW_ID, migrateAllProgressQuery, type MigrateAllRow } from '../src/contract/definitions';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
  await endLeftovers(plane); // --all joins running migrations of every resource, and a running initializer
});
after(async () => plane?.close());

/** `svm migrate --all --parallel 4` as a process of its own, its output gathered as it comes. */
function migrateAll(env: NodeJS.ProcessEnv): { child: ChildProcess; out: { stdout: string; stderr: string }; exited: Promise<number> } {
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'migrate', '--all', '--parallel', '4'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (b: Buffer) => (out.stdout += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (out.stderr += b.toString('utf8')));
  const exited = new Promise<number>((r) => child.once('exit', (code, signal) => r(code ?? (signal ? 128 : 0))));
  return { child, out, exited };
}

void test('svm migrate --all migrates every resource once, with a correct summary', async () => {
  const crd = testCrd(`${uniq('all')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 250, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const expected = migratableResources(await plane.kube.discover()).map((r) => (r.group ? `${r.name}.${r.group}` : r.name));
  assert.ok(expected.includes('events') && !expected.includes('events.events.k8s.io'), 'events share storage: migrated once');
  assert.ok(expected.includes('secrets') && expected.includes('deployments.apps') && expected.includes(crd.name));
  assert.ok(!expected.some((r) => r.includes('/')) && !expected.includes('tokenreviews.authentication.k8s.io'));

  let firstRun: string | undefined;
  const out = await withWorker(
    plane,
    async (m, taskQueue) => {
      const env = {
        ...process.env,
        KUBECONFIG: plane.env.KUBECONFIG,
        TEMPORAL_ADDRESS: plane.temporal.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      };
      // The CRD's migration, started first and paused: the run the first client starts joins it (a resource whose
      // migration is running is followed, not started twice), and cannot end until it is resumed, after the second
      // client has joined that run.
      const held = await m.start(crd.name);
      await held.steer('pause');
      let resumed = false;
      const clients: Array<ReturnType<typeof migrateAll>> = [];
      const client = () => {
        const c = migrateAll(env);
        clients.push(c);
        return c;
      };
      const stderrSoFar = (c: ReturnType<typeof migrateAll>) => () => `its stderr so far: ${c.out.stderr.slice(-1000)}`;
      try {
        // The first client goes away once the workflow has started and a migration has ended.
        const first = client();
        await eventually(
          'the first client to start the workflow and see a migration end',
          async () => /Succeeded /.test(first.out.stderr),
          300_000,
          stderrSoFar(first),
        );
        assert.match(
          first.out.stderr,
          new RegExp(`migrating ${expected.length} resources as workflow ${MIGRATE_ALL_WORKFLOW_ID}; it goes on if this command stops`),
        );
        first.child.kill('SIGKILL');
        await first.exited;
        const running = await plane.temporal.client.workflow.getHandle(MIGRATE_ALL_WORKFLOW_ID).describe();
        assert.equal(running.status.name, 'RUNNING', 'the run goes on without the client that started it');
        firstRun = running.runId;
        // The same command again: it joins the running workflow.
        const second = client();
        await eventually(
          'the second client to join the running workflow',
          async () => /joined the migration of several resources already running/.test(second.out.stderr),
          120_000,
          stderrSoFar(second),
        );
        // Resumed only once the run follows it: its turn comes late among the resources (a CRD sorts after the
        // built-ins), and a migration resumed and ended before then would be started again, not joined.
        const run = plane.temporal.client.workflow.getHandle(MIGRATE_ALL_WORKFLOW_ID);
        const follows = async () =>
          ((await run.describe()).raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'followMigration');
        await eventually(`the run to follow the paused migration of ${crd.name}`, follows, 300_000, async () => {
          const p = await run.query(migrateAllProgressQuery).catch(() => undefined);
          return p ? `${p.done.length} of ${p.total} done, running: ${p.running.join(', ')}` : 'no progress answered';
        });
        await held.steer('resume');
        resumed = true;
        const code = await bounded('the second client to print the summary', second.exited, 600_000, stderrSoFar(second));
        return { ...second.out, code };
      } finally {
        for (const c of clients) c.child.kill('SIGKILL');
        if (!resumed) await held.workflow.terminate('test-migrate-all ended before it resumed it').catch(() => undefined);
      }
    },
    { settings: { maxConcurrentChunks: 8 } },
  );
  // The run the first client started went on without it, to the end, every resource Succeeded; the second client
  // followed that run and started none.
  const firstRows = (await workflowResult(plane.temporal.client.workflow.getHandle(MIGRATE_ALL_WORKFLOW_ID, firstRun))) as MigrateAllRow[];
  assert.equal(firstRows.length, expected.length);
  assert.deepEqual(
    firstRows.filter((r) => r.result !== 'Succeeded').map((r) => `${r.resource}: ${r.message}`),
    [],
  );
  assert.equal((await plane.temporal.client.workflow.getHandle(MIGRATE_ALL_WORKFLOW_ID).describe()).runId, firstRun, 'no second run');
  assert.doesNotMatch(out.stderr, /resources as workflow .*; it goes on if this command stops/, 'the second client started no workflow');
  assert.ok(
    firstRows.find((r) => r.resource === crd.name)?.joined,
    `the run joined the CRD's running migration: ${JSON.stringify(firstRows.find((r) => r.resource === crd.name))}`,
  );
  process.stderr.write(`summary: ${out.stdout.trim().split('\n').pop()}\n`);
  assert.equal(out.code, 0, `svm migrate --all failed:\n${out.stdout}\n${out.stderr.slice(-2000)}`);

  const rows = out.stdout
    .split('\n')
    .slice(1)
    .map((l) => l.split(/\s{2,}/))
    .filter((c) => c.length === 4);
  const byName = new Map(rows.map((c) => [c[0]!, { objects: Number(c[1]), result: c[2] }]));
  assert.deepEqual([...byName.keys()].sort(), [...expected].sort(), 'one summary row per migratable resource');
  for (const [name, r] of byName) assert.equal(r.result, 'Succeeded', `${name}: ${r.result}`);
  assert.deepEqual(byName.get(crd.name), { objects: 250, result: 'Succeeded' });
  const secrets = await storedVersions(plane.etcd, '/registry/secrets/');
  assert.equal(byName.get('secrets')!.objects, secrets.total, 'the secrets row disagrees with etcd');
  assert.match(out.stdout, new RegExp(`^${expected.length} resources, \\d+ objects, ${expected.length} succeeded, 0 not$`, 'm'));
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 250,
  });
});
