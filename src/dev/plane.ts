/**
 * The local control plane: one etcd, N kube-apiservers sharing it, a load
 * balancer in front of them and the Temporal dev server with its UI. It
 * lives under one directory, whose state.json records what was started (pids,
 * ports, addresses, namespaces, flags) so that `down` stops and removes
 * exactly that and `up` is idempotent.
 *
 * Two shapes:
 * - cluster (as root, with `ip` and haproxy): each API server in a network
 *   namespace of its own, on 198.18.K.(10+i):6443, advertising that address
 *   with the lease endpoint reconciler, so the `kubernetes` EndpointSlice
 *   lists every server as in a real cluster; haproxy on 127.0.0.1 in front;
 *   etcd on 127.0.0.1 and the plane's bridge address 198.18.K.1.
 * - loopback (the fallback): every server on 127.0.0.1 with its own port,
 *   no endpoint reconciler, the admin kubeconfig pointing at server 0.
 * In both, TLS is verified against the plane's own CA (DIR/pki/ca.crt), each
 * server has its own host name (so its API server identity differs), and the
 * alpha StorageVersion API is off unless asked for, as in real clusters.
 *
 * The same code serves `svm dev up|down`, the test suite and the demo.
 */
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as http from 'node:http';
import * as path from 'node:path';
import { packageRoot } from '../config/build-info';
import YAML from 'yaml';
import { searchAttributeDefinitions } from '../contract/search-attributes';
import { haproxyConfig, haproxyPath } from './load-balancer';
import {
  allocateNetwork,
  commandPath,
  ensureBridge,
  ensureServerNetwork,
  removeNetwork,
  serverNetwork,
  type PlaneNetwork,
} from './network';
import { freePort, portOpen, startServerOnPorts, waitServing } from './ports';
import { isRunning, startProcess, stopProcess, waitFor, type ProcessRecord } from './processes';
import {
  finishTemporalServer,
  newTemporalServerRecord,
  ensureTemporalTls,
  smallintPort,
  startPostgres,
  startTemporalServer,
  stopPostgres,
  stopTemporalServer,
  temporalTlsEnv,
  type TemporalServerRecord,
} from './temporal-server';
import { ensureCa, ensureServingCert } from './tls';
import { ensureTemporalAuth, planeAdminToken } from './temporal-auth';
import { devServerDynamicConfigArgs } from './temporal-dynamic-config';
import { ensureTools, expectedToolPaths, kubeBinaries, kubeToolName, kubeVersions, type ToolName, type ToolPaths } from './tools';

/** The plane's own processes are src/dev/processes.ts's; exported here too, for the tests that check them through the plane. */
export { isRunning };

export interface ApiserverRecord extends ProcessRecord {
  index: number;
  /** The address it binds and advertises: 198.18.K.(10+i) in the cluster shape, 127.0.0.1 in the loopback one. */
  address: string;
  /** Its secure port: 6443 for every server in the cluster shape, one each in the loopback one. */
  port: number;
  /** https://address:port */
  url: string;
  /** Its network namespace (cluster shape only). */
  netns?: string;
  /** The root namespace's end of its veth pair (cluster shape only). */
  hostVeth?: string;
  hostname: string;
  kubeconfig: string;
  /** Flags added to the defaults, e.g. --min-compatibility-version=1.34. */
  extraArgs: string[];
  /** The Kubernetes release it runs (a rolling upgrade moves it); undefined: the plane's kubeVersion. */
  version?: string;
}

/** kube-controller-manager, when the plane runs one (dev up --controller-manager, startControllerManager). */
export interface ControllerManagerRecord extends ProcessRecord {
  version: string;
  /** Whether its built-in storage version migrator (storage-version-migrator-controller) runs. */
  builtInMigrator: boolean;
  /** Its secure port (healthz) on 127.0.0.1. */
  port: number;
}

/** Which Temporal server the plane runs: the dev server (quick, the default) or temporal-server on PostgreSQL (what users deploy). */
export type TemporalMode = 'dev' | 'server';

/** 'cluster': namespaces, real addresses, a load balancer; 'loopback': 127.0.0.1, one port each (the fallback). */
export type PlaneShape = 'cluster' | 'loopback';

export interface LoadBalancerRecord extends ProcessRecord {
  port: number;
  config: string;
}

export interface PlaneState {
  dir: string;
  adminToken: string;
  shape: PlaneShape;
  /** Why the plane has its shape, in words (a loopback plane says what was missing). */
  shapeReason: string;
  /** Whether the alpha StorageVersion API (internal.apiserver.k8s.io/v1alpha1) is served. Off by default, as in real clusters. */
  storageVersionApi: boolean;
  /** The plane's bridge (cluster shape only). */
  network?: PlaneNetwork;
  caFile: string;
  etcd: ProcessRecord & { clientPort: number; peerPort: number };
  apiservers: ApiserverRecord[];
  /** haproxy in front of the servers (cluster shape only). */
  loadBalancer?: LoadBalancerRecord;
  /** The URL of DIR/kubeconfig: the load balancer, or server 0 in the loopback shape. */
  apiUrl: string;
  /**
   * The Temporal frontend svm talks to: the dev server (`temporal server start-dev`), or with
   * temporalMode 'server' temporal-server itself (its gRPC port; uiPort is its UI server's).
   */
  temporal: ProcessRecord & { port: number; uiPort: number; extraArgs: string[] };
  /** 'dev' (undefined: a state written before the choice): the dev server on SQLite; 'server': temporal-server on PostgreSQL. */
  temporalMode?: TemporalMode;
  /** PostgreSQL, the other services' ports and the UI server of temporalMode 'server' (src/dev/temporal-server.ts). */
  temporalServer?: TemporalServerRecord;
  /** The Kubernetes release new API servers run (tools/versions.json: kubernetes, or kubernetesPrevious); undefined: the default. */
  kubeVersion?: string;
  controllerManager?: ControllerManagerRecord;
}

