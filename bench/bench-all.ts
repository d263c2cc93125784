/**
 * `npm run bench [-- --objects N --ratio-rounds N --warm-ratio-rounds N --builtin-rounds N --dir DIR --out DIR --note TEXT]`
 *
 * The comparison a user makes first, in one run on one plane (the local control plane of `svm dev up`, with
 * kube-controller-manager running before either migrator starts), each part a bench of its own run in turn:
 *   1. svm at its defaults (SVM_QPS=auto, adaptive concurrency on) beside the raw loop: bench-migrate.ts.
 *      Also: the unrelated client's p99 during the migration and beside a plain writer at the migration's
 *      rate, the worker's peak RSS beside an empty Temporal worker's, history events per 1000 objects.
 *   2. svm unthrottled (SVM_QPS=0, adaptive concurrency off: each migration's concurrency in flight, as the
 *      raw loop) beside the raw loop again: bench-migrate.ts --unthrottled.
 *   3. svm unthrottled against the raw loop round after round, each a fresh process, alternating
 *      (--ratio-rounds, 3): bench-ratio.ts, the ratio of the medians (one pair alone moves with the plane).
 *      With --warm-ratio-rounds N (default 0: not run), the same again with each process measured on its second
 *      pass (bench-ratio.ts --warm): the cost per migration on a running worker, its code compiled.
 *   4. svm at its defaults against the GA built-in (kube-controller-manager's migrator), alternating:
 *      bench-builtin.ts, end to end and from each side's first rewrite.
 *   5. A campaign over 10 simulated clusters of a pool (bench-fleet.ts --clusters 10, the stand-in API; its own
 *      Temporal dev server): seconds, history events and actions per cluster, the pool's RSS, and what 1,000
 *      clusters would cost (an estimate). `npm run bench:fleet` runs the sizes that matter (100, 1,000).
 * Every part judges etcd (every object in the version the migration moved it to) and fails otherwise.
 * Prints one table and writes it, with every part's figures, to --out (docs/bench)/bench-<date>.json and
 * .md, meant to be committed: docs/benchmarks.md quotes that file. Not part of `npm test`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { positiveWholes } from './lib/args';
import type { FleetFigures } from './bench-fleet';

const root = path.join(__dirname, '..');
const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '5000' },
    'builtin-rounds': { type: 'string', default: '1' },
    'ratio-rounds': { type: 'string', default: '3' },
    'warm-ratio-rounds': { type: 'string', default: '0' },
    dir: { type: 'string' },
    out: { type: 'string', default: path.join(root, 'docs', 'bench') },
    note: { type: 'string', default: 'nothing else ran' },
  },
});
const [N, ROUNDS, RATIO_ROUNDS] = positiveWholes(values, ['objects', 'builtin-rounds', 'ratio-rounds']) as [number, number, number];
const WARM_ROUNDS = values['warm-ratio-rounds'] === '0' ? 0 : positiveWholes(values, ['warm-ratio-rounds'])[0]!;
const t00 = performance.now();
const log = (s: string) => process.stderr.write(`[bench ${((performance.now() - t00) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);

/** Runs one bench script to its end; returns its stdout (also shown). */
function part(script: string, args: string[]): Promise<string> {
  log(`${script} ${args.join(' ')}`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, script), ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      process.stdout.write(d);
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited with ${code}`))));
  });
}

/** The figures a part wrote (the file its `written` line names). */
const written = <T = MigrateFigures>(out: string): T => {
  const m = /^written\s+(\S+)$/m.exec(out);
  if (!m) throw new Error('the bench did not say where it wrote its figures');
  return JSON.parse(readFileSync(m[1]!, 'utf8')) as T;
};

interface MigrateFigures {
  objects: number;
  apiservers: number;
  budget: string;
  adaptiveConcurrency: boolean;
  raw: { objectsPerSecond: number };
  rawFreshProcess: { objectsPerSecond: number };
  workflow: {
    phase: string;
    objectsPerSecond: number;
    seconds: number;
    workerPeakRssMiB: number;
    emptyWorkerPeakRssMiB: number;
    workerOverEmptyMiB: number;
    historyEventsPer1000Objects: number;
  };
  ratioWorkflowToRaw: number;
  ratioWorkflowToRawFreshProcess: number;
  unrelatedClient: { idle: { p99ms: number }; during: { p99ms: number }; besideWriter?: { p99ms: number; writerQps: number } };
  etcd: { afterMigration: Record<string, number> };
}

interface RatioFigures {
  rounds: number;
  perRound: Array<{ raw: { objectsPerSecond: number }; svm: { objectsPerSecond: number }; ratio: number }>;
  medianRawObjectsPerSecond: number;
  medianSvmObjectsPerSecond: number;
  ratioOfMedians: number;
}

interface BuiltinSummary {
  median: Record<
    'built-in' | 'svm',
    { seconds: number; objectsPerSecond: number; firstRewriteSeconds: number; rewriteObjectsPerSecond: number }
  >;
  svmSettings: string;
}

async function main() {
  const dir = values.dir ? ['--dir', values.dir] : [];
  const common = ['--objects', String(N), ...dir, '--note', values.note];
  const defaults = written(await part('bench-migrate.ts', common));
  const unthrottled = written(await part('bench-migrate.ts', [...common, '--unthrottled']));
  const ratio = written<RatioFigures>(
    await part('bench-ratio.ts', ['--objects', String(N), '--rounds', String(RATIO_ROUNDS), ...dir, '--note', values.note]),
  );
  const warm =
    WARM_ROUNDS > 0
      ? written<RatioFigures>(
          await part('bench-ratio.ts', ['--objects', String(N), '--rounds', String(WARM_ROUNDS), '--warm', ...dir, '--note', values.note]),
        )
      : undefined;
  const scratch = path.join(root, 'bench', 'results');
  mkdirSync(scratch, { recursive: true });
  await part('bench-builtin.ts', ['--objects', String(N), '--rounds', String(ROUNDS), ...dir, '--out', scratch, '--note', values.note]);
  const builtin = JSON.parse(
    readFileSync(path.join(scratch, `builtin-${new Date().toISOString().slice(0, 10)}.json`), 'utf8'),
  ) as BuiltinSummary;
  // 5. A campaign (bench-fleet.ts) over 10 simulated clusters: cheap here; bench:fleet runs 100 and 1,000.
  const fleet = written<FleetFigures>(await part('bench-fleet.ts', ['--clusters', '10', '--out', scratch]));

  for (const [name, f] of [
    ['svm at its defaults', defaults],
    ['svm unthrottled', unthrottled],
  ] as const) {
    const versions = Object.keys(f.etcd.afterMigration);
    if (f.workflow.phase !== 'Succeeded' || versions.length !== 1)
      throw new Error(`${name}: ${f.workflow.phase}, etcd ${JSON.stringify(f.etcd.afterMigration)}`);
  }
  const b = builtin.median['built-in'];
  const s = builtin.median.svm;
  const r = (x: number) => Number(x.toFixed(2));
  const writer = defaults.unrelatedClient.besideWriter;
  const summary = {
    date: new Date().toISOString(),
    revision: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim(),
    machine: `${cpus().length} CPUs, ${Math.round(totalmem() / 2 ** 30)} GiB; ${values.note}`,
    objects: N,
    rows: {
      rawLoop: { objectsPerSecond: defaults.raw.objectsPerSecond, again: unthrottled.raw.objectsPerSecond },
      rawLoopFreshProcess: {
        objectsPerSecond: defaults.rawFreshProcess.objectsPerSecond,
        again: unthrottled.rawFreshProcess.objectsPerSecond,
      },
      svmDefaults: {
        objectsPerSecond: defaults.workflow.objectsPerSecond,
        ofRaw: defaults.ratioWorkflowToRaw,
        ofRawFreshProcess: defaults.ratioWorkflowToRawFreshProcess,
        unrelatedP99ms: defaults.unrelatedClient.during.p99ms,
        plainWriterP99ms: writer?.p99ms,
        plainWriterQps: writer?.writerQps,
        p99OverPlainWriter: writer ? r(defaults.unrelatedClient.during.p99ms / writer.p99ms) : undefined,
        workerPeakRssMiB: defaults.workflow.workerPeakRssMiB,
        emptyWorkerPeakRssMiB: defaults.workflow.emptyWorkerPeakRssMiB,
        overEmptyMiB: defaults.workflow.workerOverEmptyMiB,
        historyEventsPer1000Objects: defaults.workflow.historyEventsPer1000Objects,
      },
      svmUnthrottled: {
        objectsPerSecond: unthrottled.workflow.objectsPerSecond,
        ofRaw: unthrottled.ratioWorkflowToRaw,
        ofRawFreshProcess: unthrottled.ratioWorkflowToRawFreshProcess,
        workerPeakRssMiB: unthrottled.workflow.workerPeakRssMiB,
        historyEventsPer1000Objects: unthrottled.workflow.historyEventsPer1000Objects,
      },
      svmUnthrottledRounds: {
        rounds: ratio.rounds,
        medianRawObjectsPerSecond: ratio.medianRawObjectsPerSecond,
        medianSvmObjectsPerSecond: ratio.medianSvmObjectsPerSecond,
        ofRaw: ratio.ratioOfMedians,
        perRound: ratio.perRound.map((r) => [r.raw.objectsPerSecond, r.svm.objectsPerSecond]),
      },
      svmUnthrottledRoundsWarm: warm && {
        rounds: warm.rounds,
        medianRawObjectsPerSecond: warm.medianRawObjectsPerSecond,
        medianSvmObjectsPerSecond: warm.medianSvmObjectsPerSecond,
        ofRaw: warm.ratioOfMedians,
        perRound: warm.perRound.map((r) => [r.raw.objectsPerSecond, r.svm.objectsPerSecond]),
      },
      builtInVsSvmDefaults: {
        rounds: ROUNDS,
        builtIn: b,
        svm: s,
        endToEnd: r(b.seconds / s.seconds),
        afterFirstRewrite: r(s.rewriteObjectsPerSecond / b.rewriteObjectsPerSecond),
        svmSettings: builtin.svmSettings,
      },
    },
    parts: { defaults, unthrottled, ratio, warm, builtin, fleet },
  };
  const rows = summary.rows;
  // bench-<date>.json, or -2, -3 ... when a run of the same day is there: the docs cite each file.
  mkdirSync(values.out, { recursive: true });
  const day = summary.date.slice(0, 10);
  let name = `bench-${day}`;
  for (let i = 2; existsSync(path.join(values.out, `${name}.json`)); i++) name = `bench-${day}-${i}`;
  const md = `# svm, the raw loop and the built-in on one plane, ${day}

Written by \`npm run bench\` (bench/bench-all.ts) at revision ${summary.revision}; ${summary.machine}. ${N} objects per
migration, ${defaults.apiservers} API server${defaults.apiservers === 1 ? '' : 's'}; the figures of every part in [${name}.json](${name}.json).

| what | objects/s | against the raw loop (the bench's process / a fresh one) | notes |
| --- | --- | --- | --- |
| raw loop (metadata-only list + empty merge patch, 8 in flight, no Temporal), in the bench's process | ${rows.rawLoop.objectsPerSecond} (again before the unthrottled run: ${rows.rawLoop.again}) | 1 | its client code warm: the process created the objects |
| the same loop in a fresh process, right after (compiled, the worker's environment) | ${rows.rawLoopFreshProcess.objectsPerSecond} (again: ${rows.rawLoopFreshProcess.again}) | 1 | as cold as a fresh worker |
| svm at its defaults (SVM_QPS=auto) | ${rows.svmDefaults.objectsPerSecond} | ${rows.svmDefaults.ofRaw} / ${rows.svmDefaults.ofRawFreshProcess} | unrelated client p99 ${rows.svmDefaults.unrelatedP99ms} ms during it, ${rows.svmDefaults.plainWriterP99ms ?? '-'} ms beside a plain writer at its rate (${rows.svmDefaults.plainWriterQps ?? '-'}/s): x${rows.svmDefaults.p99OverPlainWriter ?? '-'} |
| svm unthrottled (SVM_QPS=0, adaptive concurrency off) | ${rows.svmUnthrottled.objectsPerSecond} | ${rows.svmUnthrottled.ofRaw} / ${rows.svmUnthrottled.ofRawFreshProcess} | |
| svm unthrottled against the raw loop, ${rows.svmUnthrottledRounds.rounds} rounds (each a fresh process, alternating): medians | ${rows.svmUnthrottledRounds.medianSvmObjectsPerSecond} (raw ${rows.svmUnthrottledRounds.medianRawObjectsPerSecond}) | **${rows.svmUnthrottledRounds.ofRaw}** | raw/svm per round: ${rows.svmUnthrottledRounds.perRound.map(([a, b]) => `${a}/${b}`).join(', ')} |
${
  rows.svmUnthrottledRoundsWarm
    ? `| the same, each process measured on its second pass (its code compiled, as a running worker's), ${rows.svmUnthrottledRoundsWarm.rounds} rounds: medians | ${rows.svmUnthrottledRoundsWarm.medianSvmObjectsPerSecond} (raw ${rows.svmUnthrottledRoundsWarm.medianRawObjectsPerSecond}) | **${rows.svmUnthrottledRoundsWarm.ofRaw}** | raw/svm per round: ${rows.svmUnthrottledRoundsWarm.perRound.map(([a, b]) => `${a}/${b}`).join(', ')} |\n`
    : ''
}| built-in (median of ${ROUNDS}), end to end / from its first rewrite | ${b.objectsPerSecond} / ${b.rewriteObjectsPerSecond} | | first rewrite after ${b.firstRewriteSeconds} s |
| svm at its defaults in the same pairs, end to end / from its first rewrite | ${s.objectsPerSecond} / ${s.rewriteObjectsPerSecond} | | first rewrite after ${s.firstRewriteSeconds} s; built-in / svm seconds: x${rows.builtInVsSvmDefaults.endToEnd}; svm / built-in rate after the first rewrite: x${rows.builtInVsSvmDefaults.afterFirstRewrite} |

| worker | value |
| --- | --- |
| svm worker peak RSS (defaults run) | ${rows.svmDefaults.workerPeakRssMiB} MiB |
| an empty Temporal TypeScript worker, same environment | ${rows.svmDefaults.emptyWorkerPeakRssMiB} MiB (svm +${rows.svmDefaults.overEmptyMiB} MiB) |
| history events per 1000 objects | ${rows.svmDefaults.historyEventsPer1000Objects} (defaults), ${rows.svmUnthrottled.historyEventsPer1000Objects} (unthrottled) |

| a campaign (bench-fleet.ts; ${fleet.objects} objects a cluster, simulated clusters of the stand-in API, one pool) | seconds | per cluster: seconds, events, actions | campaign's own events | pool RSS idle / peak |
| --- | --- | --- | --- | --- |
${fleet.rounds.map((r) => `| ${r.clusters} cluster(s) | ${r.seconds} | ${r.secondsPerCluster}, ${r.perCluster.events}, ${r.perCluster.actions} | ${r.campaign.events} | ${r.rss.idleMiB} / ${r.rss.peakMiB} MiB |`).join('\n')}

1,000 clusters, estimated from these (${fleet.thousandClusters.note}): ${fleet.thousandClusters.historyEvents} history events, ${fleet.thousandClusters.actions} actions, ${fleet.thousandClusters.campaignEvents} in the campaign's own history, ${fleet.thousandClusters.poolRssMiBPerCluster} MiB of pool RSS per cluster (${fleet.thousandClusters.poolsOf1GiB ?? '-'} pools of 1 GiB).
`;
  const file = path.join(values.out, `${name}.json`);
  writeFileSync(file, JSON.stringify(summary, null, 2) + '\n');
  writeFileSync(file.replace(/\.json$/, '.md'), md);
  process.stdout.write(`\n${md}\n`);
  log(`results: ${file} and .md (to commit)`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
