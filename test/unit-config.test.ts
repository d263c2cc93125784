/**
 * Unit tests of src/worker/config.ts: worker and Temporal settings from the
 * environment and flags, and the errors that name the bad variable. Pure:
 * the environment is passed in, process.env is not touched.
 */
import { VersioningSettings } from '../src/worker/versioning';
import test from 'node:test';
import assert from 'node:assert/strict';
import * as vm from 'node:vm';
import { limitHeapGrowth } from '../src/worker/worker';
import {
  defaultIdentity,
  defaultNamespace,
  IN_CLUSTER_NAMESPACE_FILE,
  loadTemporalSettings,
  loadWorkerSettings,
  SettingsError,
  settingSources,
  TemporalSettings,
  WorkerSettings,
} from '../src/worker/config';

/** Asserts that fn throws a SettingsError whose message names every given text. */
function throwsSettings(fn: () => unknown, ...mentions: Array<string | RegExp>): string {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof SettingsError, `expected a SettingsError, got ${String(caught)}`);
  assert.ok(caught instanceof Error);
  for (const m of mentions) {
    if (typeof m === 'string') assert.ok(caught.message.includes(m), `message ${JSON.stringify(caught.message)} names ${m}`);
    else assert.match(caught.message, m);
  }
  return caught.message;
}

// --- defaults ---------------------------------------------------------------------------

void test('loadWorkerSettings: defaults with an empty environment', () => {
  const s = loadWorkerSettings({});
  assert.equal(s.temporal.address, undefined);
  assert.equal(s.temporal.namespace, 'default');
  assert.equal(s.temporal.taskQueue, 'storage-version-migrator');
  assert.equal(s.temporal.apiKey, undefined);
  assert.equal(s.temporal.tls, undefined); // unset: TLS when a TLS setting or an API key is given
  assert.equal(s.kubeconfig, undefined);
  assert.equal(s.qps, 'auto');
  assert.equal(s.maxConcurrentChunks, 4);
  assert.equal(s.maxCachedWorkflows, 100);
  assert.equal(s.maxConcurrentWorkflowTasks, 4);
  assert.equal(s.semiSpaceMiB, 2);
  assert.equal(s.heapGrowingPercent, 10);
  assert.equal(s.v8OptimizeForSize, true);
  assert.equal(s.bridge, true);
  assert.equal(s.metricsPort, undefined);
});

void test('loadWorkerSettings: the workflow cache, workflow task slots and young generation', () => {
  const s = loadWorkerSettings({ SVM_MAX_CACHED_WORKFLOWS: '0', SVM_MAX_CONCURRENT_WORKFLOW_TASKS: '2' });
  assert.equal(s.maxCachedWorkflows, 0);
  assert.equal(s.maxConcurrentWorkflowTasks, 2);
  assert.throws(() => loadWorkerSettings({ SVM_MAX_CONCURRENT_WORKFLOW_TASKS: '1' }), /SVM_MAX_CONCURRENT_WORKFLOW_TASKS/);
  assert.throws(() => loadWorkerSettings({ SVM_MAX_CACHED_WORKFLOWS: '-1' }), /SVM_MAX_CACHED_WORKFLOWS/);
  assert.equal(loadWorkerSettings({ SVM_SEMI_SPACE_MIB: '0' }).semiSpaceMiB, 0);
  assert.equal(loadWorkerSettings({ SVM_SEMI_SPACE_MIB: '16' }).semiSpaceMiB, 16);
  assert.throws(() => loadWorkerSettings({ SVM_SEMI_SPACE_MIB: '1.5' }), /SVM_SEMI_SPACE_MIB/);
  assert.equal(loadWorkerSettings({ SVM_HEAP_GROWING_PERCENT: '0' }).heapGrowingPercent, 0);
  assert.equal(loadWorkerSettings({ SVM_HEAP_GROWING_PERCENT: '50' }).heapGrowingPercent, 50);
  assert.throws(() => loadWorkerSettings({ SVM_HEAP_GROWING_PERCENT: '-5' }), /SVM_HEAP_GROWING_PERCENT/);
  assert.throws(() => loadWorkerSettings({ SVM_HEAP_GROWING_PERCENT: 'lots' }), /SVM_HEAP_GROWING_PERCENT/);
  assert.equal(loadWorkerSettings({ SVM_V8_OPTIMIZE_FOR_SIZE: 'false' }).v8OptimizeForSize, false);
  assert.throws(() => loadWorkerSettings({ SVM_V8_OPTIMIZE_FOR_SIZE: 'smaller' }), /SVM_V8_OPTIMIZE_FOR_SIZE/);
});

