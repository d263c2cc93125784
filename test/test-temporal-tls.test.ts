/**
 * svm on a Temporal server that requires mTLS, configured the Temporal way.
 * A plane of this file's own (the suite's runs without TLS): `svm dev up
 * --temporal server --temporal-tls` runs temporal-server on PostgreSQL with
 * client certificates required on the frontend and between its services,
 * certificates the plane makes (its own CA, not the API servers'), and an env
 * file with Temporal's standard TEMPORAL_TLS_* variables. Then: one migration
 * over mTLS with etcd as judge; clients without a certificate, with the wrong
 * CA or the wrong server name are refused with a message that says which; and
 * a Temporal CLI TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) works
 * for `svm` and the Temporal CLI alike.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { Migrator } from '../src/client/index';
import { loadTemporalSettings } from '../src/config/temporal';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { isRunning } from '../src/dev/plane';
import { ensureCert } from '../src/dev/tls';
import { createMigratorWorker } from '../src/worker/worker';
import { loadWorkerSettings } from '../src/worker/config';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { withWorker } from './helpers/migrate';
import { removePlanes, testPlane, uniq, up, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

const run = promisify(execFile);
const dir = mkdtempSync(path.join(tmpdir(), 'svm-tls-'));
const repo = path.resolve(__dirname, '..');
let plane: TestPlane | undefined;
let migrationId = '';
let migratedResource = '';

before(async () => {
  const started = Date.now();
  await up({
    dir,
    apiservers: 1,
    temporal: 'server',
    temporalTls: true,
    log: (l) => process.stderr.write(`  [plane] ${l}\n`),
  });
  process.stderr.write(`  plane with temporal-server (mTLS) on PostgreSQL up in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  plane = await testPlane({ dir });
  await installCrds(plane.kube);
});

after(async () => {
  await plane?.close();
  const state = plane?.state;
  await removePlanes(dir);
  if (state) assert.ok(!isRunning(state.temporalServer?.postgres) && !isRunning(state.temporal), 'down left a process running');
});

const p = () => plane!;
const tlsFiles = () => p().state.temporalServer!.tls!;

/** `svm ARGS` with exactly this environment (no TEMPORAL_* of the test's own); resolves with the exit code and output. */
async function svm(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [path.join(repo, 'bin', 'svm.js'), ...args], {
      env: { PATH: process.env.PATH!, HOME: dir, KUBECONFIG: p().env.KUBECONFIG!, ...env },
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
  assert.ok(tls.ca.startsWith(path.join(dir, 'pki', 'temporal')), `the Temporal CA is its own: ${tls.ca}`);
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
  // the UI server reaches the frontend with its client certificate
  const res = await fetch(`${p().env.TEMPORAL_UI_URL}/api/v1/namespaces`);
  assert.equal(res.status, 200, 'the UI server lists namespaces through the mTLS frontend');
  const body = (await res.json()) as { namespaces?: Array<{ namespaceInfo?: { name?: string } }> };
  assert.ok(body.namespaces?.some((n) => n.namespaceInfo?.name === 'default'));
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
  assert.equal(r.code, 1);
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
  const foreign = ensureCert(kubeCa, path.join(dir, 'foreign'), 'client', { cn: 'svm', usage: ['clientAuth'] });
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
  const toml = path.join(dir, 'temporal.toml');
  writeFileSync(
    toml,
    [
      '[profile.default]',
      'address = "127.0.0.1:1"', // not this one: TEMPORAL_PROFILE picks the next
      '',
      '[profile.svm-tls]',
      `address = "${p().env.TEMPORAL_ADDRESS}"`,
      'namespace = "default"',
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
    env: { PATH: process.env.PATH!, HOME: dir, ...profileEnv },
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
  });
  assert.equal(aliases.code, 0, aliases.stderr);
});
