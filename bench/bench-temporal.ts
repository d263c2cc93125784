/**
 * `npm run bench:temporal [-- --objects N --chunk-size N --concurrency N --temporal both|dev|server --apiservers N
 *   --seed-etcd-above N --note TEXT]`
 *
 * The same migration on the Temporal dev server and on temporal-server with
 * PostgreSQL, in one run: for each (one plane at a time, each fresh, taken
 * down after), N objects of a CRD stored at v1, the storage version moved to
 * v2, and one migration by an `svm worker` child process (compiled, as the
 * image runs it, with the image's env). Printed and written to
 * bench/results/bench-temporal-<time>.json:
 *   - objects per second and wall time of the migration;
 *   - workflow history events per 1,000 objects (every run, continue-as-new
 *     included);
 *   - the CPU seconds the Temporal side used during the migration, and its
 *     peak memory: the dev server process (SQLite and the UI inside it); on
 *     temporal-server, the server process and PostgreSQL (the postmaster and
 *     every backend; exited ones through the postmaster's cutime) apart, and
 *     the UI server beside them. CPU from /proc/PID/stat (utime + stime,
 *     children's included), memory sampled every second: the server's RSS,
 *     PostgreSQL's as the sum of its processes' PSS (shared buffers counted
 *     once), peak over the migration;
 *   - the ratio between the two.
 * etcd and the workflow history judge each migration (src/dev/migration-judge.ts):
 * nothing lost, the success recorded once, the recorded pass whole. A verdict
 * with problems makes the bench fail.
 * Objects are created through the API up to --seed-etcd-above (20,000), and
 * above written straight into etcd as the API server stores them
 * (bench/lib/seed-etcd.ts). Not part of `npm test`: measurements, not
 * assertions (but the judge's).
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { defaultMigrationOptions, Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { etcdPrefix } from '../src/dev/etcd-truth';
import { beforeMigration, judgeMigration, verdictProblems, type Verdict } from '../src/dev/migration-judge';
import { down, readEnv, readState, up, type PlaneState, type TemporalMode } from '../src/dev/plane';
import { applyCrd, createObjects, ensureNamespace, testCrd } from '../src/dev/test-crd';
import { KubeClient } from '../src/kube/client';
import versions from '../tools/versions.json';
import { imageEnv } from './lib/image-env';
import { seedIntoEtcd } from './lib/seed-etcd';
import { compiledWorkerTree } from './lib/worker-tree';
import { tree, treeCpuSeconds } from './lib/proc';
import { spawnWorker } from './lib/worker-process';

const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '10000' },
    'chunk-size': { type: 'string', default: String(defaultMigrationOptions.chunkSize) },
    concurrency: { type: 'string', default: String(defaultMigrationOptions.concurrency) },
    temporal: { type: 'string', default: 'both' },
    apiservers: { type: 'string', default: '2' },
    'seed-etcd-above': { type: 'string', default: '20000' },
    note: { type: 'string', default: 'nothing else of this run' },
  },
});
const N = Number(values.objects);
const CHUNK = Number(values['chunk-size']);
const CONC = Number(values.concurrency);
const APISERVERS = Number(values.apiservers);
const SEED_ETCD_ABOVE = Number(values['seed-etcd-above']);
for (const [k, v] of [
  ['--objects', N],
  ['--chunk-size', CHUNK],
  ['--concurrency', CONC],
  ['--apiservers', APISERVERS],
] as const)
  if (!Number.isInteger(v) || v < 1) throw new Error(`${k} must be a positive whole number`);
const MODES: TemporalMode[] =
  values.temporal === 'both'
    ? ['dev', 'server']
    : values.temporal === 'dev' || values.temporal === 'server'
      ? [values.temporal]
      : (() => {
          throw new Error('--temporal must be both, dev or server');
        })();

const log = (s: string) => process.stderr.write(`[bench] ${new Date().toISOString().slice(11, 19)} ${s}\n`);
// ------------------------------------------------------------ /proc (bench/lib/proc.ts)

function kib(pid: number, file: 'status' | 'smaps_rollup', field: string): number {
  try {
    const m = readFileSync(`/proc/${pid}/${file}`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

interface Group {
  name: string;
  root: number;
  /** 'rss': the root's RSS; 'pss': the sum of PSS over the tree (shared memory counted once). */
  memory: 'rss' | 'pss';
}

