/**
 * The initializer (`svm migrate --all`) as a workflow, without Kubernetes:
 * the cached Temporal dev server runs migrateAll and its child migrations;
 * the migrations' activities are test doubles, and followMigration is the
 * real activity (it only talks to Temporal). What is asserted: every
 * resource gets one migration with the usual workflow ID, never more than
 * `parallelism` at once, a running migration is joined rather than started
 * twice (and a joined run counts only once checked: one pre-started on a
 * queue of someone's own is a Failed row), a failed one is a row and not the end,
 * cancelling stops the initializer's own migrations and leaves joined ones
 * alone.
 */
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { Agreement } from '../src/activities';
import { createFollowActivities } from '../src/activities/follow-migration';
import type { ChunkInput, ChunkResult } from '../src/activities/migrate-chunk';
import { zeroCounters } from '../src/api/counters';
import type { StorageVersionMigrationStatus } from '../src/api/migration';
import { groupResourceString, migrationWorkflowId, type ResourceRef } from '../src/api/resource';
import { migrateAllProgressQuery, type MigrateAllInput, type MigrateAllRow } from '../src/contract/definitions';
import { migrateAll } from '../src/workflows/migrate-all';
import { migrateResource } from '../src/workflows/migrate-resource';
import { completeAsForger } from './helpers/forge';
import { eventually, workflowResult } from './helpers/migrate';
import { recordHistories, recording } from './helpers/histories';
import { workflowTestEnv } from './helpers/workflow-env';

const wf = workflowTestEnv(200);

const ref = (resource: string, group = 'example.com'): ResourceRef => ({
  group,
  resource,
  version: 'v2',
  kind: resource[0]!.toUpperCase() + resource.slice(1, -1),
  namespaced: true,
  storageVersionHash: `h-${resource}`,
  custom: group !== '',
});

const agreed: Agreement = {
  agreed: true,
  encodingVersion: 'v2',
  token: 't1',
  source: 'discovery',
  servers: [],
  verified: true,
  checked: '2 of 2 API servers by their discovery',
} as unknown as Agreement;

/** The cluster as the migrations' activities see it: per resource, chunks of objects, some blocked or failing. */
class Cluster {
  readonly perChunk = 5;
  readonly chunksPerPass = 2;
  /** Resources whose chunks wait until released (name -> release). */
  readonly held = new Map<string, () => void>();
  readonly failing = new Set<string>();
  readonly inFlight = new Set<string>();
  maxInFlight = 0;
  readonly chunksOf = new Map<string, number>();
  readonly statuses: Array<{ resource: string; status: StorageVersionMigrationStatus }> = [];

  hold(name: string): void {
    let release!: () => void;
    const p = new Promise<void>((r) => (release = r));
    this.held.set(name, release);
    this.gates.set(name, p);
  }
  private readonly gates = new Map<string, Promise<void>>();

  activities(client: Client) {
    return {
      ...createFollowActivities({ client }),
      agreement: async (_ref: ResourceRef): Promise<Agreement> => agreed,
      recordMigrated: async () => ({}),
      ensureMigrationObject: async () => undefined,
      reportStatus: async (_names: string[], status: StorageVersionMigrationStatus, resource: string) =>
        void this.statuses.push({ resource, status }),
      migrateChunk: async (input: ChunkInput): Promise<ChunkResult> => {
        const name = groupResourceString(input.resource);
        this.inFlight.add(name);
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight.size);
        try {
          const gate = this.gates.get(name);
          if (gate) await waitOrCancel(gate);
          // Let other migrations overlap this one, so the parallelism bound is visible.
          await Context.current().sleep(50);
          if (this.failing.has(name)) throw ApplicationFailure.nonRetryable(`forbidden: cannot update ${name}`, 'Forbidden');
          this.chunksOf.set(name, (this.chunksOf.get(name) ?? 0) + 1);
          const index = input.continueToken ? Number(input.continueToken.slice(1)) : 0;
          return {
            counters: { ...zeroCounters(), migrated: this.perChunk, rewritten: this.perChunk, chunks: 1 },
            failures: [],
            continueToken: index + 1 < this.chunksPerPass ? `c${index + 1}` : undefined,
            listed: this.perChunk,
          };
        } finally {
          this.inFlight.delete(name);
        }
      },
    };
  }
}

/** Waits for the gate, heartbeating so that a cancel reaches the activity. */
async function waitOrCancel(gate: Promise<void>): Promise<void> {
  const ctx = Context.current();
  let open = false;
  void gate.then(() => (open = true));
  for (let i = 0; !open; i++) {
    ctx.heartbeat(i);
    await ctx.sleep(100); // throws CancelledFailure once the migration is cancelled
  }
}

let seq = 0;
let currentTest: string | undefined;
beforeEach((t) => void (currentTest = t.name));

async function run<T>(cluster: Cluster, fn: (taskQueue: string) => Promise<T>): Promise<T> {
  const taskQueue = `migrate-all-${Date.now()}-${seq++}`;
  const worker = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue,
    workflowBundle: wf.bundle,
    activities: cluster.activities(wf.env.client),
    maxHeartbeatThrottleInterval: '200 milliseconds',
  });
  return worker.runUntil(fn(taskQueue));
}

