/**
 * Several replicas, one budget (DESIGN.md rules 7 and 10), for real: three
 * worker processes configured as deploy/ configures them (the API through
 * KUBECONFIG, one task queue, SVM_QPS, leases in svm-system) share a
 * migration; the leader is SIGKILLed mid-run. Their identities share a
 * 60-character prefix and two are one SVM_IDENTITY: membership is per
 * process (three member leases, the two say they share an identity, one
 * leader; before, a second test of three more replicas).
 *
 * - etcd: every object at the new storage version;
 * - each StorageVersionMigration created with kubectl during the run is
 *   attached by exactly one worker (only the leader runs the bridge), the one
 *   created after the kill by the new leader;
 * - the API servers' own count of the migrator's PUTs
 *   (apiserver_request_total, scraped from every server each second) never
 *   exceeds the budget by more than 10% over any 5 s window;
 * - shares follow demand, judged from outside the product: each replica runs as
 *   a ServiceAccount of its own and a FlowSchema per replica makes API
 *   Priority and Fairness count its rewrites on every server
 *   (apiserver_flowcontrol_dispatched_requests_total{flow_schema}: every
 *   rewrite counted is one replica's); the budget held while two or more
 *   replicas rewrote at once, and one migration alone on the two survivors is
 *   rewritten by one replica faster, over 5 s, than an even split of two
 *   allows (helpers/replica-shares.ts).
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { getLease } from '../src/kube/leases';
import { LEADER_LEASE } from '../src/worker/leader';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { budgetCeiling, busiestWindow } from './helpers/puts';
import { replicaIdentities, replicaSampler, replicaSamples, rewritesBetween, type ReplicaSample } from './helpers/replica-shares';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const NAMESPACE = 'svm-system'; // the default when SVM_NAMESPACE is unset outside a cluster, as in deploy/
// Well below what three replicas can do on this machine (each alone reaches more than this), so the budget is
// what holds them back: without one shared budget, three replicas would run at three times it. A migration runs
// one chunk at a time, on one replica, so three migrations at once keep every replica busy.
const QPS = 20;
// Every object costs 1/QPS s, so each one here is there for a proof. The leader is killed once the first migration
// has finished a chunk (100 objects, ~20 s in): the others (2 chunks each) are then at their second chunk, so the
// leader dies with a chunk in flight, and all three have kept every replica busy for ~15 s at the budget (3 windows
// of 5 s for the ceiling). COUNT leaves 400 objects at the kill: until the second StorageVersionMigration is attached
// (the hand-over, ~14 s as the leader lease lasts 15 s, and a few seconds more) the three migrations share what the
// survivors may spend, under 18/s, so the first one still runs when the new leader's bridge attaches that object to
// it (asserted: its run lists it). In a run here it had not finished its second chunk by then.
const COUNT = 500;
const OTHERS = 200;
// The lone migration is one chunk (its chunk size): the replica running it starts at its floor (2.5/s, at which the
// chunk would take 80 s) and is granted the larger share once every member counts its demand, 7 s after it asked:
// well within the chunk.
const LONE = 200;
// The API servers count a PUT when it completes: requests whose tokens were taken before a window may all
// complete inside it. So a window of T s may count up to QPS x (T + 0.2) (its tokens and the buckets' burst), one
// token more per bucket, and the requests in flight at its start: 2 per migration, 3 migrations at once
// (budgetCeiling). About 22.6/s on 5 s; a budget split wrongly among three replicas would show 30/s or more.
const CONCURRENCY = 2;

/** The most PUTs the servers may count in a window of this length: three replicas' buckets, three migrations. */
const ceiling = (seconds: number) => budgetCeiling(QPS, seconds, { buckets: 3, inFlight: 3 * CONCURRENCY });
const overBudget = (w: { puts: number; seconds: number; rate: number }) =>
  `${w.puts} PUTs in ${w.seconds.toFixed(1)} s (${w.rate.toFixed(1)}/s): more than the budget of ${QPS}/s allows (${ceiling(w.seconds)})`;

