/**
 * Trust domains on one Temporal (issue 61, docs/fleet.md "Trust domains", docs/security.md "Trust domains"): a
 * secured temporal-server (mTLS, its JWT claim mapper and default authorizer) with three namespaces: domain A
 * (cluster a's worker, with an `A:write` token), domain B (cluster b's, `B:write`) and the fleet's F (the fleet's
 * worker, `F:write`, holding a client per domain from SVM_FLEET_DOMAINS). One kube plane stands for both clusters
 * (two names; each domain pins its own), with a CRD of each cluster's to watch in etcd.
 *
 *   1. With A's credential, every route toward B and F (start, signal, terminate, describe, list, history, polls of
 *      their task queues, an activity's completion, b's migration ID pre-started, b's registration forged) is
 *      PERMISSION_DENIED; what A may do in A toward b (a registration of b, a step on b's queue) is harmless; b's
 *      objects in etcd keep their modRevisions.
 *   2. A campaign in F over a and b (each reached only through the fleet's activities) ends Succeeded; each row
 *      matches etcd (every object at the new version), and b's row rests on b's registration in B (the forged one
 *      in A is named as ignored).
 *   3. A step's word is not the row's: b's own credential pre-starts b's step in B on a queue of its own and
 *      completes it with a forged success; the member joins it, and the fleet, judging from b's records in B, fails
 *      the row (no migration of the resource named was run there).
 *   4. A record forged inside A for cluster a (a hand-written poller completing `migrate/a/<resource>` on a queue of
 *      its own) does not count: checkRecord says why.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { NativeConnection } from '@temporalio/worker';
import { clusterTaskQueue, fleetTaskQueue } from '../src/api/cluster';
import { zeroCounters } from '../src/api/counters';
import { installCrds } from '../src/client/cli-migrate';
import { Fleet } from '../src/client/fleet';
import { temporalConnectionOptions, type TemporalSettings } from '../src/config/temporal';
import { campaignMemberId, clusterRegistrationId, type CampaignRow } from '../src/contract/fleet';
import { Placement } from '../src/contract/placement';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { isRunning } from '../src/dev/plane';
import { mintTemporalToken, temporalPermission } from '../src/dev/temporal-auth';
import { temporalTlsConnection } from '../src/dev/temporal-server';
import { pinOf } from '../src/kube/cluster-identity';
import { migrationRecords } from '../src/kube/migration-record';
import { createMigratorWorker, fleetWorker, type MigratorWorker } from '../src/worker/worker';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { recording } from './helpers/histories';
import { completeAsForger } from './helpers/forge';
import { kubeSystemUid } from './helpers/identity';
import { eventually, workflowResult } from './helpers/migrate';
import { removePlanes, securedServerPlane, uniq, type TestPlane } from './helpers/plane';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** The file's own files (HOME of the `svm` it runs, key files, certificates): the plane's directory is the run's. */
const scratch = mkdtempSync(path.join(tmpdir(), 'svm-domains-'));
const repo = path.resolve(__dirname, '..');
const COUNT = 20;
const base = uniq('tq-dom');
const [nsA, nsB, nsF] = [uniq('dom-a'), uniq('dom-b'), uniq('fleet')];
const [a, b] = [uniq('a'), uniq('b')];
const crdA = testCrd(`${uniq('doma')}.svm.test`);
const crdB = testCrd(`${uniq('domb')}.svm.test`);
const prefixOf = (c: typeof crdA) => `/registry/${c.group}/${c.plural}/`;
let plane: TestPlane | undefined;
/** The plane's directory when this file brought it up itself (run alone), to take down when it ends. */
let own: string | undefined;
let uid = '';
let token: Record<'A' | 'B' | 'F' | 'fleetA' | 'fleetB', string>;
const running: Array<{ stop: () => void; done: Promise<unknown> }> = [];

const p = () => plane!;
const tlsFiles = () => p().state.temporalServer!.tls!;
const scoped = (namespace: string, apiKey: string): TemporalSettings & { address: string } => ({
  ...p().temporal.settings,
  namespace,
  apiKey,
  taskQueue: base,
});
/** The administrator's client of a namespace (the test's own reads). */
const adminIn = (namespace: string) => new Client({ connection: p().temporal.connection, namespace });

