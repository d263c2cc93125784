/**
 * Automatic migration against real servers: the trigger keeps StorageState
 * objects from every API server's discovery (each server found in the
 * `kubernetes` EndpointSlice and asked at its own address; reporter IDs are
 * those addresses) and migrates by itself when a
 * storage version changes; the rolling-upgrade walkthrough of design-docs/001
 * on two API servers; the staleness reset. StorageState snapshots are printed
 * (kubectl's view) at each step.
 *
 * The tests share one task queue (QUEUE): the trigger counts a resource as migrated only from a whole pass on record
 * for its own queue, so the first test's trigger migrates the whole plane once and waits until it is settled, and the
 * walkthrough after it migrates only what it changes (with a queue per test each trigger migrated the whole plane
 * again, beside the walkthrough's restarts). The staleness test runs last: its reset to Unknown migrates the whole
 * plane again, as the design says it must.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, afterEach, before, beforeEach, test } from 'node:test';
import { storageStatePath } from '../src/activities/trigger';
import type { MigrationHandle, Migrator } from '../src/client';
import { progressQuery } from '../src/contract/definitions';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { createDisagreeing, DISAGREEING, OLD_ENCODING_FLAGS } from './helpers/old-encoding';
import { etcdRevision, rewrittenSince } from './helpers/etcd-interval';
import { endLeftovers, eventually, migrationResult, withWorker } from './helpers/migrate';
import { bounded } from './helpers/waits';
import { defaultApiservers, testPlane, uniq, type TestPlane } from './helpers/plane';

const run = promisify(execFile);
const QUEUE = uniq('tq-trigger');
let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
beforeEach(() => endLeftovers(plane));
afterEach(async () => {
  await endLeftovers(plane);
  await defaultApiservers(plane, 1, 0);
});
after(async () => plane?.close());

interface StateStatus {
  persistedStorageVersionHashes?: string[];
  currentStorageVersionHash?: string;
  lastHeartbeatTime?: string;
  currentStorageVersionHashes?: Array<{ reporterID: string; currentStorageVersionHash: string }>;
  discoveryConsistent?: boolean;
}

async function state(name: string): Promise<StateStatus | undefined> {
  const res = await plane.kube.raw('GET', storageStatePath(name));
  return res.status === 200 ? (JSON.parse(res.body) as { status?: StateStatus }).status : undefined;
}

/** kubectl's view of a StorageState, one line, for the record. */
async function snapshot(step: string, name: string): Promise<StateStatus> {
  const out = await run(plane.env.KUBECTL!, [
    '--kubeconfig',
    plane.env.KUBECONFIG!,
    'get',
    'storagestate',
    name,
    '-o',
    'jsonpath={.status}',
  ]);
  const s = JSON.parse(out.stdout) as StateStatus;
  const reporters = (s.currentStorageVersionHashes ?? []).map((e) => `${e.reporterID}=${e.currentStorageVersionHash}`).join(' ');
  process.stderr.write(
    `[walkthrough] ${step.padEnd(44)} current=${s.currentStorageVersionHash} persisted=${JSON.stringify(s.persistedStorageVersionHashes)} reporters=[${reporters}] consistent=${s.discoveryConsistent}\n`,
  );
  return s;
}

/** Settled on hash: persisted == [current]; with since, only as written after that time (not a state left by an earlier trigger). */
const settled = (name: string, hash?: string, since?: number) => async () => {
  const s = await state(name);
  const fresh = since === undefined || (s?.lastHeartbeatTime !== undefined && Date.parse(s.lastHeartbeatTime) >= since);
  return (
    fresh &&
    s?.currentStorageVersionHash !== undefined &&
    (hash === undefined || s.currentStorageVersionHash === hash) &&
    s.persistedStorageVersionHashes?.length === 1 &&
    s.persistedStorageVersionHashes[0] === s.currentStorageVersionHash &&
    s
  );
};