const PREFIX = 'storage-version-migrator-of-the-platform-team-cluster-abcdef';
const IDENTITIES = [`${PREFIX}-7d9f5-x2k4q`, `${PREFIX}-7d9f5-x2k4q`, `${PREFIX}-7d9f5-p9z8m`];

interface Replica {
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
}

function startReplica(taskQueue: string, kubeconfig: string, extraEnv: Record<string, string> = {}): Replica {
  // As deploy/deployment.yaml: Temporal address and task queue, the API through one kubeconfig (the load balancer, as
  // a ServiceAccount of the replica's own), the budget.
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KUBECONFIG: kubeconfig,
    TEMPORAL_ADDRESS: plane.temporal.address,
    TEMPORAL_NAMESPACE: plane.env.TEMPORAL_NAMESPACE ?? 'default',
    TEMPORAL_TASK_QUEUE: taskQueue,
    SVM_QPS: String(QPS),
    // debug: every change of a replica's budget share is logged (at info only a change of members).
    SVM_LOG_LEVEL: 'debug',
    ...extraEnv,
  };
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'worker'], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const r: Replica = { child, lines: [] };
  let rest = '';
  child.stdout!.on('data', (b: Buffer) => {
    const parts = (rest + b.toString('utf8')).split('\n');
    rest = parts.pop()!;
    for (const p of parts) {
      try {
        r.lines.push({ ...(JSON.parse(p) as Record<string, unknown>), seenAt: Date.now() });
      } catch {
        // not a log line
      }
    }
  });
  return r;
}

/**
 * Windows of at least 5 s (each sample to the first one 5 s later) between from and to in which two or more replicas
 * rewrote objects, by the API servers' count per replica: where the one budget was shared by several processes.
 */
function sharedWindows(taken: ReplicaSample[], from: number, to: number) {
  const out: Array<{ counts: number[]; seconds: number; at: number; puts: number }> = [];
  for (let i = 0; i < taken.length; i++) {
    if (taken[i]!.t < from) continue;
    const j = taken.findIndex((x, k) => k > i && x.t - taken[i]!.t >= 5000);
    if (j < 0 || taken[j]!.t > to) break;
    const counts = rewritesBetween(taken[i]!, taken[j]!);
    if (counts.filter((n) => n > 0).length >= 2)
      out.push({
        counts,
        seconds: (taken[j]!.t1 - taken[i]!.t0) / 1000,
        at: (taken[i]!.t - taken[0]!.t) / 1000,
        puts: taken[j]!.puts - taken[i]!.puts,
      });
  }
  return out;
}

const kubectl = (args: string[], input?: string) =>
  new Promise<string>((resolve, reject) => {
    const c = execFile(plane.env.KUBECTL!, ['--kubeconfig', plane.env.KUBECONFIG!, ...args], { timeout: 60_000 }, (err, out, errOut) =>
      err ? reject(new Error(`kubectl ${args.join(' ')}: ${errOut}`)) : resolve(out),
    );
    if (input !== undefined) c.stdin!.end(input);
  });

function createMigrationObject(name: string, group: string, resource: string): Promise<string> {
  const doc = JSON.stringify({
    apiVersion: 'migration.k8s.io/v1alpha1',
    kind: 'StorageVersionMigration',
    metadata: { name },
    spec: { resource: { group, resource } },
  });
  return kubectl(['create', '-f', '-'], doc);
}