const startAll = (taskQueue: string, input: Partial<MigrateAllInput>) =>
  wf.env.client.workflow.start(migrateAll, {
    taskQueue,
    workflowId: `svm-migrate-all-test-${Date.now()}-${seq++}`,
    args: [
      { parallelism: 2, options: { agreementPollSeconds: 1, heartbeatTimeoutSeconds: 5 }, resources: [], ...input } as MigrateAllInput,
    ],
  });

function record(workflowId: string, runId: string) {
  if (recording()) recordHistories(wf.env.address, 'all', currentTest ?? 'scenario', workflowId, runId);
}

// Each scenario uses its own resource names: a migration's workflow ID is derived from its resource, and the
// dev server is shared by the file.
const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ref(`${prefix}${i}s`));

void test('every resource migrated once, by a child with its usual workflow ID, never more than parallelism at once', async () => {
  const cluster = new Cluster();
  const resources = names('alpha', 5);
  const rows = await run(cluster, async (tq) => {
    const h = await startAll(tq, { resources, parallelism: 2 });
    const rows = await workflowResult(h);
    record(h.workflowId, h.firstExecutionRunId);
    const progress = await h.query(migrateAllProgressQuery);
    assert.equal(progress.total, 5);
    assert.equal(progress.pending, 0);
    assert.deepEqual(progress.running, []);
    return rows;
  });
  assert.deepEqual(
    rows.map((r) => [r.resource, r.result, r.objects, r.joined, r.workflowId]),
    resources.map((r) => [groupResourceString(r), 'Succeeded', 10, false, migrationWorkflowId(r)]),
  );
  for (const r of resources) assert.equal(cluster.chunksOf.get(groupResourceString(r)), 2, `${groupResourceString(r)}: one whole pass`);
  assert.ok(cluster.maxInFlight <= 2, `at most 2 migrations at once (saw ${cluster.maxInFlight})`);
  assert.ok(cluster.maxInFlight === 2, 'the migrations ran side by side');
  for (const r of resources) {
    const d = await wf.env.client.workflow.getHandle(migrationWorkflowId(r)).describe();
    assert.equal(d.status.name, 'COMPLETED');
  }
});

void test('a migration already running is joined and followed to its end, not started twice', async () => {
  const cluster = new Cluster();
  const [a, b, c] = names('beta', 3) as [ResourceRef, ResourceRef, ResourceRef];
  cluster.hold(groupResourceString(b));
  const rows = await run(cluster, async (tq) => {
    // Somebody (the trigger, a person) started b's migration before the initializer.
    const own = await wf.env.client.workflow.start(migrateResource, {
      taskQueue: tq,
      workflowId: migrationWorkflowId(b),
      args: [{ resource: b, options: { agreementPollSeconds: 1, heartbeatTimeoutSeconds: 5 } }],
    });
    await eventually('b to be migrating', async () => cluster.inFlight.has(groupResourceString(b)));
    const h = await startAll(tq, { resources: [a, b, c], parallelism: 3 });
    await eventually('a and c to be done', async () => {
      const p = await h.query(migrateAllProgressQuery);
      return p.done.length === 2 && p.running.length === 1 && p;
    });
    cluster.held.get(groupResourceString(b))!();
    const rows = await workflowResult(h);
    record(h.workflowId, h.firstExecutionRunId);
    assert.equal((await workflowResult(own)).phase, 'Succeeded');
    return rows;
  });
  const byName = new Map(rows.map((r) => [r.resource, r]));
  const rb = byName.get(groupResourceString(b))!;
  assert.equal(rb.joined, true);
  assert.equal(rb.result, 'Succeeded');
  assert.equal(rb.objects, 10, 'the counters of the migration that was joined');
  assert.equal(cluster.chunksOf.get(groupResourceString(b)), 2, 'b was migrated by one pass only');
  assert.equal(byName.get(groupResourceString(a))!.joined, false);
  assert.equal(byName.get(groupResourceString(c))!.result, 'Succeeded');
});

