/**
 * Proves each real piece of the local control plane: a CRD and objects through
 * @kubernetes/client-node, their stored version read from etcd, one
 * StorageVersion object per built-in resource with an entry from each API
 * server, and a workflow run on the Temporal dev server by a worker.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { NativeConnection, Worker } from '@temporalio/worker';
import { storedVersions } from '../src/dev/etcd-truth';
import { applyCrd, testCrd } from './helpers/crd';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

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
  for (let i = 0; i < 3; i++) await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: `cm-${i}` }, data: { i: String(i) } } });

  const crd = testCrd(`${uniq('smoke')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  for (let i = 0; i < 4; i++) {
    await custom.createNamespacedCustomObject({ group: crd.group, version: 'v1', namespace: ns, plural: crd.plural, body: { apiVersion: `${crd.group}/v1`, kind: crd.kind, metadata: { name: `w-${i}` }, spec: { i } } });
  }
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, { [`${crd.group}/v1`]: 4 });
  const cms = await storedVersions(plane.etcd, `/registry/configmaps/${ns}/`);
  assert.deepEqual(cms.byApiVersion, { v1: 3 });
});

void test('every built-in resource has one StorageVersion object with an entry from each API server', async () => {
  const expected = plane.state.apiservers.length;
  // Identity leases: one per API server, distinct because each runs under its own host name.
  const leases = await plane.kube.getJson<{ items: Array<{ metadata: { name: string } }> }>('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases', {
    labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver',
  });
  const ids = new Set(leases.items.map((l) => l.metadata.name));
  assert.equal(ids.size, expected, `expected ${expected} API server identities, got ${[...ids].join(', ')}`);

  const svs = await plane.kube.getJson<{ items: Array<{ metadata: { name: string }; status: { storageVersions?: Array<{ apiServerID: string; encodingVersion: string }>; commonEncodingVersion?: string } }> }>(
    '/apis/internal.apiserver.k8s.io/v1alpha1/storageversions',
  );
  const names = svs.items.map((s) => s.metadata.name);
  assert.equal(new Set(names).size, names.length, 'one object per resource');
  for (const n of ['core.configmaps', 'core.secrets', 'apps.deployments', 'rbac.authorization.k8s.io.roles']) assert.ok(names.includes(n), `missing StorageVersion ${n}`);
  for (const sv of svs.items) {
    const reporters = new Set((sv.status.storageVersions ?? []).map((e) => e.apiServerID));
    assert.deepEqual([...reporters].sort(), [...ids].sort(), `${sv.metadata.name} has entries from ${[...reporters].join(', ')}`);
  }
  const cm = svs.items.find((s) => s.metadata.name === 'core.configmaps')!;
  assert.equal(cm.status.commonEncodingVersion, 'v1');
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
    const out = await worker.runUntil(plane.temporal.client.workflow.execute('smoke', { taskQueue, workflowId: uniq('smoke'), args: ['plane'] }));
    assert.equal(out, 'hello plane');
  } finally {
    await connection.close();
  }
});
