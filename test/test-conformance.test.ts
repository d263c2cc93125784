/**
 * On the built-in's own ground: the cases of Kubernetes' integration tests of
 * its storage version migrator (test/integration/storageversionmigrator of
 * k8s.io/kubernetes v1.37.2), written for this project, run against svm
 * (SVM_STANDARD_MIGRATIONS=own, the built-in off, the worker as the shipped
 * ServiceAccount with its rights and fence) and then, as the control, against
 * the built-in itself (kube-controller-manager with its migrator, svm off) on
 * the same plane. Both get storagemigration.k8s.io/v1 objects, as upgrade
 * tooling creates them, and `kubectl wait`-style conditions are awaited.
 *
 * - Secrets under an encryption-key rotation: judged by the key prefix of
 *   every Secret's value in etcd; a second migration changes no
 *   resourceVersion.
 * - Ten migrations of one resource created at once (more than the
 *   built-in's five workers) while objects are created and deleted: every one
 *   Succeeded, and no object already in the storage version was rewritten
 *   (its resourceVersion unchanged).
 * - The audit check, from the API servers' audit logs: every request of the
 *   migrator's identity on a migrated resource is a read or a re-encode
 *   answered 200 or 409 (404 for an object deleted meanwhile), about one
 *   write per object, and no write anywhere else but its own objects.
 *
 * A plane of this file's own: its API servers restart with an encryption
 * configuration and an audit policy, which the shared plane must not carry.
 * The side-by-side table is written to test-results/conformance.json and
 * printed; docs/standard-api.md quotes it.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { installCrds } from '../src/client/cli-migrate';
import { grantManifests } from '../src/client/grant';
import { readStoredObjects } from '../src/dev/etcd-truth';
import { down, restartApiserver, startControllerManager, stopControllerManager, up } from '../src/dev/plane';
import { findStandardMigration } from '../src/kube/standard-migrations';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  withWorkerAs,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';

const SVM_USER = 'system:serviceaccount:svm-system:svm-migrator';
/** The plane's kube-controller-manager runs as the plane's admin: its migrator is told apart by its User-Agent suffix. */
const BUILTIN_AGENT = '/storage-version-migrator-controller';
const isSvm = (e: AuditEvent) => e.user?.username === SVM_USER;
const isBuiltIn = (e: AuditEvent) => (e.userAgent ?? '').includes(BUILTIN_AGENT);
const SECRETS = 60;
const CHAOS_OBJECTS = 50;
const CONCURRENT = 10;
const quiet = () => undefined;

let dir: string;
let p: TestPlane;
let kubeconfig: string | undefined;
const keys = ['key1', 'key2', 'key3'].map((name, i) => ({ name, secret: Buffer.alloc(32, i + 1).toString('base64') }));

const encryptionFile = () => path.join(dir, 'encryption.yaml');
const auditPolicyFile = () => path.join(dir, 'audit-policy.yaml');
const auditLog = (i: number) => path.join(dir, `apiserver-${i}`, 'audit.log');

/** Secrets encrypted with aescbc, the first key writing, every key reading (how a rotation is done). */
function writeEncryption(order: string[]): void {
  const providers = [
    { aescbc: { keys: order.map((n) => ({ name: n, secret: keys.find((k) => k.name === n)!.secret })) } },
    { identity: {} },
  ];
  writeFileSync(
    encryptionFile(),
    YAML.stringify({
      apiVersion: 'apiserver.config.k8s.io/v1',
      kind: 'EncryptionConfiguration',
      resources: [{ resources: ['secrets'], providers }],
    }),
  );
}

/** Both API servers (one at a time, as a rolling restart) with the encryption configuration and the audit log. */
async function restartServers(): Promise<void> {
  for (const i of [0, 1])
    await restartApiserver(
      dir,
      i,
      [
        `--encryption-provider-config=${encryptionFile()}`,
        `--audit-policy-file=${auditPolicyFile()}`,
        `--audit-log-path=${auditLog(i)}`,
        '--audit-log-format=json',
      ],
      quiet,
    );
}

