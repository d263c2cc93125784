/**
 * Unit tests of the typed kube layer (src/kube/typed.ts and the modules per
 * kind): real-shaped objects parse (with the many fields Kubernetes adds
 * that the schemas do not name), malformed ones are refused with a message
 * that names the kind and the field and never the value; the typed reads and
 * writes build the right requests and keep errors classified. No cluster: a
 * KubeClient whose raw() answers from a table.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { CustomResourceDefinition, groupResourceOfCrd, storageVersionOf } from '../src/api/custom-resource-definition';
import { APIResourceList } from '../src/api/discovery';
import { EndpointSlice } from '../src/api/endpoint-slice';
import { Lease } from '../src/api/lease';
import { StorageState, StorageVersionMigration } from '../src/api/migration';
import { IdentityLease, StorageVersion } from '../src/api/storage-version';
import { KubeClient, METADATA_ONLY_LIST_ACCEPT, type KubeResponse, type RequestOptions } from '../src/kube/client';
import { getCrd, setCrdStoredVersions } from '../src/kube/crds';
import { findApiGroup, getResourceList } from '../src/kube/discovery';
import { KubeError } from '../src/kube/errors';
import { listIdentityLeases } from '../src/kube/leases';
import {
  annotateMigrationObject,
  createMigrationObject,
  findMigrationObject,
  listMigrationObjects,
  patchMigrationStatus,
} from '../src/kube/migrations';
import {
  createStorageState,
  findStorageState,
  listStorageStates,
  patchStorageStateStatus,
  refineStorageState,
} from '../src/kube/storage-states';
import { latestResourceVersion, NO_NAMESPACE } from '../src/kube/standard-migrations';
import { findStorageVersion, storageVersionApiServed } from '../src/kube/storage-versions';
import { fieldPath, MalformedObjectError, parseAs, parseBodyAs } from '../src/kube/typed';

/** A value no message may ever contain. */
const SECRET = 'c2VjcmV0LXZhbHVl-s3cr3t';

/** What the API server adds to every object. */
const serverMeta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  uid: '6f1c1a52-2f7e-4b53-9a55-0d8b6c1d7a01',
  resourceVersion: '4711',
  generation: 3,
  creationTimestamp: '2025-01-02T03:04:05Z',
  labels: { 'app.kubernetes.io/name': 'x' },
  managedFields: [{ manager: 'kubectl', operation: 'Update', apiVersion: 'v1', time: '2025-01-02T03:04:05Z', fieldsType: 'FieldsV1' }],
  ...extra,
});

function refused(fn: () => unknown, kind: string, field: string): MalformedObjectError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof MalformedObjectError, `refused with MalformedObjectError, got ${String(caught)}`);
  assert.ok(caught instanceof KubeError, 'a MalformedObjectError is a KubeError');
  assert.equal(caught.kind, 'other', 'not retryable, not a per-object failure');
  assert.match(caught.message, new RegExp(kind), `names the kind: ${caught.message}`);
  assert.ok(caught.message.includes(field), `names the field ${field}: ${caught.message}`);
  assert.ok(caught.fields.includes(field), `fields: ${caught.fields.join(', ')}`);
  assert.ok(!caught.message.includes(SECRET), `no value in the message: ${caught.message}`);
  assert.ok(!caught.message.includes('s3cr3t'), `no part of a value: ${caught.message}`);
  return caught;
}

// --- parsing: real shapes ---------------------------------------------------------------

const storageState = {
  apiVersion: 'migration.k8s.io/v1alpha1',
  kind: 'StorageState',
  metadata: serverMeta('deployments.apps'),
  spec: { resource: { group: 'apps', resource: 'deployments' } },
  status: {
    persistedStorageVersionHashes: ['8aTgxL4bXyA='],
    currentStorageVersionHash: '8aTgxL4bXyA=',
    lastHeartbeatTime: '2025-01-02T03:04:05Z',
    currentStorageVersionHashes: [
      { reporterID: '198.18.1.10:6443', currentStorageVersionHash: '8aTgxL4bXyA=', lastHeartbeatTime: '2025-01-02T03:04:05Z' },
    ],
    discoveryConsistent: true,
  },
};

