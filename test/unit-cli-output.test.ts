/**
 * What the CLI prints, as kubectl users expect it (issue 62): `svm status` as a table (RESOURCE PHASE MIGRATED RATE
 * AGE, more with -o wide), -o json|yaml|name, --watch printing the rows that change under the first table, --context
 * choosing the kubeconfig's context, and a bad -o refused before anything connects. No servers.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { statusForm, statusState } from '../src/client/cli-migrate';
import { clusterForm, clustersTable, clusterState } from '../src/client/cli-fleet';
import type { RegisteredCluster } from '../src/client/fleet';
import { age, formatted, rowsTable, watchPrinter, watchRows } from '../src/client/table';
import { KubeClient } from '../src/kube/client';
import { loadWorkerSettings } from '../src/worker/config';
import type { MigrationSummary } from '../src/client/index';
import type { MigrationProgress } from '../src/contract/definitions';

const root = path.join(__dirname, '..');
const NOW = Date.parse('2026-12-07T10:00:00Z');

function progress(resource: string, migrated: number, rate: number, startedSecondsAgo: number, failed = 0): MigrationProgress {
  return {
    resource,
    phase: 'Running',
    counters: { migrated, rewritten: migrated, conflicts: 0, notFound: 0, failed, chunks: 1 } as MigrationProgress['counters'],
    failures: [],
    continueTokenPresent: false,
    objectsPerSecond: rate,
    startedAt: NOW - startedSecondsAgo * 1000,
    runs: 1,
    restarts: 0,
    migrationObjects: [],
  };
}

const secrets: MigrationSummary = {
  workflowId: 'migrate/secrets',
  resource: 'secrets',
  status: 'COMPLETED',
  phase: 'Succeeded',
  progress: { ...progress('secrets', 1000, 512, 3 * 3600 + 600), phase: 'Succeeded' },
  deploymentVersion: { deploymentName: 'svm', buildId: '0.1.0-abc', behavior: 'AUTO_UPGRADE' },
};
const widgets: MigrationSummary = {
  workflowId: 'migrate/widgets.example.com',
  resource: 'widgets.example.com',
  status: 'RUNNING',
  phase: 'Running',
  progress: progress('widgets.example.com', 20000, 1830, 95, 2),
};
const terminated: MigrationSummary = { workflowId: 'migrate/configmaps', resource: 'configmaps', status: 'TIMED_OUT' };

void test('svm status is a table like kubectl get: RESOURCE PHASE MIGRATED RATE AGE, numbers right-aligned', () => {
  const form = statusForm(() => NOW);
  assert.equal(
    rowsTable(form, [secrets, widgets, terminated], false),
    [
      'RESOURCE             PHASE      MIGRATED    RATE  AGE',
      'secrets              Succeeded      1000   512/s  3h10m',
      'widgets.example.com  Running       20000  1830/s  95s',
      'configmaps           TimedOut          -       -  -',
      '',
    ].join('\n'),
  );
  assert.equal(rowsTable(form, [], false), 'no migrations\n');
  assert.equal(
    rowsTable(
      statusForm(() => NOW, 'secrets'),
      [],
      false,
    ),
    'no migration of secrets\n',
  );
});

void test('svm status -o wide adds FAILED, the Worker Deployment Version and the workflow', () => {
  const lines = rowsTable(
    statusForm(() => NOW),
    [secrets, widgets],
    true,
  ).split('\n');
  assert.match(lines[0]!, /^RESOURCE +PHASE +MIGRATED +RATE +AGE +FAILED +WORKER VERSION +WORKFLOW$/);
  assert.match(lines[1]!, /^secrets +Succeeded +1000 +512\/s +3h10m +0 +svm\.0\.1\.0-abc \(AUTO_UPGRADE\) +migrate\/secrets$/);
  assert.match(lines[2]!, /^widgets\.example\.com +Running +20000 +1830\/s +95s +2 +- +migrate\/widgets\.example\.com$/);
});

void test('-o json and -o yaml print the same object; -o name one name a line', () => {
  const list = [secrets, widgets];
  const forms = { text: () => 'TABLE\n', names: () => list.map(statusForm(() => NOW).name) };
  assert.deepEqual(JSON.parse(formatted('json', list, forms)), list);
  assert.deepEqual(parseYaml(formatted('yaml', list, forms)), list);
  assert.equal(formatted('name', list, forms), 'secrets\nwidgets.example.com\n');
  assert.equal(formatted('text', list, forms), 'TABLE\n');
});

void test("AGE as kubectl's: seconds under two minutes, then minutes, hours and days", () => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [45, '45s'],
    [119, '119s'],
    [150, '2m30s'],
    [600, '10m'],
    [3 * 3600 + 600, '3h10m'],
    [9 * 3600, '9h'],
    [50 * 3600, '2d2h'],
    [30 * 86_400, '30d'],
  ];
  assert.deepEqual(
    cases.map(([s]) => age(s * 1000)),
    cases.map(([, a]) => a),
  );
});

/** Runs a watch over the given looks (one list of rows per look), ended after the last. */
async function watched(format: 'text' | 'json' | 'yaml' | 'name', looks: MigrationSummary[][]): Promise<string> {
  let out = '';
  const ac = new AbortController();
  let i = 0;
  await watchRows({
    fetch: () => {
      const rows = looks[i++]!;
      if (i === looks.length) ac.abort();
      return Promise.resolve(rows);
    },
    id: (s) => s.workflowId,
    state: statusState,
    emit: watchPrinter(
      format,
      statusForm(() => NOW),
      (s) => (out += s),
    ),
    intervalMs: 0,
    signal: ac.signal,
  });
  return out;
}

