/**
 * Unit tests of src/dev/tools.ts: the plane, the demo and the tests ask
 * scripts/tools.sh for each binary by name, and only for the missing ones
 * (the demo's first run builds etcd, one kube-apiserver and the Temporal CLI,
 * nothing else). Pure: nothing is built.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { kubeToolName, kubeVersions, missingTools, toolPath, toolsDir, toolVersions } from '../src/dev/tools';

void test('the demo and the plane ask scripts/tools.sh for each binary by name, and only the missing ones', () => {
  const bin = path.join(toolsDir(), 'bin');
  const { current, previous } = kubeVersions();
  assert.equal(toolPath('kube-apiserver'), path.join(bin, `kube-apiserver-${current}`));
  assert.equal(toolPath('kube-controller-manager-previous'), path.join(bin, `kube-controller-manager-${previous}`));
  assert.equal(kubeToolName('kube-apiserver', current), 'kube-apiserver');
  assert.equal(kubeToolName('kube-apiserver', previous), 'kube-apiserver-previous');
  assert.throws(() => kubeToolName('kube-apiserver', 'v1.20.0'), /not built here/);
  const present = new Set([toolPath('etcd')]);
  assert.deepEqual(
    missingTools(['etcd', 'kube-apiserver', 'temporal-cli', 'etcd'], (p) => present.has(p)),
    ['kube-apiserver', 'temporal-cli'],
  );
});

void test("scripts/tools.sh --dry-run with the demo's names, on an empty cache: etcd, the Temporal CLI and kube-apiserver, nothing else", () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svm-tools-dry-'));
  try {
    const r = spawnSync(
      'bash',
      [path.join(__dirname, '..', 'scripts', 'tools.sh'), '--dry-run', 'etcd', 'kube-apiserver', 'temporal-cli'],
      {
        env: { ...process.env, SVM_TOOLS_DIR: dir },
        encoding: 'utf8',
      },
    );
    assert.equal(r.status, 0, r.stderr);
    const { current } = kubeVersions();
    const wouldRun = r.stderr.split('\n').filter((l) => l.startsWith('[tools] would build ') && l.includes(': build_'));
    // The builds run side by side, so they say so in any order.
    assert.deepEqual(wouldRun.map((l) => l.slice(l.indexOf(': build_') + 2)).sort(), [
      'build_etcd etcd',
      `build_kube ${current} ${toolVersions.kubernetesStaging} kube-apiserver`,
      'build_temporal',
    ]);
    assert.deepEqual(readdirSync(path.join(dir, 'bin')), [], 'a dry run builds nothing');
    assert.deepEqual(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('=')[0]),
      ['etcd', 'kube-apiserver', 'temporal'],
    );
    const all = spawnSync('bash', [path.join(__dirname, '..', 'scripts', 'tools.sh'), '--dry-run'], {
      env: { ...process.env, SVM_TOOLS_DIR: dir },
      encoding: 'utf8',
    });
    assert.equal(all.status, 0, all.stderr);
    for (const name of ['kube-controller-manager', 'kubectl', 'kube-apiserver-previous', 'temporal-server', 'helm', 'upgradetool'])
      assert.match(all.stdout, new RegExp(`^${name}=`, 'm'), `no names: every tool (${name})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