export interface UpOptions {
  dir: string;
  apiservers?: number;
  /**
   * Extra flags for the Temporal dev server (e.g. dynamic config for tests). With temporal 'server',
   * `--dynamic-config-value KEY=VALUE` and `--log-level L` are translated for temporal-server.
   */
  temporalArgs?: string[];
  /** Which Temporal server a new plane runs (default 'dev'). Undefined keeps the plane's current one. */
  temporal?: TemporalMode;
  /**
   * With temporal 'server': the frontend requires mTLS, with a CA and certificates the plane makes
   * (DIR/pki/temporal/), and the env file carries Temporal's TEMPORAL_TLS_* variables. Undefined keeps
   * the plane's current setting (off for a new plane).
   */
  temporalTls?: boolean;
  /**
   * With temporal 'server': the frontend requires a JWT signed by the plane's key (temporal-server's claim mapper and
   * default authorizer: src/dev/temporal-auth.ts), and the env file carries a `temporal-system:admin` token as
   * TEMPORAL_API_KEY. No Web UI is served then. Undefined keeps the plane's current setting (off for a new plane).
   */
  temporalAuth?: boolean;
  /** Serve the alpha StorageVersion API. Undefined keeps the plane's current setting (off for a new plane). */
  storageVersionApi?: boolean;
  /** Force the loopback shape even where the cluster shape is possible. */
  loopback?: boolean;
  /** The Kubernetes release of a new plane (default: the newest built, tools/versions.json). */
  kubeVersion?: string;
  /**
   * Also build these when missing, with what the plane starts (`svm dev up`: kubectl, etcdctl and the Temporal
   * CLI, which the env file names, and kube-controller-manager). Only what `up` starts is built otherwise.
   */
  tools?: ToolName[];
  log?: (line: string) => void;
}

/** The port every API server listens on in the cluster shape (each has its own address). */
export const CLUSTER_SECURE_PORT = 6443;

/** The checkout (packageRoot: from src/dev or, compiled, dist/src/dev alike). */
const repoRoot = packageRoot();

export const defaultDevDir = (): string => path.resolve(process.env.SVM_DEV_DIR || '.svm-dev');

const stateFile = (dir: string) => path.join(dir, 'state.json');

export function readState(dir: string): PlaneState | undefined {
  let raw: Partial<PlaneState>;
  try {
    raw = JSON.parse(fs.readFileSync(stateFile(dir), 'utf8')) as Partial<PlaneState>;
  } catch {
    return undefined;
  }
  // A state written before the plane had shapes: loopback, StorageVersion API on.
  const apiservers = (raw.apiservers ?? []).map((a) => ({
    ...a,
    address: a.address ?? '127.0.0.1',
    url: a.url ?? `https://127.0.0.1:${a.port}`,
  }));
  return {
    shape: 'loopback',
    shapeReason: 'made by an earlier version of the plane',
    storageVersionApi: true,
    caFile: path.join(dir, 'pki', 'ca.crt'),
    apiUrl: apiservers[0]?.url ?? '',
    ...raw,
    apiservers,
  } as PlaneState;
}

function writeState(state: PlaneState): void {
  fs.writeFileSync(stateFile(state.dir), JSON.stringify(state, null, 2));
}

