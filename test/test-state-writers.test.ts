/**
 * Nothing swallowed on the way to a verdict (issue 20 point 2), against the
 * real API server and the real Temporal server:
 * - StorageState writes are compare-and-set on resourceVersion: the trigger
 *   (any replica) and a migration refining persistedStorageVersionHashes
 *   never overwrite each other's hashes;
 * - stopping a superseded migration surfaces a failed abort signal instead
 *   of counting the migration as stopped, and writes nothing then;
 * - a standard migration somebody else runs for a resource is waited for, not
 *   doubled by the trigger's own.
 * (The verdict's check for an abort that arrived before it records is shown
 * by test-workflow-migrate and its replay fixture.)
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@temporalio/client';
import { createTriggerActivities, refineStorageState } from '../src/activities/trigger';
import { installCrds } from '../src/client/cli-migrate';
import type { TriggerAction } from '../src/contract/trigger';
import { createStorageState, findStorageState, patchStorageStateStatus } from '../src/kube/storage-states';
import { fixedApiServers } from '../src/kube/apiservers';
import { createStandardMigration, writeStandardStatus } from '../src/kube/standard-migrations';
import { applyCrd, testCrd } from './helpers/crd';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { Placement } from '../src/contract/placement';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const H1 = 'oldhash0001';
const H2 = 'newhash0002';

/** A StorageState of a made-up resource, current H2, persisted [H1, H2] (a migration to H2 is due). */
async function dueState(): Promise<{ name: string; group: string; resource: string }> {
  const resource = uniq('gizmos');
  const group = 'state.svm.test';
  const name = `${resource}.${group}`;
  assert.equal(await createStorageState(plane.kube, name, { group, resource }), 'created');
  await patchStorageStateStatus(plane.kube, name, {
    persistedStorageVersionHashes: [H1, H2],
    currentStorageVersionHash: H2,
    lastHeartbeatTime: new Date().toISOString(),
  });
  return { name, group, resource };
}

/** The trigger's heartbeat as decided on a StorageState read earlier (its hashes and resourceVersion). */
function heartbeat(
  s: { name: string; group: string; resource: string },
  read: { resourceVersion?: string; persisted: string[] },
  extra: Partial<TriggerAction> = {},
): TriggerAction {
  return {
    name: s.name,
    group: s.group,
    resource: s.resource,
    write: {
      create: false,
      resourceVersion: read.resourceVersion,
      persisted: read.persisted,
      current: H2,
      lastHeartbeatTime: new Date().toISOString(),
      reporters: [],
      discoveryConsistent: true,
    },
    ...extra,
  };
}

function trigger(client?: Client) {
  return createTriggerActivities({
    kube: plane.kube,
    apiservers: fixedApiServers(plane.kube, []),
    ...(client ? { temporal: { client, placement: Placement.of(uniq('tq')) } } : {}),
  });
}

async function persisted(name: string): Promise<string[] | undefined> {
  return (await findStorageState(plane.kube, name))?.status?.persistedStorageVersionHashes;
}

void test('a trigger heartbeat decided before a migration refined the StorageState does not undo it: 409, decided again', async () => {
  const s = await dueState();
  const before = await findStorageState(plane.kube, s.name);
  assert.ok(before);
  // The trigger read [H1, H2]; meanwhile the migration to H2 succeeds and refines.
  assert.equal(await refineStorageState(plane.kube, s.name, H2), true);
  assert.deepEqual(await persisted(s.name), [H2]);
  const applied = await trigger().applyTriggerActions([
    heartbeat(s, { resourceVersion: before.metadata.resourceVersion, persisted: before.status!.persistedStorageVersionHashes! }),
  ]);
  assert.deepEqual(applied.conflicts, [s.name], JSON.stringify(applied));
  assert.equal(applied.written, 0);
  assert.deepEqual(await persisted(s.name), [H2], "the migration's refinement stands");
});

void test('two trigger replicas write one StorageState read at the same version: exactly one write lands', async () => {
  const s = await dueState();
  const read = await findStorageState(plane.kube, s.name);
  assert.ok(read);
  const r = { resourceVersion: read.metadata.resourceVersion, persisted: [H1, H2] };
  const [a, b] = await Promise.all([trigger().applyTriggerActions([heartbeat(s, r)]), trigger().applyTriggerActions([heartbeat(s, r)])]);
  assert.equal(a.written + b.written, 1, JSON.stringify({ a, b }));
  assert.deepEqual([...a.conflicts, ...b.conflicts], [s.name]);
});

void test('a migration refining while the trigger heartbeats in a loop: the refinement is never overwritten', async () => {
  const s = await dueState();
  let stop = false;
  let heartbeats = 0;
  let conflicts = 0;
  // The trigger: read, take a moment (as a period's observation does), write what it read plus a heartbeat.
  const loop = (async () => {
    while (!stop) {
      const read = await findStorageState(plane.kube, s.name);
      await new Promise((r) => setTimeout(r, 30));
      const applied = await trigger().applyTriggerActions([
        heartbeat(s, { resourceVersion: read!.metadata.resourceVersion, persisted: read!.status!.persistedStorageVersionHashes! }),
      ]);
      heartbeats += applied.written;
      conflicts += applied.conflicts.length;
    }
  })();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await refineStorageState(plane.kube, s.name, H2), true);
  await new Promise((r) => setTimeout(r, 1000));
  stop = true;
  await loop;
  process.stderr.write(`[state-writers] trigger heartbeats written ${heartbeats}, refused by resourceVersion ${conflicts}\n`);
  assert.ok(heartbeats > 2, `the trigger kept writing (${heartbeats})`);
  assert.deepEqual(await persisted(s.name), [H2], 'persisted stays [H2] after the refinement, whatever the trigger read before');
});

