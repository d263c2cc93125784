/**
 * `svm plan` and the pre-upgrade Job against the real plane, run as a user
 * would: `node bin/svm.js ...` as a subprocess with KUBECONFIG and
 * TEMPORAL_ADDRESS in its environment.
 *
 * - plan lists a CRD left at two stored versions with its object count, not
 *   a settled one, exits 1 (consistently with what it lists), and no longer
 *   lists it once migrated; every plan here runs as a ServiceAccount that may
 *   only get and list, so plan provably writes nothing;
 * - API servers that disagree (one restarted with an older
 *   --min-compatibility-version) block: exit 2, naming both servers;
 * - errors exit 3: an API that cannot be reached, bad flags;
 * - `svm plan --drop <group>/<version>`: a CRD written at v1 by server-side
 *   apply is "not yet" with each reason (as the same read-only identity,
 *   requests unknown until it may read /metrics), "ready" once migrated and
 *   its objects' owner applies at v2, the same report from the
 *   checkVersionDrop workflow; with v1 removed every object reads and
 *   applies, while on a CRD removed too early (managedFields still at v1)
 *   server-side apply fails, as the check said it would;
 * - `svm migrate <crd> --wait` runs as the Job's ServiceAccount with the
 *   RBAC of deploy/pre-upgrade-job.yaml applied as written (a worker
 *   running), proving that role suffices; the same token resolves every
 *   migratable resource (what `--all` asks of Kubernetes) and is refused
 *   what it should not have.
 */
