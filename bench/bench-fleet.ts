/**
 * `npm run bench:fleet [-- --clusters 100,1000 --objects 10 --away 10 --periods K --unreachable-after 5 --out DIR]`:
 * what a campaign and a pool cost per cluster, over simulated clusters.
 *
 * Each size N is a round of its own, on a Temporal dev server the bench starts (in memory, nothing else on it):
 *   - the stand-in (bench/fleet-stand-in.ts, a process of its own) serves N simulated clusters, each with its own
 *     kube-system uid and --objects objects of the bench's resource (widgets.fleet.svm.test);
 *   - a pool (`svm worker` with SVM_KUBECONFIG_DIR holding one kubeconfig per simulated cluster) serves them; the
 *     bench waits until every cluster has registered itself (its registration's memo holds its uid);
 *   - a campaign over all N migrates the bench's resource in each (the canary, then `--parallel` at once); it must
 *     end Succeeded with every object of every cluster written (the stand-in counts the writes to each object).
 * Printed and written (--out, bench/results/bench-fleet-<date>.json), for each N:
 *   - wall time (the campaign's start to its result);
 *   - the largest history of any workflow the campaign involved (events and bytes), read from every execution
 *     started on the server since the campaign's start (so whatever shape the campaign takes: children, members,
 *     continue-as-new runs), and the clusters' registrations' largest;
 *   - events and actions per cluster: all those executions' events / N; actions are the history events Temporal
 *     bills as actions (roughly): workflow and child starts, activities and timers scheduled, signals received and
 *     sent, search attribute upserts, markers, updates accepted;
 *   - the pool's RSS, idle once every cluster registered and at its peak (VmHWM), and between two sizes the slope in
 *     MiB per served cluster (not the total divided by N);
 *   - long polls per served cluster: the pollers DescribeTaskQueue reports over the pool's task queues (the fleet
 *     queue, each cluster's, and every queue a campaign's workflow ran on; workflow and activity) / N.
 * A size that would not fit this machine (--budget-seconds, default 900 s a round; or the memory free) is not run:
 * its figures are estimated from the measured slope (between the two largest sizes measured; when only one was, a
 * tenth of it is measured too, for the slope), and written as an estimate.
 *
 * With --away A --periods K: A more simulated clusters are named in the campaign but given to no worker; the
 * campaign's unreachableAfterSeconds is --unreachable-after (default 5) and its deadline a little past 2K periods.
 * The largest history is read after K periods and after 2K, then at the campaign's end.
 *
 * The stand-in is not Kubernetes (no storage, no encoding): what its figures say is Temporal's and the pool's
 * cost, not a migration's. Not part of `npm test`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { freemem, tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { CAMPAIGN_WORKFLOW_TYPE, campaignWorkflowId, clusterRegistrationId, type CampaignStatus } from '../src/contract/fleet';
import { clusterTaskQueue, fleetTaskQueue } from '../src/api/cluster';
import { freePort, portOpen } from '../src/dev/ports';
import { ensureTools } from '../src/dev/tools';
import { devServerArgs } from '../src/dev/local-temporal';
import { BENCH_GROUP, BENCH_RESOURCE, standInKubeconfig } from './fleet-stand-in';
import { positiveWholes } from './lib/args';

const root = path.join(__dirname, '..');
const { values } = parseArgs({
  options: {
    clusters: { type: 'string', default: '100,1000' },
    objects: { type: 'string', default: '10' },
    away: { type: 'string', default: '0' },
    periods: { type: 'string', default: '60' },
    'unreachable-after': { type: 'string', default: '5' },
    parallel: { type: 'string', default: '100' },
    'budget-seconds': { type: 'string', default: '900' },
    out: { type: 'string', default: path.join(root, 'bench', 'results') },
    note: { type: 'string', default: '' },
    'pool-log': { type: 'string' },
    'pool-cpu-prof': { type: 'string' },
  },
});
const SIZES = values.clusters.split(',').map((n) => Number(n.trim()));
if (SIZES.some((n) => !Number.isInteger(n) || n < 1) || SIZES.length === 0)
  throw new Error(`--clusters: sizes, whole numbers of at least 1, comma-separated (e.g. 100,1000), got "${values.clusters}"`);
for (let i = 1; i < SIZES.length; i++)
  if (SIZES[i]! <= SIZES[i - 1]!)
    throw new Error(`--clusters: sizes in increasing order (the slope is between them), got "${values.clusters}"`);
const [OBJECTS, PERIODS, UNREACHABLE_AFTER, PARALLEL, BUDGET] = positiveWholes(values, [
  'objects',
  'periods',
  'unreachable-after',
  'parallel',
  'budget-seconds',
]) as [number, number, number, number, number];
const AWAY = values.away === '0' ? 0 : positiveWholes(values, ['away'])[0]!;
if (PARALLEL > 100) throw new Error('--parallel: at most 100 (the campaign allows no more)');
if (UNREACHABLE_AFTER < 5) throw new Error('--unreachable-after: at least 5 seconds (the campaign allows no less)');

const t00 = performance.now();
const log = (s: string) => process.stderr.write(`[fleet ${((performance.now() - t00) / 1000).toFixed(0).padStart(5)}s] ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const kib = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
const mib = (k: number) => Math.round(k / 1024);
/** CPU seconds a process has used (user + system, /proc/<pid>/stat; clock ticks of 1/100 s). */
const cpuSeconds = (pid: number | undefined): number => {
  if (pid === undefined) return NaN;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
};