const crd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: serverMeta('widgets.example.com', { annotations: { 'api-approved.kubernetes.io': 'unapproved' } }),
  spec: {
    group: 'example.com',
    names: { kind: 'Widget', listKind: 'WidgetList', plural: 'widgets', singular: 'widget' },
    scope: 'Namespaced',
    conversion: { strategy: 'None' },
    versions: [
      { name: 'v1', served: true, storage: false, schema: { openAPIV3Schema: { type: 'object' } } },
      { name: 'v2', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object' } }, subresources: { status: {} } },
    ],
  },
  status: {
    acceptedNames: { kind: 'Widget', plural: 'widgets' },
    conditions: [{ type: 'Established', status: 'True', reason: 'InitialNamesAccepted', lastTransitionTime: '2025-01-02T03:04:05Z' }],
    storedVersions: ['v1', 'v2'],
  },
};

const svm = {
  apiVersion: 'migration.k8s.io/v1alpha1',
  kind: 'StorageVersionMigration',
  metadata: serverMeta('secrets-1', { annotations: { 'migration.k8s.io/workflow-id': 'migrate/secrets' } }),
  spec: { resource: { group: '', version: 'v1', resource: 'secrets' } },
  status: {
    phase: 'Running',
    workflowId: 'migrate/secrets',
    conditions: [{ type: 'Running', status: 'True', lastUpdateTime: '2025-01-02T03:04:05Z', reason: 'Running' }],
    progress: { migrated: 10, failed: 0, remainingEstimate: 5 },
  },
};