async function discoveryHash(index: number, group: string, version: string, resource: string): Promise<string> {
  const k = plane.kubeOf(index);
  const list = await k.getJson<{ resources: Array<{ name: string; storageVersionHash?: string }> }>(`/apis/${group}/${version}`);
  return list.resources.find((r) => r.name === resource)!.storageVersionHash!;
}

/** The StorageState's status for a message: what a wait on it saw last. */
const stateNow = (name: string) => async () => `the StorageState's status ${JSON.stringify((await state(name)) ?? 'absent')}`;

/**
 * etcd is the judge of "nothing migrates": from `since` (etcd's revision where the interval began) to now, no object
 * under prefix was rewritten (objects the test created meanwhile are creates, told apart by etcd's revisions), whatever
 * the migrator says of itself. Called where the test ends the interval, so every revision of it is judged.
 */
async function assertNothingRewritten(prefix: string, since: number, why: string): Promise<void> {
  const rewritten = await rewrittenSince(plane.etcd, prefix, since);
  assert.deepEqual(
    rewritten.slice(0, 10),
    [],
    `${why}: ${rewritten.length} objects rewritten after etcd revision ${since} (now ${await etcdRevision(plane.etcd)})`,
  );
}

/**
 * Holds when check() held at two looks at least two trigger periods apart, every look between included: a trigger
 * that decides to migrate does so within a period of seeing the state, so a state that holds across two stays.
 */
function holdsAcross(periods: number, periodMs: number, check: () => Promise<boolean>) {
  let since: number | undefined;
  return async () => {
    if (!(await check())) {
      since = undefined;
      return false;
    }
    since ??= Date.now();
    return Date.now() - since >= periods * periodMs;
  };
}

/** Whether no migration workflow runs (Temporal's visibility). */
async function noMigrationRuns(): Promise<boolean> {
  for await (const _ of plane.temporal.client.workflow.list({ query: `WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running'` }))
    return false;
  return true;
}

/**
 * Pauses the migration's next run (one other than runBefore) as soon as it is RUNNING, with the migration's
 * acknowledgement, and answers its run ID. A run that ended first fails with how it ended: the walkthrough could not
 * then show a running migration stopped.
 */
