/**
 * The initializer: `svm migrate --all` migrates every migratable resource as
 * one durable workflow and prints a correct summary. The client that started
 * it is killed mid-run: the workflow goes on, and the same command run again
 * joins it and prints the summary.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { migratableResources } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { endLeftovers, eventually, withWorker } from './helpers/migrate';
import { MIGRATE_ALL_WORKFLOW_ID, type MigrateAllRow } from '../src/contract/definitions';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

const run = promisify(execFile);
let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
  await endLeftovers(plane); // --all joins running migrations of every resource, and a running initializer
});
after(async () => plane?.close());

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
    async (_m, taskQueue) => {
      const env = {
        ...process.env,
        KUBECONFIG: plane.env.KUBECONFIG,
        TEMPORAL_ADDRESS: plane.temporal.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      };
      const svm = path.join(__dirname, '..', 'bin', 'svm.js');
      // The first client goes away once the workflow has started and a migration has ended.
      const first = spawn(process.execPath, [svm, 'migrate', '--all', '--parallel', '4'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let said = '';
      first.stderr!.on('data', (b: Buffer) => (said += b.toString('utf8')));
      await eventually('the first client to start the workflow and see a migration end', async () => /Succeeded /.test(said), 300_000);
      assert.match(
        said,
        new RegExp(`migrating ${expected.length} resources as workflow ${MIGRATE_ALL_WORKFLOW_ID}; it goes on if this command stops`),
      );
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));
      firstRun = (await plane.temporal.client.workflow.getHandle(MIGRATE_ALL_WORKFLOW_ID).describe()).runId;
      // The same command again: it joins the running workflow (or, had it ended meanwhile, starts a second one).
      const r = await run(process.execPath, [svm, 'migrate', '--all', '--parallel', '4'], {
        env,
        maxBuffer: 10 * 1024 * 1024,
        timeout: 600_000,
      }).catch((e: { code: number; stdout: string; stderr: string }) => e);
      return r as { stdout: string; stderr: string; code?: number };
    },
    { settings: { maxConcurrentChunks: 8 } },
  );
  // The run the first client started went on without it, to the end, every resource Succeeded.
  const firstRows = (await plane.temporal.client.workflow.getHandle(MIGRATE_ALL_WORKFLOW_ID, firstRun).result()) as MigrateAllRow[];
  assert.equal(firstRows.length, expected.length);
  assert.deepEqual(
    firstRows.filter((r) => r.result !== 'Succeeded').map((r) => `${r.resource}: ${r.message}`),
    [],
  );
  if (!/joined the migration of several resources already running/.test(out.stderr))
    process.stderr.write('note: the first run had ended before the second client started; it ran a second pass\n');
  process.stderr.write(`summary: ${out.stdout.trim().split('\n').pop()}\n`);
  assert.equal(out.code ?? 0, 0, `svm migrate --all failed:\n${out.stdout}\n${out.stderr.slice(-2000)}`);

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