interface AuditEvent {
  stage?: string;
  verb?: string;
  requestURI?: string;
  user?: { username?: string };
  userAgent?: string;
  objectRef?: { resource?: string; apiGroup?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
}

/** The audit events of one migrator since the given byte offsets of each server's log. */
function auditOf(whose: (e: AuditEvent) => boolean, from: number[]): AuditEvent[] {
  const out: AuditEvent[] = [];
  for (const i of [0, 1]) {
    if (!existsSync(auditLog(i))) continue;
    const text = readFileSync(auditLog(i))
      .subarray(from[i] ?? 0)
      .toString('utf8');
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      const e = JSON.parse(line) as AuditEvent;
      if (e.stage === 'ResponseComplete' && whose(e)) out.push(e);
    }
  }
  return out;
}
const auditMark = (): number[] => [0, 1].map((i) => (existsSync(auditLog(i)) ? readFileSync(auditLog(i)).length : 0));

/** The audit check of one run on one resource: its requests on it, and its writes anywhere. */
function auditCheck(
  events: AuditEvent[],
  resource: { group: string; resource: string },
  ownWrites: (e: AuditEvent) => boolean,
): { requests: number; writes: number; codes: Record<string, number>; elsewhere: string[] } {
  const on = events.filter((e) => (e.objectRef?.apiGroup ?? '') === resource.group && e.objectRef?.resource === resource.resource);
  const codes: Record<string, number> = {};
  for (const e of on) codes[`${e.verb} ${e.responseStatus?.code}`] = (codes[`${e.verb} ${e.responseStatus?.code}`] ?? 0) + 1;
  const bad = on.filter((e) => {
    const code = e.responseStatus?.code ?? 0;
    if (e.objectRef?.subresource) return true;
    if (['get', 'list', 'watch'].includes(e.verb ?? '')) return code !== 200;
    if (e.verb === 'patch') return ![200, 409, 404].includes(code);
    return true; // no update, create, delete on a migrated resource
  });
  assert.deepEqual(
    bad.map((e) => `${e.verb} ${e.requestURI} ${e.responseStatus?.code}`),
    [],
    'every request on the migrated resource is a read or a re-encode answered 200, 409 or 404',
  );
  const writes = on.filter((e) => e.verb === 'patch').length;
  const elsewhere = events
    .filter((e) => !['get', 'list', 'watch'].includes(e.verb ?? '') && !on.includes(e) && !ownWrites(e))
    .map((e) => `${e.verb} ${e.requestURI} ${e.responseStatus?.code}`);
  return { requests: on.length, writes, codes, elsewhere };
}

/** svm's own objects: its migrations and StorageStates (and status), its Leases, CRD status (storedVersions), self reviews. */
const svmOwnWrite = (e: AuditEvent): boolean => {
  const r = e.objectRef ?? {};
  if (r.apiGroup === 'storagemigration.k8s.io' || r.apiGroup === 'migration.k8s.io') return true;
  if (r.apiGroup === 'coordination.k8s.io' && r.resource === 'leases' && r.namespace === 'svm-system') return true;
  if (r.apiGroup === 'apiextensions.k8s.io' && r.resource === 'customresourcedefinitions' && r.subresource === 'status') return true;
  if (r.apiGroup === 'authorization.k8s.io') return true; // SelfSubjectAccessReviews: asking, not writing
  return false;
};
/** The built-in's: its migrations and their status, the CRD status, its leader Lease, its Events. */
const builtInOwnWrite = (e: AuditEvent): boolean => {
  const r = e.objectRef ?? {};
  if (r.apiGroup === 'storagemigration.k8s.io') return true;
  if (r.apiGroup === 'apiextensions.k8s.io' && r.resource === 'customresourcedefinitions' && r.subresource === 'status') return true;
  if (r.apiGroup === 'coordination.k8s.io' && r.resource === 'leases') return true;
  if (r.resource === 'events' || r.resource === 'serviceaccounts' || r.resource === 'tokenreviews' || r.resource === 'subjectaccessreviews')
    return true;
  if (r.apiGroup === 'authorization.k8s.io' || r.apiGroup === 'authentication.k8s.io') return true;
  return false;
};

