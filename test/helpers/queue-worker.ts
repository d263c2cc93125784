/**
 * A worker on a task queue the caller names, for tests that must share one: the trigger decides that a resource is
 * migrated only from a whole pass on record for its own queue (src/kube/migration-record.ts), so the tests of one
 * file that run the trigger share a queue, and the plane migrated by the first is not migrated again by each next.
 * Otherwise as withWorker (test/helpers/migrate.ts), which picks a fresh queue per test.
 */
import { Migrator } from '../../src/client';
import type { WorkerSettings } from '../../src/worker/config';
import { createLogger, createMigratorWorker } from '../../src/worker/worker';
import type { TestPlane } from './plane';

export async function withWorkerOn<T>(
  plane: TestPlane,
  taskQueue: string,
  fn: (m: Migrator) => Promise<T>,
  opts: { settings?: Partial<WorkerSettings> } = {},
): Promise<T> {
  const w = await createMigratorWorker(plane.workerSettings(taskQueue, opts.settings), createLogger());
  const m = await Migrator.connect({ temporal: { ...plane.temporal.settings, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  try {
    return await w.runUntil(() => fn(m));
  } finally {
    await m.close();
  }
}
