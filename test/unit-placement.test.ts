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
  assert.equal(here.query("WorkflowType = 'migrateResource'"), "WorkflowType = 'migrateResource'");
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