interface GroupFigures {
  cpuSeconds: number;
  peakMemoryMiB: number;
  processes: number;
}

/** Samples the groups every second from now until stop(); returns CPU used and peak memory of each. */
function sampler(groups: Group[]): { stop(): Record<string, GroupFigures> } {
  const start = new Map(groups.map((g) => [g.name, treeCpuSeconds(g.root)]));
  const peak = new Map(groups.map((g) => [g.name, 0]));
  const procs = new Map(groups.map((g) => [g.name, 0]));
  const sample = () => {
    for (const g of groups) {
      const t = tree(g.root);
      const kb = g.memory === 'rss' ? kib(g.root, 'status', 'VmRSS') : t.reduce((n, p) => n + kib(p.pid, 'smaps_rollup', 'Pss'), 0);
      peak.set(g.name, Math.max(peak.get(g.name)!, kb));
      procs.set(g.name, Math.max(procs.get(g.name)!, t.length));
    }
  };
  sample();
  const timer = setInterval(sample, 1000);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return Object.fromEntries(
        groups.map((g) => [
          g.name,
          {
            cpuSeconds: Number((treeCpuSeconds(g.root) - start.get(g.name)!).toFixed(1)),
            peakMemoryMiB: Number((peak.get(g.name)! / 1024).toFixed(0)),
            processes: procs.get(g.name)!,
          },
        ]),
      );
    },
  };
}

function temporalGroups(state: PlaneState): Group[] {
  if (state.temporalMode !== 'server') return [{ name: 'dev server', root: state.temporal.pid, memory: 'rss' }];
  const ts = state.temporalServer!;
  return [
    { name: 'temporal-server', root: state.temporal.pid, memory: 'rss' },
    { name: 'PostgreSQL', root: ts.postgres.pid, memory: 'pss' },
    { name: 'UI server', root: ts.ui.pid, memory: 'rss' },
  ];
}

// ------------------------------------------------------------ one plane, one migration

interface Run {
  temporal: TemporalMode;
  version: string;
  seconds: number;
  objectsPerSecond: number;
  historyEvents: number;
  historyEventsPer1000Objects: number;
  runs: number;
  chunks: number;
  resources: Record<string, GroupFigures>;
  /** The Temporal side in all: the dev server, or temporal-server + PostgreSQL (the UI server apart). */
  temporalCpuSeconds: number;
  temporalPeakMemoryMiB: number;
  verdict: Verdict;
  problems: string[];
  planeUpSeconds: number;
  seedSeconds: number;
}