/** A GET; https is verified against `ca` (the plane's CA) with the server name `servername`. */
function request(url: string, opts: { token?: string; ca?: string; servername?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(
      url,
      {
        headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : {},
        ...(opts.ca ? { ca: fs.readFileSync(opts.ca), servername: opts.servername } : {}),
        timeout: 5000,
      },
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

/**
 * A token kubeconfig for `server`, trusting the CA in `caPem` (the plane's
 * DIR/pki/ca.crt). Without `caPem`, the CA of the plane in SVM_DEV_DIR (or
 * .svm-dev) is used. Never skips TLS verification.
 */
export function kubeconfigYaml(server: string, token: string, name: string, caPem?: string | Buffer): string {
  let ca = caPem;
  if (ca === undefined) {
    const file = path.join(defaultDevDir(), 'pki', 'ca.crt');
    if (!fs.existsSync(file)) throw new Error(`kubeconfigYaml: no CA given and no plane CA at ${file}; pass the plane's DIR/pki/ca.crt`);
    ca = fs.readFileSync(file);
  }
  return YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') } }],
    users: [{ name: 'svm-admin', user: { token } }],
    contexts: [{ name, context: { cluster: name, user: 'svm-admin' } }],
    'current-context': name,
  });
}

/** The flags that turn the alpha StorageVersion API on (off is the default of a real cluster). */
export const STORAGE_VERSION_API_ARGS = [
  '--feature-gates=StorageVersionAPI=true,APIServerIdentity=true',
  '--runtime-config=internal.apiserver.k8s.io/v1alpha1=true',
];

function apiserverArgs(
  state: PlaneState,
  a: ApiserverRecord,
  pki: { saKey: string; tokenFile: string },
  tls: { cert: string; key: string },
): string[] {
  const cluster = state.shape === 'cluster';
  const etcdHost = cluster ? state.network!.gateway : '127.0.0.1';
  return [
    `--etcd-servers=http://${etcdHost}:${state.etcd.clientPort}`,
    `--bind-address=${a.address}`,
    `--advertise-address=${a.address}`,
    `--secure-port=${a.port}`,
    `--tls-cert-file=${tls.cert}`,
    `--tls-private-key-file=${tls.key}`,
    '--service-cluster-ip-range=10.96.0.0/16',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${pki.saKey}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    `--token-auth-file=${pki.tokenFile}`,
    '--authorization-mode=RBAC',
    '--storage-media-type=application/json',
    // Cluster: every server keeps its own lease and so its own entry in the
    // `kubernetes` EndpointSlice. Loopback: several servers on 127.0.0.1
    // would fight over (and Kubernetes refuses) loopback endpoints.
    `--endpoint-reconciler-type=${cluster ? 'lease' : 'none'}`,
    ...(state.storageVersionApi ? STORAGE_VERSION_API_ARGS : []),
    ...a.extraArgs,
  ];
}

async function startApiserverProcess(state: PlaneState, a: ApiserverRecord, log: (l: string) => void) {
  const pki = ensurePki(state.dir);
  const base = path.join(state.dir, `apiserver-${a.index}`);
  fs.mkdirSync(base, { recursive: true });
  const tls = ensureServingCert(ensureCa(path.join(state.dir, 'pki')), path.join(base, 'tls'), [a.address]);
  // Each server gets its own UTS namespace and host name so that its API server
  // identity (and so its lease and StorageVersion entries) differ from the others'.
  const root = process.getuid?.() === 0;
  const unshare = commandPath('unshare');
  const uts = root && unshare ? [unshare, '--uts', '--', '/bin/sh', '-c', 'hostname "$0" && exec "$@"', a.hostname] : [];
  if (uts.length === 0 && a.index > 0) {
    log(`warning: not root (or no unshare), so ${a.hostname} shares the host name of the other API servers and their identity`);
  }
  let wrap = uts;
  if (state.shape === 'cluster') {
    const s = ensureServerNetwork(state.network!, a.index);
    if (s.netns !== a.netns || s.address !== a.address)
      throw new Error(`kube-apiserver ${a.index}: its namespace ${s.netns} (${s.address}) is not the recorded ${a.netns} (${a.address})`);
    wrap = [commandPath('ip')!, 'netns', 'exec', s.netns, ...uts];
  }
  const version = a.version ?? state.kubeVersion ?? kubeVersions().current;
  ensureTools([kubeToolName('kube-apiserver', version)], log); // built on first use
  const binary = kubeBinaries(version).kubeApiserver;
  const start = async ([port]: number[]) => {
    a.port = port!;
    a.url = `https://${a.address}:${a.port}`;
    fs.writeFileSync(a.kubeconfig, kubeconfigYaml(a.url, state.adminToken, `svm-apiserver-${a.index}`, fs.readFileSync(state.caFile)), {
      mode: 0o600,
    });
    a.pid = await startProcess(binary, apiserverArgs(state, a, pki, tls), a.log, wrap);
    a.binary = binary;
    writeState(state);
    await waitServing(
      `kube-apiserver ${a.index} (${a.url})`,
      a,
      [a.port],
      async () => (await request(`${a.url}/readyz`, { token: state.adminToken, ca: state.caFile })).status === 200,
      120_000,
    );
  };
  // Cluster: 6443 on its own address in its own network namespace, where nothing else binds. Loopback: its drawn
  // port (drawn again when taken) or, once it has run on it, its recorded one.
  if (state.shape === 'cluster') await start([a.port]);
  else await startServerOnPorts(`kube-apiserver ${a.index}`, a, [a.port], start, { log });
  writeState(state);
}

function writeEnv(state: PlaneState, tools: ToolPaths): string {
  const lines = [
    `SVM_DEV_DIR=${state.dir}`,
    `SVM_PLANE_SHAPE=${state.shape}`,
    `KUBECONFIG=${path.join(state.dir, 'kubeconfig')}`,
    `KUBE_CA_FILE=${state.caFile}`,
    ...state.apiservers.map((a) => `KUBECONFIG_APISERVER_${a.index}=${a.kubeconfig}`),
    `APISERVER_COUNT=${state.apiservers.length}`,
    `APISERVER_URLS=${state.apiservers.map((a) => a.url).join(',')}`,
    `TEMPORAL_ADDRESS=127.0.0.1:${state.temporal.port}`,
    'TEMPORAL_NAMESPACE=default',
    `TEMPORAL_UI_URL=http://127.0.0.1:${state.temporal.uiPort}`,
    `ETCD_ENDPOINTS=http://127.0.0.1:${state.etcd.clientPort}`,
    `ETCDCTL=${tools.etcdctl}`,
    `KUBECTL=${tools.kubectl}`,
    `TEMPORAL_CLI=${tools.temporal}`,
    `SVM_TEMPORAL=${state.temporalMode ?? 'dev'}`,
    ...Object.entries(state.temporalServer?.tls ? temporalTlsEnv(state.temporalServer.tls) : {}).map(([k, v]) => `${k}=${v}`),
    ...(state.temporalServer?.auth ? [`TEMPORAL_API_KEY=${planeAdminToken(state.temporalServer.auth)}`] : []),
    `KUBE_VERSION=${state.kubeVersion ?? kubeVersions().current}`,
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
 * Which shape this machine allows: the cluster shape needs root, `ip` and
 * haproxy. As root, a missing haproxy is installed from Debian first
 * (scripts/ensure-plane-packages.sh).
 */
export function decideShape(opts: { loopback?: boolean }, log: (l: string) => void): { shape: PlaneShape; reason: string } {
  if (opts.loopback) return { shape: 'loopback', reason: 'the loopback shape was asked for (--loopback)' };
  if (process.getuid?.() !== 0) return { shape: 'loopback', reason: 'not root: network namespaces, veth links and a bridge need root' };
  if (!commandPath('ip')) return { shape: 'loopback', reason: "iproute2's `ip` is missing (apt-get install iproute2)" };
  if (!haproxyPath()) {
    log("haproxy is missing: installing Debian's (scripts/ensure-plane-packages.sh)");
    const r = spawnSync('bash', [path.join(repoRoot, 'scripts', 'ensure-plane-packages.sh')], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0 || !haproxyPath())
      return { shape: 'loopback', reason: 'haproxy is missing and could not be installed (bash scripts/ensure-plane-packages.sh)' };
  }
  return { shape: 'cluster', reason: 'root with ip and haproxy: each API server in its own network namespace behind haproxy' };
}

function anyRunning(state: PlaneState): boolean {
  return (
    isRunning(state.etcd) ||
    isRunning(state.temporal) ||
    isRunning(state.temporalServer?.postgres) ||
    isRunning(state.temporalServer?.ui) ||
    isRunning(state.loadBalancer) ||
    state.apiservers.some((a) => isRunning(a))
  );
}

/** Gives every server its address, port, namespace and URL for the plane's shape. */
async function placeApiservers(state: PlaneState): Promise<void> {
  for (const a of state.apiservers) {
    if (state.shape === 'cluster') {
      const s = serverNetwork(state.network!, a.index);
      a.address = s.address;
      a.port = CLUSTER_SECURE_PORT;
      a.netns = s.netns;
      a.hostVeth = s.hostVeth;
      delete a.portsDrawn;
    } else {
      if (a.address !== '127.0.0.1' || a.port === CLUSTER_SECURE_PORT || !a.port) {
        a.port = await freePort();
        a.portsDrawn = true; // a candidate: bound (or drawn again) when the server starts
      }
      a.address = '127.0.0.1';
      delete a.netns;
      delete a.hostVeth;
    }
    a.url = `https://${a.address}:${a.port}`;
  }
}

async function ensureLoadBalancer(state: PlaneState, log: (l: string) => void): Promise<void> {
  const haproxy = haproxyPath();
  if (!haproxy)
    throw new Error(
      "haproxy is missing: run 'bash scripts/ensure-plane-packages.sh' (or 'svm dev down' and up again for the loopback shape)",
    );
  const lb: LoadBalancerRecord = state.loadBalancer ?? {
    pid: 0,
    binary: haproxy,
    log: path.join(state.dir, 'haproxy.log'),
    port: await freePort(),
    config: path.join(state.dir, 'haproxy.cfg'),
    portsDrawn: true,
  };
  state.loadBalancer = lb;
  const text = (port: number) =>
    haproxyConfig({
      port,
      caFile: state.caFile,
      servers: state.apiservers.map((a) => ({ name: `apiserver-${a.index}`, address: a.address, port: a.port })),
    });
  const same = fs.existsSync(lb.config) && fs.readFileSync(lb.config, 'utf8') === text(lb.port);
  if (isRunning(lb) && same) return;
  if (isRunning(lb)) {
    log('restarting haproxy: its backends changed');
    await stopProcess(lb);
  }
  await startServerOnPorts(
    'haproxy',
    lb,
    [lb.port],
    async ([port]) => {
      lb.port = port!;
      fs.writeFileSync(lb.config, text(lb.port));
      const check = spawnSync(haproxy, ['-c', '-q', '-f', lb.config], { encoding: 'utf8' });
      if (check.status !== 0) throw new Error(`haproxy refuses ${lb.config}: ${check.stderr || check.stdout}`);
      log(`starting haproxy on 127.0.0.1:${lb.port} in front of ${state.apiservers.map((a) => `${a.address}:${a.port}`).join(', ')}`);
      lb.binary = haproxy;
      // -db: the foreground, one process, whose pid is the one recorded. -dR: no SO_REUSEPORT, which haproxy sets
      // by default: with it, a second haproxy of the same user (another plane's) binds the same port without an
      // error and the kernel shares the connections between them; without it, the bind decides.
      lb.pid = await startProcess(haproxy, ['-db', '-dR', '-f', lb.config], lb.log);
      writeState(state);
      await waitServing(
        `haproxy (https://127.0.0.1:${lb.port})`,
        lb,
        [lb.port],
        async () => (await request(`https://127.0.0.1:${lb.port}/readyz`, { token: state.adminToken, ca: state.caFile })).status === 200,
        30_000,
      );
    },
    { log },
  );
  writeState(state);
}

/**
 * Starts whatever of the plane is not running, waits until every server is
 * ready, writes DIR/env and returns its text.
 */
export async function up(opts: UpOptions): Promise<{ state: PlaneState; envText: string }> {
  const log = opts.log ?? ((l: string) => process.stderr.write(l + '\n'));
  const dir = path.resolve(opts.dir);
  fs.mkdirSync(dir, { recursive: true });
  const tools = expectedToolPaths(); // built below: only what this `up` starts
  const pki = ensurePki(dir);
  const ca = ensureCa(path.join(dir, 'pki'));
  const count = opts.apiservers ?? readState(dir)?.apiservers.length ?? 2;
  if (!Number.isInteger(count) || count < 1 || count > 5) throw new Error(`--apiservers must be 1..5, got ${count}`);

  const prev = readState(dir);
  const running = prev !== undefined && anyRunning(prev);
  const { shape, shapeReason } = choosePlaneShape(dir, prev, running, opts, log);
  const state: PlaneState = prev ?? (await newPlaneState({ dir, adminToken: pki.token, shape, shapeReason, caFile: ca.cert }, tools));
  state.dir = dir;
  state.adminToken = pki.token;
  state.caFile = ca.cert;
  state.shape = shape;
  state.shapeReason = shapeReason;
  await applyTemporalOptions(state, opts, running);
  const svChanged = applyKubeOptions(state, opts, running, count);
  ensureTools(toolsToStart(state, opts, count, svChanged), log);
  addApiservers(state, count, tools);
  placeNetwork(state, log);
  await placeApiservers(state);
  writeState(state);
  log(shapeLine(state));

  if (!isRunning(state.etcd)) await startEtcd(state, tools, log);
  // The Temporal server starts (until it holds its ports, on fresh ones if one was taken) while the API servers do.
  const temporalStarted =
    state.temporalMode === 'server'
      ? startTemporalServer(state.temporal, state.temporalServer!, log, () => writeState(state))
      : isRunning(state.temporal)
        ? Promise.resolve()
        : startTemporalDevServer(state, tools, log);
  temporalStarted.catch(() => undefined); // awaited below: not an unhandled rejection while the API servers start
  try {
    const caPem = fs.readFileSync(state.caFile);
    await startApiservers(state, svChanged, caPem, log);
    await serveApi(state, caPem, log);
  } catch (apiError) {
    // Temporal's start settled before `up` throws (none left running on behind it), and its failure told too.
    const temporalError = await temporalStarted.then(
      () => undefined,
      (e: unknown) => e,
    );
    if (temporalError === undefined) throw apiError;
    throw new AggregateError(
      [apiError, temporalError],
      `the API servers and Temporal both failed to start: ${errorText(apiError)}; and ${errorText(temporalError)}`,
    );
  }
  await temporalStarted;

  if (state.temporalMode === 'server') await finishTemporalServer(state.temporal, state.temporalServer!, log);
  else await waitFor('the Temporal dev server', state.temporal, () => temporalReady(state.temporal.port, state.temporal.uiPort), 90_000);
  settlePorts(state);
  writeState(state);
  return { state, envText: writeEnv(state, tools) };
}

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * A server running holds its ports: they are fixed from now on (a restart comes back on them), drawn or not. A
 * start clears its record's portsDrawn once it binds them; this clears it on a server found already running too
 * (one started by an interrupted `up` whose state was saved before the flag was cleared).
 */
function settlePorts(state: PlaneState): void {
  const records: Array<ProcessRecord | undefined> = [
    state.etcd,
    state.temporal,
    state.temporalServer?.postgres,
    state.temporalServer?.ui,
    state.loadBalancer,
    state.controllerManager,
    ...state.apiservers,
  ];
  for (const rec of records) if (rec && isRunning(rec)) delete rec.portsDrawn;
}

/** The shape of a running plane stays (a loopback one cannot be asked of a running cluster); a stopped one is decided anew. */
function choosePlaneShape(
  dir: string,
  prev: PlaneState | undefined,
  running: boolean,
  opts: UpOptions,
  log: (l: string) => void,
): { shape: PlaneShape; shapeReason: string } {
  if (!running || !prev) {
    const { shape, reason } = decideShape(opts, log);
    return { shape, shapeReason: reason };
  }
  if (opts.loopback && prev.shape === 'cluster')
    throw new Error(`the plane in ${dir} is up in the cluster shape; 'svm dev down --dir ${dir}' first to bring it up as loopback`);
  return { shape: prev.shape, shapeReason: prev.shapeReason };
}

/** A plane's first state: nothing started, etcd's and the Temporal dev server's ports chosen. */
async function newPlaneState(
  given: Pick<PlaneState, 'dir' | 'adminToken' | 'shape' | 'shapeReason' | 'caFile'>,
  tools: ToolPaths,
): Promise<PlaneState> {
  const { dir } = given;
  return {
    dir,
    adminToken: given.adminToken,
    shape: given.shape,
    shapeReason: given.shapeReason,
    storageVersionApi: false,
    caFile: given.caFile,
    apiUrl: '',
    // Ports drawn: candidates, bound (or drawn again when taken) as each server starts.
    etcd: {
      pid: 0,
      binary: tools.etcd,
      log: path.join(dir, 'etcd.log'),
      clientPort: await freePort(),
      peerPort: await freePort(),
      portsDrawn: true,
    },
    apiservers: [],
    temporal: {
      pid: 0,
      binary: tools.temporal,
      log: path.join(dir, 'temporal.log'),
      port: await freePort(),
      uiPort: await freePort(),
      extraArgs: [],
      portsDrawn: true,
    },
  };
}

/** The Temporal options of this `up` (its server, its flags, mTLS); a change of server or of mTLS is refused while it runs. */
async function applyTemporalOptions(state: PlaneState, opts: UpOptions, running: boolean): Promise<void> {
  const { dir } = state;
  if (opts.temporalArgs) state.temporal.extraArgs = opts.temporalArgs;
  if (opts.temporal && opts.temporal !== (state.temporalMode ?? 'dev')) {
    if (running)
      throw new Error(
        `the plane in ${dir} runs the Temporal ${state.temporalMode === 'server' ? 'server on PostgreSQL' : 'dev server'}; 'svm dev down --dir ${dir}' first`,
      );
    state.temporalMode = opts.temporal;
    state.temporal.pid = 0;
    state.temporal.log = path.join(dir, 'temporal.log'); // the server's is DIR/temporal-server/temporal-server.log
  }
  state.temporalMode ??= 'dev';
  if (state.temporalMode === 'server' && !state.temporalServer) {
    const { frontendPort, ...rec } = await newTemporalServerRecord(dir);
    state.temporalServer = rec;
    state.temporal.port = frontendPort; // below 32768, as its other ports (see smallintPort)
    state.temporal.portsDrawn = true;
  }
  if (opts.temporalTls !== undefined) {
    if (opts.temporalTls && state.temporalMode !== 'server')
      throw new Error('--temporal-tls needs --temporal server: the plane runs the dev server without TLS');
    if (Boolean(state.temporalServer?.tls) !== opts.temporalTls && isRunning(state.temporal))
      throw new Error(
        `the plane in ${dir} runs temporal-server ${state.temporalServer?.tls ? 'with' : 'without'} mTLS; 'svm dev down --dir ${dir}' first`,
      );
    if (state.temporalServer && !opts.temporalTls) delete state.temporalServer.tls;
  }
  if (state.temporalServer && (opts.temporalTls || state.temporalServer.tls)) state.temporalServer.tls = ensureTemporalTls(dir);
  await chooseTemporalAuth(dir, state, opts.temporalAuth);
}

/** `--temporal-auth`: JWT authorization on temporal-server (its signing key made once), or none. */
async function chooseTemporalAuth(dir: string, state: PlaneState, wanted: boolean | undefined): Promise<void> {
  const rec = state.temporalServer;
  if (wanted !== undefined) {
    if (wanted && state.temporalMode !== 'server')
      throw new Error('--temporal-auth needs --temporal server: the dev server has no authorizer');
    if (Boolean(rec?.auth) !== wanted && isRunning(state.temporal))
      throw new Error(
        `the plane in ${dir} runs temporal-server ${rec?.auth ? 'with' : 'without'} authorization; 'svm dev down --dir ${dir}' first`,
      );
    if (rec && !wanted) {
      delete rec.auth;
      delete rec.ports.internalFrontend;
      delete rec.ports.internalFrontendMembership;
    }
  }
  if (rec && (wanted || rec.auth)) {
    rec.auth = ensureTemporalAuth(dir);
    const taken = new Set(Object.values(rec.ports).filter((p): p is number => p !== undefined));
    rec.ports.internalFrontend ??= await smallintPort(taken);
    taken.add(rec.ports.internalFrontend);
    rec.ports.internalFrontendMembership ??= await smallintPort(taken);
  }
}

/**
 * The Kubernetes options of this `up` (the release, the StorageVersion API, fewer servers); another release or
 * fewer servers are refused while the plane runs. Returns whether the StorageVersion API changes (its servers restart).
 */
function applyKubeOptions(state: PlaneState, opts: UpOptions, running: boolean, count: number): boolean {
  const { dir } = state;
  if (opts.kubeVersion) {
    kubeBinaries(opts.kubeVersion); // refuses a release that is not built here
    if (running && (state.kubeVersion ?? kubeVersions().current) !== opts.kubeVersion)
      throw new Error(
        `the plane in ${dir} runs Kubernetes ${state.kubeVersion ?? kubeVersions().current}; 'svm dev down --dir ${dir}' first`,
      );
    state.kubeVersion = opts.kubeVersion;
  }
  const svChanged = opts.storageVersionApi !== undefined && opts.storageVersionApi !== state.storageVersionApi;
  if (opts.storageVersionApi !== undefined) state.storageVersionApi = opts.storageVersionApi;
  if (count < state.apiservers.length) {
    // Fewer servers than the plane has: refused while it runs (as another release is), honoured on a stopped one.
    if (running)
      throw new Error(
        `the plane in ${dir} runs ${state.apiservers.length} kube-apiservers, not ${count}; 'svm dev down --dir ${dir}' first`,
      );
    state.apiservers = state.apiservers.slice(0, count);
  }
  return svChanged;
}

/**
 * What this `up` starts, to be built first (once, all in one go, before anything starts): etcd, the Temporal CLI
 * for the dev server (temporal-server builds its own), the kube-apiserver of each release it starts.
 */
function toolsToStart(state: PlaneState, opts: UpOptions, count: number, svChanged: boolean): ToolName[] {
  const needed: ToolName[] = [...(opts.tools ?? [])];
  if (!isRunning(state.etcd)) needed.push('etcd');
  if (state.temporalMode === 'dev' && !isRunning(state.temporal)) needed.push('temporal-cli');
  for (const a of state.apiservers)
    if (svChanged || !isRunning(a)) needed.push(kubeToolName('kube-apiserver', a.version ?? state.kubeVersion ?? kubeVersions().current));
  if (count > state.apiservers.length) needed.push(kubeToolName('kube-apiserver', state.kubeVersion ?? kubeVersions().current));
  return needed;
}

/** The records of the servers this `up` adds, up to count (placed by placeApiservers). */
function addApiservers(state: PlaneState, count: number, tools: ToolPaths): void {
  for (let i = state.apiservers.length; i < count; i++) {
    const base = path.join(state.dir, `apiserver-${i}`);
    fs.mkdirSync(base, { recursive: true });
    state.apiservers.push({
      index: i,
      pid: 0,
      binary: tools.kubeApiserver,
      address: '',
      port: 0,
      url: '',
      hostname: `svm-apiserver-${i}`,
      log: path.join(base, 'kube-apiserver.log'),
      kubeconfig: path.join(base, 'kubeconfig'),
      extraArgs: [],
    });
  }
}

/** The cluster shape's bridge, claimed and recorded; in the loopback shape, what a cluster-shaped run left removed. */
function placeNetwork(state: PlaneState, log: (l: string) => void): void {
  if (state.shape === 'cluster') {
    if (state.network) ensureBridge(state.network);
    else state.network = allocateNetwork();
    writeState(state); // the bridge is claimed: `down` must find it even if `up` fails from here
    return;
  }
  if (state.network && process.getuid?.() === 0 && commandPath('ip')) {
    const removed = removeNetwork(state.network); // left by a cluster-shaped run of this plane
    if (removed.length > 0) log(`removed ${removed.join(', ')}`);
  }
  delete state.network;
  delete state.loadBalancer;
}

/** What `up` says of the plane's shape: the loopback shape says how it is not like a cluster. */
function shapeLine(state: PlaneState): string {
  const sv = `StorageVersion API ${state.storageVersionApi ? 'on' : 'off'}`;
  return state.shape === 'cluster'
    ? `plane shape: cluster (${state.shapeReason}); bridge ${state.network!.bridge} ${state.network!.gateway}/24, ${sv}`
    : `plane shape: loopback, NOT like a cluster (${state.shapeReason}): servers on 127.0.0.1 with their own ports, no 'kubernetes' endpoints, no load balancer; ${sv}`;
}

/** etcd on 127.0.0.1 (and, in the cluster shape, the bridge's address the servers reach it at), until healthy. */
async function startEtcd(state: PlaneState, tools: ToolPaths, log: (l: string) => void): Promise<void> {
  const e = state.etcd;
  const hosts = state.shape === 'cluster' ? ['127.0.0.1', state.network!.gateway] : ['127.0.0.1'];
  const dataDir = path.join(state.dir, 'etcd-data');
  const fresh = !fs.existsSync(dataDir);
  const start = async ([clientPort, peerPort]: number[]) => {
    e.clientPort = clientPort!;
    e.peerPort = peerPort!;
    // A member a failed start made on other ports is not the one to keep: a new plane's etcd starts afresh.
    if (fresh) fs.rmSync(dataDir, { recursive: true, force: true });
    log(`starting etcd on ${hosts.map((h) => `${h}:${e.clientPort}`).join(' and ')}`);
    const peer = `http://127.0.0.1:${e.peerPort}`;
    const client = `http://127.0.0.1:${e.clientPort}`;
    e.binary = tools.etcd;
    e.pid = await startProcess(tools.etcd, etcdArgs(dataDir, hosts, e.clientPort, client, peer), e.log);
    writeState(state);
    await waitServing(
      'etcd',
      e,
      [e.clientPort, e.peerPort],
      async () => (JSON.parse((await request(`${client}/health`)).body) as { health?: string }).health === 'true',
      30_000,
    );
  };
  await startServerOnPorts('etcd', e, [e.clientPort, e.peerPort], start, { names: ['client', 'peer'], log });
  writeState(state);
}

function etcdArgs(dataDir: string, hosts: string[], clientPort: number, client: string, peer: string): string[] {
  return [
    '--name=svm',
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${hosts.map((h) => `http://${h}:${clientPort}`).join(',')}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=svm=${peer}`,
    '--unsafe-no-fsync',
    // 8 GiB (etcd's suggested maximum) instead of the 2 GiB default: a 10^6-object bench writes
    // every object three times between the API servers' 5-minute compactions.
    '--quota-backend-bytes=8589934592',
    '--log-level=warn',
  ];
}

/** The Temporal dev server on SQLite with svm's search attributes; `up` waits for it last. */
async function startTemporalDevServer(state: PlaneState, tools: ToolPaths, log: (l: string) => void): Promise<void> {
  const t = state.temporal;
  const start = async ([port, uiPort]: number[]) => {
    t.port = port!;
    t.uiPort = uiPort!;
    log(`starting the Temporal dev server on 127.0.0.1:${t.port} (UI http://127.0.0.1:${t.uiPort})`);
    t.binary = tools.temporal;
    t.pid = await startProcess(tools.temporal, devServerArgs(state), t.log);
    writeState(state);
    // Until it holds both ports (`up` waits for it to answer, last).
    await waitServing('the Temporal dev server', t, [t.port, t.uiPort], undefined, 90_000);
  };
  await startServerOnPorts('the Temporal dev server', t, [t.port, t.uiPort], start, {
    names: ['gRPC', 'UI'],
    log,
  });
  writeState(state);
}

function devServerArgs(state: PlaneState): string[] {
  const t = state.temporal;
  return [
    'server',
    'start-dev',
    '--ip=127.0.0.1',
    `--port=${t.port}`,
    `--ui-port=${t.uiPort}`,
    `--db-filename=${path.join(state.dir, 'temporal.sqlite')}`,
    '--namespace=default',
    '--log-level=warn',
    ...searchAttributeDefinitions.flatMap((sa) => ['--search-attribute', `${sa.name}=${sa.type}`]),
    ...devServerDynamicConfigArgs(),
    ...t.extraArgs,
  ];
}

/** Each server's kubeconfig written, and the servers not running started (all restarted when the StorageVersion API changes). */
async function startApiservers(state: PlaneState, svChanged: boolean, caPem: Buffer, log: (l: string) => void): Promise<void> {
  for (const a of state.apiservers) {
    // (rewritten by the start, with the port it binds)
    fs.writeFileSync(a.kubeconfig, kubeconfigYaml(a.url, state.adminToken, `svm-apiserver-${a.index}`, caPem), { mode: 0o600 });
    if (isRunning(a) && svChanged) {
      log(`restarting kube-apiserver ${a.index} with the StorageVersion API ${state.storageVersionApi ? 'on' : 'off'}`);
      await stopProcess(a);
    }
    if (!isRunning(a)) {
      log(`starting kube-apiserver ${a.index} on ${a.address}:${a.port}${a.netns ? ` in netns ${a.netns}` : ''} as ${a.hostname}`);
      await startApiserverProcess(state, a, log);
    }
  }
}

/** The plane's one API address (haproxy in the cluster shape, server 0 in the loopback one) and DIR/kubeconfig for it. */
async function serveApi(state: PlaneState, caPem: Buffer, log: (l: string) => void): Promise<void> {
  if (state.shape === 'cluster') {
    await ensureLoadBalancer(state, log);
    state.apiUrl = `https://127.0.0.1:${state.loadBalancer!.port}`;
  } else {
    state.apiUrl = state.apiservers[0]!.url;
  }
  fs.writeFileSync(
    path.join(state.dir, 'kubeconfig'),
    kubeconfigYaml(state.apiUrl, state.adminToken, state.shape === 'cluster' ? 'svm-dev' : 'svm-apiserver-0', caPem),
    { mode: 0o600 },
  );
}

/** Stops exactly what `up` started, by recorded pid, and removes the plane's namespaces, veths and bridge. */
export async function down(dirArg: string, log: (l: string) => void = (l) => process.stderr.write(l + '\n')): Promise<void> {
  const state = readState(path.resolve(dirArg));
  if (!state) {
    log(`nothing to stop: no ${stateFile(path.resolve(dirArg))}`);
    return;
  }
  if (isRunning(state.controllerManager)) log(`stopping kube-controller-manager (pid ${state.controllerManager!.pid})`);
  if (state.controllerManager) await stopProcess(state.controllerManager);
  if (isRunning(state.loadBalancer)) log(`stopping haproxy (pid ${state.loadBalancer!.pid})`);
  if (state.loadBalancer) await stopProcess(state.loadBalancer);
  for (const a of state.apiservers) {
    if (isRunning(a)) log(`stopping kube-apiserver ${a.index} (pid ${a.pid})`);
    await stopProcess(a);
  }
  if (isRunning(state.temporal))
    log(`stopping ${state.temporalMode === 'server' ? 'temporal-server' : 'the Temporal dev server'} (pid ${state.temporal.pid})`);
  // With a Temporal server on PostgreSQL: its UI, the server, then PostgreSQL (pg_ctl stop -m fast).
  if (state.temporalServer) await stopTemporalServer(state.temporal, state.temporalServer, log);
  else await stopProcess(state.temporal);
  if (isRunning(state.etcd)) log(`stopping etcd (pid ${state.etcd.pid})`);
  await stopProcess(state.etcd);
  if (state.network) {
    const removed = removeNetwork(state.network);
    if (removed.length > 0) log(`removed ${removed.join(', ')}`);
    // The next `up` claims a K afresh: another plane may have taken this one meanwhile.
    delete state.network;
    writeState(state);
  }
}

function mustState(dir: string): PlaneState {
  const state = readState(path.resolve(dir));
  if (!state) throw new Error(`no local control plane in ${path.resolve(dir)}: run 'svm dev up --dir ${dir}' first`);
  return state;
}

function apiserverRecord(state: PlaneState, index: number): ApiserverRecord {
  const a = state.apiservers[index];
  if (!a)
    throw new Error(`there is no kube-apiserver ${index}: the plane has ${state.apiservers.length} (0..${state.apiservers.length - 1})`);
  return a;
}

/** Stops one API server (gracefully, or with SIGKILL when `kill` is set). Its namespace stays. */
export async function stopApiserver(dir: string, index: number, opts: { kill?: boolean } = {}): Promise<void> {
  const state = mustState(dir);
  await stopProcess(apiserverRecord(state, index), opts.kill ? 0 : 10_000);
}

/**
 * Restarts one API server, optionally with different extra flags (a rolling
 * upgrade step: e.g. ['--min-compatibility-version=1.33']). Pass undefined to
 * keep its current flags. It comes back in the same namespace, on the same
 * address; haproxy routes to it again once its /readyz answers.
 */
export async function restartApiserver(
  dir: string,
  index: number,
  extraArgs?: string[],
  log: (l: string) => void = (l) => process.stderr.write(l + '\n'),
  opts: { version?: string } = {},
): Promise<ApiserverRecord> {
  const state = mustState(dir);
  const a = apiserverRecord(state, index);
  // Refuses a release the plane cannot run, and builds its kube-apiserver if missing, before stopping anything.
  ensureTools([kubeToolName('kube-apiserver', opts.version ?? a.version ?? state.kubeVersion ?? kubeVersions().current)], log);
  await stopProcess(a);
  if (extraArgs) a.extraArgs = extraArgs;
  if (opts.version) a.version = opts.version;
  log(
    `restarting kube-apiserver ${index} (${a.version ?? state.kubeVersion ?? kubeVersions().current}) with extra flags [${a.extraArgs.join(' ')}]`,
  );
  await startApiserverProcess(state, a, log);
  return a;
}

/**
 * Turns the alpha StorageVersion API on or off on a running plane: records the
 * mode and restarts every API server with or without it, one after the other
 * (each keeps its extra flags). Instant when the plane is already in that mode.
 */
export async function setStorageVersionApi(
  dir: string,
  on: boolean,
  log: (l: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<PlaneState> {
  const state = mustState(dir);
  if (state.storageVersionApi === on && state.apiservers.every((a) => isRunning(a))) return state;
  state.storageVersionApi = on;
  writeState(state);
  for (const a of state.apiservers) {
    log(`restarting kube-apiserver ${a.index} with the StorageVersion API ${on ? 'on' : 'off'}`);
    await stopProcess(a);
    await startApiserverProcess(state, a, log);
  }
  return state;
}

/**
 * Stops and starts the Temporal dev server (keeping its SQLite file), or temporal-server (PostgreSQL keeps running);
 * `whileDown` runs between the two (a test changing what the server stored).
 */
export async function restartTemporal(
  dir: string,
  log: (l: string) => void = (l) => process.stderr.write(l + '\n'),
  whileDown?: () => void | Promise<void>,
): Promise<void> {
  const state = mustState(dir);
  await stopProcess(state.temporal);
  await whileDown?.();
  await up({ dir, log });
}

/**
 * Stops the plane's PostgreSQL (`pg_ctl stop -m fast` or `-m immediate`, the latter as a crash: no checkpoint,
 * recovery from the WAL at the next start), keeps it down for `downMs`, and starts it again on the same port and
 * data. temporal-server keeps running throughout and reconnects by itself. Only with `--temporal server`.
 */
export async function restartPostgres(
  dir: string,
  mode: 'fast' | 'immediate',
  opts: { downMs?: number; log?: (l: string) => void } = {},
): Promise<{ stoppedPid: number; pid: number }> {
  const log = opts.log ?? ((l: string) => process.stderr.write(l + '\n'));
  const state = mustState(dir);
  const pg = state.temporalServer?.postgres;
  if (state.temporalMode !== 'server' || !pg) throw new Error(`the plane in ${dir} runs no PostgreSQL (svm dev up --temporal server)`);
  const stoppedPid = pg.pid;
  log(`stopping PostgreSQL (pid ${pg.pid}, pg_ctl stop -m ${mode})`);
  await stopPostgres(pg, mode);
  if (isRunning(pg)) throw new Error(`PostgreSQL (pid ${pg.pid}) is still running after pg_ctl stop -m ${mode}`);
  await new Promise((r) => setTimeout(r, opts.downMs ?? 0));
  await startPostgres(pg, log);
  writeState(state);
  return { stoppedPid, pid: pg.pid };
}

// ------------------------------------------------------------ kube-controller-manager

/** The controllers the plane's kube-controller-manager runs: what the built-in migrator needs, and no more. */
export function controllerManagerControllers(builtInMigrator: boolean): string[] {
  return ['garbage-collector-controller', ...(builtInMigrator ? ['storage-version-migrator-controller'] : [])];
}

/**
 * Starts (or restarts, at another release or with the built-in migrator on or
 * off) the plane's kube-controller-manager: through the load balancer, with
 * leader election, running the garbage collector and, when builtInMigrator,
 * the built-in storage version migrator (GA and on by default in 1.37; behind
 * StorageVersionMigrator=true in 1.36). Stopped by `down`.
 */
export async function startControllerManager(
  dir: string,
  opts: { builtInMigrator: boolean; version?: string },
  log: (l: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<ControllerManagerRecord> {
  const state = mustState(dir);
  const version = opts.version ?? state.controllerManager?.version ?? state.kubeVersion ?? kubeVersions().current;
  ensureTools([kubeToolName('kube-controller-manager', version)], log); // built on first use
  const binary = kubeBinaries(version).kubeControllerManager;
  if (state.controllerManager) await stopProcess(state.controllerManager);
  const base = path.join(dir, 'controller-manager');
  fs.mkdirSync(base, { recursive: true });
  const kubeconfig = path.join(dir, 'kubeconfig');
  const major = Number(/^v1\.(\d+)/.exec(version)?.[1] ?? '0');
  const args = (port: number) => [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--leader-elect=true',
    `--controllers=${controllerManagerControllers(opts.builtInMigrator).join(',')}`,
    '--use-service-account-credentials=false',
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${path.join(base, 'tls')}`,
    `--root-ca-file=${state.caFile}`,
    `--service-account-private-key-file=${ensurePki(dir).saKey}`,
    '--authorization-always-allow-paths=/healthz,/readyz,/livez',
    // The plane has no front proxy: nothing to look up in kube-system/extension-apiserver-authentication.
    '--authentication-skip-lookup=true',
    ...(opts.builtInMigrator && major < 37 ? ['--feature-gates=StorageVersionMigrator=true'] : []),
  ];
  const rec: ControllerManagerRecord = {
    pid: 0,
    binary,
    log: path.join(base, 'kube-controller-manager.log'),
    version,
    builtInMigrator: opts.builtInMigrator,
    port: 0,
    portsDrawn: true, // drawn below
  };
  state.controllerManager = rec;
  // Its --secure-port=0 would turn its healthz off: a drawn port, drawn again when taken (every start draws anew).
  await startServerOnPorts(
    'kube-controller-manager',
    rec,
    [await freePort()],
    async ([port]) => {
      rec.port = port!;
      log(
        `starting kube-controller-manager ${version} (${rec.builtInMigrator ? 'with' : 'without'} its built-in storage version migrator)`,
      );
      rec.pid = await startProcess(binary, args(rec.port), rec.log);
      writeState(state);
      await waitServing(`kube-controller-manager ${version}`, rec, [rec.port], () => healthy(rec.port), 60_000);
    },
    { log },
  );
  writeState(state); // its ports bound: fixed
  return rec;
}

/** Whether https://127.0.0.1:PORT/healthz answers 200 (kube-controller-manager's, whose certificate is self-signed). */
function healthy(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const req = https.get(`https://127.0.0.1:${port}/healthz`, { rejectUnauthorized: false, timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

/** Stops the plane's kube-controller-manager (no-op when none runs). */
export async function stopControllerManager(dir: string): Promise<void> {
  const state = mustState(dir);
  if (!state.controllerManager) return;
  await stopProcess(state.controllerManager);
  delete state.controllerManager;
  writeState(state);
}
