/**
 * What one `svm` run loads and what its start costs, for the test that keeps
 * `svm version` and `svm status --help` free of the Temporal and Kubernetes
 * clients (test/unit-cli-start.test.ts) and for `npm run bench:cli`.
 *
 * The run is `node --require <probe> <root>/bin/svm.js ARGS`. The probe, a
 * few lines of CommonJS written to a temporary file, records when the process
 * ends the modules in require.cache and the process's CPU time
 * (process.cpuUsage(): node's own start included). With exitOnConnect it also
 * ends the process, exit code 0, at its first outgoing TCP connection: `svm
 * status` against an address nobody listens on would otherwise wait out the
 * Temporal client's 10 s connect deadline, when what is measured is the cost
 * of getting that far.
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

const PROBE = `'use strict';
const fs = require('node:fs');
const net = require('node:net');
const out = process.env.SVM_PROBE_OUT;
let written = false;
function record(extra) {
  if (written || !out) return;
  written = true;
  const cpu = process.cpuUsage();
  fs.writeFileSync(out, JSON.stringify({ modules: Object.keys(require.cache), cpuMs: (cpu.user + cpu.system) / 1000, ...extra }));
}
process.on('exit', () => record({}));
if (process.env.SVM_PROBE_EXIT_ON_CONNECT === '1') {
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (...args) {
    const o = Array.isArray(args[0]) ? args[0][0] : args[0];
    const port = o !== null && typeof o === 'object' ? o.port : /^[0-9]+$/.test(String(o)) ? o : undefined;
    if (port !== undefined) {
      record({ connectedTo: String(port) });
      process.exit(0);
    }
    return connect.apply(this, args);
  };
}
`;

export interface SvmRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Every module file the run loaded (require.cache when it ended). */
  modules: string[];
  /** The process's CPU time, user + system. */
  cpuMs: number;
  wallMs: number;
  /** The port of the first outgoing TCP connection, where exitOnConnect ended the run there. */
  connectedTo?: string;
  /** Whether TypeScript sources ran (through tsx) rather than compiled code. */
  fromSource: boolean;
}

export interface SvmRunOptions {
  env?: NodeJS.ProcessEnv;
  /** End the run at its first outgoing TCP connection. */
  exitOnConnect?: boolean;
  timeoutMs?: number;
}

/** A probe written to a temporary directory; dispose() removes it. */
export class CliProbe {
  private readonly dir = mkdtempSync(path.join(tmpdir(), 'svm-cli-probe-'));
  private readonly hook = path.join(this.dir, 'probe.cjs');
  private runs = 0;

  constructor() {
    writeFileSync(this.hook, PROBE);
  }

  /** `node --require probe <root>/bin/svm.js ...args`; with no root, `node --require probe -e ''` (node's bare start). */
  run(root: string | undefined, args: string[], opts: SvmRunOptions = {}): Promise<SvmRun> {
    const out = path.join(this.dir, `run-${++this.runs}.json`);
    const argv =
      root === undefined ? ['--require', this.hook, '-e', ''] : ['--require', this.hook, path.join(root, 'bin', 'svm.js'), ...args];
    const env = {
      ...(opts.env ?? process.env),
      SVM_PROBE_OUT: out,
      ...(opts.exitOnConnect ? { SVM_PROBE_EXIT_ON_CONNECT: '1' } : {}),
    };
    return new Promise((resolve, reject) => {
      const t0 = performance.now();
      const child = spawn(process.execPath, argv, { cwd: root ?? process.cwd(), env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
      child.on('error', reject);
      child.on('close', (code) => {
        const wallMs = performance.now() - t0;
        clearTimeout(timer);
        let probe: { modules: string[]; cpuMs: number; connectedTo?: string };
        try {
          probe = JSON.parse(readFileSync(out, 'utf8')) as typeof probe;
        } catch {
          reject(new Error(`svm ${args.join(' ')} left no record (exit ${code}): ${stderr}`));
          return;
        }
        rmSync(out, { force: true });
        resolve({ code, stdout, stderr, wallMs, ...probe, fromSource: probe.modules.some((m) => m.endsWith('.ts')) });
      });
    });
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The heavy modules a run may load, by name, each with how its files are recognised. */
export const HEAVY_MODULES: Record<string, RegExp> = {
  '@temporalio/worker': /[/\\]node_modules[/\\]@temporalio[/\\]worker[/\\]/,
  '@temporalio/core-bridge': /[/\\]node_modules[/\\]@temporalio[/\\]core-bridge[/\\]/,
  '@temporalio/client': /[/\\]node_modules[/\\]@temporalio[/\\]client[/\\]/,
  '@kubernetes/client-node': /[/\\]node_modules[/\\]@kubernetes[/\\]client-node[/\\]/,
  'the @kubernetes/client-node bundle': /[/\\]dist[/\\]kube-client-node-[^/\\]*\.js$/,
  'the client bundle': /[/\\]dist[/\\]cli[/\\]svm-client\.js$/,
  zod: /[/\\]node_modules[/\\]zod[/\\]/,
  yaml: /[/\\]node_modules[/\\]yaml[/\\]/,
};

/** Which of names a run loaded (their code: a package.json read with require is no load of the package). */
export function loadedOf(modules: string[], names: string[]): string[] {
  const code = modules.filter((m) => !m.endsWith('.json'));
  return names.filter((n) => code.some((m) => HEAVY_MODULES[n]!.test(m)));
}

/**
 * A compiled tree of the checkout at root, as `npm ci` leaves it but without
 * the sources: dist/ from scripts/transpile.mjs, bin/, package.json and a
 * link to node_modules. For runs of the compiled code whatever the state of
 * the checkout's own dist/. dispose() removes it.
 */
export async function compiledTree(root: string): Promise<{ root: string; dispose(): void }> {
  const tree = mkdtempSync(path.join(tmpdir(), 'svm-cli-tree-'));
  cpSync(path.join(root, 'bin'), path.join(tree, 'bin'), { recursive: true });
  cpSync(path.join(root, 'package.json'), path.join(tree, 'package.json'));
  symlinkSync(path.join(root, 'node_modules'), path.join(tree, 'node_modules'));
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'scripts', 'transpile.mjs'), '--out', tree], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`scripts/transpile.mjs --out ${tree} exited ${code}: ${stderr}`)),
    );
  });
  if (!existsSync(path.join(tree, 'dist', 'cli', 'svm.js')))
    throw new Error(`scripts/transpile.mjs wrote no ${tree}/dist/cli/svm.js (no esbuild?)`);
  return { root: tree, dispose: () => rmSync(tree, { recursive: true, force: true }) };
}
