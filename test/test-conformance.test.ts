/**
 * On the built-in's own ground: the cases of Kubernetes' integration tests of
 * its storage version migrator (test/integration/storageversionmigrator of
 * k8s.io/kubernetes v1.37.2), written for this project, run against svm
 * (SVM_STANDARD_MIGRATIONS=own, the built-in off, the worker as the shipped
 * ServiceAccount with its rights and fence), and svm's verdicts held to those
 * of the built-in itself (kube-controller-manager with its migrator, svm off),
 * recorded on the same release in test/fixtures/built-in-reference.json
 * (test/helpers/built-in-reference.ts): with SVM_RECORD_BUILT_IN=1 (`npm run
 * reference:built-in`) this file runs the built-in's half alone, as its live
 * control did, and rewrites the reference; a reference of another release
 * fails the file with that command. Both get storagemigration.k8s.io/v1
 * objects, as upgrade tooling creates them, and `kubectl wait`-style
 * conditions are awaited.
 *
 * - Secrets under an encryption-key rotation: judged by the key prefix of
 *   every Secret's value in etcd; a second migration changes no
 *   resourceVersion.
 * - Ten migrations of one resource created at once (more than the
 *   built-in's five workers) while objects are created and deleted: every one
 *   Succeeded, and no object already in the storage version was rewritten
 *   (its resourceVersion unchanged).
 * - A CRD moved v1 -> v2 through a conversion webhook while objects are
 *   created and deleted; then v1 unserved and the webhook stopped: every
 *   object still readable (all in v2 in etcd), storedVersions [v2], the
 *   objects written in v1 rewritten and those already in v2 not.
 * - One the built-in is known to fail (kubernetes/kubernetes#127105): a CRD
 *   whose conversion webhook is down keeps the garbage collector's cache of
 *   it from syncing, on which the built-in waits. A healthy resource is
 *   migrated beside it; the broken one is named. svm is held to: the healthy
 *   one Succeeded, the broken one Failed, its status naming the webhook. Both
 *   are held to what held in every run of the built-in (its outcome differs
 *   from run to run, docs/standard-api.md): the broken one does not end
 *   Succeeded, none of its objects is rewritten (etcd: each key's modRevision
 *   and version unchanged), v1 stays in its storedVersions, and a healthy one
 *   that Succeeded holds v2 in etcd.
 * - The audit check, from the API servers' audit logs: every request of the
 *   migrator's identity on a migrated resource is a read or a re-encode
 *   answered 200 or 409 (404 for an object deleted meanwhile), about one
 *   write per object, and no write anywhere else but its own objects. svm's
 *   own requests are audited with their bodies and replies (RequestResponse):
 *   every list and every patch of svm's is answered with metadata only, and
 *   each patch carries nothing but the listed resourceVersion; by the PUT path
 *   (the one that reads content, forced here with SVM_REWRITE_METHOD=put) its
 *   lists are answered whole and its PUTs with metadata only. Note: an audit
 *   event holds no request headers, so the Accept svm sent shows as what the
 *   API server answered (it logs the reply as converted for the client).
 *   Each check first waits (bounded) until both servers' audit logs hold a
 *   request made after the migration (auditCaughtUp), and a missing log fails.
 *
 * A plane of this file's own: its API servers restart with an encryption
 * configuration and an audit policy, which the shared plane must not carry.
 * The side-by-side table is written to test-results/conformance.json and
 * printed; docs/standard-api.md quotes it.
 */
import assert from 'node:assert/strict';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { installCrds } from '../src/client/cli-migrate';
import { grantManifests } from '../src/client/grant';
import { etcdPrefix, readStoredObjects } from '../src/dev/etcd-truth';
import { kubernetesEndpoints } from '../src/kube/apiservers';
import { PROBE_LABEL } from '../src/kube/fence-probe';
import { getCrd } from '../src/kube/crds';
import { startConversionWebhook, webhookHost } from './helpers/webhook';
import { compareOutcomes, deleteBuiltInObjects, parityOutcomes } from './helpers/parity';
import { builtInReference, recordedNote, recordReference, recording, type ConformanceReference } from './helpers/built-in-reference';
import { restartApiserver, startControllerManager, stopControllerManager, up } from '../src/dev/plane';
import { findStandardMigration } from '../src/kube/standard-migrations';
import { kubeVersions } from '../src/dev/tools';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { removePlanes, testPlane, uniq, type TestPlane } from './helpers/plane';
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
const PUT_OBJECTS = 20;
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
  /** Only at RequestResponse (svm's own requests): a patch's body as sent. */
  requestObject?: Record<string, unknown>;
  /** Only at RequestResponse: the reply as the client got it (PartialObjectMetadata where metadata only was asked for). */
  responseObject?: { kind?: string };
}

