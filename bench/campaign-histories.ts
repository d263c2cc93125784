/**
 * Records the replay fixtures of a windowed campaign (test/unit-replay.test.ts, test/fixtures/histories/camp-*.json):
 * `npm run --silent build:workflows && node --import tsx bench/campaign-histories.ts`. Real runs of the current
 * workflow code (windowedCampaign, campaignMember, clusterCampaignStep) on a Temporal dev server of its own, with
 * test doubles for the activities (as test/test-workflow-campaign.test.ts runs them), so that a later change to those
 * workflows that alters the command sequence of histories like these fails the replay test. Recorded again only when
 * such a change is meant and guarded (docs/development.md, "Changing workflow code").
 *
 * Scenarios (each workflow's every run is saved, continue-as-new followed):
 *   - camp-ok-failed-away: four clusters, `ok` (answers, its step succeeds), `bad` (answers, its step's resource is
 *     refused: Failed), `conflict` (its identity in conflict: Failed, nothing started) and `away` (no worker: probed
 *     until its member has continued as new twice), `maxFailureRatio` 1; then the campaign is aborted (away Aborted);
 *   - camp-continues-as-new: twelve clusters in conflict, `parallel` 3, the campaign's bound 100 events: it continues
 *     as new carrying its counts, failures and position, and ends Failed (the campaign's runs only);
 *   - camp-first-failure-stops: the canary fails; the others are skipped.
 * Not part of `npm test` (the replay test reads what it wrote).
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { clusterTaskQueue, fleetTaskQueue } from '../src/api/cluster';
import {
  campaignAbortSignal,
  campaignMemberId,
  campaignMemberStateQuery,
  campaignWorkflowId,
  CAMPAIGN_WORKFLOW_TYPE,
  type CampaignStatus,
} from '../src/contract/fleet';
import { MigrationCampaign } from '../src/contract/search-attributes';
import { devServerArgs } from '../src/dev/local-temporal';
import { freePort, portOpen } from '../src/dev/ports';
import { ensureTools, expectedToolPaths } from '../src/dev/tools';
import { bundleOptions } from '../src/worker/workflow-bundle';

const log = (s: string) => process.stderr.write(`[campaign-histories] ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const FIXTURES = path.join(__dirname, '..', 'test', 'fixtures', 'histories');

/**
 * Saves every run of a workflow, continue-as-new followed from its first run, as `camp-<scenario>-<i>.json`: the
 * CLI's proto JSON (`temporal workflow show --output json`), which historyFromJSON reads, as the other fixtures are.
 */
function recordRuns(address: string, scenario: string, workflowId: string, firstRunId: string): void {
  const slug = scenario
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60)
    .toLowerCase();
  for (let i = 0, runId: string | undefined = firstRunId; runId; i++) {
    const json = execFileSync(
      expectedToolPaths().temporal,
      ['workflow', 'show', '--address', address, '--workflow-id', workflowId, '--run-id', runId, '--output', 'json'],
      { encoding: 'utf8' },
    );
    const history = JSON.parse(json) as {
      events: Array<{ workflowExecutionContinuedAsNewEventAttributes?: { newExecutionRunId?: string } }>;
    };
    fs.writeFileSync(path.join(FIXTURES, `camp-${slug}-${i}.json`), JSON.stringify({ workflowId, history }) + '\n');
    runId = history.events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
  }
}

/** Saves every run of every workflow the campaign involved: the campaign, its members, their steps. */
async function record(client: Client, address: string, scenario: string, name: string, members = true): Promise<number> {
  const firstRuns = new Map<string, { runId: string; start: number; type: string }>();
  // The server is this script's own: every workflow on it, those of this campaign kept (its own ID, its members',
  // and its steps', whose ID is `svm-campaign/<cluster>/<campaign>`).
  const ours = (id: string) =>
    id === campaignWorkflowId(name) ||
    id.startsWith(campaignMemberId(name, '')) ||
    (id.startsWith('svm-campaign/') && id.endsWith(`/${name}`));
  for await (const w of client.workflow.list()) {
    if (!ours(w.workflowId)) continue;
    const start = w.startTime.getTime();
    const known = firstRuns.get(w.workflowId);
    if (!known || start < known.start) firstRuns.set(w.workflowId, { runId: w.runId, start, type: w.type });
  }
  let recorded = 0;
  for (const [workflowId, r] of firstRuns) {
    // Named by what and which cluster, not by the campaign's name (a timestamp): recorded again, the same files.
    const what =
      workflowId === campaignWorkflowId(name)
        ? 'campaign'
        : workflowId.startsWith(campaignMemberId(name, ''))
          ? `member-${workflowId.slice(campaignMemberId(name, '').length)}`
          : `step-${workflowId.split('/')[1]}`;
    if (what !== 'campaign' && !members) continue;
    recordRuns(address, `${scenario}-${what}`, workflowId, r.runId);
    recorded++;
  }
  return recorded;
}

