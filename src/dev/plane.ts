/**
 * The local control plane: one etcd, N kube-apiservers sharing it (each with
 * its own port, cert dir and host identity), and the Temporal dev server with
 * its UI. Everything listens on 127.0.0.1 and lives under one directory, whose
 * state.json records what was started (pids, ports, flags) so that `down`
 * stops exactly that and `up` is idempotent.
 *
 * The same code serves `svm dev up|down`, the test suite and the demo.
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import YAML from 'yaml';
import { searchAttributeDefinitions } from '../workflows/search-attributes';
import { freePort, portOpen } from './ports';
import { ensureTools, type ToolPaths } from './tools';

export interface ProcessRecord {
  pid: number;
  /** The binary the pid must be running: guards against pid reuse. */
  binary: string;
  log: string;
}

export interface ApiserverRecord extends ProcessRecord {
  index: number;
  port: number;
  hostname: string;
  kubeconfig: string;
  /** Flags added to the defaults, e.g. --min-compatibility-version=1.33. */
  extraArgs: string[];
}

export interface PlaneState {
  dir: string;
  adminToken: string;
  etcd: ProcessRecord & { clientPort: number; peerPort: number };
  apiservers: ApiserverRecord[];
  temporal: ProcessRecord & { port: number; uiPort: number; extraArgs: string[] };
}

export interface UpOptions {
  dir: string;
  apiservers?: number;
  /** Extra flags for the Temporal dev server (e.g. dynamic config for tests). */
  temporalArgs?: string[];
  log?: (line: string) => void;
}

export const defaultDevDir = (): string => path.resolve(process.env.SVM_DEV_DIR || '.svm-dev');

const stateFile = (dir: string) => path.join(dir, 'state.json');

export function readState(dir: string): PlaneState | undefined {
  try {
    return JSON.parse(fs.readFileSync(stateFile(dir), 'utf8')) as PlaneState;
  } catch {
    return undefined;
  }
}

function writeState(state: PlaneState): void {
  fs.writeFileSync(stateFile(state.dir), JSON.stringify(state, null, 2));
}

/** True when pid is alive and runs the recorded binary (not a reused pid). */
export function isRunning(rec: ProcessRecord | undefined): boolean {
  if (!rec || !rec.pid) return false;
  try {
    process.kill(rec.pid, 0);
  } catch {
    return false;
  }
  try {
    const exe = fs.readlinkSync(`/proc/${rec.pid}/exe`);
    return exe === rec.binary || exe === `${rec.binary} (deleted)`;
  } catch {
    return false;
  }
}

