/**
 * `npm run bench:cli [-- --root DIR ... --runs 10 --unbundled --source --json FILE]`
 *
 * How fast `svm` starts: `svm version`, `svm status --help`, `svm migrate
 * --help`, `svm status` and `svm migrate secrets` (TEMPORAL_ADDRESS=127.0.0.1:1, each measured to its
 * first connection, where the probe ends it: the Temporal client would
 * otherwise retry for its 10 s connect deadline), each --runs times from each
 * checkout given (default: this one), beside node's bare start (`node -e
 * ''`). Prints the median wall time and CPU time (user + system, node's own
 * start included) of each. Runs are interleaved (a round of every command,
 * --runs times) so that a load that comes and goes touches all alike; the
 * load average is printed too. Compiled code is what bin/svm.js runs after
 * `npm ci` (npm run build:fast; a client command's action runs from
 * dist/cli/svm-client.js, scripts/bundle-cli.mjs); --unbundled also runs the
 * compiled modules without that bundle; --source also runs the sources through tsx
 * (SVM_FROM_SOURCE=1). A checkout whose dist/ is stale runs its sources
 * whatever is asked: such a row says so.
 *
 * --image also builds the project's image from its Dockerfile (src/dev/image.ts, as test-image does; a few
 * minutes) and runs this bench inside a container of it first (the image's node, its environment: NODE_OPTIONS
 * and all, its /app as the root; no network), then the checkouts on the host: two tables in one run.
 *
 * To compare with an older commit:
 *   mkdir /tmp/svm-before && git archive <commit> | tar -x -C /tmp/svm-before \
 *     && ln -s "$PWD/node_modules" /tmp/svm-before/node_modules \
 *     && (cd /tmp/svm-before && npm run --silent build)
 *   npm run bench:cli -- --root /tmp/svm-before --root .
 * Measurements, not assertions: not part of `npm test`.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { CliProbe, type SvmRun } from '../src/dev/cli-start';
import { ImageStore, PODMAN_LIMITS, runIn } from '../src/dev/image';
import { median } from './lib/stats';

const { values } = parseArgs({
  options: {
    root: { type: 'string', multiple: true },
    runs: { type: 'string', default: '10' },
    source: { type: 'boolean', default: false },
    unbundled: { type: 'boolean', default: false },
    json: { type: 'string' },
    image: { type: 'boolean', default: false },
  },
});
const RUNS = Number(values.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`--runs must be a whole number >= 1, got ${values.runs}`);
const roots = (values.root ?? [path.join(__dirname, '..')]).map((r) => path.resolve(r));

interface Case {
  label: string;
  root?: string;
  mode?: Mode;
  args: string[];
  connect?: boolean;
}

const commands: Array<Pick<Case, 'args' | 'connect'>> = [
  { args: ['version'] },
  { args: ['status', '--help'] },
  { args: ['migrate', '--help'] },
  { args: ['status'], connect: true },
  { args: ['migrate', 'secrets'], connect: true },
];
type Mode = 'compiled' | 'unbundled' | 'source';
const modes: Mode[] = ['compiled', ...(values.unbundled ? (['unbundled'] as const) : []), ...(values.source ? (['source'] as const) : [])];
const MODE_NAMES: Record<Mode, string> = {
  compiled: 'compiled',
  unbundled: 'compiled, without the client bundle (SVM_CLIENT_BUNDLE=off)',
  source: 'from the sources (tsx)',
};
const cases: Case[] = [
  { label: "node -e ''", args: [] },
  ...roots.flatMap((root) =>
    modes.flatMap((mode) =>
      commands.map((c) => ({ ...c, root, mode, label: `svm ${c.args.join(' ')}${c.connect ? ' (to its first connection)' : ''}` })),
    ),
  ),
];

async function runCase(probe: CliProbe, c: Case): Promise<SvmRun> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SVM_FROM_SOURCE: c.mode === 'source' ? '1' : undefined,
    SVM_CLIENT_BUNDLE: c.mode === 'unbundled' ? 'off' : undefined,
  };
  if (c.connect) env.TEMPORAL_ADDRESS = '127.0.0.1:1';
  const r = await probe.run(c.root, c.args, { env, exitOnConnect: c.connect });
  const ok = c.connect ? r.connectedTo !== undefined : r.code === 0;
  if (!ok) throw new Error(`${c.label} in ${c.root}: exit ${r.code}${c.connect ? ', no connection' : ''}: ${r.stderr.trim()}`);
  return r;
}

/** Builds the image and runs this bench (bundled into one file) inside a container of it; returns its table and figures. */
async function inTheImage(): Promise<{ table: string; figures: unknown }> {
  const { build } = await import('esbuild');
  await ImageStore.preflight();
  const store = new ImageStore(mkdtempSync(path.join(os.tmpdir(), 'svm-bench-cli-image-')));
  const mount = mkdtempSync(path.join(os.tmpdir(), 'svm-bench-cli-in-'));
  try {
    const tag = 'localhost/svm-bench-cli:latest';
    const revision = (await runIn('git', ['rev-parse', '--short', 'HEAD']).catch(() => 'unknown')).trim();
    process.stderr.write(`bench:cli: building the image from the Dockerfile (not measured)\n`);
    await store.build(tag, revision);
    await build({
      entryPoints: [__filename],
      bundle: true,
      platform: 'node',
      outfile: path.join(mount, 'bench-cli.js'),
      external: ['esbuild'],
      logLevel: 'error',
    });
    // The container runs as the image's user (uid 1000): it writes its figures beside the bench.
    chmodSync(mount, 0o777);
    process.stderr.write(`bench:cli: ${RUNS} rounds inside the image\n`);
    const table = await store.podman(
      [
        'run',
        '--rm',
        '--network',
        'none',
        ...PODMAN_LIMITS,
        '-v',
        `${mount}:/svm-bench`,
        '--entrypoint',
        'node',
        tag,
        '/svm-bench/bench-cli.js',
        '--root',
        '/app',
        '--runs',
        String(RUNS),
        '--json',
        '/svm-bench/figures.json',
      ],
      600_000,
    );
    return { table, figures: JSON.parse(readFileSync(path.join(mount, 'figures.json'), 'utf8')) as unknown };
  } finally {
    rmSync(mount, { recursive: true, force: true });
    await store.dispose();
  }
}