async function main(): Promise<void> {
  const { temporal: cli } = ensureTools(['temporal-cli'], log);
  const port = await freePort();
  const uiPort = await freePort(new Set([port]));
  const server = spawn(cli, devServerArgs({ port: port!, uiPort: uiPort!, logLevel: 'error' }), { stdio: ['ignore', 'ignore', 'inherit'] });
  const address = `127.0.0.1:${port}`;
  try {
    for (let i = 0; !(await portOpen(port)); i++) {
      if (i > 300) throw new Error('the Temporal dev server did not listen within 60 s');
      await sleep(200);
    }
    const connection = await Connection.connect({ address });
    const native = await NativeConnection.connect({ address });
    const client = new Client({ connection, namespace: 'default' });
    const workflowBundle = await bundleWorkflowCode(bundleOptions(require.resolve('../src/workflows')));
    const base = `camp-${Date.now()}`;
    const pins: Record<string, { uid: string; conflict?: string }> = {
      ok: { uid: 'uid-ok' },
      bad: { uid: 'uid-bad' },
      away: { uid: 'uid-away' },
      conflict: { uid: 'uid-conflict', conflict: "conflict's worker reaches another cluster" },
    };
    const fleet = await Worker.create({
      connection: native,
      taskQueue: fleetTaskQueue(base),
      workflowBundle,
      activities: {
        resolveCampaignNames: (input: { clusters?: string[] }) => Promise.resolve(input.clusters ?? []),
        campaignClusterPin: (cluster: string) =>
          Promise.resolve({
            name: cluster,
            ...(pins[cluster] ?? { uid: `uid-${cluster}`, conflict: `${cluster}'s worker reaches another cluster` }),
          }),
      },
    });
    const clusterWorker = (cluster: string, refused: Array<{ resource: string; reason: string }>) =>
      Worker.create({
        connection: native,
        taskQueue: clusterTaskQueue(base, cluster),
        workflowBundle,
        activities: {
          clusterIdentity: () => Promise.resolve({ name: cluster, uid: pins[cluster]!.uid }),
          campaignResources: () => Promise.resolve({ resources: [], refused }),
        },
      });
    const ok = await clusterWorker('ok', []);
    const bad = await clusterWorker('bad', [{ resource: 'widgets.example.com', reason: 'the resource is not served by this cluster' }]);
    const start = (name: string, input: Record<string, unknown>, limits: Record<string, number>): Promise<WorkflowHandle> =>
      client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
        taskQueue: fleetTaskQueue(base),
        workflowId: campaignWorkflowId(name),
        args: [{ migrate: 'all', ...input }, { limits }],
        typedSearchAttributes: [{ key: MigrationCampaign, value: name }],
      });
    await fleet.runUntil(
      ok.runUntil(
        bad.runUntil(async () => {
          // 1. ok, bad, conflict, away; then aborted once away's member has continued as new twice.
          const one = `ok-failed-away-${Date.now()}`;
          const h1 = await start(
            one,
            {
              clusters: ['ok', 'bad', 'conflict', 'away'],
              canary: 'ok',
              parallel: 3,
              maxFailureRatio: 1,
              unreachableAfterSeconds: 5,
              deadlineSeconds: 3600,
            },
            { memberHistoryEvents: 60, probeWaitMs: 100 },
          );
          const away = client.workflow.getHandle(campaignMemberId(one, 'away'));
          for (let i = 0; ; i++) {
            const s = await away.query(campaignMemberStateQuery).catch(() => undefined);
            if (s && s.runs >= 3) break;
            if (i > 600) throw new Error("away's member did not continue as new twice within 10 minutes");
            await sleep(1000);
          }
          await h1.signal(campaignAbortSignal, 'recorded');
          const r1 = (await h1.result()) as CampaignStatus;
          log(`${one}: ${r1.phase} ${JSON.stringify(r1.counts)}`);
          if (r1.phase !== 'Aborted' || r1.counts?.Succeeded !== 1 || r1.counts?.Failed !== 2 || r1.counts?.Aborted !== 1)
            throw new Error(`${one} ended otherwise than recorded for: ${JSON.stringify(r1)}`);
          await sleep(2000); // the members' last reports and ends
          log(`${one}: ${await record(client, address, 'ok-failed-away', one)} workflows recorded`);
          // 2. twelve clusters in conflict; the campaign continues as new past 100 events.
          const two = `can-${Date.now()}`;
          const h2 = await start(
            two,
            { clusters: Array.from({ length: 12 }, (_, i) => `c${String(i).padStart(2, '0')}`), parallel: 3, maxFailureRatio: 1 },
            { campaignHistoryEvents: 100 },
          );
          const r2 = (await h2.result()) as CampaignStatus;
          log(`${two}: ${r2.phase} ${JSON.stringify(r2.counts)}`);
          if (r2.phase !== 'Failed' || r2.counts?.Failed !== 12)
            throw new Error(`${two} ended otherwise than recorded for: ${JSON.stringify(r2)}`);
          await sleep(2000);
          log(`${two}: ${await record(client, address, 'continues-as-new', two, false)} workflows recorded`);
          // 3. the canary fails: the others are skipped.
          const three = `stop-${Date.now()}`;
          const h3 = await start(three, { clusters: ['bad', 'ok', 'away'], canary: 'bad', parallel: 2 }, {});
          const r3 = (await h3.result()) as CampaignStatus;
          log(`${three}: ${r3.phase} ${r3.message ?? ''}`);
          if (r3.phase !== 'Stopped') throw new Error(`${three} ended otherwise than recorded for: ${JSON.stringify(r3)}`);
          await sleep(2000);
          log(`${three}: ${await record(client, address, 'first-failure-stops', three)} workflows recorded`);
        }),
      ),
    );
    await connection.close();
    await native.close();
  } finally {
    server.kill('SIGTERM');
  }
  log(`written to ${FIXTURES}`);
}

void main().catch((err: unknown) => {
  process.stderr.write(`campaign-histories: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
