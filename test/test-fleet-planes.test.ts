/**
 * A fleet end to end (docs/fleet.md), the way a platform team runs one: three clusters on one Temporal server on
 * PostgreSQL (the suite's server plane), each a plane of its own:
 *   - north: the server plane's own API (Kubernetes 1.37, one API server);
 *   - east: the shared plane (1.37, two API servers behind one address);
 *   - south: a plane of this file at the release before (1.36), taken down at the end.
 * Their workers run as shipped: south's in-cluster style (`svm worker` with deploy/deployment.yaml's environment,
 * as the ServiceAccount of deploy/'s manifests, with `svm grant` of the CRD); north's and east's in one process,
 * a pool serving both by a kubeconfig each (SVM_KUBECONFIG_DIR) on its one task queue, as a management cluster
 * would host them. The pool starts with north alone: east's kubeconfig is added to its directory while it runs
 * (served within a minute: registered on the pool's queue, and migrated by the campaign), and north's is removed
 * at the end (let go).
 *
 * `svm fleet migrate` starts a campaign that moves a CRD's storage version in all three and checks drop readiness
 * of its old version; south's worker is stopped while the canary runs: the others finish, south is reported
 * unreachable and nothing of it is written, and it completes once its worker is back. Each plane's etcd is the judge.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { campaignWorkflowId, type CampaignStatus } from '../src/contract/fleet';
import { grantManifests } from '../src/client/grant';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { kubeVersions } from '../src/dev/tools';
import { CampaignHandle, type RegisteredCluster } from '../src/client/fleet';
import { campaignTable } from '../src/client/cli-fleet';
import { applyCrd, createObjects, deleteCrd, testCrd, type TestCrd } from './helpers/crd';
import { removePlanes, serverPlane, testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  readManifests,
  serverSideApply,
  serviceAccountToken,
  writeTokenKubeconfig,
  removeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { eventually, workflowResult } from './helpers/migrate';
import { fleetWorkers, type FleetWorkers } from './helpers/fleet-workers';
import { forgetNames, freeIdentity } from './helpers/identity';
import { clusterTaskQueue, poolTaskQueue } from '../src/api/cluster';
import { pinOf } from '../src/kube/cluster-identity';

const COUNT = 200;

interface Member {
  name: string;
  plane: TestPlane;
  crd: TestCrd;
  prefix: string;
}

const southDir = mkdtempSync(path.join(tmpdir(), 'svm-fleet-south-'));
const scratch = mkdtempSync(path.join(tmpdir(), 'svm-fleet-'));
const suffix = uniq('').slice(1);
/** One CRD, the same in every cluster (as a product's CRD is). */
const crd = testCrd(`${uniq('fp')}.svm.test`);
let temporal: TestPlane;
let members: Member[] = [];
let saKubeconfig: string | undefined;

before(async () => {
  temporal = await serverPlane();
  fw = fleetWorkers({ temporalAddress: temporal.temporal.address, taskQueue: base, scratch, deploymentName });
  const [east, south] = await Promise.all([
    testPlane(),
    testPlane({
      dir: southDir,
      up: { apiservers: 1, kubeVersion: kubeVersions().previous, storageVersionApi: false },
    }),
  ]);
  members = [
    { name: `north-${suffix}`, plane: temporal },
    { name: `east-${suffix}`, plane: east },
    { name: `south-${suffix}`, plane: south },
  ].map((m) => ({ ...m, crd, prefix: `/registry/${crd.group}/${crd.plural}/` }));
  // Each plane's uid free for this file's name (another file's name for the same plane is forgotten).
  for (const m of members) await freeIdentity(temporal.temporal.client, m.plane.kube, m.name);
  // Each cluster: COUNT objects written through v2 while v1 is the storage version (so they are stored at v1 and
  // their managedFields name v2), then the storage version switched to v2.
  await Promise.all(
    members.map(async (m) => {
      await installCrds(m.plane.kube);
      await applyCrd(m.plane.kube, m.crd, 'v1');
      await createObjects(m.plane.kube, m.crd, 'v2', COUNT, { namespace: uniq('ns') });
      await applyCrd(m.plane.kube, m.crd, 'v2');
    }),
  );
  // south runs as deploy/ ships it: its ServiceAccount, rights and fence, and the grant of the CRD.
  const s = members[2]!;
  await serverSideApply(s.plane.kube, [
    ...readManifests('namespace.yaml'),
    ...readManifests('rbac.yaml'),
    ...readManifests('worker-policy.yaml'),
    ...YAML.parseAllDocuments(grantManifests({ group: s.crd.group, resource: s.crd.plural, custom: true })).map(
      (d) => d.toJS() as Manifest,
    ),
  ]);
  saKubeconfig = writeTokenKubeconfig(
    s.plane.kube.server,
    await serviceAccountToken(s.plane.kube, 'svm-system', 'svm-migrator'),
    'svm-migrator',
    s.plane.dir,
  );
});