void test('stopping a superseded migration: delivered to a running one, a closed one counts as stopped, a failed signal fails the apply and writes nothing', async () => {
  const s = await dueState();
  const c = plane.temporal.client;
  const workflowId = `migrate/${s.name}`;
  // A migration "running" on a task queue nobody serves: the signal is delivered to it all the same.
  const handle = await c.workflow.start('migrateResource', {
    workflowId,
    taskQueue: uniq('nobody'),
    args: [{ resource: s.name }],
  });
  try {
    const read = await findStorageState(plane.kube, s.name);
    const stop = (extra: Partial<TriggerAction>) =>
      heartbeat(
        s,
        { resourceVersion: read!.metadata.resourceVersion, persisted: [H1, H2] },
        { stopMigration: 'superseded by a test', ...extra },
      );

    // A client of a namespace that does not exist (a misconfigured worker): the signal fails with a reason that is
    // not "no such workflow", so the apply fails (and is retried by Temporal) and the StorageState is not written.
    const wrong = new Client({ connection: plane.temporal.connection, namespace: uniq('no-such-namespace') });
    await assert.rejects(trigger(wrong).applyTriggerActions([stop({})]), (err: Error) => {
      process.stderr.write(`[state-writers] failed stop surfaced: ${err.name}: ${err.message}\n`);
      return /namespace/i.test(err.message);
    });
    const unchanged = await findStorageState(plane.kube, s.name);
    assert.equal(unchanged?.metadata.resourceVersion, read?.metadata.resourceVersion, 'nothing written after a failed stop');

    // The real client: the signal reaches the running workflow, and the write lands.
    const applied = await trigger(c).applyTriggerActions([stop({})]);
    assert.deepEqual(applied.stopped, [s.name]);
    assert.equal(applied.written, 1);
    const history = await handle.fetchHistory();
    const signals = (history.events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'abort');
    assert.equal(signals.length, 1, 'the abort signal is in the workflow history');
  } finally {
    await handle.terminate('test over').catch(() => undefined);
  }
  // Closed: nothing to stop, counted as stopped.
  const read = await findStorageState(plane.kube, s.name);
  const applied = await trigger(c).applyTriggerActions([
    heartbeat(s, { resourceVersion: read!.metadata.resourceVersion, persisted: [H1, H2] }, { stopMigration: 'superseded' }),
  ]);
  assert.deepEqual(applied.stopped, [s.name]);
  assert.equal(applied.written, 1);
});

void test('a standard StorageVersionMigration somebody else created for the resource and not finished: the trigger waits for it instead of starting a second migration; once it ends, svm starts its own pass', async () => {
  // A real resource (the trigger resolves it before starting): a custom resource of the test CRD.
  const crd = testCrd(`${uniq('twait')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  const name = `${crd.plural}.${crd.group}`;
  assert.equal(await createStorageState(plane.kube, name, { group: crd.group, resource: crd.plural }), 'created');
  await patchStorageStateStatus(plane.kube, name, {
    persistedStorageVersionHashes: [H1, H2],
    currentStorageVersionHash: H2,
    lastHeartbeatTime: new Date().toISOString(),
  });
  const s = { name, group: crd.group, resource: crd.plural };
  // Upgrade tooling's object, for the built-in (none runs on this plane: it stays unfinished until the test ends it).
  const theirs = uniq('tooling');
  assert.equal(await createStandardMigration(plane.kube, theirs, { group: crd.group, resource: crd.plural }), 'created');
  const c = plane.temporal.client;
  const taskQueue = uniq('nobody');
  const start = async () => {
    const read = await findStorageState(plane.kube, name);
    return createTriggerActivities({
      kube: plane.kube,
      apiservers: fixedApiServers(plane.kube, []),
      temporal: { client: c, placement: Placement.of(taskQueue) },
      standardMigrations: 'defer',
    }).applyTriggerActions([
      heartbeat(s, { resourceVersion: read!.metadata.resourceVersion, persisted: [H1, H2] }, { startMigration: true }),
    ]);
  };
  try {
    const waited = await start();
    assert.deepEqual(waited.started, [], JSON.stringify(waited));
    assert.deepEqual(waited.waitingForStandard, [name]);
    await assert.rejects(c.workflow.getHandle(`migrate/${name}`).describe(), 'no migration workflow was started');

    // The built-in's verdict (written here as it would write it): finished, so svm's pass may run.
    await writeStandardStatus(plane.kube, theirs, {
      conditions: [
        {
          type: 'Running',
          status: 'False',
          reason: 'MigrationCompleted',
          message: 'Migration completed',
          lastTransitionTime: new Date().toISOString(),
        },
        {
          type: 'Succeeded',
          status: 'True',
          reason: 'StorageVersionMigrationSucceeded',
          message: 'Migration completed',
          lastTransitionTime: new Date().toISOString(),
        },
      ],
    });
    const ran = await start();
    assert.deepEqual(ran.started, [name], JSON.stringify(ran));
    assert.equal(ran.waitingForStandard, undefined);
  } finally {
    await c.workflow
      .getHandle(`migrate/${name}`)
      .terminate('test over')
      .catch(() => undefined);
  }
});
