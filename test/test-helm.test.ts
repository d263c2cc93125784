/**
 * charts/svm for real, with Helm built from its Go module (scripts/tools.d/helm.sh):
 * `helm lint`; with default values the chart renders exactly the objects
 * deploy/ ships (so the two cannot drift); the pre-upgrade hook Job renders
 * the command asked for; `helm template` passes the API server (server-side
 * dry run, no warning); `helm install` into a fresh namespace creates every
 * object; a worker started with exactly the installed ServiceAccount's rights
 * (a token of it) and the installed Deployment's settings migrates a CRD from
 * v1 to v2, with etcd as judge; `helm uninstall` removes the release.
 *
 * The worker Pod itself never runs here (the plane has no kubelet): the test
 * starts the worker process as the Pod would, from the Deployment's env.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { Migrator } from '../src/client';
import { grantManifests } from '../src/client/grant';
import { storedVersions, type ResourceKey } from '../src/dev/etcd-truth';
import { LEADER_LEASE } from '../src/worker/leader';
import { loadWorkerSettings } from '../src/worker/config';
import { svmBuild } from '../src/config/build-info';
import { defaultBuildId, workerDeploymentOptions } from '../src/worker/versioning';
import { createLogger, createMigratorWorker, type MigratorWorker } from '../src/worker/worker';
import { applyCrd, createObjects, testCrd, type TestCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  DEPLOY_DIR,
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  whoAmI,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { migrationResult } from './helpers/waits';
import { credentialExposure, parseSecretRefs } from '../src/kube/credential-exposure';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..');
const CHART = path.join(ROOT, 'charts', 'svm');

// One release in a fresh namespace, its cluster-scoped objects under a name
// prefix of their own (other tests apply deploy/'s svm-* objects to the same plane).
const release = uniq('svm');
const ns = uniq('helm');
const prefix = uniq('h');
const taskQueue = uniq('tq-helm');
const QPS = 150;
/** The chart's appVersion: the default image tag, and so the version part of the image's own build ID. */
const CHART_APP_VERSION = (YAML.parse(fs.readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string }).appVersion;

let plane: TestPlane;
let helmBin: string;
let helmHome: string;
let installed = false;

before(async () => {
  plane = await testPlane();
  const { stdout } = await run('bash', [path.join(ROOT, 'scripts', 'tools.d', 'helm.sh')], { timeout: 1_800_000 });
  helmBin = /^helm=(.+)$/m.exec(stdout)![1]!;
  helmHome = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-helm-'));
});
after(async () => {
  // Never leave the release's admission policies behind on the shared plane.
  if (installed) await helm(['uninstall', release, '-n', ns, '--wait', '--timeout', '2m']).catch(() => undefined);
  if (helmHome) fs.rmSync(helmHome, { recursive: true, force: true });
  await plane?.close();
});

/** helm with the plane's kubeconfig and its own config, cache and data directories. */
function helm(args: string[], timeout = 180_000) {
  return run(helmBin, args, {
    timeout,
    maxBuffer: 64 << 20,
    env: {
      ...process.env,
      KUBECONFIG: plane.env.KUBECONFIG,
      HELM_CONFIG_HOME: path.join(helmHome, 'config'),
      HELM_CACHE_HOME: path.join(helmHome, 'cache'),
      HELM_DATA_HOME: path.join(helmHome, 'data'),
    },
  });
}

const kubectl = (args: string[]) => run(plane.env.KUBECTL!, ['--kubeconfig', plane.env.KUBECONFIG!, ...args], { timeout: 120_000 });

/** Every object of a multi-document YAML text. */
function objects(text: string): Manifest[] {
  return YAML.parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(d.errors.map((e) => e.message).join('; '));
      return d.toJS() as Manifest | null;
    })
    .filter((o): o is Manifest => o !== null && typeof o === 'object');
}

/** Objects by kind/name, for a comparison that names the object that differs. */
const byName = (list: Manifest[]) => Object.fromEntries(list.map((o) => [`${o.kind}/${o.metadata.name}`, o]));

/** `helm template` of the chart: its objects. */
async function template(args: string[]): Promise<Manifest[]> {
  return objects((await helm(['template', 'svm', CHART, ...args])).stdout);
}

/** The labels the chart gives every object and Pod template, beyond deploy/'s: the release's and the chart's. */
const RELEASE_LABELS = ['app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by', 'helm.sh/chart'];
type Labelled = { metadata?: { labels?: Record<string, string> } };
/** An object's labels and its Pod template's, where it has them. */
const labelSets = (o: unknown): Array<Record<string, string> | undefined> => [
  (o as Labelled).metadata?.labels,
  (o as { spec?: { template?: Labelled } }).spec?.template?.metadata?.labels,
];

/**
 * The chart's objects as deploy/ writes them: without RELEASE_LABELS, and without the component label where
 * deploy/'s object has none. Everything else must be equal.
 */
function asShipped(rendered: Manifest[], shipped: Manifest[]): Manifest[] {
  const reference = byName(shipped);
  return rendered.map((o) => {
    const copy = structuredClone(o);
    const ref = labelSets(reference[`${o.kind}/${o.metadata.name}`]);
    labelSets(copy).forEach((labels, i) => {
      if (!labels) return;
      for (const k of RELEASE_LABELS) delete labels[k];
      if (!ref[i]?.['app.kubernetes.io/component']) delete labels['app.kubernetes.io/component'];
    });
    return copy;
  });
}

/** Every object and Pod template carries the recommended labels and helm.sh/chart, of this release and chart. */
function assertStandardLabels(rendered: Manifest[], releaseName: string) {
  const chart = YAML.parse(fs.readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as { version: string; appVersion: string };
  for (const o of rendered) {
    if (o.kind === 'CustomResourceDefinition') continue; // crds/ is not templated: Helm installs it as it is
    const [own, pod] = labelSets(o);
    const template = (o as { spec?: { template?: unknown } }).spec?.template;
    for (const [where, labels] of [
      [`${o.kind}/${o.metadata.name}`, own],
      ...(template ? [[`${o.kind}/${o.metadata.name} Pod template`, pod] as const] : []),
    ] as const) {
      assert.ok(labels, `${where} has no labels`);
      assert.equal(labels['app.kubernetes.io/name'], 'svm', where);
      assert.equal(labels['app.kubernetes.io/instance'], releaseName, where);
      assert.equal(labels['app.kubernetes.io/version'], chart.appVersion, where);
      assert.equal(labels['app.kubernetes.io/managed-by'], 'Helm', where);
      assert.equal(labels['helm.sh/chart'], `svm-${chart.version}`, where);
      assert.match(labels['app.kubernetes.io/component'] ?? '', /^[a-z-]+$/, `${where}: no component`);
    }
  }
}

/** kustomize re-folds multi-line strings (the CEL expressions): compare them with runs of whitespace collapsed. */
function collapseWhitespace(v: unknown): unknown {
  if (typeof v === 'string') return v.replace(/\s+/g, ' ');
  if (Array.isArray(v)) return v.map(collapseWhitespace);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, collapseWhitespace(x)]));
  return v;
}

