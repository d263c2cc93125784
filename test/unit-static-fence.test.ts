/** The manifest-loaded fence (deploy/static-fence) is the fence of deploy/worker-policy.yaml under its static names. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';

const read = (f: string) =>
  YAML.parseAllDocuments(readFileSync(path.join(__dirname, '..', 'deploy', f), 'utf8')).map((d) => d.toJS() as Record<string, unknown>);

void test('deploy/static-fence holds the policy and binding of worker-policy.yaml, renamed to *.static.k8s.io and nothing else', () => {
  const api = read('worker-policy.yaml');
  const stat = read('static-fence/svm-worker-no-op-only.yaml');
  assert.equal(stat.length, 2);
  const renamed = JSON.parse(JSON.stringify(api).replaceAll('"svm-worker-no-op-only"', '"svm-worker-no-op-only.static.k8s.io"')) as unknown;
  assert.deepEqual(stat, renamed);
  for (const o of stat) assert.match((o.metadata as { name: string }).name, /\.static\.k8s\.io$/);
});

void test('the AdmissionConfiguration points the ValidatingAdmissionPolicy plugin at a static manifests directory', () => {
  const [cfg] = read('static-fence/admission-configuration.yaml') as Array<{
    kind: string;
    plugins: Array<{ name: string; configuration: { kind: string; staticManifestsDir: string } }>;
  }>;
  assert.equal(cfg!.kind, 'AdmissionConfiguration');
  const vap = cfg!.plugins.find((p) => p.name === 'ValidatingAdmissionPolicy');
  assert.equal(vap?.configuration.kind, 'ValidatingAdmissionPolicyConfiguration');
  assert.ok(path.isAbsolute(vap.configuration.staticManifestsDir));
});
