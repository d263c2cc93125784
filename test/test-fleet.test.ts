/**
 * The fleet on real servers (docs/fleet.md), on the shared plane: a worker that names its cluster ("east"), its
 * registration in Temporal, a campaign over "east" and a cluster whose worker never answers ("west"), and the
 * activity check that refuses a task of another cluster or of another uid before anything is written. etcd is the
 * judge of what was rewritten.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { clusterTaskQueue, fleetTaskQueue, idInCluster } from '../src/api/cluster';
import { campaignWorkflowId, clusterRegistrationId, CAMPAIGN_WORKFLOW_TYPE, type CampaignStatus } from '../src/contract/fleet';
import { CampaignHandle } from '../src/client/fleet';
import { installCrds } from '../src/client/cli-migrate';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { createMigratorWorker, type MigratorWorker } from '../src/worker/worker';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { forgetNames, freeIdentity } from './helpers/identity';
import { workflowResult } from './helpers/waits';

let plane: TestPlane;
let connection: Connection;
let client: Client;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
  connection = await Connection.connect({ address: plane.temporal.address });
  client = new Client({ connection });
  // "east" is this plane here: its uid is pinned to that name for this file (whatever name another file left on it).
  await freeIdentity(client, plane.kube, 'east');
});
after(async () => {
  if (client) await forgetNames(client, ['east']);
  await connection?.close();
  await plane?.close();
});

const COUNT = 40;

/** A CRD with COUNT objects stored at v1, its storage version then switched to v2. */
async function crdAtV1(): Promise<{ name: string; group: string; plural: string; prefix: string }> {
  const crd = testCrd(`${uniq('f')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: uniq('ns'), payload: (i) => ({ index: i }) });
  await applyCrd(plane.kube, crd, 'v2');
  return { name: crd.name, group: crd.group, plural: crd.plural, prefix: `/registry/${crd.group}/${crd.plural}/` };
}

function eastWorker(base: string): Promise<MigratorWorker> {
  const settings = plane.workerSettings(base);
  settings.temporal.cluster = 'east';
  return createMigratorWorker(settings);
}

const kubeSystemUid = async () => (await plane.kube.getJson<{ metadata: { uid: string } }>('/api/v1/namespaces/kube-system')).metadata.uid;

void test('a campaign over a named cluster and one whose worker never answers: the first is migrated (etcd), the other reported unreachable', async () => {
  const crd = await crdAtV1();
  assert.deepEqual((await storedVersions(plane.etcd, crd.prefix)).byApiVersion, { [`${crd.group}/v1`]: COUNT });
  const base = uniq('tq');
  const w = await eastWorker(base);
  const status = await w.runUntil(async () => {
    // The worker registered its cluster: kube-system's uid, where any SDK reads it without a worker.
    const uid = await kubeSystemUid();
    let memo: Record<string, unknown> | undefined;
    for (let i = 0; i < 60 && memo?.uid === undefined; i++) {
      memo = await client.workflow
        .getHandle(clusterRegistrationId('east'))
        .describe()
        .then((d) => d.memo)
        .catch(() => undefined);
      if (memo?.uid === undefined) await new Promise((r) => setTimeout(r, 500));
    }
    assert.equal(memo?.uid, uid, "the registration holds the cluster's kube-system uid");
    // The campaign ends at its deadline (west never answers), so the deadline is this test's time: 60 s, the least a
    // campaign accepts (deadlineSeconds, src/contract/fleet.ts). What an unreachable cluster is while the campaign runs,
    // and that it completes once its worker is back, is test-fleet-planes' (south); the deadline passing on a cluster
    // that never answers, and DeadlineExceeded, are this test's alone.
    const name = uniq('c');
    const h = await client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
      taskQueue: fleetTaskQueue(base),
      workflowId: campaignWorkflowId(name),
      args: [
        {
          clusters: ['east', 'west'],
          canary: 'east',
          migrate: [crd.name],
          dropCheck: `${crd.group}/v1`,
          dropCheckWindowSeconds: 0,
          unreachableAfterSeconds: 5,
          deadlineSeconds: 60,
        },
      ],
    });
    const result = (await workflowResult(h, 180_000)) as CampaignStatus;
    // The result counts; each cluster's row is its member's, as `svm fleet status` pages them.
    assert.deepEqual(
      { clusters: result.counts?.clusters, Succeeded: result.counts?.Succeeded, Unreachable: result.counts?.Unreachable },
      { clusters: 2, Succeeded: 1, Unreachable: 1 },
    );
    return new CampaignHandle(name, h, client).status();
  });
  process.stdout.write(`# campaign: ${JSON.stringify(status)}\n`);
  const east = status.rows.find((r) => r.cluster === 'east')!;
  const west = status.rows.find((r) => r.cluster === 'west')!;
  assert.equal(east.phase, 'Succeeded', east.note);
  assert.deepEqual(east.resources, { asked: 1, succeeded: 1 });
  assert.equal(east.objects, COUNT);
  // The drop check ran in east and its verdict is on the row (a finding, not a failure of the cluster). Exactly
  // NotYet, exit 1: with a window of 0 s the check counts every request at the version since each API server started
  // (src/kube/drop-requests.ts), and this test created its objects at v1 (it accepted Ready too).
  assert.equal(east.drop?.groupVersion, `${crd.group}/v1`);
  assert.deepEqual({ verdict: east.drop?.verdict, exitCode: east.drop?.exitCode }, { verdict: 'NotYet', exitCode: 1 });
  assert.equal(west.phase, 'Unreachable');
  assert.equal(west.reachable, false);
  assert.match(west.note ?? '', /no worker took a task in 5s.*the deadline passed/);
  assert.equal(status.phase, 'DeadlineExceeded');
  // etcd: every object of east is stored at v2 now.
  assert.deepEqual((await storedVersions(plane.etcd, crd.prefix)).byApiVersion, { [`${crd.group}/v2`]: COUNT });
});

