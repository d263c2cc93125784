/**
 * `npm run bench:builtin [-- --objects N --rounds N --first built-in|svm --dir DIR --note TEXT]`
 *
 * svm and the built-in migrator (kube-controller-manager's
 * storage-version-migrator-controller, GA in Kubernetes 1.37) side by side on
 * one plane, in --rounds (3) alternating pairs: built-in, svm, built-in, svm,
 * built-in, svm (--first svm: the other way round). Each run migrates a CRD of
 * its own, all of the same shape and each with the same --objects (2,000)
 * stored at v1, moved to v2, through one storagemigration.k8s.io/v1 object:
 * both sides are started the same way. Not part of `npm test`.
 *
 * What makes it fair:
 *   - Every CRD (the six measured and six tiny warm-up ones) is created and
 *     filled before any run, so when kube-controller-manager starts, its
 *     garbage collector's initial sync already covers each resource (the
 *     built-in migrator reads objects from the collector's monitors and waits
 *     for them; a CRD made after the start waits for the collector's 30 s
 *     discovery resync).
 *   - Before each run kube-controller-manager is (re)started, with its
 *     migrator for the built-in's runs and without it for svm's (never two
 *     controllers on one object), and is warm before the measured migration
 *     starts: /healthz answers, its log says "all resource monitors have
 *     synced", and a warm-up migration of a tiny CRD (5 objects) through a
 *     storagemigration.k8s.io/v1 object has Succeeded, by the migrator of
 *     that run (which also warms svm's worker: its workflow bundle loaded,
 *     its leader lease held, its bridge watching). Each step's time is printed.
 *   - svm's runs: each gets a NEW `svm worker` process, started after
 *     kube-controller-manager runs without the migrator, and stopped after
 *     the run. svm in own mode (SVM_STANDARD_MIGRATIONS=own, the one setting
 *     the bench gives it besides where the plane is) takes a new standard
 *     object only two minutes after its creation for 10 minutes once it has
 *     seen the built-in act (src/worker/bridge.ts, BUILT_IN_QUIET_MS); a worker that starts after
 *     the built-in's objects are finished never sees it act (a finished object
 *     it lists is not acting). That keeps both sides on the same API, rather
 *     than giving svm its own migration.k8s.io/v1alpha1 objects.
 *   - svm at its defaults, as the image runs it: compiled as the image runs
 *     it, with the Dockerfile's ENV, no SVM_* tuning (the caller's SVM_* and
 *     TEMPORAL_* variables are dropped), so its default budget (SVM_QPS=auto:
 *     following the API servers) is in force; the settings in force are printed.
 *     Worker Versioning and the metrics port that deploy/deployment.yaml sets
 *     are left off: neither changes how a migration runs.
 *   - CPU (utime + stime from /proc, over the measured migration, each
 *     process tree): on svm's side the worker AND the Temporal server (the
 *     dev server; or temporal-server AND PostgreSQL, exited backends
 *     included); on the built-in's side kube-controller-manager. The API
 *     servers' and etcd's for every run; kube-controller-manager's during
 *     svm's runs (its garbage collector watches the rewrites too) and
 *     Temporal's during the built-in's are printed, not counted to a side.
 *
 * Printed: each run (seconds from the object's creation to Succeeded, the
 * seconds until it reported Running, objects per second, CPU, what etcd held
 * after; and, from a watch on the resource opened before the object is
 * created, when the first and the last rewrite came: the waiting apart from
 * the rewriting), the median per side, and svm / built-in of the medians.
 * The built-in rewrites only once its garbage collector's cache of the
 * resource has reached the resourceVersion it took at the start (the
 * storageversionmigrator package in Kubernetes: "GC cache is not up to date,
 * requeuing"); on a resource nobody writes that can wait for the watch
 * cache's next bookmark, and its retries back off exponentially (the
 * workqueue's default, 5 ms doubling: retries at about 10, 20, 41, 82 s).
 * That wait is part of how it works, so it is counted, and told apart. Raw runs
 * (with what each migrator reported, sampled once a second) go to
 * bench/results/builtin-<time>.json (not in git); the summary to --out
 * (docs/bench)/builtin-<date>.json and .md, meant to be committed.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { defaultDevDir, readEnv, readState, startControllerManager, up, type PlaneState } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd, type TestCrd } from '../src/dev/test-crd';
import { KubeClient } from '../src/kube/client';
import { Watch } from '../src/kube/kubeconfig';
import { findStandardMigration, listStandardMigrations } from '../src/kube/standard-migrations';
import { loadWorkerSettings } from '../src/worker/config';
import { imageEnv } from './lib/image-env';
import { treeCpuSeconds } from './lib/proc';
import { compiledWorkerTree } from './lib/worker-tree';
import { median } from './lib/stats';

const root = path.join(__dirname, '..');
const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    first: { type: 'string', default: 'built-in' },
    dir: { type: 'string' },
    out: { type: 'string', default: path.join(root, 'docs', 'bench') },
    note: { type: 'string' },
  },
});
const N = Number(values.objects);
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(N) || N < 1) throw new Error('--objects must be a positive whole number');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive whole number');
if (values.first !== 'built-in' && values.first !== 'svm') throw new Error('--first must be built-in or svm');
const WARM_UP_OBJECTS = 5;

type Side = 'built-in' | 'svm';
const ORDER: Side[] = Array.from({ length: 2 * ROUNDS }, (_, i) => ((i % 2 === 0) === (values.first === 'built-in') ? 'built-in' : 'svm'));

const t00 = performance.now();
const log = (s: string) => process.stderr.write(`[bench:builtin ${((performance.now() - t00) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);
const round = (n: number, digits = 2) => Number(n.toFixed(digits));
const since = (t: number) => round((performance.now() - t) / 1000, 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------ CPU

/** The process trees measured, by name: each run takes all of them before and after. */
function cpuGroups(state: PlaneState, workerPid: number | undefined): Record<string, number | undefined> {
  const temporal: Record<string, number | undefined> =
    state.temporalMode === 'server'
      ? { 'temporal-server': state.temporal.pid, PostgreSQL: state.temporalServer?.postgres.pid }
      : { 'Temporal dev server': state.temporal.pid };
  return {
    'svm worker': workerPid,
    ...temporal,
    'kube-controller-manager': state.controllerManager?.pid,
    'API servers': undefined, // summed below
    etcd: state.etcd.pid,
  };
}