void test('--watch: the table, then a row for each migration that changed, in the same columns; json a line each, yaml a document each', async () => {
  const later = { ...widgets, progress: progress('widgets.example.com', 24000, 1830, 97) };
  const done: MigrationSummary = {
    ...later,
    status: 'COMPLETED',
    phase: 'Succeeded',
    progress: { ...later.progress!, phase: 'Succeeded' },
  };
  // Looks 2 and 4 change nothing (a rate or an age alone is no change): nothing printed for them.
  // The last look: the workflow closed after its phase said Succeeded, the same counts: no row again.
  const looks = [
    [secrets, widgets],
    [secrets, widgets],
    [secrets, later],
    [secrets, later],
    [secrets, { ...done, status: 'RUNNING' }],
    [secrets, done],
  ];
  assert.equal(
    await watched('text', looks),
    [
      'RESOURCE             PHASE      MIGRATED    RATE  AGE',
      'secrets              Succeeded      1000   512/s  3h10m',
      'widgets.example.com  Running       20000  1830/s  95s',
      'widgets.example.com  Running       24000  1830/s  97s',
      'widgets.example.com  Succeeded     24000  1830/s  97s',
      '',
    ].join('\n'),
  );
  const json = (await watched('json', looks)).trimEnd().split('\n');
  assert.deepEqual(
    json.map((l) => (JSON.parse(l) as MigrationSummary).phase),
    ['Succeeded', 'Running', 'Running', 'Succeeded'],
  );
  const docs = parseAllDocuments(await watched('yaml', looks));
  assert.equal(docs.length, 4);
  assert.equal(await watched('name', looks), 'secrets\nwidgets.example.com\nwidgets.example.com\nwidgets.example.com\n');
  assert.equal(
    await watched('text', [[], [], [widgets]]),
    [
      'no migrations',
      'RESOURCE             PHASE    MIGRATED    RATE  AGE',
      'widgets.example.com  Running     20000  1830/s  95s',
      '',
    ].join('\n'),
  );
});

function svm(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(root, 'bin', 'svm.js'), ...args], { cwd: root, env, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr, ms: Date.now() - t0 }),
    );
  });
}