interface Container {
  name: string;
  args: string[];
  env: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface PodTemplate {
  spec: { template: { spec: { serviceAccountName: string; containers: Container[]; volumes: Array<Record<string, unknown>> } } };
}
const podOf = (o: Manifest | undefined) => {
  assert.ok(o, 'no such object');
  return (o as unknown as PodTemplate).spec.template.spec;
};
/** How a container reaches Temporal (the worker's Worker Versioning variables are its own, not the connection's). */
const temporalEnv = (c: Container) =>
  c.env.filter((e) => e.name.startsWith('TEMPORAL_') && e.name !== 'TEMPORAL_DEPLOYMENT_NAME' && e.name !== 'TEMPORAL_WORKER_BUILD_ID');

void test('helm lint passes: default values, the hook Job in each mode, TLS and an API key, replicas with a PDB, the setup Job, the pool preset', async () => {
  for (const set of [
    [],
    ['--set', 'preUpgradeJob.enabled=true'],
    ['--set', 'preUpgradeJob.enabled=true', '--set', 'preUpgradeJob.command=plan'],
    ['--set', 'temporal.tls.clientCertSecret=temporal-client', '--set', 'temporal.apiKeySecret.name=temporal-key', '--set', 'budget.qps=0'],
    [
      '--set',
      'monitoring.prometheusRule.enabled=true',
      '--set',
      'monitoring.serviceMonitor.interval=30s',
      '--set',
      'versioning.buildId=b-42',
    ],
    ['--set', 'staticFence.enabled=true'],
    [
      '--set',
      'replicas=3',
      '--set',
      'setupJob.enabled=true',
      '--set',
      `image.digest=sha256:${'f'.repeat(64)}`,
      '--set',
      'imagePullSecrets[0].name=regcred',
    ],
    ['-f', path.join(CHART, 'presets', 'pool.yaml')],
  ]) {
    const { stdout } = await helm(['lint', '--strict', CHART, ...set]);
    assert.match(stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, `${set.join(' ')}\n${stdout}`);
    assert.doesNotMatch(stdout, /\[(WARNING|ERROR)\]/, stdout);
  }
});

void test('with default values the chart renders exactly the objects of deploy/ (the Namespace with namespace.create), with the standard labels', async () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const chart = YAML.parse(fs.readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string };
  assert.equal(chart.appVersion, pkg.version, 'Chart.yaml appVersion is not package.json version');

  // What `kubectl apply -k deploy/` applies: the files kustomization.yaml lists, as written.
  const kustomization = YAML.parse(fs.readFileSync(path.join(DEPLOY_DIR, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
  const shipped = kustomization.resources.flatMap((f) => readManifests(f));
  assert.equal(shipped.length, 21);

  // The chart adds the release's labels (RELEASE_LABELS) and a component to every object: deploy/ has not a
  // release. The selectors are deploy/'s (name and component), so an upgrade from the first chart keeps them.
  const defaults = await template(['-n', 'svm-system', '--include-crds']);
  assertStandardLabels(defaults, 'svm');
  assert.deepStrictEqual(byName(asShipped(defaults, shipped)), byName(shipped.filter((o) => o.kind !== 'Namespace')));
  const withNamespace = await template(['-n', 'svm-system', '--include-crds', '--set', 'namespace.create=true']);
  assertStandardLabels(withNamespace, 'svm');
  assert.deepStrictEqual(byName(asShipped(withNamespace, shipped)), byName(shipped));
  const deployment = defaults.find((o) => o.kind === 'Deployment') as unknown as { spec: { selector: unknown } };
  assert.deepEqual(deployment.spec.selector, { matchLabels: { 'app.kubernetes.io/name': 'svm', 'app.kubernetes.io/component': 'worker' } });

  // And kustomize's own rendering of deploy/ (which re-folds multi-line strings).
  const kustomized = objects((await kubectl(['kustomize', DEPLOY_DIR])).stdout);
  assert.deepStrictEqual(collapseWhitespace(byName(asShipped(withNamespace, shipped))), collapseWhitespace(byName(kustomized)));

  // deploy/pre-upgrade-job.yaml is the chart's hook Job with its defaults.
  const hook = await template(['-n', 'svm-system', '--set', 'preUpgradeJob.enabled=true', '--show-only', 'templates/pre-upgrade-job.yaml']);
  assertStandardLabels(hook, 'svm');
  const shippedHook = readManifests('pre-upgrade-job.yaml');
  assert.deepStrictEqual(byName(asShipped(hook, shippedHook)), byName(shippedHook));

  // deploy/managed-fields.yaml (not in kustomization.yaml: off by default) is what managedFields.rewrite=true adds,
  // with SVM_MANAGED_FIELDS_AS on the worker naming its identity.
  const rewrite = await template(['-n', 'svm-system', '--set', 'managedFields.rewrite=true']);
  const added = rewrite.filter(
    (o) => (o.metadata.labels as Record<string, string> | undefined)?.['app.kubernetes.io/component'] === 'managed-fields',
  );
  assertStandardLabels(added, 'svm');
  assert.deepStrictEqual(byName(asShipped(added, readManifests('managed-fields.yaml'))), byName(readManifests('managed-fields.yaml')));
  const env = (o: Manifest) =>
    (o as unknown as { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } } }).spec
      .template.spec.containers[0]!.env;
  assert.deepEqual(
    env(rewrite.find((o) => o.kind === 'Deployment')!).filter((e) => e.name === 'SVM_MANAGED_FIELDS_AS'),
    [{ name: 'SVM_MANAGED_FIELDS_AS', value: 'system:serviceaccount:svm-system:svm-managed-fields' }],
  );
  assert.ok(!env(defaults.find((o) => o.kind === 'Deployment')!).some((e) => e.name === 'SVM_MANAGED_FIELDS_AS'));
});

void test("the fence and its manifest-loaded copy (staticFence.enabled) name the release's ServiceAccount, whatever its namespace and prefix", async () => {
  for (const [namespace, namePrefix] of [
    ['svm-system', 'svm'],
    ['tenant-a', 'acme'],
  ] as const) {
    const rendered = await template(['-n', namespace, '--set', `namePrefix=${namePrefix}`, '--set', 'staticFence.enabled=true']);
    const account = rendered.find((o) => o.kind === 'ServiceAccount' && o.metadata.name === `${namePrefix}-migrator`);
    assert.equal(account?.metadata.namespace, namespace);
    const fenceName = `${namePrefix}-worker-no-op-only`;
    const api = rendered.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy') && o.metadata.name === fenceName);
    assert.equal(api.length, 2);
    const policy = api.find((o) => o.kind === 'ValidatingAdmissionPolicy') as unknown as {
      spec: { matchConditions: Array<{ expression: string }>; variables: Array<{ name: string; expression: string }> };
    };
    assert.deepEqual(
      policy.spec.matchConditions.map((c) => c.expression),
      [`request.userInfo.username == 'system:serviceaccount:${namespace}:${namePrefix}-migrator'`],
    );
    assert.match(policy.spec.variables.find((v) => v.name === 'lease')!.expression, new RegExp(`request\\.namespace == '${namespace}'`));
    // The ConfigMap holds the same policy and binding under the manifest-only suffix, and deploy/'s AdmissionConfiguration.
    const configMap = rendered.find((o) => o.kind === 'ConfigMap' && o.metadata.name === `${namePrefix}-static-fence`);
    assert.equal(configMap?.metadata.namespace, namespace);
    const data = (configMap as unknown as { data: Record<string, string> }).data;
    const staticFence = objects(data[`${fenceName}.yaml`]!);
    assert.deepEqual(staticFence, JSON.parse(JSON.stringify(api).replaceAll(`"${fenceName}"`, `"${fenceName}.static.k8s.io"`)));
    assert.deepEqual(objects(data['admission-configuration.yaml']!), readManifests('static-fence/admission-configuration.yaml'));
    if (namespace === 'svm-system') {
      const shippedFence = readManifests('static-fence/svm-worker-no-op-only.yaml');
      assert.deepEqual(asShipped(staticFence, shippedFence), shippedFence);
    }
  }
  // Off by default: deploy/ has no such ConfigMap.
  assert.ok(!(await template(['-n', 'svm-system'])).some((o) => o.kind === 'ConfigMap'));
});

void test('the pre-upgrade hook Job renders the command asked for, with the worker Temporal settings, and only when enabled', async () => {
  const common = [
    '-n',
    'product',
    '--set',
    'temporal.tls.clientCertSecret=temporal-client',
    '--set',
    'temporal.tls.caSecret=temporal-ca',
    '--set',
    'temporal.tls.serverName=frontend.temporal.example',
    '--set',
    'temporal.apiKeySecret.name=temporal-key',
  ];
  assert.ok(!(await template(common)).some((o) => o.kind === 'Job'), 'a Job without preUpgradeJob.enabled');

  const migrate = byName(
    await template([...common, '--set', 'preUpgradeJob.enabled=true', '--set', 'preUpgradeJob.resources={widgets.example.com,secrets}']),
  );
  const job = migrate['Job/svm-pre-upgrade']!;
  assert.deepEqual((job.metadata as unknown as { annotations: Record<string, string> }).annotations, {
    'helm.sh/hook': 'pre-upgrade',
    'helm.sh/hook-weight': '0',
    'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
  });
  const jobPod = podOf(job);
  const c = jobPod.containers[0]!;
  assert.deepEqual(c.args, ['migrate', 'widgets.example.com', 'secrets', '--wait']);
  assert.equal(jobPod.serviceAccountName, 'svm-pre-upgrade');
  // The Job reaches Temporal exactly as the worker does: TLS with the client certificate, the API key.
  const worker = podOf(migrate['Deployment/svm-worker']).containers[0]!;
  assert.deepEqual(temporalEnv(c), temporalEnv(worker));
  assert.deepEqual(
    temporalEnv(c).map((e) => e.name),
    [
      'TEMPORAL_ADDRESS',
      'TEMPORAL_NAMESPACE',
      'TEMPORAL_TASK_QUEUE',
      'TEMPORAL_TLS',
      'TEMPORAL_TLS_CLIENT_CERT_PATH',
      'TEMPORAL_TLS_CLIENT_KEY_PATH',
      'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      'TEMPORAL_TLS_SERVER_NAME',
      'TEMPORAL_API_KEY',
    ],
  );
  assert.deepEqual(temporalEnv(c).find((e) => e.name === 'TEMPORAL_API_KEY')!.valueFrom, {
    secretKeyRef: { name: 'temporal-key', key: 'api-key' },
  });
  // The names are the ones the worker reads: its settings from this env (the Secret's value resolved as the kubelet would).
  const resolved = Object.fromEntries(worker.env.map((e) => [e.name, e.value ?? 'key-from-secret']));
  const settings = loadWorkerSettings(resolved);
  assert.deepEqual(
    {
      tls: settings.temporal.tls,
      tlsCert: settings.temporal.tlsCert,
      tlsKey: settings.temporal.tlsKey,
      tlsCa: settings.temporal.tlsCa,
      tlsServerName: settings.temporal.tlsServerName,
      apiKey: settings.temporal.apiKey,
    },
    {
      tls: true,
      tlsCert: '/etc/svm/temporal-tls/tls.crt',
      tlsKey: '/etc/svm/temporal-tls/tls.key',
      tlsCa: '/etc/svm/temporal-ca/ca.crt',
      tlsServerName: 'frontend.temporal.example',
      apiKey: 'key-from-secret',
    },
  );
  for (const pod of [jobPod, podOf(migrate['Deployment/svm-worker'])]) {
    const mounts = pod.containers[0]!.volumeMounts;
    assert.ok(mounts.some((m) => m.name === 'temporal-tls' && m.mountPath === '/etc/svm/temporal-tls' && m.readOnly));
    assert.ok(mounts.some((m) => m.name === 'temporal-ca' && m.mountPath === '/etc/svm/temporal-ca' && m.readOnly));
    assert.ok(pod.volumes.some((v) => v.name === 'temporal-tls' && JSON.stringify(v.secret) === '{"secretName":"temporal-client"}'));
    assert.ok(pod.volumes.some((v) => v.name === 'temporal-ca' && (v.secret as { secretName?: string }).secretName === 'temporal-ca'));
  }
  // migrate needs discovery and CRD gets only: the worker does the work.
  assert.deepEqual((migrate['ClusterRole/svm-pre-upgrade'] as unknown as { rules: unknown[] }).rules, [
    { nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*'], verbs: ['get'] },
    { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get'] },
  ]);

  const all = byName(await template(['-n', 'product', '--set', 'preUpgradeJob.enabled=true']));
  assert.deepEqual(podOf(all['Job/svm-pre-upgrade']).containers[0]!.args, ['migrate', '--all', '--wait']);

  const plan = byName(await template(['-n', 'product', '--set', 'preUpgradeJob.enabled=true', '--set', 'preUpgradeJob.command=plan']));
  const planContainer = podOf(plan['Job/svm-pre-upgrade']).containers[0]!;
  assert.equal(planContainer.name, 'plan');
  assert.deepEqual(planContainer.args, ['plan']);
  assert.deepEqual((plan['ClusterRole/svm-pre-upgrade'] as unknown as { rules: unknown[] }).rules, [
    { nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*'], verbs: ['get'] },
    { apiGroups: ['*'], resources: ['*'], verbs: ['get', 'list'] },
  ]);

  // A product's dependency on svm running elsewhere: the hook only.
  const hookOnly = await template([
    '-n',
    'product',
    '--include-crds',
    ...['worker.enabled=false', 'admissionPolicies.enabled=false', 'flowcontrol.enabled=false', 'preUpgradeJob.enabled=true'].flatMap(
      (v) => ['--set', v],
    ),
  ]);
  assert.deepEqual(hookOnly.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
    'ClusterRole/svm-pre-upgrade',
    'ClusterRoleBinding/svm-pre-upgrade',
    'CustomResourceDefinition/storagestates.migration.k8s.io',
    'CustomResourceDefinition/storageversionmigrations.migration.k8s.io',
    'Job/svm-pre-upgrade',
    'ServiceAccount/svm-pre-upgrade',
  ]);

  // values.schema.json: a command other than migrate or plan, or a misspelt value, fails before anything renders.
  for (const [set, message] of [
    ['preUpgradeJob.command=drop', /at '\/preUpgradeJob\/command': value must be one of 'migrate', 'plan'/],
    ['temporal.adress=temporal:7233', /at '\/temporal': additional properties 'adress' not allowed/],
  ] as const) {
    await assert.rejects(helm(['template', 'svm', CHART, '--set', 'preUpgradeJob.enabled=true', '--set', set]), (e: Error) => {
      assert.match(String((e as { stderr?: string }).stderr), message);
      return true;
    });
  }
});

interface WorkerPod {
  metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  spec: {
    imagePullSecrets?: Array<{ name: string }>;
    priorityClassName?: string;
    topologySpreadConstraints?: Array<Record<string, unknown>>;
    volumes: Array<{ name: string; secret?: { secretName: string } }>;
    containers: Array<Container & { image: string }>;
  };
}
const workerPod = (o: Manifest | undefined) => {
  assert.ok(o, 'no worker Deployment');
  return (o as unknown as { spec: { template: WorkerPod } }).spec.template;
};
const WORKER_SELECTOR = { 'app.kubernetes.io/name': 'svm', 'app.kubernetes.io/component': 'worker' };

void test("the worker Pod's options: image digest, pull secrets, Pod annotations and labels, PriorityClass, topology spread, extra volumes, ServiceAccount annotations", async () => {
  const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
  const rendered = byName(
    await template([
      '-n',
      'svm-system',
      ...[
        'image.repository=registry.example.com/svm',
        'image.tag=9.9.9',
        `image.digest=${digest}`,
        'imagePullSecrets[0].name=regcred',
        'imagePullSecrets[1]=other',
        'podAnnotations.example\\.com/team=storage',
        'podLabels.team=storage',
        'priorityClassName=platform-low',
        'topologySpreadConstraints[0].maxSkew=1',
        'topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone',
        'topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway',
        'topologySpreadConstraints[1].maxSkew=2',
        'topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname',
        'topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule',
        'topologySpreadConstraints[1].labelSelector.matchLabels.team=storage',
        'extraVolumes[0].name=extra',
        'extraVolumes[0].configMap.name=extra',
        'extraVolumeMounts[0].name=extra',
        'extraVolumeMounts[0].mountPath=/etc/extra',
        'serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/svm',
        'preUpgradeJob.enabled=true',
        'setupJob.enabled=true',
      ].flatMap((v) => ['--set', v]),
    ]),
  );
  const pod = workerPod(rendered['Deployment/svm-worker']);
  // A digest wins over the tag, in the worker and both hook Jobs.
  const image = `registry.example.com/svm@${digest}`;
  assert.equal(pod.spec.containers[0]!.image, image);
  for (const job of ['Job/svm-pre-upgrade', 'Job/svm-setup']) {
    const jobPod = workerPod(rendered[job]);
    assert.equal(jobPod.spec.containers[0]!.image, image, job);
    assert.deepEqual(jobPod.spec.imagePullSecrets, [{ name: 'regcred' }, { name: 'other' }], job);
  }
  assert.deepEqual(pod.spec.imagePullSecrets, [{ name: 'regcred' }, { name: 'other' }]);
  // The version label is the image's tag.
  assert.equal(pod.metadata.labels['app.kubernetes.io/version'], '9.9.9');
  // Pod annotations and labels beside the chart's own; the selector unchanged.
  assert.equal(pod.metadata.annotations['example.com/team'], 'storage');
  assert.equal(pod.metadata.annotations['prometheus.io/scrape'], 'true');
  assert.equal(pod.metadata.labels.team, 'storage');
  assert.deepEqual((rendered['Deployment/svm-worker'] as unknown as { spec: { selector: unknown } }).spec.selector, {
    matchLabels: WORKER_SELECTOR,
  });
  assert.equal(pod.spec.priorityClassName, 'platform-low');
  // A constraint without a labelSelector spreads the worker Pods; one with its own keeps it.
  assert.deepEqual(pod.spec.topologySpreadConstraints, [
    {
      maxSkew: 1,
      topologyKey: 'topology.kubernetes.io/zone',
      whenUnsatisfiable: 'ScheduleAnyway',
      labelSelector: { matchLabels: WORKER_SELECTOR },
    },
    {
      maxSkew: 2,
      topologyKey: 'kubernetes.io/hostname',
      whenUnsatisfiable: 'DoNotSchedule',
      labelSelector: { matchLabels: { team: 'storage' } },
    },
  ]);
  assert.ok(pod.spec.volumes.some((v) => v.name === 'extra'));
  assert.ok(pod.spec.containers[0]!.volumeMounts.some((m) => m.name === 'extra' && m.mountPath === '/etc/extra'));
  assert.ok(
    pod.spec.volumes.some((v) => v.name === 'tmp'),
    "the chart's own volume is kept",
  );
  const sa = rendered['ServiceAccount/svm-migrator'] as unknown as { metadata: { annotations: Record<string, string> } };
  assert.deepEqual(sa.metadata.annotations, { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/svm' });

  // Without them: none of these fields, the image by tag.
  const plain = workerPod(byName(await template(['-n', 'svm-system']))['Deployment/svm-worker']);
  assert.equal(plain.spec.containers[0]!.image, `ghcr.io/example/svm:${CHART_APP_VERSION}`);
  for (const field of ['imagePullSecrets', 'priorityClassName', 'topologySpreadConstraints'] as const)
    assert.ok(!(field in plain.spec), field);

  // A digest that is not one fails before anything renders.
  await assert.rejects(helm(['template', 'svm', CHART, '--set', 'image.digest=latest']), (e: Error) => {
    assert.match(String((e as { stderr?: string }).stderr), /image\/digest/);
    return true;
  });
});

void test('the Temporal credential as files no Kubernetes read returns (temporal.credentialsVolume), and the Secrets the worker is told to check', async () => {
  const csi = [
    'temporal.credentialsVolume.csi.driver=csi.cert-manager.io',
    'temporal.credentialsVolume.csi.readOnly=true',
    'temporal.credentialsVolume.csi.volumeAttributes.csi\\.cert-manager\\.io/issuer-name=temporal-ca',
    'temporal.credentialsFiles.ca=ca.crt',
    'preUpgradeJob.enabled=true',
  ];
  const rendered = byName(await template(['-n', 'svm-system', ...csi.flatMap((v) => ['--set', v])]));
  for (const name of ['Deployment/svm-worker', 'Job/svm-pre-upgrade']) {
    const pod = podOf(rendered[name]);
    const env = Object.fromEntries(pod.containers[0]!.env.map((e) => [e.name, e.value ?? e.valueFrom]));
    assert.equal(env.TEMPORAL_TLS, 'true', name);
    assert.equal(env.TEMPORAL_TLS_CLIENT_CERT_PATH, '/etc/svm/temporal-credentials/tls.crt', name);
    assert.equal(env.TEMPORAL_TLS_CLIENT_KEY_PATH, '/etc/svm/temporal-credentials/tls.key', name);
    assert.equal(env.TEMPORAL_TLS_SERVER_CA_CERT_PATH, '/etc/svm/temporal-credentials/ca.crt', name);
    // Nothing of the credential in a Secret: no env from one, no Secret volume, nothing for the worker to check.
    assert.ok(!pod.containers[0]!.env.some((e) => 'valueFrom' in e), name);
    assert.ok(!('SVM_TEMPORAL_CREDENTIAL_SECRETS' in env), name);
    const volumes = (pod as unknown as { volumes: Array<Record<string, unknown>> }).volumes;
    assert.ok(!volumes.some((v) => 'secret' in v), name);
    assert.deepEqual(
      volumes.find((v) => v.name === 'temporal-credentials'),
      {
        name: 'temporal-credentials',
        csi: { driver: 'csi.cert-manager.io', readOnly: true, volumeAttributes: { 'csi.cert-manager.io/issuer-name': 'temporal-ca' } },
      },
      name,
    );
    assert.ok(
      (pod.containers[0] as unknown as { volumeMounts: Array<Record<string, unknown>> }).volumeMounts.some(
        (m) => m.name === 'temporal-credentials' && m.mountPath === '/etc/svm/temporal-credentials' && m.readOnly === true,
      ),
      name,
    );
  }
  // A profile (TOML with api_key) from the volume.
  const profile = podOf(
    byName(
      await template([
        '-n',
        'svm-system',
        '--set',
        'temporal.credentialsVolume.csi.driver=secrets-store.csi.k8s.io',
        '--set',
        'temporal.credentialsFiles.profile=temporal.toml',
        '--set',
        'temporal.credentialsFiles.clientCert=',
      ]),
    )['Deployment/svm-worker'],
  );
  const penv = Object.fromEntries(profile.containers[0]!.env.map((e) => [e.name, e.value]));
  assert.equal(penv.TEMPORAL_CONFIG_FILE, '/etc/svm/temporal-credentials/temporal.toml');
  assert.ok(!('TEMPORAL_TLS_CLIENT_CERT_PATH' in penv));
  // Secrets: the worker is told which, to check them against its own token.
  const secrets = podOf(
    byName(
      await template([
        '-n',
        'ops',
        '--set',
        'temporal.apiKeySecret.name=temporal-key',
        '--set',
        'temporal.tls.clientCertSecret=temporal-mtls',
      ]),
    )['Deployment/svm-worker'],
  );
  assert.equal(
    secrets.containers[0]!.env.find((e) => e.name === 'SVM_TEMPORAL_CREDENTIAL_SECRETS')?.value,
    'ops/temporal-key,ops/temporal-mtls',
  );
  // Two client certificates, or two credentials, are refused before anything renders.
  await assert.rejects(
    helm(['template', 'svm', CHART, '--set', 'temporal.credentialsVolume.csi.driver=x', '--set', 'temporal.tls.clientCertSecret=m']),
    (e: Error) => /both give a client certificate/.test(String((e as { stderr?: string }).stderr)),
  );
});

void test('the PodDisruptionBudget: rendered with more than one replica (maxUnavailable 1), on or off by value, minAvailable instead', async () => {
  const pdbs = async (...set: string[]) =>
    (await template(['-n', 'svm-system', ...set.flatMap((v) => ['--set', v])])).filter(
      (o) => o.kind === 'PodDisruptionBudget',
    ) as unknown as Array<Manifest & { spec: Record<string, unknown> }>;
  assert.deepEqual(await pdbs(), [], 'one replica: no budget');
  const [pdb] = await pdbs('replicas=3');
  assert.ok(pdb, 'no budget with 3 replicas');
  assert.equal(pdb.metadata.name, 'svm-worker');
  assert.deepEqual(pdb.spec, { maxUnavailable: 1, unhealthyPodEvictionPolicy: 'AlwaysAllow', selector: { matchLabels: WORKER_SELECTOR } });
  assertStandardLabels([pdb], 'svm');
  assert.deepEqual(await pdbs('replicas=3', 'podDisruptionBudget.enabled=false'), []);
  assert.equal((await pdbs('podDisruptionBudget.enabled=true')).length, 1, 'forced on with one replica');
  const [min] = await pdbs('replicas=3', 'podDisruptionBudget.minAvailable=50%', 'podDisruptionBudget.unhealthyPodEvictionPolicy=');
  assert.deepEqual(min!.spec, { minAvailable: '50%', selector: { matchLabels: WORKER_SELECTOR } });
  assert.deepEqual(await pdbs('replicas=3', 'worker.enabled=false', 'admissionPolicies.enabled=false', 'flowcontrol.enabled=false'), []);
});

void test('the setup hook Job: svm setup before the worker of an install or upgrade, with Temporal admin credentials of its own, off by default', async () => {
  assert.ok(!(await template(['-n', 'svm-system'])).some((o) => o.metadata.name === 'svm-setup'), 'a setup Job by default');
  const common = ['-n', 'svm-system', '--set', 'setupJob.enabled=true', '--set', 'temporal.apiKeySecret.name=worker-key'];
  const job = byName(await template(common))['Job/svm-setup'] as unknown as Manifest & {
    metadata: { annotations: Record<string, string> };
    spec: { template: { spec: { automountServiceAccountToken: boolean; serviceAccountName?: string; containers: Container[] } } };
  };
  assert.ok(job, 'no setup Job');
  assertStandardLabels([job], 'svm');
  assert.deepEqual(job.metadata.annotations, {
    'helm.sh/hook': 'pre-install,pre-upgrade',
    'helm.sh/hook-weight': '-20',
    'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
  });
  const spec = job.spec.template.spec;
  // Temporal only: no ServiceAccount token.
  assert.equal(spec.automountServiceAccountToken, false);
  assert.equal(spec.serviceAccountName, undefined);
  const c = spec.containers[0]!;
  assert.deepEqual(c.args, ['setup']);
  // The worker's key by default; its own when given, with its own client certificate.
  assert.deepEqual(temporalEnv(c).find((e) => e.name === 'TEMPORAL_API_KEY')!.valueFrom, {
    secretKeyRef: { name: 'worker-key', key: 'api-key' },
  });
  const admin = byName(
    await template([
      ...common,
      '--set',
      'setupJob.apiKeySecret.name=admin-key',
      '--set',
      'setupJob.clientCertSecret=admin-cert',
      '--set',
      'temporal.tls.clientCertSecret=worker-cert',
    ]),
  );
  const adminPod = podOf(admin['Job/svm-setup']);
  const adminEnv = temporalEnv(adminPod.containers[0]!);
  assert.deepEqual(adminEnv.find((e) => e.name === 'TEMPORAL_API_KEY')!.valueFrom, { secretKeyRef: { name: 'admin-key', key: 'api-key' } });
  assert.ok(adminPod.volumes.some((v) => v.name === 'temporal-tls' && JSON.stringify(v.secret) === '{"secretName":"admin-cert"}'));
  // The worker keeps its own.
  const worker = podOf(admin['Deployment/svm-worker']);
  assert.deepEqual(temporalEnv(worker.containers[0]!).find((e) => e.name === 'TEMPORAL_API_KEY')!.valueFrom, {
    secretKeyRef: { name: 'worker-key', key: 'api-key' },
  });
  assert.ok(worker.volumes.some((v) => v.name === 'temporal-tls' && JSON.stringify(v.secret) === '{"secretName":"worker-cert"}'));
  // The same Temporal settings otherwise: what `svm setup` reads.
  const names = (env: Container['env']) => env.map((e) => e.name);
  assert.deepEqual(names(adminEnv), names(temporalEnv(worker.containers[0]!)));
});

void test("the pool preset (presets/pool.yaml): the worker serves the clusters of a mounted Secret of kubeconfigs, as docs/fleet.md's pool", async () => {
  const rendered = await template(['-n', 'svm-system', '-f', path.join(CHART, 'presets', 'pool.yaml')]);
  const pod = workerPod(byName(rendered)['Deployment/svm-worker']);
  const c = pod.spec.containers[0]!;
  const mount = c.volumeMounts.find((m) => m.name === 'clusters');
  assert.deepEqual(mount, { name: 'clusters', mountPath: '/etc/svm/clusters', readOnly: true });
  assert.deepEqual(
    pod.spec.volumes.find((v) => v.name === 'clusters'),
    { name: 'clusters', secret: { secretName: 'svm-clusters' } },
  );
  // Each env name once (the preset's fence settings replace the chart's), and what the worker makes of them: a pool.
  const names = c.env.map((e) => e.name);
  assert.deepEqual(names, [...new Set(names)], 'an env name twice');
  const env = Object.fromEntries(c.env.map((e) => [e.name, e.value ?? '']));
  const settings = loadWorkerSettings({ ...env, SVM_QPS: env.SVM_QPS ?? '' });
  assert.equal(settings.kubeconfigDir, '/etc/svm/clusters');
  assert.equal(settings.temporal.cluster, undefined);
  assert.equal(settings.requireFence, false);
  assert.equal(settings.requireStaticFence, false);
  // Nothing that guards or grants the release's ServiceAccount in the management cluster.
  assert.ok(!rendered.some((o) => o.kind.startsWith('ValidatingAdmissionPolicy') || o.kind === 'FlowSchema'));
  const role = byName(rendered)['ClusterRole/svm-migrator'] as unknown as { rules: Array<{ verbs: string[] }> };
  assert.deepEqual(
    role.rules.filter((r) => r.verbs.join(',') === 'list,patch'),
    [],
    'the re-encode (list and patch) granted in the management cluster',
  );
});

void test('NOTES.txt: how to get the svm command, and a warning while the image is the placeholder', async () => {
  const notes = async (...set: string[]) =>
    (await helm(['install', 'svm', CHART, '-n', 'svm-system', '--dry-run=client', ...set.flatMap((v) => ['--set', v])])).stdout.split(
      'NOTES:',
    )[1] ?? '';
  const placeholder = await notes();
  assert.match(placeholder, /WARNING: image\.repository is the placeholder ghcr\.io\/example\/svm/);
  assert.match(placeholder, /kubectl -n svm-system exec deploy\/svm-worker -- node bin\/svm\.js migrate --all --wait/);
  assert.match(placeholder, /npx --package \.\/temporal-storage-version-migrator-[0-9.]+\.tgz svm/);
  assert.match(placeholder, /svm setup/);
  const own = await notes('image.repository=registry.example.com/svm', 'setupJob.enabled=true');
  assert.doesNotMatch(own, /WARNING/);
  assert.match(own, /registered there by the hook Job svm-setup/);
});

/** The install's values: the plane's Temporal, a task queue of the test's own, a budget. */
const installValues = () => [
  '--set',
  `namePrefix=${prefix}`,
  '--set',
  `temporal.address=${plane.temporal.address}`,
  '--set',
  `temporal.taskQueue=${taskQueue}`,
  '--set',
  `budget.qps=${QPS}`,
];

void test('monitoring on: the release holds the dashboard of deploy/grafana, the alert rules and the ServiceMonitor of deploy/prometheus, unchanged', async () => {
  const rendered = byName(
    await template([
      '-n',
      'mon',
      '--set',
      'monitoring.dashboard.enabled=true',
      '--set',
      'monitoring.prometheusRule.enabled=true',
      '--set',
      'monitoring.prometheusRule.labels.release=kube-prometheus-stack',
    ]),
  );
  const cm = rendered['ConfigMap/svm-dashboard'] as unknown as {
    metadata: { labels: Record<string, string> };
    data: Record<string, string>;
  };
  assert.equal(cm.metadata.labels.grafana_dashboard, '1');
  assert.deepStrictEqual(
    JSON.parse(cm.data['svm-dashboard.json']!),
    JSON.parse(fs.readFileSync(path.join(DEPLOY_DIR, 'grafana', 'svm-dashboard.json'), 'utf8')),
  );
  const rule = rendered['PrometheusRule/svm-alerts'] as unknown as { metadata: { labels: Record<string, string> }; spec: unknown };
  assert.equal(rule.metadata.labels.release, 'kube-prometheus-stack');
  const shipped = YAML.parse(fs.readFileSync(path.join(DEPLOY_DIR, 'prometheus', 'svm-alerts.yaml'), 'utf8')) as { spec: unknown };
  assert.deepStrictEqual(rule.spec, shipped.spec);
  // The rules come with a ServiceMonitor of the worker's metrics Service (alerts on metrics nobody scrapes would fire).
  const monitor = rendered['ServiceMonitor/svm-worker'] as unknown as { metadata: { namespace: string }; spec: unknown };
  assert.ok(monitor, 'no ServiceMonitor with the PrometheusRule');
  assert.equal(monitor.metadata.namespace, 'mon');
  const withMonitor = await template(['-n', 'svm-system', '--set', 'monitoring.serviceMonitor.enabled=true']);
  const shippedMonitor = readManifests(path.join('prometheus', 'svm-servicemonitor.yaml'));
  assert.deepStrictEqual(
    byName(
      asShipped(
        withMonitor.filter((o) => o.kind === 'ServiceMonitor'),
        shippedMonitor,
      ),
    ),
    byName(shippedMonitor),
  );
  // It selects the Service of the worker Pods by its labels, and scrapes the Service's port by its name.
  const service = byName(withMonitor)['Service/svm-worker-metrics'] as unknown as {
    metadata: { labels: Record<string, string> };
    spec: { selector: Record<string, string>; ports: Array<{ name: string; targetPort: string }> };
  };
  const sm = byName(withMonitor)['ServiceMonitor/svm-worker'] as unknown as {
    spec: { selector: { matchLabels: Record<string, string> }; endpoints: Array<{ port: string; path: string }> };
  };
  for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) assert.equal(service.metadata.labels[k], v, k);
  assert.deepEqual(
    sm.spec.endpoints.map((e) => e.port),
    service.spec.ports.map((p) => p.name),
  );
  const worker = byName(withMonitor)['Deployment/svm-worker'] as unknown as {
    spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: Array<{ ports: Array<{ name: string }> }> } } };
  };
  for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(worker.spec.template.metadata.labels[k], v, k);
  assert.ok(worker.spec.template.spec.containers[0]!.ports.some((p) => p.name === service.spec.ports[0]!.targetPort));
  // false keeps it out even with the rules.
  const rulesOnly = await template([
    '-n',
    'mon',
    '--set',
    'monitoring.prometheusRule.enabled=true',
    '--set',
    'monitoring.serviceMonitor.enabled=false',
  ]);
  assert.ok(!rulesOnly.some((o) => o.kind === 'ServiceMonitor'));
  // Off by default: none is rendered; the Service always is.
  const plain = await template(['-n', 'mon']);
  assert.ok(!plain.some((o) => o.kind === 'PrometheusRule' || o.kind === 'ServiceMonitor' || o.metadata.name === 'svm-dashboard'));
  assert.ok(plain.some((o) => o.kind === 'Service' && o.metadata.name === 'svm-worker-metrics'));
});

void test('helm template, hook Job included, passes the API server (server-side dry run) with no warning', async () => {
  // The release namespace, created first with the Pod Security label (docs/deploy.md).
  await plane.kube.request('POST', '/api/v1/namespaces', {
    body: JSON.stringify({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    }),
  });
  const { stdout } = await helm([
    'template',
    release,
    CHART,
    '-n',
    ns,
    '--include-crds',
    '--set',
    'preUpgradeJob.enabled=true',
    ...installValues(),
  ]);
  const rendered = objects(stdout);
  assert.equal(rendered.length, 24); // deploy/'s 20 without the Namespace, the hook's 4
  const file = path.join(helmHome, 'rendered.yaml');
  fs.writeFileSync(file, stdout);
  const dry = await kubectl(['apply', '-f', file, '--server-side', '--field-manager=svm-test', '--force-conflicts', '--dry-run=server']);
  assert.equal(dry.stderr, '', 'the API server warned about the chart');
  assert.equal(dry.stdout.match(/serverside-applied \(server dry run\)/g)?.length, rendered.length, dry.stdout);
  assert.match(dry.stdout, new RegExp(`deployment\\.apps/${prefix}-worker serverside-applied`));
  assert.match(dry.stdout, new RegExp(`job\\.batch/${prefix}-pre-upgrade serverside-applied`));

  // Every optional part of the templates: mTLS, an API key, extra env, scheduling, a narrowed role, plan, the
  // Pod options (a digest, pull secrets, a PriorityClass, topology spread, extra volumes), the PodDisruptionBudget
  // of 3 replicas, ServiceAccount annotations, the setup Job.
  const other = await helm([
    'template',
    release,
    CHART,
    '-n',
    ns,
    ...installValues(),
    ...[
      'namePrefix=hx',
      'temporal.tls.clientCertSecret=temporal-client',
      'temporal.apiKeySecret.name=temporal-key',
      'extraEnv[0].name=SVM_MAX_CONCURRENT_CHUNKS',
      'nodeSelector.disk=ssd',
      'tolerations[0].operator=Exists',
      'replicas=3',
      'rbac.migratableResources[0].apiGroups={}',
      'rbac.migratableResources[0].resources={configmaps,secrets}',
      'preUpgradeJob.enabled=true',
      'preUpgradeJob.command=plan',
      'staticFence.enabled=true',
      `image.digest=sha256:${'a'.repeat(64)}`,
      'imagePullSecrets[0].name=regcred',
      'priorityClassName=system-cluster-critical',
      'topologySpreadConstraints[0].maxSkew=1',
      'topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone',
      'topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway',
      'podAnnotations.example\\.com/team=storage',
      'podLabels.team=storage',
      'extraVolumes[0].name=clusters',
      'extraVolumes[0].secret.secretName=svm-clusters',
      'extraVolumeMounts[0].name=clusters',
      'extraVolumeMounts[0].mountPath=/etc/svm/clusters',
      'serviceAccount.annotations.example\\.com/role=svm',
      'setupJob.enabled=true',
    ].flatMap((v) => ['--set', v]),
    '--set-string',
    'extraEnv[0].value=8',
  ]);
  fs.writeFileSync(file, other.stdout);
  const dryOther = await kubectl(['apply', '-f', file, '--server-side', '--field-manager=svm-test', '--dry-run=server']);
  assert.equal(dryOther.stderr, '', 'the API server warned about the chart');
  assert.equal(dryOther.stdout.match(/serverside-applied \(server dry run\)/g)?.length, objects(other.stdout).length, dryOther.stdout);
  assert.ok(byName(objects(other.stdout))['PodDisruptionBudget/hx-worker'], 'no PodDisruptionBudget with 3 replicas');
  assert.ok(byName(objects(other.stdout))['Job/hx-setup'], 'no setup Job');
  const narrowed = byName(objects(other.stdout))['ClusterRole/hx-migrator'] as unknown as {
    rules: Array<{ resources?: string[]; verbs: string[] }>;
  };
  assert.deepEqual(
    narrowed.rules.filter((r) => r.verbs.join(',') === 'list,patch'),
    [{ apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['list', 'patch'] }],
  );
});

void test('helm install into a fresh namespace creates every object of the release', async () => {
  const t0 = Date.now();
  await helm(['install', release, CHART, '-n', ns, ...installValues()]);
  installed = true;
  const installMs = Date.now() - t0;
  const status = JSON.parse((await helm(['status', release, '-n', ns, '-o', 'json'])).stdout) as { info: { status: string } };
  assert.equal(status.info.status, 'deployed');

  const manifestText = (await helm(['get', 'manifest', release, '-n', ns])).stdout;
  const manifest = objects(manifestText);
  assertStandardLabels(manifest, release);
  assert.deepEqual(manifest.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
    `ClusterRole/${prefix}-migrator`,
    `ClusterRole/${prefix}-migrator-crd-status`,
    `ClusterRoleBinding/${prefix}-migrator`,
    `ClusterRoleBinding/${prefix}-migrator-crd-status`,
    `Deployment/${prefix}-worker`,
    `FlowSchema/${prefix}-migrator`,
    `FlowSchema/${prefix}-migrator-leases`,
    `PriorityLevelConfiguration/${prefix}-migrator`,
    `Role/${prefix}-migrator-events`,
    `Role/${prefix}-migrator-leases`,
    `RoleBinding/${prefix}-migrator-events`,
    `RoleBinding/${prefix}-migrator-leases`,
    `Service/${prefix}-worker-metrics`,
    `ServiceAccount/${prefix}-migrator`,
    `ValidatingAdmissionPolicy/${prefix}-storageversionmigrations`,
    `ValidatingAdmissionPolicy/${prefix}-worker-no-op-only`,
    `ValidatingAdmissionPolicyBinding/${prefix}-storageversionmigrations`,
    `ValidatingAdmissionPolicyBinding/${prefix}-worker-no-op-only`,
  ]);
  // Each exists in the API, owned by the release.
  const file = path.join(helmHome, 'manifest.yaml');
  fs.writeFileSync(file, manifestText);
  const live = JSON.parse((await kubectl(['get', '-f', file, '-o', 'json'])).stdout) as {
    items: Array<{ kind: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string> } }>;
  };
  assert.equal(live.items.length, manifest.length);
  for (const o of live.items) {
    assert.equal(o.metadata.annotations?.['meta.helm.sh/release-name'], release, `${o.kind}/${o.metadata.name}`);
    // The release namespace, but for the Events Role: Events about cluster-scoped objects live in default.
    if (['Deployment', 'Service', 'ServiceAccount', 'Role', 'RoleBinding'].includes(o.kind))
      assert.equal(o.metadata.namespace, o.metadata.name.endsWith('-migrator-events') ? 'default' : ns, `${o.kind}/${o.metadata.name}`);
  }
  // The CRDs (crds/: installed when missing, never changed or deleted by Helm).
  for (const crd of ['storageversionmigrations.migration.k8s.io', 'storagestates.migration.k8s.io']) {
    const res = await plane.kube.raw('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}`);
    assert.equal(res.status, 200, crd);
  }
  process.stderr.write(`helm install took ${installMs} ms\n`);
});