void test('loadWorkerSettings: empty-string variables count as unset (defaults apply)', () => {
  const s = loadWorkerSettings({
    TEMPORAL_ADDRESS: '',
    TEMPORAL_NAMESPACE: '',
    TEMPORAL_TASK_QUEUE: '',
    TEMPORAL_API_KEY: '',
    TEMPORAL_TLS: '',
    KUBECONFIG: '',
    SVM_QPS: '',
    SVM_MAX_CONCURRENT_CHUNKS: '',
    SVM_BRIDGE: '',
    SVM_METRICS_PORT: '',
  });
  assert.equal(s.temporal.address, undefined);
  assert.equal(s.temporal.namespace, 'default');
  assert.equal(s.temporal.taskQueue, 'storage-version-migrator');
  assert.equal(s.temporal.apiKey, undefined);
  assert.equal(s.temporal.tls, undefined); // unset: TLS when a TLS setting or an API key is given
  assert.equal(s.kubeconfig, undefined);
  assert.equal(s.qps, 'auto');
  assert.equal(s.maxConcurrentChunks, 4);
  assert.equal(s.bridge, true);
  assert.equal(s.metricsPort, undefined);
});

void test('loadWorkerSettings: unrelated variables are ignored', () => {
  const s = loadWorkerSettings({ PATH: '/usr/bin', HOME: '/root', QPS: 'abc', SVM_UNKNOWN: 'x' });
  assert.equal(s.qps, 'auto');
});

void test('loadTemporalSettings: defaults with an empty environment', () => {
  const t = loadTemporalSettings({});
  assert.equal(t.address, undefined);
  assert.equal(t.namespace, 'default');
  assert.equal(t.taskQueue, 'storage-version-migrator');
  assert.equal(t.apiKey, undefined);
  assert.equal(t.tls, undefined);
});

// --- environment values --------------------------------------------------------------------

void test('loadWorkerSettings: every environment variable is parsed', () => {
  const s = loadWorkerSettings({
    TEMPORAL_ADDRESS: 'temporal.example.com:7233',
    TEMPORAL_NAMESPACE: 'prod',
    TEMPORAL_TASK_QUEUE: 'svm-q',
    TEMPORAL_API_KEY: 'secret-key',
    TEMPORAL_TLS: 'true',
    KUBECONFIG: '/etc/kube/config',
    SVM_QPS: '250',
    SVM_MAX_CONCURRENT_CHUNKS: '16',
    SVM_BRIDGE: 'false',
    SVM_METRICS_PORT: '9464',
  });
  assert.deepEqual(s.temporal, {
    address: 'temporal.example.com:7233',
    namespace: 'prod',
    taskQueue: 'svm-q',
    cluster: undefined,
    apiKey: 'secret-key',
    tls: true,
    tlsCert: undefined,
    tlsKey: undefined,
    tlsCertData: undefined,
    tlsKeyData: undefined,
    tlsCa: undefined,
    tlsCaData: undefined,
    tlsServerName: undefined,
    grpcMeta: undefined,
  });
  assert.equal(s.kubeconfig, '/etc/kube/config');
  assert.equal(s.qps, 250);
  assert.equal(typeof s.qps, 'number');
  assert.equal(s.maxConcurrentChunks, 16);
  assert.equal(s.bridge, false);
  assert.equal(s.metricsPort, 9464);
});

