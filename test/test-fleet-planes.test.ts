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
 * The clusters are in two trust domains (docs/fleet.md "Trust domains"), each a Temporal namespace of its own on
 * that server: `mgmt` (the pool's: north and east) and `south` (south's worker); the campaigns run in a third, the
 * fleet's, served by a fleet-only worker (`svm worker --fleet-only`) holding a client per domain from the domains
 * file (SVM_FLEET_DOMAINS). The operator's `svm fleet` reads the same file: `svm fleet clusters` lists each domain's
 * clusters (read in its namespace) with its DOMAIN, and `svm fleet migrate --where` selects over every domain's
 * registrations.
 *
 * `svm fleet migrate` starts a campaign that moves a CRD's storage version in all three and checks drop readiness
 * of its old version; south's worker is stopped while the canary runs: the others finish, south is reported
 * unreachable and nothing of it is written, and it completes once its worker is back. Meanwhile a second campaign
 * over south (another CRD) is aborted with `svm fleet abort` while its step waits in south's domain: once south's
 * worker is back the step there ends CANCELLED and that CRD's objects are all still at v1. Each plane's etcd is
 * the judge.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { campaignWorkflowId, type CampaignStatus } from '../src/contract/fleet';
import { Placement } from '../src/contract/placement';
import { registerSearchAttributes } from '../src/client/setup';
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
import { bounded } from './helpers/waits';
import { fleetWorkers, SVM, type FleetWorkers } from './helpers/fleet-workers';
import { forgetNames } from './helpers/identity';
import { clusterTaskQueue, poolTaskQueue } from '../src/api/cluster';
import { pinOf } from '../src/kube/cluster-identity';

const COUNT = 200;
/** The objects of the CRD the aborted campaign names (south only). */
const ABORT_COUNT = 20;

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
/** The CRD of the campaign aborted: south's only. */
const abortCrd = testCrd(`${uniq('fpab')}.svm.test`);
let temporal: TestPlane;
let members: Member[] = [];
let saKubeconfig: string | undefined;
/** The two domains' namespaces on the server; the fleet's is the plane's own. */
const nsMgmt = uniq('dom-mgmt');
const nsSouth = uniq('dom-south');
const domainsFile = path.join(scratch, 'domains.json');
let fleetNamespace = '';
/** The fleet-only worker (`svm worker --fleet-only`), started by the test. */
let fleetOnly: ChildProcess | undefined;
const inNamespace = (namespace: string) => new Client({ connection: temporal.temporal.connection, namespace });

