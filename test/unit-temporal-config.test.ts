/**
 * Unit tests of src/config/temporal.ts: the Temporal connection read the
 * Temporal way (@temporalio/envconfig: TOML profiles and the standard
 * TEMPORAL_* variables), svm's older names as aliases, the connection options
 * built from it, and the messages of a refused TLS connection. No plane: the
 * environment is passed in, files go to a temporary directory, and the
 * refusals are met on a local Node TLS server that requires a client
 * certificate, with certificates made as the plane makes them.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import * as tls from 'node:tls';
import {
  checkNamespaceAccess,
  explainTemporalConnectError,
  loadTemporalSettings,
  probeTls,
  temporalConnectionOptions,
  temporalEnvconfigEnv,
} from '../src/config/temporal';
import { ensureTemporalTls } from '../src/dev/temporal-server';
import { ensureCa } from '../src/dev/tls';
import { loadWorkerSettings, SettingsError } from '../src/worker/config';

const dir = fs.mkdtempSync(path.join(tmpdir(), 'svm-tconf-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
};
const ca = file('ca.crt', 'CA PEM\n');
const crt = file('client.crt', 'CLIENT CERT PEM\n');
const key = file('client.key', 'CLIENT KEY PEM\n');
const text = (b: unknown) => Buffer.from(b as Uint8Array).toString('utf8');

function throwsSettings(fn: () => unknown, ...mentions: Array<string | RegExp>): string {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof SettingsError, `expected a SettingsError, got ${String(caught)}`);
  for (const m of mentions) {
    if (typeof m === 'string') assert.ok(caught.message.includes(m), `message ${JSON.stringify(caught.message)} names ${m}`);
    else assert.match(caught.message, m);
  }
  return caught.message;
}

type Tls = { serverNameOverride?: string; serverRootCACertificate?: Uint8Array; clientCertPair?: { crt: Uint8Array; key: Uint8Array } };

void test("Temporal's standard variables: address, namespace, API key, the client certificate, the CA and the server name", () => {
  const t = loadTemporalSettings({
    TEMPORAL_ADDRESS: '127.0.0.1:7233',
    TEMPORAL_NAMESPACE: 'prod',
    TEMPORAL_TLS_CLIENT_CERT_PATH: crt,
    TEMPORAL_TLS_CLIENT_KEY_PATH: key,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca,
    TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
    TEMPORAL_GRPC_META_X_TEAM: 'storage',
  });
  assert.equal(t.address, '127.0.0.1:7233');
  assert.equal(t.namespace, 'prod');
  assert.equal(t.tls, true, 'a TLS setting turns TLS on');
  assert.equal(t.tlsCert, crt);
  assert.equal(t.tlsKey, key);
  assert.equal(t.tlsCa, ca);
  assert.equal(t.tlsServerName, 'temporal.internal');
  assert.deepEqual(t.grpcMeta, { 'x-team': 'storage' });

  const o = temporalConnectionOptions({ ...t, address: t.address! });
  assert.equal(o.address, '127.0.0.1:7233');
  const tls = o.tls as Tls;
  assert.equal(tls.serverNameOverride, 'temporal.internal');
  assert.equal(text(tls.serverRootCACertificate), 'CA PEM\n');
  assert.equal(text(tls.clientCertPair!.crt), 'CLIENT CERT PEM\n');
  assert.equal(text(tls.clientCertPair!.key), 'CLIENT KEY PEM\n');
  assert.deepEqual(o.metadata, { 'x-team': 'storage' });
});

void test('the PEM text forms (_DATA) work as the files do', () => {
  const t = loadTemporalSettings({
    TEMPORAL_ADDRESS: 'h:1',
    TEMPORAL_TLS_CLIENT_CERT_DATA: 'C',
    TEMPORAL_TLS_CLIENT_KEY_DATA: 'K',
    TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'A',
  });
  const tls = temporalConnectionOptions({ ...t, address: 'h:1' }).tls as Tls;
  assert.equal(text(tls.clientCertPair!.crt), 'C');
  assert.equal(text(tls.clientCertPair!.key), 'K');
  assert.equal(text(tls.serverRootCACertificate), 'A');
});

void test("svm's older names are aliases: TEMPORAL_TLS_CERT, TEMPORAL_TLS_KEY (and the Temporal CLI's TEMPORAL_TLS_CA)", () => {
  const t = loadTemporalSettings({ TEMPORAL_ADDRESS: 'h:1', TEMPORAL_TLS_CERT: crt, TEMPORAL_TLS_KEY: key, TEMPORAL_TLS_CA: ca });
  assert.equal(t.tlsCert, crt);
  assert.equal(t.tlsKey, key);
  assert.equal(t.tlsCa, ca);
  assert.equal(t.tls, true);
  // the same value under both names is fine; different values are refused, naming both
  assert.equal(loadTemporalSettings({ TEMPORAL_TLS_CERT: crt, TEMPORAL_TLS_CLIENT_CERT_PATH: crt, TEMPORAL_TLS_KEY: key }).tlsCert, crt);
  throwsSettings(
    () => loadTemporalSettings({ TEMPORAL_TLS_CERT: crt, TEMPORAL_TLS_CLIENT_CERT_PATH: key }),
    'TEMPORAL_TLS_CERT',
    'TEMPORAL_TLS_CLIENT_CERT_PATH',
  );
  const e = temporalEnvconfigEnv({ TEMPORAL_TLS_KEY: key, PATH: '/bin', TEMPORAL_ADDRESS: '' });
  assert.deepEqual(e, { TEMPORAL_TLS_CLIENT_KEY_PATH: key }, 'aliases mapped, blanks and unrelated variables dropped');
});

void test('TEMPORAL_TLS: svm spellings, false turns TLS off even with certificates, a bad value is refused by name', () => {
  assert.equal(loadTemporalSettings({ TEMPORAL_TLS: 'yes' }).tls, true);
  assert.equal(loadTemporalSettings({ TEMPORAL_TLS: '0' }).tls, false);
  const off = loadTemporalSettings({ TEMPORAL_ADDRESS: 'h:1', TEMPORAL_TLS: 'false', TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca });
  assert.equal(off.tls, false);
  assert.equal(temporalConnectionOptions({ ...off, address: 'h:1' }).tls, false);
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_TLS: 'maybe' }), 'TEMPORAL_TLS');
  // TLS on with no CA: the system's roots (a TLS config with nothing in it)
  const on = temporalConnectionOptions({ ...loadTemporalSettings({ TEMPORAL_TLS: 'true' }), address: 'h:1' }).tls as Tls;
  assert.equal(on.serverRootCACertificate, undefined);
  assert.equal(on.clientCertPair, undefined);
});

void test('an API key alone turns TLS on, as in Temporal Cloud', () => {
  const t = loadTemporalSettings({ TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233', TEMPORAL_API_KEY: 'k' });
  const o = temporalConnectionOptions({ ...t, address: t.address! });
  assert.equal(o.apiKey, 'k');
  assert.equal(o.tls, true);
});

void test('a TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE): the Temporal CLI user keeps their configuration', () => {
  const toml = file(
    'temporal.toml',
    [
      '[profile.default]',
      'address = "default.example:7233"',
      '',
      '[profile.prod]',
      'address = "prod.example:7233"',
      'namespace = "storage"',
      '[profile.prod.tls]',
      `client_cert_path = "${crt}"`,
      `client_key_path = "${key}"`,
      `server_ca_cert_path = "${ca}"`,
      'server_name = "temporal.prod"',
      '',
    ].join('\n'),
  );
  const prod = loadTemporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod', TEMPORAL_TASK_QUEUE: 'q' });
  assert.equal(prod.address, 'prod.example:7233');
  assert.equal(prod.namespace, 'storage');
  assert.equal(prod.taskQueue, 'q');
  assert.equal(prod.tls, true);
  assert.equal(prod.tlsCert, crt);
  assert.equal(prod.tlsCa, ca);
  assert.equal(prod.tlsServerName, 'temporal.prod');
  const tls = temporalConnectionOptions({ ...prod, address: prod.address! }).tls as Tls;
  assert.equal(text(tls.clientCertPair!.crt), 'CLIENT CERT PEM\n');

  // without TEMPORAL_PROFILE: the "default" profile; variables override the file, blanks do not
  assert.equal(loadTemporalSettings({ TEMPORAL_CONFIG_FILE: toml }).address, 'default.example:7233');
  assert.equal(loadTemporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_ADDRESS: 'env.example:1' }).address, 'env.example:1');
  assert.equal(loadTemporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_ADDRESS: '' }).address, 'default.example:7233');
  const mixed = loadTemporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod', TEMPORAL_TLS_SERVER_NAME: 'other' });
  assert.equal(mixed.tlsServerName, 'other');
  assert.equal(mixed.tlsCa, ca, 'the rest of the profile stays');

  // the worker reads the same
  const w = loadWorkerSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' });
  assert.equal(w.temporal.address, 'prod.example:7233');
  assert.equal(w.temporal.tlsKey, key);

  // gRPC headers: a profile's grpc_meta, a variable adds one, a blank variable removes one (as in Temporal's SDKs)
  const meta = file('meta.toml', '[profile.default]\naddress = "m:1"\n[profile.default.grpc_meta]\nx-a = "1"\nx-b = "2"\n');
  assert.deepEqual(loadTemporalSettings({ TEMPORAL_CONFIG_FILE: meta, TEMPORAL_GRPC_META_X_B: '', TEMPORAL_GRPC_META_X_C: '3' }).grpcMeta, {
    'x-a': '1',
    'x-c': '3',
  });

  throwsSettings(() => loadTemporalSettings({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'nope' }), 'nope', toml);
  const bad = file('bad.toml', '[profile.default\naddress = \n');
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_CONFIG_FILE: bad }), bad);
});

void test("the default file: $XDG_CONFIG_HOME/temporalio/temporal.toml, else ~/.config/temporalio/temporal.toml (the CLI's)", () => {
  const home = path.join(dir, 'home');
  fs.mkdirSync(path.join(home, '.config', 'temporalio'), { recursive: true });
  fs.writeFileSync(path.join(home, '.config', 'temporalio', 'temporal.toml'), '[profile.default]\naddress = "home.example:7233"\n');
  assert.equal(loadTemporalSettings({ HOME: home }).address, 'home.example:7233');
  const xdg = path.join(dir, 'xdg');
  fs.mkdirSync(path.join(xdg, 'temporalio'), { recursive: true });
  fs.writeFileSync(path.join(xdg, 'temporalio', 'temporal.toml'), '[profile.default]\naddress = "xdg.example:7233"\n');
  assert.equal(loadTemporalSettings({ HOME: home, XDG_CONFIG_HOME: xdg }).address, 'xdg.example:7233');
  assert.equal(loadTemporalSettings({ HOME: path.join(dir, 'nobody') }).address, undefined, 'no file: nothing from it');
});

void test('refused before connecting: a certificate without its key, an unreadable file, host verification off', () => {
  throwsSettings(
    () => temporalConnectionOptions({ ...loadTemporalSettings({ TEMPORAL_TLS_CLIENT_CERT_PATH: crt }), address: 'h:1' }),
    'TEMPORAL_TLS_CLIENT_KEY_PATH',
    /key is missing/,
  );
  throwsSettings(
    () =>
      temporalConnectionOptions({
        ...loadTemporalSettings({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(dir, 'missing.crt') }),
        address: 'h:1',
      }),
    'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    'missing.crt',
    'ENOENT',
  );
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' }), 'TEMPORAL_TLS_SERVER_CA_CERT_PATH');
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_ADDRESS: 'no-port' }), 'TEMPORAL_ADDRESS', /host:port/);
});

void test('a refused TLS connection is explained from the SDK error’s own words (the Rust core, OpenSSL)', async () => {
  const withCa = { address: '127.0.0.1:7233', tlsCa: '/pki/wrong-ca.crt', tlsCert: '/pki/c.crt', tlsKey: '/pki/c.key' };
  const noCert = { address: '127.0.0.1:7233', tlsCa: '/pki/ca.crt' };
  const explain = async (message: string, t: Parameters<typeof explainTemporalConnectError>[1]) =>
    (await explainTemporalConnectError(new Error(message), t)).message;

  const unknownIssuer =
    'tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }))';
  const msg = await explain(unknownIssuer, withCa);
  assert.match(msg, /presented a certificate that the CA in \/pki\/wrong-ca.crt does not trust/);
  assert.match(msg, /TEMPORAL_TLS_SERVER_CA_CERT_PATH/);
  assert.ok(msg.endsWith(`(${unknownIssuer})`), 'the original message is kept');
  assert.match(
    await explain('error:0A00045C:SSL routines:ssl3_read_bytes:tlsv13 alert certificate required', noCert),
    /requires a client certificate \(mTLS\) and svm has none: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/,
  );
  assert.match(await explain('tlsv1 alert unknown ca', withCa), /refused the client certificate \/pki\/c.crt/);
  assert.match(
    await explain(
      'InvalidCertificate(NotValidForNameContext { expected: DnsName("wrong.example"), presented: ["DnsName(\\"localhost\\")"] })',
      { ...noCert, tlsServerName: 'wrong.example' },
    ),
    /does not name "wrong.example" \(TEMPORAL_TLS_SERVER_NAME\)/,
  );
  assert.match(await explain('error:0A00010B:SSL routines::wrong version number', noCert), /does not speak TLS: set TEMPORAL_TLS=false/);
  // not about TLS, and TLS off: no probe; the error as it was, naming Temporal and the address
  const other = new Error('14 UNAVAILABLE: connect ECONNREFUSED 127.0.0.1:7233');
  const said = await explainTemporalConnectError(other, { address: '127.0.0.1:7233' });
  assert.equal(
    said.message,
    `cannot connect to Temporal at 127.0.0.1:7233: ${other.message}; check the address (TEMPORAL_ADDRESS or the profile's) and that the server, or the port-forward to it, is running`,
  );
  assert.equal((said as { cause?: unknown }).cause, other);
});

void test("a credential the server's authorizer refuses is explained: an API key refused, or none given (docs/temporal-server.md#authorization)", async () => {
  const denied = new Error('Failed to connect to Temporal server');
  (denied as { cause?: unknown }).cause = new Error('7 PERMISSION_DENIED: Request unauthorized.');
  const withKey = await explainTemporalConnectError(denied, { address: '127.0.0.1:7233', apiKey: 'jwt', namespace: 'east' });
  assert.match(
    withKey.message,
    /^cannot connect to Temporal: the Temporal server at 127\.0\.0\.1:7233 refused svm's credential: the API key \(TEMPORAL_API_KEY or the profile's api_key\) is expired, signed by a key the server does not trust, or grants nothing in namespace east/,
  );
  const without = await explainTemporalConnectError(new Error('16 UNAUTHENTICATED: missing token'), { address: '127.0.0.1:7233' });
  assert.match(
    without.message,
    /requires a credential and svm has none: set TEMPORAL_API_KEY \(or the profile's api_key\) to a token that grants namespace default/,
  );
});

void test('once connected, a namespace svm may not use, or that does not exist, is said naming the server and the namespace; other errors are left to the first call', async () => {
  const answering = (err?: Error & { code?: number }) =>
    ({
      workflowService: {
        describeNamespace: async () => {
          if (err) throw err;
          return {};
        },
      },
    }) as unknown as Parameters<typeof checkNamespaceAccess>[0];
  const grpc = (code: number, message: string) => Object.assign(new Error(message), { code });
  const target = { address: '127.0.0.1:7233', namespace: 'east' };
  await checkNamespaceAccess(answering(), target);
  await assert.rejects(
    checkNamespaceAccess(answering(grpc(7, '7 PERMISSION_DENIED: Request unauthorized.')), target),
    /^Error: cannot use Temporal: the Temporal server at 127\.0\.0\.1:7233 requires a credential and svm has none: set TEMPORAL_API_KEY .* grants namespace east \(7 PERMISSION_DENIED/,
  );
  await assert.rejects(
    checkNamespaceAccess(answering(grpc(7, 'denied')), { ...target, apiKey: 'jwt' }),
    /refused svm's credential: .* grants nothing in namespace east/,
  );
  await assert.rejects(
    checkNamespaceAccess(answering(grpc(5, '5 NOT_FOUND: Namespace east is not found.')), target),
    /^Error: cannot use Temporal: namespace "east" does not exist on the Temporal server at 127\.0\.0\.1:7233: create it \(temporal operator namespace create --namespace east\), then run svm setup/,
  );
  await checkNamespaceAccess(answering(grpc(14, '14 UNAVAILABLE')), target); // left to the command's own call
});

void test('when the SDK error says nothing (Node’s gRPC: "Failed to connect"), one TLS handshake finds why: against a local mTLS server', async () => {
  const pki = ensureTemporalTls(path.join(dir, 'plane'));
  const otherCa = ensureCa(path.join(dir, 'other-ca'));
  const server = tls.createServer({
    cert: fs.readFileSync(pki.serverCert),
    key: fs.readFileSync(pki.serverKey),
    ca: fs.readFileSync(pki.ca),
    requestCert: true,
    rejectUnauthorized: true,
    ALPNProtocols: ['h2'],
  });
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  try {
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const good = { address, tlsCa: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey, tlsServerName: 'localhost' };
    const silent = new Error('Failed to connect before the deadline');
    const explain = async (t: Parameters<typeof explainTemporalConnectError>[1]) => (await explainTemporalConnectError(silent, t)).message;
    assert.equal(await probeTls(good), undefined, 'the right settings: the handshake is accepted');
    const unexplained = await explainTemporalConnectError(silent, good);
    assert.match(
      unexplained.message,
      /^cannot connect to Temporal at \S+: Failed to connect before the deadline; check the address/,
      'no TLS reason: the address is named',
    );
    assert.equal((unexplained as { cause?: unknown }).cause, silent, 'and the error it had is its cause');
    assert.match(await explain({ address, tlsCa: pki.ca }), /requires a client certificate \(mTLS\) and svm has none/);
    assert.match(await explain({ ...good, tlsCa: otherCa.cert }), /the CA in .*other-ca\/ca.crt does not trust/);
    assert.match(await explain({ ...good, tlsServerName: 'wrong.example' }), /does not name "wrong.example"/);
    // (a client certificate from another CA: Node's TLS server hangs up without an alert, so there is nothing to read here;
    // temporal-server sends one, which refusalOf reads: the test above)
    assert.match(
      await explain({ ...good, address: '127.0.0.1:1' }),
      /^cannot connect to Temporal at 127\.0\.0\.1:1: Failed to connect.*check the address/,
      'nothing listening: not a TLS matter, and the address is named',
    );
  } finally {
    server.close();
  }
});
