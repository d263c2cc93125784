/**
 * `npm run bench:memory [-- --objects 300 --payload-kib 675 --chunk-size 500 --concurrency 8 --page-mib N ... --tree label=DIR ... --host-env --tsx-worker]`
 *
 * Memory of the worker migrating large objects: creates N Secrets whose data
 * is --payload-kib of random bytes (675 KiB = ~900 KB of base64, the size of
 * a big Helm release Secret), so that one list page of --chunk-size would
 * be hundreds of MB, then, for each worker tree given (default: this
 * checkout) and each page size given (--page-mib, the migration's pageBytes;
 * default: the project's), runs that tree's worker as a child process with
 * the plane's environment, migrates `secrets` and reports the child's peak
 * RSS (VmHWM from /proc/PID/status) and objects per second, side by side,
 * and beside them the peak of an empty Temporal worker (bench/lib/empty-worker.ts)
 * run in the same environment against the same server after each tree's runs.
 * Each tree's worker runs as the image runs it: compiled with tsc, with its
 * prebuilt workflow and KubeConfig bundles (bench/lib/worker-tree.ts);
 * --tsx-worker runs its bin/svm.js as checked out instead. The workers get
 * the environment the image sets (the runtime stage's ENV lines of this
 * checkout's Dockerfile: NODE_OPTIONS and glibc's MALLOC_* settings) unless --host-env
 * is given.
 *
 * To compare with an older commit in one run, extract it beside this one
 * and pass both trees:
 *   mkdir /tmp/svm-before && git archive <commit> | tar -x -C /tmp/svm-before \
 *     && ln -s "$PWD/node_modules" /tmp/svm-before/node_modules \
 *     && (cd /tmp/svm-before && npm run --silent build:workflows)
 *   npm run bench:memory -- --tree before=/tmp/svm-before --tree after=.
 * Figures go to bench/results/memory-<time>.json. Measurements, not
 * assertions: not part of `npm test`. The Secrets are deleted at the end.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { defaultMigrationOptions, Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { defaultDevDir, readEnv, readState, up } from '../src/dev/plane';
import { KubeClient } from '../src/kube/client';
import { ensureNamespace, parallel } from '../src/dev/test-crd';
import { imageEnv } from './lib/image-env';
import { compiledWorkerTree } from './lib/worker-tree';
import { compiledEmptyWorker, emptyWorkerPeakRss } from './lib/empty-worker';
import { spawnWorker } from './lib/worker-process';
import { positiveWholes } from './lib/args';

const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '300' },
    'payload-kib': { type: 'string', default: '675' },
    'chunk-size': { type: 'string', default: '500' },
    concurrency: { type: 'string', default: '8' },
    tree: { type: 'string', multiple: true },
    'page-mib': { type: 'string', multiple: true },
    'tsx-worker': { type: 'boolean', default: false },
    dir: { type: 'string' },
    'host-env': { type: 'boolean', default: false },
    // The worker's rewrite: the empty merge patch on metadata-only lists (svm's default) and/or the PUT as listed
    // (SVM_REWRITE_METHOD=put, the path kept for servers that refuse the patch), side by side.
    rewrite: { type: 'string', multiple: true },
  },
});
const [N, PAYLOAD_KIB, CHUNK, CONC] = positiveWholes(values, ['objects', 'payload-kib', 'chunk-size', 'concurrency']) as [
  number,
  number,
  number,
  number,
];
const PAYLOAD = PAYLOAD_KIB * 1024;
const PAGES_MIB = (values['page-mib']?.length ? values['page-mib'] : [String(defaultMigrationOptions.pageBytes / 2 ** 20)]).map(Number);
for (const p of PAGES_MIB)
  if (!Number.isInteger(p) || p < 1 || p > 1024) throw new Error('--page-mib must be a whole number from 1 to 1024');
const REWRITES = (values.rewrite?.length ? values.rewrite : ['patch']).map((r) => {
  if (r !== 'patch' && r !== 'put') throw new Error('--rewrite must be patch or put');
  return r;
});
const trees = (values.tree?.length ? values.tree : [`this=${path.join(__dirname, '..')}`]).map((t) => {
  const [label, dir] = t.includes('=') ? [t.slice(0, t.indexOf('=')), t.slice(t.indexOf('=') + 1)] : [path.basename(t), t];
  const root = path.resolve(dir!);
  if (!existsSync(path.join(root, 'bin', 'svm.js'))) throw new Error(`--tree ${t}: no ${path.join(root, 'bin', 'svm.js')}`);
  return { label: label!, root };
});

const log = (s: string) => process.stderr.write(`[bench:memory] ${s}\n`);

const WORKER_ENV = values['host-env'] ? {} : imageEnv();
const vmHwmMiB = (pid: number) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/)![1]) / 1024;

interface Run {
  tree: string;
  rewrite: string;
  pageMiB: number;
  phase: string;
  seconds: number;
  objectsPerSecond: number;
  /** VmHWM of the worker once it polls, before any migration. */
  idlePeakRssMiB: number;
  peakRssMiB: number;
  /** The peak of an empty Temporal worker (bench/lib/empty-worker.ts) run after this tree's migrations, same environment. */
  emptyWorkerPeakRssMiB?: number;
  /** peakRssMiB over it: what svm's worker costs beyond the SDK's floor (issue 30: at most 25 MiB). */
  overEmptyMiB?: number;
  migrated: number;
  failed: number;
  /** CPU seconds (user + system) during the migration: the worker, and every API server of the plane together. */
  workerCpuSeconds: number;
  apiserverCpuSeconds: number;
}