function cpuNow(state: PlaneState, workerPid: number | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(cpuGroups(state, workerPid)))
    out[name] = name === 'API servers' ? state.apiservers.reduce((s, a) => s + treeCpuSeconds(a.pid), 0) : treeCpuSeconds(pid);
  return out;
}

/** Which of the measured processes each side is charged with. */
function sideProcesses(side: Side, state: PlaneState): string[] {
  if (side === 'built-in') return ['kube-controller-manager'];
  return ['svm worker', ...(state.temporalMode === 'server' ? ['temporal-server', 'PostgreSQL'] : ['Temporal dev server'])];
}

// ------------------------------------------------------------ migrations

interface Migration {
  /** performance.now() when the object was created. */
  startedAt: number;
  seconds: number;
  /** Seconds from the object's creation until it first reported Running=True (undefined: never seen). */
  secondsToRunning?: number;
  succeeded: boolean;
  reported: string[];
}

/** Creates a storagemigration.k8s.io/v1 object for crd and follows it (once a second) until Succeeded or Failed. */
async function migrate(kube: KubeClient, crd: TestCrd, name: string, timeoutMs = 15 * 60_000): Promise<Migration> {
  const t0 = performance.now();
  await kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
    body: JSON.stringify({
      apiVersion: 'storagemigration.k8s.io/v1',
      kind: 'StorageVersionMigration',
      metadata: { name },
      spec: { resource: { group: crd.group, resource: crd.plural } },
    }),
  });
  const reported: string[] = [];
  let secondsToRunning: number | undefined;
  for (;;) {
    const o = await findStandardMigration(kube, name);
    const conditions = o?.status?.conditions ?? [];
    const line = conditions.map((c) => `${c.type}=${c.status}${c.message ? ` "${c.message}"` : ''}`).join('; ');
    const last = reported.at(-1);
    if (line && last?.slice(last.indexOf(' ') + 1) !== line) reported.push(`${since(t0).toFixed(1)}s ${line}`);
    if (secondsToRunning === undefined && conditions.some((c) => c.type === 'Running' && c.status === 'True')) secondsToRunning = since(t0);
    const done = conditions.find((c) => (c.type === 'Succeeded' || c.type === 'Failed') && c.status === 'True');
    if (done) return { startedAt: t0, seconds: since(t0), secondsToRunning, succeeded: done.type === 'Succeeded', reported };
    if (performance.now() - t0 > timeoutMs)
      throw new Error(`${name}: not finished after ${timeoutMs / 1000}s; reported:\n${reported.join('\n')}`);
    await sleep(250);
  }
}

