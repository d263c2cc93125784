/**
 * svm on a secured Temporal server, configured the Temporal way: the suite's
 * one secured server plane (the suite's others run without TLS or
 * authorization). `svm dev up --temporal server --temporal-tls --temporal-auth`
 * runs temporal-server on PostgreSQL with client certificates required on the
 * frontend and between its services, certificates the plane makes (its own
 * CA, not the API servers'), and its JWT claim mapper and default authorizer
 * with a signing key the plane makes; the env file has Temporal's standard
 * TEMPORAL_TLS_* variables and an administrator's TEMPORAL_API_KEY. Then: one
 * migration over mTLS with etcd as judge; clients without a certificate, with
 * the wrong CA or the wrong server name are refused with a message that says
 * which; a Temporal CLI TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE)
 * works for `svm` and the Temporal CLI alike; and what the authorizer
 * enforces, which svm's trust domains rest on (docs/security.md): a credential
 * for one namespace runs svm's worker and client there (a migration, etcd as
 * judge), and can start, signal, read, poll or complete nothing in another.
 * (No Web UI runs on this plane: the UI server would need an OIDC provider.)
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { installCrds } from '../src/client/cli-migrate';
import { Migrator } from '../src/client/index';
import { loadTemporalSettings } from '../src/config/temporal';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { isRunning } from '../src/dev/plane';
import { ensureTemporalAuth, mintTemporalToken, temporalPermission } from '../src/dev/temporal-auth';
import { temporalTlsConnection } from '../src/dev/temporal-server';
import { ensureCert } from '../src/dev/tls';
import { createMigratorWorker } from '../src/worker/worker';
import { loadWorkerSettings } from '../src/worker/config';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { withWorker } from './helpers/migrate';
import { removePlanes, securedServerPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';
import { EXIT } from '../src/client/exit-codes';

const run = promisify(execFile);
/** The file's own files (HOME of the `svm` it runs, key files, certificates): the plane's directory is the run's. */
const scratch = mkdtempSync(path.join(tmpdir(), 'svm-tls-'));
const repo = path.resolve(__dirname, '..');
let plane: TestPlane | undefined;
/** The plane's directory when this file brought it up itself (run alone), to take down when it ends. */
let own: string | undefined;
let migrationId = '';
let migratedResource = '';

before(async () => {
  ({ plane, own } = await securedServerPlane());
  await installCrds(plane.kube);
});

after(async () => {
  await plane?.close();
  rmSync(scratch, { recursive: true, force: true });
  if (!own) return; // the run's plane: scripts/test.sh takes it down, and checks nothing of it is left running
  const state = plane?.state;
  await removePlanes(own);
  if (state) assert.ok(!isRunning(state.temporalServer?.postgres) && !isRunning(state.temporal), 'down left a process running');
});

const p = () => plane!;
const tlsFiles = () => p().state.temporalServer!.tls!;

