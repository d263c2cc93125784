/** The pure parts of the plane's Temporal server on PostgreSQL (src/dev/temporal-server.ts). */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { loadTemporalSettings, temporalConnectionOptions } from '../src/config/temporal';
import {
  checkSearchAttributesFitSql,
  ensureTemporalTls,
  newTemporalServerRecord,
  smallintPort,
  temporalServerConfig,
  temporalTlsEnv,
  translateTemporalArgs,
} from '../src/dev/temporal-server';

void test('the dev server flags the suite passes become dynamic config for temporal-server; others are refused', () => {
  const t = translateTemporalArgs([
    '--dynamic-config-value',
    'limit.historyCount.suggestContinueAsNew=300',
    '--dynamic-config-value=frontend.enableUpdateWorkflowExecution=true',
    '--dynamic-config-value',
    'some.key="text"',
    '--log-level',
    'error',
  ]);
  assert.deepEqual(t.dynamicConfig, {
    'limit.historyCount.suggestContinueAsNew': [{ value: 300 }],
    'frontend.enableUpdateWorkflowExecution': [{ value: true }],
    'some.key': [{ value: 'text' }],
  });
  assert.equal(t.logLevel, 'error');
  assert.equal(translateTemporalArgs([]).logLevel, 'warn');
  assert.throws(() => translateTemporalArgs(['--headless']), /--dynamic-config-value KEY=VALUE and --log-level/);
  assert.throws(() => translateTemporalArgs(['--dynamic-config-value', 'novalue']), /KEY=VALUE/);
});

void test("svm's search attributes fit SQL visibility; more of a type than it has columns is refused", () => {
  checkSearchAttributesFitSql();
  assert.throws(
    () => checkSearchAttributesFitSql(['A', 'B', 'C', 'D'].map((name) => ({ name, type: 'Int' }))),
    /4 Int search attributes; SQL visibility has 3/,
  );
});

void test('every port of the server is below 32768 (cluster_membership.rpc_port is a SMALLINT) and bound to 127.0.0.1', async () => {
  assert.ok((await smallintPort()) < 32768);
  const { frontendPort, ...rec } = await newTemporalServerRecord('/tmp/svm-unit');
  const ports = [frontendPort, ...Object.values(rec.ports)];
  assert.equal(new Set(ports).size, ports.length, 'distinct');
  assert.ok(
    ports.every((p) => p > 1024 && p < 32768),
    ports.join(','),
  );
  const cfg = temporalServerConfig({ frontendPort, rec, password: 'pw', logLevel: 'warn' }) as {
    persistence: { datastores: Record<string, { sql: { pluginName: string; databaseName: string; connectAddr: string } }> };
    services: Record<string, { rpc: { grpcPort: number; bindOnIP: string } }>;
  };
  assert.deepEqual(
    Object.values(cfg.persistence.datastores).map((d) => [d.sql.pluginName, d.sql.databaseName]),
    [
      ['postgres12', 'temporal'],
      ['postgres12', 'temporal_visibility'],
    ],
  );
  assert.equal(cfg.services.frontend!.rpc.grpcPort, frontendPort);
  assert.ok(Object.values(cfg.services).every((s) => s.rpc.bindOnIP === '127.0.0.1'));
});

void test('--temporal-tls: a CA of its own, a server certificate for localhost and 127.0.0.1, a client certificate; mTLS required everywhere', async () => {
  const dir = fs.mkdtempSync(path.join(tmpdir(), 'svm-unit-tls-'));
  try {
    const tls = ensureTemporalTls(dir);
    const ca = new X509Certificate(fs.readFileSync(tls.ca));
    assert.match(ca.subject, /CN=svm-dev-temporal-ca/);
    assert.notEqual(tls.ca, path.join(dir, 'pki', 'ca.crt'), "not the API servers' CA");
    const server = new X509Certificate(fs.readFileSync(tls.serverCert));
    assert.ok(server.verify(ca.publicKey), 'the server certificate is signed by the CA');
    assert.equal(server.subjectAltName, 'DNS:localhost, IP Address:127.0.0.1');
    assert.ok(server.checkHost('localhost') && server.checkIP('127.0.0.1'));
    assert.deepEqual(server.keyUsage?.sort(), ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2'], 'serverAuth and clientAuth (internode)');
    const client = new X509Certificate(fs.readFileSync(tls.clientCert));
    assert.ok(client.verify(ca.publicKey));
    assert.match(client.subject, /CN=svm/);
    assert.deepEqual(client.keyUsage, ['1.3.6.1.5.5.7.3.2'], 'clientAuth only');
    // made once: a second call keeps the files
    const before = fs.readFileSync(tls.clientCert, 'utf8');
    assert.equal(fs.readFileSync(ensureTemporalTls(dir).clientCert, 'utf8'), before);

    const { frontendPort, ...rec } = await newTemporalServerRecord(dir);
    const cfg = temporalServerConfig({ frontendPort, rec: { ...rec, tls }, password: 'pw', logLevel: 'warn' }) as {
      global: { tls: Record<string, { server?: Record<string, unknown>; client: Record<string, unknown>; certFile?: string }> };
    };
    const g = cfg.global.tls;
    for (const group of ['frontend', 'internode'] as const) {
      assert.equal(g[group]!.server!.requireClientAuth, true, `${group} requires client certificates`);
      assert.deepEqual(g[group]!.server!.clientCaFiles, [tls.ca]);
      assert.deepEqual(g[group]!.client, { serverName: 'localhost', rootCaFiles: [tls.ca] });
    }
    assert.equal(g.systemWorker!.certFile, tls.serverCert, "the server's own frontend client presents a certificate");
    const plain = temporalServerConfig({ frontendPort, rec, password: 'pw', logLevel: 'warn' }) as { global: object };
    assert.equal('tls' in plain.global, false, 'no TLS without --temporal-tls');

    // the env file's variables are Temporal's standard ones, and svm reads them into an mTLS connection
    const env = temporalTlsEnv(tls);
    assert.deepEqual(Object.keys(env).sort(), [
      'TEMPORAL_TLS_CLIENT_CERT_PATH',
      'TEMPORAL_TLS_CLIENT_KEY_PATH',
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      'TEMPORAL_TLS_SERVER_NAME',
    ]);
    const t = loadTemporalSettings({ TEMPORAL_ADDRESS: `127.0.0.1:${frontendPort}`, ...env });
    const o = temporalConnectionOptions({ ...t, address: t.address! }).tls as {
      serverNameOverride: string;
      clientCertPair: { crt: Uint8Array };
    };
    assert.equal(o.serverNameOverride, 'localhost');
    assert.equal(Buffer.from(o.clientCertPair.crt).toString(), before);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