before(async () => {
  ({ plane, own } = await securedServerPlane());
  await installCrds(p().kube);
  const admin = p().temporal.connection;
  for (const namespace of [nsA, nsB, nsF]) {
    await admin.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    let r = await svmSetup(namespace);
    for (let i = 0; i < 15 && r.code !== 0; i++) {
      await new Promise((res) => setTimeout(res, 2000));
      r = await svmSetup(namespace);
    }
    assert.equal(r.code, 0, `svm setup (administrator) of ${namespace}: ${r.stderr}`);
  }
  const auth = p().state.temporalServer!.auth!;
  const mint = (subject: string, namespace: string) =>
    mintTemporalToken(auth, { subject, permissions: [temporalPermission(namespace, 'write')], ttlSeconds: 3600 });
  token = {
    A: mint('cluster-a', nsA),
    B: mint('cluster-b', nsB),
    F: mint('fleet', nsF),
    fleetA: mint('fleet', nsA),
    fleetB: mint('fleet', nsB),
  };
  for (const c of [crdA, crdB]) {
    await applyCrd(p().kube, c, 'v1');
    await createObjects(p().kube, c, 'v1', COUNT, { namespace: uniq('ns'), payload: (i) => ({ index: i }) });
    await applyCrd(p().kube, c, 'v2');
  }
  uid = await kubeSystemUid(p().kube);

  // Cluster a's worker in A, b's in B: each with its own domain's token only (and its registration's fleet worker there).
  for (const [name, namespace, key] of [
    [a, nsA, token.A],
    [b, nsB, token.B],
  ] as const) {
    const w = await createMigratorWorker({
      ...p().workerSettings(base),
      requireFence: false,
      requireStaticFence: false,
      temporal: { ...scoped(namespace, key), cluster: name },
    });
    keep(w);
  }
  // The fleet's worker in F: its own token for F, and a client per domain from SVM_FLEET_DOMAINS (a key file each).
  const keyFile = (name: string, key: string) => {
    const f = path.join(scratch, `${name}.jwt`);
    writeFileSync(f, key, { mode: 0o600 });
    return f;
  };
  const domainsFile = path.join(scratch, 'domains.json');
  writeFileSync(
    domainsFile,
    JSON.stringify({
      domains: [
        { name: 'dom-a', namespace: nsA, clusters: [a], apiKeyFile: keyFile('fleet-a', token.fleetA) },
        { name: 'dom-b', namespace: nsB, clusters: [b], apiKeyFile: keyFile('fleet-b', token.fleetB) },
      ],
    }),
  );
  const fleetSettings = { ...p().workerSettings(base), temporal: scoped(nsF, token.F) };
  const connection = await NativeConnection.connect(temporalConnectionOptions(fleetSettings.temporal));
  const client = new Client({ connection: await Connection.connect(temporalConnectionOptions(fleetSettings.temporal)), namespace: nsF });
  const fw = await fleetWorker(connection, fleetSettings, client, { SVM_FLEET_DOMAINS: domainsFile });
  let stop!: () => void;
  const stopped = new Promise<void>((res) => (stop = res));
  running.push({
    stop,
    done: fw
      .runUntil(stopped)
      .finally(() => Promise.all([connection.close(), client.connection.close()]))
      .catch((err: unknown) => process.stderr.write(`  fleet worker: ${String(err)}\n`)),
  });
  // Each cluster registered in its own domain (its worker's start): its uid pinned there.
  for (const [name, namespace] of [
    [a, nsA],
    [b, nsB],
  ] as const)
    await eventually(`${name} registered in ${namespace}`, async () => (await pinOf(adminIn(namespace), name))?.uid, 120_000);
});

function keep(w: MigratorWorker) {
  let stop!: () => void;
  const stopped = new Promise<void>((res) => (stop = res));
  running.push({ stop, done: w.runUntil(stopped).catch((err: unknown) => process.stderr.write(`  worker: ${String(err)}\n`)) });
}

after(async () => {
  for (const r of running) r.stop();
  await Promise.all(running.map((r) => r.done));
  await plane?.close();
  rmSync(scratch, { recursive: true, force: true });
  if (!own) return; // the run's plane: scripts/test.sh takes it down, and checks nothing of it is left running
  const state = plane?.state;
  await removePlanes(own);
  if (state) assert.ok(!isRunning(state.temporalServer?.postgres) && !isRunning(state.temporal), 'down left a process running');
});

