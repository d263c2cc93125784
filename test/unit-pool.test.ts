/**
 * A pool serving its clusters on one task queue (src/worker/pool.ts): the pure parts. Which cluster a task runs with
 * (its header, or a probe's argument) and what a task of a cluster not served here gets; the pool's queue, name and
 * Worker Deployment; the kubeconfig plugins a pool runs; what a rescan takes and lets go; a registration that
 * reports a move of its cluster to another queue.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { CLUSTER_HEADER, CLUSTER_IDENTITY_ACTIVITY, poolTaskQueue, WRONG_CLUSTER } from '../src/api/cluster';
import { diffClusters, kubeconfigPluginRefusal, poolNameOf, scanDir } from '../src/worker/cluster-pool';
import {
  CLUSTER_LET_GO,
  CLUSTER_NOT_SERVED_HERE,
  LET_GO_GRACE_MS,
  memberFor,
  notServed,
  notServedRetrySeconds,
  type Absence,
  type NotServedFacts,
  type PoolMember,
} from '../src/worker/pool-dispatch';
import { deploymentNameOf, workerDeploymentOptions } from '../src/worker/versioning';
import { reportUnchanged } from '../src/kube/cluster-identity';

const header = (ref: object) => ({ [CLUSTER_HEADER]: defaultPayloadConverter.toPayload(ref) });

function pool(refusals: Record<string, string | undefined> = {}) {
  const member = (name: string): PoolMember<{ who: string }> => ({
    name,
    activities: { who: name },
    running: 0,
    identity: { pinned: `u-${name}`, refusal: () => Promise.resolve(refusals[name]) },
  });
  const members = new Map([
    ['east', member('east')],
    ['west', member('west')],
  ]);
  const asked: string[] = [];
  const absent = (name: string): Promise<Absence> => {
    asked.push(name);
    return Promise.resolve(name === 'gone' ? 'wait' : 'wrong');
  };
  const run = (headers: Record<string, unknown>, activityType = 'migrateChunk', args: unknown[] = []) =>
    memberFor(members, absent, 'mgmt', { headers: headers as never, activityType, args });
  return { run, asked };
}

async function failure(p: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ApplicationFailure, String(err));
    return err;
  }
  assert.fail('the task was not refused');
}

void test("a pool's task runs with the cluster its header names, after that cluster's identity check", async () => {
  const { run } = pool({ west: 'west is in conflict' });
  assert.equal((await run(header({ name: 'east' }))).activities.who, 'east');
  assert.equal((await run(header({ name: 'east', uid: 'u-east' }))).name, 'east');
  const conflict = await failure(run(header({ name: 'west' })));
  assert.equal(conflict.type, WRONG_CLUSTER);
  assert.equal(conflict.nonRetryable, true);
  assert.match(conflict.message, /west is in conflict/);
  // The uid the workflow recorded against the pinned one, as on a worker of its own.
  const other = await failure(run(header({ name: 'east', uid: 'u-other' })));
  assert.equal(other.type, WRONG_CLUSTER);
  assert.match(other.message, /started against kube-system uid u-other, but cluster "east" is pinned to u-east/);
});

void test('a task of a cluster the pool let go (or has not taken) waits, retried; any other is WrongCluster; no cluster is refused', async () => {
  const { run, asked } = pool();
  const waits = await failure(run(header({ name: 'gone' })));
  assert.equal(waits.type, CLUSTER_NOT_SERVED_HERE);
  assert.equal(waits.nonRetryable, false);
  assert.ok(waits.nextRetryDelay, 'tried again after a delay');
  assert.deepEqual([1, 2, 9, 10, 50].map(notServedRetrySeconds), [30, 60, 270, 300, 300], 'later and later, at most 5 minutes');
  const wrong = await failure(run(header({ name: 'south' })));
  assert.equal(wrong.type, WRONG_CLUSTER);
  assert.equal(wrong.nonRetryable, true);
  assert.match(wrong.message, /cluster "south" but the worker that took it is pool "mgmt", which does not serve it/);
  assert.deepEqual(asked, ['gone', 'south']);
  const none = await failure(run({}));
  assert.equal(none.type, WRONG_CLUSTER);
  assert.match(none.message, /names no cluster.*pool "mgmt"/);
});

void test('a cluster let go: its tasks wait ten minutes for it to come back, then fail ClusterLetGo saying when and why', async () => {
  const t0 = Date.parse('2026-12-07T12:00:00Z');
  const reads: string[] = [];
  const facts = (o: Partial<NotServedFacts>): NotServedFacts => ({
    name: 'north',
    pool: 'mgmt',
    letGo: undefined,
    now: t0,
    registeredQueue: () => Promise.resolve('svm/pool/mgmt'),
    taskQueue: 'svm/pool/mgmt',
    reread: () => (reads.push('read'), Promise.resolve(true)),
    served: () => false,
    ...o,
  });
  const letGo = { at: t0, why: 'its kubeconfig is gone' };
  assert.equal(await notServed(facts({ letGo, now: t0 + LET_GO_GRACE_MS - 1 })), 'wait', 'within the grace it waits');
  const gone = await notServed(facts({ letGo, now: t0 + LET_GO_GRACE_MS }));
  assert.ok(typeof gone === 'object', 'past the grace it is gone');
  assert.match(
    gone.gone,
    /cluster "north" was let go by pool "mgmt" at 2026-12-07T12:00:00.000Z \(its kubeconfig is gone\) and has not come back within 10 minutes/,
  );
  assert.match(gone.gone, /svm migrate --cluster north/);
  assert.deepEqual(reads, [], 'a cluster let go is not read for again: the rescans take it back');
  // Never served here, registered elsewhere: another pool's.
  assert.equal(await notServed(facts({ registeredQueue: () => Promise.resolve('svm/cluster/north') })), 'wrong');
  assert.equal(await notServed(facts({ registeredQueue: () => Promise.resolve(undefined) })), 'wrong');
  // Registered on this pool: the source read again at once; taken if it is there now, gone if not, waits if unreadable.
  let servedNow = false;
  const taken = await notServed(facts({ reread: () => ((servedNow = true), Promise.resolve(true)), served: () => servedNow }));
  assert.equal(taken, 'taken');
  assert.equal(await notServed(facts({ reread: () => Promise.resolve(false) })), 'wait');
  const missing = await notServed(facts({}));
  assert.ok(typeof missing === 'object');
  assert.match(
    missing.gone,
    /registration names pool "mgmt", but the pool's directory or Secrets, read just now, hold no kubeconfig of it/,
  );
  // What a task gets for each: a retryable wait, a non-retryable ClusterLetGo, the member once taken.
  const member: PoolMember<{ who: string }> = { name: 'north', activities: { who: 'north' }, running: 0, identity: undefined };
  const members = new Map<string, PoolMember<{ who: string }>>();
  const task = (absent: () => Promise<Absence>) =>
    memberFor(members, absent, 'mgmt', { headers: header({ name: 'north' }) as never, activityType: 'migrateChunk', args: [], attempt: 3 });
  const waits = await failure(task(() => Promise.resolve('wait')));
  assert.deepEqual([waits.type, waits.nonRetryable], [CLUSTER_NOT_SERVED_HERE, false]);
  const fails = await failure(task(() => Promise.resolve(gone)));
  assert.deepEqual([fails.type, fails.nonRetryable], [CLUSTER_LET_GO, true]);
  assert.equal(fails.message, gone.gone);
  const runs = await task(() => (members.set('north', member), Promise.resolve('taken')));
  assert.equal(runs.activities.who, 'north');
});

void test("a campaign's probe (clusterIdentity, no header) is answered for the cluster its argument names", async () => {
  const { run } = pool();
  assert.equal((await run({}, CLUSTER_IDENTITY_ACTIVITY, [{ name: 'west' }])).name, 'west');
  assert.equal((await failure(run({}, CLUSTER_IDENTITY_ACTIVITY, []))).type, WRONG_CLUSTER);
});

void test("a pool's queue, its default name, and each domain's Worker Deployment", () => {
  assert.equal(poolTaskQueue('svm', 'capi-system'), 'svm/pool/capi-system');
  assert.equal(poolNameOf('/etc/svm/clusters/'), 'clusters');
  assert.equal(poolNameOf('/tmp/My_Clusters.d'), 'my-clusters-d');
  assert.equal(poolNameOf('/'), 'pool');
  assert.equal(deploymentNameOf('svm-worker'), 'svm-worker');
  assert.equal(deploymentNameOf('svm-worker', { cluster: 'east' }), 'svm-worker-cluster-east');
  assert.equal(deploymentNameOf('svm-worker', { pool: 'capi-system' }), 'svm-worker-pool-capi-system');
  const build = () => ({ version: '1.0.0', revision: 'abc' });
  const v = { deploymentName: 'svm-worker', promote: false, checkSeconds: 30 };
  assert.equal(workerDeploymentOptions(v, build, { pool: 'p' })?.version.deploymentName, 'svm-worker-pool-p');
  assert.equal(workerDeploymentOptions({ ...v, deploymentName: undefined }, build, { pool: 'p' }), undefined);
});

void test('in a pool, a kubeconfig plugin runs only when the operator names it: an exec command as written, an auth-provider by name', () => {
  const exec = (command: string) => `users:\n- name: admin\n  user:\n    exec:\n      command: ${command}\n`;
  assert.equal(kubeconfigPluginRefusal('users:\n- name: a\n  user:\n    token: t\n'), undefined);
  assert.match(kubeconfigPluginRefusal(exec('kubelogin'))!, /user admin runs a plugin \(exec "kubelogin"\)/);
  assert.equal(kubeconfigPluginRefusal(exec('kubelogin'), ['kubelogin']), undefined);
  // Exactly as written: another program of the same base name is not the one allowed.
  assert.match(kubeconfigPluginRefusal(exec('/tmp/x/kubelogin'), ['kubelogin'])!, /exec "\/tmp\/x\/kubelogin"/);
  const provider = 'users:\n- name: old\n  user:\n    auth-provider: {name: oidc}\n';
  assert.match(kubeconfigPluginRefusal(provider, ['kubelogin'])!, /auth-provider "oidc"/);
  assert.equal(kubeconfigPluginRefusal(provider, ['oidc']), undefined);
  assert.match(kubeconfigPluginRefusal('users: [\n')!, /does not parse/);
});

void test('a rescan takes a new cluster, lets a removed one go, and lets a changed kubeconfig go and takes it again', () => {
  const served = new Map([
    ['east', 'd1'],
    ['west', 'd2'],
    ['north', 'd3'],
  ]);
  const diff = diffClusters(served, [
    { name: 'east', kubeconfig: '/k/east', digest: 'd1' },
    { name: 'north', kubeconfig: '/k/north', digest: 'd3-new' },
    { name: 'south', kubeconfig: '/k/south', digest: 'd4' },
  ]);
  assert.deepEqual(diff.letGo, ['north', 'west']);
  assert.deepEqual(
    diff.take.map((c) => c.name),
    ['north', 'south'],
  );
  assert.deepEqual(
    diffClusters(
      served,
      [...served].map(([name, digest]) => ({ name, kubeconfig: `/k/${name}`, digest })),
    ),
    {
      take: [],
      letGo: [],
    },
  );
});

void test('a rescan of the directory says a file it cannot serve and serves the others (never fatal once running)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pool-unit-'));
  try {
    fs.writeFileSync(path.join(dir, 'east.kubeconfig'), 'kind: Config\n');
    fs.writeFileSync(path.join(dir, 'Bad_Name.yaml'), 'kind: Config\n');
    fs.writeFileSync(path.join(dir, 'west.yaml'), 'kind: Config\n');
    fs.writeFileSync(path.join(dir, 'west.conf'), 'kind: Config\n');
    fs.writeFileSync(path.join(dir, 'south'), 'users:\n- name: s\n  user:\n    exec: {command: sh}\n');
    const refused: string[] = [];
    const found = scanDir(dir, (where, why) => refused.push(`${path.basename(where)}: ${why}`));
    assert.deepEqual(
      found.map((c) => c.name),
      ['east'],
    );
    assert.equal(found[0]!.digest?.length, 64);
    assert.equal(refused.length, 3, refused.join('\n'));
    assert.match(refused.join('\n'), /Bad_Name\.yaml: file Bad_Name\.yaml: a cluster name is a DNS label/);
    assert.match(refused.join('\n'), /west\.yaml: west\.conf and west\.yaml both name cluster "west"/);
    assert.match(refused.join('\n'), /south: .*plugin \(exec "sh"\)/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void test('a report of the cluster on another task queue (moved into or out of a pool) is news, sent at once', () => {
  const seenAt = '2026-12-07T10:00:00.000Z';
  const memo = { uid: 'u', servers: [], svmVersion: '1', seenAt, queue: 'svm/cluster/east' };
  const report = { name: 'east', uid: 'u', servers: [], svmVersion: '1', seenAt: '2026-12-07T10:10:00.000Z' };
  assert.equal(reportUnchanged(memo, { ...report, queue: 'svm/cluster/east' }), true);
  assert.equal(reportUnchanged(memo, { ...report, queue: 'svm/pool/mgmt' }), false);
  assert.equal(reportUnchanged({ ...memo, queue: undefined }, { ...report, queue: 'svm/cluster/east' }), false);
});
