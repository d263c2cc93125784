/**
 * The one shared environment of the tests against real servers. scripts/test.sh
 * brings the local control plane up once per run and exports SVM_DEV_DIR; a
 * test file run on its own brings one up in .svm-dev (and leaves it running
 * for the next run, like `svm dev up`).
 *
 * The worker sees the plane as a Pod sees a cluster: one API address (the
 * load balancer) and nothing else; it finds each server itself. Tests that
 * must reach one particular server use kubeOf(i).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import {
  down,
  isRunning,
  readEnv,
  readState,
  restartApiserver,
  setStorageVersionApi,
  up as planeUp,
  type PlaneShape,
  type PlaneState,
  type UpOptions,
} from '../../src/dev/plane';
import { kubeVersions } from '../../src/dev/tools';
import { KubeClient, type RetryPolicy } from '../../src/kube/client';
import { loadTemporalSettings, temporalConnectionOptions, type TemporalSettings } from '../../src/config/temporal';
import { loadWorkerSettings, type WorkerSettings } from '../../src/worker/config';
import { ANSWER_WITHIN_MS, askState, bounded, reportWhenEnded, workflowState } from './waits';
import { leavePlaneAsFound, markPlane, type PlaneMark } from './plane-ledger';

export interface TestPlane {
  dir: string;
  env: Record<string, string>;
  /** The plane's state.json, read afresh on every access (a mode switch or restart changes it). */
  readonly state: PlaneState;
  /** 'cluster' (namespaces, EndpointSlice, load balancer) or 'loopback' (the fallback). */
  readonly shape: PlaneShape;
  /** The API servers' own addresses (198.18.K.x in the cluster shape, 127.0.0.1 in the loopback one), by index. */
  readonly apiserverAddresses: string[];
  /** Their URLs (https://address:port), by index. */
  readonly apiserverUrls: string[];
  /** Whether the alpha StorageVersion API is served right now. */
  readonly storageVersionApi: boolean;
  /** Turns the StorageVersion API on or off (restarts every API server; instant when already so). */
  setStorageVersionApi(on: boolean): Promise<void>;
  /** The client of the worker's view: the one load-balanced address (DIR/kubeconfig). */
  kube: KubeClient;
  /** A kube client for one particular API server. */
  kubeOf(index: number): KubeClient;
  etcd: string;
  /** settings: the connection as svm reads it from the env file (address, namespace, TLS files). */
  temporal: { client: Client; connection: Connection; address: string; settings: TemporalSettings & { address: string } };
  /** Worker settings for this plane on a fresh task queue, configured as deploy/deployment.yaml does. */
  workerSettings(taskQueue: string, overrides?: Partial<WorkerSettings>): WorkerSettings;
  close(): Promise<void>;
}

/**
 * How the tests' own clients (plane.kube, kubeOf) retry: svm's policy (src/kube/client.ts retryDelayMs), with
 * more room, because no activity retries behind a test. A request that never reached an API server (refused, or
 * reset before TLS: haproxy still routing to a server just stopped, until its check, every 1 s, fails twice; or with
 * no server it deems ready, the only one busy) is sent again for up to ~30 s, whatever its verb; a read that failed after it was sent (reset, hang-up, timeout, 5xx) up
 * to 6 times; raw() retries transport errors too. Writes that may have reached a server are never sent again.
 */
export const TEST_RETRY: Readonly<RetryPolicy> = {
  unsentAttempts: 16,
  throttledReadAttempts: 10,
  transientReadAttempts: 6,
  retryRaw: true,
};

/**
 * Records a plane this file starts in `dir` for scripts/test.sh, before anything of it runs: the plane's servers run
 * detached, so a file ended at its bound (or a run interrupted) would leave them running. scripts/test.sh gives each
 * file a ledger of its own (SVM_TEST_PLANE_LEDGER, a directory under the run's temporary one) and takes down every
 * plane named there that still runs when the file ends, however it ends, and again when the run ends. The shared
 * planes (SVM_DEV_DIR, SVM_SERVER_DEV_DIR, SVM_SECURED_DEV_DIR, SVM_PREVIOUS_DEV_DIR) are the run's, taken down at its end, and never recorded here. Outside
 * scripts/test.sh (no ledger) nothing is recorded.
 */