async function holdNextRun(migration: MigrationHandle, runBefore: string | undefined, withinMs = 300_000): Promise<string> {
  for (const deadline = Date.now() + withinMs; Date.now() < deadline;) {
    const d = await migration.workflow.describe().catch(() => undefined);
    if (d && d.runId !== runBefore) {
      if (d.status.name !== 'RUNNING')
        throw new Error(`the trigger's migration (run ${d.runId}) ended ${d.status.name} before it was paused`);
      const ack = await migration.steer('pause', { answerWithinSeconds: 60 }).catch((err: unknown) => {
        throw new Error(
          `the trigger's migration (run ${d.runId}) could not be paused: ${err instanceof Error ? err.message : String(err)}`,
        );
      });
      assert.equal(ack?.paused, true, `the pause acknowledged: ${JSON.stringify(ack)}`);
      return d.runId;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no new run of the trigger's migration within ${withinMs / 1000} s`);
}

async function startTrigger(m: Migrator, periodSeconds: number, stalenessSeconds?: number) {
  await m.startTrigger({ periodSeconds, stalenessSeconds, maxBackoffSeconds: 10 });
}

void test('a CRD storage version switched while the trigger runs: StorageState lifecycle and a migration with no operator action; every resource of the plane settled; etcd confirms', async () => {
  const crd = testCrd(`${uniq('tr')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 100, { namespace: uniq('ns') });
  const h1 = await discoveryHash(0, crd.group, 'v1', crd.plural);
  await withWorker(
    plane,
    async (m) => {
      const started = Date.now();
      // A staleness bound longer than the file: the StorageStates stand between its tests (the last test sets its own).
      await startTrigger(m, 2, 600);
      // Created as Unknown, migrated once, settled on the v1 hash.
      await eventually('the StorageState to be created', async () => (await state(crd.name)) !== undefined, 60_000, stateNow(crd.name));
      const settledV1 = await eventually('settled on v1', settled(crd.name, h1), 360_000, stateNow(crd.name));
      // One entry per API server, each found in the kubernetes EndpointSlice and named by its own address
      // (the worker has only the load-balanced kubeconfig); every one answered: discovery consistent.
      assert.deepEqual(
        settledV1.currentStorageVersionHashes?.map((e) => e.reporterID).sort(),
        plane.state.apiservers.map((a) => `${a.address}:${a.port}`).sort(),
        'one entry per API server, by its address',
      );
      assert.equal(settledV1.discoveryConsistent, true);
      await snapshot('CRD at v1, settled', crd.name);

      await applyCrd(plane.kube, crd, 'v2');
      const h2 = await discoveryHash(0, crd.group, 'v2', crd.plural);
      assert.notEqual(h1, h2);
      const changed = await eventually(
        'current to move to the v2 hash',
        async () => {
          const s = await state(crd.name);
          return s?.currentStorageVersionHash === h2 && s;
        },
        60_000,
        stateNow(crd.name),
      );
      // Either caught before the migration refined it, or already refined: never without h2.
      assert.ok(
        changed.persistedStorageVersionHashes!.includes(h2),
        `persisted ${JSON.stringify(changed.persistedStorageVersionHashes)} lacks ${h2}`,
      );
      await snapshot('storage switched to v2', crd.name);
      await eventually('settled on v2', settled(crd.name, h2), 360_000, stateNow(crd.name));
      await snapshot('migrated by the trigger', crd.name);
      const last = await migrationResult(await m.handle(crd.name));
      assert.equal(last.phase, 'Succeeded');

      // The trigger keeps every resource the API servers serve, not only the one that changed: each StorageState it
      // wrote is settled (persisted = [current]) and no migration runs, across two periods (so none is about to
      // start). The walkthrough after this test starts from that plane, on the same queue.
      let unsettled: string[] = [];
      let kept = 0;
      await eventually(
        'every StorageState the trigger keeps settled, and no migration running',
        holdsAcross(2, 2000, async () => {
          const res = await plane.kube.getJson<{ items: Array<{ metadata: { name: string }; status?: StateStatus }> }>(
            storageStatePath(''),
          );
          const ours = res.items.filter((i) => i.status?.lastHeartbeatTime && Date.parse(i.status.lastHeartbeatTime) >= started);
          kept = ours.length;
          unsettled = ours
            .filter(
              (i) =>
                !(
                  i.status?.persistedStorageVersionHashes?.length === 1 &&
                  i.status.persistedStorageVersionHashes[0] === i.status.currentStorageVersionHash
                ),
            )
            .map((i) => i.metadata.name);
          return unsettled.length === 0 && (await noMigrationRuns());
        }),
        360_000,
        () => `${kept} StorageStates written by this trigger, unsettled: ${unsettled.slice(0, 10).join(', ') || 'none'}`,
      );
      assert.ok(kept > 30, `the trigger keeps every served resource: ${kept} StorageStates written`);
      await m.stopTrigger();
    },
    { taskQueue: QUEUE, settings: { maxConcurrentChunks: 8 } },
  );
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 100,
  });
});

void test('the rolling-upgrade walkthrough of design-docs/001 on two API servers: no migration while hashes differ, a running one stopped when they diverge, success only after all agree; etcd ends clean', async () => {
  const name = DISAGREEING.name;
  const OLD = OLD_ENCODING_FLAGS;
  const create = (index: number, prefix: string, count: number) => createDisagreeing(plane.kubeOf(index), prefix, count);
  const tag = uniq('wt');
  const hV1 = await discoveryHash(0, DISAGREEING.group, 'v1', DISAGREEING.resource);

  await withWorker(
    plane,
    async (m) => {
      await create(0, `${tag}-a`, 200);
      const started = Date.now();
      // A staleness bound longer than the test, on the file's queue: the StorageStates and passes on record the first
      // test left stand, and the walkthrough's migrations are the only ones (with the default, 3 periods, the trigger
      // was away longer, reset every StorageState and migrated the whole plane again beside them: 73 migrations in one
      // run; on a queue of its own it did the same, no pass being on record for it).
      await startTrigger(m, 2, 600);
      // 0. both servers encode v1, and no migration of the resource runs or is about to start (a pass not on record
      // for this queue, as when this test runs alone, is made first): what etcd shows from here on is the trigger's.
      const migration = await m.handle(name);
      await eventually(
        'settled on v1, its migration not running across two periods',
        holdsAcross(2, 2000, async () => {
          if (!(await settled(name, hV1, started)())) return false;
          const d = await migration.workflow.describe().catch(() => undefined);
          return d?.status.name !== 'RUNNING';
        }),
        360_000,
        stateNow(name),
      );
      await snapshot('0. both servers encode v1', name);

      // 1. server 1 moves to v1beta1: hashes diverge, persisted gains its hash, nothing migrates (judged by etcd over
      // the whole divergence: from before server 1's restart to server 0's, below)
      const beforeDivergence = await etcdRevision(plane.etcd);
      await restartApiserver(plane.dir, 1, OLD, () => undefined);
      const hB2 = await discoveryHash(1, DISAGREEING.group, 'v1', DISAGREEING.resource);
      assert.notEqual(hB2, hV1);
      await create(1, `${tag}-b`, 50); // written in v1beta1
      const diverged = await eventually(
        'both hashes reported',
        async () => {
          const s = await state(name);
          return new Set(s?.currentStorageVersionHashes?.map((e) => e.currentStorageVersionHash)).size === 2 && s;
        },
        60_000,
        stateNow(name),
      );
      assert.equal(diverged.currentStorageVersionHash, hV1, 'current moves only on agreement');
      assert.deepEqual([...diverged.persistedStorageVersionHashes!].sort(), [hB2, hV1].sort());
      await snapshot('1. server 1 moved to v1beta1 (diverged)', name);

      // 2. server 0 follows: agreement on v1beta1, current moves, the trigger migrates, persisted refined.
      // Step 2a needs that migration still running, whatever the machine's speed and load: it is paused as soon as
      // the trigger has started it (a new run of its workflow), and the pause is acknowledged by the migration.
      const runBefore = await migration.workflow.describe().then(
        (d) => d.runId,
        () => undefined,
      );
      const held = holdNextRun(migration, runBefore);
      held.catch(() => undefined); // awaited below; not unhandled meanwhile
      await assertNothingRewritten(DISAGREEING.prefix, beforeDivergence, 'no migration while the hashes differ (step 1 to 2)');
      await restartApiserver(plane.dir, 0, OLD, () => undefined);
      await eventually(
        'current = v1beta1 hash',
        async () => (await state(name))?.currentStorageVersionHash === hB2,
        180_000,
        stateNow(name),
      );
      await snapshot('2. server 0 followed (agree on v1beta1)', name);

      // 2a. The trigger's migration to v1beta1 is running (held by the pause) when server 1 rolls back to v1: the
      // hashes diverge, the trigger stops it, and etcd shows nothing written after; then server 1 goes forward again
      // and the trigger migrates anew.
      const pausedRun = await bounded('the migration to v1beta1 started by the trigger, and paused', held, 120_000, stateNow(name));
      await eventually(
        'the migration paused',
        async () => {
          // A query to a run that ended is answered by replaying it, slowly: its end is said at once instead.
          const d = await migration.workflow.describe();
          if (d.status.name !== 'RUNNING') throw new Error(`the migration (run ${d.runId}) is ${d.status.name}: the pause did not hold`);
          return (await migration.workflow.query(progressQuery)).phase === 'Paused';
        },
        60_000,
        async () => `run ${pausedRun}: ${(await migration.workflow.describe()).status.name}`,
      );
      const pausedAt = await etcdRevision(plane.etcd);
      await restartApiserver(plane.dir, 1, [], () => undefined);
      const stopped = await migrationResult(migration);
      assert.equal(stopped.phase, 'Aborted', `a running migration is stopped when the hashes diverge: ${stopped.message}`);
      assert.match(stopped.message ?? '', /serve different storage version hashes|agree/i);
      // Objects written through the rolled-back server during the divergence are encoded in v1: the migration after
      // the agreement must rewrite them too (what the walkthrough's second rollback, steps 3 and 4, showed before).
      await create(1, `${tag}-c`, 40);
      await snapshot('2a. server 1 rolled back while the migration ran (stopped)', name);
      // From the pause to the agreement below, the whole divergence: nothing rewritten (the 40 objects created
      // through server 1 are creates).
      await assertNothingRewritten(DISAGREEING.prefix, pausedAt, 'nothing migrates once the trigger stopped it (step 2a)');
      await restartApiserver(plane.dir, 1, OLD, () => undefined);
      await eventually('settled on v1beta1', settled(name, hB2), 360_000, stateNow(name));
      // Every object at v1beta1 in etcd: the v1 objects written during the divergence were migrated after it.
      assert.deepEqual(Object.keys((await storedVersions(plane.etcd, DISAGREEING.prefix)).byApiVersion), [DISAGREEING.oldApiVersion]);
      await snapshot('2b. migrated to v1beta1', name);
      await migrationResult(await m.handle(name));
      await m.stopTrigger();
    },
    // A budget, so that the migration to v1beta1 has not ended when holdNextRun pauses it: at 50/s its 250 objects
    // take 5 s; at 20/s, 12.5 s against the pause's few hundred milliseconds.
    { taskQueue: QUEUE, settings: { maxConcurrentChunks: 8, qps: 20 } },
  );
  assert.deepEqual(
    Object.keys((await storedVersions(plane.etcd, DISAGREEING.prefix)).byApiVersion),
    [DISAGREEING.oldApiVersion],
    'etcd must end with every object at the final version',
  );
});

// Last: the reset to Unknown it shows makes the trigger migrate the whole plane again (every StorageState went stale),
// which the tests before it do not need.
void test('the trigger stopped past its staleness bound while a storage version changed: the StorageState is reset to Unknown and the resource migrated', async () => {
  const crd = testCrd(`${uniq('st')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 100, { namespace: uniq('ns') });
  await withWorker(
    plane,
    async (m) => {
      // Settled first under the file's long bound (the StorageStates the earlier tests left stand, not reset here).
      await startTrigger(m, 2, 600);
      await eventually('settled on v1', settled(crd.name), 360_000, stateNow(crd.name));
      await snapshot('settled, trigger about to stop', crd.name);
      await m.stopTrigger();
      await applyCrd(plane.kube, crd, 'v2'); // missed by the trigger
      // The trigger comes back with a 6 s staleness bound, after 8 s away: past it.
      await new Promise((r) => setTimeout(r, 8000));
      const seen: string[][] = [];
      const watcher = (async () => {
        for (let i = 0; i < 300; i++) {
          const s = await state(crd.name);
          if (s?.persistedStorageVersionHashes) seen.push(s.persistedStorageVersionHashes);
          if (seen.some((p) => p.includes('Unknown'))) return;
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      await startTrigger(m, 2, 6);
      await watcher;
      assert.ok(
        seen.some((p) => p.length === 1 && p[0] === 'Unknown'),
        `never reset to Unknown: ${JSON.stringify(seen.slice(-3))}`,
      );
      await snapshot('trigger back after the staleness bound', crd.name);
      const h2 = await discoveryHash(0, crd.group, 'v2', crd.plural);
      await eventually('settled on v2', settled(crd.name, h2), 360_000, stateNow(crd.name));
      await snapshot('migrated after the reset', crd.name);
      await migrationResult(await m.handle(crd.name));
      await m.stopTrigger();
    },
    { taskQueue: QUEUE, settings: { maxConcurrentChunks: 8 } },
  );
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 100,
  });
});