/**
 * Runs fn with a worker started as the chart's Pod would start it: the
 * installed Deployment's env, plus what a Pod adds: its ServiceAccount's token
 * (in-cluster config), its namespace (the worker reads it from the
 * ServiceAccount volume), and a port of its own (9464 may be taken on this
 * machine; a Pod has its own network): the one it binds, of the OS's choosing.
 */
async function withChartWorker<T>(
  fn: (ctx: { w: MigratorWorker; m: Migrator; port: number; sa: string }) => Promise<T>,
): Promise<{ result: T; warnings: string[] }> {
  const deployment = await plane.kube.getJson<Manifest>(`/apis/apps/v1/namespaces/${ns}/deployments/${prefix}-worker`);
  const pod = podOf(deployment);
  const container = pod.containers[0]!;
  assert.deepEqual(container.args, ['worker']);
  const env: Record<string, string> = {};
  for (const e of container.env) {
    assert.ok(!('valueFrom' in e), `${e.name} is not a plain value`);
    // The API server leaves an empty value out (SVM_CLUSTER of a release that names no cluster).
    env[e.name] = e.value ?? '';
  }
  assert.deepEqual(env, {
    TEMPORAL_ADDRESS: plane.temporal.address,
    TEMPORAL_NAMESPACE: 'default',
    TEMPORAL_TASK_QUEUE: taskQueue,
    SVM_CLUSTER: '',
    SVM_QPS: String(QPS),
    SVM_METRICS_PORT: '9464',
    SVM_METRICS_HOST: '0.0.0.0',
    SVM_REQUIRE_STATIC_FENCE: 'true',
    SVM_REQUIRE_FENCE: 'true',
    // Worker Versioning (docs/deploy.md, "Upgrading svm"): a version of the release's Worker Deployment, promoting itself.
    // No TEMPORAL_WORKER_BUILD_ID: the build ID is the image's own <version>-<revision>.
    TEMPORAL_DEPLOYMENT_NAME: `${prefix}-worker`,
    SVM_PROMOTE_VERSION: 'true',
  });
  const sa = pod.serviceAccountName;
  assert.equal(sa, `${prefix}-migrator`);
  const kubeconfig = writeTokenKubeconfig(plane.kube.server, await serviceAccountToken(plane.kube, ns, sa), sa);
  const settings = loadWorkerSettings({ ...env, KUBECONFIG: kubeconfig, SVM_NAMESPACE: ns, SVM_METRICS_PORT: '0' });
  assert.equal(settings.qps, QPS);
  assert.equal(settings.bridge, true);
  assert.equal(settings.kubeNamespace, ns);
  assert.equal(settings.requireStaticFence, true);
  assert.equal(settings.requireFence, true);
  assert.deepEqual(settings.versioning, { deploymentName: `${prefix}-worker`, buildId: undefined, promote: true, checkSeconds: 30 });
  const buildId = workerDeploymentOptions(settings.versioning, () => svmBuild())?.version.buildId;
  assert.equal(buildId, defaultBuildId(svmBuild()));
  assert.ok(buildId?.startsWith(`${CHART_APP_VERSION}-`), `${buildId} is not of the chart's appVersion`);

  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const w = await createMigratorWorker(settings, createLogger(sink));
  const m = await Migrator.connect({ temporal: { ...settings.temporal, address: settings.temporal.address! }, kubeconfig });
  try {
    const result = await w.runUntil(() => fn({ w, m, port: w.metricsPort!, sa }));
    return { result, warnings: logs.filter((l) => /"level":"(warn|error)"/.test(l)) };
  } finally {
    await m.close();
    removeTokenKubeconfig(kubeconfig);
  }
}

