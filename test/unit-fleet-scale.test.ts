/**
 * A windowed campaign's payloads at 10,000 clusters (docs/fleet.md, "Campaigns"), from synthetic state, no Temporal:
 * the campaign's result and campaignStatus query, the state it carries across continue-as-new, the names its first
 * activity returns, a member's memo and report, a page of rows as `svm fleet status` lists them, and the table it
 * prints. Temporal refuses a payload (or a memo) over 2 MiB (limit.blobSize.error, limit.memoSize.error), and a gRPC
 * message over 4 MiB (a page of a visibility list): each is measured, encoded as the SDK encodes it, against those.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultPayloadConverter } from '@temporalio/common';
import { campaignStatusOf, type CampaignCarry, type CampaignState, type InFlight } from '../src/workflows/campaign-window';
import { compactRow } from '../src/workflows/campaign-member';
import {
  CAMPAIGN_FAILURES_KEPT,
  CampaignStatusSchema,
  type CampaignRow,
  type CampaignStatus,
  type MemberReport,
} from '../src/contract/fleet';
import { campaignProgress, campaignTable } from '../src/client/cli-fleet';
import { ROWS_PAGE } from '../src/client/fleet';

const PAYLOAD_LIMIT = 2 * 1024 * 1024;
const GRPC_LIMIT = 4 * 1024 * 1024;
const CLUSTERS = 10_000;

const size = (v: unknown) => defaultPayloadConverter.toPayload(v)!.data!.length;
/** The longest cluster name a DNS label allows: 63 characters, each different. */
const clusterName = (i: number) => `c${String(i).padStart(5, '0')}-${'x'.repeat(56)}`;
const longReason = 'Failed: ' + 'the API server answered 500 to a write of this resource; '.repeat(20);

/** A failed cluster's row at its worst: 2,000 resources failed, each with a long reason. */
function worstRow(cluster: string): CampaignRow {
  return {
    cluster,
    phase: 'Failed',
    wave: 42,
    reachable: true,
    uid: '4f1c2a7e-0000-4000-8000-000000000000',
    resources: { asked: 2000, succeeded: 0 },
    objects: 123_456_789,
    failures: Array.from({ length: 2000 }, (_, i) => ({ resource: `r${i}.${'g'.repeat(300)}`, reason: longReason })),
    drop: { groupVersion: 'example.com/v1', verdict: 'NotYet', exitCode: 3 },
    note: '2000 migration(s) did not succeed',
    startedAt: '2026-12-07T10:00:00.000Z',
    endedAt: '2026-12-07T11:00:00.000Z',
  };
}

/** A campaign of 10,000 clusters at its largest: 6,000 ended (1,000 failed), 100 running, 2,900 away, 1,000 not started. */
function midCampaign(): CampaignState {
  const names = Array.from({ length: CLUSTERS }, (_, i) => clusterName(i));
  const state: CampaignState = {
    runId: '0193a4b2-0000-7000-8000-000000000000',
    startedAt: '2026-12-07T10:00:00.000Z',
    deadline: Date.parse('2026-12-08T10:00:00.000Z'),
    remaining: names.slice(9000),
    total: CLUSTERS,
    canaryDone: true,
    wave: 61,
    inWave: 3,
    pausedBefore: 61,
    ended: { Pending: 0, Running: 0, Unreachable: 0, Succeeded: 5000, Failed: 1000, Skipped: 0, Aborted: 0 },
    failures: [],
    failuresLeftOff: 0,
    inflight: {},
    paused: 'a canary alert',
    told: false,
  };
  for (const n of names.slice(0, 1000)) {
    const row = compactRow(worstRow(n));
    if (state.failures.length < CAMPAIGN_FAILURES_KEPT)
      state.failures.push({
        cluster: n,
        ...(row.note ? { note: row.note } : {}),
        failures: row.failures.slice(0, 3).map((f) => ({ resource: f.resource.slice(0, 200), reason: f.reason.slice(0, 200) })),
        more: 1997,
      });
    else state.failuresLeftOff++;
  }
  for (const [i, n] of names.slice(6000, 9000).entries())
    state.inflight[n] = [60 + (i % 3), Date.parse('2026-12-07T10:30:00.000Z'), i < 100 ? 0 : 1, 0];
  return state;
}

