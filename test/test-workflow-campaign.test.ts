/**
 * A windowed campaign's histories stay bounded however long a cluster is away (docs/fleet.md, "Campaigns"), without
 * Kubernetes: the real Temporal dev server runs windowedCampaign, its members and a step, with test doubles for
 * the activities. Two clusters: "here", whose worker answers (its step has nothing to migrate), and "away", whose
 * task queue no worker polls. The away cluster's member probes it 80 times (every probe waits 100 ms: the test's
 * probe wait; a member continues as new past 60 events, the test's bound, about every 12 probes), and the largest
 * history of every workflow involved after 2N probe periods (7 member runs) is no larger than after N (4 runs, 3 of
 * them full). Then the campaign is aborted: the away member
 * ends Aborted, the campaign Aborted, and the rows read from the members say so.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from '@temporalio/worker';
import { clusterTaskQueue, fleetTaskQueue } from '../src/api/cluster';
import {
  campaignAbortSignal,
  campaignMemberId,
  campaignMemberStateQuery,
  campaignStatusQuery,
  campaignWorkflowId,
  CAMPAIGN_WORKFLOW_TYPE,
  type CampaignStatus,
} from '../src/contract/fleet';
import { MigrationCampaign } from '../src/contract/search-attributes';
import { CampaignHandle } from '../src/client/fleet';
import { workflowTestEnv } from './helpers/workflow-env';
import { eventually, workflowResult } from './helpers/waits';

const wf = workflowTestEnv(10_000);

// A probe period here is about 1.1 s (the 100 ms probe wait, as the server's timers fire, and a workflow task); a
// member's run holds about 12 probes. N = 40 puts 3 full runs behind the first figure and 6 behind the second: what
// the comparison needs (runs that ended at the bound on both sides). N = 100 (9 and 17 runs) took 205 s to show the
// same on 2026-12-07 (the 2-core machine, shared).
const N = 40;
const MEMBER_BOUND = 60;

/** Every run of every workflow of the campaign (the campaign and its members carry MigrationCampaign): its events. */
async function histories(name: string): Promise<Array<{ id: string; run: string; events: number }>> {
  const client = wf.env.client;
  const out: Array<{ id: string; run: string; events: number }> = [];
  for await (const w of client.workflow.list({ query: `${MigrationCampaign.name} = '${name}'` })) {
    const h = await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    out.push({ id: w.workflowId, run: w.runId, events: h.events?.length ?? 0 });
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function print(label: string, runs: Array<{ id: string; run: string; events: number }>): number {
  const byId = new Map<string, number[]>();
  for (const r of runs) byId.set(r.id, [...(byId.get(r.id) ?? []), r.events]);
  for (const [id, events] of byId)
    process.stdout.write(`# ${label}: ${id}: ${events.length} run(s), largest ${Math.max(...events)} events (${events.join(', ')})\n`);
  return Math.max(...runs.map((r) => r.events));
}

void test('a cluster away for 2N probe periods (N = 40): every history bounded, the largest after 2N periods no larger than after N', async () => {
  const base = `campaign-${Date.now()}`;
  const name = `away-${Date.now()}`;
  const client = wf.env.client;
  const pins = { here: 'uid-here', away: 'uid-away' } as Record<string, string>;
  const fleet = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue: fleetTaskQueue(base),
    workflowBundle: wf.bundle,
    activities: {
      resolveCampaignNames: (input: { clusters?: string[] }) => Promise.resolve(input.clusters ?? []),
      campaignClusterPin: (cluster: string) => Promise.resolve({ name: cluster, uid: pins[cluster] }),
    },
  });
  const here = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue: clusterTaskQueue(base, 'here'),
    workflowBundle: wf.bundle,
    activities: {
      clusterIdentity: () => Promise.resolve({ name: 'here', uid: pins.here }),
      campaignResources: () => Promise.resolve({ resources: [], refused: [] }),
    },
  });
  const rows = await fleet.runUntil(
    here.runUntil(async () => {
      const h = await client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
        taskQueue: fleetTaskQueue(base),
        workflowId: campaignWorkflowId(name),
        args: [
          { clusters: ['here', 'away'], canary: 'here', migrate: 'all', unreachableAfterSeconds: 5, deadlineSeconds: 3600 },
          { limits: { memberHistoryEvents: MEMBER_BOUND, probeWaitMs: 100 } },
        ],
        typedSearchAttributes: [{ key: MigrationCampaign, value: name }],
      });
      const away = client.workflow.getHandle(campaignMemberId(name, 'away'));
      const probed = (n: number) =>
        eventually(
          `${n} probes of the away cluster`,
          async () => {
            const s = await away.query(campaignMemberStateQuery);
            return s.probes >= n ? s : undefined;
          },
          300_000,
        );
      const atN = await probed(N);
      assert.equal(atN.row.phase, 'Unreachable');
      assert.match(atN.row.note ?? '', /no worker took a task in 5s/);
      const largestN = print(`after ${atN.probes} probes`, await histories(name));
      const at2N = await probed(2 * N);
      const largest2N = print(`after ${at2N.probes} probes`, await histories(name));
      process.stdout.write(
        `# largest history: ${largestN} events after ${atN.probes} probe periods (${atN.runs} member runs), ${largest2N} after ${at2N.probes} (${at2N.runs} runs)\n`,
      );
      assert.ok(at2N.runs > atN.runs && atN.runs >= 3, 'the away member continued as new, again and again');
      assert.ok(largest2N <= largestN, `largest history after 2N periods (${largest2N}) <= after N (${largestN})`);
      assert.ok(largest2N < 10_240, 'every history below 10,240 events');
      // The campaign: here succeeded, away in flight and unreachable.
      const running = await h.query(campaignStatusQuery);
      assert.equal(running.phase, 'Running');
      assert.deepEqual(
        { Succeeded: running.counts?.Succeeded, Unreachable: running.counts?.Unreachable },
        { Succeeded: 1, Unreachable: 1 },
      );
      assert.deepEqual(
        running.inflight?.map((f) => [f.cluster, f.phase]),
        [['away', 'Unreachable']],
      );
      // Aborted: the away member is cancelled and reports; the campaign ends Aborted.
      await h.signal(campaignAbortSignal, 'the test is over');
      const result = (await workflowResult(h, 300_000)) as CampaignStatus;
      process.stdout.write(`# result: ${JSON.stringify(result)}\n`);
      assert.equal(result.phase, 'Aborted');
      assert.equal(result.counts?.Succeeded, 1);
      assert.equal(result.counts?.Aborted, 1);
      return eventually(
        'the rows in visibility',
        async () => {
          const r = await new CampaignHandle(name, client.workflow.getHandle(campaignWorkflowId(name)), client).rows(result);
          return r.length === 2 && r.every((x) => ['Succeeded', 'Aborted'].includes(x.phase)) ? r : undefined;
        },
        30_000,
      );
    }),
  );
  assert.deepEqual(
    rows.map((r) => [r.cluster, r.phase, r.wave]),
    [
      ['here', 'Succeeded', 0],
      ['away', 'Aborted', 1],
    ],
  );
  assert.equal(rows[0]!.uid, 'uid-here', "here's verdict carries its uid");
});

