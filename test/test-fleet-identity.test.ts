/**
 * A verdict for one cluster is never another's (docs/fleet.md, "A cluster's identity"): two clusters on one
 * temporal-server on PostgreSQL (the suite's server plane), each a plane of the suite's own:
 *   - east: the server plane's own API;
 *   - west: the shared plane (two API servers behind one address).
 * Workers run as shipped (`svm worker`, deploy/deployment.yaml's environment). A worker named `east` is given
 * west's kubeconfig (a copy-paste slip in a pool's directory or a Helm value):
 *   1. before east's own worker ever registered: west's uid is pinned to west, so it is refused;
 *   2. after east registered (and migrated under its own uid), started before a campaign and `svm migrate
 *      --cluster east`: east's name is pinned to its own uid, so it is refused again.
 * Each time it serves nothing (its log, its metric, east's registration say so), every start path refuses east
 * (the CLI before anything starts; the campaign and a workflow started straight through Temporal end failed with
 * the message), and etcd shows nothing written to west: every object's modRevision unchanged, its CRD's
 * storedVersions unpruned. Then the operator's act: west decommissioned (`svm fleet forget`), east re-pinned to the
 * cluster its worker now reaches (`svm fleet pin`, printing what it replaces), standing for east recreated; east's
 * verdicts made against its old uid no longer count (`svm plan`, `svm fleet status`), and a migration under the new
 * pin rewrites every object (etcd).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { clusterTaskQueue, fleetTaskQueue, idInCluster } from '../src/api/cluster';
import { campaignWorkflowId, CAMPAIGN_WORKFLOW_TYPE, type CampaignStatus } from '../src/contract/fleet';
import { CampaignHandle, type RegisteredCluster } from '../src/client/fleet';
import { installCrds } from '../src/client/cli-migrate';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { getCrd } from '../src/kube/crds';
import { pinOf } from '../src/kube/cluster-identity';
import { applyCrd, createObjects, deleteCrd, testCrd } from './helpers/crd';
import { serverPlane, testPlane, uniq, type TestPlane } from './helpers/plane';
import { eventually, workflowResult } from './helpers/migrate';
import { fleetWorkers, type FleetWorkers } from './helpers/fleet-workers';
import { forgetNames, freeIdentity } from './helpers/identity';

const COUNT = 60;
const scratch = mkdtempSync(path.join(tmpdir(), 'svm-identity-'));
const crd = testCrd(`${uniq('id')}.svm.test`);
const prefix = `/registry/${crd.group}/${crd.plural}/`;
const east = uniq('east');
const west = uniq('west');
const base = uniq('tq-identity');
let eastPlane: TestPlane;
let westPlane: TestPlane;
let fw: FleetWorkers;
let uid: { east: string; west: string };

before(async () => {
  [eastPlane, westPlane] = await Promise.all([serverPlane(), testPlane()]);
  fw = fleetWorkers({ temporalAddress: eastPlane.temporal.address, taskQueue: base, scratch });
  // The same CRD in both: COUNT objects stored at v1, the storage version then moved to v2 (a migration is due).
  for (const p of [eastPlane, westPlane]) {
    await installCrds(p.kube);
    await applyCrd(p.kube, crd, 'v1');
    await createObjects(p.kube, crd, 'v1', COUNT, { namespace: uniq('ns') });
    await applyCrd(p.kube, crd, 'v2');
  }
  const client = eastPlane.temporal.client;
  uid = { east: await freeIdentity(client, eastPlane.kube, east), west: await freeIdentity(client, westPlane.kube, west) };
});

after(async () => {
  fw?.killAll();
  if (eastPlane) await forgetNames(eastPlane.temporal.client, [east, west]).catch(() => undefined);
  for (const p of [eastPlane, westPlane]) if (p) await deleteCrd(p.kube, crd).catch(() => undefined);
  await westPlane?.close();
  await eastPlane?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** Each object's etcd modRevision: the judge of "nothing written". */
