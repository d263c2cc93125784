/**
 * `npm run bench:ratio [-- --objects 5000 --rounds 3 --chunk-size 2000 --concurrency 8 --warm --dir DIR --out DIR --note TEXT]`
 *
 * svm unthrottled against the raw loop, round after round on one plane, so that the ratio rests on more than
 * one pair: a single raw loop moved by 10-25 % from one run to the next minutes later on this 2-core machine
 * (docs/benchmarks.md), as much as the gap it is meant to measure. Each round:
 *   1. the raw loop (bench/lib/raw-loop.ts) in a fresh node process, compiled, in the worker's environment: a
 *      metadata-only list and the empty merge patch, --concurrency in flight, pages of --chunk-size, over every
 *      object, moving each to the other storage version;
 *   2. a fresh `svm worker` (compiled as the image runs it, SVM_QPS=0 and adaptive concurrency off: each
 *      migration's concurrency in flight, as the raw loop) migrating every object back, timed from the start
 *      of the workflow (once the worker answers /healthz) to its result; then the worker stops.
 * With --warm, each side's process first runs one unmeasured pass (the raw loop through the other version; the worker
 * a whole migration to it), the storage version is moved back, and the second pass is measured: both sides' code is
 * then as warm as a running worker's that has migrated before (the one-time cost of a process's start, its code's
 * compilation, is left out on both sides alike). Both sides start as cold as each other, do real etcd writes on every object (each moves them to a version they
 * are not in), and alternate (the raw loop first in odd rounds, svm first in even ones: each moves the objects both
 * ways as often), so a plane that slows down over the run slows both alike. etcd judges every
 * migration (every object in the version it moved them to). Prints each round, the medians, and where each side's CPU
 * went (its own process, the API servers, etcd, Temporal, the whole machine, per 1000 objects); writes
 * bench/results/ratio-<time>.json, or --out DIR/ratio-<date>.json (to commit). Not part of `npm test`.
 */
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { defaultDevDir, readEnv, readState, up } from '../src/dev/plane';
import { applyCrd, createObjects, ensureNamespace, testCrd } from '../src/dev/test-crd';
import { KubeClient } from '../src/kube/client';
import { imageEnv } from './lib/image-env';
import { compiledRawLoop, rawLoopInChild } from './lib/raw-loop';
import { planeCpu, planeCpuPer1000, treeCpuSeconds, type PlaneCpu } from './lib/proc';
import { seedIntoEtcd } from './lib/seed-etcd';
import { spawnWorker, waitForHealthz } from './lib/worker-process';
import { roundNumbers, roundOptions } from './lib/args';
import { compiledWorkerTree } from './lib/worker-tree';
import { median } from './lib/stats';
import { freePort } from '../src/dev/ports';

const { values } = parseArgs({
  options: {
    ...roundOptions,
    out: { type: 'string' },
    note: { type: 'string', default: 'nothing else ran' },
    warm: { type: 'boolean', default: false },
  },
});
const WARM = values.warm;
const [N, ROUNDS, CHUNK, CONC] = roundNumbers(values);
/** Above this many objects they are written straight into etcd (creating them through the API takes longer). */
const SEED_ETCD_ABOVE = 20_000;

const log = (s: string) => process.stderr.write(`[bench:ratio] ${new Date().toISOString().slice(11, 19)} ${s}\n`);
const other = (v: 'v1' | 'v2') => (v === 'v1' ? 'v2' : 'v1');

/** Where each side's CPU went, in CPU seconds per 1000 objects: its own process, the plane's parts, the whole machine. */
type CpuPer1000 = PlaneCpu & { process: number };

interface Round {
  raw: { objectsPerSecond: number; seconds: number; to: string; cpuPer1000: CpuPer1000 };
  svm: { objectsPerSecond: number; seconds: number; workerStartSeconds: number; to: string; cpuPer1000: CpuPer1000 };
  ratio: number;
}

