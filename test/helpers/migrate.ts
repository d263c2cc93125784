/** Runs a migrator worker (in this process) on a fresh task queue for one test. */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { Migrator } from '../../src/client';
import type { ChunkInput, ChunkResult } from '../../src/activities/migrate-chunk';
import type { WorkerSettings } from '../../src/worker/config';
import { createLogger, createMigratorWorker, type MigratorWorker } from '../../src/worker/worker';
import type pino from 'pino';
import { uniq, type TestPlane } from './plane';

/** The bounded waits live in test/helpers/waits.ts; the tests import them from here, beside withWorker. */
export { eventually, migrationResult } from './waits';

export async function withWorker<T>(
  plane: TestPlane,
  fn: (m: Migrator, taskQueue: string, w: MigratorWorker) => Promise<T>,
  opts: { settings?: Partial<WorkerSettings>; logTo?: pino.DestinationStream } = {},
): Promise<T> {
  const taskQueue = uniq('tq');
  const w = await createMigratorWorker(plane.workerSettings(taskQueue, opts.settings), createLogger(opts.logTo));
  const m = await Migrator.connect({ temporal: { ...plane.temporal.settings, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  try {
    return await w.runUntil(() => fn(m, taskQueue, w));
  } finally {
    await m.close();
  }
}

/**
 * Every test runs its worker on its own task queue, so a migration (or the
 * trigger) an earlier test left running would be joined by the next start and
 * wait forever on a queue nobody serves. Tests that start migrations of
 * shared resources end such leftovers first (every test on the shared plane
 * runs in the main run, one file after another: the files run beside it use
 * planes of their own, scripts/test.sh).
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

/** Chunks of a whole pass over `count` small objects by the empty patch: metadata-only pages of chunkSize from the first. */
export function chunksOfPass(count: number, chunkSize: number): number {
  return Math.max(1, Math.ceil(count / chunkSize));
}

/**
 * Every migrateChunk of a workflow's latest execution, every run of it (walked back through
 * continue-as-new), in order: what each was asked (the page limit) and what it answered.
 */
export async function chunkActivities(client: Client, workflowId: string): Promise<Array<{ input: ChunkInput; result: ChunkResult }>> {
  const out: Array<{ input: ChunkInput; result: ChunkResult }> = [];
  for (let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId; runId;) {
    const history: { events?: temporal.api.history.v1.IHistoryEvent[] | null } = await client.workflow
      .getHandle(workflowId, runId)
      .fetchHistory();
    const events = history.events ?? [];
    const inputs = new Map<string, ChunkInput>();
    const ofRun: typeof out = [];
    for (const e of events) {
      const scheduled = e.activityTaskScheduledEventAttributes;
      if (scheduled?.activityType?.name === 'migrateChunk')
        inputs.set(String(e.eventId), defaultPayloadConverter.fromPayload<ChunkInput>(scheduled.input!.payloads![0]!));
      const done = e.activityTaskCompletedEventAttributes;
      const input = done && inputs.get(String(done.scheduledEventId));
      if (input) ofRun.push({ input, result: defaultPayloadConverter.fromPayload<ChunkResult>(done.result!.payloads![0]!) });
    }
    out.unshift(...ofRun);
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return out;
}

/** `svm worker` as a process of its own on the plane's one API address (as deploy/ runs it), on taskQueue. */
export function startWorkerProcess(plane: TestPlane, taskQueue: string): ChildProcess {
  return spawn(process.execPath, [path.join(__dirname, '..', '..', 'bin', 'svm.js'), 'worker'], {
    env: {
      ...process.env,
      KUBECONFIG: plane.env.KUBECONFIG,
      TEMPORAL_ADDRESS: plane.temporal.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      SVM_BRIDGE: 'false',
      SVM_QPS: '0',
      SVM_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
