/**
 * Several replicas, one budget (DESIGN.md rules 7 and 10), for real: three
 * worker processes configured as deploy/ configures them (the API through
 * KUBECONFIG, one task queue, SVM_QPS, leases in svm-system) share a
 * migration; the leader is SIGKILLed mid-run.
 *
 * - etcd: every object at the new storage version;
 * - each StorageVersionMigration created with kubectl during the run is
 *   attached by exactly one worker (only the leader runs the bridge), the one
 *   created after the kill by the new leader;
 * - the API servers' own count of the migrator's PUTs
 *   (apiserver_request_total, scraped from every server each second) never
 *   exceeds the budget by more than 10% over any 5 s window;
 * - shares follow demand: the budget is split while all three have work, and
 *   one migration alone on the two survivors is granted clearly more than an
 *   even split (the shares the replicas log, not a measured rate).
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
import { budgetCeiling, busiestWindow, putSampler } from './helpers/puts';
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

interface Replica {
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
}

function startReplica(taskQueue: string, extraEnv: Record<string, string> = {}): Replica {
  // As deploy/deployment.yaml: Temporal address and task queue, the API through one kubeconfig, the budget.
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KUBECONFIG: plane.env.KUBECONFIG,
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

/** The budget shares the replicas logged between from and to (ms since the epoch), each with its members. */
/**
 * The shares each replica was granted between from and to: those it logged within, and the one in force at `to` (a
 * share is logged only when it changes: one granted before the window may hold all of it).
 */
