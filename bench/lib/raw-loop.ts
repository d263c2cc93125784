/**
 * The raw loop the benches measure svm against: a tight metadata-only list + empty merge patch loop (what svm
 * sends), `concurrency` in flight, no Temporal. In the bench's own process (`rawLoop`), or in a fresh node
 * process of its own (`rawLoopInChild`): compiled JavaScript in the worker's environment, so its code starts
 * as cold as a fresh `svm worker`'s does (the bench's process has run the same client code while it created
 * the objects).
 *
 *   node raw-loop.js <kubeconfig> <group> <version> <plural> <kind> <objects> <chunk> <concurrency> [<warm-up version>]
 * prints {"seconds", "objects", "latencies" (sorted, seconds), "cpuSeconds"} on stdout. With a warm-up version, it
 * first runs one pass through that version unmeasured, prints "warm", and waits for a line on stdin (the bench
 * flips the storage version) before the measured pass.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import { KubeClient } from '../../src/kube/client';
import { KubeError } from '../../src/kube/errors';
import { benchNodeArgs } from './worker-process';

export interface RawLoopResult {
  seconds: number;
  objects: number;
  /** Each update's latency in seconds, sorted. */
  latencies: number[];
  /** CPU seconds of the process that ran the loop, over the loop. */
  cpuSeconds: number;
}

export interface RawLoopTarget {
  group: string;
  version: string;
  plural: string;
  kind: string;
  /** Objects to rewrite at most (whole pages: the last page may go beyond). */
  objects: number;
  chunk: number;
  concurrency: number;
}

/** Lists page after page and sends each object the empty merge patch, `concurrency` at once, until `objects` are done. */
export async function rawLoop(kube: KubeClient, t: RawLoopTarget): Promise<RawLoopResult> {
  const ref = { group: t.group, version: t.version, resource: t.plural, kind: t.kind };
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let token: string | undefined;
  let objects = 0;
  do {
    let page;
    try {
      page = await kube.listPage(ref, { limit: t.chunk, continueToken: token });
    } catch (err) {
      // The token outlived etcd's compaction (the API servers compact every 5 minutes): go on
      // from the inconsistent token the 410 carries, as the migration does.
      if (!(err instanceof KubeError && err.kind === 'gone' && err.continueToken)) throw err;
      token = err.continueToken;
      continue;
    }
    let next = 0;
    await Promise.all(
      Array.from({ length: t.concurrency }, async () => {
        for (let i = next++; i < page.items.length; i = next++) {
          const started = performance.now();
          await kube.reencode(ref, page.items[i]!);
          latencies.push((performance.now() - started) / 1000);
        }
      }),
    );
    objects += page.items.length;
    token = page.continueToken;
  } while (token && objects < t.objects);
  const cpu = process.cpuUsage(cpu0);
  return {
    seconds: (performance.now() - t0) / 1000,
    objects,
    latencies: latencies.sort((a, b) => a - b),
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
}

/**
 * The same loop in a fresh node process: this file compiled (`compiled`, beside the bench's compiled worker), or
 * through tsx when undefined; with env added to this process's environment (the worker's). With warmUp, the process
 * first runs one unmeasured pass through `warmUp.version`, then awaits `warmUp.then()` (the bench moves the storage
 * version back) and runs the measured pass through t.version: its code is then as warm as a worker's that has run a
 * migration before.
 */
export async function rawLoopInChild(
  opts: { compiled?: string; kubeconfig: string; env: Record<string, string> },
  t: RawLoopTarget,
  warmUp?: { version: string; then: () => Promise<void> },
): Promise<RawLoopResult> {
  const args = opts.compiled ? [opts.compiled] : ['--import', 'tsx', __filename];
  const argv = [
    opts.kubeconfig,
    t.group,
    t.version,
    t.plural,
    t.kind,
    t.objects,
    t.chunk,
    t.concurrency,
    ...(warmUp ? [warmUp.version] : []),
  ];
  const child = spawn(process.execPath, [...benchNodeArgs(), ...args, ...argv.map(String)], {
    env: { ...process.env, ...opts.env },
    stdio: [warmUp ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = once(child, 'exit') as Promise<[number | null]>;
  let warmed = false;
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    if (warmUp && !warmed && stdout.startsWith('warm\n')) {
      warmed = true;
      stdout = stdout.slice('warm\n'.length);
      warmUp.then().then(
        () => child.stdin!.end('go\n'),
        (err: unknown) => {
          stderr += `the bench could not go on after the warm-up: ${String(err)}\n`;
          child.kill();
        },
      );
    }
  });
  const [code] = await exited;
  if (code !== 0 || (warmUp && !warmed))
    throw new Error(`the raw loop's process failed: ${stderr.trim().split('\n').slice(-3).join(' / ') || `exit ${code}`}`);
  try {
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as RawLoopResult;
  } catch {
    throw new Error(`the raw loop's process printed no result (${stdout.length} bytes)`);
  }
}

/** This file compiled beside a compiled tree's `bin/svm.js` (bench/lib/worker-tree.ts), or undefined for tsx. */
export function compiledRawLoop(workerBin: string, tsx: boolean): string | undefined {
  return tsx ? undefined : path.join(path.dirname(path.dirname(workerBin)), 'dist', 'bench', 'lib', 'raw-loop.js');
}

if (require.main === module) {
  const [kubeconfig, group, version, plural, kind, objects, chunk, concurrency, warmUpVersion] = process.argv.slice(2);
  const kube = KubeClient.fromKubeconfig(kubeconfig, { maxSockets: Number(concurrency) * 2 });
  const target = (v: string): RawLoopTarget => ({
    group: group!,
    version: v,
    plural: plural!,
    kind: kind!,
    objects: Number(objects),
    chunk: Number(chunk),
    concurrency: Number(concurrency),
  });
  const warmUp = async () => {
    if (!warmUpVersion) return;
    await rawLoop(kube, target(warmUpVersion));
    process.stdout.write('warm\n');
    await once(process.stdin, 'data');
  };
  warmUp()
    .then(() => rawLoop(kube, target(version!)))
    .then(
      (r) => {
        kube.close();
        process.stdout.write(JSON.stringify(r) + '\n');
      },
      (err: unknown) => {
        process.stderr.write(`raw loop failed: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exit(1);
      },
    );
}