void test('real-shaped objects of every kind parse, extra fields and all', () => {
  const st = parseAs(StorageState, storageState, { kind: 'StorageState' });
  assert.equal(st.status?.currentStorageVersionHashes?.[0]?.reporterID, '198.18.1.10:6443');
  assert.equal(st.metadata.resourceVersion, '4711');

  const c = parseAs(CustomResourceDefinition, crd, { kind: 'CustomResourceDefinition' });
  assert.equal(storageVersionOf(c), 'v2');
  assert.equal(c.metadata.generation, 3);
  assert.deepEqual(c.status?.storedVersions, ['v1', 'v2']);
  assert.deepEqual(groupResourceOfCrd(c.metadata.name), { resource: 'widgets', group: 'example.com' });
  assert.equal(groupResourceOfCrd('nodots'), undefined);

  const m = parseAs(StorageVersionMigration, svm, { kind: 'StorageVersionMigration' });
  assert.equal(m.metadata.uid, '6f1c1a52-2f7e-4b53-9a55-0d8b6c1d7a01');
  assert.equal(m.status?.phase, 'Running');

  const sv = parseAs(
    StorageVersion,
    {
      apiVersion: 'internal.apiserver.k8s.io/v1alpha1',
      kind: 'StorageVersion',
      metadata: serverMeta('apps.deployments'),
      spec: {},
      status: {
        storageVersions: [
          { apiServerID: 'kube-apiserver-abc', encodingVersion: 'apps/v1', decodableVersions: ['apps/v1'], servedVersions: ['apps/v1'] },
        ],
        commonEncodingVersion: 'apps/v1',
        conditions: [
          {
            type: 'AllEncodingVersionsEqual',
            status: 'True',
            lastTransitionTime: '2025-01-02T03:04:05Z',
            reason: 'CommonEncodingVersionSet',
          },
        ],
      },
    },
    { kind: 'StorageVersion' },
  );
  assert.equal(sv.status?.commonEncodingVersion, 'apps/v1');

  const leaseObj = {
    metadata: serverMeta('apiserver-abc', { namespace: 'kube-system', labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver' } }),
    spec: { holderIdentity: 'apiserver-abc_1234', leaseDurationSeconds: 3600, renewTime: '2025-01-02T03:04:05.000000Z' },
  };
  assert.equal(parseAs(IdentityLease, leaseObj, { kind: 'Lease' }).spec.holderIdentity, 'apiserver-abc_1234');
  assert.equal(parseAs(Lease, leaseObj, { kind: 'Lease' }).metadata.namespace, 'kube-system');

  // The API server writes null for unset optional fields of an EndpointSlice.
  const slice = parseAs(
    EndpointSlice,
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: serverMeta('kubernetes', { namespace: 'default' }),
      addressType: 'IPv4',
      endpoints: [{ addresses: ['198.18.1.10'], conditions: { ready: true, serving: true, terminating: null } }],
      ports: [{ name: 'https', port: 6443, protocol: 'TCP', appProtocol: null }],
    },
    { kind: 'EndpointSlice' },
  );
  assert.equal(slice.ports?.[0]?.port, 6443);

  const list = parseAs(
    APIResourceList,
    {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: 'apps/v1',
      resources: [
        {
          name: 'deployments',
          singularName: 'deployment',
          namespaced: true,
          kind: 'Deployment',
          verbs: ['list', 'update'],
          storageVersionHash: '8aTgxL4bXyA=',
        },
        { name: 'deployments/status', singularName: '', namespaced: true, kind: 'Deployment', verbs: ['get', 'patch', 'update'] },
      ],
    },
    { kind: 'APIResourceList' },
  );
  assert.equal(list.resources[0]?.storageVersionHash, '8aTgxL4bXyA=');
});

// --- parsing: malformed objects are refused by kind and field, never by value -------------

void test('a malformed StorageState is refused naming the kind and the field, not the value', () => {
  const bad = structuredClone(storageState) as Record<string, unknown> & { status: Record<string, unknown> };
  bad.status.persistedStorageVersionHashes = SECRET; // a string where a list belongs
  const err = refused(
    () => parseAs(StorageState, bad, { kind: 'StorageState', name: 'deployments.apps' }),
    'StorageState',
    'status.persistedStorageVersionHashes',
  );
  assert.match(
    err.message,
    /^StorageState deployments\.apps does not match its schema: status\.persistedStorageVersionHashes expected array$/,
  );
});

void test('a malformed CRD is refused naming the field inside its versions list', () => {
  const bad = structuredClone(crd);
  (bad.spec.versions[1] as Record<string, unknown>).storage = SECRET;
  refused(
    () => parseAs(CustomResourceDefinition, bad, { kind: 'CustomResourceDefinition' }),
    'CustomResourceDefinition',
    'spec.versions[1].storage',
  );
  const missing = structuredClone(crd) as { spec: Record<string, unknown> };
  delete missing.spec.versions;
  const err = refused(
    () => parseAs(CustomResourceDefinition, missing, { kind: 'CustomResourceDefinition' }),
    'CustomResourceDefinition',
    'spec.versions',
  );
  assert.match(err.message, /spec\.versions missing \(expected array\)/);
});

void test('a StorageVersionMigration with a phase outside the enum, or the wrong kind, is refused without quoting either', () => {
  const bad = structuredClone(svm);
  bad.status.phase = SECRET;
  const err = refused(
    () => parseAs(StorageVersionMigration, bad, { kind: 'StorageVersionMigration' }),
    'StorageVersionMigration',
    'status.phase',
  );
  assert.match(err.message, /status\.phase not an allowed value/);
  const wrongKind = { ...structuredClone(svm), kind: SECRET };
  refused(() => parseAs(StorageVersionMigration, wrongKind, { kind: 'StorageVersionMigration' }), 'StorageVersionMigration', 'kind');
});

void test('record keys that are not field-shaped never reach the message; many issues are cut short', () => {
  const bad = structuredClone(svm) as unknown as { metadata: { annotations: Record<string, unknown> } };
  bad.metadata.annotations[`password=${SECRET} "quoted"`] = 42;
  const err = refused(
    () => parseAs(StorageVersionMigration, bad, { kind: 'StorageVersionMigration' }),
    'StorageVersionMigration',
    'metadata.annotations.*',
  );
  assert.ok(!err.message.includes('password'), err.message);
  assert.equal(fieldPath(['spec', 'versions', 1, 'storage']), 'spec.versions[1].storage');
  assert.equal(fieldPath([]), '(the object)');

  const many = parseAs.bind(
    undefined,
    StorageVersionMigration,
    { apiVersion: 1, kind: 2, metadata: 3, spec: 4, status: 5 },
    { kind: 'StorageVersionMigration' },
  );
  assert.throws(many, (e: unknown) => e instanceof MalformedObjectError && /and \d+ more$/.test(e.message) && e.fields.length >= 4);
});

void test('a body that is not JSON is refused without quoting it', () => {
  assert.throws(
    () => parseBodyAs(StorageState, `{"status": "${SECRET}`, { kind: 'StorageState', name: 'x' }),
    (e: unknown) =>
      e instanceof KubeError && /StorageState x: the response is not valid JSON/.test(e.message) && !e.message.includes(SECRET),
  );
});

// --- typed reads and writes over a KubeClient that answers from a table -------------------

interface Call {
  method: string;
  path: string;
  body?: unknown;
  query?: RequestOptions['query'];
  contentType?: string;
  accept?: string;
}

class TableKube extends KubeClient {
  readonly calls: Call[] = [];
  constructor(private readonly answer: (c: Call) => { status: number; body?: unknown }) {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'http://127.0.0.1:1', skipTLSVerify: false }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    super(kc);
  }
  protected override send(method: string, path: string, opts: RequestOptions = {}): Promise<KubeResponse> {
    const call: Call = {
      method,
      path,
      query: opts.query,
      contentType: opts.contentType,
      ...(opts.accept !== undefined ? { accept: opts.accept } : {}),
      ...(opts.body !== undefined ? { body: JSON.parse(opts.body) as unknown } : {}),
    };
    this.calls.push(call);
    const a = this.answer(call);
    return Promise.resolve({ status: a.status, headers: {}, body: typeof a.body === 'string' ? a.body : JSON.stringify(a.body ?? {}) });
  }
}