/** History event types counted as actions (as Temporal Cloud bills them, roughly). */
const ACTIONS = new Set([
  'WORKFLOW_EXECUTION_STARTED',
  'ACTIVITY_TASK_SCHEDULED',
  'TIMER_STARTED',
  'START_CHILD_WORKFLOW_EXECUTION_INITIATED',
  'WORKFLOW_EXECUTION_SIGNALED',
  'SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED',
  'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'WORKFLOW_PROPERTIES_MODIFIED',
  'MARKER_RECORDED',
  'WORKFLOW_EXECUTION_UPDATE_ACCEPTED',
]);

export interface Histories {
  /** Executions (runs) started since the campaign's start, by workflow type. */
  executions: number;
  byType: Record<string, number>;
  events: number;
  actions: number;
  bytes: number;
  largest: { workflowId: string; type: string; events: number; bytes: number };
  /** The campaign's own (every run of its workflow id). */
  campaign: { events: number; actions: number; runs: number };
}

export interface Round {
  clusters: number;
  away: number;
  /** Measured, or (estimate: true) projected from the measured rounds' slope. */
  estimate: boolean;
  seconds: number;
  secondsPerCluster: number;
  /** Seconds from the pool's start until every served cluster had registered. */
  registeredSeconds?: number;
  campaign: { events: number; actions: number };
  perCluster: { events: number; actions: number; workflows: number };
  largestHistory?: Histories['largest'];
  largestRegistration?: { events: number; bytes: number };
  rss: { idleMiB: number; peakMiB: number };
  /**
   * CPU seconds each process used during the campaign (its start to its result): which one the campaign's wall time
   * is spent in. And the clusters ended at each minute of the campaign (the campaign's own counts).
   */
  cpu?: { pool: number; temporal: number; standIn: number; bench: number };
  progress?: Array<{
    seconds: number;
    ended: number;
    running: number;
    campaignEvents: number;
    pool: number;
    temporal: number;
    standIn: number;
  }>;
  longPolls?: { pollers: number; taskQueues: number; perServedCluster: number };
  standIn?: {
    writes: number;
    objectsWritten: number;
    maxWritesPerObject: number;
    requests: number;
    unserved: Record<string, number>;
  };
  /** With --away: the largest history after K periods, after 2K, and at the end. */
  awayHistory?: Array<{
    periods: number;
    seconds: number;
    largest: Histories['largest'];
    campaignEvents: number;
  }>;
  phase: string;
}

