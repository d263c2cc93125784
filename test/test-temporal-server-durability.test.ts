/**
 * Durability on temporal-server + PostgreSQL, what users deploy: on the
 * suite's one server plane (serverPlane()), only what that server can show
 * (the dev server's restart is test-migrate-crash's; the worker's SIGKILL is
 * only here, judged by etcd while it is down too). Each test migrates a
 * CRD v1 -> v2 and breaks something mid-migration:
 *   - a long list that continues-as-new while the worker process is
 *     SIGKILLed, once before the first continue-as-new and once after it;
 *   - temporal-server stopped and started again (PostgreSQL keeps its data);
 *   - PostgreSQL stopped under the running server and started again, with a
 *     fast shutdown (clients cut off, checkpoint) and with an immediate one
 *     (every process quits at once: crash recovery from the WAL at start);
 *   - a chunk's task lost by the server (deleted from its task queue in
 *     PostgreSQL while the server is down, as a crash once lost one): it is
 *     scheduled again when no worker has started it in time.
 * etcd and the workflow's history are the judge (src/dev/migration-judge.ts):
 * nothing lost, the success recorded once, and the recorded pass whole.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { Migrator, type MigrationHandle, type MigrationProgress, type MigrationResult } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { etcdPrefix, storedVersions } from '../src/dev/etcd-truth';
import { beforeMigration, judgeMigration, verdictProblems, type BeforeMigration } from '../src/dev/migration-judge';
import { isRunning, restartPostgres, restartTemporal } from '../src/dev/plane';
import { postgresQuery } from '../src/dev/temporal-server';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { eventually, startWorkerProcess, withWorker } from './helpers/migrate';
import { serverPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await serverPlane();
  assert.equal(plane.state.temporalMode, 'server');
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const quiet = () => undefined;

interface Seeded {
  crd: TestCrd;
  count: number;
  before: BeforeMigration;
}

async function crdAtV2WithObjects(count: number): Promise<Seeded> {
  const crd = testCrd(`${uniq('pgd')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', count, { namespace: uniq('ns') });
  const before = await beforeMigration(plane.etcd, etcdPrefix({ group: crd.group, resource: crd.plural, custom: true }));
  assert.equal(before.objects.size, count);
  await applyCrd(plane.kube, crd, 'v2');
  return { crd, count, before };
}

/** etcd and the history judge: nothing lost, recorded once, a whole pass; and the CRD's storedVersions pruned. */
async function judge(s: Seeded, result: MigrationResult, workflowId: string): Promise<void> {
  assert.equal(result.phase, 'Succeeded', result.message);
  const target = `${s.crd.group}/v2`;
  const v = await judgeMigration({
    etcd: plane.etcd,
    client: plane.temporal.client,
    workflowId,
    before: s.before,
    targetApiVersion: target,
  });
  // Tasks no worker started in time (lost, or queued while no worker ran), each scheduled again.
  const events = (await plane.temporal.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const rescheduled = events.filter((e) => e.activityTaskTimedOutEventAttributes?.failure?.timeoutFailureInfo?.timeoutType === 2).length;
  process.stderr.write(
    `  judged: ${v.keysAfter} keys at ${JSON.stringify(v.byApiVersion)}, recorded ${v.recordedSuccesses}x, ${v.completedExecutions} Completed, ` +
      `${v.runs} runs, pass ${v.pass.chunks} chunks accounting ${v.pass.accounted}, ${v.chunksAllRuns} chunks in all, restarts ${result.restarts}, ` +
      `${v.historyEvents} history events, ${rescheduled} task(s) scheduled again in the last run\n`,
  );
  assert.deepEqual(verdictProblems(v, s.count, target), []);
  const crd = await plane.kube.getJson<{ status: { storedVersions: string[] } }>(
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${s.crd.name}`,
  );
  assert.deepEqual(crd.status.storedVersions, ['v2']);
}

async function sigkill(worker: ChildProcess): Promise<void> {
  worker.kill('SIGKILL');
  if (worker.exitCode === null && worker.signalCode === null) await new Promise((r) => worker.once('exit', r));
}

const chunksDone = async (h: MigrationHandle) => (await h.progress()).counters.chunks;

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;

/**
 * The chunks the server recorded as completed at or after `since` (its clock is this machine's), in the workflow's
 * latest run: at least one says the migration was still under way when the server (or its database) was back, so
 * the outage fell in its middle, not after its end.
 */
async function chunksCompletedSince(workflowId: string, since: number): Promise<number> {
  const events = (await plane.temporal.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const chunks = new Set(
    events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'migrateChunk').map((e) => String(e.eventId)),
  );
  return events.filter((e) => chunks.has(String(e.activityTaskCompletedEventAttributes?.scheduledEventId)) && ms(e.eventTime) >= since)
    .length;
}

/** Polls until the workflow has closed, through errors while the server or its database is away; then its result. */
async function outcome(h: MigrationHandle): Promise<MigrationResult> {
  return eventually(
    'the migration to end',
    async () => {
      const d = await h.workflow.describe();
      return d.status.name !== 'RUNNING' && migrationResult(h);
    },
    300_000,
  );
}

void test('a long list continues-as-new while the worker is SIGKILLed before and after a continue-as-new: Succeeded, etcd judges it whole', async () => {
  // 1,200 objects in chunks of 10: 120 chunks, several hundred history events (820 with 3,000 in chunks of 25: the
  // events follow the chunks, not the objects); the plane suggests continue-as-new at 300. At 100 updates/s the
  // migration lasts as long as 3,000 at 250 did (12 s at the least), room for the second kill in the second run.
  const s = await crdAtV2WithObjects(1200);
  const taskQueue = uniq('tq');
  const m = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  let worker = startWorkerProcess(plane, taskQueue);
  try {
    const h = await m.start(s.crd.name, { chunkSize: 10, concurrency: 4, qps: 100, heartbeatTimeoutSeconds: 5 });
    const kills: string[] = [];
    // first kill in the first run, the second once the workflow has continued as new
    for (const [what, reached] of [
      ['a few chunks in the first run', (p: MigrationProgress) => p.runs === 1 && p.counters.chunks >= 5],
      ['a chunk after the first continue-as-new', (p: MigrationProgress) => p.runs >= 2],
    ] as const) {
      const at = await eventually(
        what,
        async () => {
          const p = await h.progress();
          return reached(p) && p;
        },
        240_000,
      );
      await sigkill(worker);
      // From outside, while no worker runs: etcd still holds objects at v1, so the kill fell mid-migration.
      const left = (await storedVersions(plane.etcd, { group: s.crd.group, resource: s.crd.plural, custom: true })).byApiVersion[
        `${s.crd.group}/v1`
      ];
      assert.ok((left ?? 0) > 0, `etcd held every object at v2 when the worker was killed (${what}): not mid-migration`);
      kills.push(`run ${at.runs}, chunk ${at.counters.chunks} (${left} objects at v1 in etcd)`);
      worker = startWorkerProcess(plane, taskQueue);
      // A restart is a new process, the dead one's sticky task and its chunk timing out: room for that.
      await eventually('progress after the restart', async () => (await chunksDone(h)) > at.counters.chunks, 240_000);
    }
    const result = await migrationResult(h);
    process.stderr.write(`  SIGKILLed the worker at ${kills.join(' and ')}; ${result.runs} runs\n`);
    assert.ok(result.runs >= 3, `the long list continued as new only ${result.runs - 1} time(s)`);
    await judge(s, result, h.workflowId);
  } finally {
    await sigkill(worker);
    await m.close();
  }
});

// The worker and the client stay up through the restart (the lost task's test below restarts the server with no worker).
// 400 objects in 16 chunks at 50/s: the restart comes at the 3rd, with 6.5 s of updates still to go at the least (the
// same pace and chunks as 800 at 100/s, which left 13 of 16 chunks to complete after the server was back).
// Half the objects to create.
void test('temporal-server is stopped and started again mid-migration: Succeeded, etcd judges it whole', async () => {
  const s = await crdAtV2WithObjects(400);
  const before = plane.state.temporal.pid;
  const { result, workflowId, after } = await withWorker(plane, async (m) => {
    const h = await m.start(s.crd.name, { chunkSize: 25, concurrency: 4, qps: 50 });
    await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
    await restartTemporal(plane.dir, quiet);
    const back = Date.now();
    const result = await outcome(h);
    return { result, workflowId: h.workflowId, after: await chunksCompletedSince(h.workflowId, back) };
  });
  assert.notEqual(plane.state.temporal.pid, before, 'temporal-server is a new process');
  process.stderr.write(`  ${after} chunk(s) completed after temporal-server was back\n`);
  assert.ok(after >= 1, 'no chunk completed after the restart: it did not fall mid-migration');
  await judge(s, result, workflowId);
});

for (const mode of ['fast', 'immediate'] as const) {
  void test(`PostgreSQL is stopped (pg_ctl stop -m ${mode}) under the running server mid-migration and started again: Succeeded, etcd judges it whole`, async () => {
    // As above: 400 objects in 16 chunks at 50/s, PostgreSQL stopped at the 3rd.
    const s = await crdAtV2WithObjects(400);
    const server = plane.state.temporal.pid;
    const { result, workflowId, restarted, after } = await withWorker(plane, async (m) => {
      const h = await m.start(s.crd.name, { chunkSize: 25, concurrency: 4, qps: 50 });
      await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
      // Down for 5 s: long enough that the server's writes fail and are retried, not a blip between two of them.
      const restarted = await restartPostgres(plane.dir, mode, { downMs: 5000, log: quiet });
      const back = Date.now();
      const result = await outcome(h);
      return { result, workflowId: h.workflowId, restarted, after: await chunksCompletedSince(h.workflowId, back) };
    });
    assert.notEqual(restarted.pid, restarted.stoppedPid, 'PostgreSQL is a new postmaster');
    process.stderr.write(`  ${after} chunk(s) completed after PostgreSQL was back\n`);
    assert.ok(after >= 1, 'no chunk completed after PostgreSQL was back: its outage did not fall mid-migration');
    assert.ok(isRunning(plane.state.temporalServer!.postgres), 'PostgreSQL runs again');
    assert.equal(plane.state.temporal.pid, server, 'temporal-server kept running throughout (it reconnected by itself)');
    assert.ok(isRunning(plane.state.temporal));
    await judge(s, result, workflowId);
  });
}

void test('a chunk task the server lost (gone from the task queue in PostgreSQL) is scheduled again once no worker started it in time: Succeeded, etcd judges it whole', async () => {
  const s = await crdAtV2WithObjects(300);
  const taskQueue = uniq('tq');
  const rec = plane.state.temporalServer!;
  // The activity task queue's rows (its partitions too): the queue's name, then its type (2, activity) last.
  const where = `position(convert_to('${taskQueue}', 'UTF8') in task_queue_id) > 0 AND get_byte(task_queue_id, length(task_queue_id) - 1) = 2`;
  const queued = () =>
    Number(
      postgresQuery(rec, 'temporal', `SELECT (SELECT count(*) FROM tasks WHERE ${where}) + (SELECT count(*) FROM tasks_v2 WHERE ${where})`),
    );
  // Each attempt's task waits at most this long for a worker to start it; the test's steps below fit in it with room
  // (the server's restart and the 8 s the loss is watched take about 15 s; the window is checked, not assumed).
  const startTimeoutSeconds = 45;
  const m = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  let worker = startWorkerProcess(plane, taskQueue);
  try {
    const h = await m.start(s.crd.name, {
      chunkSize: 25,
      concurrency: 2,
      qps: 50,
      heartbeatTimeoutSeconds: 5,
      taskStartTimeoutSeconds: startTimeoutSeconds,
    });
    const pending = async () => (await h.workflow.describe()).raw.pendingActivities ?? [];
    await eventually('a few chunks', async () => (await chunksDone(h)) >= 3);
    await sigkill(worker);
    // The chunks it ran time out (heartbeat, 5 s); each next attempt is handed to matching by the history's retry
    // timer (a row of timer_tasks, at the attempt's scheduled time) and waits in the task queue, a row in PostgreSQL.
    const waiting = await eventually(
      'every pending chunk scheduled again and queued in PostgreSQL',
      async () => {
        const p = await pending();
        return p.length > 0 && p.every((a) => a.state === 1) && queued() >= p.length && p; // PENDING_ACTIVITY_STATE_SCHEDULED
      },
      60_000,
    );
    const handedOver = Date.now();
    const deadline = Math.min(...waiting.map((a) => ms(a.scheduledTime))) + startTimeoutSeconds * 1000;
    // What the server loses in the crash: the queued task, and the history's record that it is still to be handed
    // over. History hands a task to matching at least once: its fired timer rows stay in timer_tasks until the timer
    // queue's next checkpoint deletes them (history.timerProcessorUpdateAckInterval, 30 s +-15 %), and a restart
    // before then fires them again and queues the task anew (what a 5 s transfer-queue interval could not change:
    // an activity's retry is a timer, not a transfer task). So while the server is down both go: the task queue's rows
    // and this workflow's timer rows due before the tasks were seen queued (fired, their tasks handed over; the
    // schedule-to-start timers, due 45 s on, stay). Before, the test waited 40 s for that checkpoint.
    const ofWorkflow = `position(convert_to('${h.workflowId}', 'UTF8') in data) > 0 AND visibility_timestamp <= (to_timestamp(${handedOver / 1000}) AT TIME ZONE 'UTC')`;
    let lost = 0;
    let firedTimers = 0;
    await restartTemporal(plane.dir, quiet, () => {
      firedTimers = Number(
        postgresQuery(rec, 'temporal', `WITH t AS (DELETE FROM timer_tasks WHERE ${ofWorkflow} RETURNING 1) SELECT count(*) FROM t`),
      );
      lost = Number(
        postgresQuery(
          rec,
          'temporal',
          `WITH a AS (DELETE FROM tasks WHERE ${where} RETURNING 1), b AS (DELETE FROM tasks_v2 WHERE ${where} RETURNING 1) ` +
            'SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)',
        ),
      );
    });
    assert.ok(lost >= 1, 'a queued task was deleted');
    const lostAt = Date.now();
    worker = startWorkerProcess(plane, taskQueue);
    // A worker polls, yet nothing moves: the history says Scheduled, the queue holds nothing. Watched from the restart
    // to 2 s before the first lost task's start deadline, at least 8 s.
    const stalled = await chunksDone(h);
    const watchMs = deadline - 2000 - Date.now();
    assert.ok(watchMs >= 8000, `the server's restart left ${(watchMs / 1000).toFixed(1)} s before the lost task's deadline, not 8`);
    await new Promise((r) => setTimeout(r, watchMs));
    assert.equal(await chunksDone(h), stalled, `no chunk ran while the task was lost (${(watchMs / 1000).toFixed(1)} s)`);
    assert.equal((await pending())[0]?.state, 1, 'the chunk is still Scheduled (not started)'); // PENDING_ACTIVITY_STATE_SCHEDULED
    const result = await outcome(h);
    const events = (await h.workflow.fetchHistory()).events ?? [];
    const timedOut = events.filter((e) => e.activityTaskTimedOutEventAttributes?.failure?.timeoutFailureInfo?.timeoutType === 2); // SCHEDULE_TO_START
    assert.ok(timedOut.length >= 1, 'the lost task timed out before it started');
    process.stderr.write(
      `  deleted ${lost} queued task(s) and ${firedTimers} fired timer row(s); no chunk ran for ${(watchMs / 1000).toFixed(1)} s; ` +
        `scheduled again after ${timedOut.length} schedule-to-start timeout(s); ended ${((Date.now() - lostAt) / 1000).toFixed(1)} s after the loss\n`,
    );
    await judge(s, result, h.workflowId);
  } finally {
    await sigkill(worker);
    await m.close();
  }
});
