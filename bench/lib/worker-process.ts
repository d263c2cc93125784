/** `svm worker` as a child process of a bench: how the benches know it is ready. */
import type { ChildProcess } from 'node:child_process';

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