/**
 * A CRD with count objects stored at v1 (etcd says so), its storage version then switched to v2, and the
 * narrow grant an operator gives the chart's worker for a custom resource (`svm grant --service-account`).
 */
async function crdLeftAtV1(name: string, count: number) {
  const crd = testCrd(`${uniq(name)}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', count, { namespace: uniq(`${name}-w`) });
  await applyCrd(plane.kube, crd, 'v2');
  await serverSideApply(
    plane.kube,
    YAML.parseAllDocuments(grantManifests({ group: crd.group, resource: crd.plural, custom: true }, `${ns}/${prefix}-migrator`)).map(
      (d) => d.toJS() as Manifest,
    ),
  );
  const key = { group: crd.group, resource: crd.plural, custom: true };
  assert.deepEqual((await storedVersions(plane.etcd, key)).byApiVersion, { [`${crd.group}/v1`]: count });
  return { crd, key };
}

/** etcd: every object stored at v2; the CRD's storedVersions reduced to v2. */
async function assertMigratedToV2(crd: TestCrd, key: ResourceKey, count: number) {
  assert.deepEqual((await storedVersions(plane.etcd, key)).byApiVersion, { [`${crd.group}/v2`]: count });
  const crdObj = await plane.kube.getJson<{ status: { storedVersions: string[] } }>(
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
  );
  assert.deepEqual(crdObj.status.storedVersions, ['v2']);
}

void test('a worker with exactly the installed ServiceAccount rights and Deployment settings migrates a CRD from v1 to v2 (etcd as judge)', async () => {
  assert.ok(installed, 'the release is not installed');
  const COUNT = 200;
  const { crd, key } = await crdLeftAtV1('helm', COUNT);
  const t0 = Date.now();
  const { result, warnings } = await withChartWorker(async ({ w, m, port, sa }) => {
    assert.equal((await whoAmI(w.kube)).username, `system:serviceaccount:${ns}:${sa}`);
    // The release's token can read any Secret of its namespace (it lists Secrets cluster-wide, to migrate them):
    // a Temporal credential kept in one is its holder's, as the real authorizer answers (temporal.credentialsVolume).
    assert.deepEqual(await credentialExposure(w.kube, parseSecretRefs('temporal-key', ns)), [
      { secret: `${ns}/temporal-key`, verbs: ['list'] },
    ]);
    // The probes' endpoint answers.
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
    return migrationResult(await m.start(crd.name, { chunkSize: 50 }));
  });
  const migrateMs = Date.now() - t0;
  assert.equal(result.phase, 'Succeeded', `${result.message}\n${warnings.join('')}`);
  assert.equal(result.counters.failed, 0);
  assert.equal(result.counters.rewritten, COUNT);
  await assertMigratedToV2(crd, key, COUNT);
  // Leader election ran in the release namespace, with the chart's Role.
  const lease = await plane.kube.raw('GET', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${LEADER_LEASE}`);
  assert.equal(lease.status, 200, `no ${LEADER_LEASE} Lease in ${ns}`);
  process.stderr.write(`worker start and migration of ${COUNT} objects as the chart's ServiceAccount: ${migrateMs} ms\n`);
});

