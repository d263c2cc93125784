/**
 * The upgrade svm exists for: a real 1.36 -> 1.37 rolling upgrade of an HA
 * control plane, on planes of this file's own (the suite's runs 1.37 only).
 *
 * Both runs start on the previous release (two API servers behind the load
 * balancer), with objects of every built-in resource this test knows how to
 * create and a CRD whose storage version an operator's chart moves during
 * the upgrade. Then, as an HA control plane is upgraded: API server 0, API
 * server 1, and kube-controller-manager (of the new release, without a
 * migrator in the svm run) started last. Until 2026-12-07 a 1.36
 * kube-controller-manager without a migrator ran from the start: no check
 * read it (it ran only its garbage collector, which none of these objects
 * gives anything to do, and svm's own mode looks only at who writes
 * storagemigration.k8s.io status), and it was the one reason besides the
 * built-in's runs to build 1.36's kube-controller-manager. Which resources'
 * storageVersionHash changed is found at run time (discovery of both
 * releases), printed, never hard-coded.
 *
 *   svm: its trigger runs throughout, the worker as the shipped
 *        ServiceAccount (deploy/ rights and fence, with the narrow grant
 *        `svm grant` prints for the admission objects and the CRD), owning
 *        storagemigration.k8s.io objects (SVM_STANDARD_MIGRATIONS=own); no
 *        migration while the servers disagree, each changed resource
 *        migrated once they agree, storedVersions pruned only then (nothing
 *        written while they disagree is judged in etcd: no key of a changed
 *        resource has a new revision from before API server 0's upgrade to
 *        the start of API server 1's); and the
 *        worker started on the previous release takes a
 *        storagemigration.k8s.io/v1 object once the servers serve v1;
 *   the built-in alone: after the upgrade, one storagemigration.k8s.io/v1
 *        object per changed resource (what upgrade tooling creates), waited
 *        on, every one Succeeded. A recorded reference
 *        (test/fixtures/built-in-reference.json,
 *        test/helpers/built-in-reference.ts): run live only with
 *        SVM_RECORD_BUILT_IN=1 (`npm run reference:built-in`, which skips the
 *        svm run); otherwise svm's run is held to it (the same changed
 *        resources, the same encodings in etcd after), and a reference of
 *        other releases than tools/versions.json's fails the file at once.
 *
 * In the svm run, `svm plan --drop admissionregistration.k8s.io/v1beta1`'s
 * check before and after: "not yet" on the previous release (the mutating
 * admission policies and bindings are stored as v1beta1), "ready" for them
 * once upgraded and migrated (the group's resources the worker was not
 * granted stay "not yet": no StorageState records a pass over them). Then,
 * svm stopped, API server 1 is rolled back and forward: "not yet" again
 * (the record's agreement no longer holds, whatever the StorageStates say),
 * "ready" after a migration, and every object reads and applies at v1.
 *
 * Judged in etcd, both runs: every object of each changed resource holds the
 * version discovery now names as its storage version (the one its
 * storageVersionHash stands for), and every such resource has objects (one
 * changed resource this test cannot create objects of fails it). The
 * figures are written to test-results/rolling-upgrade.json (SVM_RESULTS_DIR),
 * and the side-by-side lines are printed from that file.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, startControllerManager, up } from '../src/dev/plane';
import { kubeVersions } from '../src/dev/tools';
import { getCrd } from '../src/kube/crds';
import { dropTable } from '../src/client/drop-report';
import { checkDrop, migrationRecords } from '../src/kube/drop-check';
import { Placement } from '../src/contract/placement';
import { versionNamer } from '../src/kube/agreement';
import { findStandardMigration } from '../src/kube/standard-migrations';
import { storageStatePath } from '../src/kube/storage-states';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import YAML from 'yaml';
import { grantManifests } from '../src/client/grant';
import { eventually } from './helpers/migrate';
import {
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  withWorkerAs,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { removePlanes, testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';
import { builtInReference, recordedNote, recordReference, recording, type UpgradeReference } from './helpers/built-in-reference';

const { current, previous } = kubeVersions();
const quiet = () => undefined;
const planes: string[] = [];
after(async () => removePlanes(...planes));
let reference: UpgradeReference | undefined;
// First, before any server starts: a reference recorded on other releases fails the file at once, with the command.
before(() => {
  if (!recording) reference = builtInReference('upgrade');
});

/** Built-in objects this test can create on either release: [apiVersion, plural, manifest]. */
const TEMPLATES: Array<{ group: string; resource: string; create: (p: TestPlane, name: string) => Promise<unknown> }> = [
  {
    group: 'admissionregistration.k8s.io',
    resource: 'mutatingadmissionpolicybindings',
    create: (p, name) =>
      p.kube.request('POST', '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings', {
        body: JSON.stringify({
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'MutatingAdmissionPolicyBinding',
          metadata: { name },
          spec: { policyName: `${name}-policy` },
        }),
      }),
  },
  {
    group: 'admissionregistration.k8s.io',
    resource: 'mutatingadmissionpolicies',
    create: (p, name) =>
      p.kube.request('POST', '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies', {
        body: JSON.stringify({
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'MutatingAdmissionPolicy',
          metadata: { name },
          spec: {
            matchConstraints: {
              resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
            },
            mutations: [{ patchType: 'ApplyConfiguration', applyConfiguration: { expression: 'Object{}' } }],
            reinvocationPolicy: 'Never',
          },
        }),
      }),
  },
  {
    group: 'admissionregistration.k8s.io',
    resource: 'validatingadmissionpolicybindings',
    create: (p, name) =>
      p.kube.request('POST', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', {
        body: JSON.stringify({
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'ValidatingAdmissionPolicyBinding',
          metadata: { name },
          spec: { policyName: `${name}-policy`, validationActions: ['Audit'] },
        }),
      }),
  },
  {
    group: 'resource.k8s.io',
    resource: 'deviceclasses',
    create: (p, name) =>
      p.kube.request('POST', '/apis/resource.k8s.io/v1/deviceclasses', {
        body: JSON.stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: { name }, spec: {} }),
      }),
  },
  {
    group: 'scheduling.k8s.io',
    resource: 'priorityclasses',
    create: (p, name) =>
      p.kube.request('POST', '/apis/scheduling.k8s.io/v1/priorityclasses', {
        body: JSON.stringify({ apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name }, value: 1000 }),
      }),
  },
];
const PER_RESOURCE = 20;
const CRD_OBJECTS = 100;