export function recordPlane(dir: string): void {
  const ledger = process.env.SVM_TEST_PLANE_LEDGER;
  if (!ledger) return;
  const own = path.resolve(dir);
  const shared = [
    process.env.SVM_DEV_DIR,
    process.env.SVM_SERVER_DEV_DIR,
    process.env.SVM_SECURED_DEV_DIR,
    process.env.SVM_PREVIOUS_DEV_DIR,
  ]
    .filter((d): d is string => !!d)
    .map((d) => path.resolve(d));
  if (shared.includes(own)) return;
  mkdirSync(ledger, { recursive: true });
  // One entry a plane (named by its directory's hash: a file may start the same plane twice), its directory the content.
  writeFileSync(path.join(ledger, createHash('sha256').update(own).digest('hex').slice(0, 16)), `${own}\n`);
}

/**
 * `svm dev up` (src/dev/plane.ts up) for a test: the plane recorded first (recordPlane), so that scripts/test.sh takes
 * it down if the file cannot. Test files start planes through this or testPlane(), never through src/dev/plane's
 * own up (test/unit-suite-bounds.test.ts).
 */
export async function up(opts: UpOptions): ReturnType<typeof planeUp> {
  recordPlane(opts.dir);
  return planeUp(opts);
}

/**
 * A plane the run starts once for several files, in the directory scripts/test.sh names in `envVar` (it takes the
 * plane down when the run ends, and runs the files that use it one after another, as one item of its queue: each
 * leaves the plane as it found it, test/helpers/plane-ledger.ts, which would remove another file's objects midway);
 * the first file that needs it brings it up, the others find it running. A file run without that variable (alone,
 * outside scripts/test.sh) brings up one of its own in a fresh directory, named by `own`, and takes it down with
 * removePlanes(own) when it ends.
 */
export interface RunPlane {
  plane: TestPlane;
  /** The directory of the plane this file brought up for itself (no run's plane to share), else undefined. */
  own?: string;
}

async function runPlane(
  what: string,
  envVar: string,
  prefix: string,
  opts: Omit<UpOptions, 'dir'>,
  prepare: (dir: string) => Promise<void> = async () => undefined,
): Promise<RunPlane> {
  const shared = process.env[envVar];
  const dir = path.resolve(shared || mkdtempSync(path.join(tmpdir(), prefix)));
  const started = Date.now();
  const fresh = !isRunning(readState(dir)?.etcd);
  await up({ ...opts, dir, log: (l) => process.stderr.write(`  [plane] ${l}\n`) }); // instant when it is running
  if (fresh) process.stderr.write(`  ${what} up in ${((Date.now() - started) / 1000).toFixed(1)}s (${dir})\n`);
  else process.stderr.write(`  ${what}: the run's, already up (${dir})\n`);
  await prepare(dir);
  const plane = await testPlane({ dir, shared: !!shared });
  return { plane, own: shared ? undefined : dir };
}

/**
 * The secured server plane (one API server; temporal-server on PostgreSQL with mTLS and its JWT authorizer): the
 * one plane of the suite where Temporal requires a client certificate and a token, shared by the files that try
 * them (test-temporal-tls, test-fleet-domains) through SVM_SECURED_DEV_DIR (runPlane). Each file works in Temporal
 * namespaces and CRDs of its own (uniq names), so neither reads what the other made.
 */
export async function securedServerPlane(): Promise<RunPlane> {
  return runPlane(
    'secured server plane (temporal-server with mTLS and JWT authorization, PostgreSQL)',
    'SVM_SECURED_DEV_DIR',
    'svm-secured-',
    { apiservers: 1, temporal: 'server', temporalTls: true, temporalAuth: true },
  );
}

/** The flags that serve the standard API as a previous-release cluster does once its built-in migrator is on. */
export const V1BETA1_FLAGS = ['--feature-gates=StorageVersionMigrator=true', '--runtime-config=storagemigration.k8s.io/v1beta1=true'];

/**
 * The previous release's plane (tools/versions.json kubernetesPrevious: two API servers behind the load balancer,
 * no StorageVersion API, the dev server, no kube-controller-manager), its API servers serving
 * storagemigration.k8s.io/v1beta1 as a cluster of that release does once its built-in migrator is on: one plane
 * the run starts for the files that need that release (test-standard-v1beta1, test-worker-rights), through
 * SVM_PREVIOUS_DEV_DIR (runPlane). test-upgrade keeps planes of its own: it upgrades them.
 */