/** Server i's audit log from a byte offset on; the log is required (both servers write one since restartServers). */
function auditText(i: number, from: number): string {
  assert.ok(existsSync(auditLog(i)), `API server ${i} writes its audit log ${auditLog(i)}`);
  const fd = openSync(auditLog(i), 'r');
  try {
    const size = statSync(auditLog(i)).size;
    const buf = Buffer.alloc(Math.max(0, size - from));
    readSync(fd, buf, 0, buf.length, from);
    return buf.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * Waits (bounded) until each API server's audit log holds a request made now, through that server: an API server
 * writes a request's ResponseComplete event after its reply, so a log read right after the migration may lack the
 * last requests (this file slept 2 s for them, and skipped a log that was missing). After the marker, every request
 * the migrator made before it is in the log.
 */
async function auditCaughtUp(from: number[]): Promise<void> {
  const marker = uniq('audit-marker');
  for (const i of [0, 1]) await p.kubeOf(i).raw('GET', `/api/v1/namespaces/${marker}`);
  await eventually(
    `both API servers' audit logs holding the marker request ${marker}`,
    async () => [0, 1].every((i) => existsSync(auditLog(i)) && auditText(i, from[i] ?? 0).includes(marker)),
    30_000,
    async () =>
      [0, 1].map((i) => `${auditLog(i)}: ${existsSync(auditLog(i)) ? `${statSync(auditLog(i)).size} bytes` : 'missing'}`).join(', '),
  );
}

/** The audit events of one migrator since the given byte offsets of each server's log. */
function auditOf(whose: (e: AuditEvent) => boolean, from: number[]): AuditEvent[] {
  const out: AuditEvent[] = [];
  for (const i of [0, 1]) {
    const text = auditText(i, from[i] ?? 0);
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      const e = JSON.parse(line) as AuditEvent;
      if (e.stage === 'ResponseComplete' && whose(e)) out.push(e);
    }
  }
  return out;
}
const auditMark = (): number[] => [0, 1].map((i) => (existsSync(auditLog(i)) ? statSync(auditLog(i)).size : 0));

/** The events of requests on one resource. */
const onResource = (events: AuditEvent[], resource: { group: string; resource: string }): AuditEvent[] =>
  events.filter((e) => (e.objectRef?.apiGroup ?? '') === resource.group && e.objectRef?.resource === resource.resource);

/**
 * The shipped worker's probe of svm's fence before each chunk (SVM_REQUIRE_FENCE, src/kube/fence-probe.ts): a dry-run
 * change of one object's labels, which stores nothing and which the fence refuses.
 */
const isFenceProbe = (e: AuditEvent): boolean =>
  e.verb === 'patch' && (e.requestURI ?? '').includes('dryRun=All') && JSON.stringify(e.requestObject ?? {}).includes(PROBE_LABEL);

/** The audit check of one run on one resource: its requests on it, and its writes anywhere. */
function auditCheck(
  events: AuditEvent[],
  resource: { group: string; resource: string },
  ownWrites: (e: AuditEvent) => boolean,
): { requests: number; writes: number; codes: Record<string, number>; elsewhere: string[] } {
  const on = onResource(events, resource);
  const codes: Record<string, number> = {};
  for (const e of on) codes[`${e.verb} ${e.responseStatus?.code}`] = (codes[`${e.verb} ${e.responseStatus?.code}`] ?? 0) + 1;
  const bad = on.filter((e) => {
    const code = e.responseStatus?.code ?? 0;
    if (e.objectRef?.subresource) return true;
    if (['get', 'list', 'watch'].includes(e.verb ?? '')) return code !== 200;
    if (isFenceProbe(e)) return code !== 403; // refused by the fence, as the worker requires
    if (e.verb === 'patch') return ![200, 409, 404].includes(code);
    return true; // no update, create, delete on a migrated resource
  });
  assert.deepEqual(
    bad.map((e) => `${e.verb} ${e.requestURI} ${e.responseStatus?.code}`),
    [],
    'every request on the migrated resource is a read, a re-encode answered 200, 409 or 404, or a probe the fence refused',
  );
  const writes = on.filter((e) => e.verb === 'patch' && !isFenceProbe(e)).length;
  const elsewhere = events
    .filter((e) => !['get', 'list', 'watch'].includes(e.verb ?? '') && !on.includes(e) && !ownWrites(e))
    .map((e) => `${e.verb} ${e.requestURI} ${e.responseStatus?.code}`);
  return { requests: on.length, writes, codes, elsewhere };
}

/**
 * What svm's requests on one resource were answered with: `<verb> <kind of the reply>`, counted (svm's events only),
 * but for the fence's probes (refused dry runs: metadataOnlyCheck counts them).
 */
function repliesOf(events: AuditEvent[], resource: { group: string; resource: string }): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of onResource(events, resource).filter((x) => !isFenceProbe(x))) {
    // An error's reply to a metadata-only request is not audited: kube-apiserver negotiates the error's encoding with
    // the default restrictions, which refuse `as=PartialObjectMetadata`, and then writes the Status raw, past the audit
    // (k8s.io/apiserver responsewriters.WriteObjectNegotiated). Such a reply carries no object.
    const code = e.responseStatus?.code ?? 0;
    const kind = e.responseObject?.kind ?? (code >= 400 ? 'Status (an error, not audited)' : '(no reply logged)');
    const key = `${e.verb} ${kind}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/** The metadata-only check of svm's requests on one resource: every reply metadata only (or a Status), every patch empty. */
function metadataOnlyCheck(events: AuditEvent[], resource: { group: string; resource: string }): void {
  const replies = repliesOf(events, resource);
  const allowed = ['list PartialObjectMetadataList', 'patch PartialObjectMetadata', 'patch Status', 'patch Status (an error, not audited)'];
  assert.deepEqual(
    Object.keys(replies).filter((k) => !allowed.includes(k)),
    [],
    `every list and patch of svm's on ${resource.resource} answered with metadata only: ${JSON.stringify(replies)}`,
  );
  assert.ok((replies['patch PartialObjectMetadata'] ?? 0) > 0, `some of svm's patches answered and audited: ${JSON.stringify(replies)}`);
  const probes = onResource(events, resource).filter(isFenceProbe);
  assert.ok(probes.length > 0, "the shipped worker probed svm's fence before its chunks");
  assert.deepEqual(
    probes.filter((e) => e.responseStatus?.code !== 403).map((e) => `${e.requestURI} ${e.responseStatus?.code}`),
    [],
    'every probe refused by the fence',
  );
  const notEmpty = onResource(events, resource)
    .filter((e) => e.verb === 'patch' && !isFenceProbe(e))
    .map((e) => e.requestObject ?? {})
    .filter((b) => {
      const { apiVersion, kind, metadata, ...rest } = b;
      const m = (metadata ?? {}) as Record<string, unknown>;
      return !apiVersion || !kind || Object.keys(rest).length > 0 || Object.keys(m).join() !== 'resourceVersion';
    });
  assert.deepEqual(notEmpty, [], 'every patch carries apiVersion, kind and the listed resourceVersion, nothing else');
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
  // As Kubernetes' own tests do for the built-in: an object created and deleted at once moves the garbage
  // collector's cache of the resource past the resourceVersion the migration waits for, instead of waiting for
  // a bookmark (with the built-in's work-queue backoff, up to minutes).
  if (kcmRunning) await nudge(gr);
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
      async () => `its conditions ${JSON.stringify((await findStandardMigration(p.kube, name))?.status?.conditions ?? 'none')}`,
    );
  }
  return { outcomes: out, seconds: (Date.now() - started) / 1000 };
}