void test("a run someone pre-started at a migration's ID on a queue of their own is not waited on: terminated, its row Failed, saying why, with none of its counters", async () => {
  const cluster = new Cluster();
  const [a, b] = names('delta', 2) as [ResourceRef, ResourceRef];
  const attacker = `attacker-${Date.now()}-${seq++}`;
  const { rows, forged } = await run(cluster, async (tq) => {
    // Anyone with the namespace's credentials: b's migration pre-started on a queue no worker of svm's polls, so
    // that the initializer joins it and waits for ever (issue 61; src/kube/migration-record.ts, evictForeignRun).
    const forged = await wf.env.client.workflow.start(migrateResource, {
      taskQueue: attacker,
      workflowId: migrationWorkflowId(b),
      args: [{ resource: b }],
    });
    const h = await startAll(tq, { resources: [a, b], parallelism: 2 });
    return { rows: await workflowResult(h), forged };
  });
  const rb = rows.find((r) => r.resource === groupResourceString(b))!;
  assert.deepEqual([rb.joined, rb.result, rb.objects], [true, 'Failed', 0]);
  assert.match(
    rb.message ?? '',
    /^a run at migrate\/delta1s\.example\.com that ran on task queue attacker-.*, not migrate-all-.* \(the one svm's workers of this cluster poll\) held the ID of svm's migration of delta1s\.example\.com: terminated; nothing of it counts: migrate the resource again$/,
  );
  console.log(`[forged pre-start] ${rb.resource}: ${rb.result}: ${rb.message}`);
  assert.equal((await forged.describe()).status.name, 'TERMINATED');
  assert.equal(cluster.chunksOf.get(groupResourceString(b)), undefined, 'b itself was never migrated');
  assert.equal(rows.find((r) => r.resource === groupResourceString(a))!.result, 'Succeeded');
});

void test("a run someone completed at a migration's ID before svm came blocks nothing: svm's own migration runs at the ID", async () => {
  const cluster = new Cluster();
  const [b] = names('epsilon', 1) as [ResourceRef];
  const attacker = `attacker-${Date.now()}-${seq++}`;
  const rows = await run(cluster, async (tq) => {
    const forged = await wf.env.client.workflow.start(migrateResource, {
      taskQueue: attacker,
      workflowId: migrationWorkflowId(b),
      args: [{ resource: b }],
    });
    await completeAsForger(wf.env.client, attacker, {
      phase: 'Succeeded',
      counters: { ...zeroCounters(), migrated: 999 },
      message: 'forged',
      record: { by: 'svm', encodingVersion: 'v2', verified: true, checked: 'forged', token: 't1', resource: groupResourceString(b) },
    });
    assert.equal((await forged.describe()).status.name, 'COMPLETED');
    return workflowResult(await startAll(tq, { resources: [b], parallelism: 1 }));
  });
  // Ended before the initializer came: the ID was free, so svm's own migration ran there (the forged result is not its).
  assert.deepEqual(
    rows.map((r) => [r.joined, r.result]),
    [[false, 'Succeeded']],
  );
  assert.equal(cluster.chunksOf.get(groupResourceString(b)), 2, 'b migrated by svm itself, one whole pass');
});

void test('a failed migration is a row with its reason; the others go on and the initializer ends normally', async () => {
  const cluster = new Cluster();
  const resources = names('gamma', 3);
  cluster.failing.add(groupResourceString(resources[1]!));
  const rows: MigrateAllRow[] = await run(cluster, async (tq) => {
    const h = await startAll(tq, { resources, parallelism: 1 });
    const rows = await workflowResult(h);
    record(h.workflowId, h.firstExecutionRunId);
    return rows;
  });
  assert.deepEqual(
    rows.map((r) => r.result),
    ['Succeeded', 'Failed', 'Succeeded'],
  );
  assert.match(rows[1]!.message ?? '', /forbidden: cannot update gamma1s\.example\.com/);
  assert.equal(rows[0]!.objects, 10);
});

void test('cancelling the initializer aborts its own migrations and leaves a joined one running', async () => {
  const cluster = new Cluster();
  const [mine, theirs] = names('delta', 2) as [ResourceRef, ResourceRef];
  cluster.hold(groupResourceString(mine));
  cluster.hold(groupResourceString(theirs));
  await run(cluster, async (tq) => {
    const other = await wf.env.client.workflow.start(migrateResource, {
      taskQueue: tq,
      workflowId: migrationWorkflowId(theirs),
      args: [{ resource: theirs, options: { agreementPollSeconds: 1, heartbeatTimeoutSeconds: 5 } }],
    });
    await eventually('theirs to be migrating', async () => cluster.inFlight.has(groupResourceString(theirs)));
    const h = await startAll(tq, { resources: [mine, theirs], parallelism: 2 });
    await eventually('both to be running', async () => {
      const p = await h.query(migrateAllProgressQuery);
      return p.running.length === 2 && cluster.inFlight.has(groupResourceString(mine));
    });
    await h.cancel();
    await assert.rejects(workflowResult(h), (err: unknown) => err instanceof WorkflowFailedError);
    record(h.workflowId, h.firstExecutionRunId);
    const child = await workflowResult(wf.env.client.workflow.getHandle(migrationWorkflowId(mine)));
    assert.equal(child.phase, 'Aborted', 'the initializer’s own migration was stopped');
    assert.equal((await other.describe()).status.name, 'RUNNING', 'the joined migration is not the initializer’s to stop');
    cluster.held.get(groupResourceString(theirs))!();
    assert.equal((await workflowResult(other)).phase, 'Succeeded');
  });
});

void test('bad input is refused before anything starts', async () => {
  const cluster = new Cluster();
  await run(cluster, async (tq) => {
    const h = await startAll(tq, { resources: names('eps', 1), parallelism: 0 });
    await assert.rejects(workflowResult(h), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure);
      assert.equal(err.cause.type, 'InvalidInput');
      assert.match(err.cause.message, /parallelism must be a whole number between 1 and 64/);
      return true;
    });
    record(h.workflowId, h.firstExecutionRunId);
  });
  assert.equal(cluster.chunksOf.size, 0);
});