export async function previousPlane(): Promise<RunPlane> {
  return runPlane(
    'previous-release plane',
    'SVM_PREVIOUS_DEV_DIR',
    'svm-previous-',
    { apiservers: 2, kubeVersion: kubeVersions().previous, storageVersionApi: false },
    // The flags once, by the file that brings the plane up (a restart each), before the plane's mark (testPlane) is
    // read: they are part of the plane as every file finds it, and stay when a file leaves it.
    async (dir) => {
      for (const [i, a] of readState(dir)!.apiservers.entries())
        if (V1BETA1_FLAGS.some((f) => !a.extraArgs.includes(f))) await restartApiserver(dir, i, V1BETA1_FLAGS, () => undefined);
    },
  );
}

/**
 * The suite's shared plane; or, with `dir`, a plane of the test's own (e.g. another Kubernetes release), brought up by
 * the test. A shared plane (and, with `shared`, another plane files share) is left as the file found it when the file
 * closes it (test/helpers/plane-ledger.ts): what it made goes, its servers get their flags back.
 */
export async function testPlane(opts: { dir?: string; up?: Omit<UpOptions, 'dir'>; shared?: boolean } = {}): Promise<TestPlane> {
  const dir = path.resolve(opts.dir ?? (process.env.SVM_DEV_DIR || '.svm-dev'));
  await up({ log: () => undefined, ...opts.up, dir }); // idempotent: instant when it is running
  const env = readEnv(dir);
  const state = (): PlaneState => readState(dir)!;
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG, { retry: TEST_RETRY });
  const clients: KubeClient[] = [];
  // As svm reads it (src/config/temporal.ts): with `--temporal-tls`, the env file's TEMPORAL_TLS_* variables.
  const settings = { ...loadTemporalSettings(env), address: env.TEMPORAL_ADDRESS! };
  const connection = await Connection.connect(temporalConnectionOptions(settings));
  const client = new Client({ connection, namespace: env.TEMPORAL_NAMESPACE });
  const mark: PlaneMark | undefined = opts.dir === undefined || opts.shared ? await markPlane(dir, kube, client) : undefined;
  const plane: TestPlane = {
    dir,
    env,
    get state() {
      return state();
    },
    get shape() {
      return state().shape;
    },
    get apiserverAddresses() {
      return state().apiservers.map((a) => a.address);
    },
    get apiserverUrls() {
      return state().apiservers.map((a) => a.url);
    },
    get storageVersionApi() {
      return state().storageVersionApi;
    },
    async setStorageVersionApi(on: boolean) {
      await setStorageVersionApi(dir, on, () => undefined);
    },
    kube,
    kubeOf(index: number) {
      const k = KubeClient.fromKubeconfig(env[`KUBECONFIG_APISERVER_${index}`], { retry: TEST_RETRY });
      clients.push(k);
      return k;
    },
    etcd: env.ETCD_ENDPOINTS!,
    temporal: { client, connection, address: env.TEMPORAL_ADDRESS!, settings },
    workerSettings(taskQueue, overrides = {}) {
      // As deploy/deployment.yaml: the API through one address, nothing per server. One difference: deploy/ sets
      // SVM_REQUIRE_FENCE=true and SVM_REQUIRE_STATIC_FENCE=true, left at their default (off) here, because these
      // workers mostly run with the plane's administrator kubeconfig, which no fence matches; the workers run as the
      // ServiceAccount (test-worker-rights, test-conformance, test-upgrade, test-memory-budget) turn them on.
      const base = loadWorkerSettings({
        ...Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith('TEMPORAL_TLS') || k === 'TEMPORAL_API_KEY')),
        TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
        KUBECONFIG: env.KUBECONFIG,
        TEMPORAL_TASK_QUEUE: taskQueue,
        SVM_BRIDGE: 'false',
        SVM_QPS: '0',
      });
      return { ...base, ...overrides, temporal: { ...base.temporal, ...overrides.temporal } };
    },
    close() {
      // Once: a file may close one plane under two names (test-fleet-planes: north is the server plane).
      closing ??= (async () => {
        if (mark) {
          const done = await bounded('the plane left as the file found it', leavePlaneAsFound(plane, mark), 600_000, () => dir);
          if (done.length > 0) process.stderr.write(`  plane ${dir} left as found: ${done.join(', ')}\n`);
        }
        unreport();
        kube.close();
        for (const k of clients) k.close();
        await connection.close();
      })();
      return closing;
    },
  };
  let closing: Promise<void> | undefined;
  const unreport = reportWhenEnded(() => planeReport(plane));
  return plane;
}

/**
 * What a file ended from outside says of a plane (test/helpers/waits.ts): how the API address, each API server and
 * etcd answer, and what each workflow still running shows of itself (at most 10).
 */