void test('three replicas (two with one SVM_IDENTITY, all with a 60-character prefix in common) share one budget and one bridge; the leader is SIGKILLed mid-run: the migration succeeds, etcd clean, each CR handled once, PUTs within the budget', async () => {
  const crd = testCrd(`${uniq('rep')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const others = [testCrd(`${uniq('rep')}.svm.test`, 'gadgets', 'Gadget'), testCrd(`${uniq('rep')}.svm.test`, 'gizmos', 'Gizmo')];
  for (const o of others) {
    await applyCrd(plane.kube, o, 'v1');
    await createObjects(plane.kube, o, 'v1', OTHERS, { namespace: uniq('ns') });
    await applyCrd(plane.kube, o, 'v2');
  }
  // Migrated alone at the end, by the two survivors: shares follow demand, so it gets more than half the budget.
  const lone = testCrd(`${uniq('rep')}.svm.test`, 'doodads', 'Doodad');
  await applyCrd(plane.kube, lone, 'v1');
  await createObjects(plane.kube, lone, 'v1', LONE, { namespace: uniq('ns') });
  await applyCrd(plane.kube, lone, 'v2');
  const all = [crd, ...others, lone];

  // Each replica as a ServiceAccount of its own, its rewrites counted by the API servers under its FlowSchema.
  const ids = await replicaIdentities(plane, { namespace: NAMESPACE, prefix: uniq('svm-rep'), count: 3, resources: all });
  // The API servers' own count, every second, summed over the servers: in all and per replica.
  const puts = replicaSampler(plane, all, ids.identities);
  const { samples, sample } = puts;
  const taskQueue = uniq('tq');
  // Membership is per process: the replicas' identities share a 60-character prefix (Pod names of one Deployment
  // with a long name), and two of them are given one SVM_IDENTITY.
  const replicas = ids.identities.map((id, i) => startReplica(taskQueue, id.kubeconfig, { SVM_IDENTITY: IDENTITIES[i]! }));
  const m = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  const attached = (name: string) =>
    replicas.flatMap((r, i) =>
      r.lines.filter((l) => l.msg === 'StorageVersionMigration attached to its migration workflow' && l.name === name).map(() => i),
    );
  // The leader Lease names the process (identity and instance), as 'worker started' logs it.
  const identityOf = (r: Replica) => r.lines.find((l) => l.msg === 'worker started')?.holder as string | undefined;
  let handoverMs: number | undefined;
  // The first migration's objects counted (by whole chunks) when the leader was killed and when the second object was
  // attached.
  let countedAtKill: number | undefined;
  let countedAtSecond: number | undefined;
  let survivors: Replica[] = replicas;
  const loneRun = { from: 0, to: 0 };
  try {
    // Generous: each process compiles the TypeScript and bundles the workflows (slow on a busy machine).
    await eventually('every replica to start', async () => replicas.every((r) => identityOf(r)), 600_000);
    const h = await m.start(crd.name, { chunkSize: 100, concurrency: CONCURRENCY, heartbeatTimeoutSeconds: 5 });
    const otherHandles = await Promise.all(
      others.map((o) => m.start(o.name, { chunkSize: 100, concurrency: CONCURRENCY, heartbeatTimeoutSeconds: 5 })),
    );

    // A kubectl user asks for the same migration: the leader's bridge attaches it to the running workflow.
    const first = uniq('svm-first');
    await createMigrationObject(first, crd.group, crd.plural);
    await eventually('the first StorageVersionMigration to be attached', async () => attached(first).length > 0, 120_000);

    // Three processes, three members, though two share an identity: three member leases, the two that share one
    // know of each other, and only one process leads.
    await eventually(
      'three member leases',
      async () =>
        (
          await plane.kube.getJson<{ items: unknown[] }>(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`, {
            labelSelector: 'app.kubernetes.io/component=svm-worker-member',
          })
        ).items.length >= 3,
      60_000,
    );
    await eventually(
      'the two replicas sharing an identity to say so',
      async () => replicas.slice(0, 2).every((r) => r.lines.some((l) => String(l.msg).includes('another process runs with this identity'))),
      60_000,
    );
    const leading = replicas.filter((r) => r.lines.some((l) => String(l.msg).startsWith('leader: running the singletons')));
    assert.equal(leading.length, 1, 'one leader');

    // The leader dies mid-run, with its chunks.
    const underWay = await eventually(
      'the migration to be under way',
      async () => {
        const p = await h.progress();
        return p.counters.chunks >= 1 && p;
      },
      240_000,
    );
    countedAtKill = underWay.counters.migrated;
    const lease = await getLease(plane.kube, NAMESPACE, LEADER_LEASE);
    const leader = replicas.find((r) => identityOf(r) === lease?.spec.holderIdentity);
    assert.ok(leader, `the leader lease is held by one of the replicas (holder ${lease?.spec.holderIdentity})`);
    const killedAt = Date.now();
    leader.child.kill('SIGKILL');
    await new Promise((r) => leader.child.once('exit', r));
    survivors = replicas.filter((r) => r !== leader);
    const next = await eventually(
      'another replica to take the leader lease over',
      async () => {
        const l = await getLease(plane.kube, NAMESPACE, LEADER_LEASE);
        return survivors.find((r) => identityOf(r) === l?.spec.holderIdentity);
      },
      120_000,
    );
    handoverMs = Date.now() - killedAt;

    // A second kubectl user, after the hand-over: handled by the new leader, once.
    const second = uniq('svm-second');
    await createMigrationObject(second, crd.group, crd.plural);
    await eventually('the second StorageVersionMigration to be attached', async () => attached(second).length > 0, 120_000);
    countedAtSecond = (await h.progress()).counters.migrated;

    const result = await migrationResult(h);
    assert.equal(result.phase, 'Succeeded', result.message);
    // Both attached to this run of the migration, the second by the new leader while it still ran (had it ended first,
    // the bridge would have started another run for it).
    for (const name of [first, second])
      assert.ok(
        result.migrationObjects.includes(name),
        `${name} is not among the run's objects ${JSON.stringify(result.migrationObjects)}`,
      );
    assert.equal(result.counters.notFound + result.counters.failed, 0);
    for (const oh of otherHandles) assert.equal((await migrationResult(oh)).phase, 'Succeeded');
    for (const name of [first, second]) {
      await eventually(`StorageVersionMigration ${name} to say Succeeded`, async () => {
        const o = JSON.parse(await kubectl(['get', 'storageversionmigrations.migration.k8s.io', name, '-o', 'json'])) as {
          status?: { phase?: string };
        };
        return o.status?.phase === 'Succeeded';
      });
    }
    // One migration alone on the two survivors: the replica running its chunk has the demand and so most of the
    // budget (20 - 2.5 = 17.5/s once counted), where an even split would hold it to 10/s.
    loneRun.from = Date.now();
    const loneResult = await migrationResult(
      await m.start(lone.name, { chunkSize: LONE, concurrency: CONCURRENCY, heartbeatTimeoutSeconds: 5 }),
    );
    loneRun.to = Date.now();
    assert.equal(loneResult.phase, 'Succeeded', loneResult.message);

    // Each attached exactly once, the second by the new leader.
    assert.equal(attached(first).length, 1, `first attached by replicas ${JSON.stringify(attached(first))}`);
    assert.deepEqual(attached(second), [replicas.indexOf(next)]);
    // Every replica saw the others and took a third of the budget.
    for (const r of replicas)
      assert.ok(
        r.lines.some((l) => l.msg === 'load budget share' && l.members === 3),
        'each replica counted three members',
      );

    // etcd: every object at v2.
    assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
      [`${crd.group}/v2`]: COUNT,
    });
    for (const o of others)
      assert.deepEqual((await storedVersions(plane.etcd, { group: o.group, resource: o.plural, custom: true })).byApiVersion, {
        [`${o.group}/v2`]: OTHERS,
      });
    assert.deepEqual((await storedVersions(plane.etcd, { group: lone.group, resource: lone.plural, custom: true })).byApiVersion, {
      [`${lone.group}/v2`]: LONE,
    });
  } finally {
    await puts.stop();
    for (const r of replicas) r.child.kill('SIGTERM');
    await Promise.all(
      replicas.map((r) =>
        r.child.exitCode !== null || r.child.signalCode !== null ? undefined : new Promise((res) => r.child.once('exit', res)),
      ),
    );
    await m.close();
    await ids.remove();
  }
  // One more sample now that every migration has ended: the loop's last one may predate the last PUTs (CI saw 1598
  // of 1600 counted when the migrations ended less than a second after a sample).
  await sample();

  // The budget, by the API servers' count: every window of at least 5 s (each sample to the first one 5 s later).
  const total = samples.at(-1)!.puts - samples[0]!.puts;
  const objects = COUNT + 2 * OTHERS + LONE;
  assert.ok(total >= objects, `the servers counted ${total} PUTs of ${objects} objects`);
  const busiest = (from: number, to: number) => busiestWindow(samples, from, to);
  const worst = busiest(-Infinity, Infinity);
  const alone = busiest(loneRun.from, loneRun.to);
  console.log(
    `replicas: ${total} PUTs counted by the API servers; busiest window ${worst.puts} PUTs in ${worst.seconds.toFixed(1)} s at +${worst.from.toFixed(0)} s = ${worst.rate.toFixed(1)}/s (budget ${QPS}/s, ceiling ${ceiling(worst.seconds)} PUTs); leader SIGKILLed at ${countedAtKill} of ${COUNT} objects counted, hand-over ${((handoverMs ?? 0) / 1000).toFixed(1)} s, second object attached at ${countedAtSecond}; one migration alone on two replicas: ${LONE} objects in ${((loneRun.to - loneRun.from) / 1000).toFixed(1)} s, busiest window ${alone.rate.toFixed(1)}/s`,
  );
  // The outside judge holds: every rewrite the servers counted is one replica's (its FlowSchema's).
  const byReplica = rewritesBetween(samples[0]!, samples.at(-1)!);
  assert.equal(
    byReplica.reduce((a, n) => a + n, 0),
    total,
    `the servers counted ${total} rewrites, the replicas' flow schemas ${JSON.stringify(byReplica)}`,
  );
  // One budget shared, by the API servers' count: the replicas rewrote at once (in a window of 5 s, two or more of
  // them), and no window, those included, went past the budget (below).
  const shared = sharedWindows(samples, -Infinity, Infinity);
  const busiestShared = shared.reduce((a, w) => (w.puts / w.seconds > a.puts / a.seconds ? w : a), shared[0]!);
  // Shares follow demand: one migration alone on two replicas was rewritten by one of them, over 5 s, faster than an
  // even split of two (10/s) allows; the killed leader's count says nothing of the lone run.
  const loneBusiest = survivors
    .map((r) => busiestWindow(replicaSamples(samples, replicas.indexOf(r)), loneRun.from, loneRun.to))
    .reduce((a, w) => (w.rate > a.rate ? w : a));
  const evenSplit = budgetCeiling(QPS / 2, loneBusiest.seconds, { buckets: 1, inFlight: CONCURRENCY });
  console.log(
    `replicas, by flow schema: rewrites ${JSON.stringify(byReplica)}; ${shared.length} windows of 5 s with two or more replicas rewriting, the busiest ${JSON.stringify(busiestShared?.counts)} in ${busiestShared?.seconds.toFixed(1)} s at +${busiestShared?.at.toFixed(0)} s; the lone migration's busiest replica ${loneBusiest.puts} in ${loneBusiest.seconds.toFixed(1)} s = ${loneBusiest.rate.toFixed(1)}/s (an even split of two allows ${evenSplit})`,
  );
  assert.ok(shared.length > 0, `no window of 5 s in which two replicas rewrote at once: ${JSON.stringify(byReplica)}`);
  assert.ok(
    loneBusiest.puts > evenSplit,
    `one migration alone on two replicas: its busiest replica rewrote ${loneBusiest.puts} objects in ${loneBusiest.seconds.toFixed(1)} s, within an even split's ${evenSplit}`,
  );
  assert.ok(worst.puts <= ceiling(worst.seconds), overBudget(worst));
});