async function nudge(gr: { group: string; resource: string }): Promise<void> {
  const name = uniq('nudge');
  const base =
    gr.group === '' && gr.resource === 'secrets'
      ? '/api/v1/namespaces/default/secrets'
      : gr.group.endsWith('.svm.test')
        ? `/apis/${gr.group}/v2/namespaces/default/${gr.resource}`
        : undefined;
  if (!base) return;
  const body = base.startsWith('/api/v1') ? { metadata: { name } } : { apiVersion: `${gr.group}/v2`, kind: 'Widget', metadata: { name } };
  const res = await p.kube.raw('POST', base, { body: JSON.stringify(body) });
  if (res.status < 300) await p.kube.raw('DELETE', `${base}/${name}`);
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

/** Each object's apiVersion as etcd holds it, by name. */
async function storedAt(crd: TestCrd): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const o of await readStoredObjects(p.etcd, etcdPrefix({ group: crd.group, resource: crd.plural, custom: true })))
    out[o.object.metadata?.name ?? o.key] = o.object.apiVersion ?? '?';
  return out;
}

async function createCr(crd: TestCrd, ns: string, name: string, version: 'v1' | 'v2'): Promise<string> {
  const res = await p.kube.request('POST', `/apis/${crd.group}/${version}/namespaces/${ns}/${crd.plural}`, {
    body: JSON.stringify({ apiVersion: `${crd.group}/${version}`, kind: crd.kind, metadata: { name }, spec: { name } }),
  });
  return (JSON.parse(res.body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

const grantFor = async (crd: TestCrd) =>
  serverSideApply(
    p.kube,
    YAML.parseAllDocuments(grantManifests({ group: crd.group, resource: crd.plural, custom: true })).map((d) => d.toJS() as Manifest),
  );

type Who = 'svm' | 'built-in';
const table: Array<{ case: string; svm?: string; 'built-in'?: string }> = [];
function row(c: string, who: Who, text: string) {
  let r = table.find((x) => x.case === c);
  if (!r) table.push((r = { case: c }));
  r[who] = text;
}
const resultsFile = path.join(process.env.SVM_RESULTS_DIR ?? path.join(process.cwd(), 'test-results'), 'conformance.json');
/** Status parity rows: case | condition | built-in | svm | verdict. */
const parity: string[] = [];

/**
 * The built-in is a recorded reference (test/helpers/built-in-reference.ts): this file runs svm and holds it to what
 * the built-in did on this release, or, with SVM_RECORD_BUILT_IN=1 (`npm run reference:built-in`), runs the built-in
 * alone, as its live control did, and records it.
 */
const migrators: readonly Who[] = recording ? ['built-in'] : ['svm'];
let reference: ConformanceReference | undefined;
const recordedCases: ConformanceReference['cases'] = {};
let recordedParity: ConformanceReference['parity'] | undefined;
const CASES = ['secrets', 'concurrent', 'conversion', 'brokenWebhook'];

/**
 * One case's verdicts: recording, the built-in's, kept for the reference; otherwise svm's, held to the built-in's
 * recorded ones (those named in `only`, or all).
 */
function caseVerdict(key: string, who: Who, verdict: Record<string, unknown>, seconds?: number, only?: string[]): void {
  if (who === 'built-in') {
    recordedCases[key] = { verdict, ...(seconds === undefined ? {} : { seconds: Number(seconds.toFixed(1)) }) };
    return;
  }
  const ref = reference!.cases[key];
  assert.ok(ref, `the built-in's reference holds the case ${key}: run \`npm run reference:built-in\``);
  const pick = (v: Record<string, unknown>) => (only ? Object.fromEntries(only.map((k) => [k, v[k]])) : v);
  assert.deepEqual(pick(verdict), pick(ref.verdict), `svm's verdicts on ${key} are the built-in's (${recordedNote(reference!)})`);
}

before(async () => {
  // First, before any server starts: a reference recorded on another release fails the file at once, with the command.
  if (!recording) reference = builtInReference('conformance');
  dir = mkdtempSync(path.join(tmpdir(), 'svm-conformance-'));
  await up({ dir, apiservers: 2, storageVersionApi: false, log: quiet });
  writeFileSync(
    auditPolicyFile(),
    YAML.stringify({
      apiVersion: 'audit.k8s.io/v1',
      kind: 'Policy',
      omitStages: ['RequestReceived'],
      rules: [
        { level: 'None', users: ['system:apiserver'] },
        // svm's own requests with their bodies and replies: what it asked for shows in what it was answered.
        { level: 'RequestResponse', users: [SVM_USER], omitManagedFields: true },
        { level: 'Metadata' },
      ],
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
  if (recording) {
    const missing = [...CASES.filter((k) => !recordedCases[k]), ...(recordedParity ? [] : ['parity'])];
    if (missing.length) console.log(`\nthe built-in's reference NOT recorded: no verdict of ${missing.join(', ')} (a case failed)`);
    else
      recordReference('conformance', {
        kubernetes: p.state.kubeVersion ?? kubeVersions().current,
        recordedAt: new Date().toISOString(),
        cases: recordedCases,
        rows: table.map((r) => ({ case: r.case, text: r['built-in'] ?? '' })),
        parity: recordedParity!,
      });
  } else if (reference) {
    for (const r of reference.rows) row(r.case, 'built-in', `${r.text} (${recordedNote(reference)})`);
  }
  if (table.length || parity.length) {
    mkdirSync(path.dirname(resultsFile), { recursive: true });
    writeFileSync(
      resultsFile,
      JSON.stringify(
        {
          kubernetes: p ? p.state.kubeVersion : undefined,
          at: new Date().toISOString(),
          builtIn: recording ? 'run live, recorded' : reference && recordedNote(reference),
          table,
          parity,
        },
        null,
        2,
      ) + '\n',
    );
    if (parity.length) console.log(`\n=== status parity (v1): case | condition | built-in | svm | verdict ===\n${parity.join('\n')}`);
    console.log(`\n=== conformance: the built-in's cases, svm and the built-in side by side (${resultsFile}) ===`);
    for (const r of table) console.log(`- ${r.case}\n    svm:      ${r.svm ?? '(not run)'}\n    built-in: ${r['built-in'] ?? '(not run)'}`);
  }
  removeTokenKubeconfig(kubeconfig);
  await p?.close();
  if (dir) await removePlanes(dir);
});

/**
 * Runs fn with the migrator of `who` acting on standard objects: svm's worker (own mode), or the built-in.
 * kube-controller-manager, once started for the built-in's cases, keeps running through them (its garbage
 * collector synced once), and is stopped before svm acts: never both on one object.
 */
let kcmRunning = false;
async function withMigrator<T>(who: Who, fn: () => Promise<T>): Promise<T> {
  if (who === 'built-in') {
    if (!kcmRunning) await startControllerManager(dir, { builtInMigrator: true }, quiet);
    kcmRunning = true;
    return fn();
  }
  if (kcmRunning) {
    await stopControllerManager(dir);
    await deleteBuiltInObjects(p);
  }
  kcmRunning = false;
  return withWorkerAs(p, kubeconfig!, () => fn(), {
    // As deploy/ (SVM_REQUIRE_FENCE, SVM_REQUIRE_STATIC_FENCE), with the bridge owning the standard API's objects.
    settings: { bridge: true, standardMigrations: 'own', maxConcurrentChunks: 4, requireFence: true, requireStaticFence: true },
  });
}

/** Standard objects left unfinished (a case with no verdict): deleted, so that nothing is left for the next migrator. */
async function deleteUnfinished(names: string[]): Promise<void> {
  for (const name of names) {
    const o = await findStandardMigration(p.kube, name);
    if (o && !o.status?.conditions?.some((c) => (c.type === 'Succeeded' || c.type === 'Failed') && c.status === 'True'))
      await p.kube.raw('DELETE', `/apis/storagemigration.k8s.io/v1/storageversionmigrations/${name}`);
  }
}

for (const who of migrators) {
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
      const verdict = {
        migrations: [...Object.values(first.outcomes), ...Object.values(second.outcomes)],
        everySecretUnderTheNewKeyInEtcd: JSON.stringify(after1) === JSON.stringify({ [next]: total }),
        resourceVersionsChangedBySecondPass: moved.length,
      };
      assert.deepEqual(moved, [], 'the second migration changed no resourceVersion');
      await auditCaughtUp(mark);
      const events = auditOf(whose, mark);
      const a = auditCheck(events, { group: '', resource: 'secrets' }, who === 'svm' ? svmOwnWrite : builtInOwnWrite);
      assert.deepEqual(a.elsewhere, [], `${who} writes nothing but the Secrets and its own objects`);
      if (who === 'svm') metadataOnlyCheck(events, { group: '', resource: 'secrets' });
      // About one write per object over both passes (the second re-encodes too: nothing changes in etcd).
      assert.ok(a.writes >= total && a.writes <= 2 * total * 1.1, `${a.writes} re-encodes for ${total} Secrets over two passes`);
      row(
        'Secrets after an encryption-key rotation, then a second migration',
        who,
        `${total} Secrets (${SECRETS} created for the case); first migration ${seconds.toFixed(1)} s from creation to Succeeded; etcd ${JSON.stringify(after1)}; second pass: 0 resourceVersions changed; audit: ${a.requests} requests on secrets ${JSON.stringify(a.codes)}, writes elsewhere ${a.elsewhere.length}`,
      );
      caseVerdict('secrets', who, { ...verdict, writesElsewhere: a.elsewhere.length }, seconds);
    });
  });

  void test(`${who}: ${CONCURRENT} migrations of one resource created at once while objects come and go: every one Succeeded, no object already in the storage version rewritten`, async () => {
    const crd = testCrd(`${uniq(who === 'svm' ? 'chs' : 'chb')}.svm.test`);
    await applyCrd(p.kube, crd, 'v2');
    const ns = uniq('chaos');
    await createObjects(p.kube, crd, 'v2', CHAOS_OBJECTS, { namespace: ns });
    // A custom resource is outside the worker's default rights: the grant `svm grant` prints.
    if (who === 'svm') await grantFor(crd);
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
      const now = await resourceVersions(collection);
      const rewritten = [...rvs].filter(([k, v]) => now.has(k) && now.get(k) !== v).map(([k]) => k);
      const verdict = { succeeded: `${CONCURRENT - failed.length}/${CONCURRENT}`, currentObjectsRewritten: rewritten.length };
      assert.deepEqual(failed, [], `every one of the ${CONCURRENT} migrations Succeeded`);
      assert.deepEqual(rewritten, [], 'no object already in the storage version was rewritten');
      await auditCaughtUp(mark);
      const a = auditCheck(auditOf(whose, mark), { group: crd.group, resource: crd.plural }, who === 'svm' ? svmOwnWrite : builtInOwnWrite);
      assert.deepEqual(a.elsewhere, [], `${who} writes nothing but the resource and its own objects`);
      row(
        `${CONCURRENT} migrations of one custom resource created at once, ${CHAOS_OBJECTS} objects already in the storage version, objects created and deleted meanwhile`,
        who,
        `${CONCURRENT}/${CONCURRENT} Succeeded in ${seconds.toFixed(1)} s (${churn.created} created, ${churn.deleted} deleted meanwhile); 0 objects rewritten; audit: ${a.requests} requests on the resource ${JSON.stringify(a.codes)}, writes elsewhere ${a.elsewhere.length}`,
      );
      caseVerdict('concurrent', who, { ...verdict, writesElsewhere: a.elsewhere.length }, seconds);
    });
  });

  void test(`${who}: a CRD moved v1 -> v2 through a conversion webhook while objects come and go; then v1 unserved and the webhook stopped: every object readable, storedVersions [v2]`, async () => {
    const hook = await startConversionWebhook(webhookHost(p));
    let hookOpen = true;
    const crd = testCrd(`${uniq(who === 'svm' ? 'cvs' : 'cvb')}.svm.test`);
    const conversion = { url: hook.url, caBundle: hook.caBundle };
    const ns = uniq('conv');
    await p.kube.request('POST', '/api/v1/namespaces', { body: JSON.stringify({ metadata: { name: ns } }) });
    try {
      // cr1 in v1 (v1 only); cr2 through v2, stored v1; then v2 the storage version: cr3 through v1, cr4 through v2.
      await applyCrd(p.kube, crd, 'v1', { served: ['v1'], conversion });
      const rv: Record<string, string> = {};
      rv.cr1 = await createCr(crd, ns, 'cr1', 'v1');
      await applyCrd(p.kube, crd, 'v1', { conversion });
      rv.cr2 = await createCr(crd, ns, 'cr2', 'v2');
      await applyCrd(p.kube, crd, 'v2', { conversion });
      rv.cr3 = await createCr(crd, ns, 'cr3', 'v1');
      rv.cr4 = await createCr(crd, ns, 'cr4', 'v2');
      const at = await storedAt(crd);
      assert.deepEqual(
        [at.cr1, at.cr2, at.cr3, at.cr4],
        [`${crd.group}/v1`, `${crd.group}/v1`, `${crd.group}/v2`, `${crd.group}/v2`],
        'cr1 and cr2 stored in v1, cr3 and cr4 in v2',
      );
      if (who === 'svm') await grantFor(crd);
      const mark = auditMark();
      const whose = who === 'svm' ? isSvm : isBuiltIn;
      await withMigrator(who, async () => {
        const c = chaos(crd, ns);
        let result: { outcomes: Record<string, string>; seconds: number };
        let churn = { created: 0, deleted: 0 };
        try {
          result = await migrate([uniq(`${who === 'svm' ? 'svm' : 'bi'}-crd`)], { group: crd.group, resource: crd.plural });
        } finally {
          churn = await c.stop();
        }
        assert.deepEqual(Object.values(result.outcomes), ['Succeeded'], JSON.stringify(result.outcomes));
        const after1 = await storedAt(crd);
        const notV2 = Object.entries(after1).filter(([, v]) => v !== `${crd.group}/v2`);
        assert.deepEqual(notV2, [], 'every object stored in v2');
        assert.deepEqual((await getCrd(p.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions, ['v2']);
        // v1 no longer served, the webhook gone: nothing can convert any more, and nothing needs to.
        await applyCrd(p.kube, crd, 'v2', { served: ['v2'], conversion });
        await hook.close();
        hookOpen = false;
        const list = await p.kube.getJson<{ items: Array<{ metadata: { name: string; resourceVersion: string } }> }>(
          `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}`,
        );
        const now = Object.fromEntries(list.items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
        const verdict = {
          migrations: Object.values(result.outcomes),
          objectsNotV2InEtcd: notV2.length,
          storedVersions: (await getCrd(p.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions,
          readableThroughV2: ['cr1', 'cr2', 'cr3', 'cr4'].filter((n) => now[n]),
          rewritten: ['cr1', 'cr2', 'cr3', 'cr4'].filter((n) => now[n] && now[n] !== rv[n]),
        };
        for (const n of ['cr1', 'cr2', 'cr3', 'cr4']) assert.ok(now[n], `${n} readable through v2`);
        assert.notEqual(now.cr1, rv.cr1, 'cr1 (written in v1) rewritten');
        assert.notEqual(now.cr2, rv.cr2, 'cr2 (stored in v1) rewritten');
        assert.equal(now.cr3, rv.cr3, 'cr3 (already in v2) not rewritten');
        assert.equal(now.cr4, rv.cr4, 'cr4 (already in v2) not rewritten');
        await auditCaughtUp(mark);
        const events = auditOf(whose, mark);
        const a = auditCheck(events, { group: crd.group, resource: crd.plural }, who === 'svm' ? svmOwnWrite : builtInOwnWrite);
        assert.deepEqual(a.elsewhere, [], `${who} writes nothing but the resource and its own objects`);
        if (who === 'svm') metadataOnlyCheck(events, { group: crd.group, resource: crd.plural });
        row(
          'a CRD moved v1 -> v2 through a conversion webhook under churn; then v1 unserved, the webhook stopped',
          who,
          `Succeeded in ${result.seconds.toFixed(1)} s (${churn.created} created, ${churn.deleted} deleted meanwhile); ${list.items.length} objects readable after, all v2 in etcd; storedVersions [v2]; audit: ${a.requests} requests ${JSON.stringify(a.codes)}, writes elsewhere ${a.elsewhere.length}`,
        );
        caseVerdict('conversion', who, { ...verdict, writesElsewhere: a.elsewhere.length }, result.seconds);
      });
    } finally {
      if (hookOpen) await hook.close();
    }
  });

  void test(`${who}: a CRD whose conversion webhook is down beside a healthy resource (kubernetes/kubernetes#127105): the healthy one is migrated, the broken one named`, async () => {
    const step = (what: string) => process.stderr.write(`[conformance ${new Date().toISOString()}] ${who} broken webhook: ${what}\n`);
    const hook = await startConversionWebhook(webhookHost(p));
    const broken = testCrd(`${uniq(who === 'svm' ? 'brs' : 'brb')}.svm.test`);
    const healthy = testCrd(`${uniq(who === 'svm' ? 'oks' : 'okb')}.svm.test`);
    const ns = uniq('broken');
    await p.kube.request('POST', '/api/v1/namespaces', { body: JSON.stringify({ metadata: { name: ns } }) });
    // Objects stored in v1, then v2 the storage version and the webhook gone: none of them can be read any more.
    await applyCrd(p.kube, broken, 'v1', { conversion: { url: hook.url, caBundle: hook.caBundle } });
    step('CRD at v1');
    for (let i = 0; i < 5; i++) await createCr(broken, ns, `b-${i}`, 'v1');
    step('objects created');
    await applyCrd(p.kube, broken, 'v2', { conversion: { url: hook.url, caBundle: hook.caBundle } });
    step('CRD at v2');
    await hook.close();
    step('webhook closed');
    // Its storage built again on every API server with the webhook down (as any later change to the CRD does; CI met
    // it by timing, the caches otherwise holding what they decoded while the webhook was up): from here no list of its
    // objects can be served, with content or metadata only. svm must not need one to start and name the migration.
    await p.kube.request('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${broken.name}`, {
      body: JSON.stringify({ spec: { conversion: { webhook: { clientConfig: { url: `${hook.url}/gone` } } } } }),
      contentType: 'application/merge-patch+json',
    });
    const servers = kubernetesEndpoints(p.kube);
    try {
      await eventually('every API server failing to list the broken resource', async () => {
        const { endpoints } = await servers.find();
        const codes = await Promise.all(
          endpoints.map(
            async (e) => (await e.kube.raw('GET', `/apis/${broken.group}/v2/${broken.plural}`, { query: { limit: 1 } })).status,
          ),
        );
        return endpoints.length > 0 && codes.every((c) => c === 500);
      });
    } finally {
      servers.close();
    }
    step('its lists refused on every API server');
    // What etcd holds of the broken CRD's objects before any migrator acts: nothing may rewrite them.
    const brokenPrefix = etcdPrefix({ group: broken.group, resource: broken.plural, custom: true });
    const brokenBefore = await readStoredObjects(p.etcd, brokenPrefix);
    assert.deepEqual(
      brokenBefore.map((o) => o.object.apiVersion),
      Array.from({ length: 5 }, () => `${broken.group}/v1`),
    );
    await applyCrd(p.kube, healthy, 'v1');
    await createObjects(p.kube, healthy, 'v1', 20, { namespace: ns });
    await applyCrd(p.kube, healthy, 'v2');
    if (who === 'svm') {
      await grantFor(broken);
      await grantFor(healthy);
    }
    const names = { broken: uniq(`${who === 'svm' ? 'svm' : 'bi'}-broken`), healthy: uniq(`${who === 'svm' ? 'svm' : 'bi'}-healthy`) };
    await withMigrator(who, async () => {
      const started = Date.now();
      for (const [k, crd] of [
        ['broken', broken],
        ['healthy', healthy],
      ] as const)
        await p.kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
          body: JSON.stringify({
            apiVersion: 'storagemigration.k8s.io/v1',
            kind: 'StorageVersionMigration',
            metadata: { name: names[k] },
            spec: { resource: { group: crd.group, resource: crd.plural } },
          }),
        });
      const verdict = async (name: string) => {
        const o = await findStandardMigration(p.kube, name);
        const done = o?.status?.conditions?.find((x) => (x.type === 'Succeeded' || x.type === 'Failed') && x.status === 'True');
        const running = o?.status?.conditions?.find((x) => x.type === 'Running');
        return { done: done?.type, message: (done ?? running)?.message ?? '' };
      };
      // A verdict on each within the bound, or none: svm names the broken one after a minute of retries (its bound,
      // the built-in's too); the built-in is given a quarter more than its minute.
      const bound = who === 'svm' ? 150_000 : 75_000;
      const at: { healthy?: number; broken?: number } = {};
      let h = await verdict(names.healthy);
      let b = await verdict(names.broken);
      if (h.done) at.healthy = (Date.now() - started) / 1000;
      if (b.done) at.broken = (Date.now() - started) / 1000;
      while ((!h.done || !b.done) && Date.now() - started < bound) {
        await new Promise((r) => setTimeout(r, 1000));
        if (!h.done && (h = await verdict(names.healthy)).done) at.healthy = (Date.now() - started) / 1000;
        if (!b.done && (b = await verdict(names.broken)).done) at.broken = (Date.now() - started) / 1000;
      }
      const healthyAt = at.healthy;
      const etcd = await storedAt(healthy);
      const healthyV2 = Object.values(etcd).filter((v) => v === `${healthy.group}/v2`).length;
      row(
        'a CRD whose conversion webhook is down, beside a healthy CRD (20 objects v1 -> v2) (kubernetes/kubernetes#127105)',
        who,
        `healthy: ${h.done ? `${h.done} in ${healthyAt!.toFixed(1)} s` : `no verdict after ${bound / 1000} s`}, ${healthyV2}/20 in v2 in etcd; broken: ${b.done ? `${b.done} in ${at.broken!.toFixed(1)} s` : `no verdict after ${bound / 1000} s`}${b.message ? ` (${b.message.slice(0, 240)})` : ''}`,
      );
      const brokenObject = await findStandardMigration(p.kube, names.broken);
      await deleteUnfinished([names.healthy, names.broken]);
      assert.notEqual(b.done, 'Succeeded', `the broken resource ended Succeeded, yet none of its objects can be read: ${b.message}`);
      const brokenNow = new Map((await readStoredObjects(p.etcd, brokenPrefix)).map((o) => [o.key, o]));
      const brokenWritten = brokenBefore.filter((o) => brokenNow.get(o.key)?.modRevision !== o.modRevision).length;
      for (const o of brokenBefore) {
        const now = brokenNow.get(o.key);
        assert.equal(now?.modRevision, o.modRevision, `${o.key} of the broken resource was written`);
        assert.equal(now?.object.apiVersion, `${broken.group}/v1`, `${o.key} of the broken resource is no longer v1 in etcd`);
      }
      assert.equal(brokenNow.size, brokenBefore.length, 'no key of the broken resource came or went');
      const brokenStored = (await getCrd(p.kube, { group: broken.group, resource: broken.plural })).status?.storedVersions ?? [];
      row("the broken CRD's storedVersions at the end (its 5 objects still v1 in etcd)", who, JSON.stringify(brokenStored));
      if (who === 'built-in' && b.done === 'Failed') {
        // Note: the built-in (k8s.io/kubernetes v1.37.2, pkg/controller/storageversionmigrator/migrationrunner.go,
        // finishCRDMigration) prunes storedVersions to the storage version when a migration ends, Failed included, as
        // long as the CRD's generation is the one it started on: a version whose objects are still in etcd (all 5,
        // checked above) leaves storedVersions, and the version could then be removed. Asserted so that a release
        // that fixes it is noticed; svm keeps it (below).
        assert.deepEqual(
          brokenStored,
          ['v2'],
          `the built-in prunes storedVersions after its failed migration: ${JSON.stringify(brokenStored)}`,
        );
      } else {
        assert.ok(brokenStored.includes('v1'), `v1 stays in the broken CRD's storedVersions: ${JSON.stringify(brokenStored)}`);
      }
      if (h.done === 'Succeeded') assert.equal(healthyV2, 20, `the healthy resource Succeeded: every object in v2 in etcd`);
      // Held to the built-in's: what held in every run of it (the broken one not Succeeded, none of its objects
      // written, v1 in etcd); its verdicts themselves differ from run to run and from svm's (the table).
      caseVerdict(
        'brokenWebhook',
        who,
        {
          brokenSucceeded: b.done === 'Succeeded',
          brokenKeysWritten: brokenWritten,
          brokenKeysCameOrWent: brokenNow.size !== brokenBefore.length,
          healthy: h.done ?? 'no verdict',
          healthySeconds: at.healthy,
          healthyObjectsV2InEtcd: healthyV2,
          broken: b.done ?? 'no verdict',
          brokenSeconds: at.broken,
          brokenStoredVersions: brokenStored,
        },
        undefined,
        ['brokenSucceeded', 'brokenKeysWritten', 'brokenKeysCameOrWent'],
      );
      if (who === 'svm') {
        assert.equal(h.done, 'Succeeded', `the healthy resource is migrated: ${h.message}`);
        const d = await p.temporal.client.workflow
          .getHandle(`migrate/${broken.name}`)
          .describe()
          .catch(() => undefined);
        const last = d?.raw.pendingActivities?.find((a) => a.lastFailure)?.lastFailure;
        assert.equal(
          b.done,
          'Failed',
          `the broken resource fails, named, within ${bound / 1000} s: ${b.message} (its object: ${brokenObject ? JSON.stringify({ annotations: brokenObject.metadata.annotations, conditions: brokenObject.status?.conditions }) : 'gone'}; its workflow: ${d ? d.status.name : 'none'}; an activity's last failure: ${last?.message ?? 'none'})`,
        );
        assert.match(b.message, /conversion webhook/i, `the broken resource's status names the failing conversion webhook: ${b.message}`);
      }
    });
  });
}

/** The grant of list and patch, with `update` besides: what svm's PUT needs, which no grant of svm's holds (docs/security.md). */
const grantWithUpdate = async (crd: TestCrd) =>
  serverSideApply(
    p.kube,
    YAML.parseAllDocuments(grantManifests({ group: crd.group, resource: crd.plural, custom: true }))
      .map((d) => d.toJS() as Manifest)
      .map((m) =>
        m.kind === 'ClusterRole'
          ? { ...m, rules: [{ apiGroups: [crd.group], resources: [crd.plural], verbs: ['list', 'patch', 'update'] }] }
          : m,
      ),
  );

void test('svm by the PUT path (SVM_REWRITE_METHOD=put, as where a server refuses the patch): the audit log shows the one path that reads content, its lists answered whole, its PUTs with metadata only, no patch', async (t) => {
  if (recording) {
    t.skip('recording the built-in (SVM_RECORD_BUILT_IN=1)');
    return;
  }
  const crd = testCrd(`${uniq('put')}.svm.test`);
  const ns = uniq('put');
  await applyCrd(p.kube, crd, 'v1');
  await createObjects(p.kube, crd, 'v1', PUT_OBJECTS, { namespace: ns });
  await applyCrd(p.kube, crd, 'v2');
  await grantWithUpdate(crd);
  const mark = auditMark();
  const previous = process.env.SVM_REWRITE_METHOD;
  process.env.SVM_REWRITE_METHOD = 'put';
  try {
    await withMigrator('svm', async () => {
      const { outcomes } = await migrate([uniq('svm-put')], { group: crd.group, resource: crd.plural });
      assert.deepEqual(Object.values(outcomes), ['Succeeded'], JSON.stringify(outcomes));
    });
  } finally {
    if (previous === undefined) delete process.env.SVM_REWRITE_METHOD;
    else process.env.SVM_REWRITE_METHOD = previous;
  }
  const notV2 = Object.entries(await storedAt(crd)).filter(([, v]) => v !== `${crd.group}/v2`);
  assert.deepEqual(notV2, [], 'every object stored in v2');
  await auditCaughtUp(mark);
  const replies = repliesOf(auditOf(isSvm, mark), { group: crd.group, resource: crd.plural });
  // The metadata-only list in a namespace no object can be in: the resource's resourceVersion for the status.
  const allowed = [`list ${crd.kind}List`, 'list PartialObjectMetadataList', 'update PartialObjectMetadata', 'update Status'];
  assert.deepEqual(
    Object.keys(replies).filter((k) => !allowed.includes(k)),
    [],
    `svm's requests by the PUT path: ${JSON.stringify(replies)}`,
  );
  assert.ok((replies[`list ${crd.kind}List`] ?? 0) > 0, `its pages listed with content: ${JSON.stringify(replies)}`);
  assert.ok(
    (replies['update PartialObjectMetadata'] ?? 0) >= PUT_OBJECTS,
    `each object PUT, answered with metadata only: ${JSON.stringify(replies)}`,
  );
});

void test('status parity with the real built-in (v1, its recorded reference): a success, a webhook denial, a missing resource, and the CRD StorageMigrating condition; differences only where documented', async () => {
  if (recording) {
    recordedParity = await parityOutcomes(p, 'built-in', (fn) => withMigrator('built-in', fn));
    return;
  }
  const svm = await parityOutcomes(p, 'svm', (fn) => withMigrator('svm', fn), grantFor);
  const { undocumented, table: rows } = compareOutcomes(reference!.parity, svm);
  parity.push(...rows);
  assert.deepEqual(undocumented, [], `svm reports what the built-in reports (${recordedNote(reference!)}), but for documented differences`);
});