async function main() {
  const dir = values.dir ?? defaultDevDir();
  await up({ dir, log });
  const env = readEnv(dir);
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG, { maxSockets: CONC * 2 });
  const tree = compiledWorkerTree(path.join(__dirname, '..'), log);
  const workerEnv = imageEnv();
  const crd = testCrd(`ratio${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
  const key = { group: crd.group, resource: crd.plural, custom: true };
  const rounds: Round[] = [];
  try {
    await installCrds(kube);
    await applyCrd(kube, crd, 'v1');
    await ensureNamespace(kube, 'bench');
    if (N > SEED_ETCD_ABOVE) {
      log(`seeding ${N} objects at v1 straight into etcd (not measured)`);
      await seedIntoEtcd(env.ETCD_ENDPOINTS!, crd, N, { namespace: 'bench', prefix: 'r', log });
    } else {
      log(`creating ${N} objects at v1 through the API (not measured)`);
      await createObjects(kube, crd, 'v1', N, { namespace: 'bench', prefix: 'r' });
    }
    let at: 'v1' | 'v2' = 'v1';
    for (let r = 1; r <= ROUNDS; r++) {
      /** The raw loop over every object, moving them to the other version. */
      const rawSide = async (): Promise<Round['raw']> => {
        let to: 'v1' | 'v2' = other(at);
        await applyCrd(kube, crd, to);
        let plane0 = planeCpu(readState(dir));
        const child = { compiled: compiledRawLoop(tree.bin, false), kubeconfig: env.KUBECONFIG!, env: workerEnv };
        const target = { group: crd.group, version: to, plural: crd.plural, kind: crd.kind, objects: N, chunk: CHUNK, concurrency: CONC };
        // Warm: through `to` unmeasured, back to `at` measured (the objects end where they were).
        const warmUp = async () => {
          [at, to] = [to, at];
          await applyCrd(kube, crd, to);
          plane0 = planeCpu(readState(dir));
        };
        const raw = WARM
          ? await rawLoopInChild(child, { ...target, version: at }, { version: to, then: warmUp })
          : await rawLoopInChild(child, target);
        if (raw.objects !== N) throw new Error(`round ${r}: the raw loop rewrote ${raw.objects} objects, not ${N}`);
        const cpu = { process: Number(((raw.cpuSeconds / N) * 1000).toFixed(2)), ...planeCpuPer1000(plane0, planeCpu(readState(dir)), N) };
        const rate = raw.objects / raw.seconds;
        log(`round ${r}: raw loop ${at} -> ${to}: ${rate.toFixed(0)} objects/s (${raw.seconds.toFixed(2)} s)`);
        log(`round ${r}: raw loop CPU s per 1000: ${cpuLine(cpu, 'its process')}`);
        at = to;
        return { objectsPerSecond: Math.round(rate), seconds: Number(raw.seconds.toFixed(2)), to, cpuPer1000: cpu };
      };
      /** A fresh worker migrating every object to the other version; etcd judges. */
      const svmSide = async (): Promise<Round['svm']> => {
        let to: 'v1' | 'v2' = other(at);
        await applyCrd(kube, crd, to);
        // Warm: a whole migration to `to` unmeasured, then back to `at` measured on the same worker.
        const warmUp = async () => {
          [at, to] = [to, at];
          await applyCrd(kube, crd, to);
        };
        const svm = await migrateWithFreshWorker(
          tree.bin,
          env,
          workerEnv,
          crd.name,
          () => planeCpu(readState(dir)),
          WARM ? warmUp : undefined,
        );
        const judged = (await storedVersions(env.ETCD_ENDPOINTS!, key)).byApiVersion;
        if (judged[`${crd.group}/${to}`] !== N)
          throw new Error(`round ${r}: etcd after the migration holds ${JSON.stringify(judged)}, not ${N} at ${to}`);
        const rate = N / svm.seconds;
        log(
          `round ${r}: svm ${at} -> ${to}: ${rate.toFixed(0)} objects/s (${svm.seconds.toFixed(2)} s; worker ready in ${svm.workerStartSeconds.toFixed(1)} s, not counted); etcd: ${N} at ${to}`,
        );
        const cpu = { process: Number(((svm.workerCpuSeconds / N) * 1000).toFixed(2)), ...planeCpuPer1000(svm.plane0, svm.plane1, N) };
        log(`round ${r}: svm CPU s per 1000: ${cpuLine(cpu, 'the worker')}`);
        at = to;
        const workerStartSeconds = Number(svm.workerStartSeconds.toFixed(1));
        return { objectsPerSecond: Math.round(rate), seconds: Number(svm.seconds.toFixed(2)), workerStartSeconds, to, cpuPer1000: cpu };
      };
      // Odd rounds the raw loop first, even rounds svm first: each side moves the objects both ways and runs
      // first as often (one direction or position may cost the API servers more than the other).
      const rawFirst = r % 2 === 1;
      const first = rawFirst ? await rawSide() : await svmSide();
      const second = rawFirst ? await svmSide() : await rawSide();
      const [raw, svm] = (rawFirst ? [first, second] : [second, first]) as [Round['raw'], Round['svm']];
      rounds.push({ raw, svm, ratio: Number((raw.seconds / svm.seconds).toFixed(3)) });
    }
  } finally {
    tree.dispose();
    kube.close();
  }
  const rawMedian = Math.round(median(rounds.map((r) => r.raw.objectsPerSecond)));
  const svmMedian = Math.round(median(rounds.map((r) => r.svm.objectsPerSecond)));
  const figures = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, memGiB: Math.round(totalmem() / 2 ** 30), note: values.note },
    objects: N,
    rounds: ROUNDS,
    chunkSize: CHUNK,
    concurrency: CONC,
    apiservers: Number(env.APISERVER_COUNT ?? 2),
    warm: WARM,
    svm: `unthrottled (SVM_QPS=0, SVM_ADAPTIVE_CONCURRENCY=false), a fresh compiled worker each round${WARM ? ', measured on its second migration' : ''}, the image environment`,
    raw: `metadata-only list + empty merge patch, a fresh compiled process each round${WARM ? ', measured on its second pass' : ''}, the image environment`,
    perRound: rounds,
    medianRawObjectsPerSecond: rawMedian,
    medianSvmObjectsPerSecond: svmMedian,
    ratioOfMedians: Number((svmMedian / rawMedian).toFixed(3)),
    medianOfRoundRatios: Number(median(rounds.map((r) => r.ratio)).toFixed(3)),
    medianCpuPer1000: { raw: medianCpu(rounds.map((r) => r.raw.cpuPer1000)), svm: medianCpu(rounds.map((r) => r.svm.cpuPer1000)) },
  };
  const outDir = values.out ?? path.join(__dirname, 'results');
  mkdirSync(outDir, { recursive: true });
  let out = path.join(outDir, `ratio-${values.out ? figures.date.slice(0, 10) : figures.date.replace(/[:.]/g, '-')}.json`);
  for (let i = 2; values.out && existsSync(out); i++) out = path.join(outDir, `ratio-${figures.date.slice(0, 10)}-${i}.json`);
  writeFileSync(out, JSON.stringify(figures, null, 2) + '\n');
  process.stdout.write(
    [
      `objects               ${N} per round, ${ROUNDS} rounds, chunk ${CHUNK}, concurrency ${CONC}, ${figures.apiservers} API servers${WARM ? ', warm (each side measured on its second pass)' : ''}`,
      ...rounds.map(
        (r, i) =>
          `round ${i + 1}               raw ${r.raw.objectsPerSecond} objects/s, svm ${r.svm.objectsPerSecond} objects/s: ${r.ratio}`,
      ),
      `median                raw ${rawMedian} objects/s, svm ${svmMedian} objects/s: svm / raw ${figures.ratioOfMedians} (median of the rounds' ratios ${figures.medianOfRoundRatios})`,
      `CPU s per 1000, raw   ${cpuLine(figures.medianCpuPer1000.raw, 'its process')} (medians)`,
      `CPU s per 1000, svm   ${cpuLine(figures.medianCpuPer1000.svm, 'the worker')} (medians)`,
      `written               ${out}`,
      '',
    ].join('\n'),
  );
}