void test('a bad -o is refused before anything connects: the allowed formats named, no Temporal or Kubernetes error', async () => {
  // A Temporal address that refuses (the client would retry for 10 s) and a kubeconfig that does not exist.
  const env = { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1', KUBECONFIG: '/nonexistent/kubeconfig' };
  for (const args of [
    ['status', '-o', 'xml'],
    ['plan', '-o', 'table'],
    ['managed-fields', 'widgets.example.com', '--from', 'example.com/v1', '-o', 'name'],
    ['version', '-o', 'wide'],
  ]) {
    const r = await svm(args, env);
    assert.notEqual(r.code, 0, `svm ${args.join(' ')}`);
    assert.match(r.stderr, /^error: option '-o, --output <format>' argument '\w+' is invalid\. Allowed choices are /m, r.stderr);
    assert.doesNotMatch(r.stderr, /Temporal|Kubernetes|kubeconfig/, `svm ${args.join(' ')} reached for a service`);
    assert.equal(r.stdout, '');
  }
  const name = await svm(['plan', '-o', 'name', '--watch'], env);
  assert.equal(name.code, 3, name.stderr);
  assert.match(name.stderr, /^error: --watch prints the whole plan each time: give -o text, json or yaml, not name$/m);
});

void test('--context: the kubeconfig context used instead of its current-context; a context it lacks refused with the ones it has', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-context-'));
  try {
    const file = path.join(dir, 'kubeconfig');
    fs.writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- { name: one, cluster: { server: "https://one.example:6443" } }',
        '- { name: two, cluster: { server: "https://two.example:6443" } }',
        'users: [{ name: u, user: { token: t } }]',
        'contexts:',
        '- { name: a, context: { cluster: one, user: u } }',
        '- { name: b, context: { cluster: two, user: u } }',
        'current-context: a',
        '',
      ].join('\n'),
    );
    const current = KubeClient.fromKubeconfig(file);
    const chosen = KubeClient.fromKubeconfig(file, { context: 'b' });
    try {
      assert.equal(current.server, 'https://one.example:6443');
      assert.equal(chosen.server, 'https://two.example:6443');
    } finally {
      current.close();
      chosen.close();
    }
    assert.throws(() => KubeClient.fromKubeconfig(file, { context: 'c' }), {
      message: `the kubeconfig ${file} has no context "c" (its contexts: a, b)`,
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void test('svm fleet clusters: the table, -o json|yaml|name, and --watch printing a row for each cluster registered or changed (not for LAST SEEN alone)', async () => {
  const east: RegisteredCluster = {
    name: 'east',
    uid: '6f1c0a2e-1111-4c1e-9d0e-000000000001',
    servers: [{ server: 'https://10.0.0.1:6443', version: 'v1.37.2' }],
    kubeVersions: ['v1.37.2'],
    svmVersion: '0.1.0',
    lastSeen: '2026-12-07T10:00:00Z',
  };
  const west: RegisteredCluster = { name: 'west', servers: [], kubeVersions: ['v1.36.3'], lastSeen: '2026-12-07T10:00:02Z' };
  const clusters = [east, west];
  assert.equal(
    formatted('text', clusters, { text: () => clustersTable(clusters), names: () => clusters.map(clusterForm.name) }),
    [
      'CLUSTER  UID                                   IDENTITY  KUBERNETES  SVM    LAST SEEN',
      'east     6f1c0a2e-1111-4c1e-9d0e-000000000001  pinned    v1.37.2     0.1.0  2026-12-07T10:00:00Z',
      'west     -                                     -         v1.36.3     -      2026-12-07T10:00:02Z',
      '',
    ].join('\n'),
  );
  const forms = { text: () => clustersTable(clusters), names: () => clusters.map(clusterForm.name) };
  assert.deepEqual(JSON.parse(formatted('json', clusters, forms)), clusters);
  assert.deepEqual(parseYaml(formatted('yaml', clusters, forms)), clusters);
  assert.equal(formatted('name', clusters, forms), 'east\nwest\n');
  assert.match(clustersTable([]), /^no cluster registered/);

  // Looks: east alone; east seen again (LAST SEEN only: nothing printed); west registers; east upgraded.
  const looks: RegisteredCluster[][] = [
    [east],
    [{ ...east, lastSeen: '2026-12-07T10:01:00Z' }],
    [{ ...east, lastSeen: '2026-12-07T10:01:00Z' }, west],
    [{ ...east, kubeVersions: ['v1.38.0'], lastSeen: '2026-12-07T10:02:00Z' }, west],
  ];
  const watch = async (format: 'text' | 'json' | 'name') => {
    let out = '';
    const ac = new AbortController();
    let i = 0;
    await watchRows({
      fetch: () => {
        const rows = looks[i++]!;
        if (i === looks.length) ac.abort();
        return Promise.resolve(rows);
      },
      id: (c) => c.name,
      state: clusterState,
      emit: watchPrinter(format, clusterForm, (s) => (out += s)),
      intervalMs: 0,
      signal: ac.signal,
    });
    return out;
  };
  assert.equal(
    await watch('text'),
    [
      'CLUSTER  UID                                   IDENTITY  KUBERNETES  SVM    LAST SEEN',
      'east     6f1c0a2e-1111-4c1e-9d0e-000000000001  pinned    v1.37.2     0.1.0  2026-12-07T10:00:00Z',
      'west     -                                     -         v1.36.3     -      2026-12-07T10:00:02Z',
      'east     6f1c0a2e-1111-4c1e-9d0e-000000000001  pinned    v1.38.0     0.1.0  2026-12-07T10:02:00Z',
      '',
    ].join('\n'),
  );
  assert.equal(await watch('name'), 'east\nwest\neast\n');
  assert.deepEqual(
    (await watch('json'))
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as RegisteredCluster).kubeVersions[0]),
    ['v1.37.2', 'v1.36.3', 'v1.38.0'],
  );
});

void test('svm fleet clusters refuses a bad -o before connecting; its --help shows --watch and the formats', async () => {
  const env = { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1' };
  const bad = await svm(['fleet', 'clusters', '-o', 'wide'], env);
  assert.equal(bad.code, 64, bad.stderr);
  assert.match(
    bad.stderr,
    /^error: option '-o, --output <format>' argument 'wide' is invalid\. Allowed choices are text, json, yaml, name\./m,
  );
  const help = await svm(['fleet', 'clusters', '--help'], env);
  const said = help.stdout.replace(/\s+/g, ' ');
  assert.match(said, /-w, --watch print the table, then a row for each cluster registered or changed/);
  assert.match(said, /\(choices: "text", "json", "yaml", "name", default: "text"\)/);
});

void test('svm worker --context (or SVM_KUBE_CONTEXT): the setting the worker makes its Kubernetes client with; its --help shows it and the defaults', async () => {
  assert.equal(loadWorkerSettings({}, { kubeContext: 'staging' }).kubeContext, 'staging');
  assert.equal(loadWorkerSettings({ SVM_KUBE_CONTEXT: 'prod' }).kubeContext, 'prod');
  assert.equal(loadWorkerSettings({ SVM_KUBE_CONTEXT: 'prod' }, { kubeContext: 'staging' }).kubeContext, 'staging');
  assert.equal(loadWorkerSettings({}).kubeContext, undefined);
  const help = (await svm(['worker', '--help'], { ...process.env })).stdout.replace(/\s+/g, ' ');
  assert.match(help, /--context <name> the kubeconfig context to use \(default: the kubeconfig's current-context\)/);
  assert.match(help, /--qps <n> .*\(default: auto\)/);
  assert.match(help, new RegExp(`--max-concurrent-chunks <n> .*default: ${loadWorkerSettings({}).maxConcurrentChunks}\\)`));
});