/**
 * Creates a storagemigration.k8s.io/v1 object per name at once, and waits until each has Succeeded or Failed;
 * seconds from the creation to the last one finished.
 */
async function migrate(
  names: string[],
  gr: { group: string; resource: string },
  timeoutMs = 300_000,
): Promise<{ outcomes: Record<string, string>; seconds: number }> {
  const started = Date.now();
  await Promise.all(
    names.map((name) =>
      p.kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
        body: JSON.stringify({
          apiVersion: 'storagemigration.k8s.io/v1',
          kind: 'StorageVersionMigration',
          metadata: { name },
          spec: { resource: gr },
        }),
      }),
    ),
  );
  const out: Record<string, string> = {};
  for (const name of names) {
    out[name] = await eventually(
      `StorageVersionMigration ${name} finished`,
      async () => {
        const o = await findStandardMigration(p.kube, name);
        const c = o?.status?.conditions?.find((x) => (x.type === 'Succeeded' || x.type === 'Failed') && x.status === 'True');
        return c && `${c.type}${c.type === 'Failed' ? `: ${c.message}` : ''}`;
      },
      timeoutMs,
    );
  }
  return { outcomes: out, seconds: (Date.now() - started) / 1000 };
}

async function secretKeys(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const o of await readStoredObjects(p.etcd, '/registry/secrets/')) {
    const k = /^k8s:enc:aescbc:v1:([^:]+):/.exec(o.raw)?.[1] ?? 'plain';
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

async function resourceVersions(path_: string): Promise<Map<string, string>> {
  const list = await p.kube.getJson<{ items: Array<{ metadata: { namespace?: string; name: string; resourceVersion: string } }> }>(path_);
  return new Map(list.items.map((i) => [`${i.metadata.namespace ?? ''}/${i.metadata.name}`, i.metadata.resourceVersion]));
}

/** Creates and deletes objects of crd in ns until stopped (the built-in's chaos). */
function chaos(crd: TestCrd, ns: string): { stop(): Promise<{ created: number; deleted: number }> } {
  let stopped = false;
  let created = 0;
  let deleted = 0;
  const base = `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}`;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const name = `chaos-${i}`;
      await p.kube.request('POST', base, {
        body: JSON.stringify({ apiVersion: `${crd.group}/v2`, kind: crd.kind, metadata: { name }, spec: { i } }),
      });
      created++;
      if (i % 2 === 1) {
        await p.kube.request('DELETE', `${base}/chaos-${i - 1}`);
        deleted++;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { created, deleted };
    },
  };
}