void test('a task of another cluster, or of another uid, is refused before anything is written (WrongCluster, naming both)', async () => {
  const crd = await crdAtV1();
  const before = new Map((await readStoredObjects(plane.etcd, crd.prefix)).map((o) => [o.key, o.modRevision]));
  const base = uniq('tq');
  const w = await eastWorker(base);
  const [wrongUid, wrongName] = await w.runUntil(async () => {
    const resource = { resource: crd.name };
    // A workflow of east that recorded another cluster's uid (east's kubeconfig now leads elsewhere).
    const a = await client.workflow.start('migrateResource', {
      taskQueue: clusterTaskQueue(base, 'east'),
      workflowId: idInCluster(`migrate/${crd.name}`, 'east'),
      args: [{ ...resource, cluster: { name: 'east', uid: '00000000-0000-0000-0000-000000000000' } }],
    });
    // A workflow of west on east's task queue (a worker polling another cluster's queue by mistake).
    const b = await client.workflow.start('migrateResource', {
      taskQueue: clusterTaskQueue(base, 'east'),
      workflowId: idInCluster(`migrate/${crd.name}`, 'west'),
      args: [{ ...resource, cluster: { name: 'west' } }],
    });
    const failure = (h: typeof a) =>
      workflowResult(h, 120_000).then(
        () => 'succeeded',
        (err: unknown) => {
          let e: unknown = err;
          const messages: string[] = [];
          while (e instanceof Error) {
            messages.push(e.message);
            e = e.cause;
          }
          return messages.join(' / ');
        },
      );
    return Promise.all([failure(a), failure(b)]);
  });
  assert.match(
    wrongUid,
    /this task's workflow started against kube-system uid 00000000-0000-0000-0000-000000000000, but cluster "east" is pinned to [0-9a-f-]{36}: not the same cluster; nothing was done/,
  );
  assert.match(wrongName, /belongs to cluster "west" but the worker that took it serves cluster "east"/);
  // etcd: not one object was written.
  const after = await readStoredObjects(plane.etcd, crd.prefix);
  assert.equal(after.length, COUNT);
  for (const o of after) assert.equal(o.modRevision, before.get(o.key), `${o.key} unchanged`);
  assert.deepEqual((await storedVersions(plane.etcd, crd.prefix)).byApiVersion, { [`${crd.group}/v1`]: COUNT });
});
