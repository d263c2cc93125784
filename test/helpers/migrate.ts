/** Runs a migrator worker (in this process) on a fresh task queue for one test. */
import { Migrator } from '../../src/client';
import type { WorkerSettings } from '../../src/worker/config';
import { createLogger, createMigratorWorker } from '../../src/worker/worker';
import type pino from 'pino';
import { uniq, type TestPlane } from './plane';

export async function withWorker<T>(
  plane: TestPlane,
  fn: (m: Migrator, taskQueue: string) => Promise<T>,
  opts: { settings?: Partial<WorkerSettings>; logTo?: pino.DestinationStream } = {},
): Promise<T> {
  const taskQueue = uniq('tq');
  const w = await createMigratorWorker(plane.workerSettings(taskQueue, opts.settings), createLogger(opts.logTo));
  const m = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  try {
    return await w.runUntil(() => fn(m, taskQueue));
  } finally {
    await m.close();
  }
}

/** Polls until check() is truthy (bounded). */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Every test runs its worker on its own task queue, so a migration (or the
 * trigger) an earlier test left running would be joined by the next start and
 * wait forever on a queue nobody serves. Tests that start migrations of
 * shared resources end such leftovers first.
 */
export async function endLeftovers(plane: TestPlane): Promise<void> {
  const c = plane.temporal.client;
  for await (const w of c.workflow.list({ query: `ExecutionStatus = 'Running'` })) {
    await c.workflow
      .getHandle(w.workflowId)
      .terminate('left running by an earlier test')
      .catch(() => undefined);
  }
}