type Who = 'svm' | 'built-in';
const table: Array<{ case: string; svm?: string; 'built-in'?: string }> = [];
function row(c: string, who: Who, text: string) {
  let r = table.find((x) => x.case === c);
  if (!r) table.push((r = { case: c }));
  r[who] = text;
}
const resultsFile = path.join(process.env.SVM_RESULTS_DIR ?? path.join(process.cwd(), 'test-results'), 'conformance.json');

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'svm-conformance-'));
  await up({ dir, apiservers: 2, storageVersionApi: false, log: quiet });
  writeFileSync(
    auditPolicyFile(),
    YAML.stringify({
      apiVersion: 'audit.k8s.io/v1',
      kind: 'Policy',
      omitStages: ['RequestReceived'],
      rules: [{ level: 'None', users: ['system:apiserver'] }, { level: 'Metadata' }],
    }),
  );
  writeEncryption(['key1']);
  await restartServers();
  p = await testPlane({ dir });
  await installCrds(p.kube);
  await serverSideApply(p.kube, [
    ...readManifests('namespace.yaml'),
    ...readManifests('rbac.yaml'),
    ...readManifests('worker-policy.yaml'),
  ]);
  kubeconfig = writeTokenKubeconfig(
    p.kube.server,
    await serviceAccountToken(p.kube, 'svm-system', 'svm-migrator', 7200),
    'svm-migrator',
    dir,
  );
});
after(async () => {
  if (table.length) {
    mkdirSync(path.dirname(resultsFile), { recursive: true });
    writeFileSync(
      resultsFile,
      JSON.stringify({ kubernetes: p ? p.state.kubeVersion : undefined, at: new Date().toISOString(), table }, null, 2) + '\n',
    );
    console.log(`\n=== conformance: the built-in's cases, svm and the built-in side by side (${resultsFile}) ===`);
    for (const r of table) console.log(`- ${r.case}\n    svm:      ${r.svm ?? '(not run)'}\n    built-in: ${r['built-in'] ?? '(not run)'}`);
  }
  removeTokenKubeconfig(kubeconfig);
  await p?.close();
  if (dir) {
    await down(dir, quiet).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Runs fn with the migrator of `who` acting on standard objects: svm's worker (own mode), or the built-in. */
async function withMigrator<T>(who: Who, fn: () => Promise<T>): Promise<T> {
  if (who === 'built-in') {
    await startControllerManager(dir, { builtInMigrator: true }, quiet);
    try {
      return await fn();
    } finally {
      await stopControllerManager(dir);
    }
  }
  return withWorkerAs(p, kubeconfig!, () => fn(), { settings: { bridge: true, standardMigrations: 'own', maxConcurrentChunks: 4 } });
}

for (const who of ['svm', 'built-in'] as const) {
  void test(`${who}: Secrets under an encryption-key rotation end under the new key in etcd; a second migration changes no resourceVersion; the audit log shows only reads and re-encodes`, async () => {
    const whose = who === 'svm' ? isSvm : isBuiltIn;
    const ns = uniq('enc');
    await p.kube.request('POST', '/api/v1/namespaces', { body: JSON.stringify({ metadata: { name: ns } }) });
    for (let i = 0; i < SECRETS; i++)
      await p.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: JSON.stringify({ metadata: { name: `s-${i}` }, stringData: { value: `secret-${i}` } }),
      });
    // Rotate: the next key writes, the older ones still read.
    const next = who === 'svm' ? 'key2' : 'key3';
    writeEncryption(who === 'svm' ? ['key2', 'key1'] : ['key3', 'key2', 'key1']);
    await restartServers();
    const before = await secretKeys();
    assert.ok(
      Object.keys(before).some((k) => k !== next),
      `some Secrets are under an older key before: ${JSON.stringify(before)}`,
    );
    const total = Object.values(before).reduce((a, b) => a + b, 0);
    const mark = auditMark();
    await withMigrator(who, async () => {
      const first = await migrate([uniq(`${who === 'svm' ? 'svm' : 'bi'}-secrets`)], { group: '', resource: 'secrets' });
      assert.deepEqual(Object.values(first.outcomes), ['Succeeded'], JSON.stringify(first));
      const seconds = first.seconds;
      const after1 = await secretKeys();
      assert.deepEqual(after1, { [next]: total }, `every Secret's value in etcd is under ${next}`);
      const rvs = await resourceVersions('/api/v1/secrets');
      const second = await migrate([uniq(`${who === 'svm' ? 'svm' : 'bi'}-secrets-again`)], { group: '', resource: 'secrets' });
      assert.deepEqual(Object.values(second.outcomes), ['Succeeded'], JSON.stringify(second));
      const rvs2 = await resourceVersions('/api/v1/secrets');
      const moved = [...rvs].filter(([k, v]) => rvs2.has(k) && rvs2.get(k) !== v).map(([k]) => k);
      assert.deepEqual(moved, [], 'the second migration changed no resourceVersion');
      // The audit log is written as requests complete: give the last ones a moment.
      await new Promise((r) => setTimeout(r, 2000));
      const a = auditCheck(auditOf(whose, mark), { group: '', resource: 'secrets' }, who === 'svm' ? svmOwnWrite : builtInOwnWrite);
      assert.deepEqual(a.elsewhere, [], `${who} writes nothing but the Secrets and its own objects`);
      // About one write per object over both passes (the second re-encodes too: nothing changes in etcd).
      assert.ok(a.writes >= total && a.writes <= 2 * total * 1.1, `${a.writes} re-encodes for ${total} Secrets over two passes`);
      row(
        'Secrets after an encryption-key rotation, then a second migration',
        who,
        `${total} Secrets (${SECRETS} created for the case); first migration ${seconds.toFixed(1)} s from creation to Succeeded; etcd ${JSON.stringify(after1)}; second pass: 0 resourceVersions changed; audit: ${a.requests} requests on secrets ${JSON.stringify(a.codes)}, writes elsewhere ${a.elsewhere.length}`,
      );
    });
  });

  void test(`${who}: ${CONCURRENT} migrations of one resource created at once while objects come and go: every one Succeeded, no object already in the storage version rewritten`, async () => {
    const crd = testCrd(`${uniq(who === 'svm' ? 'chs' : 'chb')}.svm.test`);
    await applyCrd(p.kube, crd, 'v2');
    const ns = uniq('chaos');
    await createObjects(p.kube, crd, 'v2', CHAOS_OBJECTS, { namespace: ns });
    if (who === 'svm') {
      // A custom resource is outside the worker's default rights: the grant `svm grant` prints.
      await serverSideApply(
        p.kube,
        YAML.parseAllDocuments(grantManifests({ group: crd.group, resource: crd.plural, custom: true })).map((d) => d.toJS() as Manifest),
      );
    }
    const collection = `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}`;
    const rvs = await resourceVersions(collection);
    const whose = who === 'svm' ? isSvm : isBuiltIn;
    const mark = auditMark();
    await withMigrator(who, async () => {
      const c = chaos(crd, ns);
      let outcomes: Record<string, string>;
      let seconds: number;
      let churn = { created: 0, deleted: 0 };
      try {
        ({ outcomes, seconds } = await migrate(
          Array.from({ length: CONCURRENT }, (_, i) => uniq(`${who === 'svm' ? 'svm' : 'bi'}-chaos-${i}`)),
          { group: crd.group, resource: crd.plural },
        ));
      } finally {
        churn = await c.stop();
      }
      const failed = Object.entries(outcomes).filter(([, o]) => o !== 'Succeeded');
      assert.deepEqual(failed, [], `every one of the ${CONCURRENT} migrations Succeeded`);
      const now = await resourceVersions(collection);
      const rewritten = [...rvs].filter(([k, v]) => now.has(k) && now.get(k) !== v).map(([k]) => k);
      assert.deepEqual(rewritten, [], 'no object already in the storage version was rewritten');
      await new Promise((r) => setTimeout(r, 2000));
      const a = auditCheck(auditOf(whose, mark), { group: crd.group, resource: crd.plural }, who === 'svm' ? svmOwnWrite : builtInOwnWrite);
      assert.deepEqual(a.elsewhere, [], `${who} writes nothing but the resource and its own objects`);
      row(
        `${CONCURRENT} migrations of one custom resource created at once, ${CHAOS_OBJECTS} objects already in the storage version, objects created and deleted meanwhile`,
        who,
        `${CONCURRENT}/${CONCURRENT} Succeeded in ${seconds.toFixed(1)} s (${churn.created} created, ${churn.deleted} deleted meanwhile); 0 objects rewritten; audit: ${a.requests} requests on the resource ${JSON.stringify(a.codes)}, writes elsewhere ${a.elsewhere.length}`,
      );
    });
  });
}