void test('loadWorkerSettings: boolean spellings true/false, 1/0, yes/no', () => {
  const cases: Array<[string, boolean]> = [
    ['true', true],
    ['1', true],
    ['yes', true],
    ['false', false],
    ['0', false],
    ['no', false],
  ];
  for (const [text, value] of cases) {
    assert.equal(loadWorkerSettings({ TEMPORAL_TLS: text }).temporal.tls, value, `TEMPORAL_TLS=${text}`);
    assert.equal(loadWorkerSettings({ SVM_BRIDGE: text }).bridge, value, `SVM_BRIDGE=${text}`);
    assert.equal(loadTemporalSettings({ TEMPORAL_TLS: text }).tls, value, `loadTemporalSettings TEMPORAL_TLS=${text}`);
  }
});

void test('loadWorkerSettings: range bounds are inclusive', () => {
  assert.equal(loadWorkerSettings({ SVM_QPS: '0' }).qps, 0);
  assert.equal(loadWorkerSettings({ SVM_QPS: 'auto' }).qps, 'auto');
  assert.equal(loadWorkerSettings({ SVM_QPS: ' Auto ' }).qps, 'auto');
  assert.equal(loadWorkerSettings({}, { qps: 'auto' }).qps, 'auto', 'svm worker --qps auto');
  assert.equal(loadWorkerSettings({ SVM_QPS: '50' }, { qps: 'auto' }).qps, 'auto', 'the flag wins');
  assert.equal(loadWorkerSettings({ SVM_QPS: '100000' }).qps, 100_000);
  assert.equal(loadWorkerSettings({ SVM_MAX_CONCURRENT_CHUNKS: '1' }).maxConcurrentChunks, 1);
  assert.equal(loadWorkerSettings({ SVM_MAX_CONCURRENT_CHUNKS: '64' }).maxConcurrentChunks, 64);
  assert.equal(loadWorkerSettings({ SVM_METRICS_PORT: '0' }).metricsPort, 0);
  assert.equal(loadWorkerSettings({ SVM_METRICS_PORT: '65535' }).metricsPort, 65535);
});

void test('loadTemporalSettings: reads the TEMPORAL_* variables only', () => {
  const t = loadTemporalSettings({
    TEMPORAL_ADDRESS: 'localhost:7233',
    TEMPORAL_NAMESPACE: 'ns1',
    TEMPORAL_TASK_QUEUE: 'q1',
    TEMPORAL_API_KEY: 'k',
    TEMPORAL_TLS: 'yes',
    SVM_QPS: 'abc', // not a Temporal setting: ignored here
  });
  assert.deepEqual(t, {
    address: 'localhost:7233',
    namespace: 'ns1',
    taskQueue: 'q1',
    cluster: undefined,
    apiKey: 'k',
    tls: true,
    tlsCert: undefined,
    tlsKey: undefined,
    tlsCertData: undefined,
    tlsKeyData: undefined,
    tlsCa: undefined,
    tlsCaData: undefined,
    tlsServerName: undefined,
    grpcMeta: undefined,
  });
});

// --- flags override the environment ----------------------------------------------------------

