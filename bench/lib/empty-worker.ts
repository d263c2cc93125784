/**
 * An empty Temporal TypeScript worker: one trivial workflow (prebuilt bundle), no activities, the SDK's
 * defaults. The benches run it beside `svm worker`, in the same environment and against the same server, as
 * the floor a worker of this SDK costs in memory (`emptyWorkerPeakRss`).
 *
 *   node empty-worker.js <temporal address> <task queue> <bundle path> <seconds>
 * prints {"peakRssMiB": n} once it has polled that long.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { NativeConnection, Worker } from '@temporalio/worker';

async function run(address: string, taskQueue: string, codePath: string, seconds: number): Promise<void> {
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({ connection, taskQueue, workflowBundle: { codePath } });
  await worker.runUntil(new Promise((r) => setTimeout(r, seconds * 1000)));
  await connection.close();
  const peak = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
  process.stdout.write(JSON.stringify({ peakRssMiB: Number(peak.toFixed(1)) }) + '\n');
}

/** This file compiled beside a compiled tree's `bin/svm.js` (bench/lib/worker-tree.ts), or undefined for tsx. */
export function compiledEmptyWorker(workerBin: string, tsx: boolean): string | undefined {
  return tsx ? undefined : path.join(path.dirname(path.dirname(workerBin)), 'dist', 'bench', 'lib', 'empty-worker.js');
}

/** From the bench (parent): bundles the trivial workflow, runs this file in a child with env, returns its peak RSS. */
export async function emptyWorkerPeakRss(opts: {
  /** This file, compiled (the bench's compiled tree), or undefined to run it through tsx. */
  compiled?: string;
  address: string;
  seconds: number;
  env: Record<string, string>;
}): Promise<number> {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { execFile } = await import('node:child_process');
  const dir = mkdtempSync(path.join(tmpdir(), 'svm-empty-worker-'));
  try {
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./empty-workflows'), logger: quiet });
    const codePath = path.join(dir, 'bundle.js');
    writeFileSync(codePath, code);
    const args = opts.compiled ? [opts.compiled] : ['--import', 'tsx', __filename];
    const taskQueue = `empty-${Date.now().toString(36)}`;
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [...args, opts.address, taskQueue, codePath, String(opts.seconds)],
        { env: { ...process.env, ...opts.env } },
        (err, stdout) => (err ? reject(err) : resolve(stdout)),
      ),
    );
    return (JSON.parse(out.trim().split('\n').at(-1)!) as { peakRssMiB: number }).peakRssMiB;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} };

if (require.main === module) {
  const [address, taskQueue, codePath, seconds] = process.argv.slice(2);
  run(address!, taskQueue!, codePath!, Number(seconds)).catch((err: unknown) => {
    process.stderr.write(`empty worker failed: ${String(err)}\n`);
    process.exit(1);
  });
}