async function planeReport(p: TestPlane): Promise<string[]> {
  const readyz = async (k: KubeClient) => {
    const t = Date.now();
    return `HTTP ${(await k.raw('GET', '/readyz', { timeoutMs: ANSWER_WITHIN_MS })).status} in ${Date.now() - t} ms`;
  };
  const health = async () => {
    const res = await fetch(`${p.etcd.replace(/\/$/, '')}/health`, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
    return `HTTP ${res.status} ${(await res.text()).trim()}`;
  };
  const [workflows, ...servers] = await Promise.all([
    runningWorkflows(p),
    askState(`the API (${p.kube.server}) /readyz`, () => readyz(p.kube)),
    ...p.apiserverUrls.map((url, i) => askState(`API server ${i} (${url}) /readyz`, () => readyz(p.kubeOf(i)))),
    askState(`etcd (${p.etcd}) /health`, health),
  ]);
  return [`plane ${p.dir}:`, ...[...servers, ...workflows].map((l) => `  ${l}`)];
}

/** The plane's running workflows (at most 10), each with what it shows of itself. */
async function runningWorkflows(p: TestPlane): Promise<string[]> {
  const client = p.temporal.client;
  const ids: string[] = [];
  const listed = await askState(`Temporal (${p.temporal.address}) running workflows`, async () => {
    for await (const w of client.workflow.list({ query: `ExecutionStatus = 'Running'` })) {
      ids.push(w.workflowId);
      if (ids.length === 10) return '10 or more';
    }
    return String(ids.length);
  });
  const states = await Promise.all(ids.map(async (id) => `  ${id}: ${await workflowState(client.workflow.getHandle(id))}`));
  return [listed, ...states];
}

/**
 * Brings down the planes a file brought up in these directories, each after the one before, and removes each
 * directory. A plane that does not come down fails the file and keeps its directory, for its logs; the others still
 * come down. A directory with no plane in it is just removed.
 */
export async function removePlanes(...dirs: string[]): Promise<void> {
  const kept: string[] = [];
  for (const dir of dirs) {
    try {
      await down(dir, () => undefined);
      rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      kept.push(`${dir}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (kept.length > 0) throw new Error(`a plane did not come down (its directory is kept): ${kept.join('; ')}`);
}

/**
 * API servers `indices` back to their default flags, each restarted only when it runs with extra flags or is down (a
 * restart takes seconds, and most scenarios leave the servers as they found them).
 */
export async function defaultApiservers(plane: TestPlane, ...indices: number[]): Promise<void> {
  for (const i of indices) {
    const a = plane.state.apiservers[i];
    if (a && (a.extraArgs.length > 0 || !isRunning(a))) await restartApiserver(plane.dir, i, [], () => undefined);
  }
}

/** A unique suffix for names in one test. */
export const uniq = (prefix: string) => `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

/** What scripts/test.sh passes the shared plane's Temporal: a low continue-as-new suggestion, so that long lists exercise it. */
export const SUITE_TEMPORAL_ARGS = ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=300'];

/**
 * The suite's plane on temporal-server + PostgreSQL (`svm dev up --temporal server`), for what only that server
 * shows (test-temporal-server*.test.ts): ONE such plane per run, shared by those files, started by the first of
 * them that runs. Which one:
 *   - the shared plane itself when it already runs temporal-server (SVM_TEST_TEMPORAL=server npm test);
 *   - else the plane in SVM_SERVER_DEV_DIR (scripts/test.sh sets it to a temporary directory and takes the plane
 *     down at the end), or .svm-dev-server for a file run on its own (left running for the next run, like
 *     .svm-dev).
 * It runs one API server: its tests are about Temporal's durability and visibility; HA is the shared plane's.
 */
export async function serverPlane(): Promise<TestPlane> {
  const shared = path.resolve(process.env.SVM_DEV_DIR || '.svm-dev');
  if (readState(shared)?.temporalMode === 'server') return testPlane({ dir: shared, shared: true });
  const dir = path.resolve(process.env.SVM_SERVER_DEV_DIR || '.svm-dev-server');
  const started = Date.now();
  const fresh = readState(dir) === undefined;
  const plane = await testPlane({ dir, shared: true, up: { temporal: 'server', apiservers: 1, temporalArgs: SUITE_TEMPORAL_ARGS } });
  if (fresh)
    process.stderr.write(`  plane on temporal-server + PostgreSQL up in ${((Date.now() - started) / 1000).toFixed(1)}s (${dir})\n`);
  return plane;
}
