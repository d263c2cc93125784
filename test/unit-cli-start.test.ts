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
import { statSync, utimesSync } from 'node:fs';
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
    // Compiled, a client command's action runs from the client bundle (scripts/bundle-cli.mjs), which holds the
    // Temporal client: the package's own files are not loaded beside it (one copy of its classes).
    const client = mode.fromSource ? '@temporalio/client' : 'the client bundle';
    assert.deepEqual(loadedOf(r.modules, ['@temporalio/client', 'the client bundle']), [client], 'the probe sees what is loaded');
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

void test('compiled: `svm status` runs dist/cli/svm-client.js only while it is as new as dist/cli/svm.js, and not with SVM_CLIENT_BUNDLE=off', async () => {
  const root = tree!.root;
  const run = (env: NodeJS.ProcessEnv = {}) =>
    probe.run(root, ['status'], { env: { ...process.env, ...env, TEMPORAL_ADDRESS: '127.0.0.1:1' }, exitOnConnect: true });
  const bundle = (r: { modules: string[] }) => loadedOf(r.modules, ['the client bundle', '@temporalio/client']);
  assert.deepEqual(bundle(await run({ SVM_CLIENT_BUNDLE: 'off' })), ['@temporalio/client']);
  const file = path.join(root, 'dist', 'cli', 'svm-client.js');
  const { mtime } = statSync(file);
  try {
    // An older bundle (dist/ rebuilt by tsc since): the modules of dist/ run.
    const older = new Date(statSync(path.join(root, 'dist', 'cli', 'svm.js')).mtimeMs - 60_000);
    utimesSync(file, older, older);
    assert.deepEqual(bundle(await run()), ['@temporalio/client']);
  } finally {
    utimesSync(file, mtime, mtime);
  }
  const r = await run({ SVM_START_REPORT: '1' });
  assert.deepEqual(bundle(r), ['the client bundle']);
  assert.match(r.stderr, /^svm start: dist\/cli\/svm-client\.js, code cache used$/m, 'the code cache this node made is taken');
});