/** CPU seconds (utime + stime) of a process so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function runWorker(
  tree: { label: string; bin: string },
  rewrite: string,
  pageMiB: number,
  env: Record<string, string>,
  apiserverPids: number[],
): Promise<Run> {
  const taskQueue = `benchmem-${Date.now().toString(36)}`;
  const worker = spawnWorker(tree.bin, env, taskQueue, { SVM_QPS: '0', SVM_REWRITE_METHOD: rewrite, ...WORKER_ENV });
  const migrator = await Migrator.connect({ temporal: { address: env.TEMPORAL_ADDRESS!, taskQueue }, kubeconfig: env.KUBECONFIG });
  try {
    // Idle: the worker has started (bundled or loaded its workflows) when its peak RSS stops moving.
    let idle = 0;
    for (let stable = 0; stable < 5;) {
      await new Promise((r) => setTimeout(r, 1000));
      const now = vmHwmMiB(worker.pid!);
      stable = now === idle ? stable + 1 : 0;
      idle = now;
    }
    const apiCpu = () => apiserverPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
    const cpu0 = { worker: cpuSeconds(worker.pid!), api: apiCpu() };
    const t0 = performance.now();
    const h = await migrator.start('secrets', { chunkSize: CHUNK, concurrency: CONC, pageBytes: pageMiB * 2 ** 20 });
    const result = await h.wait();
    const seconds = (performance.now() - t0) / 1000;
    return {
      tree: tree.label,
      rewrite,
      workerCpuSeconds: Number((cpuSeconds(worker.pid!) - cpu0.worker).toFixed(1)),
      apiserverCpuSeconds: Number((apiCpu() - cpu0.api).toFixed(1)),
      pageMiB,
      phase: result.phase,
      seconds: Number(seconds.toFixed(1)),
      objectsPerSecond: Number((result.counters.migrated / seconds).toFixed(1)),
      idlePeakRssMiB: Number(idle.toFixed(1)),
      peakRssMiB: Number(vmHwmMiB(worker.pid!).toFixed(1)),
      migrated: result.counters.migrated,
      failed: result.counters.failed,
    };
  } finally {
    worker.kill('SIGTERM');
    await migrator.close();
  }
}

async function main() {
  const dir = values.dir ?? defaultDevDir();
  if (!existsSync(path.join(dir, 'env'))) await up({ dir, log });
  const env = readEnv(dir) as Record<string, string>;
  const apiserverPids = (readState(dir)?.apiservers ?? []).map((a) => a.pid);
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG);
  await installCrds(kube);
  const ns = `benchmem-${Date.now().toString(36)}`;
  await ensureNamespace(kube, ns);
  const runs: Run[] = [];
  try {
    log(
      `creating ${N} Secrets of ${PAYLOAD / 1024} KiB (base64 ${((Math.ceil(PAYLOAD / 3) * 4) / 1024).toFixed(0)} KiB) in ${ns} (not measured)`,
    );
    const blob = randomBytes(PAYLOAD).toString('base64');
    await parallel(N, 4, async (i) => {
      await kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: JSON.stringify({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `s-${i}` },
          type: 'helm.sh/release.v1',
          data: { release: blob, i: Buffer.from(String(i)).toString('base64') },
        }),
      });
    });
    for (const t of trees) {
      const built = values['tsx-worker'] ? { bin: path.join(t.root, 'bin', 'svm.js'), dispose() {} } : compiledWorkerTree(t.root, log);
      try {
        for (const rewrite of REWRITES)
          for (const pageMiB of PAGES_MIB) {
            log(`migrating secrets with the worker of ${t.label} (${built.bin}), rewrite ${rewrite}, pages of ${pageMiB} MiB`);
            const run = await runWorker({ label: t.label, bin: built.bin }, rewrite, pageMiB, env, apiserverPids);
            log(`  ${JSON.stringify(run)}`);
            runs.push(run);
          }
        log(`an empty Temporal worker (one trivial workflow, no activities) polling for 15 s, in the worker's environment`);
        const emptyPeak = await emptyWorkerPeakRss({
          compiled: compiledEmptyWorker(built.bin, values['tsx-worker']),
          address: env.TEMPORAL_ADDRESS!,
          seconds: 15,
          env: WORKER_ENV,
        });
        log(`  peak RSS ${emptyPeak} MiB`);
        for (const r of runs.filter((r) => r.tree === t.label)) {
          r.emptyWorkerPeakRssMiB = emptyPeak;
          r.overEmptyMiB = Number((r.peakRssMiB - emptyPeak).toFixed(1));
        }
      } finally {
        built.dispose();
      }
    }
  } finally {
    await kube.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    await kube.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    kube.close();
  }
  const figures = {
    date: new Date().toISOString(),
    objects: N,
    payloadKiB: PAYLOAD / 1024,
    chunkMiB: Number(((Math.min(N, CHUNK) * Math.ceil(PAYLOAD / 3) * 4) / 2 ** 20).toFixed(0)),
    worker: values['tsx-worker'] ? 'bin/svm.js (tsx)' : 'compiled (tsc), prebuilt workflow and KubeConfig bundles',
    chunkSize: CHUNK,
    concurrency: CONC,
    workerEnv: WORKER_ENV,
    runs,
  };
  const outDir = path.join(__dirname, 'results');
  mkdirSync(outDir, { recursive: true });
  const out = path.join(outDir, `memory-${figures.date.replace(/[:.]/g, '-')}.json`);
  writeFileSync(out, JSON.stringify(figures, null, 2) + '\n');
  process.stdout.write(
    [
      `${N} Secrets of ${PAYLOAD / 1024} KiB, chunk ${CHUNK} (~${figures.chunkMiB} MiB of objects; pages cut to pageBytes), concurrency ${CONC}; worker ${figures.worker}`,
      `${'worker'.padEnd(12)} ${'rewrite'.padEnd(7)} ${'page'.padStart(8)} ${'peak RSS'.padStart(10)} ${'idle RSS'.padStart(10)} ${'empty'.padStart(10)} ${'over'.padStart(10)} ${'objects/s'.padStart(10)} ${'worker CPU'.padStart(10)} ${'API CPU'.padStart(9)}  phase`,
      ...runs.map(
        (r) =>
          `${r.tree.padEnd(12)} ${r.rewrite.padEnd(7)} ${`${r.pageMiB} MiB`.padStart(8)} ${`${r.peakRssMiB} MiB`.padStart(10)} ${`${r.idlePeakRssMiB} MiB`.padStart(10)} ${`${r.emptyWorkerPeakRssMiB} MiB`.padStart(10)} ${`+${r.overEmptyMiB} MiB`.padStart(10)} ${String(r.objectsPerSecond).padStart(10)} ${`${r.workerCpuSeconds} s`.padStart(10)} ${`${r.apiserverCpuSeconds} s`.padStart(9)}  ${r.phase} (migrated ${r.migrated}, failed ${r.failed})`,
      ),
      `written ${out}`,
      '',
    ].join('\n'),
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
