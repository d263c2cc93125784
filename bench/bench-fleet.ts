/**
 * `npm run bench:fleet [-- --clusters 1,4 --objects N --dir DIR --out DIR]`: what a campaign costs per cluster.
 *
 * One plane stands for the cluster: a pool (`svm worker` with SVM_KUBECONFIG_DIR) serves N clusters whose
 * kubeconfigs all lead to it, each a cluster of its own to svm (its task queue, its worker, its registration). Since
 * a cluster's kube-system uid is pinned to one name (docs/fleet.md, "The uid is pinned"), one plane is one cluster:
 * N is 1 until the bench gives each simulated cluster an identity of its own (a stand-in API each). A
 * campaign migrates the same CRD (--objects objects) in each, all N at once after the canary. For each N:
 *   - the campaign's seconds (start to result) and seconds per cluster;
 *   - Temporal history events: the campaign's own, and per cluster (its step, migrateAll and migrations), and the
 *     actions among them (workflows and children started, activities and timers scheduled, signals, upserts);
 *   - the pool's RSS idle and at its peak, and the RSS each served cluster adds (the slope between the two Ns).
 * Then what 1,000 clusters would cost from those figures, written down as an estimate. etcd is checked: every
 * object at v2 after each campaign. Not part of `npm test`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { claimOf, forget } from '../src/kube/cluster-identity';
import { temporal } from '@temporalio/proto';
import { campaignWorkflowId, type CampaignStatus } from '../src/contract/fleet';
import { fleetTaskQueue } from '../src/api/cluster';
import { storedVersions } from '../src/dev/etcd-truth';
import { defaultDevDir, readEnv, up } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd } from '../src/dev/test-crd';
import { installCrds } from '../src/client/cli-migrate';
import { KubeClient } from '../src/kube/client';
import { positiveWholes } from './lib/args';
import { imageEnv } from './lib/image-env';

const root = path.join(__dirname, '..');
const { values } = parseArgs({
  options: {
    clusters: { type: 'string', default: '1' },
    objects: { type: 'string', default: '100' },
    dir: { type: 'string' },
    out: { type: 'string', default: path.join(root, 'docs', 'bench') },
  },
});
const SIZES = values.clusters.split(',').map((n) => Number(n));
if (SIZES.some((n) => n !== 1))
  throw new Error(
    '--clusters: 1 only: the plane is one cluster, whose kube-system uid svm pins to one name (docs/fleet.md, "The uid is pinned"); several simulated clusters need an identity each (a stand-in API each), which this bench does not make yet',
  );
const [OBJECTS] = positiveWholes(values, ['objects']) as [number];
const t00 = performance.now();
const log = (s: string) => process.stderr.write(`[fleet ${((performance.now() - t00) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const kib = (pid: number, field: 'VmRSS' | 'VmHWM') =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);

/** History event types that are Temporal actions (as Temporal Cloud counts them, roughly). */
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

export interface Round {
  clusters: number;
  seconds: number;
  secondsPerCluster: number;
  campaign: { events: number; actions: number };
  perCluster: { events: number; actions: number; workflows: number };
  rss: { idleMiB: number; peakMiB: number };
  phase: string;
}