/** What bench-fleet writes (bench-all.ts reads it). */
export interface FleetFigures {
  date: string;
  command: string;
  note: string;
  objects: number;
  rounds: Round[];
  slope:
    | {
        rssMiBPerServedCluster: number;
        peakMiBPerServedCluster: number;
        between: [number, number];
      }
    | undefined;
  thousandClusters: {
    note: string;
    historyEvents: number;
    actions: number;
    campaignEvents: number;
    campaignsNeeded: number;
    poolRssMiBPerCluster: number;
    poolsOf1GiB?: number;
  };
}

/** A Temporal dev server of the bench's own: in memory, svm's search attributes, on free ports. */
async function startTemporal(): Promise<{
  address: string;
  child: ChildProcess;
  stop(): Promise<void>;
}> {
  const { temporal: cli } = ensureTools(['temporal-cli'], log);
  const port = await freePort();
  const uiPort = await freePort(new Set([port]));
  const child = spawn(cli, devServerArgs({ port: port!, uiPort: uiPort!, logLevel: 'error' }), { stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; !(await portOpen(port)); i++) {
    if (child.exitCode !== null) throw new Error(`the Temporal dev server exited (${child.exitCode})`);
    if (i > 300) throw new Error('the Temporal dev server did not listen within 60 s');
    await sleep(200);
  }
  return { address: `127.0.0.1:${port}`, child, stop: () => stopChild(child) };
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

/** The stand-in's process, serving n simulated clusters. */
async function startStandIn(n: number): Promise<{
  port: number;
  child: ChildProcess;
  stats(): Promise<Record<string, unknown>>;
}> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(__dirname, 'fleet-stand-in.ts'), '--clusters', String(n), '--objects', String(OBJECTS)],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /\{"port":(\d+)\}/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the stand-in exited (${code})`)));
  });
  const stats = async () => (await (await fetch(`http://127.0.0.1:${port}/stand-in/stats`)).json()) as Record<string, unknown>;
  return { port, child, stats };
}

/** An event type's name without its prefix (the history holds the proto enum's number). */
function eventTypeName(t: unknown): string {
  const n = typeof t === 'number' ? t : Number(t);
  return (temporal.api.enums.v1.EventType[n] ?? '').replace(/^EVENT_TYPE_/, '');
}

/** At most `limit` of fn at once over items. */
async function eachLimited<T>(items: T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** Every execution started since `since` (the server is the bench's own: they are the campaign's), read whole. */
async function histories(client: Client, since: Date, campaignId: string): Promise<Histories & { taskQueues: Set<string> }> {
  const runs: Array<{
    workflowId: string;
    runId: string;
    type: string;
    taskQueue: string;
  }> = [];
  for await (const w of client.workflow.list({
    query: `StartTime >= '${since.toISOString()}'`,
  }))
    runs.push({
      workflowId: w.workflowId,
      runId: w.runId,
      type: w.type,
      taskQueue: w.taskQueue,
    });
  const out: Histories & { taskQueues: Set<string> } = {
    executions: runs.length,
    byType: {},
    events: 0,
    actions: 0,
    bytes: 0,
    largest: { workflowId: '', type: '', events: 0, bytes: 0 },
    campaign: { events: 0, actions: 0, runs: 0 },
    taskQueues: new Set(),
  };
  await eachLimited(runs, 16, async (r) => {
    const h = await client.workflow.getHandle(r.workflowId, r.runId).fetchHistory();
    const events = h.events ?? [];
    const bytes = temporal.api.history.v1.History.encode(h).finish().length;
    let actions = 0;
    for (const e of events) if (ACTIONS.has(eventTypeName(e.eventType))) actions++;
    out.byType[r.type] = (out.byType[r.type] ?? 0) + 1;
    out.events += events.length;
    out.actions += actions;
    out.bytes += bytes;
    out.taskQueues.add(r.taskQueue);
    if (events.length > out.largest.events)
      out.largest = {
        workflowId: r.workflowId,
        type: r.type,
        events: events.length,
        bytes,
      };
    if (r.workflowId === campaignId) {
      out.campaign.events += events.length;
      out.campaign.actions += actions;
      out.campaign.runs++;
    }
  });
  return out;
}

/** The largest history among the clusters' registrations. */
async function largestRegistration(client: Client, names: string[]): Promise<{ events: number; bytes: number }> {
  let largest = { events: 0, bytes: 0 };
  await eachLimited(names, 16, async (c) => {
    const h = await client.workflow.getHandle(clusterRegistrationId(c)).fetchHistory();
    const events = h.events?.length ?? 0;
    if (events > largest.events)
      largest = {
        events,
        bytes: temporal.api.history.v1.History.encode(h).finish().length,
      };
  });
  return largest;
}

/** Pollers DescribeTaskQueue reports over the queues, workflow and activity. */
async function pollers(connection: Connection, namespace: string, queues: Set<string>): Promise<number> {
  let n = 0;
  await eachLimited([...queues], 16, async (name) => {
    for (const taskQueueType of [
      temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
      temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    ]) {
      const d = await connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name },
        taskQueueType,
      });
      n += d.pollers?.length ?? 0;
    }
  });
  return n;
}