/**
 * Watches crd's objects from now on and notes when each rewrite (a MODIFIED event) arrives: when the first and
 * the last came tells the migrator's waiting apart from its rewriting. Both sides are watched the same way.
 */
async function watchRewrites(
  kube: KubeClient,
  crd: TestCrd,
): Promise<{ stop(): Promise<{ count: number; first?: number; last?: number; reopened: number }> }> {
  const path = `/apis/${crd.group}/v2/${crd.plural}`;
  const list = JSON.parse((await kube.request('GET', path, { query: { limit: 1 } })).body) as { metadata: { resourceVersion: string } };
  const seen = { count: 0, first: undefined as number | undefined, last: undefined as number | undefined, reopened: 0 };
  let resourceVersion = list.metadata.resourceVersion;
  let stopped = false;
  let current: AbortController | undefined;
  const open = async (): Promise<void> => {
    current = await new Watch(kube.kubeConfig).watch(
      path,
      { resourceVersion },
      (type, obj: { metadata?: { resourceVersion?: string } } | undefined) => {
        if (type === 'ERROR') return;
        if (obj?.metadata?.resourceVersion) resourceVersion = obj.metadata.resourceVersion;
        if (type !== 'MODIFIED') return;
        seen.count++;
        seen.first ??= performance.now();
        seen.last = performance.now();
      },
      (err: unknown) => {
        if (stopped) return;
        // The API server may close a watch (one that falls behind): go on from the last event seen, a few times.
        if (++seen.reopened > 10) return log(`watching ${crd.name}: closed ${seen.reopened} times, given up`);
        if (err) log(`watching ${crd.name}: ${String(err)}; reopened from ${resourceVersion}`);
        open().catch((e: unknown) => log(`watching ${crd.name}: ${String(e)}`));
      },
    );
  };
  await open();
  return {
    async stop() {
      await sleep(1000); // the last events on their way
      stopped = true;
      current?.abort();
      return { ...seen };
    },
  };
}

// ------------------------------------------------------------ warm-up

/** Waits until the log of the kube-controller-manager started last says its garbage collector's monitors have synced. */
async function gcSynced(state: PlaneState, timeoutMs = 180_000): Promise<void> {
  const file = state.controllerManager!.log;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = readFileSync(file, 'utf8');
    const current = text.slice(text.lastIndexOf('\n=== ')); // startProcess marks each start
    if (current.includes('Garbage collector: all resource monitors have synced')) return;
    if (current.includes('not all resource monitors could be synced'))
      throw new Error(`kube-controller-manager: not all resource monitors could be synced (see ${file})`);
    if (Date.now() > deadline)
      throw new Error(`kube-controller-manager: its garbage collector had not synced after ${timeoutMs / 1000}s (see ${file})`);
    await sleep(200);
  }
}

interface WarmUp {
  /** kube-controller-manager (re)started until /healthz answered. */
  healthySeconds: number;
  /** Then until its garbage collector said all resource monitors have synced. */
  gcSyncedSeconds: number;
  /** Then a standard migration of a tiny CRD, created -> Succeeded, by this run's migrator. */
  warmUpMigrationSeconds: number;
}

// ------------------------------------------------------------ a run

interface Run {
  index: number;
  side: Side;
  resource: string;
  warmUp: WarmUp;
  seconds: number;
  secondsToRunning?: number;
  /** Seconds from the object's creation to the first and the last rewrite seen by a watch, and how many were seen. */
  firstRewriteSeconds?: number;
  lastRewriteSeconds?: number;
  rewritesSeen: number;
  /** How often the watch was closed by the server and reopened from the last event seen. */
  watchReopened: number;
  /** Objects per second between the first and the last rewrite. */
  rewriteObjectsPerSecond?: number;
  objectsPerSecond: number;
  /** CPU seconds of each measured process over the migration. */
  cpuSeconds: Record<string, number>;
  /** The processes charged to this side, and their sum. */
  sideProcesses: string[];
  sideCpuSeconds: number;
  etcdAfter: Record<string, number>;
  /** Every object at v2 in etcd and the migration Succeeded. */
  ok: boolean;
  reported: string[];
}