void test('a 10,000-cluster campaign: its result and query, its carried state and its first activity fit in a payload', () => {
  const state = midCampaign();
  const status = campaignStatusOf('to-1.37', 'Running', state);
  assert.ok(CampaignStatusSchema.safeParse(status).success, 'the status is the contract');
  assert.deepEqual(status.counts, {
    clusters: 10_000,
    Pending: 1000,
    Running: 100,
    Unreachable: 2900,
    Succeeded: 5000,
    Failed: 1000,
    Skipped: 0,
    Aborted: 0,
  });
  assert.equal(status.failures?.length, CAMPAIGN_FAILURES_KEPT);
  assert.equal(status.failuresLeftOff, 1000 - CAMPAIGN_FAILURES_KEPT);
  assert.equal(status.inflight?.length, 1000, 'the clusters in flight named: every running one, then those away');
  assert.ok(status.inflight!.slice(0, 100).every((f) => f.phase === 'Running'));
  assert.equal(status.inflightLeftOff, 2000);
  const query = size(status);
  // Ended, every cluster not started skipped (the first 1,000 named): the result.
  const ended: CampaignState = {
    ...state,
    inflight: {},
    remaining: [],
    skipped: { clusters: state.remaining.slice(0, 1000), leftOff: 0, note: 'not started: stopped on the first failure (c00000)' },
  };
  const result = size(campaignStatusOf('to-1.37', 'Stopped', ended));
  // The state carried across continue-as-new at its largest: at the start, every cluster still to start; or every
  // cluster in flight, away (the window let them all go), with the failures kept. And the names resolved at the start.
  const all = Array.from({ length: CLUSTERS }, (_, i) => clusterName(i));
  const atStart: CampaignCarry = { limits: {}, state: { ...state, remaining: all, inflight: {}, failures: [], failuresLeftOff: 0 } };
  const away: CampaignCarry = {
    limits: {},
    state: {
      ...state,
      remaining: [],
      inflight: Object.fromEntries(all.map((n): [string, InFlight] => [n, [99, Date.now(), 1, 1]])),
    },
  };
  const carried = Math.max(size(atStart), size(away));
  const names = size(all);
  process.stdout.write(
    `# 10,000 clusters (names of 63 characters): query ${query} bytes, result ${result}, continue-as-new state ${carried}, names resolved ${names}; limit ${PAYLOAD_LIMIT}\n`,
  );
  for (const [what, bytes] of Object.entries({ query, result, carried, names }))
    assert.ok(bytes < PAYLOAD_LIMIT, `${what}: ${bytes} bytes`);
});

void test("a member's memo and report, and a page of rows, fit; `svm fleet status` prints all 10,000 rows", () => {
  const row = compactRow(worstRow(clusterName(1)));
  const memo = size({ row, campaignRun: '0193a4b2-0000-7000-8000-000000000000' });
  const report: MemberReport = { cluster: row.cluster, campaignRun: 'r', event: 'ended', row };
  const signal = size(report);
  // A page of a visibility list of members: ROWS_PAGE memos at their largest, beside each execution's other fields (~1 KiB).
  const page = ROWS_PAGE * (memo + 1024);
  process.stdout.write(
    `# a member's memo at its largest ${memo} bytes, its report ${signal}; a page of ${ROWS_PAGE} rows about ${page} (gRPC ${GRPC_LIMIT})\n`,
  );
  assert.ok(memo < PAYLOAD_LIMIT && signal < PAYLOAD_LIMIT);
  assert.ok(page < GRPC_LIMIT, `a page of rows: ${page} bytes`);
  assert.equal(row.failures.length, 20, 'the memo keeps 20 failures');
  assert.match(row.note ?? '', /1980 more failure\(s\) in its member's result/);

  // What `svm fleet status` prints: the summary, then a row per cluster (as paged from the members).
  const rows: CampaignRow[] = Array.from({ length: CLUSTERS }, (_, i) => ({
    cluster: clusterName(i),
    phase: i % 10 === 0 ? 'Failed' : 'Succeeded',
    wave: Math.ceil(i / 100),
    reachable: true,
    resources: { asked: 3, succeeded: i % 10 === 0 ? 2 : 3 },
    objects: 300,
    failures: i % 10 === 0 ? [{ resource: 'widgets.example.com', reason: 'Failed: conflict' }] : [],
  }));
  const status: CampaignStatus = {
    ...campaignStatusOf('to-1.37', 'Failed', { ...midCampaign(), remaining: [], inflight: {} }),
    rows,
  };
  const table = campaignTable(status).split('\n');
  assert.equal(table[0], 'campaign to-1.37: Failed, wave 61');
  assert.equal(table[1], '10000 clusters: 5000 succeeded, 1000 failed, 0 running, 0 unreachable, 0 pending, 0 skipped, 0 aborted');
  assert.match(table[2]!, /^CLUSTER +PHASE +WAVE +MIGRATED +OBJECTS +DROP$/);
  assert.equal(table.filter((l) => / (Succeeded|Failed) /.test(l)).length, CLUSTERS, 'a line per cluster');
  assert.equal(table.filter((l) => l.endsWith('widgets.example.com failed: Failed: conflict')).length, 1000);
  process.stdout.write(`# svm fleet status of 10,000 clusters: ${table.length} lines, ${table.join('\n').length} characters\n`);
  assert.equal(
    campaignProgress(campaignStatusOf('to-1.37', 'Running', midCampaign())),
    'campaign to-1.37: Running, wave 61: 6000 of 10000 clusters done (5000 succeeded, 1000 failed), 100 running, 2900 unreachable, 1000 pending',
  );
});
