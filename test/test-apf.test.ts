/**
 * API Priority and Fairness, the API server's own protection (DESIGN rule 7's
 * second line): deploy/flowcontrol.yaml applied as it ships, the worker run
 * as the svm-migrator ServiceAccount (system:masters, the plane's admin, is
 * exempt from APF, so only a ServiceAccount shows what a cluster would do).
 *
 * 1. The API servers classify the migrator's requests by the shipped
 *    FlowSchemas: everything into the svm-migrator priority level (winning
 *    over the default `service-accounts`), its own Leases into workload-low.
 *    Read from the servers' answers (X-Kubernetes-PF-* headers), not from the
 *    manifest.
 * 2. With the level made deliberately tiny (1 share, nothing borrowed or
 *    lent, Reject: a few seats per server, the rest refused at once), a
 *    migration of a few hundred objects meets 429s (counted by the API
 *    servers themselves), slows down, never fails for them, and ends
 *    Succeeded with etcd holding every object at the new version.
 *
 * Every object this file creates in flowcontrol is removed at the end (the
 * other tests run the worker as svm-migrator too, at full speed).
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { etcdPrefix, readStoredObjects } from '../src/dev/etcd-truth';
import { KubeClient } from '../src/kube/client';
import { apiserverSamples, apiserverSum } from './helpers/apiserver-metrics';
import YAML from 'yaml';
import { grantManifests } from '../src/client/grant';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  whoAmI,
  withWorkerAs,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { migrationResult } from './helpers/waits';

const FLOWCONTROL = '/apis/flowcontrol.apiserver.k8s.io/v1';
const LEVEL = 'svm-migrator';
// One chunk of 100 with 16 updates in flight against 3 seats per server: refusals from the first updates on (the
// 200 objects of two chunks before drew 168 429s and took 89 s; the claim needs some, and a whole pass through them).
const OBJECTS = 100;

let plane: TestPlane;
let sa: KubeClient;
let token: string;
let kubeconfig: string;
const perServer: string[] = []; // kubeconfigs of the ServiceAccount for one API server each
const shipped = readManifests('flowcontrol.yaml');

before(async () => {
  plane = await testPlane();
  await serverSideApply(plane.kube, [...readManifests('namespace.yaml'), ...readManifests('rbac.yaml'), ...shipped]);
  await installCrds(plane.kube);
  token = await serviceAccountToken(plane.kube, 'svm-system', 'svm-migrator');
  kubeconfig = writeTokenKubeconfig(plane.kube.server, token, 'svm-migrator');
  sa = KubeClient.fromKubeconfig(kubeconfig);
});
after(async () => {
  sa?.close();
  removeTokenKubeconfig(kubeconfig);
  for (const f of perServer) removeTokenKubeconfig(f);
  if (plane) {
    for (const o of shipped) {
      const kind = o.kind === 'FlowSchema' ? 'flowschemas' : 'prioritylevelconfigurations';
      await plane.kube.raw('DELETE', `${FLOWCONTROL}/${kind}/${o.metadata.name}`);
    }
    await plane.close();
  }
});

const uidOf = async (kind: string, name: string) =>
  (await plane.kube.getJson<{ metadata: { uid: string } }>(`${FLOWCONTROL}/${kind}/${name}`)).metadata.uid;

/** The FlowSchema and priority level an API server put a request of the ServiceAccount in, by their uids. */
async function classified(path: string): Promise<{ flowSchema?: string; priorityLevel?: string }> {
  const res = await sa.request('GET', path, { query: { limit: 1 } });
  return {
    flowSchema: res.headers['x-kubernetes-pf-flowschema-uid'] as string | undefined,
    priorityLevel: res.headers['x-kubernetes-pf-prioritylevel-uid'] as string | undefined,
  };
}