/** Waits until every named cluster's registration holds its uid. */
async function registered(client: Client, names: string[], timeoutMs: number): Promise<void> {
  const left = new Set(names);
  const deadline = Date.now() + timeoutMs;
  while (left.size > 0) {
    if (Date.now() > deadline) throw new Error(`${left.size} of ${names.length} clusters did not register within ${timeoutMs / 1000} s`);
    await eachLimited([...left], 32, async (c) => {
      const d = await client.workflow
        .getHandle(clusterRegistrationId(c))
        .describe()
        .catch(() => undefined);
      if ((d?.memo as { uid?: string } | undefined)?.uid) left.delete(c);
    });
    if (left.size > 0) await sleep(1000);
  }
}

async function round(
  client: Client,
  connection: Connection,
  server: { address: string; child: ChildProcess },
  n: number,
  scratch: string,
): Promise<Round> {
  const address = server.address;
  const tag = Date.now().toString(36);
  const total = n + AWAY;
  const standIn = await startStandIn(total);
  const names = Array.from({ length: total }, (_, i) => `f${tag}-${i}`);
  const served = names.slice(0, n);
  const dir = path.join(scratch, `pool-${tag}`);
  mkdirSync(dir);
  served.forEach((c, i) => writeFileSync(path.join(dir, `${c}.kubeconfig`), standInKubeconfig(standIn.port, i, c)));
  const base = `bench-fleet-${tag}`;
  const startPool = (kubeconfigs: string) =>
    spawn(
      process.execPath,
      [
        ...(values['pool-cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['pool-cpu-prof']] : []),
        path.join(root, 'bin', 'svm.js'),
        'worker',
      ],
      {
        env: {
          ...process.env,
          TEMPORAL_ADDRESS: address,
          TEMPORAL_NAMESPACE: 'default',
          TEMPORAL_TASK_QUEUE: base,
          SVM_KUBECONFIG_DIR: kubeconfigs,
          SVM_BRIDGE: 'false',
          SVM_WATCH_AGREEMENT: 'false',
          SVM_LOG_LEVEL: values['pool-log'] ? 'info' : 'warn',
        },
        stdio: ['ignore', values['pool-log'] ? openSync(values['pool-log'], 'a') : 'ignore', 'inherit'],
      },
    );
  if (AWAY > 0) {
    // The clusters away were there once: served by a pool of their own until registered (so the campaign knows
    // them, as a fleet knows a cluster that went away), then that pool is killed, and no worker serves them again.
    const awayDir = path.join(scratch, `away-${tag}`);
    mkdirSync(awayDir);
    names.slice(n).forEach((c, i) => writeFileSync(path.join(awayDir, `${c}.kubeconfig`), standInKubeconfig(standIn.port, n + i, c)));
    const gone = startPool(awayDir);
    try {
      await registered(client, names.slice(n), 120_000);
    } finally {
      gone.kill('SIGKILL');
      await new Promise((r) => (gone.exitCode !== null || gone.signalCode !== null ? r(undefined) : gone.once('exit', r)));
    }
    log(`${AWAY} clusters registered, and their pool killed: away from now on`);
  }
  const tPool = performance.now();
  const pool = startPool(dir);
  const pid = pool.pid!;
  try {
    await registered(client, served, Math.max(120_000, n * 3000));
    const registeredSeconds = (performance.now() - tPool) / 1000;
    let idle = 0;
    for (let stable = 0, i = 0; stable < 3 && i < 60; i++) {
      await sleep(1000);
      const now = kib(pid, 'VmRSS');
      stable = Math.abs(now - idle) < 1024 + idle / 100 ? stable + 1 : 0;
      idle = now;
    }
    log(`${n} served cluster(s) registered in ${registeredSeconds.toFixed(0)} s; pool pid ${pid} idle at ${mib(idle)} MiB`);
    const name = `bench-${tag}`;
    const campaignId = campaignWorkflowId(name);
    const since = new Date(Date.now() - 1000);
    const deadlineSeconds = AWAY > 0 ? Math.max(60, 2 * PERIODS * UNREACHABLE_AFTER + 30) : 3600;
    const t0 = performance.now();
    const h = await client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
      workflowId: campaignId,
      taskQueue: fleetTaskQueue(base),
      args: [
        {
          clusters: names,
          migrate: [`${BENCH_RESOURCE}.${BENCH_GROUP}`],
          canary: names[0],
          parallel: Math.min(PARALLEL, Math.max(1, total - 1)),
          unreachableAfterSeconds: UNREACHABLE_AFTER,
          deadlineSeconds,
        },
      ],
    });
    const cpu0 = {
      pool: cpuSeconds(pid),
      temporal: cpuSeconds(server.child.pid),
      standIn: cpuSeconds(standIn.child.pid),
      bench: process.cpuUsage(),
    };
    const awayHistory: Round['awayHistory'] = [];
    const result = h.result() as Promise<CampaignStatus>;
    let ended = false;
    void result.then(
      () => (ended = true),
      () => (ended = true),
    );
    // Every minute: the clusters ended and running (their members, counted by visibility: a query would wait for a
    // workflow slot of the pool it measures), so that a slowing campaign shows where.
    const progress: NonNullable<Round['progress']> = [];
    const members = (status: string) =>
      client.workflow
        .count(`WorkflowType = 'campaignMember' AND MigrationCampaign = '${name}' AND ExecutionStatus = '${status}'`)
        .then((c) => c.count)
        .catch(() => NaN);
    const watching = (async () => {
      for (let m = 1; !ended; m++) {
        while (!ended && performance.now() < t0 + m * 60_000) await sleep(1000);
        if (ended) break;
        const [done, running] = [await members('Completed'), await members('Running')];
        const events = (await h.describe().catch(() => undefined))?.historyLength ?? 0;
        const cpu = {
          pool: cpuSeconds(pid) - cpu0.pool,
          temporal: cpuSeconds(server.child.pid) - cpu0.temporal,
          standIn: cpuSeconds(standIn.child.pid) - cpu0.standIn,
        };
        progress.push({ seconds: Math.round((performance.now() - t0) / 1000), ended: done, running, campaignEvents: events, ...cpu });
        log(
          `campaign at ${m} min: ${done} of ${total} ended, ${running} members running; its run ${events} events; CPU s since its start: pool ${cpu.pool.toFixed(0)}, temporal ${cpu.temporal.toFixed(0)}, stand-in ${cpu.standIn.toFixed(0)}`,
        );
      }
    })();
    if (AWAY > 0)
      for (const k of [PERIODS, 2 * PERIODS]) {
        const at = t0 + k * UNREACHABLE_AFTER * 1000;
        while (!ended && performance.now() < at) await sleep(1000);
        if (ended) break;
        const hs = await histories(client, since, campaignId);
        awayHistory.push({
          periods: k,
          seconds: Math.round((performance.now() - t0) / 1000),
          largest: hs.largest,
          campaignEvents: hs.campaign.events,
        });
        log(`after ${k} periods of ${UNREACHABLE_AFTER} s: largest history ${JSON.stringify(hs.largest)}`);
      }
    const budget = setTimeout(() => void h.terminate('bench-fleet: over --budget-seconds').catch(() => undefined), BUDGET * 1000);
    const status = await result.finally(() => clearTimeout(budget));
    const seconds = (performance.now() - t0) / 1000;
    const peak = kib(pid, 'VmHWM');
    const benchCpu = process.cpuUsage(cpu0.bench);
    const cpu = {
      pool: Number((cpuSeconds(pid) - cpu0.pool).toFixed(1)),
      temporal: Number((cpuSeconds(server.child.pid) - cpu0.temporal).toFixed(1)),
      standIn: Number((cpuSeconds(standIn.child.pid) - cpu0.standIn).toFixed(1)),
      bench: Number(((benchCpu.user + benchCpu.system) / 1e6).toFixed(1)),
    };
    await watching;
    log(`CPU seconds during the campaign: ${JSON.stringify(cpu)}`);
    const stats = (await standIn.stats()) as {
      writes: number;
      objectsWritten: number;
      maxPerObject: number;
      requests: number;
      unserved: Record<string, number>;
    };
    // Every served cluster's objects written; with clusters away, the campaign ends past its deadline (or however a
    // campaign says so), not failed.
    const ok = AWAY > 0 ? !['Failed', 'Aborted', 'Stopped', 'Succeeded'].includes(status.phase) : status.phase === 'Succeeded';
    if (!ok || stats.objectsWritten !== n * OBJECTS)
      throw new Error(
        `the campaign ended ${status.phase} (${AWAY > 0 ? 'past its deadline' : 'Succeeded'} wanted), ${stats.objectsWritten} of ${n * OBJECTS} objects written: ${JSON.stringify(status).slice(0, 2000)}`,
      );
    const hs = await histories(client, since, campaignId);
    if (AWAY > 0)
      awayHistory.push({
        periods: Math.floor(seconds / UNREACHABLE_AFTER),
        seconds: Math.round(seconds),
        largest: hs.largest,
        campaignEvents: hs.campaign.events,
      });
    const queues = new Set([fleetTaskQueue(base), base, ...served.map((c) => clusterTaskQueue(base, c)), ...hs.taskQueues]);
    const polls = await pollers(connection, 'default', queues);
    const reg = await largestRegistration(client, served);
    const r: Round = {
      clusters: n,
      away: AWAY,
      estimate: false,
      seconds: Number(seconds.toFixed(1)),
      secondsPerCluster: Number((seconds / total).toFixed(3)),
      registeredSeconds: Math.round(registeredSeconds),
      campaign: { events: hs.campaign.events, actions: hs.campaign.actions },
      perCluster: {
        events: Number((hs.events / total).toFixed(1)),
        actions: Number((hs.actions / total).toFixed(1)),
        workflows: Number((hs.executions / total).toFixed(2)),
      },
      largestHistory: hs.largest,
      largestRegistration: reg,
      rss: { idleMiB: mib(idle), peakMiB: mib(peak) },
      cpu,
      progress,
      longPolls: {
        pollers: polls,
        taskQueues: queues.size,
        perServedCluster: Number((polls / n).toFixed(2)),
      },
      standIn: {
        writes: stats.writes,
        objectsWritten: stats.objectsWritten,
        maxWritesPerObject: stats.maxPerObject,
        requests: stats.requests,
        unserved: stats.unserved,
      },
      ...(AWAY > 0 ? { awayHistory } : {}),
      phase: status.phase,
    };
    log(`executions by type: ${JSON.stringify(hs.byType)}`);
    return r;
  } finally {
    await stopChild(pool);
    await stopChild(standIn.child);
  }
}