const status = (code: number, reason: string, message = `${SECRET} is what went wrong`) => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  message,
  reason,
  code,
});

void test('StorageStates: list, find (404 is undefined), create (409 is exists), status patch with the resourceVersion', async () => {
  const kube = new TableKube((c) => {
    if (c.method === 'GET' && c.path.endsWith('/storagestates'))
      return { status: 200, body: { kind: 'StorageStateList', metadata: {}, items: [storageState] } };
    if (c.method === 'GET' && c.path.endsWith('/gone')) return { status: 404, body: status(404, 'NotFound') };
    if (c.method === 'GET') return { status: 200, body: storageState };
    if (c.method === 'POST') return { status: 409, body: status(409, 'AlreadyExists') };
    return { status: 200, body: storageState };
  });
  const all = await listStorageStates(kube);
  assert.equal(all[0]?.status?.currentStorageVersionHash, '8aTgxL4bXyA=');
  assert.equal(await findStorageState(kube, 'gone'), undefined);
  assert.equal((await findStorageState(kube, 'deployments.apps'))?.metadata.name, 'deployments.apps');
  assert.equal(await createStorageState(kube, 'deployments.apps', { group: 'apps', resource: 'deployments' }), 'exists');
  assert.deepEqual(kube.calls.at(-1), {
    method: 'POST',
    path: '/apis/migration.k8s.io/v1alpha1/storagestates',
    query: undefined,
    contentType: undefined,
    body: {
      apiVersion: 'migration.k8s.io/v1alpha1',
      kind: 'StorageState',
      metadata: { name: 'deployments.apps' },
      spec: { resource: { group: 'apps', resource: 'deployments' } },
    },
  });
  await patchStorageStateStatus(kube, 'deployments.apps', { persistedStorageVersionHashes: ['h'] }, '4711');
  assert.deepEqual(kube.calls.at(-1), {
    method: 'PATCH',
    path: '/apis/migration.k8s.io/v1alpha1/storagestates/deployments.apps/status',
    query: undefined,
    contentType: 'application/merge-patch+json',
    body: { metadata: { resourceVersion: '4711' }, status: { persistedStorageVersionHashes: ['h'] } },
  });
});