import { recordHistories, recording } from './helpers/histories';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { Migrator, migratableResources, type Plan } from '../src/client';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import {
  DROP_CHECK_WORKFLOW_TYPE,
  DropReportSchema,
  MANAGED_FIELDS_WORKFLOW_TYPE,
  managedFieldsWorkflowId,
  ManagedFieldsResultSchema,
  type DropCheckName,
  type DropReport,
  type DropVerdict,
  type ManagedFieldsResult,
} from '../src/contract/drop';
import YAML from 'yaml';
import { setCrdStoredVersions } from '../src/kube/crds';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, stopApiserver } from '../src/dev/plane';
import { KubeClient } from '../src/kube/client';
import { applyCrd, createObjects, deleteCrd, ensureNamespace, parallel, testCrd, type TestCrd } from './helpers/crd';
import { startConversionWebhook, webhookHost } from './helpers/webhook';
import { DISAGREEING, OLD_ENCODING_FLAGS } from './helpers/old-encoding';
import { endLeftovers, eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  deleteManifests,
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  whoAmI,
  withWorkerAs,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { migrationResult } from './helpers/waits';

const ROOT = path.resolve(__dirname, '..');
const SVM = path.join(ROOT, 'bin', 'svm.js');
const NS = 'svm-system';
const JOB_SA = 'svm-pre-upgrade';
const READER_SA = 'svm-plan-reader';

let plane: TestPlane;
let jobKubeconfig: string;
let readerKubeconfig: string;
let jobKube: KubeClient;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `node bin/svm.js args` with the given environment on top of this process's; resolves with its exit code. */
function svm(args: string[], env: Record<string, string>, timeoutMs = 180_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [SVM, ...args],
      { cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return reject(new Error(`svm ${args.join(' ')}: ${err.message}\n${stderr}`));
        resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

/** `svm plan -o json` as the read-only ServiceAccount. */
async function planJson(extra: string[] = [], env: Record<string, string> = {}): Promise<{ plan: Plan; run: Run }> {
  const run = await svm(['plan', '-o', 'json', ...extra], { KUBECONFIG: readerKubeconfig, ...env });
  assert.ok([0, 1, 2].includes(run.code), `svm plan exited ${run.code}: ${run.stderr}`);
  const plan = JSON.parse(run.stdout) as Plan;
  // The exit code is the plan's, and it follows from what is listed.
  assert.equal(run.code, plan.exitCode);
  assert.equal(
    plan.exitCode,
    plan.items.some((i) => i.action === 'blocked') ? 2 : plan.items.length > 0 ? 1 : 0,
    JSON.stringify(plan.items, null, 2),
  );
  return { plan, run };
}

const resourceOf = (c: TestCrd) => `${c.plural}.${c.group}`;

before(async () => {
  plane = await testPlane();
  await endLeftovers(plane);
  await serverSideApply(plane.kube, readManifests('namespace.yaml'));
  await installCrds(plane.kube); // StorageStates served (plan reads them), StorageVersionMigrations (the Job may not create one)
  // The Job's identity exactly as deploy/pre-upgrade-job.yaml writes it.
  const jobRbac = readManifests('pre-upgrade-job.yaml').filter((o) => o.kind !== 'Job');
  assert.deepEqual(
    jobRbac.map((o) => `${o.kind}/${o.metadata.name}`),
    ['ServiceAccount/svm-pre-upgrade', 'ClusterRole/svm-pre-upgrade', 'ClusterRoleBinding/svm-pre-upgrade'],
  );
  await serverSideApply(plane.kube, jobRbac);
  jobKubeconfig = writeTokenKubeconfig(plane.kube.server, await serviceAccountToken(plane.kube, NS, JOB_SA), JOB_SA);
  jobKube = KubeClient.fromKubeconfig(jobKubeconfig);
  // Whoever runs plan here may only get and list: a write would be refused and fail the plan.
  const reader: Manifest[] = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: READER_SA, namespace: NS } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: READER_SA },
      rules: [
        { nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*'], verbs: ['get'] },
        { apiGroups: ['*'], resources: ['*'], verbs: ['get', 'list'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: READER_SA },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: READER_SA },
      subjects: [{ kind: 'ServiceAccount', name: READER_SA, namespace: NS }],
    },
  ];
  await serverSideApply(plane.kube, reader);
  readerKubeconfig = writeTokenKubeconfig(plane.kube.server, await serviceAccountToken(plane.kube, NS, READER_SA), READER_SA);
});

after(async () => {
  jobKube?.close();
  removeTokenKubeconfig(jobKubeconfig);
  removeTokenKubeconfig(readerKubeconfig);
  await plane?.close();
});

void test('svm plan lists a CRD left at two stored versions with its count, not a settled one, and no longer once it is migrated', async () => {
  const left = testCrd(`${uniq('plan-left')}.svm.test`);
  const settled = testCrd(`${uniq('plan-settled')}.svm.test`);
  const ns = uniq('plan');
  await applyCrd(plane.kube, left, 'v1');
  await createObjects(plane.kube, left, 'v1', 150, { namespace: ns });
  await applyCrd(plane.kube, left, 'v2');
  await applyCrd(plane.kube, settled, 'v1');
  await createObjects(plane.kube, settled, 'v1', 20, { namespace: ns });

  const { plan, run } = await planJson();
  const mine = plan.items.filter((i) => [resourceOf(left), resourceOf(settled)].includes(i.resource));
  assert.deepEqual(mine, [
    {
      resource: resourceOf(left),
      group: left.group,
      name: left.plural,
      action: 'migrate',
      sources: ['storedVersions'],
      reasons: ['CRD status.storedVersions [v1, v2] holds v1 besides the storage version v2'],
      storedVersions: ['v1', 'v2'],
      storageVersion: 'v2',
      objects: 150,
      estimateSeconds: 1.5,
      // A custom resource: outside the shipped worker's rights until granted.
      needsGrant: true,
    },
  ]);
  // The exact outcome: nothing on this plane blocks (its API servers agree: the disagreement test restores them and
  // waits for agreement), so a listed migration is exit 1, "all can run now".
  assert.deepEqual(
    plan.items.filter((i) => i.action === 'blocked').map((i) => `${i.resource}: ${i.blockedBy}`),
    [],
    'nothing blocked on the plane',
  );
  assert.equal(run.code, 1, `exit ${run.code} with ${resourceOf(left)} listed`);
  assert.equal(plan.verdict, 'MigrationsNeeded');
  assert.equal(plan.qps, 100);
  assert.match(plan.checked, /API server/);

  // The table, and another budget.
  const table = await svm(['plan', '--qps', '10'], { KUBECONFIG: readerKubeconfig });
  assert.equal(table.code, run.code, table.stderr);
  assert.match(table.stdout, /^RESOURCE +ACTION +OBJECTS +ESTIMATE +WHY$/m);
  assert.match(
    table.stdout,
    new RegExp(`^${resourceOf(left).replace(/\./g, '\\.')} +migrate +150 +15s +storedVersions \\[v1,v2\\], storage v2$`, 'm'),
  );
  assert.doesNotMatch(table.stdout, new RegExp(settled.group.replace(/\./g, '\\.')));
  assert.match(table.stdout, new RegExp(`^  svm grant ${resourceOf(left).replace(/\./g, '\\.')} \\| kubectl apply -f -$`, 'm'));
  assert.match(table.stdout, /at 10 updates\/s: migrations needed, all can run now \(exit 1\)\n$/);

  // Migrated (a worker and the typed API), it is off the list; etcd agrees.
  const result = await withWorker(plane, async (m) => {
    const typed = await m.plan({ qps: 50 });
    assert.equal(
      typed.items.find((i) => i.resource === resourceOf(left))?.estimateSeconds,
      3,
      'Migrator.plan() sees the same, at its own qps',
    );
    return migrationResult(await m.start(resourceOf(left)));
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.deepEqual((await storedVersions(plane.etcd, { group: left.group, resource: left.plural, custom: true })).byApiVersion, {
    [`${left.group}/v2`]: 150,
  });
  const afterwards = await planJson();
  assert.equal(
    afterwards.plan.items.find((i) => i.resource === resourceOf(left)),
    undefined,
    'still listed after its migration',
  );
  assert.equal(
    afterwards.plan.items.find((i) => i.resource === resourceOf(settled)),
    undefined,
  );
});

void test('svm plan lists resources whose StorageState holds an old or Unknown hash, not one persisted in the served hash', async () => {
  const unknown = testCrd(`${uniq('plan-ss')}.svm.test`);
  const settled = testCrd(`${uniq('plan-ss-ok')}.svm.test`);
  const ns = uniq('plan-ss');
  for (const c of [unknown, settled]) {
    await applyCrd(plane.kube, c, 'v1');
    await createObjects(plane.kube, c, 'v1', 7, { namespace: ns });
  }
  const served = async (c: TestCrd) =>
    (await plane.kube.getJson<{ resources: Array<{ name: string; storageVersionHash?: string }> }>(`/apis/${c.group}/v1`)).resources.find(
      (r) => r.name === c.plural,
    )!.storageVersionHash!;
  const states: Array<[string, { group?: string; resource: string }, string[]]> = [
    [resourceOf(unknown), { group: unknown.group, resource: unknown.plural }, ['Unknown']],
    [resourceOf(settled), { group: settled.group, resource: settled.plural }, [await served(settled)]],
    [`gone.${uniq('plan-ss')}.svm.test`, { group: 'nowhere.svm.test', resource: 'gone' }, ['Unknown']],
  ];
  const path = (name: string) => `/apis/migration.k8s.io/v1alpha1/storagestates/${name}`;
  try {
    for (const [name, resource, persisted] of states) {
      await plane.kube.request('POST', '/apis/migration.k8s.io/v1alpha1/storagestates', {
        body: JSON.stringify({ apiVersion: 'migration.k8s.io/v1alpha1', kind: 'StorageState', metadata: { name }, spec: { resource } }),
      });
      await plane.kube.patchStatus(path(name), { persistedStorageVersionHashes: persisted, currentStorageVersionHash: persisted[0] });
    }
    const { plan } = await planJson();
    const item = plan.items.find((i) => i.resource === resourceOf(unknown));
    assert.deepEqual(
      item && {
        sources: item.sources,
        persisted: item.persistedStorageVersionHashes,
        objects: item.objects,
        action: item.action,
        reasons: item.reasons,
      },
      {
        sources: ['storageState'],
        persisted: ['Unknown'],
        objects: 7,
        action: 'migrate',
        reasons: ['StorageState persistedStorageVersionHashes [Unknown]: objects may be stored in any version'],
      },
    );
    assert.equal(
      plan.items.find((i) => i.resource === resourceOf(settled)),
      undefined,
    );
    assert.ok(
      plan.notes.includes(`StorageState ${states[2]![0]} names a resource the API servers do not serve: ignored`),
      plan.notes.join('\n'),
    );
  } finally {
    for (const [name] of states) await plane.kube.raw('DELETE', path(name));
  }
});

void test('API servers that disagree block: exit 2, naming both servers', async () => {
  assert.equal(plane.shape, 'cluster', `servers disagree only where each has its own address: ${plane.state.shapeReason}`);
  const [a, b] = plane.apiserverAddresses;
  // Killed (lease and endpoint stay), then back with an older compatibility version: it encodes MutatingAdmissionPolicyBindings as v1beta1.
  await stopApiserver(plane.dir, 1, { kill: true });
  try {
    await restartApiserver(plane.dir, 1, OLD_ENCODING_FLAGS, () => undefined);
    const { plan } = await eventually(
      'plan to see the disagreement',
      async () => {
        const p = await planJson();
        return p.plan.items.some((i) => i.resource === DISAGREEING.name) ? p : undefined;
      },
      60_000,
    );
    assert.equal(plan.exitCode, 2);
    assert.equal(plan.verdict, 'Blocked');
    const dc = plan.items.find((i) => i.resource === DISAGREEING.name)!;
    assert.equal(dc.action, 'blocked');
    assert.deepEqual(dc.sources, ['disagreement']);
    assert.match(
      dc.blockedBy!,
      new RegExp(
        `API servers disagree on the storage version of mutatingadmissionpolicybindings\\.admissionregistration\\.k8s\\.io: ${a}:6443=\\S+ \\(admissionregistration\\.k8s\\.io/v1\\), ${b}:6443=\\S+ \\(admissionregistration\\.k8s\\.io/v1beta1\\)`,
      ),
    );
    assert.equal(typeof dc.objects, 'number');
    const table = await svm(['plan'], { KUBECONFIG: readerKubeconfig });
    assert.equal(table.code, 2, table.stderr);
    assert.match(table.stdout, /^mutatingadmissionpolicybindings\.admissionregistration\.k8s\.io +blocked +\d+ +\S+ +servers disagree$/m);
    assert.match(table.stdout, /^mutatingadmissionpolicybindings\.admissionregistration\.k8s\.io blocked: API servers disagree/m);
    assert.match(table.stdout, /blocked: \d+ resource\(s\) cannot be migrated now \(see above\) \(exit 2\)\n$/);
  } finally {
    await restartApiserver(plane.dir, 1, [], () => undefined);
  }
  // Agreement again: no longer blocked (a StorageState an earlier test left, e.g. the trigger's walkthrough ending at
  // v1beta1, may still list it as a migration to run).
  await eventually(
    'agreement again',
    async () => !(await planJson()).plan.items.some((i) => i.resource === DISAGREEING.name && i.action === 'blocked'),
    60_000,
  );
});

void test('errors exit 3 with a message, bad flags before anything happens', async () => {
  const nowhere = writeTokenKubeconfig('https://127.0.0.1:1', 'x', 'nowhere');
  const cases = [
    [['--qps', '-1'], /error: option '--qps <n>' argument '-1' is invalid\. --qps must be a whole number, got "-1"/],
    [['-o', 'bogus'], /error: option '-o, --output <format>' argument 'bogus' is invalid\. Allowed choices are text, json, yaml, name\./],
    [['secrets'], /error: too many arguments for 'plan'/],
  ] as const;
  // The runs are independent processes: at once (each CLI start is a second or two of the 2-core machine's time).
  const [unreachable, help, ...refused] = await Promise.all([
    svm(['plan'], { KUBECONFIG: nowhere }).finally(() => removeTokenKubeconfig(nowhere)),
    svm(['plan', '--help'], {}),
    // An unreachable API: had anything been attempted, the message would say so.
    ...cases.map(([args]) => svm(['plan', ...args], { KUBECONFIG: '/nonexistent/kubeconfig' })),
  ]);
  assert.equal(unreachable.code, 3);
  assert.equal(unreachable.stdout, '');
  assert.match(unreachable.stderr, /^error: .*(ECONNREFUSED|connect|refused)/i);
  for (const [i, [args, message]] of cases.entries()) {
    const r = refused[i]!;
    assert.equal(r.code, 3, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /nonexistent/);
    assert.equal(r.stdout, '');
  }
  assert.equal(help.code, 0);
  for (const line of [/0 +nothing to migrate/, /1 +migrations needed, and all of them can run now/, /2 +something blocks/, /3 +error/])
    assert.match(help.stdout, line);
});

/** `svm plan --drop gv -o json` as the read-only ServiceAccount; the exit code is the report's. */
async function dropJson(gv: string, extra: string[] = [], env: Record<string, string> = {}): Promise<{ report: DropReport; run: Run }> {
  const run = await svm(['plan', '--drop', gv, '-o', 'json', ...extra], { KUBECONFIG: readerKubeconfig, ...env });
  assert.ok([0, 1, 2].includes(run.code), `svm plan --drop exited ${run.code}: ${run.stderr}`);
  const report = DropReportSchema.parse(JSON.parse(run.stdout));
  assert.equal(run.code, report.exitCode, run.stdout);
  return { report, run };
}

/** Each check's verdict of one resource of a report. */
function verdicts(report: DropReport, resource: string): Partial<Record<DropCheckName, DropVerdict>> & { resource?: DropVerdict } {
  const r = report.resources.find((x) => x.resource === resource);
  assert.ok(r, `${resource} is in the report: ${report.resources.map((x) => x.resource).join(', ')}`);
  return { resource: r.verdict, ...Object.fromEntries(r.checks.map((c) => [c.check, c.verdict])) };
}
const reasonOf = (report: DropReport, resource: string, check: DropCheckName) =>
  report.resources.find((x) => x.resource === resource)!.checks.find((c) => c.check === check)!.reason;

/** Server-side apply of one test object at a version, as field manager `manager`. */
function applyObject(c: TestCrd, ns: string, name: string, version: 'v1' | 'v2', manager: string, spec: unknown) {
  return plane.kube.raw('PATCH', `/apis/${c.group}/${version}/namespaces/${ns}/${c.plural}/${name}`, {
    body: JSON.stringify({ apiVersion: `${c.group}/${version}`, kind: c.kind, metadata: { name, namespace: ns }, spec }),
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: manager },
  });
}

void test('svm plan --drop: not yet with each reason, ready once migrated and applied at v2, the same as a workflow; v1 removed, every object reads and applies', async () => {
  const c = testCrd(`${uniq('drop')}.svm.test`);
  const ns = uniq('drop');
  const gv = `${c.group}/v1`;
  const N = 30;
  const names = Array.from({ length: N }, (_, i) => `w-${i}`);
  await applyCrd(plane.kube, c, 'v1');
  await ensureNamespace(plane.kube, ns);
  await parallel(N, 8, async (i) => {
    const res = await applyObject(c, ns, names[i]!, 'v1', 'drop-owner', { index: i });
    assert.equal(res.status, 201, res.body);
  });
  await applyCrd(plane.kube, c, 'v2');

  // The read-only identity may not read /metrics: requests unknown on each server; the rest not yet.
  const first = (await dropJson(gv, ['--requests-window', '0'])).report;
  assert.equal(first.verdict, 'NotYet');
  assert.deepEqual(verdicts(first, c.name), {
    resource: 'NotYet',
    storageVersion: 'Ready',
    migration: 'NotYet',
    storedVersions: 'NotYet',
    managedFields: 'NotYet',
    requests: 'Unknown',
    conversionWebhook: 'Ready',
  });
  const item = first.resources.find((r) => r.resource === c.name)!;
  assert.deepEqual([item.storageVersion, item.objects, item.managedFieldsNaming, item.managers], [`${c.group}/v2`, N, N, ['drop-owner']]);
  assert.equal(
    reasonOf(first, c.name, 'storedVersions'),
    `status.storedVersions [v1, v2] still names v1: objects may be stored at v1 until a whole pass under agreement prunes it (svm migrate ${c.name})`,
  );
  assert.match(
    reasonOf(first, c.name, 'managedFields'),
    new RegExp(`^${N} of ${N} objects have managedFields entries at ${gv.replace(/\./g, '\\.')} \\(managers: drop-owner\\)`),
  );
  assert.deepEqual(
    item.requests.map((r) => [r.verdict, r.reason]),
    plane.apiserverAddresses.map(() => ['Unknown', 'may not read /metrics (it needs get on the non-resource URL /metrics; docs/usage.md)']),
  );

  // Granted get on /metrics, the same identity sees the requests at v1 on the API servers (window 0: since they started).
  await serverSideApply(plane.kube, [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: `${READER_SA}-metrics` },
      rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `${READER_SA}-metrics` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${READER_SA}-metrics` },
      subjects: [{ kind: 'ServiceAccount', name: READER_SA, namespace: NS }],
    },
  ]);
  const second = await eventually(
    'the reader may read /metrics',
    async () => {
      const r = (await dropJson(gv, ['--requests-window', '0'])).report;
      return verdicts(r, c.name).requests !== 'Unknown' ? r : undefined;
    },
    30_000,
  );
  assert.equal(verdicts(second, c.name).requests, 'NotYet');
  const since = second.resources.find((r) => r.resource === c.name)!.requests;
  assert.equal(since.length, plane.apiserverAddresses.length);
  assert.ok(since.reduce((n, r) => n + r.requestsSinceStart!, 0) >= N, JSON.stringify(since));
  const notYetTable = await svm(['plan', '--drop', gv, '--requests-window', '0'], { KUBECONFIG: readerKubeconfig });
  assert.equal(notYetTable.code, 1, notYetTable.stderr);
  console.log(`$ svm plan --drop ${gv} --requests-window 0   # before the migration\n${notYetTable.stdout}`);

  // Migrated (a worker), then the check as a workflow: storedVersions and the migration are ready; the objects'
  // managedFields still name v1.
  // The CLI reads records on its TEMPORAL_TASK_QUEUE: the workers' (src/kube/migration-record.ts).
  let migratedOn = '';
  const migrated = await withWorker(plane, async (m, taskQueue) => {
    migratedOn = taskQueue;
    const result = await migrationResult(await m.start(c.name));
    assert.equal(result.phase, 'Succeeded', result.message);
    // A bad input is refused before anything is read.
    const badId = uniq('drop-bad');
    await assert.rejects(
      plane.temporal.client.workflow.execute(DROP_CHECK_WORKFLOW_TYPE, {
        taskQueue,
        workflowId: badId,
        args: [{ groupVersion: 'v1' }],
      }),
      (err: unknown) =>
        err instanceof WorkflowFailedError &&
        err.cause instanceof ApplicationFailure &&
        err.cause.type === 'InvalidInput' &&
        /is not <group>\/<version>/.test(err.cause.message),
    );
    const checkId = uniq('drop-check');
    const report = (await plane.temporal.client.workflow.execute(DROP_CHECK_WORKFLOW_TYPE, {
      taskQueue,
      workflowId: checkId,
      args: [{ groupVersion: gv, requestsWindowSeconds: 2 }],
    })) as DropReport;
    // The replay test's fixtures (test/unit-replay.test.ts): both runs, recorded with SVM_RECORD_HISTORIES=1.
    if (recording())
      for (const [id, scenario] of [
        [badId, 'a bad input is refused before anything is read'],
        [checkId, 'a report of a migrated resource'],
      ] as const) {
        const runId = (await plane.temporal.client.workflow.getHandle(id).describe()).runId;
        recordHistories(plane.temporal.address, 'drop', scenario, id, runId);
      }
    return report;
  });
  DropReportSchema.parse(migrated);
  assert.deepEqual(verdicts(migrated, c.name), {
    resource: 'NotYet',
    storageVersion: 'Ready',
    migration: 'Ready',
    storedVersions: 'Ready',
    managedFields: 'NotYet',
    requests: 'Ready',
    conversionWebhook: 'Ready',
  });
  assert.match(
    reasonOf(migrated, c.name, 'migration'),
    new RegExp(`its last migration workflow migrate/${c.name.replace(/\./g, '\\.')} ended Succeeded at `),
  );
  assert.equal(migrated.exitCode, 1);

  // The owner applies at v2: its managedFields entries move to v2. Then every check is ready, in the CLI and the workflow.
  await parallel(N, 8, async (i) => {
    const res = await applyObject(c, ns, names[i]!, 'v2', 'drop-owner', { index: i });
    assert.equal(res.status, 200, res.body);
  });
  const ready = (
    await dropJson(gv, ['--requests-window', '3'], { TEMPORAL_ADDRESS: plane.temporal.address, TEMPORAL_TASK_QUEUE: migratedOn })
  ).report;
  assert.equal(ready.verdict, 'Ready', JSON.stringify(ready, null, 2));
  assert.deepEqual(new Set(Object.values(verdicts(ready, c.name))), new Set(['Ready']));
  assert.match(reasonOf(ready, c.name, 'requests'), /^no client used .* in the last 3s: /);
  const table = await svm(['plan', '--drop', gv, '--requests-window', '1'], {
    KUBECONFIG: readerKubeconfig,
    TEMPORAL_ADDRESS: plane.temporal.address,
    TEMPORAL_TASK_QUEUE: migratedOn,
  });
  assert.equal(table.code, 0, table.stdout + table.stderr);
  console.log(`$ svm plan --drop ${gv} --requests-window 1   # migrated, applied at v2\n${table.stdout}`);
  assert.match(table.stdout, new RegExp(`^${c.name.replace(/\./g, '\\.')} +ready +${c.group.replace(/\./g, '\\.')}/v2 +${N} +0$`, 'm'));
  assert.match(table.stdout, new RegExp(`\n${gv.replace(/\./g, '\\.')}: ready \\(1 resource\\(s\\): 1 ready\\) \\(exit 0\\)\n$`));

  // v1 removed from the CRD: every object still reads and applies, as its owner and as another manager.
  await applyCrd(plane.kube, c, 'v2', { versions: ['v2'] });
  assert.equal((await plane.kube.raw('GET', `/apis/${c.group}/v1/namespaces/${ns}/${c.plural}`)).status, 404);
  await parallel(N, 8, async (i) => {
    const name = names[i]!;
    const got = await plane.kube.raw('GET', `/apis/${c.group}/v2/namespaces/${ns}/${c.plural}/${name}`);
    assert.equal(got.status, 200, got.body);
    const owner = await applyObject(c, ns, name, 'v2', 'drop-owner', { index: i, note: 'after v1 was removed' });
    assert.equal(owner.status, 200, owner.body);
    const other = await applyObject(c, ns, name, 'v2', 'drop-other', { extra: i });
    assert.equal(other.status, 200, other.body);
  });
  assert.deepEqual((await storedVersions(plane.etcd, { group: c.group, resource: c.plural, custom: true })).byApiVersion, {
    [`${c.group}/v2`]: N,
  });
});

void test("the drop check run by the worker counts a client since the worker's first sample of the counters, past the check's own window, which the CLI's check alone does not see", async () => {
  const c = testCrd(`${uniq('drop-day')}.svm.test`);
  const gv = `${c.group}/v1`;
  await applyCrd(plane.kube, c, 'v1');
  await applyCrd(plane.kube, c, 'v2');
  const atV1 = `/apis/${c.group}/v1/${c.plural}`;
  await withWorker(
    plane,
    async (_m, taskQueue) => {
      const workerCheck = async () =>
        (await plane.temporal.client.workflow.execute(DROP_CHECK_WORKFLOW_TYPE, {
          taskQueue,
          workflowId: uniq('drop-day'),
          args: [{ groupVersion: gv, requestsWindowSeconds: 1 }],
        })) as DropReport;
      // A client lists at v1, then the check watches 1 s: past its own window, the worker's samples (its first
      // taken when it started) still count the list. Until that first sample is in, the list is asked again.
      let seen: DropReport | undefined;
      await eventually(
        "the worker's check counting the client's list at v1 since its oldest sample",
        async () => {
          assert.equal((await plane.kube.raw('GET', atV1)).status, 200);
          await new Promise((r) => setTimeout(r, 1500));
          const report = await workerCheck();
          const figures = report.resources.find((r) => r.resource === c.name)!.requests;
          if (!figures.some((f) => f.windowSeconds !== undefined && (f.requestsInWindow ?? 0) > 0)) return false;
          seen = report;
          return true;
        },
        60_000,
      );
      assert.equal(verdicts(seen!, c.name).requests, 'NotYet');
      assert.match(
        reasonOf(seen!, c.name, 'requests'),
        /^clients still use [^:]+: .*\b[1-9]\d* requests? in \d+s \(since the worker's oldest sample of it\)/,
      );
      // The same from the CLI, run on the worker (--on-worker).
      const onWorker = await svm(['plan', '--drop', gv, '--on-worker', '--requests-window', '1'], {
        KUBECONFIG: readerKubeconfig,
        TEMPORAL_ADDRESS: plane.temporal.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      });
      assert.equal(onWorker.code, 1, onWorker.stdout + onWorker.stderr);
      assert.match(onWorker.stdout, /since the worker's oldest sample of it/);
      assert.match(
        onWorker.stdout,
        /\nrequests window: \d+s \(the worker's samples of each server's counters; 1s watched by the check itself\)/,
      );
      // The CLI's own check, with no samples, sees only its own second: the same client is not seen.
      const own = (await dropJson(gv, ['--requests-window', '1'], { KUBECONFIG: plane.env.KUBECONFIG! })).report;
      assert.equal(verdicts(own, c.name).requests, 'Ready', reasonOf(own, c.name, 'requests'));
      assert.match(reasonOf(own, c.name, 'requests'), /in the last 1s: /);
      console.log(
        `[drop, the worker's samples] ${reasonOf(seen!, c.name, 'requests')}\n[drop, the CLI's window] ${reasonOf(own, c.name, 'requests')}`,
      );
    },
    { settings: { requestSampleSeconds: 3600 } },
  );
});

void test('svm plan --drop: a bad group version or flag is refused before anything is read (exit 2; --requests-window alone: 3)', async () => {
  const cases = [
    [['--drop', 'v1'], 2, /^error: --drop: "v1" is not <group>\/<version>/],
    [['--drop', 'Example.com/v1'], 2, /^error: --drop: "Example.com" is not an API group/],
    [['--drop', 'example.com/v1', '--requests-window', 'soon'], 2, /--requests-window must be a whole number, got "soon"/],
    [['--requests-window', '5'], 3, /^error: --requests-window goes with --drop/],
  ] as const;
  // Independent processes, run at once.
  const [r, ...refused] = await Promise.all([
    // A group nobody serves: refused after discovery, before anything else is read.
    svm(['plan', '--drop', 'nowhere.svm.test/v1'], { KUBECONFIG: readerKubeconfig }),
    // An unreachable API: had anything been attempted, the message would say so.
    ...cases.map(([args]) => svm(['plan', ...args], { KUBECONFIG: '/nonexistent/kubeconfig' })),
  ]);
  for (const [i, [args, code, message]] of cases.entries()) {
    const x = refused[i]!;
    assert.equal(x.code, code, `${args.join(' ')}: ${x.stderr}`);
    assert.match(x.stderr, message);
    assert.doesNotMatch(x.stderr, /nonexistent/);
    assert.equal(x.stdout, '');
  }
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /^error: no API group nowhere\.svm\.test is served and no CustomResourceDefinition names it\n$/);
});

void test('svm plan --drop: a version its group never had (a typo) is unknown (exit 2), no resource, the note saying what the group serves', async () => {
  const c = testCrd(`${uniq('drop-typo')}.svm.test`);
  await applyCrd(plane.kube, c, 'v2');
  const { report, run } = await dropJson(`${c.group}/v1beta1`, ['--requests-window', '0']);
  assert.deepEqual([run.code, report.verdict, report.exitCode, report.resources], [2, 'Unknown', 2, []]);
  // The group's versions in discovery's order: the preferred (the storage version here) first.
  assert.deepEqual(report.notes, [
    `nothing serves ${c.group}/v1beta1 and no CustomResourceDefinition names v1beta1: ${c.group} serves v2 (widgets), v1 (widgets). ` +
      'There is nothing to check: a version already removed from every CRD has nothing left to drop, a misspelt one was never checked',
  ]);
});

void test('svm plan --drop: a conversion webhook that is down is not yet (exit 1), named with the conversion that failed', async () => {
  const hook = await startConversionWebhook(webhookHost(plane));
  const c = testCrd(`${uniq('drop-hook')}.svm.test`);
  const ns = uniq('drop-hook');
  const conversion = { url: hook.url, caBundle: hook.caBundle };
  try {
    // Objects stored at v1, then v2 the storage version and the webhook gone: none of them can be converted.
    await applyCrd(plane.kube, c, 'v1', { conversion });
    await createObjects(plane.kube, c, 'v1', 5, { namespace: ns });
    await applyCrd(plane.kube, c, 'v2', { conversion });
    await hook.close();
    // Its storage built again on every API server with the webhook down (test-conformance.test.ts: the caches
    // otherwise hold what they decoded while it was up).
    await plane.kube.request('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${c.name}`, {
      body: JSON.stringify({ spec: { conversion: { webhook: { clientConfig: { url: `${hook.url}/gone` } } } } }),
      contentType: 'application/merge-patch+json',
    });
    const report = await eventually(
      'the drop check to see the conversion webhook fail',
      async () => {
        const { report: r } = await dropJson(`${c.group}/v1`, ['--requests-window', '0']);
        return verdicts(r, c.name).conversionWebhook === 'NotYet' ? r : undefined;
      },
      90_000,
    );
    assert.deepEqual([report.verdict, report.exitCode], ['NotYet', 1]);
    const group = c.group.replace(/\./g, '\\.');
    assert.match(
      reasonOf(report, c.name, 'conversionWebhook'),
      new RegExp(
        `^converted by the webhook at .+, which fails: a metadata-only list at ${group}/v2 failed \\(.*the conversion webhook for ${group}/v1, Kind=Widget failed\\); `,
      ),
    );
  } finally {
    // Conversion None again (the versions differ only in apiVersion), so the CRD's objects can be deleted with it.
    // Note: a merge patch, not applyCrd: the webhook's URL above was set by a merge patch under another field manager,
    // which the test's apply cannot take away (strategy None beside a webhook is refused, 422).
    await hook.close().catch(() => undefined);
    await plane.kube.request('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${c.name}`, {
      body: JSON.stringify({ spec: { conversion: { strategy: 'None', webhook: null } } }),
      contentType: 'application/merge-patch+json',
    });
    await deleteCrd(plane.kube, c);
  }
});

void test('what the managedFields check guards against: v1 removed while managedFields name it, server-side apply fails; svm managed-fields, off until turned on, renames them as its own fenced identity and apply works again', async () => {
  const c = testCrd(`${uniq('drop-early')}.svm.test`);
  const ns = uniq('drop-early');
  const N = 6;
  const names = Array.from({ length: N }, (_, i) => `w-${i}`);
  await applyCrd(plane.kube, c, 'v1');
  await ensureNamespace(plane.kube, ns);
  // Two managers at v1 on each object.
  await parallel(N, 6, async (i) => {
    assert.equal((await applyObject(c, ns, names[i]!, 'v1', 'drop-owner', { a: i })).status, 201);
    assert.equal((await applyObject(c, ns, names[i]!, 'v1', 'drop-other', { b: i })).status, 200);
  });
  await applyCrd(plane.kube, c, 'v2');
  // Rewritten at v2 and storedVersions pruned by hand: only the managedFields still name v1.
  for (const name of names)
    await plane.kube.request('PATCH', `/apis/${c.group}/v2/namespaces/${ns}/${c.plural}/${name}`, {
      body: '{}',
      contentType: 'application/merge-patch+json',
    });
  await setCrdStoredVersions(plane.kube, { group: c.group, resource: c.plural }, ['v2']);
  const { report } = await dropJson(`${c.group}/v1`, ['--requests-window', '1']);
  assert.equal(verdicts(report, c.name).managedFields, 'NotYet');
  assert.equal(verdicts(report, c.name).storedVersions, 'Ready');

  await applyCrd(plane.kube, c, 'v2', { versions: ['v2'] });
  assert.equal((await plane.kube.raw('GET', `/apis/${c.group}/v2/namespaces/${ns}/${c.plural}/w-0`)).status, 200);
  for (const manager of ['drop-owner', 'drop-other']) {
    const res = await applyObject(c, ns, 'w-0', 'v2', manager, { a: 2 });
    assert.equal(res.status, 500, `${manager}: ${res.status} ${res.body}`);
    assert.equal((JSON.parse(res.body) as { message: string }).message, `request to convert CR to an invalid group/version: ${c.group}/v1`);
  }

  // The rewrite. The worker runs as deploy/rbac.yaml's ServiceAccount with the grant that lets it list the CRD.
  const AS = 'system:serviceaccount:svm-system:svm-managed-fields';
  await serverSideApply(plane.kube, readManifests('rbac.yaml'));
  // Off as shipped (a plane an earlier run left it on is put back); taken off again at the end.
  await deleteManifests(plane.kube, readManifests('managed-fields.yaml'));
  const granted: Manifest[] = [];
  const grant = async (extra: string[]) => {
    const g = await svm(['grant', c.name, ...extra], { KUBECONFIG: plane.env.KUBECONFIG! });
    assert.equal(g.code, 0, g.stderr);
    const objects = YAML.parseAllDocuments(g.stdout).map((d) => d.toJS() as Manifest);
    granted.push(...objects);
    await serverSideApply(plane.kube, objects);
  };
  await grant([]);
  const workerKubeconfig = writeTokenKubeconfig(
    plane.kube.server,
    await serviceAccountToken(plane.kube, NS, 'svm-migrator'),
    'svm-migrator-mf',
  );
  try {
    const cli = (taskQueue: string, extra: string[] = []) =>
      svm(['managed-fields', c.name, '--from', `${c.group}/v1`, ...extra], {
        KUBECONFIG: workerKubeconfig,
        TEMPORAL_ADDRESS: plane.temporal.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      });
    // Off: a worker without SVM_MANAGED_FIELDS_AS refuses it before anything is written (exit 2).
    await withWorkerAs(plane, workerKubeconfig, async (_m, _w, taskQueue) => {
      const off = await cli(taskQueue);
      assert.equal(off.code, 2, off.stdout + off.stderr);
      assert.match(off.stderr, /^error: the managedFields rewrite is off on this worker/);
    });
    // A bad input is refused by the CLI before anything starts (exit 2).
    const bad = await svm(['managed-fields', c.name, '--from', 'v1'], {
      KUBECONFIG: workerKubeconfig,
      TEMPORAL_ADDRESS: plane.temporal.address,
    });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /is not <group>\/<version>/);

    await withWorkerAs(
      plane,
      workerKubeconfig,
      async (_m, _w, taskQueue) => {
        // Set on the worker, but the identity not there yet: the worker may not impersonate it.
        const notYet = await cli(taskQueue);
        assert.equal(notYet.code, 2, notYet.stdout + notYet.stderr);
        assert.match(
          notYet.stderr,
          /the worker may not act as system:serviceaccount:svm-system:svm-managed-fields: apply deploy\/managed-fields\.yaml/,
        );
        // Turned on (deploy/managed-fields.yaml as shipped), not yet granted the resource.
        await serverSideApply(plane.kube, readManifests('managed-fields.yaml'));
        const ungranted = await eventually(
          'the impersonation allowed',
          async () => {
            const r = await cli(taskQueue);
            return /may not act as/.test(r.stderr) ? undefined : r;
          },
          30_000,
        );
        assert.equal(ungranted.code, 2, ungranted.stdout + ungranted.stderr);
        assert.match(ungranted.stderr, new RegExp(`${AS} may not patch ${c.name.replace(/\./g, '\\.')}: grant it with`));
        await grant(['--managed-fields']);

        const as = KubeClient.fromKubeconfig(workerKubeconfig).impersonating(AS);
        const obj = `/apis/${c.group}/v2/namespaces/${ns}/${c.plural}/w-1`;
        await eventually(
          'the grant in effect',
          async () => (await as.raw('PATCH', obj, { body: '{}', contentType: 'application/merge-patch+json' })).status === 200,
          30_000,
        );

        // The rewrite, through the CLI and the worker; then nothing names v1.
        const done = await cli(taskQueue);
        assert.equal(done.code, 0, done.stdout + done.stderr);
        assert.equal(
          done.stdout,
          `${c.name}: ${2 * N} managedFields entries of ${N} objects rewritten from ${c.group}/v1 to ${c.group}/v2; ${N} objects listed, 0 changed meanwhile, 0 gone; 0 still name ${c.group}/v1\n`,
        );
        console.log(`$ svm managed-fields ${c.name} --from ${c.group}/v1\n${done.stdout}`);
        const doneId = managedFieldsWorkflowId(c.name, `${c.group}/v1`);
        const doneRun = (await plane.temporal.client.workflow.getHandle(doneId).describe()).runId;
        // Again, for machines: nothing left.
        const json = await cli(taskQueue, ['-o', 'json']);
        assert.equal(json.code, 0, json.stderr);
        assert.deepEqual(ManagedFieldsResultSchema.parse(JSON.parse(json.stdout)), {
          resource: c.name,
          from: `${c.group}/v1`,
          to: `${c.group}/v2`,
          objects: N,
          rewritten: 0,
          entries: 0,
          changedMeanwhile: 0,
          gone: 0,
          remaining: 0,
        });
        // The same as a workflow any SDK starts: nothing left to rewrite.
        const againId = uniq('mf');
        const again = (await plane.temporal.client.workflow.execute(MANAGED_FIELDS_WORKFLOW_TYPE, {
          taskQueue,
          workflowId: againId,
          args: [{ resource: c.name, from: `${c.group}/v1` }],
        })) as ManagedFieldsResult;
        assert.deepEqual([again.rewritten, again.remaining, again.objects], [0, 0, N]);
        // The replay test's fixtures (test/unit-replay.test.ts), recorded with SVM_RECORD_HISTORIES=1.
        if (recording()) {
          recordHistories(plane.temporal.address, 'mf', 'a rewrite of every entry', doneId, doneRun);
          const againRun = (await plane.temporal.client.workflow.getHandle(againId).describe()).runId;
          recordHistories(plane.temporal.address, 'mf', 'nothing left to rewrite', againId, againRun);
        }
      },
      { settings: { managedFieldsAs: AS } },
    );
  } finally {
    removeTokenKubeconfig(workerKubeconfig);
    await deleteManifests(plane.kube, [...readManifests('managed-fields.yaml'), ...granted]);
  }
  // Server-side apply works again, for both managers, and each object's content is what they applied.
  await parallel(N, 6, async (i) => {
    for (const [manager, spec] of [
      ['drop-owner', { a: i + 100 }],
      ['drop-other', { b: i + 100 }],
    ] as const) {
      const res = await applyObject(c, ns, names[i]!, 'v2', manager, spec);
      assert.equal(res.status, 200, `${manager}: ${res.status} ${res.body}`);
    }
    const got = JSON.parse((await plane.kube.request('GET', `/apis/${c.group}/v2/namespaces/${ns}/${c.plural}/${names[i]}`)).body) as {
      spec: unknown;
      metadata: { managedFields: Array<{ manager: string; apiVersion: string }> };
    };
    assert.deepEqual(got.spec, { a: i + 100, b: i + 100 });
    assert.deepEqual(got.metadata.managedFields.map((f) => `${f.manager}@${f.apiVersion}`).sort(), [
      `drop-other@${c.group}/v2`,
      `drop-owner@${c.group}/v2`,
    ]);
  });
});

void test('the pre-upgrade Job: svm migrate <crd> --wait as its ServiceAccount suffices, and it holds nothing more', async () => {
  assert.equal((await whoAmI(jobKube)).username, `system:serviceaccount:${NS}:${JOB_SA}`);

  // The Job itself passes the API server, Pod Security "restricted" included (server dry run, no warning).
  const job = readManifests('pre-upgrade-job.yaml').find((o) => o.kind === 'Job')!;
  const dry = await plane.kube.raw('POST', `/apis/batch/v1/namespaces/${NS}/jobs`, { query: { dryRun: 'All' }, body: JSON.stringify(job) });
  assert.equal(dry.status, 201, dry.body);
  assert.equal(dry.headers.warning, undefined, String(dry.headers.warning));
  const container = (
    job as unknown as {
      spec: {
        template: {
          spec: { serviceAccountName: string; containers: Array<{ args: string[]; env: Array<{ name: string; value: string }> }> };
        };
      };
    }
  ).spec.template.spec;
  assert.equal(container.serviceAccountName, JOB_SA);
  assert.deepEqual(container.containers[0]!.args, ['migrate', '--all', '--wait']);
  assert.deepEqual(container.containers[0]!.env.map((e) => e.name).sort(), [
    'SVM_CLUSTER',
    'TEMPORAL_ADDRESS',
    'TEMPORAL_NAMESPACE',
    'TEMPORAL_TASK_QUEUE',
  ]);

  const crd = testCrd(`${uniq('plan-job')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 120, { namespace: uniq('plan-job') });
  await applyCrd(plane.kube, crd, 'v2');
  assert.equal((await planJson()).plan.items.find((i) => i.resource === resourceOf(crd))?.objects, 120);

  const run = await withWorker(plane, async (_m, taskQueue) => {
    // What --all asks of Kubernetes: discovery, then resolving every migratable resource (a CRD get for dotted groups).
    const asJob = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: jobKubeconfig });
    try {
      const all = migratableResources(await asJob.kube.discover());
      assert.ok(all.length > 20, `only ${all.length} migratable resources`);
      const crds = new Set(
        (
          await plane.kube.getJson<{ items: Array<{ metadata: { name: string } }> }>(
            '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
          )
        ).items.map((c) => c.metadata.name),
      );
      for (const r of all) {
        const ref = await asJob.resolve(r.group ? `${r.name}.${r.group}` : r.name);
        assert.equal(ref.custom, crds.has(`${r.name}.${r.group}`), `${r.name}.${r.group}`);
      }
    } finally {
      await asJob.close();
    }
    return svm(['migrate', resourceOf(crd), '--wait'], {
      KUBECONFIG: jobKubeconfig,
      TEMPORAL_ADDRESS: plane.temporal.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      CI: '1',
    });
  });
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(
    run.stderr,
    new RegExp(`migration of ${resourceOf(crd).replace(/\./g, '\\.')} is workflow migrate/${resourceOf(crd).replace(/\./g, '\\.')}`),
  );
  assert.match(run.stdout, new RegExp(`^${resourceOf(crd).replace(/\./g, '\\.')}: Succeeded migrated=120 rewritten=120 `, 'm'));
  // Off a terminal the final line is said once (stdout), not also as the last progress line (stderr).
  assert.doesNotMatch(run.stderr, /: Succeeded migrated=/);
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 120,
  });
  const crdObj = await plane.kube.getJson<{ status: { storedVersions: string[] } }>(
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
  );
  assert.deepEqual(crdObj.status.storedVersions, ['v2']);
  assert.equal(
    (await planJson()).plan.items.find((i) => i.resource === resourceOf(crd)),
    undefined,
  );

  // Refused: reading or listing anything, writing anything.
  const ns = uniq('plan-deny');
  await ensureNamespace(plane.kube, ns);
  await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'keep' }, stringData: { k: 'v' } }),
  });
  const user = `system:serviceaccount:${NS}:${JOB_SA}`;
  for (const [method, p, message] of [
    ['GET', '/api/v1/secrets', `secrets is forbidden: User "${user}" cannot list resource "secrets" in API group "" at the cluster scope`],
    [
      'GET',
      `/api/v1/namespaces/${ns}/secrets/keep`,
      `secrets "keep" is forbidden: User "${user}" cannot get resource "secrets" in API group "" in the namespace "${ns}"`,
    ],
    [
      'GET',
      `/apis/${crd.group}/v2/${crd.plural}`,
      `${crd.plural}.${crd.group} is forbidden: User "${user}" cannot list resource "${crd.plural}" in API group "${crd.group}" at the cluster scope`,
    ],
    [
      'GET',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
      `customresourcedefinitions.apiextensions.k8s.io is forbidden: User "${user}" cannot list resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope`,
    ],
  ] as const) {
    const res = await jobKube.raw(method, p);
    assert.equal(res.status, 403, `${method} ${p}: ${res.status}`);
    assert.equal((JSON.parse(res.body) as { message: string }).message, message);
  }
  const writes: Array<[string, string, unknown, string?]> = [
    [
      'PATCH',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}/status`,
      { status: { storedVersions: ['v1', 'v2'] } },
      'application/merge-patch+json',
    ],
    [
      'POST',
      '/apis/migration.k8s.io/v1alpha1/storageversionmigrations',
      {
        apiVersion: 'migration.k8s.io/v1alpha1',
        kind: 'StorageVersionMigration',
        metadata: { name: uniq('x') },
        spec: { resource: { resource: 'secrets' } },
      },
    ],
    ['POST', `/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } }],
  ];
  for (const [method, p, body, contentType] of writes) {
    const res = await jobKube.raw(method, p, { body: JSON.stringify(body), contentType });
    assert.equal(res.status, 403, `${method} ${p}: ${res.status} ${res.body.slice(0, 200)}`);
  }
});

void test('svm plan and --drop: records the worker token can forge do not count: storedVersions pruned and a StorageState marked migrated by the token, nothing migrated, is listed and not ready (etcd holds every object at v1); after a real migration the record makes the migration ready', async () => {
  const c = testCrd(`${uniq('forged')}.svm.test`);
  const ns = uniq('forged');
  const gv = `${c.group}/v1`;
  const N = 12;
  await applyCrd(plane.kube, c, 'v1');
  await createObjects(plane.kube, c, 'v1', N, { namespace: ns });
  await applyCrd(plane.kube, c, 'v2');
  // The worker's token, as deploy/ grants it, with `svm grant` for this resource.
  await serverSideApply(plane.kube, readManifests('rbac.yaml'));
  const g = await svm(['grant', c.name], { KUBECONFIG: plane.env.KUBECONFIG! });
  assert.equal(g.code, 0, g.stderr);
  const granted = YAML.parseAllDocuments(g.stdout).map((d) => d.toJS() as Manifest);
  await serverSideApply(plane.kube, granted);
  const workerKubeconfig = writeTokenKubeconfig(
    plane.kube.server,
    await serviceAccountToken(plane.kube, NS, 'svm-migrator'),
    'svm-migrator-forger',
  );
  const token = KubeClient.fromKubeconfig(workerKubeconfig);
  const statePath = `/apis/migration.k8s.io/v1alpha1/storagestates/${c.name}`;
  try {
    // Forged with nothing migrated: storedVersions pruned to the storage version, a StorageState saying "only the
    // current hash". Both writes are the token's to make.
    await setCrdStoredVersions(token, { group: c.group, resource: c.plural }, ['v2']);
    const hash = (
      await plane.kube.getJson<{ resources: Array<{ name: string; storageVersionHash?: string }> }>(`/apis/${c.group}/v2`)
    ).resources.find((r) => r.name === c.plural)!.storageVersionHash!;
    await token.request('POST', '/apis/migration.k8s.io/v1alpha1/storagestates', {
      body: JSON.stringify({
        apiVersion: 'migration.k8s.io/v1alpha1',
        kind: 'StorageState',
        metadata: { name: c.name },
        spec: { resource: { group: c.group, resource: c.plural } },
      }),
    });
    await token.patchStatus(statePath, { persistedStorageVersionHashes: [hash], currentStorageVersionHash: hash });
    assert.deepEqual(
      (await storedVersions(plane.etcd, { group: c.group, resource: c.plural, custom: true })).byApiVersion,
      { [gv]: N },
      'etcd: every object still at v1',
    );

    const forged = (await dropJson(gv, ['--requests-window', '0'], { TEMPORAL_ADDRESS: plane.temporal.address })).report;
    assert.notEqual(forged.verdict, 'Ready', JSON.stringify(forged, null, 2));
    assert.equal(verdicts(forged, c.name).storedVersions, 'Ready', 'the pruned mirror reads ready on its own');
    assert.equal(verdicts(forged, c.name).migration, 'Unknown');
    assert.equal(
      reasonOf(forged, c.name, 'migration'),
      `Temporal holds no migration workflow migrate/${c.name}: never migrated by svm, migrated by another migrator, or past the namespace's retention; ` +
        `StorageState ${c.name} says objects are persisted only in ${hash} (${c.group}/v2), but that mirror is the worker's token's to write: without the record it does not count`,
    );
    console.log(`[forged] ${forged.verdict} (exit ${forged.exitCode}): ${reasonOf(forged, c.name, 'migration')}`);
    // svm plan: the forged StorageState is listed from the record's absence; without Temporal it is believed, and a
    // note says so.
    const withRecords = (await planJson([], { TEMPORAL_ADDRESS: plane.temporal.address })).plan;
    const listed = withRecords.items.find((i) => i.resource === c.name);
    assert.deepEqual(listed && { sources: listed.sources, action: listed.action, objects: listed.objects, reasons: listed.reasons }, {
      sources: ['noRecord'],
      action: 'migrate',
      objects: N,
      reasons: [
        `StorageState says every object is stored in ${hash}, but no whole pass at it is on record: Temporal holds no migration workflow migrate/${c.name}: never migrated by svm, migrated by another migrator, or past the namespace's retention`,
      ],
    });
    const believed = (await planJson()).plan;
    assert.equal(
      believed.items.find((i) => i.resource === c.name),
      undefined,
    );
    assert.ok(
      believed.notes.some((n) =>
        /StorageState\(s\) saying every object is stored in the served version were believed: .*\(set TEMPORAL_ADDRESS\)$/.test(n),
      ),
      believed.notes.join('\n'),
    );

    // A real migration: its record makes the migration check ready, and etcd agrees.
    let queue = '';
    const result = await withWorker(plane, async (m, taskQueue) => {
      queue = taskQueue;
      return migrationResult(await m.start(c.name));
    });
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.equal(result.record?.by, 'svm');
    assert.equal(result.record?.encodingVersion, 'v2');
    assert.equal(result.record?.storageVersionHash, hash);
    assert.deepEqual((await storedVersions(plane.etcd, { group: c.group, resource: c.plural, custom: true })).byApiVersion, {
      [`${c.group}/v2`]: N,
    });
    const onQueue = { TEMPORAL_ADDRESS: plane.temporal.address, TEMPORAL_TASK_QUEUE: queue };
    const real = (await dropJson(gv, ['--requests-window', '0'], onQueue)).report;
    const planned = (await planJson([], onQueue)).plan;
    assert.equal(
      planned.items.find((i) => i.resource === c.name),
      undefined,
      JSON.stringify(planned.items, null, 2),
    );
    assert.equal(verdicts(real, c.name).migration, 'Ready', reasonOf(real, c.name, 'migration'));
    assert.match(
      reasonOf(real, c.name, 'migration'),
      new RegExp(
        `^its last migration workflow migrate/${c.name.replace(/\./g, '\\.')} ended Succeeded at .*: a whole pass by svm to v2, under the agreement that holds now`,
      ),
    );
    // Without a Temporal client the record cannot be read: not ready, saying why.
    const blind = (await dropJson(gv, ['--requests-window', '0'])).report;
    assert.equal(verdicts(blind, c.name).migration, 'Unknown');
    assert.match(reasonOf(blind, c.name, 'migration'), /no Temporal client is at hand \(set TEMPORAL_ADDRESS\)/);
  } finally {
    token.close();
    removeTokenKubeconfig(workerKubeconfig);
    await deleteManifests(plane.kube, granted).catch(() => undefined);
    await plane.kube.raw('DELETE', statePath);
    await deleteCrd(plane.kube, c).catch(() => undefined);
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});