void test('loadWorkerSettings: flags override environment values', () => {
  const env = {
    TEMPORAL_ADDRESS: 'env-host:7233',
    TEMPORAL_NAMESPACE: 'env-ns',
    TEMPORAL_TASK_QUEUE: 'env-q',
    TEMPORAL_API_KEY: 'env-key',
    TEMPORAL_TLS: 'false',
    KUBECONFIG: '/env/kubeconfig',
    SVM_QPS: '50',
    SVM_MAX_CONCURRENT_CHUNKS: '2',
    SVM_BRIDGE: 'true',
    SVM_METRICS_PORT: '9000',
  };
  const s = loadWorkerSettings(env, {
    address: 'flag-host:7234',
    namespace: 'flag-ns',
    taskQueue: 'flag-q',
    cluster: undefined,
    apiKey: 'flag-key',
    tls: true,
    kubeconfig: '/flag/kubeconfig',
    qps: 5,
    maxConcurrentChunks: 8,
    bridge: false,
    metricsPort: 9100,
  });
  assert.deepEqual(s.temporal, {
    address: 'flag-host:7234',
    namespace: 'flag-ns',
    taskQueue: 'flag-q',
    cluster: undefined,
    apiKey: 'flag-key',
    tls: true,
    tlsCert: undefined,
    tlsKey: undefined,
    tlsCertData: undefined,
    tlsKeyData: undefined,
    tlsCa: undefined,
    tlsCaData: undefined,
    tlsServerName: undefined,
    grpcMeta: undefined,
  });
  assert.equal(s.kubeconfig, '/flag/kubeconfig');
  assert.equal(s.qps, 5);
  assert.equal(s.maxConcurrentChunks, 8);
  assert.equal(s.bridge, false);
  assert.equal(s.metricsPort, 9100);
});

void test('loadWorkerSettings: string flags (as the CLI passes them) are coerced like the environment', () => {
  const s = loadWorkerSettings({ SVM_QPS: '50' }, { qps: '7', maxConcurrentChunks: '3', tls: 'yes' });
  assert.equal(s.qps, 7);
  assert.equal(s.maxConcurrentChunks, 3);
  assert.equal(s.temporal.tls, true);
});

void test('loadWorkerSettings: an undefined flag leaves the environment value in place', () => {
  const s = loadWorkerSettings(
    { SVM_QPS: '50', SVM_BRIDGE: 'false', KUBECONFIG: '/k' },
    { qps: undefined, bridge: undefined, kubeconfig: undefined },
  );
  assert.equal(s.qps, 50);
  assert.equal(s.bridge, false);
  assert.equal(s.kubeconfig, '/k');
});

void test('loadWorkerSettings: a flag of 0 / false overrides a non-zero / true environment value', () => {
  const s = loadWorkerSettings({ SVM_QPS: '50', TEMPORAL_TLS: 'true', SVM_BRIDGE: 'true' }, { qps: 0, tls: false, bridge: false });
  assert.equal(s.qps, 0);
  assert.equal(s.temporal.tls, false);
  assert.equal(s.bridge, false);
});

void test('loadWorkerSettings: a bad flag value is refused even when the environment is good', () => {
  throwsSettings(() => loadWorkerSettings({ SVM_QPS: '50' }, { qps: -3 }), 'SVM_QPS');
  throwsSettings(() => loadWorkerSettings({}, { maxConcurrentChunks: '65' }), 'SVM_MAX_CONCURRENT_CHUNKS', /at most 64/);
  throwsSettings(() => loadWorkerSettings({}, { address: 'no-port' }), 'TEMPORAL_ADDRESS');
});

// --- bad values ---------------------------------------------------------------------------------

void test('SettingsError: SVM_QPS=abc names SVM_QPS', () => {
  const msg = throwsSettings(() => loadWorkerSettings({ SVM_QPS: 'abc' }), 'SVM_QPS', /number/);
  assert.doesNotMatch(msg, /SVM_MAX_CONCURRENT_CHUNKS|TEMPORAL_/);
});

void test('SettingsError: SVM_QPS=-1 names SVM_QPS and the minimum', () => {
  throwsSettings(() => loadWorkerSettings({ SVM_QPS: '-1' }), 'SVM_QPS', /at least 0/);
});

void test('SettingsError: SVM_QPS above the maximum, and a fraction', () => {
  throwsSettings(() => loadWorkerSettings({ SVM_QPS: '100001' }), 'SVM_QPS', /at most 100000/);
  throwsSettings(() => loadWorkerSettings({ SVM_QPS: '1.5' }), 'SVM_QPS', /whole number/);
});

