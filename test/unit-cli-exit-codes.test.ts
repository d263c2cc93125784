/**
 * svm's exit codes by the class of the error a run ends with (src/client/exit-codes.ts, docs/cli.md#exit-codes):
 * 64 a usage error, 69 a service that did not answer, 77 a refusal, 1 anything else; the runs go through bin/svm.js
 * as a user's shell does, against ports nothing listens on and a stand-in API server that refuses every credential.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { CommanderError } from 'commander';
import { classifyError, EXIT, exitCodeOf, UsageError } from '../src/client/exit-codes';
import { KubeError } from '../src/kube/errors';
import { InvalidResourceError } from '../src/kube/resolve';
import { SettingsError } from '../src/config/settings';
import { MigrationNotRunningError } from '../src/client/index';

const bin = path.join(__dirname, '..', 'bin', 'svm.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-exit-'));

/** A port nothing listens on (one the system just gave out and took back). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function kubeconfig(name: string, server: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 'not-a-valid-token' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  return file;
}

function svm(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [bin, ...args], { env: { ...process.env, ...env }, timeout: 60_000 }, (err, _out, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr }),
    ),
  );
}

void test("a bad flag, an unknown command, no command: the usage code (64), with commander's one error line", async () => {
  const env = { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` };
  for (const args of [['migrate', 'secrets', '--chunk-size', 'x'], ['bogus'], ['status', '--output', 'xml'], []]) {
    const r = await svm(args, env);
    assert.equal(r.code, EXIT.usage, `svm ${args.join(' ')}: ${r.stderr}`);
    if (args.length > 0) assert.equal(r.stderr.match(/^error: /gm)?.length, 1, r.stderr);
  }
  // Flags that contradict each other, refused by the command's action (commander's InvalidArgumentError): said once.
  const fleet = await svm(['fleet', 'migrate', 'c1', '--clusters', 'a'], env);
  assert.equal(fleet.code, EXIT.usage, fleet.stderr);
  assert.match(fleet.stderr, /^error: say what to migrate in each cluster/);
  assert.equal(fleet.stderr.match(/^error: /gm)?.length, 1, fleet.stderr);
  // --help and --version are not errors.
  for (const args of [['--help'], ['status', '--help'], ['--version']]) assert.equal((await svm(args, env)).code, 0, args.join(' '));
});

void test('a resource name that names nothing, or none: refused as usage (64) before Temporal is reached', async () => {
  const env = { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` };
  for (const args of [['migrate', 'Secrets!!'], ['migrate', ''], ['migrate'], ['migrate', 'secrets', '--all']]) {
    const r = await svm(args, env);
    assert.equal(r.code, EXIT.usage, `svm ${args.map((a) => JSON.stringify(a)).join(' ')}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /Temporal/, 'refused before connecting');
  }
});

void test('Temporal at a closed port: unreachable (69), naming Temporal and the address', async () => {
  const address = `127.0.0.1:${await closedPort()}`;
  const r = await svm(['status'], { TEMPORAL_ADDRESS: address });
  assert.equal(r.code, EXIT.unreachable, r.stderr);
  assert.match(r.stderr, new RegExp(`^error: cannot connect to Temporal at ${address}: `));
});

void test('the Kubernetes API at a closed port: unreachable (69); one that refuses the credential: refused (77); a kubeconfig that is not there: usage (64)', async () => {
  const closed = kubeconfig('closed', `http://127.0.0.1:${await closedPort()}`);
  const down = await svm(['crds', 'install'], { KUBECONFIG: closed });
  assert.equal(down.code, EXIT.unreachable, down.stderr);
  assert.match(down.stderr, /^error: the Kubernetes API at http:\/\/127\.0\.0\.1:\d+ did not answer/);

  // An API server that answers 401 to everything, as kube-apiserver does to a token it does not know.
  const server = http.createServer((_req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const refusing = kubeconfig('refusing', `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    const refused = await svm(['crds', 'install'], { KUBECONFIG: refusing });
    assert.equal(refused.code, EXIT.refused, refused.stderr);
    assert.match(refused.stderr, /^error: .*Unauthorized/);
  } finally {
    server.close();
  }

  const missing = await svm(['crds', 'install'], { KUBECONFIG: path.join(dir, 'nonexistent') });
  assert.equal(missing.code, EXIT.usage, missing.stderr);
  assert.match(missing.stderr, /^error: the kubeconfig .*nonexistent could not be read/);
});

void test('svm plan keeps its documented codes: 3 for any error, a bad flag included', async () => {
  const r = await svm(['plan', '--bogus'], {});
  assert.equal(r.code, 3, r.stderr);
});

void test("the classification: by type, by KubeError kind, by gRPC and errno codes in the causes, by the Temporal connection's words", () => {
  const cases: Array<[unknown, string]> = [
    [new CommanderError(1, 'commander.unknownOption', 'x'), 'usage'],
    [new UsageError('missing resource'), 'usage'],
    [new InvalidResourceError('the cluster serves no resource "widgets"'), 'usage'],
    [new SettingsError('invalid setting'), 'usage'],
    [new RangeError('parallelism must be a whole number between 1 and 64, got 0'), 'usage'],
    [new Error('the kubeconfig /x has no context "prod" (its contexts: a)'), 'usage'],
    [new KubeError('network', 'connect ECONNREFUSED 127.0.0.1:2'), 'unreachable'],
    [new KubeError('timeout', 'timed out'), 'unreachable'],
    [new KubeError('unavailable', 'the server is currently unable to handle the request', 503), 'unreachable'],
    [new KubeError('unauthorized', 'Unauthorized', 401), 'refused'],
    [new KubeError('forbidden', 'secrets is forbidden', 403), 'refused'],
    [new Error('cannot connect to Temporal at 127.0.0.1:1: Failed to connect before the deadline'), 'unreachable'],
    [new Error('cannot connect to Temporal: the Temporal server at x:7233 requires a client certificate'), 'refused'],
    [new Error('cannot use Temporal: namespace "n" does not exist on the Temporal server at x:7233'), 'refused'],
    [
      Object.assign(new Error('Failed to list workflows'), { cause: Object.assign(new Error('14 UNAVAILABLE'), { code: 14 }) }),
      'unreachable',
    ],
    [Object.assign(new Error('Failed to start'), { cause: Object.assign(new Error('7 PERMISSION_DENIED'), { code: 7 }) }), 'refused'],
    [
      Object.assign(new Error('fetch failed'), { cause: Object.assign(new Error('getaddrinfo ENOTFOUND x'), { code: 'ENOTFOUND' }) }),
      'unreachable',
    ],
    [new MigrationNotRunningError('no migration of secrets is running'), 'refused'],
    [new KubeError('conflict', 'changed', 409), 'failed'],
    [new Error('the migration of secrets Failed'), 'failed'],
    ['a string', 'failed'],
  ];
  for (const [err, expected] of cases) assert.equal(classifyError(err), expected, err instanceof Error ? err.message : String(err));
  assert.equal(exitCodeOf(new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)')), 0);
  // A cycle of causes ends the walk.
  const a = new Error('a') as Error & { cause?: unknown };
  a.cause = a;
  assert.equal(classifyError(a), 'failed');
});