/** Every persisted resource's storageVersionHash as one API server serves it (its preferred version). */
async function hashesOf(p: TestPlane, index: number): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const r of await p.kubeOf(index).discover()) {
    if (r.preferred && r.storageVersionHash && !r.name.includes('/'))
      out.set(r.group ? `${r.name}.${r.group}` : r.name, r.storageVersionHash);
  }
  return out;
}

interface Setup {
  p: TestPlane;
  dir: string;
  crd: TestCrd;
  tag: string;
}

/** A plane on the previous release with the objects (no kube-controller-manager: it is upgraded, started here, last). */
async function setUp(): Promise<Setup> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svm-upgrade-'));
  planes.push(dir);
  await up({ dir, apiservers: 2, kubeVersion: previous, storageVersionApi: false, log: quiet });
  const p = await testPlane({ dir });
  await installCrds(p.kube);
  const tag = uniq('up');
  for (const t of TEMPLATES) for (let i = 0; i < PER_RESOURCE; i++) await t.create(p, `${tag}-${i}`);
  const crd = testCrd(`${tag}.svm.test`);
  await applyCrd(p.kube, crd, 'v1');
  await createObjects(p.kube, crd, 'v1', CRD_OBJECTS, { namespace: `${tag}-ns` });
  return { p, dir, crd, tag };
}

/**
 * The apiVersion each resource's storageVersionHash stands for, as one API server's discovery serves it now
 * (the hash among the group's versions and the resource's kind): what every object must hold in etcd.
 */
async function storageApiVersions(p: TestPlane, index: number, names: string[]): Promise<Record<string, string>> {
  const all = await p.kubeOf(index).discover();
  const out: Record<string, string> = {};
  for (const name of names) {
    const entries = all.filter((r) => (r.group ? `${r.name}.${r.group}` : r.name) === name);
    const preferred = entries.find((r) => r.preferred);
    assert.ok(preferred?.storageVersionHash, `discovery serves ${name} with a storageVersionHash`);
    const versions = new Set(all.filter((r) => r.group === preferred.group).map((r) => r.version));
    const named = versionNamer(preferred.group, preferred.kind, versions)(preferred.storageVersionHash);
    assert.ok(named, `${name}: the hash ${preferred.storageVersionHash} names one of ${[...versions].join(', ')}`);
    out[name] = named;
  }
  return out;
}