/** A fleet worker whose clusters are all in conflict: each member fails at once, with no probe (no cluster worker needed). */
async function conflicted<T>(base: string, fn: () => Promise<T>): Promise<T> {
  const fleet = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue: fleetTaskQueue(base),
    workflowBundle: wf.bundle,
    activities: {
      resolveCampaignNames: (input: { clusters?: string[] }) => Promise.resolve(input.clusters ?? []),
      campaignClusterPin: (cluster: string) =>
        Promise.resolve({ name: cluster, uid: `uid-${cluster}`, conflict: `${cluster}'s worker reaches another cluster` }),
    },
  });
  return fleet.runUntil(fn);
}

void test('a campaign of 40 clusters continues as new past its bound, carrying its counts, failures and position', async () => {
  const base = `campaign-can-${Date.now()}`;
  const name = `can-${Date.now()}`;
  const clusters = Array.from({ length: 40 }, (_, i) => `c${String(i).padStart(2, '0')}`);
  const client = wf.env.client;
  const result = await conflicted(base, async () => {
    const h = await client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
      taskQueue: fleetTaskQueue(base),
      workflowId: campaignWorkflowId(name),
      args: [{ clusters, migrate: 'all', parallel: 3, maxFailureRatio: 1 }, { limits: { campaignHistoryEvents: 100 } }],
      typedSearchAttributes: [{ key: MigrationCampaign, value: name }],
    });
    return (await workflowResult(h, 300_000)) as CampaignStatus;
  });
  const runs = (await histories(name)).filter((r) => r.id === campaignWorkflowId(name));
  print('40 clusters', runs);
  assert.ok(runs.length >= 3, `the campaign continued as new (${runs.length} runs)`);
  assert.ok(
    runs.every((r) => r.events < 160),
    `each run under its bound and a window's margin: ${runs.map((r) => r.events).join(', ')}`,
  );
  assert.equal(result.phase, 'Failed');
  assert.deepEqual(result.counts, {
    clusters: 40,
    Pending: 0,
    Running: 0,
    Unreachable: 0,
    Succeeded: 0,
    Failed: 40,
    Skipped: 0,
    Aborted: 0,
  });
  assert.deepEqual(result.failures?.map((f) => f.cluster).sort(), clusters, 'every failed cluster kept, across runs');
  assert.match(result.failures?.[0]?.note ?? '', /identity is in conflict/);
  const rows = await eventually(
    'the rows in visibility',
    async () => {
      const r = await new CampaignHandle(name, client.workflow.getHandle(campaignWorkflowId(name)), client).rows(result);
      return r.length === 40 && r.every((x) => x.phase === 'Failed') ? r : undefined;
    },
    30_000,
  );
  // The canary alone (wave 0), then waves of 3: the numbers --dry-run prints.
  assert.deepEqual(
    rows.map((r) => r.wave),
    clusters.map((_, i) => (i === 0 ? 0 : Math.ceil(i / 3))),
  );
});

