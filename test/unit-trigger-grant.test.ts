/**
 * The trigger starts svm's own pass only where the worker may list and patch
 * the resource: a resource outside its rights (a custom resource not granted)
 * is not started, and the result names it; a granted one is started. A fake
 * kube layer answering SelfSubjectAccessReviews: pure decision logic.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Client } from '@temporalio/client';
import { createTriggerActivities } from '../src/activities/trigger';
import type { ApiServerSource } from '../src/kube/apiservers';
import type { DiscoveredResource, KubeClient, KubeResponse } from '../src/kube/client';
import type { TriggerAction } from '../src/contract/trigger';
import { Placement } from '../src/contract/placement';

const resource = (group: string, name: string, kind: string): DiscoveredResource => ({
  name,
  singularName: name.slice(0, -1),
  namespaced: true,
  kind,
  verbs: ['list', 'patch', 'update'],
  storageVersionHash: 'h',
  group,
  version: 'v1',
  preferred: true,
});

function fakes(granted: Set<string>) {
  const reviews: string[] = [];
  const started: string[] = [];
  const ok = (body = '{}'): KubeResponse => ({ status: 200, headers: {}, body });
  const served = [resource('a.example.com', 'widgets', 'Widget'), resource('b.example.com', 'gadgets', 'Gadget')];
  const kube = {
    discover: async () => served,
    discoverGroup: async (group: string) => served.filter((r) => r.group === group),
    isCustomResource: async () => true,
    raw: async () => ok(),
    patchStatus: async () => undefined,
    request: async (method: string, path: string, opts: { body?: string }) => {
      // The standard API (looked at for migrations somebody else runs): not served here.
      if (method === 'GET' && path === '/apis/storagemigration.k8s.io') return { status: 404, headers: {}, body: '{}' };
      assert.equal(method, 'POST');
      assert.equal(path, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews');
      const a = (JSON.parse(opts.body!) as { spec: { resourceAttributes: { verb: string; group: string; resource: string } } }).spec
        .resourceAttributes;
      reviews.push(`${a.verb} ${a.resource}.${a.group}`);
      return ok(JSON.stringify({ status: { allowed: granted.has(`${a.resource}.${a.group}`) } }));
    },
  } as unknown as KubeClient;
  const client = {
    workflow: {
      start: async (_type: string, o: { workflowId: string }) => void started.push(o.workflowId),
      // No run holds the migration's ID (evictForeignRun looks before each start).
      getHandle: () => ({ describe: () => Promise.reject(Object.assign(new Error('not found'), { name: 'WorkflowNotFoundError' })) }),
    },
  } as unknown as Client;
  const acts = createTriggerActivities({ kube, apiservers: {} as ApiServerSource, temporal: { client, placement: Placement.of('q') } });
  return { acts, reviews, started };
}

const start = (name: string, group: string, plural: string): TriggerAction => ({
  name,
  group,
  resource: plural,
  write: {
    create: false,
    resourceVersion: '1',
    persisted: ['old'],
    current: 'h',
    lastHeartbeatTime: new Date(0).toISOString(),
    reporters: [],
    discoveryConsistent: true,
  },
  startMigration: true,
});

void test('a resource the worker may not list and patch is not started and is named; a granted one is started', async () => {
  const { acts, reviews, started } = fakes(new Set(['widgets.a.example.com']));
  const applied = await acts.applyTriggerActions([
    start('widgets.a.example.com', 'a.example.com', 'widgets'),
    start('gadgets.b.example.com', 'b.example.com', 'gadgets'),
  ]);
  assert.deepEqual(applied.started, ['widgets.a.example.com']);
  assert.deepEqual(applied.needsGrant, ['gadgets.b.example.com']);
  assert.deepEqual(started, ['migrate/widgets.a.example.com']);
  assert.deepEqual(reviews, [
    'list widgets.a.example.com',
    'patch widgets.a.example.com',
    'list gadgets.b.example.com',
    'patch gadgets.b.example.com',
  ]);
});