/** A size not run: projected from the measured rounds (linear in clusters; the RSS by the slope). */
function estimated(n: number, measured: Round[], slope: FleetFigures['slope']): Round {
  const last = largest(measured);
  // From the largest size measured, by the slope (the run makes sure there is one: see the anchor in main).
  const rssSlope = slope?.rssMiBPerServedCluster ?? last.rss.idleMiB / last.clusters;
  const peakSlope = slope?.peakMiBPerServedCluster ?? last.rss.peakMiB / last.clusters;
  return {
    clusters: n,
    away: AWAY,
    estimate: true,
    seconds: Number((last.secondsPerCluster * (n + AWAY)).toFixed(0)),
    secondsPerCluster: last.secondsPerCluster,
    campaign: {
      events: Math.round((last.campaign.events / (last.clusters + AWAY)) * (n + AWAY)),
      actions: Math.round((last.campaign.actions / (last.clusters + AWAY)) * (n + AWAY)),
    },
    perCluster: last.perCluster,
    rss: {
      idleMiB: Math.round(last.rss.idleMiB + rssSlope * (n - last.clusters)),
      peakMiB: Math.round(last.rss.peakMiB + peakSlope * (n - last.clusters)),
    },
    ...(last.longPolls
      ? {
          longPolls: {
            pollers: Math.round(last.longPolls.perServedCluster * n),
            taskQueues: 0,
            perServedCluster: last.longPolls.perServedCluster,
          },
        }
      : {}),
    phase: 'estimate',
  };
}