void test('SettingsError: SVM_MAX_CONCURRENT_CHUNKS=0 names SVM_MAX_CONCURRENT_CHUNKS', () => {
  throwsSettings(() => loadWorkerSettings({ SVM_MAX_CONCURRENT_CHUNKS: '0' }), 'SVM_MAX_CONCURRENT_CHUNKS', /at least 1/);
  throwsSettings(() => loadWorkerSettings({ SVM_MAX_CONCURRENT_CHUNKS: 'many' }), 'SVM_MAX_CONCURRENT_CHUNKS');
});

void test('SettingsError: TEMPORAL_ADDRESS=nohostport names TEMPORAL_ADDRESS (worker settings)', () => {
  throwsSettings(() => loadWorkerSettings({ TEMPORAL_ADDRESS: 'nohostport' }), 'TEMPORAL_ADDRESS', /host:port/);
  throwsSettings(() => loadWorkerSettings({ TEMPORAL_ADDRESS: 'host:port' }), 'TEMPORAL_ADDRESS');
  throwsSettings(() => loadWorkerSettings({ TEMPORAL_ADDRESS: 'host name:7233' }), 'TEMPORAL_ADDRESS');
});

void test('SettingsError: TEMPORAL_TLS=maybe names TEMPORAL_TLS (worker settings), SVM_BRIDGE=maybe names SVM_BRIDGE', () => {
  throwsSettings(() => loadWorkerSettings({ TEMPORAL_TLS: 'maybe' }), 'TEMPORAL_TLS');
  throwsSettings(() => loadWorkerSettings({ SVM_BRIDGE: 'maybe' }), 'SVM_BRIDGE');
});

void test('loadTemporalSettings: bad values are refused with a SettingsError', () => {
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_ADDRESS: 'nohostport' }), /host:port/);
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_TLS: 'maybe' }));
});

void test('loadTemporalSettings: the SettingsError names the environment variable (TEMPORAL_ADDRESS, TEMPORAL_TLS)', () => {
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_ADDRESS: 'nohostport' }), 'TEMPORAL_ADDRESS');
  throwsSettings(() => loadTemporalSettings({ TEMPORAL_TLS: 'maybe' }), 'TEMPORAL_TLS');
});

void test('SettingsError: SVM_METRICS_PORT out of range names SVM_METRICS_PORT', () => {
  throwsSettings(() => loadWorkerSettings({ SVM_METRICS_PORT: '70000' }), 'SVM_METRICS_PORT', /at most 65535/);
  throwsSettings(() => loadWorkerSettings({ SVM_METRICS_PORT: '-1' }), 'SVM_METRICS_PORT');
});

void test('SettingsError: several bad values are all named in one message', () => {
  const msg = throwsSettings(
    () => loadWorkerSettings({ SVM_QPS: 'abc', SVM_MAX_CONCURRENT_CHUNKS: '0', TEMPORAL_TLS: 'maybe' }),
    'SVM_QPS',
    'SVM_MAX_CONCURRENT_CHUNKS',
    'TEMPORAL_TLS',
  );
  assert.match(msg, /^invalid setting: /);
});

void test('SettingsError: a blank (whitespace-only) SVM_QPS is refused, not read as 0 (which means unlimited)', () => {
  // Number('  ') === 0, and qps 0 disables the shared rate limit entirely.
  throwsSettings(() => loadWorkerSettings({ SVM_QPS: '  ' }), 'SVM_QPS');
  throwsSettings(() => loadWorkerSettings({}, { qps: '' }), 'SVM_QPS');
});

void test('settingSources: every setting of the schema has its environment variable', () => {
  const keys = [
    ...Object.keys(WorkerSettings.shape).filter((k) => k !== 'temporal' && k !== 'versioning'),
    ...Object.keys(TemporalSettings.shape).map((k) => `temporal.${k}`),
    ...Object.keys(VersioningSettings.shape).map((k) => `versioning.${k}`),
  ].sort();
  assert.deepEqual(Object.keys(settingSources).sort(), keys);
  for (const v of Object.values(settingSources)) assert.match(v, /^(TEMPORAL_|SVM_|KUBECONFIG$)/);
  assert.equal(settingSources['temporal.address'], 'TEMPORAL_ADDRESS');
  assert.equal(settingSources.qps, 'SVM_QPS');
});