/** Each part's median over the rounds. */
function medianCpu(xs: CpuPer1000[]): CpuPer1000 {
  const m = (k: keyof CpuPer1000) => Number(median(xs.map((x) => x[k])).toFixed(2));
  return { process: m('process'), apiservers: m('apiservers'), etcd: m('etcd'), temporal: m('temporal'), machine: m('machine') };
}

const cpuLine = (c: CpuPer1000, own: string) =>
  `${own} ${c.process}, API servers ${c.apiservers}, etcd ${c.etcd}, Temporal ${c.temporal}, the whole machine ${c.machine}`;

/**
 * Starts a fresh worker, migrates the resource once (timed from the start to the result), stops the worker. With
 * warmUp: a first migration unmeasured, then warmUp() (the bench moves the storage version back), then the measured one.
 */
async function migrateWithFreshWorker(
  bin: string,
  env: Record<string, string>,
  workerEnv: Record<string, string>,
  resource: string,
  plane: () => PlaneCpu,
  warmUp?: () => Promise<void>,
): Promise<{ seconds: number; workerStartSeconds: number; workerCpuSeconds: number; plane0: PlaneCpu; plane1: PlaneCpu }> {
  const taskQueue = `ratio-${Date.now().toString(36)}`;
  // A port free now (a random one could be in use: once the worker could not listen, EADDRINUSE).
  const metricsPort = await freePort();
  const worker = spawnWorker(bin, env, taskQueue, {
    SVM_QPS: '0',
    SVM_ADAPTIVE_CONCURRENCY: 'false',
    SVM_METRICS_PORT: String(metricsPort),
    ...workerEnv,
  });
  const migrator = await Migrator.connect({ temporal: { address: env.TEMPORAL_ADDRESS!, taskQueue }, kubeconfig: env.KUBECONFIG });
  try {
    const spawned = performance.now();
    await waitForHealthz(metricsPort, worker);
    const workerStartSeconds = (performance.now() - spawned) / 1000;
    if (warmUp) {
      const first = await (await migrator.start(resource, { chunkSize: CHUNK, concurrency: CONC })).wait();
      if (first.phase !== 'Succeeded') throw new Error(`the warm-up migration ended ${first.phase}: ${first.message}`);
      await warmUp();
    }
    const plane0 = plane();
    const cpu0 = treeCpuSeconds(worker.pid);
    const t0 = performance.now();
    const h = await migrator.start(resource, { chunkSize: CHUNK, concurrency: CONC });
    const exited = new Promise<never>((_, reject) =>
      worker.once('exit', (code, signal) => reject(new Error(`the worker exited (${code ?? signal}) during the migration`))),
    );
    exited.catch(() => undefined);
    const result = await Promise.race([h.wait(), exited]);
    if (result.phase !== 'Succeeded') throw new Error(`the migration ended ${result.phase}: ${result.message}`);
    const seconds = (performance.now() - t0) / 1000;
    return { seconds, workerStartSeconds, workerCpuSeconds: treeCpuSeconds(worker.pid) - cpu0, plane0, plane1: plane() };
  } finally {
    await migrator.close();
    worker.kill('SIGTERM');
    await new Promise((r) => (worker.exitCode !== null || worker.signalCode !== null ? r(undefined) : worker.once('exit', r)));
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