interface Prepared {
  measured: TestCrd;
  warmUp: TestCrd;
}

async function prepare(kube: KubeClient, stamp: string, i: number, side: Side): Promise<Prepared> {
  const tag = `${side === 'svm' ? 's' : 'b'}${i + 1}${stamp}`;
  const measured = testCrd(`${tag}.svm.example`, 'widgets', 'Widget');
  const warmUp = testCrd(`${tag}w.svm.example`, 'widgets', 'Widget');
  for (const [crd, count] of [
    [measured, N],
    [warmUp, WARM_UP_OBJECTS],
  ] as const) {
    await applyCrd(kube, crd, 'v1');
    await createObjects(kube, crd, 'v1', count, { namespace: `bench-${tag}` });
    await applyCrd(kube, crd, 'v2');
  }
  return { measured, warmUp };
}

function workerEnv(planeEnv: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  // The caller's settings must not reach the worker: svm runs at its defaults.
  for (const [k, v] of Object.entries(process.env)) if (!/^(SVM_|TEMPORAL_)/.test(k)) env[k] = v;
  for (const [k, v] of Object.entries(planeEnv)) if (k === 'KUBECONFIG' || k.startsWith('TEMPORAL_')) env[k] = v;
  delete env.TEMPORAL_UI_URL;
  delete env.TEMPORAL_CLI;
  return { ...env, ...imageEnv(), SVM_STANDARD_MIGRATIONS: 'own', SVM_LOG_LEVEL: 'warn' };
}

/** Deletes the standard objects whose status kube-controller-manager wrote; returns how many. */
async function deleteBuiltInObjects(kube: KubeClient): Promise<number> {
  const { items } = await listStandardMigrations(kube);
  let n = 0;
  for (const o of items) {
    if (!(o.metadata.managedFields ?? []).some((f) => f.subresource === 'status' && f.manager?.startsWith('kube-controller-manager')))
      continue;
    await kube.raw('DELETE', `/apis/storagemigration.k8s.io/v1/storageversionmigrations/${o.metadata.name}`);
    n++;
  }
  return n;
}

async function stopWorker(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  const exited = new Promise((r) => worker.once('exit', r));
  worker.kill('SIGTERM');
  if (!(await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]))) {
    worker.kill('SIGKILL');
    await exited;
  }
}

