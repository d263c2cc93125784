/** The one value for where a workflow runs (src/contract/placement.ts): every form derived from it, and the identity. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Placement } from '../src/contract/placement';
import { migrationStart, startOptions } from '../src/contract/start-options';
import type { ResourceRef } from '../src/api/resource';

const ref: ResourceRef = {
  group: 'apps',
  version: 'v1',
  resource: 'deployments',
  kind: 'Deployment',
  namespaced: true,
  storageVersionHash: 'h',
  custom: false,
};

void test('an unnamed placement is the identity: IDs, queue and input as given, no attribute, no cluster', () => {
  const here = Placement.of('svm');
  assert.equal(here.name, undefined);
  assert.equal(here.taskQueue, 'svm');
  assert.equal(here.id('migrate/deployments.apps'), 'migrate/deployments.apps');
  assert.deepEqual(here.attributes, []);
  // Its visibility query: the workflows that name no cluster (in a namespace shared with named clusters, each of
  // theirs carries MigrationCluster and is not matched), whatever queue the client was told.
  assert.equal(here.query("WorkflowType = 'migrateResource'"), "WorkflowType = 'migrateResource' AND MigrationCluster IS NULL");
  // A cluster's start input is refused by its name: none is expected here.
  assert.equal(here.inputRefusal(undefined), undefined);
  assert.equal(here.inputRefusal({ name: 'east' }), 'was started in cluster east, and this install names none');
  const input = { resource: ref };
  assert.equal(here.input(input), input);
  assert.equal(here.withUid('u-1'), here);
  const o = here.start(migrationStart({ resource: ref }));
  assert.equal(o.workflowId, 'migrate/deployments.apps');
  assert.equal(o.taskQueue, 'svm');
  assert.equal(o.workflowIdConflictPolicy, 'USE_EXISTING');
  assert.deepEqual(o.args, [{ resource: ref }]);
  assert.deepEqual(
    o.typedSearchAttributes?.getAll().map((p) => p.key.name),
    ['MigrationResource', 'MigrationGroup', 'MigrationPhase', 'MigrationMigrated'],
  );
  assert.equal(o.staticSummary, 'Storage version migration of deployments.apps');
});

void test('a named placement gives the ID, the queue, the attribute, the summary and the input its cluster, with the uid once pinned', () => {
  const here = Placement.of('svm', 'east').withUid('u-1');
  assert.equal(here.taskQueue, 'svm/cluster/east');
  assert.equal(here.id('migrate/deployments.apps'), 'migrate/east/deployments.apps');
  assert.equal(here.id('svm-trigger'), 'svm-trigger/east');
  assert.equal(here.query('WorkflowType = "x"'), `WorkflowType = "x" AND MigrationCluster = 'east'`);
  assert.equal(here.inputRefusal({ name: 'east', uid: 'other' }), undefined); // the uid is the record check's
  assert.equal(here.inputRefusal({ name: 'west' }), 'was started in cluster west');
  assert.equal(here.inputRefusal(undefined), 'was started in no cluster');
  const o = here.start(migrationStart({ resource: ref }));
  assert.equal(o.workflowId, 'migrate/east/deployments.apps');
  assert.equal(o.taskQueue, 'svm/cluster/east');
  assert.deepEqual(o.args, [{ resource: ref, cluster: { name: 'east', uid: 'u-1' } }]);
  assert.equal(o.typedSearchAttributes?.getAll().at(-1)?.value, 'east');
  assert.equal(o.staticSummary, 'Storage version migration of deployments.apps in cluster east');
  // A child cannot join: no conflict policy.
  assert.equal('workflowIdConflictPolicy' in here.child(migrationStart({ resource: ref })), false);
});

void test("a workflow's placement, made from its own task queue and input, is the one it was started in", () => {
  const started = Placement.of('svm', { name: 'east', uid: 'u-1' });
  const running = Placement.running(started.taskQueue, started.cluster);
  assert.equal(running.base, 'svm');
  assert.equal(running.taskQueue, started.taskQueue);
  assert.deepEqual(running.cluster, { name: 'east', uid: 'u-1' });
  assert.equal(Placement.running('svm').taskQueue, 'svm');
});

void test("the contract's startOptions is the placement's, on the task queue given", () => {
  const o = startOptions(ref, 'svm/cluster/east', 'east');
  assert.equal(o.workflowId, 'migrate/east/deployments.apps');
  assert.equal(o.taskQueue, 'svm/cluster/east');
  assert.equal('args' in o, false);
});

void test("a cluster's queue from its registration (a pool's): where it runs, and nothing else; IDs, input and header unchanged", () => {
  const own = Placement.of('svm', { name: 'east', uid: 'u-1' });
  const pooled = Placement.of('svm', { name: 'east', uid: 'u-1', queue: 'svm/pool/mgmt' });
  assert.equal(own.taskQueue, 'svm/cluster/east');
  assert.equal(pooled.taskQueue, 'svm/pool/mgmt');
  for (const p of [own, pooled]) {
    assert.equal(p.id('migrate/deployments.apps'), 'migrate/east/deployments.apps');
    assert.deepEqual(p.cluster, { name: 'east', uid: 'u-1' }, 'the queue is in no input nor header');
    assert.deepEqual(p.input({ a: 1 }), { a: 1, cluster: { name: 'east', uid: 'u-1' } });
    assert.deepEqual(Object.keys(p.headers({})), ['svm-cluster']);
  }
  assert.deepEqual(own.start(migrationStart({ resource: ref })).args, pooled.start(migrationStart({ resource: ref })).args);
  assert.equal(pooled.start(migrationStart({ resource: ref })).taskQueue, 'svm/pool/mgmt');
  // The queue is kept through withUid, given by withQueue, and dropped by withQueue(undefined) (the cluster's own again).
  assert.equal(Placement.of('svm', { name: 'east', queue: 'svm/pool/mgmt' }).withUid('u-2').taskQueue, 'svm/pool/mgmt');
  assert.equal(own.withQueue('svm/pool/mgmt').taskQueue, 'svm/pool/mgmt');
  assert.equal(pooled.withQueue(undefined).taskQueue, 'svm/cluster/east');
  // A single cluster has no registration: a queue is not looked at.
  assert.equal(Placement.of('svm').withQueue('svm/pool/mgmt').taskQueue, 'svm');
});

void test("a workflow on a pool's queue starts its children and activities there; on its cluster's own queue as before", () => {
  const onPool = Placement.running('svm/pool/mgmt', { name: 'east', uid: 'u-1' });
  assert.equal(onPool.taskQueue, 'svm/pool/mgmt');
  assert.equal(onPool.id('migrate/secrets'), 'migrate/east/secrets');
  assert.deepEqual(onPool.cluster, { name: 'east', uid: 'u-1' });
  assert.equal(onPool.withUid('u-2').taskQueue, 'svm/pool/mgmt');
  const onOwn = Placement.running('svm/cluster/east', { name: 'east' });
  assert.equal(onOwn.base, 'svm');
  assert.equal(onOwn.taskQueue, 'svm/cluster/east');
});
