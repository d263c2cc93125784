/** `svm worker` with no TEMPORAL_ADDRESS starts a local dev server (the embedded default), runs migrations on it, and stops it on exit. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { portOpen } from '../src/dev/ports';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

void test('svm worker without TEMPORAL_ADDRESS runs its own Temporal dev server, migrates on it, and takes it down on SIGTERM', async () => {
  const crd = testCrd(`${uniq('lw')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 100, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: plane.env.KUBECONFIG,
    XDG_STATE_HOME: mkdtempSync(path.join(os.tmpdir(), 'svm-state-')),
    SVM_LOG_LEVEL: 'warn',
  };
  delete env.TEMPORAL_ADDRESS;
  const worker = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'worker', '--no-bridge'], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  try {
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no local dev server announced:\n${stderr}`)), 120_000);
      worker.stderr.on('data', (d: Buffer) => {
        stderr += d.toString('utf8');
        const m = stderr.match(/started a local Temporal dev server at (127\.0\.0\.1:\d+)/);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      worker.once('exit', (code) => reject(new Error(`the worker exited (${code}):\n${stderr}`)));
    });
    assert.match(stderr, new RegExp(`data ${env.XDG_STATE_HOME}/svm/temporal\\.sqlite`));
    const m = await Migrator.connect({ temporal: { address }, kubeconfig: plane.env.KUBECONFIG });
    try {
      const result = await migrationResult(await m.start(crd.name));
      assert.equal(result.phase, 'Succeeded', result.message);
    } finally {
      await m.close();
    }
    assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
      [`${crd.group}/v2`]: 100,
    });
    worker.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => worker.once('exit', resolve));
    assert.equal(code, 0, stderr);
    assert.equal(await portOpen(Number(address.split(':')[1])), false, 'the local dev server outlived the worker');
  } finally {
    worker.kill('SIGKILL');
    rmSync(env.XDG_STATE_HOME!, { recursive: true, force: true });
  }
});