async function svmSetup(namespace: string): Promise<{ code: number; stderr: string }> {
  const env = Object.fromEntries(Object.entries(p().env).filter(([k]) => k.startsWith('TEMPORAL_')));
  try {
    await run(process.execPath, [path.join(repo, 'bin', 'svm.js'), 'setup'], {
      env: { PATH: process.env.PATH!, HOME: scratch, KUBECONFIG: p().env.KUBECONFIG!, ...env, TEMPORAL_NAMESPACE: namespace },
      timeout: 120_000,
    });
    return { code: 0, stderr: '' };
  } catch (err) {
    const e = err as { code?: number; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stderr: e.stderr ?? '' };
  }
}

/** What a call answers: 'allowed', or the gRPC status it was refused with (7: PERMISSION_DENIED). */
async function answer(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return 'allowed';
  } catch (err) {
    const e = err as { code?: number; cause?: { code?: number } };
    const code = e.code ?? e.cause?.code;
    return code === 7 ? 'PERMISSION_DENIED' : code === 16 ? 'UNAUTHENTICATED' : `code ${code}: ${(err as Error).message}`;
  }
}

/**
 * With SVM_RECORD_HISTORIES=1: every run of a campaign's members in F (following continue-as-new) saved as a fixture
 * `dmember-<scenario>-<i>.json` for test/unit-replay.test.ts (members of a domain: their activities toward it).
 */
async function recordMembers(campaign: string, clusters: string[], scenario: string): Promise<void> {
  if (!recording()) return;
  const client = adminIn(nsF);
  const out = path.join(repo, 'test', 'fixtures', 'histories');
  for (const c of clusters) {
    const workflowId = campaignMemberId(campaign, c);
    let runId: string | undefined =
      (await client.workflow.getHandle(workflowId).describe()).raw.workflowExecutionInfo?.firstRunId ?? undefined;
    for (let i = 0; runId; i++) {
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      const file = path.join(out, `dmember-${scenario}-${c === a ? 'a' : 'b'}-${i}.json`);
      writeFileSync(file, JSON.stringify({ workflowId, history: JSON.parse(historyToJSON(history)) as unknown }) + '\n');
      runId = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
    }
  }
}

const revisions = async (c: typeof crdA) => new Map((await readStoredObjects(p().etcd, prefixOf(c))).map((o) => [o.key, o.modRevision]));
const payload = (v: unknown) => ({ payloads: [defaultPayloadConverter.toPayload(v)] });

/** A forged report of cluster b (another uid, another Kubernetes version): what a forger would want b's registration to hold. */
const forgedReport = () => ({
  name: b,
  uid: 'forged-uid',
  servers: [{ server: 'forged:6443', version: 'v0.0.0' }],
  svmVersion: 'forged',
  seenAt: new Date().toISOString(),
});