async function oneRun(
  kube: KubeClient,
  dir: string,
  index: number,
  side: Side,
  crds: Prepared,
  worker: { bin: string; env: NodeJS.ProcessEnv },
): Promise<Run> {
  log(`run ${index}: ${side} on ${crds.measured.name}`);
  let t = performance.now();
  await startControllerManager(dir, { builtInMigrator: side === 'built-in' }, log);
  const healthySeconds = since(t);
  t = performance.now();
  await gcSynced(readState(dir)!);
  const gcSyncedSeconds = since(t);
  let child: ChildProcess | undefined;
  if (side === 'svm') {
    // svm in own mode takes a new standard object only two minutes after its creation for 10 minutes after the
    // built-in last wrote one's status (src/worker/bridge.ts, BUILT_IN_QUIET_MS): the built-in's finished objects of
    // the runs before go first, as an operator who turned the built-in off would do; otherwise svm would wait.
    const gone = await deleteBuiltInObjects(kube);
    if (gone) log(`run ${index}: deleted the built-in's ${gone} finished storagemigration.k8s.io objects`);
    child = spawn(process.execPath, [worker.bin, 'worker'], { env: worker.env, stdio: ['ignore', 'ignore', 'inherit'] });
    log(`run ${index}: svm worker pid ${child.pid}`);
  }
  try {
    t = performance.now();
    const w = await migrate(kube, crds.warmUp, `warm-up-${index}-${Date.now().toString(36)}`);
    if (!w.succeeded) throw new Error(`run ${index}: the warm-up migration did not succeed:\n${w.reported.join('\n')}`);
    const warmUp: WarmUp = { healthySeconds, gcSyncedSeconds, warmUpMigrationSeconds: w.seconds };
    log(
      `run ${index}: warm: kube-controller-manager healthy after ${healthySeconds}s, its garbage collector synced ${gcSyncedSeconds}s later, a warm-up migration of ${WARM_UP_OBJECTS} objects Succeeded in ${w.seconds}s`,
    );

    const state = readState(dir)!;
    const watch = await watchRewrites(kube, crds.measured);
    const before = cpuNow(state, child?.pid);
    const m = await migrate(kube, crds.measured, `bench-${side}-${index}-${Date.now().toString(36)}`);
    const after = cpuNow(state, child?.pid);
    const rewrites = await watch.stop();
    const at = (t: number | undefined) => (t === undefined ? undefined : round((t - m.startedAt) / 1000, 1));
    const cpuSeconds = Object.fromEntries(Object.keys(after).map((k) => [k, round(after[k]! - before[k]!)]));
    const charged = sideProcesses(side, state).filter((p) => p in cpuSeconds);
    const etcdAfter = (
      await storedVersions(readEnv(dir).ETCD_ENDPOINTS!, { group: crds.measured.group, resource: crds.measured.plural, custom: true })
    ).byApiVersion;
    const r: Run = {
      index,
      side,
      resource: crds.measured.name,
      warmUp,
      seconds: m.seconds,
      secondsToRunning: m.secondsToRunning,
      firstRewriteSeconds: at(rewrites.first),
      lastRewriteSeconds: at(rewrites.last),
      rewritesSeen: rewrites.count,
      watchReopened: rewrites.reopened,
      rewriteObjectsPerSecond:
        rewrites.first !== undefined && rewrites.last! > rewrites.first
          ? round((rewrites.count * 1000) / (rewrites.last! - rewrites.first), 1)
          : undefined,
      objectsPerSecond: round(N / m.seconds, 1),
      cpuSeconds,
      sideProcesses: charged,
      sideCpuSeconds: round(charged.reduce((s, p) => s + cpuSeconds[p]!, 0)),
      etcdAfter,
      ok: m.succeeded && etcdAfter[`${crds.measured.group}/v2`] === N && Object.keys(etcdAfter).length === 1,
      reported: m.reported,
    };
    log(
      `run ${index}: ${side} ${r.ok ? 'Succeeded' : 'NOT OK'} in ${r.seconds}s (Running after ${r.secondsToRunning ?? '-'}s; ${r.rewritesSeen} rewrites seen from ${r.firstRewriteSeconds ?? '-'}s to ${r.lastRewriteSeconds ?? '-'}s, ${r.rewriteObjectsPerSecond ?? '-'}/s), ${r.objectsPerSecond} objects/s, CPU ${side} ${r.sideCpuSeconds}s, API servers ${cpuSeconds['API servers']}s, etcd ${cpuSeconds.etcd}s; etcd after ${JSON.stringify(etcdAfter)}`,
    );
    return r;
  } finally {
    if (child) await stopWorker(child);
  }
}

// ------------------------------------------------------------ summary

interface Figures {
  seconds: number;
  objectsPerSecond: number;
  firstRewriteSeconds: number;
  rewriteObjectsPerSecond: number;
  sideCpuSeconds: number;
  apiserversCpuSeconds: number;
  etcdCpuSeconds: number;
}

function medians(runs: Run[]): Figures {
  return {
    seconds: round(median(runs.map((r) => r.seconds)), 1),
    objectsPerSecond: round(median(runs.map((r) => r.objectsPerSecond)), 1),
    firstRewriteSeconds: round(median(runs.map((r) => r.firstRewriteSeconds ?? NaN)), 1),
    rewriteObjectsPerSecond: round(median(runs.map((r) => r.rewriteObjectsPerSecond ?? NaN)), 1),
    sideCpuSeconds: round(median(runs.map((r) => r.sideCpuSeconds))),
    apiserversCpuSeconds: round(median(runs.map((r) => r.cpuSeconds['API servers']!))),
    etcdCpuSeconds: round(median(runs.map((r) => r.cpuSeconds.etcd!))),
  };
}

const FIGURE_NAMES: Record<keyof Figures, string> = {
  seconds: 'seconds (object created -> Succeeded)',
  objectsPerSecond: 'objects/s (over those seconds)',
  firstRewriteSeconds: 'seconds until the first rewrite',
  rewriteObjectsPerSecond: 'objects/s from the first rewrite to the last',
  sideCpuSeconds: "migrator's side CPU s",
  apiserversCpuSeconds: 'API servers CPU s',
  etcdCpuSeconds: 'etcd CPU s',
};