void test('helm upgrade runs the pre-upgrade hook: the Job command, as the hook ServiceAccount, migrates before the upgrade goes on', async () => {
  assert.ok(installed, 'the release is not installed');
  const COUNT = 100;
  const { crd, key } = await crdLeftAtV1('hook', COUNT);
  const jobPath = `/apis/batch/v1/namespaces/${ns}/jobs/${prefix}-pre-upgrade`;
  const t0 = Date.now();
  const { result: upgraded, warnings } = await withChartWorker(async () => {
    // A product's `helm upgrade`, with svm's hook on for the resources it is about to drop a version of.
    const upgrade = helm(
      [
        'upgrade',
        release,
        CHART,
        '-n',
        ns,
        '--reuse-values',
        '--set',
        'preUpgradeJob.enabled=true',
        '--set',
        `preUpgradeJob.resources={${crd.name}}`,
        '--timeout',
        '4m',
      ],
      300_000,
    );
    let upgradeDone = false;
    void upgrade.then(
      () => (upgradeDone = true),
      () => (upgradeDone = true),
    );
    // No kubelet and no Job controller here: the test plays both. It runs the
    // Job's container command as the Job's ServiceAccount with the Job's env, then
    // writes the Job's status as the Job controller would.
    const job = await eventually(
      'the hook Job',
      async () => {
        if (upgradeDone)
          throw new Error(`helm upgrade ended before its hook Job appeared: ${String(await upgrade.catch((e: Error) => e))}`);
        const r = await plane.kube.raw('GET', jobPath);
        return r.status === 200 && (JSON.parse(r.body) as Manifest);
      },
      120_000,
    );
    const jobPod = podOf(job);
    const c = jobPod.containers[0]!;
    assert.deepEqual(c.args, ['migrate', crd.name, '--wait']);
    const status = JSON.parse((await helm(['status', release, '-n', ns, '-o', 'json'])).stdout) as { info: { status: string } };
    assert.equal(status.info.status, 'pending-upgrade', 'the upgrade went on before its hook finished');
    const sa = jobPod.serviceAccountName;
    const kubeconfig = writeTokenKubeconfig(plane.kube.server, await serviceAccountToken(plane.kube, ns, sa), sa);
    const jobEnv: Record<string, string> = {};
    for (const e of c.env) jobEnv[e.name] = e.value!;
    const startTime = new Date().toISOString();
    const cli = await run(process.execPath, [path.join(ROOT, 'bin', 'svm.js'), ...c.args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...jobEnv, KUBECONFIG: kubeconfig },
      timeout: 240_000,
    }).finally(() => removeTokenKubeconfig(kubeconfig));
    assert.match(cli.stdout, /Succeeded/, cli.stdout + cli.stderr);
    const completionTime = new Date().toISOString();
    const done = (type: string) => ({ type, status: 'True', lastProbeTime: completionTime, lastTransitionTime: completionTime });
    await plane.kube.request('PATCH', `${jobPath}/status`, {
      body: JSON.stringify({
        status: { startTime, completionTime, succeeded: 1, conditions: [done('SuccessCriteriaMet'), done('Complete')] },
      }),
      contentType: 'application/merge-patch+json',
    });
    return upgrade;
  });
  const upgradeMs = Date.now() - t0;
  assert.match(upgraded.stdout, /has been upgraded/, upgraded.stdout);
  const status = JSON.parse((await helm(['status', release, '-n', ns, '-o', 'json'])).stdout) as {
    info: { status: string };
    version: number;
  };
  assert.equal(status.info.status, 'deployed');
  assert.equal(status.version, 2);
  // hook-succeeded: the Job, its ServiceAccount, ClusterRole and binding are gone.
  for (const p of [
    jobPath,
    `/api/v1/namespaces/${ns}/serviceaccounts/${prefix}-pre-upgrade`,
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${prefix}-pre-upgrade`,
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${prefix}-pre-upgrade`,
  ]) {
    await eventually(`${p} deleted`, async () => (await plane.kube.raw('GET', p)).status === 404, 30_000);
  }
  // The shared plane holds what earlier test files left (StorageVersionMigrations of their own workers, API
  // servers they restarted): the worker may warn of those, or of a watch that broke and was listed again. What
  // this test asks is that nothing of this migration, and no refusal of the chart's rights, was warned of.
  if (warnings.length > 0) process.stderr.write(`the chart's worker warned, during the upgrade:\n${warnings.join('')}`);
  const ours = warnings.filter(
    (l) => l.includes(crd.name) || /forbidden|\b403\b|cannot (get|list|watch|create|update|patch|delete)/i.test(l),
  );
  assert.deepEqual(ours, [], `the worker warned of this migration or of its rights:\n${ours.join('')}`);
  await assertMigratedToV2(crd, key, COUNT);
  process.stderr.write(`helm upgrade with its pre-upgrade migration of ${COUNT} objects: ${upgradeMs} ms\n`);
});

void test('helm uninstall removes the release; the CRDs stay', async () => {
  assert.ok(installed, 'the release is not installed');
  await helm(['uninstall', release, '-n', ns, '--wait', '--timeout', '2m']);
  installed = false;
  for (const p of [
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${prefix}-migrator`,
    `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${prefix}-storageversionmigrations`,
    `/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/${prefix}-migrator`,
    `/api/v1/namespaces/${ns}/serviceaccounts/${prefix}-migrator`,
  ]) {
    assert.equal((await plane.kube.raw('GET', p)).status, 404, p);
  }
  const crd = await plane.kube.raw(
    'GET',
    '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/storageversionmigrations.migration.k8s.io',
  );
  assert.equal(crd.status, 200);
  const list = JSON.parse((await helm(['list', '-n', ns, '-o', 'json'])).stdout) as unknown[];
  assert.deepEqual(list, []);
});
