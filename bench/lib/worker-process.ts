/** `svm worker` as a child process of a bench: started as the benches run it, and how they know it is ready. */
import { spawn, type ChildProcess } from 'node:child_process';

/**
 * SVM_BENCH_NODE_ARGS: Node options for the measured processes only, svm's worker and the raw loop's process (e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`, which NODE_OPTIONS refuses); none by default.
 */
export function benchNodeArgs(): string[] {
  return (process.env.SVM_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
}

/**
 * SVM_BENCH_WRAP: a command the measured worker runs under, its words split on spaces (e.g. `heaptrack -o /tmp/ht`,
 * `strace -f -o /tmp/st`); none by default. With a wrapper the bench's RSS figures are the wrapper's process, not the
 * worker's: a diagnostic only. The wrapper and the worker run in a process group of their own, which the bench's
 * kill signals as a whole.
 *
 * `svm worker --no-bridge` (bin: a compiled tree's bin/svm.js, or the checkout's) against the plane whose env file is
 * `plane` (its one API address through KUBECONFIG, its Temporal), polling taskQueue, logging warnings only; env (the
 * worker's settings, then the image's environment) goes over this process's environment.
 */
export function spawnWorker(
  bin: string,
  plane: Record<string, string | undefined>,
  taskQueue: string,
  env: Record<string, string | undefined>,
): ChildProcess {
  const wrap = (process.env.SVM_BENCH_WRAP ?? '').split(' ').filter(Boolean);
  const [command, ...args] = [...wrap, process.execPath, ...benchNodeArgs(), bin, 'worker', '--no-bridge'];
  const child = spawn(command!, args, {
    env: {
      ...process.env,
      KUBECONFIG: plane.KUBECONFIG,
      TEMPORAL_ADDRESS: plane.TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: taskQueue,
      SVM_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
    // A wrapper (heaptrack's script) does not pass a signal on to the worker it started: the benches' kill goes to
    // the whole group.
    detached: wrap.length > 0,
  });
  if (wrap.length > 0) {
    const killOne = child.kill.bind(child);
    child.kill = (signal?: NodeJS.Signals | number) => {
      try {
        process.kill(-child.pid!, signal ?? 'SIGTERM');
        return true;
      } catch {
        return killOne(signal);
      }
    };
  }
  return child;
}

/** Until the worker answers /healthz (it serves it once its Temporal worker is created), or fails if it exits. */
export async function waitForHealthz(port: number, child: ChildProcess): Promise<void> {
  for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
    if (child.exitCode !== null) throw new Error(`the worker exited (${child.exitCode}) before it was ready`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the worker did not answer /healthz within 120 s');
}