function table(rows: string[][]): string {
  return [rows[0]!, rows[0]!.map(() => '---'), ...rows.slice(1)].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

function markdown(summary: ReturnType<typeof summarize>): string {
  const { runs, median: med, ratio } = summary;
  const perRun = table([
    [
      'run',
      'side',
      'seconds',
      'Running after',
      'rewrites (watched)',
      'objects/s',
      "side's CPU s",
      'API servers CPU s',
      'etcd CPU s',
      'not charged CPU s',
      'etcd after',
    ],
    ...runs.map((r) => {
      const other = Object.keys(r.cpuSeconds).filter(
        (k) => !r.sideProcesses.includes(k) && k !== 'API servers' && k !== 'etcd' && k !== 'svm worker',
      );
      return [
        String(r.index),
        r.side,
        String(r.seconds),
        r.secondsToRunning === undefined ? '-' : `${r.secondsToRunning} s`,
        `${r.rewritesSeen} from ${r.firstRewriteSeconds ?? '-'} s to ${r.lastRewriteSeconds ?? '-'} s (${r.rewriteObjectsPerSecond ?? '-'}/s)`,
        String(r.objectsPerSecond),
        `${r.sideCpuSeconds} (${r.sideProcesses.map((p) => `${p} ${r.cpuSeconds[p]}`).join(' + ')})`,
        String(r.cpuSeconds['API servers']),
        String(r.cpuSeconds.etcd),
        other.map((p) => `${p} ${r.cpuSeconds[p]}`).join(', '),
        r.ok ? `all ${N} at v2` : `NOT OK: ${JSON.stringify(r.etcdAfter)}`,
      ];
    }),
  ]);
  const warm = table([
    ['run', 'kube-controller-manager healthy', 'then GC synced', `then warm-up migration (${WARM_UP_OBJECTS} objects)`],
    ...runs.map((r) => [
      String(r.index),
      `${r.warmUp.healthySeconds} s`,
      `${r.warmUp.gcSyncedSeconds} s`,
      `${r.warmUp.warmUpMigrationSeconds} s`,
    ]),
  ]);
  const meds = table([
    ['median', 'built-in', 'svm', 'svm / built-in'],
    ...(Object.keys(FIGURE_NAMES) as (keyof Figures)[]).map((k) => [
      FIGURE_NAMES[k],
      String(med['built-in'][k]),
      String(med.svm[k]),
      `x${ratio[k]}`,
    ]),
  ]);
  return `# svm and the built-in migrator side by side, ${summary.date.slice(0, 10)}

Written by \`bench/bench-builtin.ts\` (\`${summary.command}\`); the figures in
[${path.basename(summary.jsonFile)}](${path.basename(summary.jsonFile)}). Revision ${summary.revision}; ${summary.machine}.
Kubernetes ${summary.kubernetes}, ${summary.apiservers} API servers, Temporal ${summary.temporal}.
${summary.objects} objects per run, each run on a CRD of its own (same shape), moved v1 -> v2 through one
\`storagemigration.k8s.io/v1\` object; ${summary.rounds} alternating rounds, ${summary.order.join(', ')}.

svm at its defaults: ${summary.svmSettings}. CPU charged to the built-in: kube-controller-manager;
to svm: the worker and the Temporal server${summary.temporal.includes('PostgreSQL') ? ' and PostgreSQL' : ''}. Before every
measured migration kube-controller-manager was (re)started (with the migrator for the built-in, without it for
svm, then a new svm worker) and warm: healthy, its garbage collector synced, a warm-up migration Succeeded.
${summary.note ? `\nNote: ${summary.note}\n` : ''}
${meds}

Each run:

${perRun}

Warm-up before each run (not measured):

${warm}
`;
}

function summarize(runs: Run[], state: PlaneState, svmSettings: string, revision: string, jsonFile: string) {
  const med = { 'built-in': medians(runs.filter((r) => r.side === 'built-in')), svm: medians(runs.filter((r) => r.side === 'svm')) };
  const ratio = Object.fromEntries(
    (Object.keys(FIGURE_NAMES) as (keyof Figures)[]).map((k) => [k, round(med.svm[k] / med['built-in'][k])]),
  ) as Record<keyof Figures, number>;
  return {
    date: new Date().toISOString(),
    command: `npm run bench:builtin -- ${process.argv.slice(2).join(' ')}`.trim(),
    revision,
    machine: `${cpus().length} cores (${cpus()[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GiB`,
    kubernetes: state.kubeVersion ?? state.controllerManager?.version ?? 'default',
    apiservers: state.apiservers.length,
    temporal: state.temporalMode === 'server' ? `temporal-server ${state.temporalServer?.version} on PostgreSQL` : 'dev server',
    objects: N,
    rounds: ROUNDS,
    order: ORDER,
    svmSettings,
    note: values.note,
    median: med,
    ratio,
    runs,
    jsonFile,
  };
}

// ------------------------------------------------------------ main

async function main() {
  const dir = path.resolve(values.dir ?? defaultDevDir());
  await up({ dir, log });
  const planeEnv = readEnv(dir);
  const kube = KubeClient.fromKubeconfig(planeEnv.KUBECONFIG);
  await installCrds(kube);
  const env = workerEnv(planeEnv);
  const s = loadWorkerSettings(env);
  const svmSettings = `SVM_QPS unset: the default budget (${s.qps === 'auto' ? 'auto: following the API servers' : `${s.qps} updates/s`}) in force; ${s.maxConcurrentChunks} concurrent chunks, adaptive concurrency ${s.adaptiveConcurrency ? 'on' : 'off'}, memory budget ${s.memoryBudgetBytes / 2 ** 20} MiB; SVM_STANDARD_MIGRATIONS=${s.standardMigrations}; the Dockerfile's ENV (${Object.entries(
    imageEnv(),
  )
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')})`;
  log(`svm: ${svmSettings}`);
  log(`order: ${ORDER.join(', ')}; ${N} objects per run`);

  const stamp = Date.now().toString(36);
  const t = performance.now();
  const prepared: Prepared[] = [];
  for (const [i, side] of ORDER.entries()) {
    log(`preparing run ${i + 1} (${side}): ${N} + ${WARM_UP_OBJECTS} objects at v1, then storage v2`);
    prepared.push(await prepare(kube, stamp, i, side));
  }
  log(`all CRDs ready in ${since(t)}s (not measured)`);

  const tree = compiledWorkerTree(root, log);
  const runs: Run[] = [];
  try {
    for (const [i, side] of ORDER.entries()) runs.push(await oneRun(kube, dir, i + 1, side, prepared[i]!, { bin: tree.bin, env }));
  } finally {
    tree.dispose();
    kube.close();
  }

  const revision = (() => {
    try {
      const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
      const dirty = execFileSync('git', ['status', '--porcelain', '--', 'bench', 'src'], { cwd: root, encoding: 'utf8' }).trimEnd();
      return dirty
        ? `${head} (uncommitted changes: ${dirty
            .split('\n')
            .map((l) => l.slice(3))
            .join(', ')})`
        : head;
    } catch {
      return 'unknown';
    }
  })();
  const date = new Date().toISOString();
  mkdirSync(values.out, { recursive: true });
  const jsonFile = path.join(values.out, `builtin-${date.slice(0, 10)}.json`);
  const summary = summarize(runs, readState(dir)!, svmSettings, revision, jsonFile);
  const committed = { ...summary, jsonFile: undefined, runs: runs.map((r) => ({ ...r, reported: r.reported.slice(-3) })) };
  if (existsSync(jsonFile)) log(`replacing ${jsonFile}`);
  writeFileSync(jsonFile, JSON.stringify(committed, null, 2) + '\n');
  const md = markdown(summary);
  writeFileSync(jsonFile.replace(/\.json$/, '.md'), md);

  const raw = path.join(root, 'bench', 'results');
  mkdirSync(raw, { recursive: true });
  const rawFile = path.join(raw, `builtin-${date.replace(/[:.]/g, '-')}.json`);
  writeFileSync(rawFile, JSON.stringify({ ...summary, jsonFile: undefined }, null, 2) + '\n');

  process.stdout.write(md);
  for (const r of runs)
    process.stdout.write(`\nrun ${r.index} (${r.side}) reported while it ran:\n${r.reported.map((l) => `  ${l}`).join('\n')}\n`);
  log(`results: ${jsonFile} and .md (to commit); every report: ${rawFile}`);
  if (runs.some((r) => !r.ok)) throw new Error('a run did not end with every object at v2 (see above)');
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