void test('no per-server kubeconfigs: the worker finds every API server through KUBECONFIG (SVM_APISERVER_KUBECONFIGS is gone)', () => {
  assert.ok(!Object.values(settingSources).includes('SVM_APISERVER_KUBECONFIGS'));
  const s = loadWorkerSettings({ TEMPORAL_ADDRESS: 'localhost:7233', KUBECONFIG: '/k', SVM_APISERVER_KUBECONFIGS: '/a,/b' });
  assert.ok(!('apiserverKubeconfigs' in s), JSON.stringify(s));
  assert.equal(s.kubeconfig, '/k');
});

// --- leases: namespace and identity (leader election, budget membership) ----------------

void test('SVM_NAMESPACE: where the worker keeps its leases; a namespace name or refused', () => {
  assert.equal(loadWorkerSettings({ SVM_NAMESPACE: 'svm-prod' }).kubeNamespace, 'svm-prod');
  for (const bad of ['Svm', 'svm_system', '-svm', 'a'.repeat(64), 'svm.system'])
    throwsSettings(() => loadWorkerSettings({ SVM_NAMESPACE: bad }), 'SVM_NAMESPACE');
});

void test("SVM_NAMESPACE unset: the Pod's own namespace in a cluster, else svm-system", () => {
  assert.equal(
    defaultNamespace((p) => (p === IN_CLUSTER_NAMESPACE_FILE ? 'migrators\n' : '')),
    'migrators',
  );
  assert.equal(
    defaultNamespace(() => {
      throw new Error('ENOENT');
    }),
    'svm-system',
  );
  assert.equal(
    defaultNamespace(() => '  '),
    'svm-system',
  );
  // The temporal namespace flag does not touch it (both are "namespace" somewhere).
  const s = loadWorkerSettings({ SVM_NAMESPACE: 'svm-a' }, { namespace: 'temporal-ns' });
  assert.equal(s.kubeNamespace, 'svm-a');
  assert.equal(s.temporal.namespace, 'temporal-ns');
});

void test('SVM_IDENTITY: this replica in the leases; default hostname (the pod name) and pid', () => {
  assert.equal(loadWorkerSettings({ SVM_IDENTITY: 'svm-worker-abc-1' }).identity, 'svm-worker-abc-1');
  assert.equal(loadWorkerSettings({}).identity, defaultIdentity());
  assert.equal(defaultIdentity('svm-worker-5d8c-x2x', 1), 'svm-worker-5d8c-x2x-1');
  assert.equal(defaultIdentity('my host/name', 42), 'my-host-name-42');
  assert.equal(defaultIdentity('', 7), 'svm-7');
  for (const bad of ['has space', '-lead', 'x'.repeat(129)])
    throwsSettings(() => loadWorkerSettings({ SVM_IDENTITY: bad }), 'SVM_IDENTITY');
});

void test('SettingsError: SVM_QPS=auto (the default) needs adaptive concurrency, and says what to set instead', () => {
  const msg = throwsSettings(() => loadWorkerSettings({ SVM_ADAPTIVE_CONCURRENCY: 'false' }), 'SVM_QPS');
  assert.match(msg, /SVM_ADAPTIVE_CONCURRENCY=false/);
  assert.match(msg, /0 for none/);
  const fixed = loadWorkerSettings({ SVM_ADAPTIVE_CONCURRENCY: 'false', SVM_QPS: '0' });
  assert.equal(fixed.qps, 0);
  assert.equal(fixed.adaptiveConcurrency, false);
});

void test('limitHeapGrowth: its one full collection leaves no gc() to contexts made after it (the workflow sandbox)', () => {
  limitHeapGrowth(0);
  assert.equal(vm.runInNewContext('typeof gc'), 'undefined');
  limitHeapGrowth(20);
  assert.equal(vm.runInNewContext('typeof gc'), 'undefined');
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined');
});