/** What bench-fleet writes (bench-all.ts reads it). */
export interface FleetFigures {
  date: string;
  objects: number;
  rounds: Round[];
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

async function historyOf(client: Client, workflowId: string, runId?: string): Promise<{ events: number; actions: number }> {
  const h = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const events = h.events ?? [];
  let actions = 0;
  for (const e of events) if (ACTIONS.has(eventTypeName(e.eventType))) actions++;
  return { events: events.length, actions };
}

/** An event type's name without its prefix (the history holds the proto enum's number). */
function eventTypeName(t: unknown): string {
  const n = typeof t === 'number' ? t : Number(t);
  return (temporal.api.enums.v1.EventType[n] ?? '').replace(/^EVENT_TYPE_/, '');
}

async function main(): Promise<void> {
  const dir = values.dir ?? defaultDevDir();
  if (!existsSync(path.join(dir, 'env'))) await up({ dir, log });
  const env = readEnv(dir) as Record<string, string>;
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG);
  const connection = await Connection.connect({ address: env.TEMPORAL_ADDRESS! });
  const client = new Client({ connection, namespace: env.TEMPORAL_NAMESPACE });
  const scratch = mkdtempSync(path.join(tmpdir(), 'svm-bench-fleet-'));
  const rounds: Round[] = [];
  const forgotten: string[] = [];
  let pool: ChildProcess | undefined;
  try {
    await installCrds(kube);
    for (const n of SIZES) {
      const tag = `${Date.now().toString(36)}`;
      const crd = testCrd(`fleet-${tag}.svm.test`);
      await applyCrd(kube, crd, 'v1');
      await createObjects(kube, crd, 'v1', OBJECTS, { namespace: `bench-fleet-${tag}` });
      await applyCrd(kube, crd, 'v2');
      const names = Array.from({ length: n }, (_, i) => `b${tag}-c${i + 1}`);
      const kubeconfigs = path.join(scratch, `pool-${tag}`);
      mkdirSync(kubeconfigs);
      for (const c of names) copyFileSync(env.KUBECONFIG!, path.join(kubeconfigs, `${c}.kubeconfig`));
      // The plane's uid free for this round's name (an earlier round's, or a test's, forgotten), and forgotten after.
      const uid = (await kube.getJson<{ metadata: { uid: string } }>('/api/v1/namespaces/kube-system')).metadata.uid;
      const holder = await claimOf(client, uid);
      if (holder) await forget(client, holder, 'bench-fleet (a round of its own)');
      forgotten.push(...names);
      const base = `bench-fleet-${tag}`;
      pool = spawn(process.execPath, [path.join(root, 'bin', 'svm.js'), 'worker'], {
        env: {
          ...process.env,
          ...imageEnv(),
          TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
          TEMPORAL_TASK_QUEUE: base,
          SVM_KUBECONFIG_DIR: kubeconfigs,
          SVM_BRIDGE: 'false',
          SVM_METRICS_PORT: '0',
          SVM_LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const pid = pool.pid!;
      // Idle: every cluster registered, and the peak RSS still for 3 s.
      for (let i = 0; i < 120; i++) {
        const registered = await Promise.all(
          names.map((c) =>
            client.workflow
              .getHandle(`svm-cluster/${c}`)
              .describe()
              .then((d) => (d.memo as { uid?: string } | undefined)?.uid !== undefined)
              .catch(() => false),
          ),
        );
        if (registered.every(Boolean)) break;
        await sleep(500);
      }
      let idle = 0;
      for (let stable = 0, i = 0; stable < 3 && i < 60; i++) {
        await sleep(1000);
        const now = kib(pid, 'VmRSS');
        stable = Math.abs(now - idle) < 1024 ? stable + 1 : 0;
        idle = now;
      }
      log(`${n} cluster(s): pool pid ${pid} idle at ${(idle / 1024).toFixed(0)} MiB; campaign over ${OBJECTS} objects each`);
      const name = `bench-${tag}`;
      const t0 = performance.now();
      const h = await client.workflow.start('fleetCampaign', {
        workflowId: campaignWorkflowId(name),
        taskQueue: fleetTaskQueue(base),
        args: [{ clusters: names, migrate: [crd.name], canary: names[0], parallel: Math.max(1, n - 1), unreachableAfterSeconds: 30 }],
      });
      const result = (await h.result()) as CampaignStatus;
      const seconds = (performance.now() - t0) / 1000;
      const peak = kib(pid, 'VmHWM');
      const v = (await storedVersions(env.ETCD_ENDPOINTS!, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion;
      if (result.phase !== 'Succeeded' || v[`${crd.group}/v2`] !== OBJECTS)
        throw new Error(`the campaign ended ${result.phase}, etcd holds ${JSON.stringify(v)}: ${JSON.stringify(result.rows)}`);
      const campaign = await historyOf(client, campaignWorkflowId(name));
      let events = 0;
      let actions = 0;
      let workflows = 0;
      for (const c of names) {
        for await (const w of client.workflow.list({ query: `TaskQueue = '${base}/cluster/${c}'` })) {
          const hist = await historyOf(client, w.workflowId, w.runId);
          events += hist.events;
          actions += hist.actions;
          workflows++;
        }
      }
      const round: Round = {
        clusters: n,
        seconds: Number(seconds.toFixed(1)),
        secondsPerCluster: Number((seconds / n).toFixed(2)),
        campaign,
        perCluster: { events: Math.round(events / n), actions: Math.round(actions / n), workflows: workflows / n },
        rss: { idleMiB: Math.round(idle / 1024), peakMiB: Math.round(peak / 1024) },
        phase: result.phase,
      };
      rounds.push(round);
      log(JSON.stringify(round));
      pool.kill('SIGTERM');
      await new Promise((r) => pool!.once('exit', r));
      pool = undefined;
    }
  } finally {
    pool?.kill('SIGKILL');
    for (const c of forgotten) await forget(client, c, 'bench-fleet (its end)').catch(() => undefined);
    kube.close();
    await connection.close();
    rmSync(scratch, { recursive: true, force: true });
  }
  const first = rounds[0]!;
  const last = rounds[rounds.length - 1]!;
  const rssPerCluster = last.clusters > first.clusters ? (last.rss.idleMiB - first.rss.idleMiB) / (last.clusters - first.clusters) : NaN;
  const campaignEventsPerCluster = last.campaign.events / last.clusters;
  const thousand = {
    note: 'an estimate from the figures above, not a measurement: linear in clusters; one plane stood for every cluster; steps of seconds, so no probe of a running step is counted (the campaign asks each running cluster again every unreachableAfterSeconds, about ten events each time)',
    historyEvents: Math.round(1000 * (last.perCluster.events + campaignEventsPerCluster)),
    actions: Math.round(1000 * (last.perCluster.actions + last.campaign.actions / last.clusters)),
    campaignEvents: Math.round(1000 * campaignEventsPerCluster),
    campaignsNeeded: Math.ceil((1000 * campaignEventsPerCluster) / 40_000),
    poolRssMiBPerCluster: Number(rssPerCluster.toFixed(1)),
    poolsOf1GiB: Number.isFinite(rssPerCluster) ? Math.ceil(1000 / Math.floor((1024 - first.rss.idleMiB) / rssPerCluster + 1)) : undefined,
  };
  const figures: FleetFigures = { date: new Date().toISOString(), objects: OBJECTS, rounds, thousandClusters: thousand };
  mkdirSync(values.out, { recursive: true });
  const file = path.join(values.out, `bench-fleet-${figures.date.slice(0, 10)}.json`);
  writeFileSync(file, JSON.stringify(figures, null, 2) + '\n');
  for (const r of rounds)
    process.stdout.write(
      `clusters ${r.clusters}: ${r.seconds}s (${r.secondsPerCluster}s/cluster); campaign ${r.campaign.events} events (${r.campaign.actions} actions); per cluster ${r.perCluster.events} events, ${r.perCluster.actions} actions, ${r.perCluster.workflows} workflows; pool RSS idle ${r.rss.idleMiB} MiB, peak ${r.rss.peakMiB} MiB\n`,
    );
  process.stdout.write(`1,000 clusters (estimate): ${JSON.stringify(thousand)}\n`);
  process.stdout.write(`written ${file}\n`);
}

void main().catch((err: unknown) => {
  process.stderr.write(`bench-fleet: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
