/**
 * Proves each real piece of the local control plane: a CRD and objects through
 * @kubernetes/client-node, their stored version read from etcd, the plane's
 * production shape (one API address, every server in the kubernetes
 * EndpointSlice, the StorageVersion API off), and a workflow run on the
 * Temporal dev server by a worker.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { NativeConnection, Worker } from '@temporalio/worker';
import { storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, testCrd } from './helpers/crd';
import { testPlane, uniq, up, type TestPlane } from './helpers/plane';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
});
after(async () => plane?.close());

void test('objects created through @kubernetes/client-node are read back from etcd at their stored version', async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(plane.env.KUBECONFIG!);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ns = uniq('smoke');
  await core.createNamespace({ body: { metadata: { name: ns } } });
  for (let i = 0; i < 3; i++)
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: `cm-${i}` }, data: { i: String(i) } } });

  const crd = testCrd(`${uniq('smoke')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  for (let i = 0; i < 4; i++) {
    await custom.createNamespacedCustomObject({
      group: crd.group,
      version: 'v1',
      namespace: ns,
      plural: crd.plural,
      body: { apiVersion: `${crd.group}/v1`, kind: crd.kind, metadata: { name: `w-${i}` }, spec: { i } },
    });
  }
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v1`]: 4,
  });
  const cms = await storedVersions(plane.etcd, `/registry/configmaps/${ns}/`);
  assert.deepEqual(cms.byApiVersion, { v1: 3 });
});

void test("the plane looks like a cluster from the worker's side: one API address, every server in the kubernetes EndpointSlice, identity leases, the StorageVersion API off", async () => {
  const expected = plane.state.apiservers.length;
  // Identity leases: one per API server, distinct because each runs under its own host name.
  const leases = await plane.kube.getJson<{ items: Array<{ metadata: { name: string } }> }>(
    '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases',
    {
      labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver',
    },
  );
  const ids = new Set(leases.items.map((l) => l.metadata.name));
  assert.equal(ids.size, expected, `expected ${expected} API server identities, got ${[...ids].join(', ')}`);
  // `svm dev up --apiservers N` with fewer than the running plane has is refused, not silently ignored.
  if (expected > 1) {
    await assert.rejects(up({ dir: plane.dir, apiservers: expected - 1, log: () => undefined }), {
      message: `the plane in ${plane.dir} runs ${expected} kube-apiservers, not ${expected - 1}; 'svm dev down --dir ${plane.dir}' first`,
    });
    assert.equal(plane.state.apiservers.length, expected, 'the plane is as it was');
  }

  // The alpha StorageVersion API is off, as in real clusters (the HA tests switch it on for their second mode).
  assert.equal(plane.storageVersionApi, false);
  const sv = await plane.kube.raw('GET', '/apis/internal.apiserver.k8s.io/v1alpha1/storageversions');
  assert.equal(sv.status, 404, 'the StorageVersion API is not served');

  if (process.getuid?.() !== 0) return; // without root the plane falls back to loopback and says so
  assert.equal(plane.shape, 'cluster');
  // The worker's one address is the load balancer, not a server.
  assert.ok(!plane.apiserverUrls.includes(plane.kube.server), `KUBECONFIG points at ${plane.kube.server}, a server of its own`);
  const slices = await plane.kube.getJson<{
    items: Array<{
      endpoints: Array<{ addresses: string[]; conditions?: { ready?: boolean } }>;
      ports: Array<{ name?: string; port: number }>;
    }>;
  }>('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', { labelSelector: 'kubernetes.io/service-name=kubernetes' });
  const addresses = slices.items.flatMap((s) => s.endpoints.flatMap((e) => e.addresses)).sort();
  assert.deepEqual(addresses, [...plane.apiserverAddresses].sort(), 'every API server, by its own address');
  assert.ok(
    addresses.every((a) => !a.startsWith('127.')),
    'no loopback address in the endpoints',
  );
  assert.deepEqual(
    slices.items.flatMap((s) => s.ports.map((p) => p.port)),
    [6443],
  );
});

void test('a workflow runs on the Temporal dev server with a worker', async () => {
  const taskQueue = uniq('smoke');
  const connection = await NativeConnection.connect({ address: plane.temporal.address });
  try {
    const worker = await Worker.create({
      connection,
      taskQueue,
      workflowsPath: require.resolve('./helpers/smoke-workflow'),
      activities: { greet: async (name: string) => `hello ${name}` },
    });
    const out = await worker.runUntil(
      plane.temporal.client.workflow.execute('smoke', { taskQueue, workflowId: uniq('smoke'), args: ['plane'] }),
    );
    assert.equal(out, 'hello plane');
  } finally {
    await connection.close();
  }
});