async function runOn(mode: TemporalMode, workerBin: string): Promise<Run> {
  const dir = mkdtempSync(path.join(tmpdir(), `svm-bench-${mode}-`));
  const t0 = performance.now();
  log(`${mode}: bringing a plane up in ${dir} (${APISERVERS} API servers)`);
  await up({ dir, temporal: mode, apiservers: APISERVERS, log: () => undefined });
  const planeUpSeconds = (performance.now() - t0) / 1000;
  const env = readEnv(dir);
  const state = readState(dir)!;
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG, { maxSockets: CONC * 2 });
  let worker: ChildProcess | undefined;
  let migrator: Migrator | undefined;
  try {
    await installCrds(kube);
    const crd = testCrd(`bench${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
    await applyCrd(kube, crd, 'v1');
    const tSeed = performance.now();
    if (N > SEED_ETCD_ABOVE) {
      log(`${mode}: seeding ${N} objects at v1 straight into etcd (not measured)`);
      await ensureNamespace(kube, 'bench');
      await seedIntoEtcd(env.ETCD_ENDPOINTS!, crd, N, { namespace: 'bench', prefix: 'b', log });
    } else {
      log(`${mode}: creating ${N} objects at v1 through the API (not measured)`);
      await createObjects(kube, crd, 'v1', N, { namespace: 'bench', prefix: 'b' });
    }
    const seedSeconds = (performance.now() - tSeed) / 1000;
    for (let i = 0; ; i++) {
      const first = await kube.getJson<{ items: unknown[]; metadata: { remainingItemCount?: number } }>(
        `/apis/${crd.group}/v1/${crd.plural}`,
        { limit: 500 },
      );
      if (first.items.length + (first.metadata.remainingItemCount ?? 0) === N) break;
      if (i >= 120) throw new Error(`the API servers do not list ${N} objects`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const before = await beforeMigration(env.ETCD_ENDPOINTS!, etcdPrefix({ group: crd.group, resource: crd.plural, custom: true }));
    await applyCrd(kube, crd, 'v2');

    const taskQueue = `bench-${Date.now().toString(36)}`;
    worker = spawnWorker(workerBin, env, taskQueue, { SVM_QPS: '0', ...imageEnv() });
    migrator = await Migrator.connect({ temporal: { address: env.TEMPORAL_ADDRESS!, taskQueue }, kubeconfig: env.KUBECONFIG });
    log(`${mode}: migrating ${N} objects v1 -> v2 (chunk ${CHUNK}, concurrency ${CONC}, qps unlimited)`);
    const sampling = sampler(temporalGroups(state));
    const tm = performance.now();
    const h = await migrator.start(crd.name, { chunkSize: CHUNK, concurrency: CONC });
    const result = await h.wait();
    const seconds = (performance.now() - tm) / 1000;
    const resources = sampling.stop();
    log(`${mode}: ${result.phase} in ${seconds.toFixed(1)} s; judging from etcd and the history`);
    const verdict = await judgeMigration({
      etcd: env.ETCD_ENDPOINTS!,
      client: migrator.client,
      workflowId: h.workflowId,
      before,
      targetApiVersion: `${crd.group}/v2`,
    });
    const problems = result.phase === 'Succeeded' ? verdictProblems(verdict, N, `${crd.group}/v2`) : [`${result.phase}: ${result.message}`];
    const side = mode === 'dev' ? ['dev server'] : ['temporal-server', 'PostgreSQL'];
    return {
      temporal: mode,
      version:
        mode === 'dev' ? `Temporal CLI ${versions.temporal} dev server` : `temporal-server ${versions.temporalServer} + PostgreSQL 15`,
      seconds: Number(seconds.toFixed(1)),
      objectsPerSecond: Math.round(N / seconds),
      historyEvents: verdict.historyEvents,
      historyEventsPer1000Objects: Number(((verdict.historyEvents / N) * 1000).toFixed(1)),
      runs: verdict.runs,
      chunks: verdict.chunksAllRuns,
      resources,
      temporalCpuSeconds: Number(side.reduce((n, s) => n + resources[s]!.cpuSeconds, 0).toFixed(1)),
      temporalPeakMemoryMiB: side.reduce((n, s) => n + resources[s]!.peakMemoryMiB, 0),
      verdict,
      problems,
      planeUpSeconds: Number(planeUpSeconds.toFixed(1)),
      seedSeconds: Number(seedSeconds.toFixed(1)),
    };
  } finally {
    worker?.kill('SIGTERM');
    await migrator?.close();
    kube.close();
    log(`${mode}: taking the plane down`);
    await down(dir, () => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const revision = (() => {
    try {
      const rev = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: __dirname, encoding: 'utf8' }).trim();
      const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: __dirname, encoding: 'utf8' }).trim();
      return dirty ? `${rev} + uncommitted changes` : rev;
    } catch {
      return 'unknown';
    }
  })();
  const workerTree = compiledWorkerTree(path.join(__dirname, '..'), log);
  const runs: Run[] = [];
  try {
    for (const mode of MODES) runs.push(await runOn(mode, workerTree.bin));
  } finally {
    workerTree.dispose();
  }
  const dev = runs.find((r) => r.temporal === 'dev');
  const server = runs.find((r) => r.temporal === 'server');
  const ratio = (a: number, b: number) => Number((a / b).toFixed(2));
  const ratios =
    dev && server
      ? {
          objectsPerSecond: ratio(server.objectsPerSecond, dev.objectsPerSecond),
          historyEventsPer1000Objects: ratio(server.historyEventsPer1000Objects, dev.historyEventsPer1000Objects),
          cpuSeconds: ratio(server.temporalCpuSeconds, dev.temporalCpuSeconds),
          peakMemory: ratio(server.temporalPeakMemoryMiB, dev.temporalPeakMemoryMiB),
        }
      : undefined;
  const figures = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, memGiB: Math.round(totalmem() / 2 ** 30), note: values.note },
    revision,
    command: `npm run bench:temporal -- ${process.argv.slice(2).join(' ')}`.trim(),
    objects: N,
    chunkSize: CHUNK,
    concurrency: CONC,
    apiservers: APISERVERS,
    runs,
    ratioServerToDev: ratios,
  };
  const outDir = path.join(__dirname, 'results');
  mkdirSync(outDir, { recursive: true });
  const out = path.join(outDir, `bench-temporal-${figures.date.replace(/[:.]/g, '-')}.json`);
  writeFileSync(out, JSON.stringify(figures, null, 2) + '\n');
  const row = (label: string, f: (r: Run) => string) => `${label.padEnd(34)}${runs.map((r) => f(r).padEnd(44)).join('')}`;
  const res = (r: Run, name: string) => r.resources[name];
  process.stdout.write(
    [
      `${N} objects, chunk ${CHUNK}, concurrency ${CONC}, ${APISERVERS} API servers; revision ${revision}`,
      row('', (r) => r.version),
      row('migration', (r) => `${r.objectsPerSecond} objects/s, ${r.seconds} s`),
      row(
        'history events / 1000 objects',
        (r) => `${r.historyEventsPer1000Objects} (${r.historyEvents} in ${r.runs} runs, ${r.chunks} chunks)`,
      ),
      row('Temporal CPU during the migration', (r) =>
        r.temporal === 'dev'
          ? `${r.temporalCpuSeconds} s`
          : `${r.temporalCpuSeconds} s (server ${res(r, 'temporal-server')!.cpuSeconds} + PostgreSQL ${res(r, 'PostgreSQL')!.cpuSeconds}; UI ${res(r, 'UI server')!.cpuSeconds})`,
      ),
      row('Temporal peak memory', (r) =>
        r.temporal === 'dev'
          ? `${r.temporalPeakMemoryMiB} MiB RSS (UI inside)`
          : `${r.temporalPeakMemoryMiB} MiB (server RSS ${res(r, 'temporal-server')!.peakMemoryMiB} + PostgreSQL PSS ${res(r, 'PostgreSQL')!.peakMemoryMiB} in ${res(r, 'PostgreSQL')!.processes} processes; UI ${res(r, 'UI server')!.peakMemoryMiB})`,
      ),
      row('judge (etcd, history)', (r) =>
        r.problems.length === 0
          ? `sound: ${r.verdict.keysAfter} keys at v2, recorded ${r.verdict.recordedSuccesses}x, pass of ${r.verdict.pass.chunks} chunks accounts ${r.verdict.pass.accounted}`
          : `PROBLEMS: ${r.problems.join('; ')}`,
      ),
      ...(ratios
        ? [
            `server / dev: objects/s x${ratios.objectsPerSecond}, history events x${ratios.historyEventsPer1000Objects}, CPU x${ratios.cpuSeconds}, peak memory x${ratios.peakMemory}`,
          ]
        : []),
      `written ${out}`,
      '',
    ].join('\n'),
  );
  if (runs.some((r) => r.problems.length > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