/** Refuses to start a server on a port something else holds (its readiness probe would answer for it). */
async function assertPortFree(port: number, what: string): Promise<void> {
  const free = await new Promise<boolean>((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
  if (!free) throw new Error(`cannot start ${what}: 127.0.0.1:${port} is in use by a process this plane did not record (an orphan of an interrupted run?); stop it (e.g. fuser -k ${port}/tcp) and run 'svm dev up' again`);
}

async function startProcess(binary: string, args: string[], logFile: string, wrap: string[] = []): Promise<number> {
  const fd = fs.openSync(logFile, 'a');
  fs.writeSync(fd, `\n=== ${new Date().toISOString()} starting ${binary} ${args.join(' ')}\n`);
  const [cmd, ...rest] = wrap.length > 0 ? [...wrap, binary, ...args] : [binary, ...args];
  const child = spawn(cmd!, rest, { detached: true, stdio: ['ignore', fd, fd] });
  child.unref();
  fs.closeSync(fd);
  const pid = child.pid;
  if (!pid) throw new Error(`could not start ${binary}; see ${logFile}`);
  // A wrapper (unshare, sh) execs the binary under the same pid: wait for it.
  const deadline = Date.now() + 10_000;
  while (!isRunning({ pid, binary, log: logFile })) {
    if (Date.now() > deadline || !fs.existsSync(`/proc/${pid}`)) {
      throw new Error(`${path.basename(binary)} did not start; its log is ${logFile}:\n${tail(logFile, 15)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return pid;
}

function request(url: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(
      url,
      { headers: token ? { Authorization: `Bearer ${token}` } : {}, rejectUnauthorized: false, timeout: 5000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

async function waitFor(
  what: string,
  rec: ProcessRecord,
  ready: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isRunning(rec)) {
      throw new Error(`${what} exited during start-up; its log is ${rec.log}:\n${tail(rec.log, 15)}`);
    }
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) {
      throw new Error(`${what} was not ready after ${timeoutMs / 1000}s; its log is ${rec.log}:\n${tail(rec.log, 15)}`);
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}

function tail(file: string, lines: number): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function ensurePki(dir: string): { saKey: string; tokenFile: string; token: string } {
  const pki = path.join(dir, 'pki');
  fs.mkdirSync(pki, { recursive: true });
  const saKey = path.join(pki, 'service-account.key');
  if (!fs.existsSync(saKey)) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    fs.writeFileSync(saKey, privateKey.export({ format: 'pem', type: 'sec1' }), { mode: 0o600 });
  }
  const tokenFile = path.join(pki, 'tokens.csv');
  if (!fs.existsSync(tokenFile)) {
    const token = randomBytes(24).toString('hex');
    fs.writeFileSync(tokenFile, `${token},svm-admin,svm-admin,"system:masters"\n`, { mode: 0o600 });
  }
  const token = fs.readFileSync(tokenFile, 'utf8').split(',')[0]!;
  return { saKey, tokenFile, token };
}

export function kubeconfigYaml(server: string, token: string, name: string): string {
  return YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'svm-admin', user: { token } }],
    contexts: [{ name, context: { cluster: name, user: 'svm-admin' } }],
    'current-context': name,
  });
}

function apiserverArgs(state: PlaneState, a: ApiserverRecord, pki: { saKey: string; tokenFile: string }): string[] {
  const base = path.join(state.dir, `apiserver-${a.index}`);
  return [
    `--etcd-servers=http://127.0.0.1:${state.etcd.clientPort}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${a.port}`,
    `--cert-dir=${path.join(base, 'certs')}`,
    '--service-cluster-ip-range=10.96.0.0/16',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${pki.saKey}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    `--token-auth-file=${pki.tokenFile}`,
    '--authorization-mode=RBAC',
    '--storage-media-type=application/json',
    '--feature-gates=StorageVersionAPI=true,APIServerIdentity=true',
    '--runtime-config=internal.apiserver.k8s.io/v1alpha1=true',
    // Several servers on one IP would fight over the `kubernetes` endpoints.
    '--endpoint-reconciler-type=none',
    ...a.extraArgs,
  ];
}

async function startApiserverProcess(state: PlaneState, a: ApiserverRecord, tools: ToolPaths, log: (l: string) => void) {
  const pki = ensurePki(state.dir);
  const base = path.join(state.dir, `apiserver-${a.index}`);
  fs.mkdirSync(path.join(base, 'certs'), { recursive: true });
  // Each server gets its own UTS namespace and hostname so that its API server
  // identity (and so its StorageVersion entries) differ from the others'.
  const wrap =
    process.getuid?.() === 0 && fs.existsSync('/usr/bin/unshare')
      ? ['/usr/bin/unshare', '--uts', '--', '/bin/sh', '-c', 'hostname "$0" && exec "$@"', a.hostname]
      : [];
  if (wrap.length === 0 && a.index > 0) {
    log(`warning: not root, so ${a.hostname} shares the host name of the other API servers and their identity`);
  }
  await assertPortFree(a.port, `kube-apiserver ${a.index}`);
  a.pid = await startProcess(tools.kubeApiserver, apiserverArgs(state, a, pki), a.log, wrap);
  a.binary = tools.kubeApiserver;
  writeState(state);
  await waitFor(
    `kube-apiserver ${a.index} (https://127.0.0.1:${a.port})`,
    a,
    async () => (await request(`https://127.0.0.1:${a.port}/readyz`, state.adminToken)).status === 200,
    120_000,
  );
}

function writeEnv(state: PlaneState, tools: ToolPaths): string {
  const lines = [
    `SVM_DEV_DIR=${state.dir}`,
    `KUBECONFIG=${path.join(state.dir, 'kubeconfig')}`,
    ...state.apiservers.map((a) => `KUBECONFIG_APISERVER_${a.index}=${a.kubeconfig}`),
    `APISERVER_COUNT=${state.apiservers.length}`,
    `TEMPORAL_ADDRESS=127.0.0.1:${state.temporal.port}`,
    'TEMPORAL_NAMESPACE=default',
    `TEMPORAL_UI_URL=http://127.0.0.1:${state.temporal.uiPort}`,
    `ETCD_ENDPOINTS=http://127.0.0.1:${state.etcd.clientPort}`,
    `ETCDCTL=${tools.etcdctl}`,
    `KUBECTL=${tools.kubectl}`,
    `TEMPORAL_CLI=${tools.temporal}`,
  ];
  // `export` so that `source DIR/env` reaches the commands run after it.
  const text = lines.map((l) => `export ${l}`).join('\n') + '\n';
  fs.writeFileSync(path.join(state.dir, 'env'), text);
  return text;
}

/** Parses DIR/env into an object. */
export function readEnv(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of fs.readFileSync(path.join(dir, 'env'), 'utf8').split('\n')) {
    const line = raw.replace(/^export /, '');
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

async function temporalReady(port: number, uiPort: number): Promise<boolean> {
  const open = await portOpen(port);
  if (!open) return false;
  return (await request(`http://127.0.0.1:${uiPort}/`)).status === 200;
}

/**
 * Starts whatever of the plane is not running, waits until every server is
 * ready, writes DIR/env and returns its text.
 */
export async function up(opts: UpOptions): Promise<{ state: PlaneState; envText: string }> {
  const log = opts.log ?? ((l: string) => process.stderr.write(l + '\n'));
  const dir = path.resolve(opts.dir);
  fs.mkdirSync(dir, { recursive: true });
  const tools = ensureTools(log);
  const pki = ensurePki(dir);
  const count = opts.apiservers ?? readState(dir)?.apiservers.length ?? 2;
  if (!Number.isInteger(count) || count < 1 || count > 5) throw new Error(`--apiservers must be 1..5, got ${count}`);

  const prev = readState(dir);
  const state: PlaneState = prev ?? {
    dir,
    adminToken: pki.token,
    etcd: { pid: 0, binary: tools.etcd, log: path.join(dir, 'etcd.log'), clientPort: await freePort(), peerPort: await freePort() },
    apiservers: [],
    temporal: { pid: 0, binary: tools.temporal, log: path.join(dir, 'temporal.log'), port: await freePort(), uiPort: await freePort(), extraArgs: [] },
  };
  state.dir = dir;
  state.adminToken = pki.token;
  if (opts.temporalArgs) state.temporal.extraArgs = opts.temporalArgs;
  for (let i = state.apiservers.length; i < count; i++) {
    const base = path.join(dir, `apiserver-${i}`);
    fs.mkdirSync(base, { recursive: true });
    state.apiservers.push({
      index: i,
      pid: 0,
      binary: tools.kubeApiserver,
      port: await freePort(),
      hostname: `svm-apiserver-${i}`,
      log: path.join(base, 'kube-apiserver.log'),
      kubeconfig: path.join(base, 'kubeconfig'),
      extraArgs: [],
    });
  }
  writeState(state);

  if (!isRunning(state.etcd)) {
    log(`starting etcd on 127.0.0.1:${state.etcd.clientPort}`);
    await assertPortFree(state.etcd.clientPort, 'etcd');
    const e = state.etcd;
    const peer = `http://127.0.0.1:${e.peerPort}`;
    const client = `http://127.0.0.1:${e.clientPort}`;
    e.binary = tools.etcd;
    e.pid = await startProcess(
      tools.etcd,
      [
        '--name=svm',
        `--data-dir=${path.join(dir, 'etcd-data')}`,
        `--listen-client-urls=${client}`,
        `--advertise-client-urls=${client}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=svm=${peer}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      e.log,
    );
    writeState(state);
    await waitFor('etcd', e, async () => JSON.parse((await request(`${client}/health`)).body).health === 'true', 30_000);
  }

  if (!isRunning(state.temporal)) {
    const t = state.temporal;
    log(`starting the Temporal dev server on 127.0.0.1:${t.port} (UI http://127.0.0.1:${t.uiPort})`);
    await assertPortFree(t.port, 'the Temporal dev server');
    t.binary = tools.temporal;
    t.pid = await startProcess(
      tools.temporal,
      [
        'server',
        'start-dev',
        '--ip=127.0.0.1',
        `--port=${t.port}`,
        `--ui-port=${t.uiPort}`,
        `--db-filename=${path.join(dir, 'temporal.sqlite')}`,
        '--namespace=default',
        '--log-level=warn',
        ...searchAttributeDefinitions.flatMap((sa) => ['--search-attribute', `${sa.name}=${sa.type}`]),
        ...t.extraArgs,
      ],
      t.log,
    );
    writeState(state);
  }

  for (const a of state.apiservers) {
    fs.writeFileSync(a.kubeconfig, kubeconfigYaml(`https://127.0.0.1:${a.port}`, state.adminToken, `svm-apiserver-${a.index}`));
    if (!isRunning(a)) {
      log(`starting kube-apiserver ${a.index} on 127.0.0.1:${a.port} as ${a.hostname}`);
      await startApiserverProcess(state, a, tools, log);
    }
  }
  fs.copyFileSync(state.apiservers[0]!.kubeconfig, path.join(dir, 'kubeconfig'));

  await waitFor('the Temporal dev server', state.temporal, () => temporalReady(state.temporal.port, state.temporal.uiPort), 90_000);
  writeState(state);
  return { state, envText: writeEnv(state, tools) };
}

async function stopProcess(rec: ProcessRecord, graceMs = 10_000): Promise<void> {
  if (!isRunning(rec)) return;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-rec.pid, sig); // its process group (it was started detached)
    } catch {
      try {
        process.kill(rec.pid, sig);
      } catch {
        /* already gone */
      }
    }
  };
  signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (isRunning(rec) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (isRunning(rec)) signal('SIGKILL');
  while (isRunning(rec)) await new Promise((r) => setTimeout(r, 50));
}

/** Stops exactly what `up` started, by recorded pid. */
export async function down(dirArg: string, log: (l: string) => void = (l) => process.stderr.write(l + '\n')): Promise<void> {
  const state = readState(path.resolve(dirArg));
  if (!state) {
    log(`nothing to stop: no ${stateFile(path.resolve(dirArg))}`);
    return;
  }
  for (const a of state.apiservers) {
    if (isRunning(a)) log(`stopping kube-apiserver ${a.index} (pid ${a.pid})`);
    await stopProcess(a);
  }
  if (isRunning(state.temporal)) log(`stopping the Temporal dev server (pid ${state.temporal.pid})`);
  await stopProcess(state.temporal);
  if (isRunning(state.etcd)) log(`stopping etcd (pid ${state.etcd.pid})`);
  await stopProcess(state.etcd);
}

function mustState(dir: string): PlaneState {
  const state = readState(path.resolve(dir));
  if (!state) throw new Error(`no local control plane in ${path.resolve(dir)}: run 'svm dev up --dir ${dir}' first`);
  return state;
}

function apiserverRecord(state: PlaneState, index: number): ApiserverRecord {
  const a = state.apiservers[index];
  if (!a) throw new Error(`there is no kube-apiserver ${index}: the plane has ${state.apiservers.length} (0..${state.apiservers.length - 1})`);
  return a;
}

/** Stops one API server (gracefully, or with SIGKILL when `kill` is set). */
export async function stopApiserver(dir: string, index: number, opts: { kill?: boolean } = {}): Promise<void> {
  const state = mustState(dir);
  await stopProcess(apiserverRecord(state, index), opts.kill ? 0 : 10_000);
}

/**
 * Restarts one API server, optionally with different extra flags (a rolling
 * upgrade step: e.g. ['--min-compatibility-version=1.33']). Pass undefined to
 * keep its current flags.
 */
export async function restartApiserver(
  dir: string,
  index: number,
  extraArgs?: string[],
  log: (l: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<ApiserverRecord> {
  const state = mustState(dir);
  const a = apiserverRecord(state, index);
  await stopProcess(a);
  if (extraArgs) a.extraArgs = extraArgs;
  log(`restarting kube-apiserver ${index} with extra flags [${a.extraArgs.join(' ')}]`);
  await startApiserverProcess(state, a, ensureTools(log), log);
  return a;
}

/** Stops and starts the Temporal dev server, keeping its SQLite file. */
export async function restartTemporal(dir: string, log: (l: string) => void = (l) => process.stderr.write(l + '\n')): Promise<void> {
  const state = mustState(dir);
  await stopProcess(state.temporal);
  await up({ dir, log });
}
