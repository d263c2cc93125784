/**
 * svm on the Temporal server users deploy: temporal-server on PostgreSQL
 * (`svm dev up --temporal server`), on the suite's one server plane
 * (serverPlane(): the shared plane runs the dev server; the files that need
 * temporal-server share this one). The plane initializes a private PostgreSQL 15
 * cluster, applies both schemas with temporal-sql-tool, starts the server and
 * its UI and registers the namespace and svm's search attributes on SQL
 * visibility. Then one real migration runs through it, etcd the judge, and
 * the Temporal CLI finds it by its search attribute.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { msToTs } from '@temporalio/common/lib/time';
import { installCrds } from '../src/client/cli-migrate';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { isRunning } from '../src/dev/plane';
import { searchAttributeDefinitions } from '../src/contract/search-attributes';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { serverPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane | undefined;

before(async () => {
  plane = await serverPlane();
  await installCrds(plane.kube);
});

after(async () => plane?.close());

const p = () => plane!;

void test('the plane runs temporal-server on its own PostgreSQL, and the env points every helper at it', async () => {
  const state = p().state;
  assert.equal(state.temporalMode, 'server');
  assert.ok(isRunning(state.temporalServer!.postgres), 'PostgreSQL runs');
  assert.ok(isRunning(state.temporal), 'temporal-server runs');
  assert.ok(isRunning(state.temporalServer!.ui), 'the UI server runs');
  assert.match(state.temporal.binary, /temporal-server-v\d/);
  assert.equal(p().env.TEMPORAL_ADDRESS, `127.0.0.1:${state.temporal.port}`);
  assert.equal(p().env.SVM_TEMPORAL, 'server');
  const info = await p().temporal.connection.workflowService.getClusterInfo({});
  assert.equal(info.persistenceStore, 'postgres12');
  assert.equal(info.visibilityStore, 'postgres12');
  assert.equal(`v${info.serverVersion}`, state.temporalServer!.version);
  const ui = await fetch(p().env.TEMPORAL_UI_URL!);
  assert.equal(ui.status, 200, 'the Web UI answers');
});

void test("svm's search attributes are registered on SQL visibility (each mapped to a column of its type)", async () => {
  const conn = p().temporal.connection;
  const listed = await conn.operatorService.listSearchAttributes({ namespace: 'default' });
  for (const sa of searchAttributeDefinitions) assert.ok(sa.name in (listed.customAttributes ?? {}), `${sa.name} is registered`);
  // SQL visibility maps each custom attribute of a namespace to one of its columns (Keyword01..10, Int01..03).
  const ns = await conn.workflowService.describeNamespace({ namespace: 'default' });
  const aliases = ns.config?.customSearchAttributeAliases ?? {};
  const byName = new Map(Object.entries(aliases).map(([column, name]) => [name, column]));
  for (const sa of searchAttributeDefinitions) {
    const column = byName.get(sa.name);
    assert.ok(column, `${sa.name} has a visibility column`);
    assert.match(column, new RegExp(`^${sa.type}\\d\\d$`), `${sa.name} (${sa.type}) is in column ${column}`);
  }
});

void test("`svm setup` registers svm's search attributes on a new namespace on SQL visibility, each in a column of its type; again, it finds them present", async () => {
  const conn = p().temporal.connection;
  const namespace = uniq('setup');
  await conn.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  const setup = () =>
    execFileSync(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'setup'], {
      encoding: 'utf8',
      env: { ...process.env, TEMPORAL_ADDRESS: p().env.TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE: namespace },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  // The frontend's namespace cache learns of a new namespace within seconds (NOT_FOUND until then): an operator runs it again.
  let attempts = 0;
  const first = await eventually('svm setup on the new namespace', async () => (attempts++, setup()), 30_000);
  process.stderr.write(`  svm setup on a new namespace: ${attempts} attempt(s)\n`);
  for (const sa of searchAttributeDefinitions)
    assert.match(first, new RegExp(`registered on namespace ${namespace}: .*${sa.name} \\(${sa.type}\\)`));
  const ns = await conn.workflowService.describeNamespace({ namespace });
  const byName = new Map(Object.entries(ns.config?.customSearchAttributeAliases ?? {}).map(([column, name]) => [name, column]));
  for (const sa of searchAttributeDefinitions)
    assert.match(byName.get(sa.name) ?? '', new RegExp(`^${sa.type}\\d\\d$`), `${sa.name} has a ${sa.type} column`);
  const again = setup();
  assert.doesNotMatch(again, /registered on/);
  assert.match(again, new RegExp(`already present on namespace ${namespace}: ${searchAttributeDefinitions.map((d) => d.name).join(', ')}`));
});

void test('a CRD is migrated through temporal-server on PostgreSQL: etcd confirms, and `temporal workflow list` finds it by MigrationResource', async () => {
  const COUNT = 300;
  const crd = testCrd(`${uniq('pg')}.svm.test`);
  const ns = uniq('ns');
  await applyCrd(p().kube, crd, 'v1');
  await createObjects(p().kube, crd, 'v1', COUNT, { namespace: ns, payload: (i) => ({ index: i }) });
  const prefix = `/registry/${crd.group}/${crd.plural}/`;
  const before = await readStoredObjects(p().etcd, prefix);
  assert.deepEqual((await storedVersions(p().etcd, prefix)).byApiVersion, { [`${crd.group}/v1`]: COUNT });
  await applyCrd(p().kube, crd, 'v2');

  const started = Date.now();
  const { result, workflowId } = await withWorker(p(), async (m) => {
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: 4 });
    return { result: await migrationResult(h), workflowId: h.workflowId };
  });
  process.stderr.write(`  migration of ${COUNT} objects on temporal-server/PostgreSQL: ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.equal(result.counters.migrated, COUNT);
  assert.equal(result.counters.failed, 0);

  // etcd, the judge: every key at v2, content unchanged
  const after = await readStoredObjects(p().etcd, prefix);
  assert.deepEqual((await storedVersions(p().etcd, prefix)).byApiVersion, { [`${crd.group}/v2`]: COUNT });
  const beforeByKey = new Map(before.map((o) => [o.key, o.object]));
  for (const o of after) assert.deepEqual(o.object.spec, beforeByKey.get(o.key)?.spec, `content of ${o.key} changed`);
  const crdNow = await p().kube.getJson<{ status: { storedVersions: string[] } }>(
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
  );
  assert.deepEqual(crdNow.status.storedVersions, ['v2']);

  // SQL visibility: the Temporal CLI finds the migration by its search attribute, closed and Succeeded
  const rows = await eventually('the migration in `temporal workflow list` with MigrationPhase Succeeded', async () => {
    const out = execFileSync(
      p().env.TEMPORAL_CLI!,
      [
        'workflow',
        'list',
        '--address',
        p().env.TEMPORAL_ADDRESS!,
        '--namespace',
        'default',
        '--query',
        `MigrationResource = '${crd.name}' AND MigrationPhase = 'Succeeded'`,
        '--output',
        'json',
      ],
      { encoding: 'utf8' },
    );
    const list = (out.trim() ? JSON.parse(out) : []) as Array<{ execution: { workflowId: string }; status: string }>;
    return list.length > 0 ? list : undefined;
  });
  assert.deepEqual(
    rows.map((r) => r.execution.workflowId),
    [workflowId],
  );
  assert.match(rows[0]!.status, /COMPLETED/);
});
