/** Runs a migrator worker (in this process) on a fresh task queue for one test. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
export { eventually, migrationResult, workflowResult } from './waits';

export async function withWorker<T>(
  plane: TestPlane,
  fn: (m: Migrator, taskQueue: string, w: MigratorWorker) => Promise<T>,
  opts: { settings?: Partial<WorkerSettings>; logTo?: pino.DestinationStream; taskQueue?: string } = {},
): Promise<T> {
  // A fresh queue per call, unless the caller names one its tests share (test-trigger: the trigger counts a resource
  // as migrated only from a whole pass on record for its own queue, src/kube/migration-record.ts).
  const taskQueue = opts.taskQueue ?? uniq('tq');
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
 * shared resources end such leftovers first (the files on one shared plane
 * run one after another: scripts/test.sh's two lanes each run on a plane of
 * their own, and the files beside use planes of their own).
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

/** The port a worker's log says it serves /metrics on (its line 'metrics on /metrics'): the bound one under SVM_METRICS_PORT=0. */
export function loggedMetricsPort(log: string): number | undefined {
  for (const line of log.split('\n')) {
    if (!line.includes('"msg":"metrics on /metrics"')) continue;
    try {
      const port = (JSON.parse(line) as { port?: unknown }).port;
      if (typeof port === 'number') return port;
    } catch {
      // not a log line of the worker's own (JSON, one a line)
    }
  }
  return undefined;
}

/**
 * The port a worker process started with SVM_METRICS_PORT=0 bound for /metrics, read from its log on its stdout
 * (a pipe, read from the start: call this right after spawn). Fails when the process exits first, quoting the
 * end of logFile (where its output goes) when given, or after timeoutMs.
 */
export function metricsPortOf(proc: ChildProcess, what: string, opts: { logFile?: string; timeoutMs?: number } = {}): Promise<number> {
  const timeoutMs = opts.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    let seen = ''; // the output's end, for the error
    let partial = ''; // a line not yet ended
    const tail = () => (opts.logFile ? `(log ${opts.logFile}) ${readFileSync(opts.logFile, 'utf8').slice(-2000)}` : seen);
    const done = () => {
      clearTimeout(timer);
      proc.stdout!.off('data', onData);
      proc.off('exit', onExit);
    };
    const onData = (b: Buffer) => {
      const text = partial + b.toString('utf8');
      seen = (seen + b.toString('utf8')).slice(-2000);
      const end = text.lastIndexOf('\n');
      const port = loggedMetricsPort(text.slice(0, end + 1));
      partial = text.slice(end + 1);
      if (port === undefined) return;
      done();
      resolve(port);
    };
    const onExit = (code: number | null, signal: string | null) => {
      done();
      reject(new Error(`${what} exited (${code ?? signal}) before serving /metrics: ${tail()}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${what} did not serve /metrics within ${timeoutMs / 1000} s: ${tail()}`));
    }, timeoutMs);
    proc.stdout!.on('data', onData);
    proc.once('exit', onExit);
  });
}