after(async () => {
  fw?.killAll();
  if (temporal)
    await forgetNames(
      temporal.temporal.client,
      members.map((m) => m.name),
    ).catch(() => undefined);
  removeTokenKubeconfig(saKubeconfig);
  for (const m of members.slice(0, 2)) await deleteCrd(m.plane.kube, m.crd).catch(() => undefined);
  for (const m of members) await m.plane.close();
  await temporal?.close();
  rmSync(scratch, { recursive: true, force: true });
  await removePlanes(southDir);
});

const base = uniq('tq-fleet');
const deploymentName = uniq('svm-worker');
let fw: FleetWorkers;

/** `svm fleet <args>`, which must succeed: its output. */
async function fleet(args: string[]): Promise<string> {
  const r = await fw.svm(['fleet', ...args]);
  assert.equal(r.code, 0, `svm fleet ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const versionsOf = async (m: Member) => (await storedVersions(m.plane.etcd, m.prefix)).byApiVersion;

void test('a campaign across three clusters on one temporal-server: a CRD moved in each (etcd), one worker stopped mid-campaign and back', async () => {
  const [north, east, south] = members as [Member, Member, Member];
  for (const m of members) assert.deepEqual(await versionsOf(m), { [`${m.crd.group}/v1`]: COUNT }, `${m.name} starts at v1`);

  // The pool (north, then east, by kubeconfig: an administrator's, which no fence matches) and south's worker.
  const kubeconfigs = path.join(scratch, 'clusters');
  mkdirSync(kubeconfigs);
  const kubeconfigOf = (m: Member) => path.join(kubeconfigs, `${m.name}.kubeconfig`);
  writeFileSync(kubeconfigOf(north), readFileSync(north.plane.env.KUBECONFIG!));
  const pool = await fw.start(
    'pool',
    fw.env({
      SVM_KUBECONFIG_DIR: kubeconfigs,
      SVM_POOL_NAME: 'mgmt',
      SVM_POOL_RESCAN_SECONDS: '5',
      SVM_REQUIRE_FENCE: 'false',
      SVM_REQUIRE_STATIC_FENCE: 'false',
      SVM_BRIDGE: 'false',
    }),
  );
  // east joins the running pool: its kubeconfig added to the directory.
  writeFileSync(kubeconfigOf(east), readFileSync(east.plane.env.KUBECONFIG!));
  const southEnv = fw.env({ KUBECONFIG: saKubeconfig!, SVM_CLUSTER: south.name, SVM_FLEET_WORKER: 'false' });
  let southWorker = await fw.start('south', southEnv);

  // Each cluster registered: kube-system's uid and each API server's Kubernetes version, as `svm fleet clusters` lists them.
  const registered = await eventually(
    'the three clusters registered',
    async () => {
      const list = JSON.parse(await fleet(['clusters', '-o', 'json'])) as RegisteredCluster[];
      const ours = list.filter((c) => c.name.endsWith(suffix));
      return ours.length === 3 && ours.every((c) => c.uid && c.kubeVersions.length > 0) ? ours : undefined;
    },
    60_000,
  );
  const byName = new Map(registered.map((c) => [c.name, c]));
  assert.deepEqual(byName.get(north.name)?.kubeVersions, [kubeVersions().current]);
  assert.deepEqual(byName.get(east.name)?.kubeVersions, [kubeVersions().current]);
  assert.equal(byName.get(east.name)?.servers.length, 2, "east's two API servers, each at its own address");
  assert.deepEqual(byName.get(south.name)?.kubeVersions, [kubeVersions().previous]);
  for (const m of members) {
    const uid = (await m.plane.kube.getJson<{ metadata: { uid: string } }>('/api/v1/namespaces/kube-system')).metadata.uid;
    assert.equal(byName.get(m.name)?.uid, uid, `${m.name}'s registration holds its kube-system uid`);
  }
  // Where each is served, as its registration says (and start paths place its workflows): the pool's one queue for
  // north and east, south's own.
  const client = temporal.temporal.client;
  assert.equal((await pinOf(client, north.name))?.queue, poolTaskQueue(base, 'mgmt'));
  assert.equal((await pinOf(client, east.name))?.queue, poolTaskQueue(base, 'mgmt'));
  assert.equal((await pinOf(client, south.name))?.queue, clusterTaskQueue(base, south.name));

  // The campaign, as an operator starts it: the CRD in every cluster, then whether its v1 may be dropped there.
  const name = uniq('crd-v2');
  const started = await fleet([
    'migrate',
    name,
    crd.name,
    '--drop',
    `${crd.group}/v1`,
    '--drop-window',
    '2',
    '--clusters',
    members.map((m) => m.name).join(','),
    '--canary',
    north.name,
    '--parallel',
    '2',
    '--unreachable-after',
    '5',
    '--deadline',
    '900',
  ]);
  assert.match(started, new RegExp(`campaign ${name} started`));
  const h = temporal.temporal.client.workflow.getHandle(campaignWorkflowId(name));
  // The campaign's status with its rows (each cluster's member's, paged from visibility), as `svm fleet status` reads it.
  const campaign = new CampaignHandle(name, h, temporal.temporal.client);
  const status = () => campaign.status();
  const row = (s: CampaignStatus, m: Member) => s.rows.find((r) => r.cluster === m.name)!;

  // While the canary runs, south's worker is stopped (as a Deployment scaled to zero: SIGTERM).
  await eventually('the canary runs', async () => ['Running', 'Succeeded'].includes(row(await status(), north).phase) || undefined, 60_000);
  await fw.stop(southWorker.proc);

  // The canary and east finish; south is reported unreachable, and nothing of it is written.
  const away = await eventually(
    'north and east done, south unreachable',
    async () => {
      const s = await status();
      return row(s, north).phase === 'Succeeded' && row(s, east).phase === 'Succeeded' && row(s, south).phase === 'Unreachable'
        ? s
        : undefined;
    },
    300_000,
  );
  process.stdout.write(`# while south's worker was away:\n# ${campaignTable(away).trimEnd().split('\n').join('\n# ')}\n`);
  assert.match(row(away, south).note ?? '', /no worker took a task in 5s/);
  assert.equal(away.phase, 'Running', 'the campaign waits for south until its deadline');
  // The campaign's own status names south in flight, away (its member probes it), and counts the others done.
  assert.deepEqual(
    away.inflight?.map((f) => [f.cluster, f.phase]),
    [[south.name, 'Unreachable']],
  );
  assert.equal(away.counts?.Succeeded, 2);
  assert.deepEqual(await versionsOf(south), { [`${south.crd.group}/v1`]: COUNT }, 'south: nothing written while its worker was away');
  for (const m of [north, east]) assert.deepEqual(await versionsOf(m), { [`${m.crd.group}/v2`]: COUNT }, `${m.name}: every object at v2`);

  // south's worker comes back: its cluster completes, and so does the campaign.
  southWorker = await fw.start('south', southEnv);
  const ended = (await workflowResult(h, 300_000)) as CampaignStatus;
  const table = await fleet(['status', name]);
  process.stdout.write(`# ${table.trimEnd().split('\n').join('\n# ')}\n`);
  assert.equal(ended.phase, 'Succeeded', table);
  assert.equal(ended.counts?.Succeeded, 3);
  const result: CampaignStatus = { ...ended, rows: await campaign.rows(ended) };
  const json = JSON.parse(await fleet(['status', name, '-o', 'json'])) as CampaignStatus;
  assert.deepEqual(json, result, "`svm fleet status -o json` is the workflow's result with its members' rows");
  for (const m of members) {
    const r = row(result, m);
    assert.equal(r.phase, 'Succeeded', `${m.name}: ${r.note}`);
    assert.equal(r.objects, COUNT, `${m.name}: objects`);
    assert.deepEqual(r.resources, { asked: 1, succeeded: 1 });
    assert.equal(r.drop?.verdict, 'Ready', `${m.name}: the drop check of ${crd.group}/v1`);
    assert.deepEqual(await versionsOf(m), { [`${m.crd.group}/v2`]: COUNT }, `${m.name}: every object at v2 in its etcd`);
  }
  assert.equal(row(result, north).wave, 0, 'north was the canary');

  // The pool's one /metrics: each of its clusters' series under its own label.
  const metrics = await (await fetch(`http://127.0.0.1:${pool.metricsPort}/metrics`)).text();
  for (const m of [north, east]) assert.match(metrics, new RegExp(`^svm_objects_total\\{[^}]*cluster="${m.name}"[^}]*\\} ${COUNT}$`, 'm'));

  // north's kubeconfig removed: the pool lets it go (its series leave /metrics, its leases are given back, it says
  // so), and serves east still.
  rmSync(kubeconfigOf(north));
  const letGo = new RegExp(`"cluster":"${north.name}".*cluster let go by the pool: its kubeconfig is gone`);
  await eventually(
    'north let go by the pool',
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${pool.metricsPort}/metrics`)).text();
      const gone = !text.includes(`cluster="${north.name}"`) && text.includes(`svm_worker_up{cluster="${east.name}"} 1`);
      return gone && letGo.test(readFileSync(pool.log, 'utf8')) ? true : undefined;
    },
    60_000,
  );
  await fw.stop(southWorker.proc);
  await fw.stop(pool.proc);
});
