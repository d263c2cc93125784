/**
 * `npm run bench:pool [-- --clusters 10,100 --out DIR]`: what a pool costs per served cluster (docs/fleet.md, "A
 * pool of workers in a management cluster"; issue 60's goal: at most 2 MiB of RSS and 2 long polls per cluster).
 *
 * For each N: a pool (`svm worker` with SVM_KUBECONFIG_DIR, a child process) serves N clusters, each with an
 * identity of its own: a stand-in API (below, in this process) answers each cluster under a path of its own with a
 * kube-system uid of its own, and its /version; everything else is 404. The kubeconfig of each cluster comes from
 * `kubeconfigFor`, which another stand-in (a fuller simulated API) can replace. Measured:
 *   - the pool's RSS once every cluster is registered (idle), and after it served a task per cluster: a
 *     rewriteManagedFields workflow placed on the pool's queue, which enters its cluster (the clusterIdentity
 *     activity, by its header) and is then refused by that cluster's own activity (NotEnabled: the worker has no
 *     managedFields identity); each run's failure type is checked, so a task run for the wrong cluster would show;
 *   - the pollers Temporal sees on the pool's queue (DescribeTaskQueue, workflow and activity) and the long polls
 *     the pool's settings allow, whatever N;
 *   - the slope between consecutive Ns, in MiB per served cluster (not the total divided by N).
 * Temporal is a dev server of this bench (in memory). Written to <out>/pool-rss-<date>.json (docs/bench by default). Not part
 * of `npm test`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal as proto } from '@temporalio/proto';
import { poolTaskQueue } from '../src/api/cluster';
import { managedFieldsStart } from '../src/contract/start-options';
import { Placement } from '../src/contract/placement';
import { pinOf } from '../src/kube/cluster-identity';
import { startOnFreePort, portOpen } from '../src/dev/ports';
import { ensureTools } from '../src/dev/tools';
import { loadWorkerSettings } from '../src/worker/config';
import { activityPolls } from '../src/worker/worker';
import { devServerArgs } from '../src/dev/local-temporal';

const root = path.join(__dirname, '..');
const { values } = parseArgs({
  options: {
    clusters: { type: 'string', default: '10,100' },
    out: { type: 'string', default: path.join(root, 'docs', 'bench') },
  },
});
const SIZES = values.clusters.split(',').map((n) => Number(n));
if (SIZES.some((n) => !Number.isInteger(n) || n < 1) || SIZES.length < 2)
  throw new Error('--clusters: two or more whole numbers, comma separated (10,100)');
const t00 = performance.now();
const log = (s: string) => process.stderr.write(`[pool ${((performance.now() - t00) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

// ------------------------------------------------------------------ the stand-in API

/** A stand-in API for many clusters: cluster i under `/c/<i>`, its kube-system uid its own. Not Kubernetes. */
async function standIn(n: number): Promise<{ port: number; uids: string[]; close(): Promise<void> }> {
  const uids = Array.from({ length: n }, () => randomUUID());
  const server = http.createServer((req, res) => {
    const m = /^\/c\/(\d+)(\/[^?]*)/.exec(req.url ?? '');
    const uid = m ? uids[Number(m[1])] : undefined;
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (!uid) return send(404, { kind: 'Status', code: 404, reason: 'NotFound' });
    if (m![2] === '/api/v1/namespaces/kube-system')
      return send(200, { kind: 'Namespace', apiVersion: 'v1', metadata: { name: 'kube-system', uid } });
    if (m![2] === '/version') return send(200, { gitVersion: 'v1.37.0-stand-in' });
    send(404, {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      code: 404,
      reason: 'NotFound',
      message: 'not served by the stand-in',
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, uids, close: () => new Promise((r) => server.close(() => r())) };
}

/** The kubeconfig of cluster i (swap this for another stand-in's). */
let kubeconfigFor = (port: number, i: number, name: string): string =>
  [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{name: ${name}, cluster: {server: "http://127.0.0.1:${port}/c/${i}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: ${name}, user: {token: stand-in}}]`,
    `contexts: [{name: ${name}, context: {cluster: ${name}, user: ${name}}}]`,
    `current-context: ${name}`,
    '',
  ].join('\n');
export function useKubeconfigs(f: typeof kubeconfigFor): void {
  kubeconfigFor = f;
}

// ------------------------------------------------------------------ Temporal

async function devServer(): Promise<{ address: string; stop(): void }> {
  const { temporal } = ensureTools(['temporal-cli'], (l) => log(l));
  const { child, port } = await startOnFreePort(
    'the bench Temporal dev server',
    async ([port, uiPort]) => {
      let stderr = '';
      const child: ChildProcess = spawn(temporal, devServerArgs({ port: port!, uiPort: uiPort!, logLevel: 'error' }), {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)));
      const deadline = Date.now() + 60_000;
      while (!(await portOpen(port!))) {
        if (child.exitCode !== null) throw new Error(`the dev server exited (${child.exitCode}): ${stderr.trim()}`);
        if (Date.now() > deadline) throw new Error('the dev server did not answer in 60 s');
        await sleep(200);
      }
      return { child, port: port! };
    },
    { count: 2 },
  );
  return { address: `127.0.0.1:${port}`, stop: () => void child.kill('SIGTERM') };
}

// ------------------------------------------------------------------ one size

interface Figures {
  clusters: number;
  idleMiB: number;
  afterTasksMiB: number;
  peakMiB: number;
  registeredSeconds: number;
  tasksSeconds: number;
  pollers: { workflow: number; activity: number };
}

async function measure(n: number, client: Client, address: string): Promise<Figures> {
  const api = await standIn(n);
  const dir = mkdtempSync(path.join(tmpdir(), 'svm-pool-bench-'));
  const kubeconfigs = path.join(dir, 'clusters');
  mkdirSync(kubeconfigs);
  const names = Array.from({ length: n }, (_, i) => `b${randomUUID().slice(0, 6)}-${i}`);
  names.forEach((name, i) => writeFileSync(path.join(kubeconfigs, `${name}.kubeconfig`), kubeconfigFor(api.port, i, name)));
  const base = `bench-pool-${randomUUID().slice(0, 8)}`;
  const queue = poolTaskQueue(base, 'bench');
  const pool = spawn(process.execPath, [path.join(root, 'bin', 'svm.js'), 'worker'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_TASK_QUEUE: base,
      SVM_KUBECONFIG_DIR: kubeconfigs,
      SVM_POOL_NAME: 'bench',
      SVM_POOL_RESCAN_SECONDS: '15',
      SVM_METRICS_PORT: '0',
      // No leases nor watches in the stand-in: the leader's singletons and the request samples are off.
      SVM_BRIDGE: 'false',
      SVM_WATCH_AGREEMENT: 'false',
      SVM_REQUEST_SAMPLE_SECONDS: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logged: Buffer[] = [];
  pool.stdout!.on('data', (d: Buffer) => logged.push(d));
  pool.stderr!.on('data', (d: Buffer) => logged.push(d));
  // SVM_BENCH_POOL_LOG=<file>: the pool's log lines, for a run that goes wrong.
  if (process.env.SVM_BENCH_POOL_LOG) {
    const file = createWriteStream(process.env.SVM_BENCH_POOL_LOG);
    pool.stdout!.pipe(file);
    pool.stderr!.pipe(file);
  }
  try {
    const t0 = performance.now();
    // Every cluster registered on the pool's queue with its own uid (the pool confirmed each identity).
    let left = names.map((name, i) => ({ name, uid: api.uids[i]! }));
    while (left.length > 0) {
      if (pool.exitCode !== null) throw new Error(`the pool exited (${pool.exitCode}): ${Buffer.concat(logged).toString().slice(-2000)}`);
      if (performance.now() - t0 > 600_000) throw new Error(`${left.length} of ${n} clusters not registered in 600 s`);
      await sleep(2000);
      const still: typeof left = [];
      for (let i = 0; i < left.length; i += 50) {
        const batch = left.slice(i, i + 50);
        const pins = await Promise.all(batch.map((c) => pinOf(client, c.name)));
        batch.forEach((c, j) => {
          if (pins[j]?.uid !== c.uid || pins[j]?.queue !== queue) still.push(c);
        });
      }
      left = still;
      if (left.length > 0 && Math.round((performance.now() - t0) / 2000) % 15 === 0)
        log(`N=${n}: ${left.length} clusters not registered yet`);
    }
    const registeredSeconds = (performance.now() - t0) / 1000;
    log(`N=${n}: every cluster registered in ${registeredSeconds.toFixed(1)} s`);
    await sleep(10_000);
    const idleMiB = mib(pool.pid!, 'VmRSS');

    // A task per cluster, on the pool's queue, run with that cluster's activities.
    const t1 = performance.now();
    const ends: string[] = [];
    for (let i = 0; i < n; i += 50) {
      const batch = names.slice(i, i + 50);
      ends.push(
        ...(await Promise.all(
          batch.map(async (name) => {
            const here = Placement.of(base, { name, queue });
            const spec = managedFieldsStart({ resource: 'widgets.example.com', from: 'example.com/v1' });
            const h = await client.workflow.start(spec.type, here.start(spec));
            try {
              await h.result();
              return 'Succeeded';
            } catch (err) {
              // The innermost application failure's type (the activity's, through the workflow's).
              let type: string | undefined;
              for (let c: unknown = err instanceof WorkflowFailedError ? err.cause : undefined; c instanceof Error; c = c.cause)
                if (c instanceof ApplicationFailure) type = c.type ?? type;
              return type ?? String(err);
            }
          }),
        )),
      );
    }
    const tasksSeconds = (performance.now() - t1) / 1000;
    const wrong = ends.filter((e) => e !== 'NotEnabled');
    if (wrong.length > 0)
      throw new Error(`${wrong.length} of ${n} tasks did not end as their cluster's refusal (NotEnabled): ${wrong.slice(0, 5).join(', ')}`);
    log(`N=${n}: a task per cluster served in ${tasksSeconds.toFixed(1)} s (each refused by its own cluster's activity: NotEnabled)`);
    await sleep(5000);
    const afterTasksMiB = mib(pool.pid!, 'VmRSS');
    const peakMiB = mib(pool.pid!, 'VmHWM');
    const pollers = async (type: proto.api.enums.v1.TaskQueueType) =>
      (
        await client.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: queue, kind: proto.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
          taskQueueType: type,
        })
      ).pollers?.length ?? 0;
    return {
      clusters: n,
      idleMiB,
      afterTasksMiB,
      peakMiB,
      registeredSeconds,
      tasksSeconds,
      pollers: {
        workflow: await pollers(proto.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW),
        activity: await pollers(proto.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY),
      },
    };
  } finally {
    const exited = new Promise((r) => pool.once('exit', r));
    pool.kill('SIGTERM');
    await Promise.race([exited, sleep(30_000)]);
    if (pool.exitCode === null) pool.kill('SIGKILL');
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const server = await devServer();
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  const figures: Figures[] = [];
  try {
    for (const n of SIZES) figures.push(await measure(n, client, server.address));
  } finally {
    await connection.close();
    server.stop();
  }
  // The long polls one pool holds whatever N, from its settings (the defaults) as the SDK sizes them: workflow task
  // polls (normal and sticky together) at most min(10, workflow task slots), activity polls activityPolls(slots) for
  // the pool's worker and 1 for the fleet's worker beside it.
  const d = loadWorkerSettings({ TEMPORAL_ADDRESS: 'x:1' });
  const wft = Math.min(10, d.maxConcurrentWorkflowTasks);
  const polls = { pool: wft + activityPolls(d.maxConcurrentChunks * 2), fleet: wft + 1 };
  const slopes = figures.slice(1).map((f, i) => {
    const a = figures[i]!;
    return {
      from: a.clusters,
      to: f.clusters,
      idleMiBPerCluster: (f.idleMiB - a.idleMiB) / (f.clusters - a.clusters),
      afterTasksMiBPerCluster: (f.afterTasksMiB - a.afterTasksMiB) / (f.clusters - a.clusters),
    };
  });
  const lines = [
    'clusters  idle MiB  after a task each MiB  peak MiB  registered s  tasks s  pollers (workflow/activity, DescribeTaskQueue)',
    ...figures.map(
      (f) =>
        `${String(f.clusters).padStart(8)}  ${f.idleMiB.toFixed(1).padStart(8)}  ${f.afterTasksMiB.toFixed(1).padStart(21)}  ${f.peakMiB.toFixed(1).padStart(8)}  ${f.registeredSeconds.toFixed(1).padStart(12)}  ${f.tasksSeconds.toFixed(1).padStart(7)}  ${f.pollers.workflow}/${f.pollers.activity}`,
    ),
    `long polls the pool holds whatever N (its settings): ${polls.pool} (its worker: ${wft} workflow, ${polls.pool - wft} activity) + ${polls.fleet} (the fleet's worker) = ${polls.pool + polls.fleet}; per served cluster ${figures.map((f) => `${((polls.pool + polls.fleet) / f.clusters).toFixed(3)} at ${f.clusters}`).join(', ')}`,
    ...slopes.map(
      (s) =>
        `slope ${s.from} -> ${s.to}: ${s.idleMiBPerCluster.toFixed(3)} MiB per served cluster idle, ${s.afterTasksMiBPerCluster.toFixed(3)} after a task each`,
    ),
  ];
  process.stdout.write(lines.join('\n') + '\n');
  mkdirSync(values.out, { recursive: true });
  const file = path.join(values.out, `pool-rss-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ date: new Date().toISOString(), sizes: SIZES, figures, slopes, polls }, null, 2) + '\n');
  process.stdout.write(`written: ${path.relative(root, file)}\n`);
}

void main().catch((err: unknown) => {
  process.stderr.write(`bench:pool failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