before(async () => {
  temporal = await serverPlane();
  fleetNamespace = temporal.temporal.client.options.namespace;
  fw = fleetWorkers({ temporalAddress: temporal.temporal.address, taskQueue: base, scratch, deploymentName });
  // The two domains: a namespace each, with svm's search attributes (the frontend learns of a new namespace within
  // seconds: NOT_FOUND until then).
  const admin = temporal.temporal.connection;
  await Promise.all(
    [nsMgmt, nsSouth].map(async (namespace) => {
      await admin.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
      await eventually(`svm's search attributes on ${namespace}`, () => registerSearchAttributes(admin, namespace), 60_000);
    }),
  );
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
  // The domains file, as the fleet's worker and the operator's `svm fleet` read it.
  writeFileSync(
    domainsFile,
    JSON.stringify({
      domains: [
        { name: 'mgmt', namespace: nsMgmt, clusters: [members[0]!.name, members[1]!.name] },
        { name: 'south', namespace: nsSouth, clusters: [members[2]!.name] },
      ],
    }),
  );
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
  // south runs as deploy/ ships it: its ServiceAccount, rights and fence, and the grant of the CRDs.
  const s = members[2]!;
  await applyCrd(s.plane.kube, abortCrd, 'v1');
  await createObjects(s.plane.kube, abortCrd, 'v2', ABORT_COUNT, { namespace: uniq('ns') });
  await applyCrd(s.plane.kube, abortCrd, 'v2');
  await serverSideApply(s.plane.kube, [
    ...readManifests('namespace.yaml'),
    ...readManifests('rbac.yaml'),
    ...readManifests('worker-policy.yaml'),
    ...[s.crd, abortCrd].flatMap((c) =>
      YAML.parseAllDocuments(grantManifests({ group: c.group, resource: c.plural, custom: true })).map((d) => d.toJS() as Manifest),
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
  fleetOnly?.kill('SIGKILL');
  if (temporal) {
    // Each registration ended in its domain, then the domains' namespaces deleted.
    await forgetNames(inNamespace(nsMgmt), [members[0]!.name, members[1]!.name]).catch(() => undefined);
    await forgetNames(inNamespace(nsSouth), [members[2]!.name]).catch(() => undefined);
    for (const namespace of [nsMgmt, nsSouth])
      await temporal.temporal.connection.operatorService.deleteNamespace({ namespace }).catch(() => undefined);
  }
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

/** `svm fleet <args>` as the operator runs it, in the fleet's namespace with the domains file: its output (it must succeed). */
async function fleet(args: string[]): Promise<string> {
  const r = await fw.svm(['fleet', ...args], { TEMPORAL_NAMESPACE: fleetNamespace, SVM_FLEET_DOMAINS: domainsFile });
  assert.equal(r.code, 0, `svm fleet ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** `svm worker --fleet-only` in the fleet's namespace with the domains file; resolves once it serves (its log line). */
async function startFleetOnly(): Promise<{ proc: ChildProcess; log: string }> {
  const log = path.join(scratch, `fleet-only-${Date.now()}.log`);
  const out = createWriteStream(log);
  const proc = spawn(process.execPath, [SVM, 'worker', '--fleet-only'], {
    env: fw.env({ TEMPORAL_NAMESPACE: fleetNamespace, SVM_FLEET_DOMAINS: domainsFile }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.pipe(out);
  proc.stderr!.pipe(out);
  const exited = new Promise<never>((_, reject) =>
    proc.once('exit', (code) => reject(new Error(`the fleet-only worker exited (${code}): ${readFileSync(log, 'utf8').slice(-2000)}`))),
  );
  exited.catch(() => undefined);
  await Promise.race([
    eventually(
      'the fleet-only worker serves',
      async () => readFileSync(log, 'utf8').includes('fleet-only worker: serving') || undefined,
      60_000,
    ),
    exited,
  ]);
  return { proc, log };
}

const versionsOf = async (m: Member) => (await storedVersions(m.plane.etcd, m.prefix)).byApiVersion;

void test('a campaign across three clusters on one temporal-server: a CRD moved in each (etcd), one worker stopped mid-campaign and back', async () => {
  const [north, east, south] = members as [Member, Member, Member];
  // Where the file's time goes: each phase's end, in seconds from the test's start (printed, not asserted).
  const t0 = Date.now();
  const mark = (what: string) => process.stdout.write(`# ${((Date.now() - t0) / 1000).toFixed(1)} s: ${what}\n`);
  for (const m of members) assert.deepEqual(await versionsOf(m), { [`${m.crd.group}/v1`]: COUNT }, `${m.name} starts at v1`);

  // The pool (north, then east, by kubeconfig: an administrator's, which no fence matches) and south's worker.
  const kubeconfigs = path.join(scratch, 'clusters');
  mkdirSync(kubeconfigs);
  const kubeconfigOf = (m: Member) => path.join(kubeconfigs, `${m.name}.kubeconfig`);
  writeFileSync(kubeconfigOf(north), readFileSync(north.plane.env.KUBECONFIG!));
  // south's domain: its own namespace, with its registration served by the fleet worker beside it there.
  const southEnv = fw.env({ KUBECONFIG: saKubeconfig!, SVM_CLUSTER: south.name, TEMPORAL_NAMESPACE: nsSouth });
  // The three start at once: the pool, south's worker, and the fleet's namespace's worker (its fleet task queue
  // only, holding a client per domain).
  const [pool, southFirst] = await Promise.all([
    fw.start(
      'pool',
      fw.env({
        SVM_KUBECONFIG_DIR: kubeconfigs,
        SVM_POOL_NAME: 'mgmt',
        SVM_POOL_RESCAN_SECONDS: '5',
        SVM_REQUIRE_FENCE: 'false',
        SVM_REQUIRE_STATIC_FENCE: 'false',
        SVM_BRIDGE: 'false',
        // The pool's domain: its clusters' workflows, registrations (its fleet worker beside it) and steps run there.
        TEMPORAL_NAMESPACE: nsMgmt,
      }),
    ),
    fw.start('south', southEnv),
    startFleetOnly().then((f) => (fleetOnly = f.proc)),
  ]);
  let southWorker = southFirst;
  // east joins the running pool: its kubeconfig added to the directory.
  writeFileSync(kubeconfigOf(east), readFileSync(east.plane.env.KUBECONFIG!));
  mark('the pool, south and the fleet-only worker started');

  // Each cluster registered in its domain: kube-system's uid and each API server's Kubernetes version, as
  // `svm fleet clusters` lists them (each domain's registrations, read in its namespace).
  const registered = await eventually(
    'the three clusters registered',
    async () => {
      const list = JSON.parse(await fleet(['clusters', '-o', 'json'])) as RegisteredCluster[];
      return list.length === 3 && list.every((c) => c.uid && c.kubeVersions.length > 0) ? list : undefined;
    },
    60_000,
  );
  const byName = new Map(registered.map((c) => [c.name, c]));
  assert.deepEqual(
    registered.map((c) => [c.name, c.domain]),
    [
      [east.name, 'mgmt'],
      [north.name, 'mgmt'],
      [south.name, 'south'],
    ],
    'each cluster listed with its domain',
  );
  mark('the three registered in their domains');
  const previous = `MigrationKubeVersions = '${kubeVersions().previous}'`;
  // `--where` selects over every domain's registrations: the release before is south's alone (a dry run starts nothing).
  const [text, dryRun] = await Promise.all([
    fleet(['clusters', '--domains', domainsFile]),
    fleet(['migrate', uniq('dry'), crd.name, '--where', previous, '--dry-run', '-o', 'json']),
  ]);
  process.stdout.write(`# svm fleet clusters --domains:\n# ${text.trimEnd().split('\n').join('\n# ')}\n`);
  assert.match(text, /^CLUSTER +DOMAIN +UID /);
  assert.match(text, new RegExp(`^${south.name} +south +${byName.get(south.name)!.uid} +pinned `, 'm'));
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
  const [mgmtClient, southClient] = [inNamespace(nsMgmt), inNamespace(nsSouth)];
  assert.equal((await pinOf(mgmtClient, north.name))?.queue, poolTaskQueue(base, 'mgmt'));
  assert.equal((await pinOf(mgmtClient, east.name))?.queue, poolTaskQueue(base, 'mgmt'));
  assert.equal((await pinOf(southClient, south.name))?.queue, clusterTaskQueue(base, south.name));
  assert.equal(await pinOf(temporal.temporal.client, south.name), undefined, "nothing registers in the fleet's namespace");
  const dry = JSON.parse(dryRun) as {
    clusters: Array<{ name: string; registration?: RegisteredCluster }>;
  };
  assert.deepEqual(
    dry.clusters.map((c) => [c.name, c.registration?.domain]),
    [[south.name, 'south']],
  );

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
    // Both releases, across both domains: the three clusters.
    '--where',
    `${previous} OR MigrationKubeVersions = '${kubeVersions().current}'`,
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
  mark("the canary runs; south's worker stopped");

  // Meanwhile, a campaign over south of another CRD: its step is started in south's domain, where no worker takes it.
  const aborted = uniq('abort');
  await fleet(['migrate', aborted, abortCrd.name, '--clusters', south.name, '--unreachable-after', '5', '--deadline', '900']);

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

  mark('north and east done, south away');

  // The second campaign's step waits in south's domain, and the operator aborts the campaign: the fleet cancels the
  // step through its client of the domain.
  const abortedCampaign = new CampaignHandle(
    aborted,
    temporal.temporal.client.workflow.getHandle(campaignWorkflowId(aborted)),
    temporal.temporal.client,
  );
  await eventually(
    "the second campaign's step waits in south's domain",
    async () => (await abortedCampaign.status()).rows.find((r) => r.cluster === south.name)?.phase === 'Unreachable' || undefined,
    60_000,
  );
  const stepId = Placement.of(base, south.name).id(`svm-campaign/${aborted}`);
  assert.equal((await southClient.workflow.getHandle(stepId).describe()).status.name, 'RUNNING', "the step is in south's domain");
  assert.match(await fleet(['abort', aborted, '--reason', 'the test aborts it']), new RegExp(`campaign ${aborted}: abort sent`));
  const abortedEnd = (await workflowResult(abortedCampaign.workflow, 120_000)) as CampaignStatus;
  assert.equal(abortedEnd.phase, 'Aborted');
  mark('the second campaign aborted');

  // south's worker comes back: its cluster completes, and so does the campaign.
  southWorker = await fw.start('south', southEnv);
  const ended = (await workflowResult(h, 300_000)) as CampaignStatus;
  mark("south's worker back: the campaign ended");
  // The aborted campaign's step, taken by south's worker now, ends cancelled in south's domain, and wrote nothing.
  const stepEnd = await eventually(
    "the aborted campaign's step ended in south's domain",
    async () => {
      const st = (await southClient.workflow.getHandle(stepId).describe()).status.name;
      return st === 'RUNNING' ? undefined : st;
    },
    60_000,
  );
  process.stdout.write(`# the aborted campaign's step ${stepId} in namespace ${nsSouth}: ${stepEnd}\n`);
  assert.ok(['CANCELLED', 'TERMINATED'].includes(stepEnd), `the step ended ${stepEnd}`);
  assert.deepEqual(
    (await storedVersions(south.plane.etcd, `/registry/${abortCrd.group}/${abortCrd.plural}/`)).byApiVersion,
    { [`${abortCrd.group}/v1`]: ABORT_COUNT },
    "south: nothing of the aborted campaign's CRD written, its worker back",
  );
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
  mark('north let go by the pool');
  // The three stopped at once (SIGTERM); the fleet-only worker ends as a Deployment's pod does: exit code 0.
  const fleetExit = new Promise<number | null>((r) => fleetOnly!.once('exit', (code) => r(code)));
  fleetOnly!.kill('SIGTERM');
  const stopped = (what: string, p: Promise<unknown>) => p.then(() => mark(`${what} stopped`));
  const [fleetCode] = await Promise.all([
    bounded('the fleet-only worker exits', fleetExit, 30_000, () => 'still running').finally(() => mark('the fleet-only worker stopped')),
    stopped("south's worker", fw.stop(southWorker.proc)),
    stopped('the pool', fw.stop(pool.proc)),
  ]);
  assert.equal(fleetCode, 0, 'the fleet-only worker exits 0 on SIGTERM');
});
