/**
 * What observeStorage reports from the API servers' discovery and the StorageStates: the resources each server
 * serves at which hash, whether discovery was verified per server, and the sentence saying what was asked (every
 * server answering; one silent; none, so the worker's own address reports), and which migrations it looks up. A
 * fake kube layer per server and no Temporal: pure observation logic.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTriggerActivities } from '../src/activities/trigger';
import type { ApiServer, ApiServers } from '../src/kube/apiservers';
import type { DiscoveredResource, KubeClient } from '../src/kube/client';
import { MIGRATION_API_VERSION } from '../src/api/migration';

const resource = (group: string, name: string, hash?: string): DiscoveredResource => ({
  name,
  singularName: name.slice(0, -1),
  namespaced: true,
  kind: 'Kind',
  verbs: ['list', 'patch'],
  ...(hash !== undefined ? { storageVersionHash: hash } : {}),
  group,
  version: 'v1',
  preferred: true,
});

/** Served everywhere: widgets (settled in its StorageState at h1), gadgets (no StorageState), a subresource and one without a hash. */
const served = (widgetsHash = 'h1'): DiscoveredResource[] => [
  resource('a.example.com', 'widgets', widgetsHash),
  resource('a.example.com', 'widgets/status', 'x'),
  resource('b.example.com', 'gadgets', 'g1'),
  resource('', 'events'),
];

const reported = { reporterID: '10.0.0.1:6443', currentStorageVersionHash: 'h1', lastHeartbeatTime: '2025-01-01T00:00:00Z' };
const states = {
  items: [
    {
      apiVersion: MIGRATION_API_VERSION,
      kind: 'StorageState',
      metadata: { name: 'widgets.a.example.com', resourceVersion: '7' },
      status: { persistedStorageVersionHashes: ['h1'], currentStorageVersionHash: 'h1', currentStorageVersionHashes: [reported] },
    },
  ],
};

function kube(server: string, discover: () => Promise<DiscoveredResource[]>): KubeClient {
  return {
    server,
    discover,
    request: async (method: string, path: string) => {
      assert.equal(method, 'GET');
      assert.match(path, /storagestates$/);
      return { status: 200, headers: {}, body: JSON.stringify(states) };
    },
  } as unknown as KubeClient;
}

function observer(endpoints: ApiServer[], found: Partial<ApiServers>) {
  const via = kube('https://lb:443', async () => served('h-lb'));
  return createTriggerActivities({ kube: via, apiservers: { find: async () => ({ via, endpoints, ...found }), close: () => undefined } });
}

const server = (id: string, answers = true): ApiServer => ({
  id,
  kube: kube(`https://${id}`, answers ? async () => served() : () => Promise.reject(new Error('refused'))),
});

void test('every server answers at its own address: verified, each hash by its reporter, subresources and hashless resources left out', async () => {
  const o = await observer([server('10.0.0.2:6443'), server('10.0.0.1:6443')], { identities: ['x', 'y'] }).observeStorage();
  assert.equal(o.checked, '2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases)');
  assert.equal(o.discoveryConsistent, true);
  assert.deepEqual(o.reporters, ['10.0.0.1:6443', '10.0.0.2:6443']);
  assert.deepEqual(
    o.observed.map((r) => [r.name, r.hashes]),
    [
      ['gadgets.b.example.com', { '10.0.0.1:6443': 'g1', '10.0.0.2:6443': 'g1' }],
      ['widgets.a.example.com', { '10.0.0.1:6443': 'h1', '10.0.0.2:6443': 'h1' }],
    ],
  );
  assert.deepEqual(o.states['widgets.a.example.com'], {
    resourceVersion: '7',
    persisted: ['h1'],
    current: 'h1',
    lastHeartbeatTime: undefined,
    reporters: [reported],
  });
  // Settled widgets is not looked up; gadgets (no StorageState) is, and no Temporal means no migration.
  assert.deepEqual(o.migrations, { 'gadgets.b.example.com': 'none' });
  assert.equal(o.recorded, undefined);
  assert.equal(typeof o.at, 'number');
});

void test('one server silent: not verified, the sentence names it and the EndpointSlice note', async () => {
  const o = await observer([server('10.0.0.1:6443'), server('10.0.0.2:6443', false)], {
    identities: ['x'],
    endpointsNote: 'a note',
  }).observeStorage();
  assert.equal(
    o.checked,
    'could not verify per server: 1 of 2 addresses answered (a note; not answering: 10.0.0.2:6443), 1 identity lease',
  );
  assert.equal(o.discoveryConsistent, false);
  assert.deepEqual(o.reporters, ['10.0.0.1:6443']);
});

void test('no server heard at its own address: the worker’s own address reports, and the sentence says so', async () => {
  const o = await observer([server('10.0.0.1:6443', false)], {}).observeStorage();
  assert.equal(
    o.checked,
    'could not verify per server: 0 of 1 addresses answered (not answering: 10.0.0.1:6443), identity leases unknown; discovery through https://lb:443',
  );
  assert.equal(o.discoveryConsistent, false);
  assert.deepEqual(o.reporters, ['https://lb:443']);
  assert.deepEqual(o.observed.find((r) => r.name === 'widgets.a.example.com')?.hashes, { 'https://lb:443': 'h-lb' });
});

void test('known passes given: a settled StorageState is looked up unless its hash is the one known, and recorded is reported', async () => {
  const ends = [server('10.0.0.1:6443')];
  const atKnown = await observer(ends, { identities: ['x'] }).observeStorage({ 'widgets.a.example.com': 'h1' });
  assert.deepEqual(atKnown.migrations, { 'gadgets.b.example.com': 'none' });
  assert.deepEqual(atKnown.recorded, {});
  const unknown = await observer(ends, { identities: ['x'] }).observeStorage({});
  assert.deepEqual(unknown.migrations, { 'widgets.a.example.com': 'none', 'gadgets.b.example.com': 'none' });
});