/** Every object of each resource in etcd holds exactly the storage version discovery names now, and there are objects. */
function assertNewEncoding(
  who: string,
  etcd: Record<string, Record<string, number>>,
  expected: Record<string, string>,
  counts: Record<string, number>,
): void {
  for (const [name, apiVersion] of Object.entries(expected)) {
    assert.deepEqual(
      etcd[name],
      { [apiVersion]: counts[name] },
      `${who}: every ${name} object in etcd holds ${apiVersion}, the storage version discovery names now`,
    );
  }
}

/** The figures of both runs, written as they are made; the side-by-side report is printed from this file. */
const resultsFile = path.join(process.env.SVM_RESULTS_DIR ?? path.join(process.cwd(), 'test-results'), 'rolling-upgrade.json');
function recordResult(key: 'svm' | 'builtIn', value: Record<string, unknown>): void {
  mkdirSync(path.dirname(resultsFile), { recursive: true });
  let doc: Record<string, unknown> = {};
  try {
    doc = JSON.parse(readFileSync(resultsFile, 'utf8')) as Record<string, unknown>;
    if (doc.from !== previous || doc.to !== current) doc = {};
  } catch {
    // first run
  }
  writeFileSync(
    resultsFile,
    JSON.stringify({ ...doc, from: previous, to: current, [key]: { ...value, at: new Date().toISOString() } }, null, 2) + '\n',
  );
}

/** Encodings in etcd of every created resource: resource -> apiVersion -> count. */
async function etcdEncodings(s: Setup, resources: string[]): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = {};
  for (const name of resources) {
    const t = TEMPLATES.find((x) => `${x.resource}.${x.group}` === name);
    if (t) out[name] = (await storedVersions(s.p.etcd, `/registry/${t.resource}/`)).byApiVersion;
  }
  out[s.crd.name] = (await storedVersions(s.p.etcd, { group: s.crd.group, resource: s.crd.plural, custom: true })).byApiVersion;
  return out;
}

after(() => {
  let doc: { svm?: { line?: string }; builtIn?: { line?: string } };
  try {
    doc = JSON.parse(readFileSync(resultsFile, 'utf8')) as typeof doc;
  } catch {
    return;
  }
  const lines = [doc.svm?.line, doc.builtIn?.line].filter(Boolean);
  if (lines.length)
    console.log(`\n=== rolling upgrade ${previous} -> ${current}, side by side (${resultsFile}) ===\n${lines.join('\n')}\n`);
});

let changed: string[] = [];
/** svm's run: each migrated resource's encodings in etcd after (resource -> apiVersion -> count), held to the built-in's. */
let svmEtcd: Record<string, Record<string, number>> | undefined;
const TRIGGER_PERIOD_S = 10;

/**
 * Encodings in etcd (resource -> apiVersion -> count) without what differs from run to run: the CRD (its name and
 * group are made per run) as "the CRD", its apiVersions by version alone ("v2").
 */