async function main(): Promise<void> {
  const image = values.image ? await inTheImage() : undefined;
  if (image) process.stdout.write(`In the image (its node and environment, /app; podman, no network):\n${image.table}\nOn this machine:\n`);
  const probe = new CliProbe();
  const results = new Map<Case, SvmRun[]>(cases.map((c) => [c, []]));
  const loadBefore = os.loadavg()[0]!;
  const t0 = performance.now();
  try {
    for (let i = 0; i < RUNS; i++) for (const c of cases) results.get(c)!.push(await runCase(probe, c));
  } finally {
    probe.dispose();
  }
  const loadAfter = os.loadavg()[0]!;
  const rows = cases.map((c) => {
    const runs = results.get(c)!;
    return {
      label: c.label,
      root: c.root,
      mode: c.mode,
      ranSources: runs.filter((r) => r.fromSource).length,
      wallMs: median(runs.map((r) => r.wallMs)),
      cpuMs: median(runs.map((r) => r.cpuMs)),
      modules: median(runs.map((r) => r.modules.length)),
    };
  });
  const base = rows[0]!;
  const ms = (x: number) => `${x.toFixed(0).padStart(5)} ms`;
  const out: string[] = [
    `svm start: medians of ${RUNS} runs each, interleaved, ${((performance.now() - t0) / 1000).toFixed(0)} s in all; ` +
      `load average ${loadBefore.toFixed(2)} at the start, ${loadAfter.toFixed(2)} at the end, ${os.availableParallelism()} CPUs; node ${process.version}`,
    '',
    `${''.padEnd(48)}     wall      CPU   modules   wall over node   CPU over node`,
  ];
  let group = '';
  for (const r of rows) {
    const g = r.root && r.mode ? `${r.root}, ${MODE_NAMES[r.mode]}` : '';
    if (g && g !== group) out.push(g);
    group = g;
    const name = (r.root ? '  ' : '') + r.label;
    const over = r === base ? '' : `  ${ms(r.wallMs - base.wallMs).padStart(15)} ${ms(r.cpuMs - base.cpuMs).padStart(15)}`;
    const stale =
      r.mode !== 'source' && r.ranSources > 0
        ? `  (${r.ranSources} of ${RUNS} ran the sources: dist/ stale or missing, npm run build:fast)`
        : '';
    out.push(`${name.padEnd(48)} ${ms(r.wallMs)} ${ms(r.cpuMs)} ${String(r.modules).padStart(9)}${over}${stale}`);
  }
  process.stdout.write(out.join('\n') + '\n');
  if (values.json)
    writeFileSync(
      values.json,
      JSON.stringify(
        { runs: RUNS, loadBefore, loadAfter, node: process.version, rows, ...(image ? { image: image.figures } : {}) },
        null,
        2,
      ) + '\n',
    );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:cli failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
