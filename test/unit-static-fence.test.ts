/**
 * The fence's copies are rendered from one source (scripts/fence.ts) and name the worker's own ServiceAccount:
 * deploy/worker-policy.yaml and its manifest-loaded twin in deploy/static-fence name the one of deploy/rbac.yaml (as
 * deploy/deployment.yaml runs it), the chart's templates the release's; the names the fence exempts are the ones
 * the worker's code writes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';
import {
  CHART_SETTINGS,
  deployServiceAccount,
  FENCE_NAME,
  fenceFiles,
  MEMBER_LEASE_PREFIX,
  ROOT,
  serviceAccountUser,
  STATIC_SUFFIX,
} from '../scripts/fence';
import { memberLeaseName } from '../src/worker/budget';
import { LEADER_LEASE } from '../src/worker/leader';

type Doc = Record<string, unknown> & { kind: string; metadata: { name: string; namespace?: string } };
interface Policy {
  spec: { matchConditions: Array<{ name: string; expression: string }>; variables: Array<{ name: string; expression: string }> };
}

const text = (f: string) => readFileSync(path.join(ROOT, f), 'utf8');
const docs = (f: string) => YAML.parseAllDocuments(text(f)).map((d) => d.toJS() as Doc);
const STATIC_FILE = `deploy/static-fence/${FENCE_NAME}.yaml`;

/** The user name a policy's matchConditions admit, and the namespace its Leases are exempt in. */
function namedIdentity(policy: Doc): { user: string; leaseNamespace: string } {
  const spec = (policy as unknown as Policy).spec;
  assert.equal(spec.matchConditions.length, 1);
  const user = /^request\.userInfo\.username == '([^']+)'$/.exec(spec.matchConditions[0]!.expression)?.[1];
  const lease = spec.variables.find((v) => v.name === 'lease')?.expression ?? '';
  const leaseNamespace = /request\.namespace == '([^']+)'/.exec(lease)?.[1];
  assert.ok(user && leaseNamespace, 'the policy names no user or no Lease namespace');
  return { user, leaseNamespace };
}

for (const { file, text: rendered } of fenceFiles()) {
  void test(`${file} is what scripts/fence.ts renders (run \`npm run gen\` after changing it or deploy/rbac.yaml)`, () => {
    assert.equal(text(file), rendered);
  });
}

void test('deploy/static-fence holds the policy and binding of worker-policy.yaml, renamed to *.static.k8s.io and nothing else', () => {
  const api = docs('deploy/worker-policy.yaml');
  const stat = docs(STATIC_FILE);
  assert.equal(stat.length, 2);
  const renamed = JSON.parse(JSON.stringify(api).replaceAll(`"${FENCE_NAME}"`, `"${FENCE_NAME}${STATIC_SUFFIX}"`)) as unknown;
  assert.deepEqual(stat, renamed);
  for (const o of stat) assert.match(o.metadata.name, /\.static\.k8s\.io$/);
});

void test("deploy/'s fence, both copies, names the ServiceAccount deploy/rbac.yaml creates and binds and the Deployment runs as", () => {
  const sa = deployServiceAccount();
  const rbac = docs('deploy/rbac.yaml');
  const deployment = docs('deploy/deployment.yaml').find((o) => o.kind === 'Deployment')!;
  const pod = (deployment as unknown as { spec: { template: { spec: { serviceAccountName: string } } } }).spec.template.spec;
  assert.equal(pod.serviceAccountName, sa.name);
  assert.equal(deployment.metadata.namespace, sa.namespace);
  for (const binding of rbac.filter((o) => o.kind.endsWith('Binding'))) {
    assert.deepEqual((binding as unknown as { subjects: unknown[] }).subjects, [
      { kind: 'ServiceAccount', name: sa.name, namespace: sa.namespace },
    ]);
  }
  for (const file of ['deploy/worker-policy.yaml', STATIC_FILE]) {
    const policy = docs(file).find((o) => o.kind === 'ValidatingAdmissionPolicy')!;
    assert.deepEqual(namedIdentity(policy), { user: serviceAccountUser(sa), leaseNamespace: sa.namespace }, file);
  }
});

void test("the chart's fence names the release's ServiceAccount, in both the policy and the static fence's ConfigMap", () => {
  const helpers = text('charts/svm/templates/_helpers.tpl');
  assert.match(
    helpers,
    /define "svm\.migratorUser" -}}\nsystem:serviceaccount:\{\{ \.Release\.Namespace \}\}:\{\{ include "svm\.migrator" \. \}\}\n/,
  );
  const account = text('charts/svm/templates/rbac.yaml');
  assert.match(
    account,
    /kind: ServiceAccount\nmetadata:\n {2}name: \{\{ include "svm\.migrator" \. \}\}\n {2}namespace: \{\{ \.Release\.Namespace \}\}\n/,
  );
  // The named template's context is (dict "name" ... "root" <the chart's>): its settings read the chart's through .root.
  assert.deepEqual(CHART_SETTINGS, {
    name: '{{ .name }}',
    user: '{{ include "svm.migratorUser" .root }}',
    namespace: '{{ .root.Release.Namespace }}',
  });
  const fence = text('charts/svm/templates/_fence.tpl');
  assert.ok(fence.includes(`expression: "request.userInfo.username == '${CHART_SETTINGS.user}'"`));
  assert.ok(fence.includes(`request.namespace == '${CHART_SETTINGS.namespace}'`));
  const include = (name: string) => `include "svm.fence" (dict "name" (printf "%s-worker-no-op-only${name}" .Values.namePrefix) "root" .)`;
  assert.ok(text('charts/svm/templates/worker-policy.yaml').includes(include('')));
  const configMap = text('charts/svm/templates/static-fence.yaml');
  assert.ok(configMap.includes(include(STATIC_SUFFIX)));
  assert.ok(configMap.includes('include "svm.admissionConfiguration" .'));
});

void test('the Leases the fence exempts are named as the worker names them', () => {
  const policy = docs('deploy/worker-policy.yaml').find((o) => o.kind === 'ValidatingAdmissionPolicy')!;
  const lease = (policy as unknown as Policy).spec.variables.find((v) => v.name === 'lease')!.expression;
  assert.ok(lease.includes(`variables.name == '${LEADER_LEASE}'`));
  assert.ok(lease.includes(`variables.name.startsWith('${MEMBER_LEASE_PREFIX}')`));
  for (const identity of ['svm-worker-5d8f7-abcde', 'Pod_A.example', '', '---', 'x'.repeat(300)])
    assert.ok(memberLeaseName(identity, 'instance-1').startsWith(MEMBER_LEASE_PREFIX), identity);
});

void test('the AdmissionConfiguration points the ValidatingAdmissionPolicy plugin at a static manifests directory', () => {
  const [cfg] = docs('deploy/static-fence/admission-configuration.yaml') as unknown as Array<{
    kind: string;
    plugins: Array<{ name: string; configuration: { kind: string; staticManifestsDir: string } }>;
  }>;
  assert.equal(cfg!.kind, 'AdmissionConfiguration');
  const vap = cfg!.plugins.find((p) => p.name === 'ValidatingAdmissionPolicy');
  assert.equal(vap?.configuration.kind, 'ValidatingAdmissionPolicyConfiguration');
  assert.ok(path.isAbsolute(vap.configuration.staticManifestsDir));
});
