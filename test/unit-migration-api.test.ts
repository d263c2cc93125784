/**
 * Unit tests of our API: the StorageVersionMigration/StorageState zod
 * schemas (src/api/migration.ts), the CRDs generated from them
 * (src/api/crds.ts) and the resource name helpers (src/api/resource.ts).
 * Pure: no cluster.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import {
  MIGRATION_API_VERSION,
  MIGRATION_GROUP,
  MIGRATION_VERSION,
  StorageState,
  StorageVersionMigration,
  StorageVersionMigrationStatus,
  migrationObjectState,
} from '../src/api/migration';
import { migrationCrds, migrationCrdsYaml } from '../src/api/crds';
import { apiVersionOf, collectionPath, groupResourceString, migrationWorkflowId, objectPath } from '../src/api/resource';

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => typeof v === 'object' && v !== null && !Array.isArray(v);

// --- the StorageVersionMigration schema ------------------------------------------------------

/** An object as kube-storage-version-migrator writes it (kubectl get -o json). */
const upstreamMigration = {
  apiVersion: 'migration.k8s.io/v1alpha1',
  kind: 'StorageVersionMigration',
  metadata: {
    name: 'deployments.apps-abcde',
    generateName: 'deployments.apps-',
    uid: '0b7f3c2e-1111-2222-3333-444455556666',
    resourceVersion: '12345',
    generation: 1,
    creationTimestamp: '2024-01-01T00:00:00Z',
    labels: { 'migration.k8s.io/trigger': 'true' },
    annotations: { note: 'from upstream' },
  },
  spec: {
    resource: { group: 'apps', version: 'v1', resource: 'deployments' },
    continueToken: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ',
  },
  status: {
    conditions: [
      { type: 'Running', status: 'False', lastUpdateTime: '2024-01-01T00:01:00Z', reason: 'Completed', message: '' },
      { type: 'Succeeded', status: 'True', lastUpdateTime: '2024-01-01T00:01:00Z' },
    ],
  },
};