void test('the first failure stops a campaign: the clusters not started are skipped, and listed as such', async () => {
  const base = `campaign-stop-${Date.now()}`;
  const name = `stop-${Date.now()}`;
  const client = wf.env.client;
  const result = await conflicted(base, async () => {
    const h = await client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
      taskQueue: fleetTaskQueue(base),
      workflowId: campaignWorkflowId(name),
      args: [{ clusters: ['a', 'b', 'c', 'd', 'e'], canary: 'c', migrate: 'all', parallel: 2 }],
      typedSearchAttributes: [{ key: MigrationCampaign, value: name }],
    });
    return (await workflowResult(h, 300_000)) as CampaignStatus;
  });
  assert.equal(result.phase, 'Stopped');
  assert.equal(result.message, 'stopped on the first failure (c)');
  assert.deepEqual(result.skipped, { clusters: ['a', 'b', 'd', 'e'], leftOff: 0, note: 'not started: stopped on the first failure (c)' });
  const rows = await eventually(
    "c's row in visibility",
    async () => {
      const r = await new CampaignHandle(name, client.workflow.getHandle(campaignWorkflowId(name)), client).rows(result);
      return r.find((x) => x.cluster === 'c')?.phase === 'Failed' ? r : undefined;
    },
    30_000,
  );
  assert.deepEqual(
    rows.map((r) => [r.cluster, r.phase]),
    [
      ['c', 'Failed'],
      ['a', 'Skipped'],
      ['b', 'Skipped'],
      ['d', 'Skipped'],
      ['e', 'Skipped'],
    ],
  );
});