void test('StorageStates: a malformed item refuses the list by kind, item and field; an error answer stays classified and says nothing of the body', async () => {
  const bad = structuredClone(storageState) as { status: Record<string, unknown> };
  bad.status.currentStorageVersionHashes = [{ reporterID: SECRET }];
  const malformed = new TableKube(() => ({ status: 200, body: { items: [storageState, bad] } }));
  await assert.rejects(listStorageStates(malformed), (e: unknown) => {
    assert.ok(e instanceof MalformedObjectError);
    assert.match(
      e.message,
      /^StorageState \(list item 1\) does not match its schema: status\.currentStorageVersionHashes\[0\]\.currentStorageVersionHash missing/,
    );
    assert.ok(!e.message.includes(SECRET));
    return true;
  });
  const failing = new TableKube(() => ({ status: 500, body: status(500, 'InternalError') }));
  await assert.rejects(findStorageState(failing, 'x'), (e: unknown) => {
    assert.ok(e instanceof KubeError && !(e instanceof MalformedObjectError));
    assert.equal(e.kind, 'unavailable');
    assert.ok(!e.message.includes(SECRET), e.message);
    return true;
  });
});

void test('refineStorageState: reads, patches on the resourceVersion read, reads again on a conflict; false when current moved on or there is none', async () => {
  let conflicts = 1;
  let rv = 10;
  const kube = new TableKube((c) => {
    if (c.method === 'GET' && c.path.endsWith('/none')) return { status: 404, body: status(404, 'NotFound') };
    if (c.method === 'GET')
      return { status: 200, body: { ...storageState, metadata: { ...storageState.metadata, resourceVersion: String(++rv) } } };
    if (conflicts-- > 0) return { status: 409, body: status(409, 'Conflict') };
    return { status: 200, body: storageState };
  });
  assert.equal(await refineStorageState(kube, 'deployments.apps', '8aTgxL4bXyA='), true);
  const patches = kube.calls.filter((c) => c.method === 'PATCH');
  assert.deepEqual(
    patches.map((p) => p.body),
    [
      { metadata: { resourceVersion: '11' }, status: { persistedStorageVersionHashes: ['8aTgxL4bXyA='] } },
      { metadata: { resourceVersion: '12' }, status: { persistedStorageVersionHashes: ['8aTgxL4bXyA='] } },
    ],
  );
  assert.equal(await refineStorageState(kube, 'deployments.apps', 'another-hash'), false);
  assert.equal(await refineStorageState(kube, 'none', '8aTgxL4bXyA='), false);
});