const revisions = async (p: TestPlane) => new Map((await readStoredObjects(p.etcd, prefix)).map((o) => [o.key, o.modRevision]));
const versionsOf = async (p: TestPlane) => (await storedVersions(p.etcd, prefix)).byApiVersion;
const storedVersionsOf = async (p: TestPlane) => (await getCrd(p.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions;

function assertUntouched(now: Map<string, number>, before: Map<string, number>, what: string) {
  assert.equal(now.size, COUNT, what);
  for (const [key, rev] of before) assert.equal(now.get(key), rev, `${what}: ${key} unchanged`);
}

/** A worker's svm_cluster_identity_conflict, read from its /metrics. */
function conflictMetric(port: number): Promise<string | undefined> {
  return metricOf(port, 'svm_cluster_identity_conflict');
}

/** A worker's gauge (its one series; prom-client shows an unset one as 0), or undefined when it has none. */
async function metricOf(port: number, name: string): Promise<string | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return new RegExp(`^${name}\\{[^}]*\\} (\\d+)$`, 'm').exec(text)?.[1];
}

const kubeconfigOf = (p: TestPlane) => p.env.KUBECONFIG!;

/** Starts a worker named `name` with plane p's kubeconfig (an administrator's, which no fence matches). */
function worker(name: string, p: TestPlane, label: string, over: Record<string, string> = {}) {
  return fw.start(
    label,
    fw.env({
      KUBECONFIG: kubeconfigOf(p),
      SVM_CLUSTER: name,
      SVM_REQUIRE_FENCE: 'false',
      SVM_REQUIRE_STATIC_FENCE: 'false',
      SVM_BRIDGE: 'false',
      ...over,
    }),
  );
}

/** The misconfigured worker: named east, given west's kubeconfig. Resolves once it has said it serves nothing. */
async function crossedWorker(label: string) {
  const w = await worker(east, westPlane, label, { SVM_FLEET_WORKER: 'false' });
  await eventually(
    `${label} reports its conflict on its metric`,
    async () => ((await conflictMetric(w.metricsPort)) === '1' ? true : undefined),
    60_000,
  );
  // Its registration holds the conflict (a signal the fleet's worker applies, when the registration runs already).
  await eventually(
    `${label}'s conflict in east's registration`,
    async () => ((await pinOf(eastPlane.temporal.client, east))?.conflict?.uid === uid.west ? true : undefined),
    60_000,
  );
  const log = readFileSync(w.log, 'utf8');
  const line = log.split('\n').find((l) => l.includes('identity conflict'));
  assert.ok(line, `${label}'s log says so at start: ${log.slice(-2000)}`);
  process.stdout.write(`# ${label} at start: ${(JSON.parse(line) as { msg: string }).msg}\n`);
  return { ...w, line: (JSON.parse(line) as { msg: string }).msg };
}

/** What an operator sees and gets for east while its identity is in conflict: refusals before anything starts, and failures naming it. */
async function refusedEverywhere(phase: string): Promise<void> {
  // `svm migrate --cluster east`, as an upgrade script runs it (west's kubeconfig at hand, as the slip had it).
  const migrate = await fw.svm(['migrate', crd.name, '--cluster', east, '--wait', '--kubeconfig', kubeconfigOf(westPlane)]);
  process.stdout.write(`# ${phase}: svm migrate --cluster ${east} exited ${migrate.code}: ${migrate.stderr.trim()}\n`);
  assert.notEqual(migrate.code, 0);
  assert.match(migrate.stderr, new RegExp(`cluster "${east}"'s identity is in conflict: .*${uid.west}.*Nothing was started`));
  // `svm fleet migrate` refuses before starting a campaign.
  const campaign = uniq('c');
  const cli = await fw.svm(['fleet', 'migrate', campaign, crd.name, '--clusters', east, '--wait']);
  process.stdout.write(`# ${phase}: svm fleet migrate --clusters ${east} exited ${cli.code}: ${cli.stderr.trim()}\n`);
  assert.notEqual(cli.code, 0);
  assert.match(cli.stderr, /identity is in conflict.*No campaign was started/);
  const client = eastPlane.temporal.client;
  await assert.rejects(client.workflow.getHandle(campaignWorkflowId(campaign)).describe(), /not found/i, 'no campaign started');
  // A campaign started straight through Temporal (any SDK): east's row fails with the conflict, nothing started there.
  const started = uniq('c');
  const h = await client.workflow.start(CAMPAIGN_WORKFLOW_TYPE, {
    taskQueue: fleetTaskQueue(base),
    workflowId: campaignWorkflowId(started),
    args: [{ clusters: [east], migrate: [crd.name], unreachableAfterSeconds: 5, deadlineSeconds: 60 }],
  });
  await eventually(`${phase}: the campaign ends`, async () => (await h.describe()).status.name !== 'RUNNING' || undefined, 120_000);
  const result = (await workflowResult(h, 30_000)) as CampaignStatus;
  assert.equal(result.counts?.Failed, 1);
  assert.match(result.failures?.[0]?.note ?? '', /identity is in conflict/);
  // Its row, as `svm fleet status` pages it from the campaign's member.
  const s = await new CampaignHandle(started, h, client).status();
  const row = s.rows.find((r) => r.cluster === east)!;
  process.stdout.write(`# ${phase}: campaign over ${east}: ${s.phase}; ${row.phase}: ${row.note}\n`);
  assert.equal(row.phase, 'Failed');
  assert.equal(row.uid, undefined, 'no verdict for east');
  assert.match(row.note ?? '', /identity is in conflict/);
  // A migration started straight on east's task queue: the worker there takes it and refuses its first task.
  const id = idInCluster(`migrate/${uniq('direct')}/${crd.name}`, east);
  const m = await client.workflow.start('migrateResource', {
    taskQueue: clusterTaskQueue(base, east),
    workflowId: id,
    args: [{ resource: crd.name, cluster: { name: east } }],
  });
  await eventually(`${phase}: the migration ends`, async () => (await m.describe()).status.name !== 'RUNNING' || undefined, 120_000);
  const failure = await workflowResult(m, 30_000).then(
    () => 'succeeded',
    (err: unknown) => {
      const out: string[] = [];
      for (let e: unknown = err; e instanceof Error; e = e.cause) out.push(e.message);
      return out.join(' / ');
    },
  );
  process.stdout.write(`# ${phase}: a migration started straight on ${east}'s queue: ${failure}\n`);
  assert.match(
    failure,
    new RegExp(`${uid.west}.*nothing was done: this worker serves nothing while cluster "${east}"'s identity is in conflict`),
  );
}

void test(
  "a worker named for one cluster with another's kubeconfig serves nothing, and no verdict of one cluster counts for another",
  { timeout: 15 * 60_000 },
  async () => {
    const westBefore = await revisions(westPlane);
    const eastBefore = await revisions(eastPlane);
    assert.deepEqual(await versionsOf(westPlane), { [`${crd.group}/v1`]: COUNT });
    assert.deepEqual(await storedVersionsOf(westPlane), ['v1', 'v2']);

    // west's own worker registers west (and runs the fleet's workflows).
    const westWorker = await worker(west, westPlane, 'west');
    await eventually(
      'west registered',
      async () => ((await pinOf(eastPlane.temporal.client, west))?.uid === uid.west ? true : undefined),
      60_000,
    );

    // 1. Before east's own worker ever registered: the crossed worker's uid is west's, pinned to west.
    const crossed1 = await crossedWorker('crossed-1');
    assert.match(crossed1.line, new RegExp(`is cluster "${west}": its kube-system uid ${uid.west} is pinned to "${west}"`));
    const reg = await eventually(
      "east's registration listed",
      async () =>
        (JSON.parse((await fw.svm(['fleet', 'clusters', '-o', 'json'])).stdout) as RegisteredCluster[]).find((c) => c.name === east),
      60_000,
    );
    assert.equal(reg?.uid, undefined, "east's registration pins nothing of west");
    assert.equal(reg?.conflict?.uid, uid.west, "east's registration shows the conflict");
    await refusedEverywhere('1 (east never registered)');
    await fw.stop(crossed1.proc);
    assertUntouched(await revisions(westPlane), westBefore, 'west after 1');
    assertUntouched(await revisions(eastPlane), eastBefore, 'east after 1');

    // east's own worker comes; the operator, the slip fixed, confirms east's identity: the conflict is cleared.
    const eastWorker = await worker(east, eastPlane, 'east', { SVM_FLEET_WORKER: 'false' });
    await eventually('east confirmed', async () => ((await conflictMetric(eastWorker.metricsPort)) === '0' ? true : undefined), 60_000);
    const confirmed = await fw.svm(['fleet', 'pin', east, '--uid', uid.east]);
    process.stdout.write(`# ${confirmed.stdout.trim().split('\n').join('\n# ')}\n`);
    assert.equal(confirmed.code, 0, confirmed.stderr);
    assert.match(confirmed.stdout, /cleared the identity conflict/);
    // east migrated under its own uid: a campaign row (its verdict, with its uid) and a pass record.
    const first = uniq('first');
    const ok = await fw.svm([
      'fleet',
      'migrate',
      first,
      crd.name,
      '--clusters',
      east,
      '--drop',
      `${crd.group}/v1`,
      '--drop-window',
      '0',
      '--wait',
      '-o',
      'json',
    ]);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    const firstRow = (JSON.parse(ok.stdout) as CampaignStatus).rows[0]!;
    assert.equal(firstRow.phase, 'Succeeded');
    assert.equal(firstRow.uid, uid.east, "the row's verdict names the uid it was made against");
    assert.deepEqual(await versionsOf(eastPlane), { [`${crd.group}/v2`]: COUNT });
    await fw.stop(eastWorker.proc);

    // 2. east registered; the crossed worker again, before any campaign or `svm migrate --cluster east`.
    const crossed2 = await crossedWorker('crossed-2');
    assert.match(
      crossed2.line,
      new RegExp(
        `cluster "${east}" is pinned to kube-system uid ${uid.east}, but the API this worker reaches \\(kubeconfig ${kubeconfigOf(westPlane).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}, server https://[^)]+\\) answers ${uid.west}`,
      ),
    );
    assert.equal((await pinOf(eastPlane.temporal.client, east))?.uid, uid.east, "east's pin is not replaced by the report");
    await refusedEverywhere('2 (east registered)');
    assertUntouched(await revisions(westPlane), westBefore, 'west after 2');
    assert.deepEqual(await versionsOf(westPlane), { [`${crd.group}/v1`]: COUNT }, 'west: every object still at v1 (etcd)');
    assert.deepEqual(await storedVersionsOf(westPlane), ['v1', 'v2'], "west's storedVersions not pruned under east's name");

    // The operator's act, for east recreated. One uid is one cluster: west's may not be pinned to east while west holds it.
    const taken = await fw.svm(['fleet', 'pin', east, '--uid', uid.west]);
    assert.notEqual(taken.code, 0);
    assert.match(taken.stderr, new RegExp(`kube-system uid ${uid.west} is pinned to cluster "${west}".*svm fleet forget ${west}`));
    // west decommissioned (its name and uid let go), east pinned to the uid the crossed worker reaches; it prints what it replaces.
    await fw.stop(westWorker.proc);
    const forgot = await fw.svm(['fleet', 'forget', west]);
    assert.equal(forgot.code, 0, forgot.stderr);
    const repin = await fw.svm(['fleet', 'pin', east, '--uid', uid.west]);
    process.stdout.write(`# ${repin.stdout.trim().split('\n').join('\n# ')}\n`);
    assert.equal(repin.code, 0, repin.stderr);
    assert.match(repin.stdout, new RegExp(`cluster ${east}: pinned to kube-system uid ${uid.west}, replacing [0-9a-f-]{36}`));

    // east's verdicts made against its old uid count for nothing now.
    const status = await fw.svm(['fleet', 'status', first]);
    process.stdout.write(`# ${status.stdout.trim().split('\n').join('\n# ')}\n`);
    assert.equal(status.code, 1, 'svm fleet status refuses the row');
    assert.match(
      status.stdout,
      new RegExp(`NOT COUNTED: its verdict was made against kube-system uid ${uid.east}, but ${east} is pinned to ${uid.west}`),
    );
    // svm plan --drop: with east's old cluster's kubeconfig, nothing is judged; with the one east is pinned to, the
    // migration's record (a whole pass, made against the old uid) does not count.
    const old = await fw.svm(['plan', '--cluster', east, '--drop', `${crd.group}/v1`, '--kubeconfig', kubeconfigOf(eastPlane)]);
    process.stdout.write(`# svm plan --drop with the old cluster's kubeconfig exited ${old.code}: ${old.stderr.trim()}\n`);
    assert.equal(old.code, 2);
    assert.match(
      old.stderr,
      new RegExp(
        `the kubeconfig reaches kube-system uid ${uid.east} .* but cluster "${east}" is pinned to ${uid.west}: another cluster; nothing was judged`,
      ),
    );
    const plan = await fw.svm([
      'plan',
      '--cluster',
      east,
      '--drop',
      `${crd.group}/v1`,
      '--kubeconfig',
      kubeconfigOf(westPlane),
      '-o',
      'json',
    ]);
    const report = JSON.parse(plan.stdout) as {
      verdict: string;
      resources: Array<{ checks: Array<{ check: string; verdict: string; reason: string }> }>;
    };
    const migration = report.resources[0]!.checks.find((c) => c.check === 'migration')!;
    process.stdout.write(
      `# svm plan --drop (pinned cluster) exited ${plan.code}: ${report.verdict}; migration: ${migration.verdict}: ${migration.reason}\n`,
    );
    assert.equal(plan.code, 1, plan.stderr);
    // NotYet, not Ready: the record does not count, and west's storedVersions (a mirror) still names v1, believed.
    assert.equal(migration.verdict, 'NotYet');
    assert.match(
      migration.reason,
      new RegExp(
        `made against kube-system uid ${uid.east}, but the cluster is pinned to ${uid.west}: another cluster's verdict does not count`,
      ),
    );
    assertUntouched(await revisions(westPlane), westBefore, 'west after the pins');

    // The crossed worker is east's now: it takes the pin within seconds, and a migration under it rewrites every object.
    const migrated = await eventually(
      'east served under its new pin',
      async () => {
        const r = await fw.svm(['migrate', crd.name, '--cluster', east, '--wait', '--kubeconfig', kubeconfigOf(westPlane)]);
        return r.code === 0 ? r : undefined;
      },
      120_000,
    );
    process.stdout.write(`# ${migrated.stdout.trim().split('\n').slice(-2).join('\n# ')}\n`);
    assert.deepEqual(await versionsOf(westPlane), { [`${crd.group}/v2`]: COUNT }, 'every object at v2 under the new pin (etcd)');
    await eventually(
      'the crossed worker confirmed',
      async () => ((await conflictMetric(crossed2.metricsPort)) === '0' ? true : undefined),
      60_000,
    );
    // Confirmed, it joins its cluster's leader election (held back while in conflict), and leads: west's worker has gone.
    await eventually(
      'the worker, east now, leads',
      async () => (await metricOf(crossed2.metricsPort, 'svm_leader')) === '1' || undefined,
      60_000,
    );
    await fw.stop(crossed2.proc);
  },
);
