/**
 * `npm run bench:migrate [-- --objects N --chunk-size N --concurrency N --qps auto|N --adaptive on|off --unthrottled --raw-sample N --seed-etcd-above N --idle-seconds N --dir DIR --host-env --pin-cpus --note TEXT]`
 *
 * Migrates N objects of a CRD on the local control plane and prints, beside a
 * raw ceiling measured in the same run (on all N objects, or on the first
 * --raw-sample of them when N is larger):
 *   - objects per second (the migration workflow vs a tight loop of the same
 *     metadata-only list + the empty merge patch svm sends, at the same
 *     concurrency, without Temporal);
 *   - p50/p99 update latency (from the worker's latency histogram, and exact
 *     for the raw loop);
 *   - the worker process's peak RSS (VmHWM of the `svm worker` child), beside an empty Temporal
 *     TypeScript worker's (bench/lib/empty-worker.ts: one trivial workflow, no activities, the
 *     SDK's defaults, the same environment) polling the same server for --idle-seconds;
 *   - workflow history events per 1000 objects (and by event type), and
 *     continue-as-new count;
 *   - the p50/p99 latency of an unrelated client (a steady GET / LIST
 *     limit=50 / PUT loop on 200 ConfigMaps of another namespace), idle for
 *     --idle-seconds before the migration and during it, and their ratio.
 * --watch-cache off (the default above 200,000 objects) restarts the API
 * servers with the watch cache of the bench resource off, and restores their
 * flags at the end (see the option for why).
 * Objects are created at v1 through the API servers up to --seed-etcd-above
 * (20,000), and above it written straight into etcd as the API server would
 * store them (bench/lib/seed-etcd.ts): creating 10^6 through the API takes
 * longer here than migrating them. The raw loop moves its objects v1 -> v2,
 * the same loop in a fresh process moves them back to v1 (as cold as the fresh
 * worker: the bench's process has run the client code since it created the
 * objects), and the migration moves every object to v2: each does real etcd writes.
 * The worker runs as the image runs it: compiled JavaScript (tsc into a
 * temporary tree, with the prebuilt workflow bundle and the KubeConfig
 * bundle), not through tsx, which alone adds ~60 MiB to its RSS, and with
 * the environment the image sets (the runtime stage's ENV lines of the
 * Dockerfile: NODE_OPTIONS and glibc's MALLOC_* settings); `--tsx-worker` runs bin/svm.js
 * as checked out, `--host-env` with this process's environment only.
 * `--pin-cpus` puts the control plane (etcd, API servers, load balancer) on
 * CPU 0 and Temporal, the worker and the unrelated client on the others, as
 * in a cluster where the migrator does not run on the API servers' machines
 * (without it, on 2 cores, the migrator's own CPU slows the API servers as
 * much as its requests do). Figures go to
 * bench/results/bench-<time>.json. Not part of `npm test`: these are
 * measurements, not assertions.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { defaultMigrationOptions, Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { defaultDevDir, readEnv, readState, restartApiserver, up } from '../src/dev/plane';
import { KubeClient } from '../src/kube/client';
import { histogramQuantile } from '../src/worker/metrics';
import { applyCrd, createObjects, ensureNamespace, testCrd } from '../src/dev/test-crd';
import { seedIntoEtcd } from './lib/seed-etcd';
import { PacedWriter, UnrelatedClient, type PhaseLatencies } from './lib/unrelated-client';
import { imageEnv } from './lib/image-env';
import { compiledWorkerTree } from './lib/worker-tree';
import { planeCpu, planeCpuPer1000, treeCpuSeconds } from './lib/proc';
import { compiledEmptyWorker, emptyWorkerPeakRss } from './lib/empty-worker';
import { compiledRawLoop, rawLoop, rawLoopInChild } from './lib/raw-loop';
import { spawnWorker, waitForHealthz } from './lib/worker-process';
import { freePort } from '../src/dev/ports';

const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '10000' },
    // The project's defaults (MigrationOptions).
    'chunk-size': { type: 'string', default: String(defaultMigrationOptions.chunkSize) },
    concurrency: { type: 'string', default: String(defaultMigrationOptions.concurrency) },
    // The worker's budget (SVM_QPS): auto (its default: follows the API servers), a fixed rate, or 0 (none).
    qps: { type: 'string', default: 'auto' },
    // SVM_ADAPTIVE_CONCURRENCY (on by default; auto needs it).
    adaptive: { type: 'string', default: 'on' },
    // svm unthrottled: --qps 0 --adaptive off (each migration's concurrency in flight, as the raw loop).
    unthrottled: { type: 'boolean', default: false },
    'raw-sample': { type: 'string', default: '20000' },
    // Chunks per workflow run before continue-as-new (MigrationOptions.maxChunksPerRun; the project's default).
    'max-chunks-per-run': { type: 'string', default: String(defaultMigrationOptions.maxChunksPerRun) },
    'seed-etcd-above': { type: 'string', default: '20000' },
    'idle-seconds': { type: 'string', default: '30' },
    // A plain writer (Secrets of its own namespace, no lists, no Temporal) at this rate for --idle-seconds before the
    // migration, the unrelated client measuring: what any writer at the migration's rate costs the other clients.
    // Default: the migration's budget (--qps); with no budget, the raw ceiling's rate. 0: none.
    'writer-qps': { type: 'string' },
    'tsx-worker': { type: 'boolean', default: false },
    'host-env': { type: 'boolean', default: false },
    // Node flags for the worker only (NODE_OPTIONS of the child), e.g. --max-semi-space-size=2.
    'worker-node-options': { type: 'string' },
    dir: { type: 'string' },
    // Control plane (etcd, API servers, load balancer) on CPU 0, everything else (Temporal, the worker, the
    // unrelated client, this process) on the other CPUs: as in a cluster, where the migrator does not share the
    // API servers' machines.
    'pin-cpus': { type: 'boolean', default: false },
    // What else ran on the machine during the run, for the results file.
    note: { type: 'string', default: 'nothing else ran' },
    // The API servers' watch cache for the bench resource: on, off, or auto (off above 200,000 objects). kube-apiserver
    // v1.36 on this 2-core machine cannot build the watch cache of 10^6 custom resources: measured, each server grew past
    // 11 GiB of RSS without the cache becoming ready in 8 minutes, and with the default 5 minute compaction its initial
    // list failed ("continue parameter is too old") and started over, for ever. Off, lists and reads of that resource go
    // to etcd, as `--watch-cache-sizes=<resource>#0` does in clusters that hold such a resource.
    'watch-cache': { type: 'string', default: 'auto' },
  },
});
const N = Number(values.objects);
const CHUNK = Number(values['chunk-size']);
const CONC = Number(values.concurrency);
const MAX_CHUNKS_PER_RUN = Number(values['max-chunks-per-run']);
const QPS_SETTING = values.unthrottled ? '0' : values.qps.trim().toLowerCase();
const AUTO = QPS_SETTING === 'auto';
const QPS = AUTO ? 0 : Number(QPS_SETTING);
const ADAPTIVE = values.unthrottled ? false : values.adaptive === 'on';
if (!['on', 'off'].includes(values.adaptive)) throw new Error('--adaptive must be on or off');
if (AUTO && !ADAPTIVE) throw new Error('--qps auto needs --adaptive on (--unthrottled is --qps 0 --adaptive off)');
const BUDGET = AUTO ? 'auto' : QPS > 0 ? `${QPS}/s` : 'none';
const SAMPLE = Math.min(N, Number(values['raw-sample']) || N);
const SEED_ETCD_ABOVE = Number(values['seed-etcd-above']);
const IDLE = Number(values['idle-seconds']);
const WRITER_QPS = values['writer-qps'] === undefined ? undefined : Number(values['writer-qps']);
const WATCH_CACHE_OFF_ABOVE = 200_000;
if (!['on', 'off', 'auto'].includes(values['watch-cache'])) throw new Error('--watch-cache must be on, off or auto');
const WATCH_CACHE = values['watch-cache'] === 'auto' ? (N > WATCH_CACHE_OFF_ABOVE ? 'off' : 'on') : values['watch-cache'];
for (const [k, v] of [
  ['--objects', N],
  ['--chunk-size', CHUNK],
  ['--concurrency', CONC],
  ['--max-chunks-per-run', MAX_CHUNKS_PER_RUN],
] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`${k} must be a positive whole number`);
}
for (const [k, v] of [
  ['--qps', QPS],
  ['--raw-sample', SAMPLE],
  ['--seed-etcd-above', SEED_ETCD_ABOVE],
  ['--idle-seconds', IDLE],
  ['--writer-qps', WRITER_QPS ?? 0],
] as const) {
  if (!Number.isInteger(v) || v < 0) throw new Error(`${k} must be a whole number`);
}

const verbs = (l: PhaseLatencies) => ['GET', 'LIST', 'PUT'].map((v) => l.byVerb[v]?.p99ms).join(' / ') + ' ms';
const log = (s: string) => process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${s}\n`);
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

function parseHistogram(text: string, name: string): Array<{ le: number; count: number }> {
  const byLe = new Map<number, number>();
  for (const line of text.split('\n')) {
    const m = line.match(new RegExp(`^${name}_bucket\\{.*le="([^"]+)".*\\} (\\d+)`));
    if (m) byLe.set(m[1] === '+Inf' ? Infinity : Number(m[1]), (byLe.get(m[1] === '+Inf' ? Infinity : Number(m[1])) ?? 0) + Number(m[2]));
  }
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
}

const WORKER_ENV: Record<string, string> = {
  ...(values['host-env'] ? {} : imageEnv()),
  ...(values['worker-node-options'] ? { NODE_OPTIONS: values['worker-node-options'] } : {}),
};

async function etcdDbMiB(endpoint: string): Promise<number> {
  const res = await fetch(`${endpoint.replace(/\/$/, '')}/v3/maintenance/status`, { method: 'POST', body: '{}' });
  return Number(((await res.json()) as { dbSize: string }).dbSize) / 1024 / 1024;
}

/** --pin-cpus: the control plane on CPU 0, the rest on the others; returns how to undo it. */
function pinCpus(dir: string): () => void {
  const n = cpus().length;
  if (n < 2) throw new Error('--pin-cpus needs at least 2 CPUs');
  const state = readState(dir);
  if (!state) throw new Error(`no plane in ${dir}`);
  const plane = [state.etcd.pid, ...state.apiservers.map((a) => a.pid), ...(state.loadBalancer ? [state.loadBalancer.pid] : [])];
  const rest = [state.temporal.pid, process.pid];
  const set = (pids: number[], list: string) => {
    for (const pid of pids) if (pid > 0) execFileSync('taskset', ['-a', '-p', '-c', list, String(pid)], { stdio: 'ignore' });
  };
  set(plane, '0');
  set(rest, `1-${n - 1}`);
  log(`pinned the control plane (${plane.join(', ')}) to CPU 0, Temporal and the bench (the worker is its child) to CPUs 1-${n - 1}`);
  return () => set([...plane, ...rest], `0-${n - 1}`);
}