void test('StorageVersionMigrations: create (404 is crdMissing, 409 exists), find, list keeps the good ones, annotate on uid, status patch', async () => {
  let post = 201;
  const bad = { ...structuredClone(svm), spec: { resource: { resource: 7 } } };
  const kube = new TableKube((c) => {
    if (c.method === 'POST') return { status: post, body: post === 201 ? svm : status(post, post === 404 ? 'NotFound' : 'AlreadyExists') };
    if (c.method === 'GET' && c.path.endsWith('/storageversionmigrations')) return { status: 200, body: { items: [svm, bad] } };
    if (c.method === 'GET' && c.path.endsWith('/missing')) return { status: 404, body: status(404, 'NotFound') };
    if (c.method === 'GET' && c.path.endsWith('/bad')) return { status: 200, body: bad };
    if (c.method === 'PATCH' && c.path.endsWith('/replaced')) return { status: 409, body: status(409, 'Conflict') };
    return { status: 200, body: svm };
  });
  const ref = { group: '', version: 'v1', resource: 'secrets' };
  assert.equal(await createMigrationObject(kube, 'secrets-1', 'migrate/secrets', ref), 'created');
  assert.deepEqual(kube.calls.at(-1)?.body, {
    apiVersion: 'migration.k8s.io/v1alpha1',
    kind: 'StorageVersionMigration',
    metadata: { name: 'secrets-1', annotations: { 'migration.k8s.io/workflow-id': 'migrate/secrets' } },
    spec: { resource: { group: '', version: 'v1', resource: 'secrets' } },
  });
  post = 409;
  assert.equal(await createMigrationObject(kube, 'secrets-1', 'migrate/secrets', ref), 'exists');
  post = 404;
  assert.equal(await createMigrationObject(kube, 'secrets-1', 'migrate/secrets', ref), 'crdMissing');

  assert.equal(await findMigrationObject(kube, 'missing'), undefined);
  assert.equal((await findMigrationObject(kube, 'secrets-1'))?.spec.resource.resource, 'secrets');
  await assert.rejects(
    findMigrationObject(kube, 'bad'),
    (e: unknown) =>
      e instanceof MalformedObjectError &&
      /^StorageVersionMigration bad does not match its schema: spec\.resource\.resource expected string$/.test(e.message),
  );

  const { items, malformed } = await listMigrationObjects(kube);
  assert.deepEqual(
    items.map((i) => i.metadata.name),
    ['secrets-1'],
  );
  assert.equal(malformed.length, 1);
  assert.match(malformed[0]!.message, /StorageVersionMigration \(list item 1\)/);

  assert.equal(await annotateMigrationObject(kube, 'secrets-1', 'uid-1', 'migrate/secrets'), 'annotated');
  assert.deepEqual(kube.calls.at(-1), {
    method: 'PATCH',
    path: '/apis/migration.k8s.io/v1alpha1/storageversionmigrations/secrets-1',
    query: undefined,
    contentType: 'application/merge-patch+json',
    body: { metadata: { uid: 'uid-1', annotations: { 'migration.k8s.io/workflow-id': 'migrate/secrets' } } },
  });
  assert.equal(await annotateMigrationObject(kube, 'replaced', 'uid-1', 'migrate/secrets'), 'gone');

  await patchMigrationStatus(kube, 'secrets-1', { phase: 'Succeeded', message: 'done' });
  assert.deepEqual(kube.calls.at(-1)?.body, { status: { phase: 'Succeeded', message: 'done' } });
  assert.equal(kube.calls.at(-1)?.path, '/apis/migration.k8s.io/v1alpha1/storageversionmigrations/secrets-1/status');
});