/** `svm ARGS` with exactly this environment (no TEMPORAL_* of the test's own); resolves with the exit code and output. */
async function svm(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [path.join(repo, 'bin', 'svm.js'), ...args], {
      env: { PATH: process.env.PATH!, HOME: scratch, KUBECONFIG: p().env.KUBECONFIG!, ...env },
      cwd: repo,
      timeout: 120_000,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** The env file's Temporal variables, without some of them. */
function temporalEnv(without: string[] = []): Record<string, string> {
  return Object.fromEntries(Object.entries(p().env).filter(([k]) => k.startsWith('TEMPORAL_') && !without.includes(k)));
}

void test('the frontend requires mTLS with the plane’s own CA, and the env file says so in Temporal’s variables', async () => {
  const state = p().state;
  const tls = tlsFiles();
  assert.equal(state.temporalMode, 'server');
  assert.ok(tls.ca.startsWith(path.join(p().dir, 'pki', 'temporal')), `the Temporal CA is its own: ${tls.ca}`);
  assert.notEqual(tls.ca, state.caFile, "not the API servers' CA");
  const config = readFileSync(state.temporalServer!.config, 'utf8');
  assert.match(config, /requireClientAuth: true/);
  assert.deepEqual(
    Object.keys(temporalEnv())
      .filter((k) => k.startsWith('TEMPORAL_TLS'))
      .sort(),
    ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH', 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_SERVER_NAME'],
  );
  // the helpers' connection (svm's settings from the env file) is mTLS
  assert.equal(p().temporal.settings.tlsCert, tls.clientCert);
  const info = await p().temporal.connection.workflowService.getClusterInfo({});
  assert.equal(info.persistenceStore, 'postgres12');
  // and authorized: the env file's administrator token (the plane's key signed it)
  assert.match(config, /authorizer: default/);
  assert.match(config, /internal-frontend:/, "the server's system worker goes through the internal frontend");
  assert.ok(p().env.TEMPORAL_API_KEY, 'the env file carries TEMPORAL_API_KEY');
  assert.equal(p().temporal.settings.apiKey, p().env.TEMPORAL_API_KEY);
});

void test('a CRD is migrated over mTLS (worker and client with the env file’s certificates): etcd confirms', async () => {
  const COUNT = 100;
  const crd = testCrd(`${uniq('tls')}.svm.test`);
  await applyCrd(p().kube, crd, 'v1');
  await createObjects(p().kube, crd, 'v1', COUNT, { namespace: uniq('ns'), payload: (i) => ({ index: i }) });
  const prefix = `/registry/${crd.group}/${crd.plural}/`;
  const before = await readStoredObjects(p().etcd, prefix);
  assert.deepEqual((await storedVersions(p().etcd, prefix)).byApiVersion, { [`${crd.group}/v1`]: COUNT });
  await applyCrd(p().kube, crd, 'v2');

  const started = Date.now();
  const result = await withWorker(p(), async (m) => {
    const h = await m.start(crd.name, { chunkSize: 50, concurrency: 4 });
    migrationId = h.workflowId;
    migratedResource = crd.name;
    return migrationResult(h);
  });
  process.stderr.write(`  migration of ${COUNT} objects over mTLS: ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.equal(result.counters.migrated, COUNT);

  const after = await readStoredObjects(p().etcd, prefix);
  assert.deepEqual((await storedVersions(p().etcd, prefix)).byApiVersion, { [`${crd.group}/v2`]: COUNT });
  const beforeByKey = new Map(before.map((o) => [o.key, o.object]));
  for (const o of after) assert.deepEqual(o.object.spec, beforeByKey.get(o.key)?.spec, `content of ${o.key} changed`);
});

void test('`svm status` without a client certificate is refused: the server requires one, and the message says which settings', async () => {
  const r = await svm(['status'], temporalEnv(['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH']));
  process.stderr.write(`  svm status without a certificate: exit ${r.code}: ${r.stderr.trim()}\n`);
  assert.equal(r.code, EXIT.refused);
  assert.match(
    r.stderr,
    /^error: cannot connect to Temporal: the Temporal server at 127\.0\.0\.1:\d+ requires a client certificate \(mTLS\)/,
  );
  assert.match(r.stderr, /TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/);
});

void test('the worker (the Rust core’s connection) is refused with the reason: no certificate, a certificate from another CA, wrong CA, wrong server name; the typed client too (wrong CA)', async () => {
  const base = temporalEnv();
  const wrongCa = { ...base, TEMPORAL_TLS_SERVER_CA_CERT_PATH: p().state.caFile }; // a real CA, but the API servers'
  // a client certificate signed by the API servers' CA: valid, but not for Temporal
  const kubeCa = { cert: p().state.caFile, key: path.join(path.dirname(p().state.caFile), 'ca.key') };
  const foreign = ensureCert(kubeCa, path.join(scratch, 'foreign'), 'client', { cn: 'svm', usage: ['clientAuth'] });
  const foreignCert = { ...base, TEMPORAL_TLS_CLIENT_CERT_PATH: foreign.cert, TEMPORAL_TLS_CLIENT_KEY_PATH: foreign.key };
  const cases: Array<[string, Record<string, string>, RegExp, boolean]> = [
    [
      'no client certificate',
      temporalEnv(['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH']),
      /requires a client certificate \(mTLS\) and svm has none/,
      false,
    ],
    [
      'a client certificate from another CA',
      foreignCert,
      /refused the client certificate .*foreign\/client\.crt: it is not signed by a CA the server trusts/,
      false,
    ],
    [
      'the wrong CA',
      wrongCa,
      /presented a certificate that the CA in .*pki\/ca\.crt does not trust: set TEMPORAL_TLS_SERVER_CA_CERT_PATH/,
      true,
    ],
    [
      'the wrong server name',
      { ...base, TEMPORAL_TLS_SERVER_NAME: 'wrong.example' },
      /certificate that does not name "wrong\.example" \(TEMPORAL_TLS_SERVER_NAME\)/,
      false,
    ],
  ];
  for (const [what, env, expected, viaClient] of cases) {
    const worker = await createMigratorWorker(loadWorkerSettings({ ...env, KUBECONFIG: p().env.KUBECONFIG!, SVM_BRIDGE: 'false' })).then(
      () => assert.fail(`the worker connected with ${what}`),
      (e: Error) => e.message,
    );
    process.stderr.write(`  worker, ${what}: ${worker}\n`);
    assert.match(worker, /^cannot connect to Temporal: /, `worker, ${what}`);
    assert.match(worker, expected, `worker, ${what}`);
    // Node's gRPC (the typed client, svm's commands) fails only at its 10 s connect deadline: one case here (no
    // certificate: `svm status` above); every case meets the same explanation in test/unit-temporal-config.test.ts.
    if (!viaClient) continue;
    const t = loadTemporalSettings(env);
    const client = await Migrator.connect({ temporal: { ...t, address: t.address! }, kubeconfig: p().env.KUBECONFIG }).then(
      async (m) => {
        await m.close();
        return assert.fail(`the client connected with ${what}`);
      },
      (e: Error) => e.message,
    );
    process.stderr.write(`  client, ${what}: ${client}\n`);
    assert.match(client, expected, `client, ${what}`);
  }
});

void test('a Temporal CLI TOML profile works for `svm status` and the Temporal CLI alike; svm’s older variable names too', async () => {
  const tls = tlsFiles();
  const toml = path.join(scratch, 'temporal.toml');
  writeFileSync(
    toml,
    [
      '[profile.default]',
      'address = "127.0.0.1:1"', // not this one: TEMPORAL_PROFILE picks the next
      '',
      '[profile.svm-tls]',
      `address = "${p().env.TEMPORAL_ADDRESS}"`,
      'namespace = "default"',
      `api_key = "${p().env.TEMPORAL_API_KEY}"`,
      '[profile.svm-tls.tls]',
      `server_ca_cert_path = "${tls.ca}"`,
      `client_cert_path = "${tls.clientCert}"`,
      `client_key_path = "${tls.clientKey}"`,
      `server_name = "${tls.serverName}"`,
      '',
    ].join('\n'),
  );
  const profileEnv = { TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'svm-tls' };
  const r = await svm(['status'], profileEnv);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(migratedResource && r.stdout.includes(migratedResource), `svm status lists the migration:\n${r.stdout}`);

  const cli = execFileSync(p().env.TEMPORAL_CLI!, ['workflow', 'describe', '--workflow-id', migrationId, '--output', 'json'], {
    env: { PATH: process.env.PATH!, HOME: scratch, ...profileEnv },
    encoding: 'utf8',
  });
  assert.match(JSON.parse(cli).workflowExecutionInfo.status, /COMPLETED/, 'the Temporal CLI, same profile');

  // svm's own older names (TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY) and the Temporal CLI's TEMPORAL_TLS_CA still work
  const aliases = await svm(['status'], {
    TEMPORAL_ADDRESS: p().env.TEMPORAL_ADDRESS!,
    TEMPORAL_TLS_CERT: tls.clientCert,
    TEMPORAL_TLS_KEY: tls.clientKey,
    TEMPORAL_TLS_CA: tls.ca,
    TEMPORAL_TLS_SERVER_NAME: tls.serverName,
    TEMPORAL_API_KEY: p().env.TEMPORAL_API_KEY!,
  });
  assert.equal(aliases.code, 0, aliases.stderr);
});

/** What a call with `apiKey` answers: 'allowed', or the gRPC status name it was refused with (7: PERMISSION_DENIED). */
async function answer(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return 'allowed';
  } catch (err) {
    const e = err as { code?: number; cause?: { code?: number } };
    const code = e.code ?? e.cause?.code;
    return code === 7 ? 'PERMISSION_DENIED' : code === 16 ? 'UNAUTHENTICATED' : `code ${code}: ${(err as Error).message}`;
  }
}

void test('authorization: a credential for one namespace runs svm there (a migration, etcd as judge), and starts, signals, reads, polls or completes nothing in another', async () => {
  const auth = p().state.temporalServer!.auth!;
  const admin = p().temporal.connection;
  const [domA, domB] = [uniq('dom-a'), uniq('dom-b')];
  for (const namespace of [domA, domB]) {
    await admin.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    // svm setup (the administrator's token) adds svm's search attributes, once the frontend's namespace cache knows it
    let r = await svm(['setup'], { ...temporalEnv(), TEMPORAL_NAMESPACE: namespace });
    for (let i = 0; i < 15 && r.code !== 0; i++) {
      await new Promise((res) => setTimeout(res, 2000));
      r = await svm(['setup'], { ...temporalEnv(), TEMPORAL_NAMESPACE: namespace });
    }
    assert.equal(r.code, 0, `svm setup (administrator) of ${namespace}: ${r.stderr}`);
  }
  const token = (permissions: string[], ttlSeconds = 600, now?: number) =>
    mintTemporalToken(auth, { subject: 'svm-test', permissions, ttlSeconds, now });
  const writerA = token([temporalPermission(domA, 'write')]);

  // svm's worker and client with domain A's credential only, in domain A: a migration, judged in etcd.
  const COUNT = 20;
  const crd = testCrd(`${uniq('auth')}.svm.test`);
  await applyCrd(p().kube, crd, 'v1');
  await createObjects(p().kube, crd, 'v1', COUNT, { namespace: uniq('ns'), payload: (i) => ({ index: i }) });
  const prefix = `/registry/${crd.group}/${crd.plural}/`;
  await applyCrd(p().kube, crd, 'v2');
  const scoped = { ...p().temporal.settings, namespace: domA, apiKey: writerA };
  const taskQueue = uniq('tq');
  const worker = await createMigratorWorker({ ...p().workerSettings(taskQueue), temporal: { ...scoped, taskQueue } });
  const m = await Migrator.connect({ temporal: { ...scoped, address: scoped.address!, taskQueue }, kubeconfig: p().env.KUBECONFIG });
  const result = await worker.runUntil(async () => migrationResult(await m.start(crd.name, { chunkSize: 10 }))).finally(() => m.close());
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.deepEqual((await storedVersions(p().etcd, prefix)).byApiVersion, { [`${crd.group}/v2`]: COUNT }, 'etcd: every object at v2');
  process.stderr.write(`  in ${domA} with a ${domA}:write token: ${COUNT} objects migrated (etcd: all at v2)\n`);

  // The same credential against domain B (and default): a workflow of B's to aim at, started by the administrator.
  const victim = uniq('victim');
  await admin.workflowService.startWorkflowExecution({
    namespace: domB,
    workflowId: victim,
    workflowType: { name: 'migrateResource' },
    taskQueue: { name: 'nobody' },
    requestId: victim,
  });
  const as = async (apiKey: string) =>
    Connection.connect({ address: p().env.TEMPORAL_ADDRESS!, tls: temporalTlsConnection(tlsFiles()), apiKey });
  const a = await as(writerA);
  const routes = (namespace: string): Array<[string, () => Promise<unknown>]> => [
    [
      'start',
      () =>
        a.workflowService.startWorkflowExecution({
          namespace,
          workflowId: uniq('forged'),
          workflowType: { name: 'migrateResource' },
          taskQueue: { name: 'nobody' },
          requestId: uniq('r'),
        }),
    ],
    [
      'signal',
      () => a.workflowService.signalWorkflowExecution({ namespace, workflowExecution: { workflowId: victim }, signalName: 'abort' }),
    ],
    ['describe', () => a.workflowService.describeWorkflowExecution({ namespace, execution: { workflowId: victim } })],
    ['list', () => a.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 })],
    ['history', () => a.workflowService.getWorkflowExecutionHistory({ namespace, execution: { workflowId: victim } })],
    [
      'poll workflow tasks',
      () => a.workflowService.pollWorkflowTaskQueue({ namespace, taskQueue: { name: 'nobody' }, identity: 'forger' }),
    ],
    [
      'poll activity tasks',
      () => a.workflowService.pollActivityTaskQueue({ namespace, taskQueue: { name: 'nobody' }, identity: 'forger' }),
    ],
    ['complete an activity', () => a.workflowService.respondActivityTaskCompletedById({ namespace, workflowId: victim, activityId: '1' })],
    ['terminate', () => a.workflowService.terminateWorkflowExecution({ namespace, workflowExecution: { workflowId: victim } })],
  ];
  try {
    for (const namespace of [domB, 'default']) {
      for (const [what, call] of routes(namespace)) {
        const got = await answer(call);
        process.stderr.write(`  ${domA}:write token, ${what} in ${namespace === domB ? 'the other domain' : namespace}: ${got}\n`);
        assert.equal(got, 'PERMISSION_DENIED', `${what} in ${namespace}`);
      }
    }
    const nsAdmin = await answer(() =>
      a.workflowService.registerNamespace({ namespace: uniq('mine'), workflowExecutionRetentionPeriod: msToTs('1 day') }),
    );
    assert.equal(nsAdmin, 'PERMISSION_DENIED', 'registering a namespace');
    // its own domain: a read answers (the proof that the refusals above are the namespace's, not the token's)
    assert.equal(await answer(() => a.workflowService.listWorkflowExecutions({ namespace: domA, pageSize: 1 })), 'allowed');
  } finally {
    await a.close();
  }
  // The victim is as it was: running, no signal in its history.
  const d = await admin.workflowService.describeWorkflowExecution({ namespace: domB, execution: { workflowId: victim } });
  assert.equal(d.workflowExecutionInfo?.status, 1, "the other domain's workflow still running");
  const h = await admin.workflowService.getWorkflowExecutionHistory({ namespace: domB, execution: { workflowId: victim } });
  assert.equal(h.history?.events?.length, 2, 'its history: started and its first task scheduled, nothing more');

  // A reader of A may not start there; a token expired, or signed by another key, is refused everything.
  const other = ensureTemporalAuth(mkdtempSync(path.join(tmpdir(), 'svm-other-key-')));
  const cases: Array<[string, string, 'start' | 'list']> = [
    [`${domA}:read`, token([temporalPermission(domA, 'read')]), 'start'],
    ['expired', token([temporalPermission(domA, 'write')], 60, Date.now() - 3_600_000), 'list'],
    [
      'signed by another key',
      mintTemporalToken(other, { subject: 'svm-test', permissions: [temporalPermission(domA, 'write')], ttlSeconds: 600 }),
      'list',
    ],
  ];
  for (const [what, apiKey, route] of cases) {
    // (a token that carries no valid claims is refused at the connection's first call already)
    const got = await answer(async () => {
      const c = await as(apiKey);
      try {
        await (route === 'start'
          ? c.workflowService.startWorkflowExecution({
              namespace: domA,
              workflowId: uniq('r'),
              workflowType: { name: 'migrateResource' },
              taskQueue: { name: 'nobody' },
              requestId: uniq('r'),
            })
          : c.workflowService.listWorkflowExecutions({ namespace: domA, pageSize: 1 }));
      } finally {
        await c.close();
      }
    });
    process.stderr.write(`  ${what} token, ${route} in ${domA}: ${got}\n`);
    assert.equal(got, 'PERMISSION_DENIED', `${what}: ${route}`);
  }

  // svm's commands say what was refused: an expired key, and none at all.
  const expired = await svm(['status'], { ...temporalEnv(), TEMPORAL_NAMESPACE: domA, TEMPORAL_API_KEY: cases[1]![1] });
  process.stderr.write(`  svm status with an expired token: exit ${expired.code}: ${expired.stderr.trim()}\n`);
  assert.equal(expired.code, EXIT.refused);
  assert.match(expired.stderr, /refused svm's credential: the API key \(TEMPORAL_API_KEY or the profile's api_key\) is expired/);
  const none = await svm(['status'], temporalEnv(['TEMPORAL_API_KEY']));
  process.stderr.write(`  svm status without a token: exit ${none.code}: ${none.stderr.trim()}\n`);
  assert.equal(none.code, EXIT.refused);
  assert.match(none.stderr, /requires a credential and svm has none: set TEMPORAL_API_KEY/);

  // `svm worker` given A's credential but B's namespace does not start: it says why and exits (run as a user runs
  // it, in a process of its own: a worker the server refused must not keep its process alive).
  const refused = await svm(['worker'], {
    ...temporalEnv(),
    TEMPORAL_NAMESPACE: domB,
    TEMPORAL_API_KEY: writerA,
    TEMPORAL_TASK_QUEUE: uniq('tq'),
    SVM_BRIDGE: 'false',
  });
  process.stderr.write(`  svm worker with ${domA}'s token in ${domB}: exit ${refused.code}: ${refused.stderr.trim().split('\n').pop()}\n`);
  assert.notEqual(refused.code, 0, 'the worker exits');
  assert.notEqual(refused.code, -1, 'the worker exits by itself (not ended at the bound)');
  assert.match(refused.stderr, new RegExp(`refused svm's credential for namespace ${domB}: the API key`));
});