async function main() {
  const dir = values.dir ?? defaultDevDir();
  await up({ dir, log });
  const crd = testCrd(`bench${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
  const restoreCache = WATCH_CACHE === 'off' ? await watchCacheOff(dir, crd) : async () => undefined;
  try {
    const unpin = values['pin-cpus'] ? pinCpus(dir) : () => undefined;
    const env = readEnv(dir);
    const kube = KubeClient.fromKubeconfig(env.KUBECONFIG, { maxSockets: CONC * 2 });
    const worker0 = values['tsx-worker']
      ? { bin: path.join(__dirname, '..', 'bin', 'svm.js'), dispose() {} }
      : compiledWorkerTree(path.join(__dirname, '..'), log);
    try {
      await installCrds(kube);
      await measure(kube, env, crd, worker0.bin);
    } finally {
      unpin();
      worker0.dispose();
      kube.close();
    }
  } finally {
    await restoreCache();
  }
}

/** Restarts every API server without a watch cache for the bench resource; returns how to restart them as they were. */
async function watchCacheOff(dir: string, crd: ReturnType<typeof testCrd>): Promise<() => Promise<void>> {
  const state = readState(dir);
  if (!state) throw new Error(`no plane in ${dir}`);
  const before = state.apiservers.map((a) => [...a.extraArgs]);
  const flag = `--watch-cache-sizes=${crd.plural}.${crd.group}#0`;
  log(`restarting the API servers with ${flag} (--watch-cache off)`);
  for (const a of state.apiservers) await restartApiserver(dir, a.index, [...a.extraArgs, flag], log);
  return async () => {
    log('restarting the API servers with their flags as before');
    for (const [i, args] of before.entries()) await restartApiserver(dir, i, args, log);
  };
}

/** CPU seconds so far of the plane's API servers (together), its etcd, its Temporal and the whole machine. */
const controlPlaneCpu = () => planeCpu(readState(values.dir ?? defaultDevDir()));
const cpuPer1000 = planeCpuPer1000;

async function measure(kube: KubeClient, env: Record<string, string>, crd: ReturnType<typeof testCrd>, workerBin: string) {
  const etcd = env.ETCD_ENDPOINTS!;
  const key = { group: crd.group, resource: crd.plural, custom: true };
  const viaEtcd = N > SEED_ETCD_ABOVE;

  await applyCrd(kube, crd, 'v1');
  const tSeed = performance.now();
  if (viaEtcd) {
    log(`seeding ${N} objects at v1 straight into etcd (more than --seed-etcd-above ${SEED_ETCD_ABOVE}; not measured)`);
    await ensureNamespace(kube, 'bench');
    await seedIntoEtcd(etcd, crd, N, { namespace: 'bench', prefix: 'b', log });
  } else {
    log(`creating ${N} objects at v1 through the API (not measured)`);
    for (let done = 0; done < N; done += 10_000) {
      await createObjects(kube, crd, 'v1', Math.min(10_000, N - done), { namespace: 'bench', prefix: `b${done / 10_000}` });
      log(`  ${Math.min(N, done + 10_000)} created`);
    }
  }
  const seedSeconds = (performance.now() - tSeed) / 1000;
  // The API servers list what etcd holds (resourceVersion from each key's mod revision).
  for (let i = 0; ; i++) {
    const first = await kube.getJson<{ items: unknown[]; metadata: { remainingItemCount?: number } }>(
      `/apis/${crd.group}/v1/${crd.plural}`,
      { limit: 500 },
    );
    const listed = first.items.length + (first.metadata.remainingItemCount ?? 0);
    if (listed === N) break;
    if (i >= 120) throw new Error(`the API servers list ${listed} objects, not ${N}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  log(`  ${N} objects in ${seedSeconds.toFixed(0)} s; the API lists ${N}; etcd db ${(await etcdDbMiB(etcd)).toFixed(0)} MiB`);

  const clientKube = KubeClient.fromKubeconfig(env.KUBECONFIG, { maxSockets: 4 });
  const client = new UnrelatedClient(clientKube, `bench-client-${Date.now().toString(36)}`);
  await client.prepare();
  const writer = new PacedWriter(clientKube, `bench-writer-${Date.now().toString(36)}`);
  await writer.prepare();

  log(
    `raw ceiling: storage v1 -> v2, a tight metadata-only list + empty-patch loop without Temporal, on ${SAMPLE === N ? 'all' : 'the first'} ${SAMPLE} objects`,
  );
  await applyCrd(kube, crd, 'v2');
  // The unrelated client runs during the raw loop as it does during the migration: both compete with it alike.
  client.phase = 'raw';
  client.start();
  const rawCpu0 = process.cpuUsage();
  const rawPlane0 = controlPlaneCpu();
  const rawTarget = { group: crd.group, plural: crd.plural, kind: crd.kind, objects: SAMPLE, chunk: CHUNK, concurrency: CONC };
  const raw = await rawLoop(kube, { ...rawTarget, version: 'v2' });
  const rawCpu = process.cpuUsage(rawCpu0);
  const rawPlaneCpu = cpuPer1000(rawPlane0, controlPlaneCpu(), raw.objects);
  // This process's CPU over the loop: the loop's own, plus the unrelated client's few requests.
  const rawCpuSeconds = (rawCpu.user + rawCpu.system) / 1e6;
  log(
    `  ${(raw.objects / raw.seconds).toFixed(0)} objects/s on ${raw.objects}; ${((rawCpuSeconds / raw.objects) * 1000).toFixed(2)} CPU s per 1000; ` +
      `API servers ${rawPlaneCpu.apiservers}, etcd ${rawPlaneCpu.etcd} CPU s per 1000`,
  );

  // The same loop again in a fresh process (compiled, the worker's environment): its code starts as cold as the
  // worker's, where this process has run the same client code since it created the objects. It moves them back to v1.
  await applyCrd(kube, crd, 'v1');
  log(`the raw loop again in a fresh process (as cold as a fresh worker): storage v2 -> v1, on the same ${SAMPLE} objects`);
  client.phase = 'rawCold';
  const coldPlane0 = controlPlaneCpu();
  const cold = await rawLoopInChild(
    { compiled: compiledRawLoop(workerBin, values['tsx-worker']), kubeconfig: env.KUBECONFIG!, env: WORKER_ENV },
    { ...rawTarget, version: 'v1' },
  );
  const coldPlaneCpu = cpuPer1000(coldPlane0, controlPlaneCpu(), cold.objects);
  log(
    `  ${(cold.objects / cold.seconds).toFixed(0)} objects/s on ${cold.objects}; ${((cold.cpuSeconds / cold.objects) * 1000).toFixed(2)} CPU s per 1000 (its process); ` +
      `API servers ${coldPlaneCpu.apiservers}, etcd ${coldPlaneCpu.etcd} CPU s per 1000`,
  );

  // Every object is at v1 now: the migration moves each to v2.
  await applyCrd(kube, crd, 'v2');
  log(`unrelated client: idle for ${IDLE} s`);
  client.phase = 'idle';
  await new Promise((r) => setTimeout(r, IDLE * 1000));

  // Under auto the migration's rate is known only after it: the plain writer then runs after the migration.
  const writerQps = WRITER_QPS ?? (QPS || Math.round(raw.objects / raw.seconds));
  const writerAfter = AUTO && WRITER_QPS === undefined;
  if (writerQps > 0 && !writerAfter) {
    log(`unrelated client beside a plain writer: Secrets of its own namespace updated at ${writerQps}/s, ${CONC} at once, for ${IDLE} s`);
    client.phase = 'writer';
    await writer.run(writerQps, CONC, IDLE);
    log(`  ${writer.writes} written (${(writer.writes / IDLE).toFixed(0)}/s), ${writer.errors} errors`);
    client.phase = 'idle2';
    await new Promise((r) => setTimeout(r, 5000)); // let the writer's last requests settle out of both windows
  }

  log(
    `migration workflow: storage v1 -> v2, \`svm worker\` (${workerBin}) in a child process, budget ${BUDGET}, adaptive concurrency ${ADAPTIVE ? 'on' : 'off'}`,
  );
  const taskQueue = `bench-${Date.now().toString(36)}`;
  // A port free now (a random one could be in use: once the worker could not listen, EADDRINUSE).
  const metricsPort = await freePort();
  const worker = spawnWorker(workerBin, env, taskQueue, {
    SVM_QPS: QPS_SETTING,
    SVM_ADAPTIVE_CONCURRENCY: String(ADAPTIVE),
    SVM_METRICS_PORT: String(metricsPort),
    ...WORKER_ENV,
  });
  const status = () => readFileSync(`/proc/${worker.pid}/status`, 'utf8');
  const kib = (text: string, field: string) => Number(text.match(new RegExp(`${field}:\\s+(\\d+) kB`))![1]);
  const rssSeries: Array<[number, number]> = [];
  // Beside RSS: its anonymous part and the main thread's V8 heap, so a rise can be told apart (heap or native).
  const heapSeries: Array<[number, number, number]> = [];
  // When the peak happens: RSS read every 250 ms (VmHWM says how high, not when).
  const rssPeak = { mib: 0, atSeconds: 0 };
  const migrator = await Migrator.connect({ temporal: { address: env.TEMPORAL_ADDRESS!, taskQueue }, kubeconfig: env.KUBECONFIG });
  let result;
  let metricsText = '';
  // A cluster's worker is running before a migration starts: its start (modules, workflow bundle, connection) is
  // measured apart, not in the migration's time (the raw loop's process start is not in its time either).
  const spawnedAt = performance.now();
  await waitForHealthz(metricsPort, worker);
  const workerStartSeconds = (performance.now() - spawnedAt) / 1000;
  const readyPeakMiB = Math.round(kib(status(), 'VmHWM') / 102.4) / 10;
  log(`  worker ready in ${workerStartSeconds.toFixed(1)} s (not counted), peak RSS so far ${readyPeakMiB} MiB`);
  const temporalPid = readState(values.dir ?? defaultDevDir())?.temporal?.pid;
  const workerCpu0 = treeCpuSeconds(worker.pid);
  const temporalCpu0 = treeCpuSeconds(temporalPid);
  const plane0 = controlPlaneCpu();
  // Every minute: [seconds, objects done, API servers' CPU %, etcd's CPU % over the minute] (100 % = one core).
  const progressSeries: Array<[number, number, number, number]> = [];
  let planeLast = { at: performance.now(), cpu: plane0 };
  const t0 = performance.now();
  const startedAt = Date.now();
  const peakSampler = setInterval(() => {
    try {
      const mib = kib(status(), 'VmRSS') / 1024;
      if (mib > rssPeak.mib) Object.assign(rssPeak, { mib: Math.round(mib), atSeconds: Math.round((performance.now() - t0) / 100) / 10 });
    } catch {
      // the worker has gone
    }
  }, 250);
  const sampler = setInterval(() => {
    try {
      const at = Math.round((performance.now() - t0) / 1000);
      const st = status();
      rssSeries.push([at, Math.round(kib(st, 'VmRSS') / 1024)]);
      const anon = Math.round(kib(st, 'RssAnon') / 1024);
      fetch(`http://127.0.0.1:${metricsPort}/metrics`)
        .then((r) => r.text())
        .then((text) => {
          const heap = /^nodejs_heap_size_total_bytes (\S+)$/m.exec(text);
          if (heap) heapSeries.push([at, anon, Math.round(Number(heap[1]) / 1048576)]);
        })
        .catch(() => undefined);
    } catch {
      // the worker has gone
    }
  }, 5000);
  try {
    client.phase = 'migration';
    const h = await migrator.start(crd.name, { chunkSize: CHUNK, concurrency: CONC, maxChunksPerRun: MAX_CHUNKS_PER_RUN });
    let lastLog = performance.now();
    const progress = setInterval(() => {
      if (performance.now() - lastLog < 60_000) return;
      lastLog = performance.now();
      const elapsed = Math.round((performance.now() - t0) / 1000);
      const heap = heapSeries.at(-1);
      if (worker.exitCode !== null || worker.signalCode !== null) return; // the wait below fails with why
      const rss = `worker RSS ${rssSeries.at(-1)?.[1]} MiB, peak ${Math.round(kib(status(), 'VmHWM') / 1024)} MiB${heap ? ` (anonymous ${heap[1]} MiB, V8 heap ${heap[2]} MiB)` : ''}`;
      const now = { at: performance.now(), cpu: controlPlaneCpu() };
      const pct = (k: 'apiservers' | 'etcd') => Math.round(((now.cpu[k] - planeLast.cpu[k]) / ((now.at - planeLast.at) / 1000)) * 100);
      const plane = [pct('apiservers'), pct('etcd')] as const;
      planeLast = now;
      h.progress().then(
        (p) => {
          const done = p.counters.migrated + p.counters.conflicts;
          progressSeries.push([elapsed, done, ...plane]);
          log(`  ${elapsed} s, ${done} objects done; API servers ${plane[0]} %, etcd ${plane[1]} % CPU over the minute; ${rss}`);
        },
        () => log(`  ${elapsed} s; ${rss}`),
      );
    }, 5000);
    try {
      // A worker that exits mid-migration ends the bench with that, not with a migration waiting for a worker for ever.
      const exited = new Promise<never>((_, reject) =>
        worker.once('exit', (code, signal) => reject(new Error(`the worker exited (${code ?? signal}) during the migration`))),
      );
      exited.catch(() => undefined);
      result = await Promise.race([h.wait(), exited]);
    } finally {
      clearInterval(progress);
    }
    const seconds = (performance.now() - t0) / 1000;
    const workerCpuSeconds = treeCpuSeconds(worker.pid) - workerCpu0;
    const temporalCpuSeconds = treeCpuSeconds(temporalPid) - temporalCpu0;
    const planeCpu = cpuPer1000(plane0, controlPlaneCpu(), N);
    let writerRate = writerQps;
    if (writerAfter) {
      // A plain writer at the rate the migration just ran at: what any writer at that rate costs the other clients.
      writerRate = Math.max(1, Math.round(N / seconds));
      client.phase = 'idle2';
      await new Promise((r) => setTimeout(r, 5000));
      log(`unrelated client beside a plain writer at the migration's rate: ${writerRate}/s, ${CONC} at once, for ${IDLE} s`);
      client.phase = 'writer';
      await writer.run(writerRate, CONC, IDLE);
      log(`  ${writer.writes} written (${(writer.writes / IDLE).toFixed(0)}/s), ${writer.errors} errors`);
      client.phase = 'idle2';
      await new Promise((r) => setTimeout(r, 5000));
    }
    // Idle again, after the migration: a second look at the idle latency (one 30 s window is noisy: the servers may
    // still be collecting the raw loop's garbage, or compacting).
    client.phase = 'after';
    log(`unrelated client: idle again for ${IDLE} s after the migration`);
    await new Promise((r) => setTimeout(r, IDLE * 1000));
    await client.stop();
    metricsText = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const st = status();
    const peakRssMiB = kib(st, 'VmHWM') / 1024;
    log(`an empty Temporal worker (one trivial workflow, no activities) polling for ${IDLE} s, in the worker's environment`);
    const emptyPeakMiB = await emptyWorkerPeakRss({
      compiled: compiledEmptyWorker(workerBin, values['tsx-worker']),
      address: env.TEMPORAL_ADDRESS!,
      seconds: IDLE,
      env: WORKER_ENV,
    });
    log(`  peak RSS ${emptyPeakMiB} MiB`);
    let events = 0;
    let runs = 0;
    const byType: Record<string, number> = {};
    for await (const w of migrator.client.workflow.list({ query: `WorkflowId = '${h.workflowId}'` })) {
      // Runs of this migration only (the workflow ID is the resource's; the bench's CRD is new): started since it began.
      if (w.runId && w.startTime.getTime() >= startedAt - 5_000) {
        events += w.historyLength;
        runs++;
        const history = await migrator.client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
        for (const e of history.events ?? []) {
          const type =
            Object.keys(e)
              .find((k) => k.endsWith('EventAttributes'))
              ?.replace(/EventAttributes$/, '') ?? 'unknown';
          byType[type] = (byType[type] ?? 0) + 1;
        }
      }
    }
    const afterMigration = await storedVersions(etcd, key);
    const hist = parseHistogram(metricsText, 'svm_update_duration_seconds');
    const idle = client.report('idle');
    const during = client.report('migration');
    const afterIdle = client.report('after');
    const besideWriter = writerRate > 0 ? client.report('writer') : undefined;
    const chunks = result.counters.chunks;
    const figures = {
      date: new Date().toISOString(),
      machine: {
        cpus: cpus().length,
        memGiB: Math.round(totalmem() / 2 ** 30),
        note: values.note,
      },
      objects: N,
      seeded: viaEtcd ? 'etcd' : 'api',
      seedSeconds: Number(seedSeconds.toFixed(1)),
      chunkSize: CHUNK,
      concurrency: CONC,
      maxChunksPerRun: MAX_CHUNKS_PER_RUN,
      qps: AUTO ? 'auto' : QPS,
      budget: BUDGET,
      adaptiveConcurrency: ADAPTIVE,
      apiservers: Number(env.APISERVER_COUNT ?? 2),
      watchCache: WATCH_CACHE,
      pinnedCpus: values['pin-cpus'] ? 'control plane on CPU 0; Temporal, worker, unrelated client on the others' : 'none',
      worker: values['tsx-worker'] ? 'bin/svm.js (tsx)' : 'compiled (tsc), prebuilt workflow and KubeConfig bundles',
      workerNodeOptions: values['worker-node-options'] ?? '',
      workerEnv: {
        ...Object.fromEntries(
          Object.entries(process.env).filter(([k]) => k.startsWith('SVM_') || k === 'NODE_OPTIONS' || k.startsWith('MALLOC_')),
        ),
        ...WORKER_ENV,
      },
      raw: {
        objects: raw.objects,
        sampled: raw.objects < N,
        objectsPerSecond: Math.round(raw.objects / raw.seconds),
        seconds: Number(raw.seconds.toFixed(2)),
        cpuSecondsPer1000: Number(((rawCpuSeconds / raw.objects) * 1000).toFixed(2)),
        /** CPU seconds per 1000 objects of the API servers together and of etcd during the loop. */
        controlPlaneCpuSecondsPer1000: rawPlaneCpu,
        p50ms: Number((quantile(raw.latencies, 0.5) * 1000).toFixed(2)),
        p99ms: Number((quantile(raw.latencies, 0.99) * 1000).toFixed(2)),
      },
      /** The same loop in a fresh process (compiled, the worker's environment), right after: as cold as the worker. */
      rawFreshProcess: {
        objects: cold.objects,
        objectsPerSecond: Math.round(cold.objects / cold.seconds),
        seconds: Number(cold.seconds.toFixed(2)),
        cpuSecondsPer1000: Number(((cold.cpuSeconds / cold.objects) * 1000).toFixed(2)),
        controlPlaneCpuSecondsPer1000: coldPlaneCpu,
        p50ms: Number((quantile(cold.latencies, 0.5) * 1000).toFixed(2)),
        p99ms: Number((quantile(cold.latencies, 0.99) * 1000).toFixed(2)),
      },
      workflow: {
        phase: result.phase,
        objectsPerSecond: Math.round(N / seconds),
        seconds: Number(seconds.toFixed(2)),
        workerStartSeconds: Number(workerStartSeconds.toFixed(1)),
        workerCpuSecondsPer1000: Number(((workerCpuSeconds / N) * 1000).toFixed(2)),
        temporalCpuSecondsPer1000: Number(((temporalCpuSeconds / N) * 1000).toFixed(2)),
        controlPlaneCpuSecondsPer1000: planeCpu,
        /** Every minute: [seconds, objects done, API servers' CPU %, etcd's CPU %] (100 = one core). */
        progressEvery60s: progressSeries,
        p50ms: Number((histogramQuantile(0.5, hist) * 1000).toFixed(2)),
        p99ms: Number((histogramQuantile(0.99, hist) * 1000).toFixed(2)),
        workerPeakRssMiB: Number(peakRssMiB.toFixed(1)),
        emptyWorkerPeakRssMiB: emptyPeakMiB,
        workerOverEmptyMiB: Number((peakRssMiB - emptyPeakMiB).toFixed(1)),
        workerRssMiBEvery5s: rssSeries.filter((_, i) => rssSeries.length <= 200 || i % Math.ceil(rssSeries.length / 200) === 0),
        /** The highest RSS read every 250 ms during the migration, and when (seconds after its start). */
        workerRssPeakSampled: rssPeak,
        /** VmHWM once the worker answered /healthz, before the migration started. */
        workerReadyPeakRssMiB: readyPeakMiB,
        /** [seconds, anonymous RSS MiB, main thread's V8 heap MiB] */
        workerAnonRssAndHeapMiBEvery5s: heapSeries.filter(
          (_, i) => heapSeries.length <= 200 || i % Math.ceil(heapSeries.length / 200) === 0,
        ),
        historyEvents: events,
        historyEventsPer1000Objects: Number(((events / N) * 1000).toFixed(1)),
        historyEventsPerChunk: Number((events / chunks).toFixed(2)),
        historyEventsByType: Object.fromEntries(Object.entries(byType).sort((a, b) => b[1] - a[1])),
        runs,
        continueAsNew: result.runs - 1,
        counters: result.counters,
      },
      ratioWorkflowToRaw: Number((N / seconds / (raw.objects / raw.seconds)).toFixed(3)),
      ratioWorkflowToRawFreshProcess: Number((N / seconds / (cold.objects / cold.seconds)).toFixed(3)),
      unrelatedClient: {
        raw: client.report('raw'),
        idle,
        during,
        after: afterIdle,
        p99Ratio: Number((during.p99ms / idle.p99ms).toFixed(2)),
        p99RatioToAfter: Number((during.p99ms / afterIdle.p99ms).toFixed(2)),
        besideWriter: besideWriter && {
          ...besideWriter,
          writerQps: writerRate,
          writerAfterMigration: writerAfter,
          writerWrites: writer.writes,
          writerErrors: writer.errors,
          p99RatioToIdle: Number((besideWriter.p99ms / idle.p99ms).toFixed(2)),
          p99RatioToAfter: Number((besideWriter.p99ms / afterIdle.p99ms).toFixed(2)),
        },
        p99RatioMigrationToWriter: besideWriter ? Number((during.p99ms / besideWriter.p99ms).toFixed(2)) : undefined,
      },
      etcd: { afterRaw: SAMPLE, afterMigration: afterMigration.byApiVersion, dbMiB: Number((await etcdDbMiB(etcd)).toFixed(0)) },
    };
    const outDir = path.join(__dirname, 'results');
    mkdirSync(outDir, { recursive: true });
    const out = path.join(outDir, `bench-${figures.date.replace(/[:.]/g, '-')}.json`);
    writeFileSync(out, JSON.stringify(figures, null, 2) + '\n');
    const types = Object.entries(figures.workflow.historyEventsByType)
      .map(([t, n]) => `${t} ${n}`)
      .join(', ');
    process.stdout.write(
      [
        `objects                      ${N} (${viaEtcd ? 'seeded into etcd' : 'created through the API'}; chunk ${CHUNK}, concurrency ${CONC}, budget ${BUDGET}, adaptive concurrency ${ADAPTIVE ? 'on' : 'off'}, ${figures.apiservers} API servers, watch cache ${WATCH_CACHE})`,
        `raw ceiling                  ${figures.raw.objectsPerSecond} objects/s  p50 ${figures.raw.p50ms} ms  p99 ${figures.raw.p99ms} ms${raw.objects < N ? ` (on the first ${raw.objects} objects)` : ''}`,
        `migration workflow           ${figures.workflow.objectsPerSecond} objects/s  p50 ${figures.workflow.p50ms} ms  p99 ${figures.workflow.p99ms} ms (histogram)  ${result.phase} in ${figures.workflow.seconds} s`,
        `raw loop, fresh process      ${figures.rawFreshProcess.objectsPerSecond} objects/s  p50 ${figures.rawFreshProcess.p50ms} ms  p99 ${figures.rawFreshProcess.p99ms} ms; ${figures.rawFreshProcess.cpuSecondsPer1000} CPU s per 1000 (as cold as the worker)`,
        `workflow / raw               ${figures.ratioWorkflowToRaw} (the bench's process); ${figures.ratioWorkflowToRawFreshProcess} (the fresh process)`,
        `CPU s per 1000 objects       worker ${figures.workflow.workerCpuSecondsPer1000} + Temporal server ${figures.workflow.temporalCpuSecondsPer1000} (the worker's start, ${figures.workflow.workerStartSeconds} s, not counted); raw loop's process ${figures.raw.cpuSecondsPer1000}`,
        `  of the control plane       API servers ${planeCpu.apiservers} + etcd ${planeCpu.etcd}; during the raw loop ${rawPlaneCpu.apiservers} + ${rawPlaneCpu.etcd}`,
        `worker peak RSS              ${figures.workflow.workerPeakRssMiB} MiB (${figures.worker}); an empty Temporal worker ${emptyPeakMiB} MiB: +${figures.workflow.workerOverEmptyMiB} MiB; sampled every 250 ms, highest ${rssPeak.mib} MiB at ${rssPeak.atSeconds} s`,
        `history events / 1000 obj    ${figures.workflow.historyEventsPer1000Objects} (${events} events in ${runs} runs, ${figures.workflow.historyEventsPerChunk} per chunk; ${figures.workflow.continueAsNew} continue-as-new)`,
        `  by type                    ${types}`,
        `unrelated client p99         idle ${idle.p99ms} ms (${idle.requests} requests), during ${during.p99ms} ms (${during.requests}, ${during.errors} errors): x${figures.unrelatedClient.p99Ratio}; idle after ${afterIdle.p99ms} ms (${afterIdle.requests}): x${figures.unrelatedClient.p99RatioToAfter}`,
        `  by verb (GET/LIST/PUT p99) idle ${verbs(idle)}; during ${verbs(during)}; after ${verbs(afterIdle)}`,
        ...(besideWriter
          ? [
              `beside a plain writer       at ${writerRate}/s (${writer.writes} writes, ${writer.errors} errors): unrelated p99 ${besideWriter.p99ms} ms (${verbs(besideWriter)}); migration / plain writer: x${figures.unrelatedClient.p99RatioMigrationToWriter}`,
            ]
          : []),
        `etcd after migration         ${JSON.stringify(afterMigration.byApiVersion)}`,
        `written                      ${out}`,
        '',
      ].join('\n'),
    );
  } finally {
    clearInterval(sampler);
    clearInterval(peakSampler);
    await client.stop();
    worker.kill('SIGTERM');
    await migrator.close();
    clientKube.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  // Cleanup has run (finally blocks); keep-alive sockets of a half-done phase must not hold the process.
  process.exit(1);
});