void test('deploy/flowcontrol.yaml: the API servers put the migrator in its own priority level, ahead of the default service-accounts FlowSchema; its Leases stay in workload-low', async () => {
  assert.deepEqual(
    shipped.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`),
    [
      `flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration/${LEVEL}`,
      'flowcontrol.apiserver.k8s.io/v1 FlowSchema/svm-migrator',
      'flowcontrol.apiserver.k8s.io/v1 FlowSchema/svm-migrator-leases',
    ],
  );
  // Fewer shares than the level it would otherwise share (workload-low), and
  // it lends most of them: under contention it yields.
  const level = (shipped[0] as Manifest & { spec: { limited: Record<string, number> } }).spec.limited;
  const workloadLow = await plane.kube.getJson<{ spec: { limited: Record<string, number> } }>(
    `${FLOWCONTROL}/prioritylevelconfigurations/workload-low`,
  );
  assert.ok(level.nominalConcurrencyShares! < workloadLow.spec.limited.nominalConcurrencyShares!);
  assert.ok(level.lendablePercent! >= workloadLow.spec.limited.lendablePercent!);

  assert.equal((await whoAmI(sa)).username, 'system:serviceaccount:svm-system:svm-migrator');
  const ours = { flowSchema: await uidOf('flowschemas', 'svm-migrator'), priorityLevel: await uidOf('prioritylevelconfigurations', LEVEL) };
  const leases = {
    flowSchema: await uidOf('flowschemas', 'svm-migrator-leases'),
    priorityLevel: await uidOf('prioritylevelconfigurations', 'workload-low'),
  };
  // Each API server classifies by the new FlowSchemas once its APF controller has read them.
  for (const [i, url] of plane.apiserverUrls.entries()) {
    perServer.push(writeTokenKubeconfig(url, token, 'svm-migrator'));
    const c = KubeClient.fromKubeconfig(perServer.at(-1));
    try {
      await eventually(`API server ${i} to classify by deploy/flowcontrol.yaml`, async () => {
        const res = await c.request('GET', '/api/v1/namespaces/default/configmaps', { query: { limit: 1 } });
        return res.headers['x-kubernetes-pf-flowschema-uid'] === ours.flowSchema;
      });
    } finally {
      c.close();
    }
  }
  // Resource requests of every kind, cluster-wide and namespaced, and discovery.
  for (const path of ['/api/v1/secrets', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', '/api', '/apis/apps/v1']) {
    assert.deepEqual(await classified(path), ours, path);
  }
  // Identity leases in kube-system are read for agreement: those yield too.
  assert.deepEqual(await classified('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases'), ours);
  assert.deepEqual(await classified('/apis/coordination.k8s.io/v1/namespaces/svm-system/leases'), leases);
});

void test('a deliberately tiny priority level: 429s arrive, the migration slows, never fails for them, and ends Succeeded with etcd at v2', async () => {
  // A few seats per server (1 share of the server's concurrency), nothing borrowed, no queue: the rest is refused.
  const tiny = {
    ...shipped[0]!,
    spec: {
      type: 'Limited',
      limited: { nominalConcurrencyShares: 1, lendablePercent: 0, borrowingLimitPercent: 0, limitResponse: { type: 'Reject' } },
    },
  } as Manifest;
  await serverSideApply(plane.kube, [tiny]);
  const seats = await eventually('the tiny level on every API server', async () => {
    const per = (await apiserverSamples(plane, 'apiserver_flowcontrol_nominal_limit_seats', { priority_level: LEVEL })).map(
      (s) => s[0]?.value ?? Infinity,
    );
    return per.every((n) => n <= 5) && per;
  });

  const crd = testCrd(`${uniq('apf')}.svm.test`);
  const ns = uniq('apf');
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', OBJECTS, { namespace: ns });
  await applyCrd(plane.kube, crd, 'v2');
  // A custom resource: the worker migrates it with the narrow grant `svm grant` prints.
  await serverSideApply(
    plane.kube,
    YAML.parseAllDocuments(grantManifests({ group: crd.group, resource: crd.plural, custom: true })).map((d) => d.toJS() as Manifest),
  );
  const prefix = etcdPrefix({ group: crd.group, resource: crd.plural, custom: true });
  const stored = await readStoredObjects(plane.etcd, prefix);
  assert.equal(stored.length, OBJECTS);
  const revision = Math.max(...stored.map((o) => o.modRevision));

  const rejected = () => apiserverSum(plane, 'apiserver_flowcontrol_rejected_requests_total', { priority_level: LEVEL });
  const dispatched = () => apiserverSum(plane, 'apiserver_flowcontrol_dispatched_requests_total', { priority_level: LEVEL });
  const rejected0 = await rejected();
  const dispatched0 = await dispatched();
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const t0 = Date.now();
  const result = await withWorkerAs(
    plane,
    kubeconfig,
    async (m) => migrationResult(await m.start(`${crd.plural}.${crd.group}`, { chunkSize: 100, concurrency: 16 })),
    // Unlimited by svm's own budget, and 16 updates in flight from the start: only the API server holds it back.
    // (Adaptive concurrency starts at one in flight and grows while answers stay fast: the suite once migrated all
    // 200 objects within 3 seats per server, and nothing was refused.)
    { settings: { qps: 0, adaptiveConcurrency: false }, logTo: sink },
  );
  const seconds = (Date.now() - t0) / 1000;
  const refused = (await rejected()) - rejected0;
  const served = (await dispatched()) - dispatched0;
  console.log(
    `APF: ${seats.join('+')} seats; ${refused} requests refused with 429, ${served} served; ` +
      `counters ${JSON.stringify(result.counters)}; ${seconds.toFixed(1)}s`,
  );

  assert.ok(refused > 0, 'the API servers refused none of the migrator’s requests: the level was not tiny enough');
  assert.equal(result.phase, 'Succeeded', `${result.message}\n${logs.filter((l) => /"level":"(warn|error)"/.test(l)).join('')}`);
  const c = result.counters;
  assert.equal(c.failed, 0, JSON.stringify(result.failures));
  assert.equal(c.migrated, OBJECTS, JSON.stringify(c));
  assert.equal(c.rewritten, OBJECTS, JSON.stringify(c));
  assert.equal(c.conflicts + c.notFound, 0, JSON.stringify(c));
  const now = await readStoredObjects(plane.etcd, prefix);
  assert.equal(now.length, OBJECTS);
  for (const o of now) {
    assert.equal(o.object.apiVersion, `${crd.group}/v2`, o.key);
    assert.ok(o.modRevision > revision, `${o.key} was not rewritten`);
  }

  // The shipped level again (the after hook removes it all).
  await serverSideApply(plane.kube, [shipped[0]!]);
});