void test("with domain A's credential, every route toward domain B and the fleet's namespace is refused, what it may do in A toward b is harmless, and b's objects in etcd are untouched", async () => {
  const before = await revisions(crdB);
  assert.equal(before.size, COUNT);
  const conn = await Connection.connect({ address: p().env.TEMPORAL_ADDRESS!, tls: temporalTlsConnection(tlsFiles()), apiKey: token.A });
  const s = conn.workflowService;
  const bQueue = clusterTaskQueue(base, b);
  const bMigration = Placement.of(base, b).id(`migrate/${crdB.plural}.${crdB.group}`);
  const fleetQueue = fleetTaskQueue(base);
  const kind = temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;
  const withDeadline = <T>(fn: () => Promise<T>) => conn.withDeadline(Date.now() + 10_000, fn);
  const routes: Array<[string, string, () => Promise<unknown>]> = [];
  for (const [where, namespace, queue, victim] of [
    ['B', nsB, bQueue, clusterRegistrationId(b)],
    ['F', nsF, fleetQueue, 'svm-campaign/anything'],
  ] as const) {
    routes.push(
      [
        where,
        `pre-start ${where === 'B' ? "b's migration ID" : 'a migration'}`,
        () =>
          s.startWorkflowExecution({
            namespace,
            workflowId: where === 'B' ? bMigration : uniq('forged'),
            workflowType: { name: 'migrateResource' },
            taskQueue: { name: queue },
            input: payload({ resource: `${crdB.plural}.${crdB.group}`, cluster: { name: b, uid } }),
            requestId: uniq('r'),
          }),
      ],
      [
        where,
        `forge ${where === 'B' ? "b's" : 'a'} registration (signal-with-start)`,
        () =>
          s.signalWithStartWorkflowExecution({
            namespace,
            workflowId: clusterRegistrationId(b),
            workflowType: { name: 'clusterRegistration' },
            taskQueue: { name: fleetQueue },
            input: payload({ name: b, uid: 'forged-uid' }),
            signalName: 'clusterSeen',
            signalInput: payload(forgedReport()),
            requestId: uniq('r'),
          }),
      ],
      [
        where,
        'signal',
        () =>
          s.signalWorkflowExecution({
            namespace,
            workflowExecution: { workflowId: victim },
            signalName: 'clusterSeen',
            input: payload(forgedReport()),
          }),
      ],
      [where, 'terminate', () => s.terminateWorkflowExecution({ namespace, workflowExecution: { workflowId: victim } })],
      [where, 'describe', () => s.describeWorkflowExecution({ namespace, execution: { workflowId: victim } })],
      [where, 'list', () => s.listWorkflowExecutions({ namespace, pageSize: 1 })],
      [where, 'history', () => s.getWorkflowExecutionHistory({ namespace, execution: { workflowId: victim } })],
      [
        where,
        `poll workflow tasks of ${queue}`,
        () => withDeadline(() => s.pollWorkflowTaskQueue({ namespace, taskQueue: { name: queue, kind }, identity: 'forger' })),
      ],
      [
        where,
        `poll activity tasks of ${queue}`,
        () => withDeadline(() => s.pollActivityTaskQueue({ namespace, taskQueue: { name: queue, kind }, identity: 'forger' })),
      ],
      [
        where,
        'complete an activity',
        () => s.respondActivityTaskCompletedById({ namespace, workflowId: victim, activityId: '1', result: payload({}) }),
      ],
      [where, 'fail an activity', () => s.respondActivityTaskFailedById({ namespace, workflowId: victim, activityId: '1' })],
    );
  }
  try {
    for (const [where, what, call] of routes) {
      const got = await answer(call);
      process.stderr.write(`  A's token, ${what} in ${where === 'B' ? `domain B (${nsB})` : `the fleet's namespace (${nsF})`}: ${got}\n`);
      assert.equal(got, 'PERMISSION_DENIED', `${what} in ${where}`);
    }
    // Its own domain answers (the refusals above are the namespace's, not the token's).
    assert.equal(await answer(() => s.listWorkflowExecutions({ namespace: nsA, pageSize: 1 })), 'allowed');

    // In A, toward b: a registration of b (forged uid and version) and b's step on b's queue name. Allowed, and harmless:
    // b's worker polls B, not A (nothing takes the step: checked at the end), and the fleet reads b's registration in B.
    const forgedReg = await answer(() =>
      s.signalWithStartWorkflowExecution({
        namespace: nsA,
        workflowId: clusterRegistrationId(b),
        workflowType: { name: 'clusterRegistration' },
        taskQueue: { name: fleetQueue },
        input: payload({ name: b, uid: 'forged-uid' }),
        signalName: 'clusterSeen',
        signalInput: payload(forgedReport()),
        requestId: uniq('r'),
      }),
    );
    process.stderr.write(`  A's token, a registration of b forged in A: ${forgedReg} (the fleet reads b's in B: see the campaign's row)\n`);
    assert.equal(forgedReg, 'allowed');
    const stray = await answer(() =>
      s.startWorkflowExecution({
        namespace: nsA,
        workflowId: `svm-campaign/${b}/stray`,
        workflowType: { name: 'clusterCampaignStep' },
        taskQueue: { name: bQueue },
        input: payload({ cluster: { name: b, uid }, migrate: [`${crdB.plural}.${crdB.group}`], parallelism: 1 }),
        requestId: uniq('r'),
      }),
    );
    process.stderr.write(`  A's token, b's campaign step started in A on b's queue (${bQueue}): ${stray}\n`);
    assert.equal(stray, 'allowed');
  } finally {
    await conn.close();
  }
  // b's objects: not one written (every modRevision as before).
  const now = await revisions(crdB);
  assert.equal(now.size, COUNT);
  for (const [key, rev] of before) assert.equal(now.get(key), rev, `${key} unchanged`);
  process.stderr.write(`  b's ${COUNT} objects in etcd: every modRevision unchanged\n`);
});

void test("a campaign in the fleet's namespace over a (domain A) and b (domain B) ends Succeeded, each row matching etcd; b's rests on its registration in B", async () => {
  const fleet = await Fleet.connect({ temporal: scoped(nsF, token.F) });
  const name = uniq('dom');
  try {
    const h = await fleet.startCampaign(name, {
      clusters: [a, b],
      migrate: [`${crdA.plural}.${crdA.group}`, `${crdB.plural}.${crdB.group}`],
      canary: a,
      parallel: 1,
      unreachableAfterSeconds: 30,
      deadlineSeconds: 900,
    });
    const status = await workflowResult(h.workflow, 600_000);
    const rows: Record<string, CampaignRow> = {};
    for (const c of [a, b])
      rows[c] = (await workflowResult(adminIn(nsF).workflow.getHandle(campaignMemberId(name, c)), 120_000)) as CampaignRow;
    for (const c of [a, b])
      process.stderr.write(
        `  campaign ${name}: ${c} ${rows[c]!.phase} ${rows[c]!.resources.succeeded}/${rows[c]!.resources.asked} ${rows[c]!.objects} objects, uid ${rows[c]!.uid}${rows[c]!.note ? ` (${rows[c]!.note})` : ''}\n`,
      );
    await recordMembers(name, [a, b], 'a-campaign-over-two-domains-succeeded');
    assert.equal(status.phase, 'Succeeded', status.message);
    for (const c of [a, b]) {
      const row = rows[c]!;
      assert.equal(row.phase, 'Succeeded', `${c}: ${row.note}`);
      assert.deepEqual(row.resources, { asked: 2, succeeded: 2 });
      assert.equal(row.uid, uid, `${c}'s verdict against its uid pinned in its domain`);
      // etcd: both resources' objects at v2, as many as the row says it handled
      let stored = 0;
      for (const crd of [crdA, crdB]) {
        const v = (await storedVersions(p().etcd, prefixOf(crd))).byApiVersion;
        assert.deepEqual(v, { [`${crd.group}/v2`]: COUNT }, `etcd: every ${crd.plural}.${crd.group} at v2`);
        stored += COUNT;
      }
      assert.equal(row.objects, stored, `${c}'s row counts the objects etcd holds`);
    }
    assert.match(
      rows[b]!.note ?? '',
      new RegExp(`a registration of ${b} in domain dom-a .* is ignored`),
      "b's row says the forgery in A is ignored",
    );
    // Its step and migrations ran in B (the fleet's client of B started the step; b's worker ran it), none in F or A.
    const stepInB = await adminIn(nsB).workflow.getHandle(`svm-campaign/${b}/${name}`).describe();
    assert.equal(stepInB.status.name, 'COMPLETED');
    assert.equal(stepInB.taskQueue, clusterTaskQueue(base, b));
    const inF = await answer(() => adminIn(nsF).workflow.getHandle(`svm-campaign/${b}/${name}`).describe());
    assert.match(inF, /code 5|not found/i, 'no step in the fleet namespace');
    // The stray step started in A on b's queue name: no worker took it (two events: started, its task scheduled).
    const stray = await adminIn(nsA).workflowService.getWorkflowExecutionHistory({
      namespace: nsA,
      execution: { workflowId: `svm-campaign/${b}/stray` },
    });
    process.stderr.write(`  the stray step in A on b's queue: ${stray.history?.events?.length} events (no worker took it)\n`);
    assert.equal(stray.history?.events?.length, 2);
  } finally {
    await fleet.close();
  }
});

void test("a step's word is not the row's: b's own credential completes b's step with a forged success, and the fleet, reading b's records in B, fails the row", async () => {
  const name = uniq('word');
  const stepId = `svm-campaign/${b}/${name}`;
  const rogue = uniq('rogue');
  const conn = await Connection.connect({ address: p().env.TEMPORAL_ADDRESS!, tls: temporalTlsConnection(tlsFiles()), apiKey: token.B });
  const inB = new Client({ connection: conn, namespace: nsB });
  const fleet = await Fleet.connect({ temporal: scoped(nsF, token.F) });
  try {
    // Pre-started in B (the domain's own credential may), on a queue of its own: the member joins it.
    await inB.workflow.start('clusterCampaignStep', {
      taskQueue: rogue,
      workflowId: stepId,
      args: [{ cluster: { name: b, uid }, migrate: [`${crdB.plural}.${crdB.group}`], parallelism: 1 }],
    });
    const h = await fleet.startCampaign(name, {
      clusters: [b],
      migrate: [`${crdB.plural}.${crdB.group}`],
      unreachableAfterSeconds: 30,
      deadlineSeconds: 900,
    });
    const member = adminIn(nsF).workflow.getHandle(campaignMemberId(name, b));
    await eventually(
      "b's member awaiting the joined step",
      async () =>
        ((await member.describe().catch(() => undefined))?.raw.pendingActivities ?? []).some(
          (x) => x.activityType?.name === 'awaitDomainStep',
        ),
      120_000,
    );
    // The forger answers the step's first task: Succeeded, one resource migrated, 20 objects, no failure.
    await completeAsForger(inB, rogue, { clusterUid: uid, resources: { asked: 1, succeeded: 1 }, objects: COUNT, failures: [] });
    const status = await workflowResult(h.workflow, 600_000);
    const row = (await workflowResult(member, 120_000)) as CampaignRow;
    await recordMembers(name, [b], 'a-forged-step-in-its-domain-fails-the-row');
    process.stderr.write(
      `  campaign ${name} over b, its step forged in B: ${status.phase}; b ${row.phase}: ${row.failures.map((f) => f.reason).join('; ')}\n`,
    );
    assert.equal(row.phase, 'Failed');
    assert.equal(row.resources.succeeded, 0, "nothing counted on the step's word");
    assert.match(row.failures[0]?.reason ?? '', /accounts for 0 of the 1 resources the campaign named/);
    assert.notEqual(status.phase, 'Succeeded');
  } finally {
    await fleet.close();
    await conn.close();
  }
});

void test('a record forged inside A for cluster a (a hand-written poller on a queue of its own) does not count: checkRecord says why', async () => {
  const forgedResource = { group: 'svm.test', resource: uniq('forged') };
  const id = Placement.of(base, a).id(`migrate/${forgedResource.resource}.${forgedResource.group}`);
  const conn = await Connection.connect({ address: p().env.TEMPORAL_ADDRESS!, tls: temporalTlsConnection(tlsFiles()), apiKey: token.A });
  const client = new Client({ connection: conn, namespace: nsA });
  const rogue = uniq('rogue');
  try {
    await client.workflow.start('migrateResource', {
      taskQueue: rogue,
      workflowId: id,
      args: [{ resource: `${forgedResource.resource}.${forgedResource.group}`, cluster: { name: a, uid } }],
    });
    await completeAsForger(client, rogue, {
      phase: 'Succeeded',
      counters: zeroCounters(),
      record: {
        by: 'svm',
        encodingVersion: `${forgedResource.group}/v2`,
        verified: true,
        checked: 'forged',
        token: 'forged',
        clusterUid: uid,
        resource: `${forgedResource.resource}.${forgedResource.group}`,
      },
    });
    assert.equal((await client.workflow.getHandle(id).describe()).status.name, 'COMPLETED');
    // The fleet's judge and every reader use this check, on the domain's own history.
    const record = await migrationRecords(adminIn(nsA), Placement.of(base, { name: a, uid }))(forgedResource);
    process.stderr.write(`  a forged Succeeded record of ${id} in A: ${record?.refused ?? 'counted'}\n`);
    assert.equal(record?.record, undefined, 'no pass record taken from it');
    assert.match(record?.refused ?? '', new RegExp(`ran on task queue ${rogue}, not ${clusterTaskQueue(base, a).replace(/\//g, '\\/')}`));
  } finally {
    await conn.close();
  }
});