void test('StorageVersionMigration: accepts a kube-storage-version-migrator style object', () => {
  const parsed = StorageVersionMigration.parse(upstreamMigration);
  assert.deepEqual(parsed.spec.resource, { group: 'apps', version: 'v1', resource: 'deployments' });
  assert.equal(parsed.spec.continueToken, 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ');
  assert.equal(parsed.status?.conditions?.length, 2);
  assert.deepEqual(
    parsed.status?.conditions?.map((c) => [c.type, c.status]),
    [
      ['Running', 'False'],
      ['Succeeded', 'True'],
    ],
  );
  // Unknown metadata fields are kept (metadata is loose).
  assert.equal((parsed.metadata as Dict).uid, '0b7f3c2e-1111-2222-3333-444455556666');
  assert.deepEqual(parsed.metadata.annotations, { note: 'from upstream' });
});

void test('StorageVersionMigration: accepts every upstream condition type, a Failed one included', () => {
  for (const type of ['Running', 'Succeeded', 'Failed'] as const) {
    for (const status of ['True', 'False', 'Unknown'] as const) {
      const obj = {
        ...upstreamMigration,
        status: { conditions: [{ type, status, lastUpdateTime: '2024-01-01T00:00:00Z', reason: 'R', message: 'm' }] },
      };
      assert.ok(StorageVersionMigration.safeParse(obj).success, `${type}=${status}`);
    }
  }
});

void test('StorageVersionMigration: core group (empty or missing group) and no version', () => {
  for (const resource of [{ group: '', resource: 'secrets' }, { resource: 'secrets' }, { group: '', version: 'v1', resource: 'secrets' }]) {
    const obj = { apiVersion: MIGRATION_API_VERSION, kind: 'StorageVersionMigration', metadata: { name: 'secrets' }, spec: { resource } };
    const parsed = StorageVersionMigration.parse(obj);
    assert.equal(parsed.spec.resource.resource, 'secrets');
    assert.equal(parsed.status, undefined);
  }
  // An empty status object is fine too.
  assert.ok(StorageVersionMigration.safeParse({ ...upstreamMigration, status: {} }).success);
});

void test('StorageVersionMigration: refuses a wrong apiVersion/kind, a missing resource, an unknown condition type or status', () => {
  const bad: Array<[string, unknown]> = [
    ['apiVersion', { ...upstreamMigration, apiVersion: 'migration.k8s.io/v1' }],
    ['kind', { ...upstreamMigration, kind: 'StorageState' }],
    ['spec.resource.resource', { ...upstreamMigration, spec: { resource: { group: 'apps', version: 'v1' } } }],
    ['spec', { ...upstreamMigration, spec: undefined }],
    ['metadata.name', { ...upstreamMigration, metadata: {} }],
    ['condition type', { ...upstreamMigration, status: { conditions: [{ type: 'Ready', status: 'True' }] } }],
    ['condition status', { ...upstreamMigration, status: { conditions: [{ type: 'Running', status: 'yes' }] } }],
    ['phase', { ...upstreamMigration, status: { phase: 'Done' } }],
  ];
  for (const [what, obj] of bad) assert.equal(StorageVersionMigration.safeParse(obj).success, false, what);
});

void test('StorageVersionMigrationStatus: our own status (phase, progress, failures) round-trips', () => {
  const status = {
    phase: 'Running',
    message: 'migrating',
    workflowId: 'migrate/deployments.apps',
    conditions: [{ type: 'Running', status: 'True', reason: 'Running' }],
    progress: { migrated: 10, rewritten: 4, failed: 1, remainingEstimate: 90 },
    failures: [{ namespace: 'ns', name: 'a', reason: 'admission webhook denied' }],
    startTime: '2024-01-01T00:00:00Z',
  };
  assert.deepEqual(StorageVersionMigrationStatus.parse(status), status);
  assert.equal(StorageVersionMigrationStatus.safeParse({ progress: { migrated: 1.5 } }).success, false, 'counters are integers');
});

void test('StorageState: accepts an upstream-style object', () => {
  const s = StorageState.parse({
    apiVersion: MIGRATION_API_VERSION,
    kind: 'StorageState',
    metadata: { name: 'deployments.apps' },
    spec: { resource: { group: 'apps', resource: 'deployments' } },
    status: {
      persistedStorageVersionHashes: ['abc=', 'Unknown'],
      currentStorageVersionHash: 'abc=',
      lastHeartbeatTime: '2024-01-01T00:00:00Z',
    },
  });
  assert.deepEqual(s.status?.persistedStorageVersionHashes, ['abc=', 'Unknown']);
});

// --- the generated CRDs ------------------------------------------------------------------------

const crds = migrationCrds();
const crdByKind = (kind: string) => {
  const c = crds.find((x) => x.spec.names.kind === kind);
  assert.ok(c, `a CRD for ${kind}`);
  return c;
};

/** Every schema node in an OpenAPI v3 schema, with its path (properties, items, additionalProperties, combinators). */
function schemaNodes(root: unknown, at = '$'): Array<{ path: string; node: Dict }> {
  if (!isDict(root)) return [];
  const out = [{ path: at, node: root }];
  if (isDict(root.properties)) {
    for (const [k, v] of Object.entries(root.properties)) out.push(...schemaNodes(v, `${at}.properties.${k}`));
  }
  if (isDict(root.items)) out.push(...schemaNodes(root.items, `${at}.items`));
  if (Array.isArray(root.items)) root.items.forEach((v, i) => out.push(...schemaNodes(v, `${at}.items[${i}]`)));
  if (isDict(root.additionalProperties)) out.push(...schemaNodes(root.additionalProperties, `${at}.additionalProperties`));
  for (const k of ['allOf', 'anyOf', 'oneOf']) {
    const v = root[k];
    if (Array.isArray(v)) v.forEach((s, i) => out.push(...schemaNodes(s, `${at}.${k}[${i}]`)));
  }
  if (isDict(root.not)) out.push(...schemaNodes(root.not, `${at}.not`));
  return out;
}

/** Every key at any depth of a JSON value, with its path (including keys that are property names). */
function allKeys(v: unknown, at = '$'): Array<{ path: string; key: string; value: unknown }> {
  if (Array.isArray(v)) return v.flatMap((x, i) => allKeys(x, `${at}[${i}]`));
  if (!isDict(v)) return [];
  return Object.entries(v).flatMap(([k, x]) => [{ path: `${at}.${k}`, key: k, value: x }, ...allKeys(x, `${at}.${k}`)]);
}

/** The fields of apiextensions.k8s.io/v1 JSONSchemaProps. */
const JSON_SCHEMA_PROPS = new Set([
  'id',
  '$schema',
  '$ref',
  'description',
  'type',
  'format',
  'title',
  'default',
  'maximum',
  'exclusiveMaximum',
  'minimum',
  'exclusiveMinimum',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'uniqueItems',
  'multipleOf',
  'enum',
  'maxProperties',
  'minProperties',
  'required',
  'items',
  'allOf',
  'oneOf',
  'anyOf',
  'not',
  'properties',
  'additionalProperties',
  'patternProperties',
  'dependencies',
  'additionalItems',
  'definitions',
  'externalDocs',
  'example',
  'nullable',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-list-type',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
]);

void test('migrationCrds: two CRDs, StorageVersionMigration and StorageState', () => {
  assert.deepEqual(crds.map((c) => c.spec.names.kind).sort(), ['StorageState', 'StorageVersionMigration']);
  for (const c of crds) {
    assert.equal(c.apiVersion, 'apiextensions.k8s.io/v1');
    assert.equal(c.kind, 'CustomResourceDefinition');
  }
});

void test('migrationCrds: names, group, scope Cluster, one served storage version with the status subresource', () => {
  const svm = crdByKind('StorageVersionMigration');
  assert.equal(svm.metadata.name, 'storageversionmigrations.migration.k8s.io');
  assert.deepEqual(svm.spec.names, {
    kind: 'StorageVersionMigration',
    listKind: 'StorageVersionMigrationList',
    plural: 'storageversionmigrations',
    singular: 'storageversionmigration',
    shortNames: ['svm'],
  });
  const ss = crdByKind('StorageState');
  assert.equal(ss.metadata.name, 'storagestates.migration.k8s.io');
  assert.equal(ss.spec.names.plural, 'storagestates');
  assert.equal(ss.spec.names.singular, 'storagestate');
  assert.equal(ss.spec.names.listKind, 'StorageStateList');
  for (const c of crds) {
    assert.equal(c.spec.group, MIGRATION_GROUP);
    assert.equal(c.spec.group, 'migration.k8s.io');
    // metadata.name must be <plural>.<group>
    assert.equal(c.metadata.name, `${c.spec.names.plural}.${c.spec.group}`);
    assert.equal(c.spec.scope, 'Cluster');
    assert.equal(c.spec.versions.length, 1);
    const v = c.spec.versions[0]!;
    assert.equal(v.name, MIGRATION_VERSION);
    assert.equal(v.name, 'v1alpha1');
    assert.equal(v.served, true);
    assert.equal(v.storage, true);
    assert.deepEqual(v.subresources, { status: {} });
    assert.equal(c.spec.versions.filter((x) => x.storage).length, 1, 'exactly one storage version');
  }
});

void test('migrationCrds: the api-approved.kubernetes.io annotation required for a *.k8s.io group', () => {
  for (const c of crds) {
    const a = c.metadata.annotations['api-approved.kubernetes.io'];
    assert.equal(typeof a, 'string');
    // The apiserver accepts a URL of an approved PR, or a value starting with "unapproved".
    assert.match(a, /^unapproved/);
  }
});

void test('migrationCrds: schemas are structural: no $schema and no additionalProperties: false anywhere', () => {
  for (const c of crds) {
    for (const { path: p, key, value } of allKeys(c)) {
      assert.notEqual(key, '$schema', `${c.metadata.name} ${p}`);
      if (key === 'additionalProperties') assert.notEqual(value, false, `${c.metadata.name} ${p}`);
    }
    const text = JSON.stringify(c);
    assert.ok(!text.includes('"$schema"'));
    assert.ok(!text.includes('"additionalProperties":false'));
  }
});

void test('migrationCrds: every schema node has a type; object schemas with properties have type object; arrays have items', () => {
  for (const c of crds) {
    const root = c.spec.versions[0]!.schema.openAPIV3Schema;
    assert.equal(root.type, 'object');
    const nodes = schemaNodes(root);
    // The walk reaches the nested schemas (e.g. status.currentStorageVersionHashes.items.properties.reporterID).
    assert.ok(nodes.length > 15, `the walk reaches the nested schemas (${nodes.length} nodes)`);
    assert.ok(nodes.some((n) => n.path.split('.').length >= 7));
    for (const { path: p, node } of nodes) {
      assert.equal(typeof node.type, 'string', `${c.metadata.name} ${p} has a type`);
      if ('properties' in node) assert.equal(node.type, 'object', `${c.metadata.name} ${p}`);
      if (node.type === 'array') assert.ok(isDict(node.items), `${c.metadata.name} ${p} has items`);
    }
  }
});

void test('migrationCrds: integers have format int64, and no JSON-Schema-only keywords remain', () => {
  let integers = 0;
  for (const c of crds) {
    for (const { path: p, node } of schemaNodes(c.spec.versions[0]!.schema.openAPIV3Schema)) {
      if (node.type === 'integer') {
        integers++;
        assert.equal(node.format, 'int64', `${c.metadata.name} ${p}`);
      }
      for (const k of Object.keys(node))
        assert.ok(JSON_SCHEMA_PROPS.has(k), `${c.metadata.name} ${p}: "${k}" is not a JSONSchemaProps field`);
      for (const k of ['$ref', 'definitions', '$defs', 'const', 'anyOf', 'oneOf', 'allOf', 'not', 'patternProperties', 'propertyNames']) {
        assert.ok(!(k in node), `${c.metadata.name} ${p} has ${k}`);
      }
      if (Array.isArray(node.required) && isDict(node.properties)) {
        for (const r of node.required as string[]) assert.ok(r in node.properties, `${c.metadata.name} ${p}: required ${r} is a property`);
      }
    }
  }
  assert.ok(integers >= 7, `the progress counters are integers (found ${integers})`);
});

void test('migrationCrds: the spec and status schemas follow the zod schemas', () => {
  const svm = crdByKind('StorageVersionMigration').spec.versions[0]!.schema.openAPIV3Schema;
  const props = svm.properties as Dict;
  assert.deepEqual(Object.keys(props).sort(), ['apiVersion', 'kind', 'metadata', 'spec', 'status']);
  const spec = props.spec as Dict;
  assert.deepEqual(spec.required, ['resource']);
  const resource = (spec.properties as Dict).resource as Dict;
  assert.deepEqual(Object.keys(resource.properties as Dict).sort(), ['group', 'resource', 'version']);
  assert.deepEqual(resource.required, ['resource']);
  const status = props.status as Dict;
  const statusProps = status.properties as Dict;
  for (const k of ['conditions', 'phase', 'message', 'workflowId', 'progress', 'failures', 'startTime', 'completionTime'])
    assert.ok(k in statusProps, `status.${k}`);
  assert.deepEqual((statusProps.phase as Dict).enum, [
    'Pending',
    'WaitingForAgreement',
    'Running',
    'Paused',
    'Succeeded',
    'Failed',
    'Aborted',
  ]);
  const cond = (statusProps.conditions as Dict).items as Dict;
  assert.deepEqual(((cond.properties as Dict).type as Dict).enum, ['Running', 'Succeeded', 'Failed']);
  assert.deepEqual(((cond.properties as Dict).status as Dict).enum, ['True', 'False', 'Unknown']);
  // Status fields are all optional: the bridge writes them bit by bit.
  assert.equal(status.required, undefined);
});

/** Resolves a simple printer-column JSONPath (.a.b.c) in an OpenAPI schema. */
function schemaAt(root: Dict, jsonPath: string): Dict | undefined {
  assert.match(jsonPath, /^(\.[A-Za-z0-9_]+)+$/, `simple JSONPath: ${jsonPath}`);
  let node: Dict | undefined = root;
  for (const part of jsonPath.slice(1).split('.')) {
    const props: unknown = node?.properties;
    if (!isDict(props) || !isDict(props[part])) return undefined;
    node = props[part];
  }
  return node;
}

void test('migrationCrds: printer columns point at paths that exist in the schema, with matching types', () => {
  for (const c of crds) {
    const v = c.spec.versions[0]!;
    const root = v.schema.openAPIV3Schema as Dict;
    const names = v.additionalPrinterColumns.map((col) => col.name);
    assert.equal(new Set(names).size, names.length, 'column names are unique');
    assert.ok(names.includes('Age'));
    for (const col of v.additionalPrinterColumns) {
      assert.ok(['integer', 'number', 'string', 'boolean', 'date'].includes(col.type), `${col.name} type ${col.type}`);
      if (col.jsonPath === '.metadata.creationTimestamp') {
        assert.equal(col.type, 'date');
        continue;
      }
      const node = schemaAt(root, col.jsonPath);
      assert.ok(node, `${c.metadata.name} column ${col.name}: ${col.jsonPath} exists in the schema`);
      if (col.type === 'integer') assert.equal(node.type, 'integer', `${col.name}`);
      if (col.type === 'date') assert.equal(node.type, 'string', `${col.name}`);
      if (col.type === 'string') assert.ok(node.type === 'string' || node.type === 'array', `${col.name} is ${String(node.type)}`);
    }
  }
  const svmCols = crdByKind('StorageVersionMigration').spec.versions[0]!.additionalPrinterColumns;
  const statusCols = svmCols.filter((col) => col.jsonPath.startsWith('.status.'));
  assert.deepEqual(
    statusCols.map((col) => col.jsonPath),
    ['.status.phase', '.status.progress.migrated', '.status.progress.failed', '.status.message'],
  );
});

void test('migrationCrds: the schema round-trips through YAML, and deploy/crds.yaml is up to date', () => {
  const yaml = migrationCrdsYaml();
  assert.match(yaml, /^# Generated from src\/api\/migration\.ts/);
  const docs = YAML.parseAllDocuments(yaml).map((d) => d.toJS() as unknown);
  assert.deepEqual(docs, JSON.parse(JSON.stringify(crds)));
  const deployed = fs.readFileSync(path.resolve(__dirname, '../deploy/crds.yaml'), 'utf8');
  assert.equal(deployed, yaml, 'deploy/crds.yaml is stale: run `npm run gen`');
});

// --- resource names and paths ------------------------------------------------------------------

void test('groupResourceString and migrationWorkflowId: core and grouped', () => {
  assert.equal(groupResourceString({ group: '', resource: 'secrets' }), 'secrets');
  assert.equal(groupResourceString({ group: 'apps', resource: 'deployments' }), 'deployments.apps');
  assert.equal(groupResourceString({ group: 'example.com', resource: 'widgets' }), 'widgets.example.com');
  assert.equal(migrationWorkflowId({ group: '', resource: 'secrets' }), 'migrate/secrets');
  assert.equal(migrationWorkflowId({ group: 'apps', resource: 'deployments' }), 'migrate/deployments.apps');
  assert.equal(migrationWorkflowId({ group: 'example.com', resource: 'widgets' }), 'migrate/widgets.example.com');
});

void test('migrationWorkflowId: one ID per group/resource, independent of version and other fields', () => {
  const a = migrationWorkflowId({ group: 'example.com', resource: 'widgets' });
  const b = migrationWorkflowId({ group: 'example.com', resource: 'widgets', version: 'v2', kind: 'Widget' } as {
    group: string;
    resource: string;
  });
  assert.equal(a, b);
  assert.notEqual(
    migrationWorkflowId({ group: '', resource: 'events' }),
    migrationWorkflowId({ group: 'events.k8s.io', resource: 'events' }),
  );
});

void test('apiVersionOf: core and grouped', () => {
  assert.equal(apiVersionOf({ group: '', version: 'v1' }), 'v1');
  assert.equal(apiVersionOf({ group: 'apps', version: 'v1' }), 'apps/v1');
  assert.equal(apiVersionOf({ group: 'example.com', version: 'v2beta1' }), 'example.com/v2beta1');
});

void test('collectionPath: core and grouped, cluster-wide and in a namespace', () => {
  const secrets = { group: '', version: 'v1', resource: 'secrets' };
  const deployments = { group: 'apps', version: 'v1', resource: 'deployments' };
  assert.equal(collectionPath(secrets), '/api/v1/secrets');
  assert.equal(collectionPath(secrets, 'kube-system'), '/api/v1/namespaces/kube-system/secrets');
  assert.equal(collectionPath(deployments), '/apis/apps/v1/deployments');
  assert.equal(collectionPath(deployments, 'default'), '/apis/apps/v1/namespaces/default/deployments');
  // Cluster-scoped resources: no namespace given, or an empty one.
  assert.equal(collectionPath({ group: '', version: 'v1', resource: 'namespaces' }), '/api/v1/namespaces');
  assert.equal(
    collectionPath({ group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles' }, ''),
    '/apis/rbac.authorization.k8s.io/v1/clusterroles',
  );
});

void test('objectPath: core and grouped, namespaced and cluster-scoped', () => {
  assert.equal(
    objectPath({ group: '', version: 'v1', resource: 'secrets' }, 'token', 'default'),
    '/api/v1/namespaces/default/secrets/token',
  );
  assert.equal(objectPath({ group: '', version: 'v1', resource: 'namespaces' }, 'kube-system'), '/api/v1/namespaces/kube-system');
  assert.equal(
    objectPath({ group: 'apps', version: 'v1', resource: 'deployments' }, 'web', 'prod'),
    '/apis/apps/v1/namespaces/prod/deployments/web',
  );
  assert.equal(objectPath({ group: 'example.com', version: 'v2', resource: 'widgets' }, 'w1'), '/apis/example.com/v2/widgets/w1');
});

void test('objectPath: names that need URL encoding are encoded as one path segment', () => {
  const clusterroles = { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles' };
  assert.equal(
    objectPath(clusterroles, 'system:controller:job-controller'),
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Acontroller%3Ajob-controller',
  );
  const widgets = { group: 'example.com', version: 'v1', resource: 'widgets' };
  const weird = 'a b/c?d#e%f&g=h';
  const p = objectPath(widgets, weird, 'n s');
  assert.equal(p, '/apis/example.com/v1/namespaces/n%20s/widgets/a%20b%2Fc%3Fd%23e%25f%26g%3Dh');
  // One segment each: the name cannot escape into the path, query or fragment.
  const segments = p.split('/');
  assert.deepEqual(segments.slice(0, 5), ['', 'apis', 'example.com', 'v1', 'namespaces']);
  assert.equal(segments.length, 8);
  assert.equal(decodeURIComponent(segments[7]!), weird);
  assert.equal(decodeURIComponent(segments[5]!), 'n s');
  assert.ok(!p.includes('?') && !p.includes('#'));
  // Unicode names are percent-encoded as UTF-8.
  assert.equal(objectPath(widgets, 'ü'), '/apis/example.com/v1/widgets/%C3%BC');
  // Characters that are safe in a path segment are left alone.
  assert.equal(objectPath(widgets, 'plain-name.with.dots'), '/apis/example.com/v1/widgets/plain-name.with.dots');
});

void test('migrationObjectState: upstream objects (conditions only, no phase) and ours', () => {
  const cond = (type: 'Running' | 'Succeeded' | 'Failed', status: 'True' | 'False' | 'Unknown') => ({ type, status });
  // kube-storage-version-migrator's finished objects: never run again.
  assert.equal(migrationObjectState({ conditions: [cond('Running', 'False'), cond('Succeeded', 'True')] }), 'finished');
  assert.equal(migrationObjectState({ conditions: [cond('Failed', 'True')] }), 'finished');
  // One it left running: taken over.
  assert.equal(migrationObjectState({ conditions: [cond('Running', 'True')] }), 'upstreamRunning');
  // Nothing said yet: new.
  assert.equal(migrationObjectState(undefined), 'new');
  assert.equal(migrationObjectState({}), 'new');
  assert.equal(migrationObjectState({ conditions: [cond('Running', 'Unknown')] }), 'new');
  // Ours: the phase decides, whatever the conditions say.
  for (const phase of ['Succeeded', 'Failed', 'Aborted'] as const)
    assert.equal(migrationObjectState({ phase, conditions: [cond('Running', 'True')] }), 'finished', phase);
  for (const phase of ['Pending', 'WaitingForAgreement', 'Running', 'Paused'] as const)
    assert.equal(migrationObjectState({ phase }), 'inProgress', phase);
});

void test('the CRD keeps spec.continueToken (upstream objects validate) and says it is refused', () => {
  const svm = migrationCrds().find((c) => c.spec.names.kind === 'StorageVersionMigration')!;
  const spec = (
    svm.spec.versions[0]!.schema.openAPIV3Schema.properties.spec as { properties: Record<string, { type: string; description: string }> }
  ).properties;
  assert.equal(spec.continueToken!.type, 'string');
  assert.match(spec.continueToken!.description, /refused \(phase Failed, reason ContinueTokenRefused\)/);
  assert.doesNotThrow(() =>
    StorageVersionMigration.parse({
      apiVersion: MIGRATION_API_VERSION,
      kind: 'StorageVersionMigration',
      metadata: { name: 'x' },
      spec: { resource: { resource: 'secrets' }, continueToken: 'abc' },
    }),
  );
});