function slopeOf(rounds: Round[]): FleetFigures['slope'] {
  // Between the two largest sizes measured (by clusters): the cost of one more served cluster where it is largest.
  const m = rounds.filter((r) => !r.estimate).sort((x, y) => x.clusters - y.clusters);
  if (m.length < 2) return undefined;
  const a = m[m.length - 2]!;
  const b = m[m.length - 1]!;
  return {
    rssMiBPerServedCluster: Number(((b.rss.idleMiB - a.rss.idleMiB) / (b.clusters - a.clusters)).toFixed(2)),
    peakMiBPerServedCluster: Number(((b.rss.peakMiB - a.rss.peakMiB) / (b.clusters - a.clusters)).toFixed(2)),
    between: [a.clusters, b.clusters],
  };
}

/** The largest size measured. */
function largest(measured: Round[]): Round {
  return measured.reduce((a, b) => (b.clusters > a.clusters ? b : a));
}

/** Why size n would not fit (time or memory), judged from the rounds measured; undefined when it would. */
function wontFit(n: number, measured: Round[]): string | undefined {
  if (measured.length === 0) return undefined;
  const e = estimated(n, measured, slopeOf(measured));
  const last = largest(measured);
  const seconds = e.seconds + (last.registeredSeconds ?? 0) * (n / last.clusters);
  if (seconds > BUDGET) return `about ${Math.round(seconds)} s (the pool's start and the campaign), over --budget-seconds ${BUDGET}`;
  if (e.rss.peakMiB * 1024 * 1024 > freemem() * 0.6)
    return `about ${e.rss.peakMiB} MiB of pool RSS, over 60% of the ${mib(freemem() / 1024)} MiB free`;
  return undefined;
}