function sharesOf(replicas: Replica[], from: number, to: number): Array<{ share: number; members: number }> {
  return replicas.flatMap((r) => {
    const lines = r.lines.filter((l) => l.msg === 'load budget share' && Number(l.seenAt) <= to);
    const within = lines.filter((l) => Number(l.seenAt) >= from);
    const inForce = lines.at(-1);
    return [...within, ...(inForce ? [inForce] : [])].map((l) => ({ share: Number(l.share), members: Number(l.members) }));
  });
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

void test('three replicas share one budget and one bridge; the leader is SIGKILLed mid-run: the migration succeeds, etcd clean, each CR handled once, PUTs within the budget', async () => {
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

  // The API servers' own count, every second, summed over the servers.
  const puts = putSampler(plane, all);
  const { samples, sample } = puts;
  const taskQueue = uniq('tq');
  const replicas = [startReplica(taskQueue), startReplica(taskQueue), startReplica(taskQueue)];
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
  // Shares follow demand, by what the budget granted (not by a rate, which the machine's speed moves): the budget
  // was split among the replicas while all three had work, and one migration alone on two replicas was granted
  // clearly more than an even split of two (10/s).
  assert.ok(
    sharesOf(replicas, -Infinity, Infinity).some((l) => l.members === 3 && l.share <= QPS / 2),
    'the budget was never split among the three replicas',
  );
  // The survivors' shares: the killed leader's last one says nothing of the lone run.
  const loneShares = sharesOf(survivors, loneRun.from, loneRun.to).map((l) => l.share);
  assert.ok(
    loneShares.some((share) => share >= (QPS / 2) * 1.3),
    `one migration alone on two replicas was granted at most ${Math.max(0, ...loneShares)}/s: an even split gives it ${QPS / 2}/s`,
  );
  assert.ok(worst.puts <= ceiling(worst.seconds), overBudget(worst));
});

void test("budget membership is per process: three replicas whose identities share a 60-character prefix, two of them with the same SVM_IDENTITY, hold the budget by the API servers' count", async () => {
  const crds = [
    testCrd(`${uniq('idp')}.svm.test`, 'gadgets', 'Gadget'),
    testCrd(`${uniq('idp')}.svm.test`, 'gizmos', 'Gizmo'),
    testCrd(`${uniq('idp')}.svm.test`),
  ];
  // 3 x 150 objects: ~20 s with all three replicas busy once each is counted active (4 windows of 5 s for the
  // ceiling, where one budget split wrongly among them would show at once), and long enough for each replica to
  // list the others' leases a few times (every 2 s), which the duplicate identity's warning needs.
  const PER_CRD = 150;
  for (const c of crds) {
    await applyCrd(plane.kube, c, 'v1');
    await createObjects(plane.kube, c, 'v1', PER_CRD, { namespace: uniq('ns') });
    await applyCrd(plane.kube, c, 'v2');
  }
  // Pod names of one Deployment with a long name: 60 characters in common. Two replicas are given one SVM_IDENTITY.
  const prefix = 'storage-version-migrator-of-the-platform-team-cluster-abcdef';
  assert.equal(prefix.length, 60);
  const identities = [`${prefix}-7d9f5-x2k4q`, `${prefix}-7d9f5-x2k4q`, `${prefix}-7d9f5-p9z8m`];
  const puts = putSampler(plane, crds);
  const taskQueue = uniq('tq');
  const replicas = identities.map((id) => startReplica(taskQueue, { SVM_IDENTITY: id }));
  const m = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  const from = Date.now();
  try {
    await eventually('every replica to start', async () => replicas.every((r) => r.lines.some((l) => l.msg === 'worker started')), 600_000);
    const handles = await Promise.all(
      crds.map((c) => m.start(c.name, { chunkSize: 100, concurrency: CONCURRENCY, heartbeatTimeoutSeconds: 5 })),
    );
    for (const h of handles) assert.equal((await migrationResult(h)).phase, 'Succeeded');
    // Three members, three leases: every replica counted three.
    for (const r of replicas)
      assert.ok(
        r.lines.some((l) => l.msg === 'load budget share' && l.members === 3),
        'each replica counted three members',
      );
    const members = await plane.kube.getJson<{ items: unknown[] }>(`/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`, {
      labelSelector: 'app.kubernetes.io/component=svm-worker-member',
    });
    assert.ok(members.items.length >= 3, `${members.items.length} member leases`);
    // The two with one identity know of each other; only one process leads.
    for (const r of replicas.slice(0, 2))
      assert.ok(
        r.lines.some((l) => String(l.msg).includes('another process runs with this identity')),
        'a replica sharing its identity says so',
      );
    const leading = replicas.filter((r) => r.lines.some((l) => String(l.msg).startsWith('leader: running the singletons')));
    assert.equal(leading.length, 1, 'one leader');
  } finally {
    for (const r of replicas) r.child.kill('SIGTERM');
    await Promise.all(
      replicas.map((r) =>
        r.child.exitCode !== null || r.child.signalCode !== null ? undefined : new Promise((res) => r.child.once('exit', res)),
      ),
    );
    await m.close();
  }
  await puts.sample();
  await puts.stop();
  const worst = busiestWindow(puts.samples, from, Infinity);
  const total = puts.samples.at(-1)!.puts - puts.samples[0]!.puts;
  console.log(
    `replicas with one identity prefix: ${total} PUTs counted by the API servers; busiest window ${worst.puts} PUTs in ${worst.seconds.toFixed(1)} s = ${worst.rate.toFixed(1)}/s (budget ${QPS}/s, ceiling ${ceiling(worst.seconds)} PUTs)`,
  );
  assert.ok(total >= 3 * PER_CRD, `the servers counted ${total} PUTs of ${3 * PER_CRD} objects`);
  assert.ok(
    sharesOf(replicas, from, Infinity).some((l) => l.members === 3 && l.share <= QPS / 2),
    'the budget was never split among the three replicas',
  );
  assert.ok(worst.puts <= ceiling(worst.seconds), overBudget(worst));
  for (const c of crds)
    assert.deepEqual((await storedVersions(plane.etcd, { group: c.group, resource: c.plural, custom: true })).byApiVersion, {
      [`${c.group}/v2`]: PER_CRD,
    });
});
