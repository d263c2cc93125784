/**
 * `svm` loads a command's modules only when the run names it, and a command's
 * heavy modules only in the action that needs them: `svm version`, `svm
 * status --help` and `svm migrate --help` load neither the Temporal SDK nor
 * the Kubernetes client (nor zod, nor yaml), and `svm status` loads the
 * Temporal client but neither the worker nor the Kubernetes client. Checked
 * on what the runs load (src/dev/cli-start.ts), from the sources through tsx
 * and compiled as `npm ci` leaves them (scripts/transpile.mjs), not on how
 * long they take: the figures are `npm run bench:cli`'s.
 */
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { CliProbe, compiledTree, HEAVY_MODULES, loadedOf } from '../src/dev/cli-start';

const repo = path.join(__dirname, '..');
const everyHeavy = Object.keys(HEAVY_MODULES);
const probe = new CliProbe();
let tree: { root: string; dispose(): void } | undefined;

before(async () => {
  tree = await compiledTree(repo);
});
after(() => {
  tree?.dispose();
  probe.dispose();
});

const modes = [
  { name: 'from the sources (tsx)', root: () => repo, env: { ...process.env, SVM_FROM_SOURCE: '1' }, fromSource: true },
  { name: 'compiled', root: () => tree!.root, env: process.env, fromSource: false },
];

for (const mode of modes) {
  for (const args of [['version'], ['status', '--help'], ['migrate', '--help']]) {
    void test(`svm ${args.join(' ')}, ${mode.name}: no Temporal SDK, no Kubernetes client, no zod, no yaml`, async () => {
      const r = await probe.run(mode.root(), args, { env: mode.env });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, args[0] === 'version' ? /^svm \d/ : /^Usage: svm /);
      assert.equal(r.fromSource, mode.fromSource, 'ran the code it was meant to');
      assert.deepEqual(loadedOf(r.modules, everyHeavy), []);
    });
  }

  void test(`svm status, ${mode.name}: the Temporal client, neither the worker nor the Kubernetes client`, async () => {
    // Ended by the probe at its first connection: 127.0.0.1:1 refuses, and the client would retry for 10 s.
    const r = await probe.run(mode.root(), ['status'], { env: { ...mode.env, TEMPORAL_ADDRESS: '127.0.0.1:1' }, exitOnConnect: true });
    assert.equal(r.connectedTo, '1', `svm status did not get to connecting to Temporal: ${r.stderr}`);
    assert.deepEqual(loadedOf(r.modules, ['@temporalio/client']), ['@temporalio/client'], 'the probe sees what is loaded');
    assert.deepEqual(
      loadedOf(r.modules, [
        '@temporalio/worker',
        '@temporalio/core-bridge',
        '@kubernetes/client-node',
        'the @kubernetes/client-node bundle',
      ]),
      [],
    );
  });
}