function runNeutral(etcd: Record<string, Record<string, number>>, crd?: TestCrd): Record<string, Record<string, number>> {
  return Object.fromEntries(
    Object.entries(etcd).map(([k, v]) =>
      k === crd?.name || k === 'the CRD'
        ? ['the CRD', Object.fromEntries(Object.entries(v).map(([apiVersion, n]) => [apiVersion.replace(/^.*\//, ''), n]))]
        : [k, v],
    ),
  );
}

/** Each created built-in resource's keys in etcd with their modRevision. */
async function keyRevisions(p: TestPlane): Promise<Map<string, Map<string, number>>> {
  const out = new Map<string, Map<string, number>>();
  for (const t of TEMPLATES)
    out.set(
      `${t.resource}.${t.group}`,
      new Map((await readStoredObjects(p.etcd, `/registry/${t.resource}/`)).map((o) => [o.key, o.modRevision])),
    );
  return out;
}
/** The admission policies whose v1beta1 the 1.36 -> 1.37 upgrade lets go: the drop check's subjects. */
const MAP = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'].map((r) => `${r}.admissionregistration.k8s.io`);

void test(`svm through a rolling upgrade ${previous} -> ${current}: waits while the API servers disagree, migrates every changed resource once they agree; etcd clean`, async (t) => {
  if (recording) {
    t.skip('recording the built-in (SVM_RECORD_BUILT_IN=1)');
    return;
  }
  const s = await setUp();
  const { p, dir, crd } = s;
  const before = await hashesOf(p, 0);
  // The worker as an operator installs it, with the grants of the resources its default rights leave out.
  await serverSideApply(p.kube, [
    ...readManifests('namespace.yaml'),
    ...readManifests('rbac.yaml'),
    ...readManifests('worker-policy.yaml'),
  ]);
  const grants = [
    ...TEMPLATES.filter((t) => t.group === 'admissionregistration.k8s.io').map((t) => ({
      group: t.group,
      resource: t.resource,
      custom: false,
    })),
    { group: crd.group, resource: crd.plural, custom: true },
  ].flatMap((r) => YAML.parseAllDocuments(grantManifests(r)).map((d) => d.toJS() as Manifest));
  await serverSideApply(p.kube, grants);
  const kubeconfig = writeTokenKubeconfig(
    p.kube.server,
    await serviceAccountToken(p.kube, 'svm-system', 'svm-migrator', 7200),
    'svm-migrator',
    dir,
  );
  let triggerQueue = '';
  await withWorkerAs(
    p,
    kubeconfig,
    async (m, _w, taskQueue) => {
      triggerQueue = taskQueue;
      // A period long enough that a server's entry outlives its restart (entries last three periods): with 2 s, a
      // server restarting gracefully (its lease and endpoint deleted) was absent long enough for a migration to run and
      // succeed without it, whose record the drop check then rightly refuses (a server added since the pass).
      await m.startTrigger({ periodSeconds: TRIGGER_PERIOD_S, maxBackoffSeconds: TRIGGER_PERIOD_S });
      await eventually(
        'the trigger recorded the first hashes',
        async () => (await p.kube.raw('GET', storageStatePath(crd.name))).status === 200,
        120_000,
      );
      // A new trigger migrates every resource once (its persisted versions are Unknown): let that wave end
      // for every resource the test created, so that what runs later is the upgrade's doing.
      const names = [...TEMPLATES.map((t) => `${t.resource}.${t.group}`), crd.name];
      await eventually(
        'the first wave of migrations ended',
        async () => {
          for (const name of names) {
            const res = await p.kube.raw('GET', storageStatePath(name));
            if (res.status !== 200) return false;
            const st = (
              JSON.parse(res.body) as { status?: { persistedStorageVersionHashes?: string[]; currentStorageVersionHash?: string } }
            ).status;
            if (st?.persistedStorageVersionHashes?.length !== 1 || st.persistedStorageVersionHashes[0] !== st.currentStorageVersionHash)
              return false;
            const d = await p.temporal.client.workflow
              .getHandle(`migrate/${name}`)
              .describe()
              .catch(() => undefined);
            if (d?.status.name === 'RUNNING') return false;
          }
          return true;
        },
        300_000,
      );

      // Can v1beta1 of the admission policies be dropped? Not on the previous release: it is their storage version.
      const dropBefore = await checkDrop(p.kube, 'admissionregistration.k8s.io/v1beta1', {
        requestsWindowSeconds: 0,
        migrationOf: migrationRecords(p.temporal.client, Placement.of(taskQueue)),
      });
      console.log(`svm plan --drop admissionregistration.k8s.io/v1beta1 on ${previous}:\n${dropTable(dropBefore)}`);
      assert.equal(dropBefore.verdict, 'NotYet');
      for (const name of MAP) {
        const r = dropBefore.resources.find((x) => x.resource === name);
        assert.equal(r?.storageVersion, 'admissionregistration.k8s.io/v1beta1', name);
        assert.deepEqual(
          r.checks.filter((c) => c.check === 'storageVersion' || c.check === 'migration').map((c) => c.verdict),
          ['NotYet', 'NotYet'],
          name,
        );
      }

      // API server 0 first: the two servers now disagree on every resource whose storage version moved. The keys'
      // revisions in etcd from here on judge "nothing written while they disagree" (below).
      const keysBefore = await keyRevisions(p);
      const windowFrom = Date.now();
      await restartApiserver(dir, 0, [], quiet, { version: current });
      const after0 = await hashesOf(p, 0);
      changed = [...before.keys()].filter((k) => after0.has(k) && after0.get(k) !== before.get(k)).sort();
      console.log(`storageVersionHash changed ${previous} -> ${current}: ${changed.join(', ') || '(none)'}`);
      assert.ok(changed.length > 0, 'some built-in resource changes its storage version between the releases');
      // Objects of every changed resource exist (created on the previous release): a change this test cannot
      // create objects of would otherwise pass unjudged.
      const without = changed.filter((name) => !TEMPLATES.some((t) => `${t.resource}.${t.group}` === name));
      assert.deepEqual(without, [], `changed resources with no objects in this test (add a template): ${without.join(', ')}`);
      // While they disagree, nothing of a changed resource may be written (a migration may wait for agreement). Judged
      // in etcd over the whole interval whose ends this test makes: from before API server 0's upgrade to the start of
      // API server 1's, held for two of the trigger's periods after server 0 serves the new release (until 2026-12-07:
      // 4 samples, 2 s apart, of the migrations' own phase).
      await new Promise((r) => setTimeout(r, 2 * TRIGGER_PERIOD_S * 1000));
      const keysAtAgreement = await keyRevisions(p);
      const written = changed.flatMap((name) => {
        const [was, now] = [keysBefore.get(name) ?? new Map<string, number>(), keysAtAgreement.get(name) ?? new Map<string, number>()];
        return [
          ...[...was].filter(([k, rev]) => now.get(k) !== rev).map(([k, rev]) => `${k}: revision ${rev} -> ${now.get(k) ?? 'gone'}`),
          ...[...now.keys()].filter((k) => !was.has(k)).map((k) => `${k}: new`),
        ];
      });
      assert.ok(
        changed.every((name) => (keysBefore.get(name)?.size ?? 0) > 0),
        'every changed resource has keys in etcd to judge',
      );
      assert.deepEqual(
        written,
        [],
        `nothing of a changed resource written in etcd while the API servers disagreed (${((Date.now() - windowFrom) / 1000).toFixed(1)} s, from before API server 0's upgrade to the start of API server 1's)`,
      );
      const t0 = Date.now();
      await restartApiserver(dir, 1, [], quiet, { version: current });
      // The operator's chart upgrade moves its CRD's storage version; kube-controller-manager is upgraded last.
      await applyCrd(p.kube, crd, 'v2');
      // kube-controller-manager of the new release (no migrator: svm owns the standard objects), the upgrade's last
      // step, as a cluster's (the current release's is built for svm's defer mode anyway).
      await startControllerManager(dir, { builtInMigrator: false, version: current }, quiet);

      for (const name of [...changed, crd.name]) {
        const result = await eventually(
          `svm migrated ${name}`,
          async () => {
            const h = p.temporal.client.workflow.getHandle(`migrate/${name}`);
            const d = await h.describe();
            // A migration started after the upgrade (the first wave's ended before it).
            if (d.status.name !== 'COMPLETED' || d.startTime.getTime() < t0) return undefined;
            return (await h.result()) as { phase: string; message?: string };
          },
          240_000,
        );
        assert.equal(result.phase, 'Succeeded', `${name}: ${result.message}`);
      }
      const seconds = (Date.now() - t0) / 1000;
      await m.stopTrigger();
      const etcd = await etcdEncodings(s, changed);
      const expected = { ...(await storageApiVersions(p, 0, changed)), [crd.name]: `${crd.group}/v2` };
      const counts = Object.fromEntries([...changed.map((n) => [n, PER_RESOURCE] as const), [crd.name, CRD_OBJECTS] as const]);
      assertNewEncoding('svm', etcd, expected, counts);
      svmEtcd = runNeutral(etcd, crd);
      assert.deepEqual((await getCrd(p.kube, { group: crd.group, resource: crd.plural })).status?.storedVersions, ['v2']);

      // Upgraded and migrated: the admission policies' v1beta1 can go (stored as v1 on both servers, a whole pass
      // on record in their migration workflows in Temporal, no managedFields and no request at v1beta1). The rest of
      // the group is "not yet" for one reason only: the worker was not granted it, so no pass is on record and its
      // StorageState stays [Unknown] (nothing records where objects written before were stored).
      const dropAfter = await checkDrop(p.kube, 'admissionregistration.k8s.io/v1beta1', {
        requestsWindowSeconds: 2,
        migrationOf: migrationRecords(p.temporal.client, Placement.of(taskQueue)),
      });
      console.log(`svm plan --drop admissionregistration.k8s.io/v1beta1 on ${current}, migrated:\n${dropTable(dropAfter)}`);
      for (const name of MAP) {
        const r = dropAfter.resources.find((x) => x.resource === name);
        assert.equal(r?.verdict, 'Ready', `${name}: ${JSON.stringify(r?.checks)}`);
        assert.equal(r.storageVersion, 'admissionregistration.k8s.io/v1');
        assert.equal(r.requests.length, 2);
      }
      const granted = new Set(TEMPLATES.filter((t) => t.group === 'admissionregistration.k8s.io').map((t) => `${t.resource}.${t.group}`));
      for (const r of dropAfter.resources.filter((x) => !granted.has(x.resource))) {
        const notYet = r.checks.filter((c) => c.verdict !== 'Ready');
        assert.deepEqual(
          notYet.map((c) => c.check),
          ['migration'],
          `${r.resource}: ${JSON.stringify(r.checks)}`,
        );
        // No whole pass on record in Temporal (the worker may not migrate it), and the mirror agrees.
        assert.match(notYet[0]!.reason, /; StorageState persistedStorageVersionHashes \[Unknown\]/);
      }

      // The worker was started on the previous release: it takes a storagemigration.k8s.io/v1 object now that the
      // servers serve v1 (the served version is looked up again; the bridge watches the new one).
      const standard = `${s.tag}-after-upgrade`;
      await p.kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
        body: JSON.stringify({
          apiVersion: 'storagemigration.k8s.io/v1',
          kind: 'StorageVersionMigration',
          metadata: { name: standard },
          spec: { resource: { group: 'scheduling.k8s.io', resource: 'priorityclasses' } },
        }),
      });
      const taken = await eventually(
        'the worker started on the previous release took the v1 object',
        async () => {
          const o = await findStandardMigration(p.kube, standard);
          return o?.status?.conditions?.find((c) => c.type === 'Succeeded' && c.status === 'True') && o;
        },
        240_000,
      );
      assert.ok(
        (taken.metadata.managedFields ?? []).some((f) => f.manager === 'svm' && f.subresource === 'status'),
        'svm wrote its status',
      );
      recordResult('svm', {
        resources: changed.length + 1,
        secondsFromLastServerToAllMigrated: Number(seconds.toFixed(1)),
        etcd,
        expected,
        line: `svm (trigger, ${changed.length + 1} resources): ${seconds.toFixed(1)} s from the last API server's upgrade to every migration done; etcd after: ${JSON.stringify(etcd)}; a v1 object taken by the worker started on ${previous}`,
      });
    },
    // As deploy/ but SVM_REQUIRE_STATIC_FENCE: the admission policies' migration this upgrade needs runs on servers
    // that have no manifest-loaded fence (1.36 cannot load one), as docs/security.md says to run it there.
    { settings: { maxConcurrentChunks: 8, bridge: true, standardMigrations: 'own', requireFence: true } },
  )
    .then(() => rollbackWhileStopped(p, dir, kubeconfig, triggerQueue))
    .finally(() => removeTokenKubeconfig(kubeconfig));
  await p.close();
});

/** The identity leases of the API servers, as `<name>=<holderIdentity>`. */
async function holders(p: TestPlane): Promise<string[]> {
  const leases = await p.kube.getJson<{ items: Array<{ metadata: { name: string }; spec: { holderIdentity?: string } }> }>(
    '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases',
    { labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver' },
  );
  return leases.items.map((l) => `${l.metadata.name}=${l.spec.holderIdentity}`).sort();
}

/**
 * svm stopped (no worker, no trigger), API server 1 rolled back to the previous release and forward again: the
 * StorageStates still say migrated, but the record's agreement no longer holds (server 1 is another process), so
 * the admission policies' v1beta1 is not ready; a migration records a new pass and it is ready again; and every
 * object then reads and applies at v1.
 */
async function rollbackWhileStopped(p: TestPlane, dir: string, kubeconfig: string, triggerQueue: string): Promise<void> {
  // Each record counts only on the task queue of the workers that made it (src/kube/migration-record.ts).
  const drop = (taskQueue: string) =>
    checkDrop(p.kube, 'admissionregistration.k8s.io/v1beta1', {
      requestsWindowSeconds: 2,
      migrationOf: migrationRecords(p.temporal.client, Placement.of(taskQueue)),
    });
  const migrationOf = (report: Awaited<ReturnType<typeof drop>>, name: string) =>
    report.resources.find((r) => r.resource === name)?.checks.find((c) => c.check === 'migration');
  const before = await holders(p);
  await restartApiserver(dir, 1, [], quiet, { version: previous });
  await restartApiserver(dir, 1, [], quiet, { version: current });
  // Judged once server 1 is back in view: listed and holding its identity lease again, as another process.
  await eventually(
    'server 1 listed and holding a new identity lease',
    async () => {
      const now = await holders(p);
      const listed = await p.kube.getJson<{ items: Array<{ endpoints?: Array<{ addresses: string[] }> }> }>(
        '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
        { labelSelector: 'kubernetes.io/service-name=kubernetes' },
      );
      const addresses = listed.items.flatMap((e) => e.endpoints ?? []).flatMap((e) => e.addresses);
      return now.length === before.length && now.join() !== before.join() && addresses.length === 2;
    },
    120_000,
  );
  const rolled = await drop(triggerQueue);
  console.log(`svm plan --drop admissionregistration.k8s.io/v1beta1 after a rollback and roll-forward, svm stopped:\n${dropTable(rolled)}`);
  for (const name of MAP) {
    const m = migrationOf(rolled, name);
    assert.equal(m?.verdict, 'NotYet', `${name}: ${JSON.stringify(m)}`);
    assert.match(m.reason, /under an agreement that no longer holds \(the API server processes/);
    assert.match(m.reason, /says objects are persisted only in .*, but that mirror is the worker's token's to write/);
  }
  // svm again: a migration of each records a pass under the agreement of now.
  let queue = '';
  await withWorkerAs(
    p,
    kubeconfig,
    async (m, _w, taskQueue) => {
      queue = taskQueue;
      for (const name of MAP) {
        const result = await migrationResult(await m.start(name));
        assert.equal(result.phase, 'Succeeded', `${name}: ${result.message}`);
      }
    },
    { settings: { requireFence: true } },
  );
  const again = await drop(queue);
  for (const name of MAP) assert.equal(migrationOf(again, name)?.verdict, 'Ready', `${name}: ${JSON.stringify(migrationOf(again, name))}`);
  // Every object reads at v1 and applies (server-side, as its own manager) at v1.
  for (const name of MAP) {
    const resource = name.split('.')[0]!;
    const path = `/apis/admissionregistration.k8s.io/v1/${resource}`;
    const list = await p.kube.getJson<{ items: Array<{ apiVersion?: string; kind?: string; metadata: { name: string }; spec: unknown }> }>(
      path,
    );
    assert.ok(list.items.length > 0, `${name}: objects to read`);
    for (const o of list.items) {
      const kind = resource === 'mutatingadmissionpolicies' ? 'MutatingAdmissionPolicy' : 'MutatingAdmissionPolicyBinding';
      const res = await p.kube.raw('PATCH', `${path}/${o.metadata.name}`, {
        query: { fieldManager: 'svm-test-readback', force: 'true' },
        body: JSON.stringify({ apiVersion: 'admissionregistration.k8s.io/v1', kind, metadata: { name: o.metadata.name }, spec: o.spec }),
        contentType: 'application/apply-patch+yaml',
      });
      assert.equal(res.status, 200, `${name} ${o.metadata.name}: apply at v1 answered ${res.status} ${res.body}`);
    }
  }
}

void test(`the built-in migrator alone through the same upgrade (its recorded reference): one storagemigration.k8s.io/v1 object per changed resource after the upgrade`, async () => {
  if (!recording) {
    // svm's run held to the built-in's recorded one: the same upgrade (the same storage versions moved), every
    // built-in migration Succeeded, and the same encodings in etcd after.
    const ref = reference!;
    assert.ok(changed.length > 0 && svmEtcd, 'the svm run found the changed resources and migrated them');
    assert.deepEqual(
      changed,
      ref.changed,
      `the storage versions ${previous} -> ${current} moves are those the built-in's run met (${recordedNote(ref)})`,
    );
    assert.deepEqual(
      Object.entries(ref.outcomes).filter(([, o]) => o !== 'Succeeded'),
      [],
      'every built-in migration Succeeded (recorded)',
    );
    assert.deepEqual(svmEtcd, runNeutral(ref.etcd), `svm leaves etcd as the built-in did (${recordedNote(ref)})`);
    recordResult('builtIn', {
      recorded: recordedNote(ref),
      objects: Object.keys(ref.outcomes).length,
      secondsToAllFinished: ref.secondsToAllFinished,
      outcomes: ref.outcomes,
      etcd: ref.etcd,
      storedVersions: ref.storedVersions,
      line: `${ref.line} (${recordedNote(ref)})`,
    });
    return;
  }
  // Recording: the built-in alone, as its live control ran (the svm run is skipped: the changed resources found here).
  const s = await setUp();
  const { p, dir, crd } = s;
  const before = await hashesOf(p, 0);
  await restartApiserver(dir, 0, [], quiet, { version: current });
  const after0 = await hashesOf(p, 0);
  changed = [...before.keys()].filter((k) => after0.has(k) && after0.get(k) !== before.get(k)).sort();
  assert.ok(changed.length > 0, 'some built-in resource changes its storage version between the releases');
  await restartApiserver(dir, 1, [], quiet, { version: current });
  await applyCrd(p.kube, crd, 'v2');
  await startControllerManager(dir, { builtInMigrator: true, version: current }, quiet);
  const t0 = Date.now();
  const names: Array<[string, string]> = [];
  for (const full of [...changed, crd.name]) {
    const dot = full.indexOf('.');
    const name = `${s.tag}-${full.slice(0, dot)}`.slice(0, 63);
    names.push([full === crd.name ? 'the CRD' : full, name]);
    await p.kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
      body: JSON.stringify({
        apiVersion: 'storagemigration.k8s.io/v1',
        kind: 'StorageVersionMigration',
        metadata: { name },
        spec: { resource: { group: full.slice(dot + 1), resource: full.slice(0, dot) } },
      }),
    });
  }
  const outcomes: Record<string, string> = {};
  const lines: string[] = [];
  for (const [resource, name] of names) {
    const done = await eventually(
      `the built-in finished ${name}`,
      async () => {
        const o = await findStandardMigration(p.kube, name);
        return o?.status?.conditions?.find((x) => (x.type === 'Succeeded' || x.type === 'Failed') && x.status === 'True');
      },
      240_000,
    );
    outcomes[resource] = done.type;
    lines.push(`${resource}: ${done.type} (${done.message})`);
  }
  const seconds = (Date.now() - t0) / 1000;
  const etcdNow = await etcdEncodings(s, changed);
  const etcd = runNeutral(etcdNow, crd);
  const crdAfter = await getCrd(p.kube, { group: crd.group, resource: crd.plural });
  // Its outcome, judged as svm's: every object Succeeded, etcd holds the storage version discovery names now.
  assert.deepEqual(
    Object.entries(outcomes).filter(([, o]) => o !== 'Succeeded'),
    [],
    `every built-in migration Succeeded: ${lines.join('; ')}`,
  );
  const expected = { ...(await storageApiVersions(p, 0, changed)), [crd.name]: `${crd.group}/v2` };
  const counts = Object.fromEntries([...changed.map((n) => [n, PER_RESOURCE] as const), [crd.name, CRD_OBJECTS] as const]);
  assertNewEncoding('the built-in', etcdNow, expected, counts);
  assert.deepEqual(crdAfter.status?.storedVersions, ['v2']);
  const line = `built-in alone (${names.length} objects created after the upgrade): ${seconds.toFixed(1)} s to every object finished; ${lines.join('; ')}; etcd after: ${JSON.stringify(etcd)}; CRD storedVersions ${JSON.stringify(crdAfter.status?.storedVersions)}`;
  recordResult('builtIn', { objects: names.length, secondsToAllFinished: Number(seconds.toFixed(1)), outcomes, etcd, line });
  recordReference('upgrade', {
    from: previous,
    to: current,
    recordedAt: new Date().toISOString(),
    changed,
    outcomes,
    secondsToAllFinished: Number(seconds.toFixed(1)),
    etcd,
    storedVersions: crdAfter.status?.storedVersions,
    line,
  });
  await p.close();
});
