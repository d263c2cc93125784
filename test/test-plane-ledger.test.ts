/**
 * The suite's hygiene (issue 48): a file leaves the shared plane as it found it (test/helpers/plane-ledger.ts). Here a
 * file's usual mess is made after a mark — a CRD with objects, a namespace of its own with objects in it, a
 * cluster-scoped object, a lease in a namespace that was there before, an object held by a finalizer, one API server
 * restarted with other flags, a workflow left running — and put back; etcd is the judge that the objects are gone.
 * And a CRD whose deletion cannot end (a finalizer no one removes) fails the clean-up at its bound, naming what
 * holds it, instead of a silent wait.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { msToTs } from '@temporalio/common/lib/time';
import { countKeys } from '../src/dev/etcd-truth';
import { readState, restartApiserver } from '../src/dev/plane';
import { applyCrd, createObjects, ensureNamespace, testCrd } from './helpers/crd';
import { OLD_ENCODING_FLAGS } from './helpers/old-encoding';
import { eventually } from './helpers/waits';
import { leavePlaneAsFound, markPlane } from './helpers/plane-ledger';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
});
after(async () => plane?.close());

const post = (path: string, body: unknown) => plane.kube.request('POST', path, { body: JSON.stringify(body) });

void test('what a file made after the mark is gone when it closes, and its servers have their flags back; etcd judges', async () => {
  const mark = await markPlane(plane.dir, plane.kube, plane.temporal.client);
  const crd = testCrd(`${uniq('ledger')}.svm.test`);
  const ns = uniq('ledger');
  const role = uniq('ledger');
  const lease = uniq('ledger');
  const held = uniq('held');
  const flagsBefore = readState(plane.dir)!.apiservers.map((a) => a.extraArgs);

  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 30, { namespace: ns });
  await ensureNamespace(plane.kube, ns);
  for (let i = 0; i < 5; i++) await post(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `cm-${i}` }, data: { i: String(i) } });
  await post(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name: 's' }, stringData: { k: 'v' } });
  await post(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: held, finalizers: ['svm.test/held'] } });
  await post('/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name: role }, rules: [] });
  await post('/apis/coordination.k8s.io/v1/namespaces/default/leases', { metadata: { name: lease }, spec: { holderIdentity: 'x' } });
  const workflowId = uniq('ledger-wf');
  // No worker polls this queue: the workflow stays running until something ends it.
  await plane.temporal.client.workflow.start('migrateResource', { workflowId, taskQueue: uniq('ledger-tq'), args: [] });
  const temporalNamespace = uniq('ledger');
  await plane.temporal.connection.workflowService.registerNamespace({
    namespace: temporalNamespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  await restartApiserver(plane.dir, 1, OLD_ENCODING_FLAGS, () => undefined);
  assert.equal(await countKeys(plane.etcd, `/registry/${crd.group}/${crd.plural}/`), 30);

  const done = await leavePlaneAsFound(plane, mark);
  process.stderr.write(`  put back: ${done.join(', ')}\n`);

  assert.equal(await countKeys(plane.etcd, `/registry/${crd.group}/${crd.plural}/`), 0, 'the CRD objects are gone from etcd');
  assert.equal(await countKeys(plane.etcd, `/registry/apiextensions.k8s.io/customresourcedefinitions/${crd.name}`), 0);
  assert.equal(await countKeys(plane.etcd, `/registry/configmaps/${ns}/`), 0, 'the namespace was emptied, the finalizer-held one too');
  assert.equal(await countKeys(plane.etcd, `/registry/secrets/${ns}/`), 0);
  assert.equal(await countKeys(plane.etcd, `/registry/namespaces/${ns}`), 0, 'the namespace is gone');
  assert.equal(await countKeys(plane.etcd, `/registry/clusterroles/${role}`), 0);
  assert.equal(await countKeys(plane.etcd, `/registry/leases/default/${lease}`), 0);
  assert.deepEqual(
    readState(plane.dir)!.apiservers.map((a) => a.extraArgs),
    flagsBefore,
    'every API server runs with the flags it had at the mark',
  );
  assert.equal((await plane.temporal.client.workflow.getHandle(workflowId).describe()).status.name, 'TERMINATED');
  const namespaces = await plane.temporal.connection.workflowService.listNamespaces({ pageSize: 1000 });
  assert.deepEqual(
    (namespaces.namespaces ?? [])
      .filter((n) => n.namespaceInfo?.name === temporalNamespace && Number(n.namespaceInfo.state) !== 3)
      .map((n) => n.namespaceInfo?.name),
    [],
    'the Temporal namespace the file registered is deleted (or being deleted)',
  );
  // A second look finds nothing more to do.
  assert.deepEqual(await leavePlaneAsFound(plane, mark), []);
});

void test('a CRD whose deletion does not end fails the clean-up within its bound, naming what holds it; etcd judges', async () => {
  const mark = await markPlane(plane.dir, plane.kube, plane.temporal.client);
  const crd = testCrd(`${uniq('stuck')}.svm.test`);
  const ns = uniq('stuck');
  const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`;
  const setFinalizers = (finalizers: string[]) =>
    plane.kube.request('PATCH', crdPath, {
      body: JSON.stringify({ metadata: { finalizers } }),
      contentType: 'application/merge-patch+json',
    });
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 3, { namespace: ns });
  // A finalizer no controller of the plane removes: the CRD's deletion cannot end.
  await setFinalizers(['svm.test/hold']);

  const failure = await leavePlaneAsFound(plane, mark, { gone: 3_000, then: 2_000 }).then(
    () => assert.fail('the clean-up succeeded with the CRD still there'),
    (err: unknown) => (err instanceof Error ? err.message : String(err)),
  );
  process.stderr.write(`  ${failure}\n`);
  assert.match(
    failure,
    new RegExp(`CustomResourceDefinition not gone after 5 s: ${crd.name.replace(/\./g, '\\.')}: deletionTimestamp \\d`),
  );
  assert.match(failure, /finalizers \[[^\]]*svm\.test\/hold/, 'the message names the finalizer that holds it');
  assert.equal(await countKeys(plane.etcd, `/registry/namespaces/${ns}`), 0, 'the rest was put back all the same');

  // Let go, the CRD goes, and a second look finds nothing to do.
  const held = JSON.parse((await plane.kube.request('GET', crdPath)).body) as { metadata: { finalizers?: string[] } };
  await setFinalizers((held.metadata.finalizers ?? []).filter((f) => f !== 'svm.test/hold'));
  await eventually(
    `${crd.name} gone from etcd once let go`,
    async () => (await countKeys(plane.etcd, `/registry/apiextensions.k8s.io/customresourcedefinitions/${crd.name}`)) === 0,
  );
  assert.deepEqual(await leavePlaneAsFound(plane, mark), []);
  assert.equal(await countKeys(plane.etcd, `/registry/${crd.group}/${crd.plural}/`), 0, 'its objects are gone from etcd');
});