void test('CRDs, StorageVersions, identity leases and discovery: paths, 404 handling and parsing', async () => {
  const kube = new TableKube((c) => {
    if (c.path === '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com') return { status: 200, body: crd };
    if (c.path.endsWith('/status')) return { status: 200, body: crd };
    if (c.path === '/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/core.secrets')
      return { status: 404, body: '404 page not found' };
    if (c.path === '/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/apps.deployments')
      return { status: 200, body: { metadata: { name: 'apps.deployments', resourceVersion: '9' }, status: { storageVersions: [] } } };
    if (c.path === '/apis/internal.apiserver.k8s.io/v1alpha1') return { status: 404, body: '404 page not found' };
    if (c.path === '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases')
      return { status: 200, body: { items: [{ metadata: { name: 'apiserver-a' }, spec: { holderIdentity: 'apiserver-a_1' } }] } };
    if (c.path === '/apis/apps/v1')
      return {
        status: 200,
        body: { groupVersion: 'apps/v1', resources: [{ name: 'deployments', namespaced: true, kind: 'Deployment', verbs: [] }] },
      };
    if (c.path === '/apis/apps') return { status: 200, body: { name: 'apps', versions: [{ groupVersion: 'apps/v1', version: 'v1' }] } };
    return { status: 404, body: status(404, 'NotFound') };
  });
  const gr = { group: 'example.com', resource: 'widgets' };
  assert.equal(storageVersionOf(await getCrd(kube, gr)), 'v2');
  await assert.rejects(
    getCrd(kube, { group: 'example.com', resource: 'gadgets' }),
    (e: unknown) => e instanceof KubeError && e.kind === 'notFound',
  );
  await setCrdStoredVersions(kube, gr, ['v2']);
  assert.deepEqual(kube.calls.at(-1), {
    method: 'PATCH',
    path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com/status',
    query: undefined,
    contentType: 'application/merge-patch+json',
    body: { status: { storedVersions: ['v2'] } },
  });

  assert.equal(await findStorageVersion(kube, { group: '', resource: 'secrets' }), undefined);
  assert.equal((await findStorageVersion(kube, { group: 'apps', resource: 'deployments' }))?.metadata.resourceVersion, '9');
  assert.deepEqual(await storageVersionApiServed(kube), { served: false, status: 404 });

  const leases = await listIdentityLeases(kube);
  assert.equal(leases[0]?.spec.holderIdentity, 'apiserver-a_1');
  assert.deepEqual(kube.calls.at(-1)?.query, { labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver' });

  assert.equal((await getResourceList(kube, { group: 'apps', version: 'v1' })).resources[0]?.kind, 'Deployment');
  await assert.rejects(
    getResourceList(kube, { group: '', version: 'v1' }),
    (e: unknown) => e instanceof KubeError && e.kind === 'notFound',
  );
  assert.deepEqual(
    (await findApiGroup(kube, 'apps'))?.versions.map((v) => v.version),
    ['v1'],
  );
  assert.equal(await findApiGroup(kube, 'nothing.example.com'), undefined);
});

void test("the built-in's status.resourceVersion is read without any object's content: metadata only, a namespaced resource in a namespace that cannot exist; a 406 gives none (no plain list)", async () => {
  const kube = new TableKube((c) => {
    if (c.path.includes('/aggregated.example/') && c.accept === METADATA_ONLY_LIST_ACCEPT)
      return { status: 406, body: status(406, 'NotAcceptable') };
    return { status: 200, body: { kind: 'List', metadata: { resourceVersion: '4711' }, items: [] } };
  });
  assert.equal(await latestResourceVersion(kube, { group: '', version: 'v1', resource: 'secrets', namespaced: true }), '4711');
  assert.equal(
    await latestResourceVersion(kube, { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles', namespaced: false }),
    '4711',
  );
  assert.equal(
    await latestResourceVersion(kube, { group: 'aggregated.example', version: 'v1', resource: 'things', namespaced: true }),
    undefined,
  );
  assert.deepEqual(
    kube.calls.map((c) => [c.method, c.path, c.query, c.accept]),
    [
      ['GET', `/api/v1/namespaces/${encodeURIComponent(NO_NAMESPACE)}/secrets`, { limit: 1 }, METADATA_ONLY_LIST_ACCEPT],
      ['GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles', { limit: 1 }, METADATA_ONLY_LIST_ACCEPT],
      ['GET', `/apis/aggregated.example/v1/namespaces/${encodeURIComponent(NO_NAMESPACE)}/things`, { limit: 1 }, METADATA_ONLY_LIST_ACCEPT],
    ],
  );
  // A namespace no object can be in: not a DNS label.
  assert.doesNotMatch(NO_NAMESPACE, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
});

void test('a cluster-scoped resource whose conversion webhook fails gives no status.resourceVersion (the status is written without it); any other failure is thrown', async () => {
  const conversion =
    'failed to read one or more gizmos.example.com from the storage: StorageError: corrupt object, Code: 7, AdditionalErrorMsg: object not decodable revision=9: conversion webhook for example.com/v1, Kind=Gizmo failed: Post "https://10.0.0.1/convert": connection refused';
  const kube = new TableKube((c) =>
    c.path.includes('/gizmos')
      ? { status: 500, body: status(500, 'InternalError', conversion) }
      : { status: 500, body: status(500, 'InternalError') },
  );
  const ref = (resource: string) => ({ group: 'example.com', version: 'v2', resource, namespaced: false });
  assert.equal(await latestResourceVersion(kube, ref('gizmos')), undefined);
  await assert.rejects(latestResourceVersion(kube, ref('widgets')), (e: unknown) => e instanceof KubeError && e.status === 500);
});