async function main(): Promise<void> {
  const server = await startTemporal();
  log(`Temporal dev server at ${server.address}`);
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection, namespace: 'default' });
  const scratch = mkdtempSync(path.join(tmpdir(), 'svm-bench-fleet-'));
  const rounds: Round[] = [];
  try {
    for (const n of SIZES) {
      const measured = rounds.filter((r) => !r.estimate);
      const why = wontFit(n, measured);
      if (why) {
        // A slope needs two sizes: when only one was measured, a tenth of it is measured too (an anchor round).
        if (measured.length === 1 && measured[0]!.clusters >= 4) {
          const anchor = Math.max(2, Math.floor(measured[0]!.clusters / 10));
          log(`${n} clusters will not fit (${why}); ${anchor} clusters measured first, for the slope`);
          const r = await round(client, connection, server, anchor, scratch);
          rounds.push(r);
          log(JSON.stringify(r));
          measured.push(r);
        }
        log(`${n} clusters not run: ${why}; estimated from the measured slope`);
        rounds.push(estimated(n, measured, slopeOf(measured)));
        continue;
      }
      log(`${n} clusters${AWAY > 0 ? ` and ${AWAY} away` : ''}: ${OBJECTS} objects each`);
      const r = await round(client, connection, server, n, scratch);
      rounds.push(r);
      log(JSON.stringify(r));
    }
  } finally {
    await connection.close();
    await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
  const measured = rounds.filter((r) => !r.estimate).sort((x, y) => x.clusters - y.clusters);
  const slope = slopeOf(rounds);
  const last = measured[measured.length - 1]!;
  const first = measured[0]!;
  const perCluster = slope?.rssMiBPerServedCluster ?? NaN;
  const campaignEventsPerCluster = last.campaign.events / (last.clusters + AWAY);
  const figures: FleetFigures = {
    date: new Date().toISOString(),
    command: `npm run bench:fleet -- ${process.argv.slice(2).join(' ')}`.trim(),
    note: values.note,
    objects: OBJECTS,
    rounds,
    slope,
    thousandClusters: {
      note: 'an estimate from the measured rounds, not a measurement: linear in clusters, the RSS by the slope between the two sizes measured',
      historyEvents: Math.round(1000 * last.perCluster.events),
      actions: Math.round(1000 * last.perCluster.actions),
      campaignEvents: Math.round(1000 * campaignEventsPerCluster),
      campaignsNeeded: Math.ceil((1000 * campaignEventsPerCluster) / 40_000),
      poolRssMiBPerCluster: Number(perCluster.toFixed(1)),
      poolsOf1GiB:
        Number.isFinite(perCluster) && perCluster > 0
          ? Math.ceil(1000 / Math.floor((1024 - first.rss.idleMiB) / perCluster + 1))
          : undefined,
    },
  };
  mkdirSync(values.out, { recursive: true });
  const file = path.join(values.out, `bench-fleet-${figures.date.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(figures, null, 2) + '\n');
  for (const r of rounds) {
    const what = r.estimate ? 'ESTIMATE (not run)' : r.phase;
    process.stdout.write(
      `clusters ${r.clusters}${r.away ? ` + ${r.away} away` : ''} [${what}]: wall ${r.seconds} s; largest history ${r.largestHistory ? `${r.largestHistory.events} events / ${r.largestHistory.bytes} bytes (${r.largestHistory.type})` : '-'}; per cluster ${r.perCluster.events} events, ${r.perCluster.actions} actions, ${r.perCluster.workflows} workflows; campaign's own ${r.campaign.events} events; CPU s pool ${r.cpu?.pool ?? '-'}, temporal ${r.cpu?.temporal ?? '-'}, stand-in ${r.cpu?.standIn ?? '-'}; pool RSS idle ${r.rss.idleMiB} MiB, peak ${r.rss.peakMiB} MiB; long polls per served cluster ${r.longPolls?.perServedCluster ?? '-'}\n`,
    );
    for (const a of r.awayHistory ?? [])
      process.stdout.write(
        `  away: after ${a.periods} periods (${a.seconds} s) the largest history is ${a.largest.events} events (${a.largest.type} ${a.largest.workflowId}); the campaign's own ${a.campaignEvents}\n`,
      );
  }
  if (slope)
    process.stdout.write(
      `pool RSS slope between ${slope.between[0]} and ${slope.between[1]} served clusters: ${slope.rssMiBPerServedCluster} MiB idle, ${slope.peakMiBPerServedCluster} MiB peak per served cluster\n`,
    );
  process.stdout.write(`written ${file}\n`);
}

void main().catch((err: unknown) => {
  process.stderr.write(`bench-fleet: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
