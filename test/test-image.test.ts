/**
 * The container image is real: the project's Dockerfile, unchanged, built by podman, and `svm worker` run from
 * the image against the suite's plane (the plane of the lane that runs this file: scripts/test.sh runs one file at a
 * time on a plane, so no other file's API server restarts or clean-ups reach it; it is left as found, like every
 * file's) migrates a resource, judged by etcd. Until 2026-12-07 it started a two-server plane of its own for that.
 *
 * How the image is built (the base from Debian, the build's npm settings, podman's settings on this machine, the
 * store kept between runs in the tools' cache with one generation of layers, under a lock): src/dev/image.ts.
 *
 * The worker runs as deploy/deployment.yaml runs it: uid 1000 from the image, read-only root filesystem with a
 * scratch /tmp, no capabilities, its env (a Worker Deployment of its own that makes itself Current, metrics on
 * 0.0.0.0), the plane's kubeconfig mounted read-only; host network, so the plane's one API address and its
 * Temporal are the host's loopback addresses.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import type { temporal } from '@temporalio/proto';
import { installCrds } from '../src/client/cli-migrate';
import { Migrator } from '../src/client';
import { etcdPrefix } from '../src/dev/etcd-truth';
import { ImageStore, PODMAN_LIMITS, runIn } from '../src/dev/image';
import { toolsDir } from '../src/dev/tools';
import { beforeMigration, judgeMigration, verdictProblems } from '../src/dev/migration-judge';
import { describeDeployment } from '../src/worker/versioning';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, loggedMetricsPort } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

const root = path.join(__dirname, '..');
const IMAGE = 'localhost/svm-image-test:latest';

let plane: TestPlane;
let store: ImageStore;
let revision: string;
const podman = (args: string[], timeout?: number) => store.podman(args, timeout);

before(async () => {
  await ImageStore.preflight();
  // Kept beside the built servers: the base's root filesystem (Debian packages and this machine's Node.js, for a week
  // at most) and the podman store with the last build's layers (one generation, one run at a time), so only the
  // Dockerfile's steps whose inputs changed are made again; the Dockerfile as it is still builds the image.
  store = new ImageStore(fs.mkdtempSync(path.join(os.tmpdir(), 'svm-image-')), { keepIn: path.join(toolsDir(), 'image-base') });
  revision = (await runIn('git', ['rev-parse', '--short', 'HEAD'])).trim();
  await store.build(IMAGE, revision);
  const size = (await podman(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).trim();
  process.stderr.write(`  ${store.buildReport()}; image ${(Number(size) / 1024 / 1024).toFixed(0)} MiB\n`);
  // One generation kept: at most one image per step of this build that makes a layer, and the base; the last run's are gone.
  const images = await store.imageCount();
  process.stderr.write(`  the kept store: ${images} images after the prune, ${store.steps.length} steps\n`);
  assert.ok(
    images <= store.steps.length + 1,
    `the kept store holds ${images} images, more than this build's ${store.steps.length} steps and the base`,
  );
  // The plane once the image is built (its mark, then, is read after the build's minutes, not before).
  plane = await testPlane();
  await installCrds(plane.kube);
});

after(async () => {
  await plane?.close();
  // The store's containers removed; its images are the one generation kept for the next run.
  await store?.dispose();
});

void test('the image: built from the Dockerfile as it is, it runs `svm` as uid 1000 with the revision it was built with, the compiled code and one native Temporal module', async () => {
  const cfg = JSON.parse(await podman(['image', 'inspect', '--format', '{{json .Config}}', IMAGE])) as {
    User?: string;
    Entrypoint?: string[];
    Cmd?: string[];
    ExposedPorts?: Record<string, unknown>;
  };
  assert.deepEqual(
    { user: cfg.User, entrypoint: cfg.Entrypoint, cmd: cfg.Cmd, ports: Object.keys(cfg.ExposedPorts ?? {}) },
    { user: 'node', entrypoint: ['node', 'bin/svm.js'], cmd: ['worker'], ports: ['9464/tcp'] },
  );
  const version = JSON.parse(await podman(['run', '--rm', '--network', 'none', ...PODMAN_LIMITS, IMAGE, 'version', '-o', 'json'])) as {
    svm: string;
    revision: string;
  };
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  assert.deepEqual({ svm: version.svm, revision: version.revision }, { svm: pkg.version, revision });
  const inside = await podman([
    'run',
    '--rm',
    '--network',
    'none',
    ...PODMAN_LIMITS,
    '--entrypoint',
    'sh',
    IMAGE,
    '-c',
    'id -u; ls /app; ls node_modules/@temporalio/core-bridge/releases; test -s dist/workflow-bundle.js && echo bundle; ' +
      'test -e node_modules/typescript || echo no-dev-dependencies; ' +
      'SVM_START_REPORT=1 node bin/svm.js crds print 2>&1 >/dev/null',
  ]);
  const [uid, ...rest] = inside.trim().split('\n');
  assert.equal(uid, '1000');
  assert.deepEqual(rest.slice(0, 6), ['bin', 'dist', 'node_modules', 'package.json', 'tools', 'tsconfig.json'], 'no sources in /app');
  assert.equal(rest.length, 10, `one native module, the bundle, no dev dependencies, the start: ${rest.slice(6).join(', ')}`);
  assert.deepEqual(rest.slice(7), [
    'bundle',
    'no-dev-dependencies',
    // A client command runs from the client bundle with the code cache the build stage's node made (same node).
    'svm start: dist/cli/svm-client.js, code cache used',
  ]);
});

void test('`svm worker` from the image, as deploy/ runs it, migrates a resource of the plane; etcd holds every object re-encoded, unchanged', async () => {
  const crd = testCrd(`${uniq('im')}.svm.test`);
  const count = 60;
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', count, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const prefix = etcdPrefix({ group: crd.group, resource: crd.plural, custom: true });
  const before = await beforeMigration(plane.etcd, prefix);

  // The plane's kubeconfig is root's alone; the worker (uid 1000) reads a copy, as it would a mounted Secret.
  const kubeconfig = path.join(store.work, 'kubeconfig');
  fs.copyFileSync(plane.env.KUBECONFIG!, kubeconfig);
  fs.chmodSync(kubeconfig, 0o444);
  const taskQueue = uniq('svm-image-tq');
  const deploymentName = uniq('svm-image');
  const hostname = uniq('svm-worker');
  const name = uniq('svm-worker');
  const t0 = Date.now();
  await podman([
    'run',
    '--detach',
    '--name',
    name,
    '--hostname',
    hostname,
    '--network',
    'host',
    ...PODMAN_LIMITS,
    '--read-only',
    '--read-only-tmpfs=false',
    '--tmpfs',
    '/tmp:rw,size=64m',
    '--cap-drop',
    'all',
    '--security-opt',
    'no-new-privileges',
    '-v',
    `${kubeconfig}:/kube/config:ro`,
    '-e',
    'KUBECONFIG=/kube/config',
    '-e',
    `TEMPORAL_ADDRESS=${plane.temporal.address}`,
    '-e',
    `TEMPORAL_NAMESPACE=${plane.temporal.client.options.namespace}`,
    '-e',
    `TEMPORAL_TASK_QUEUE=${taskQueue}`,
    '-e',
    `TEMPORAL_DEPLOYMENT_NAME=${deploymentName}`,
    '-e',
    'SVM_PROMOTE_VERSION=true',
    '-e',
    'SVM_METRICS_PORT=0',
    '-e',
    'SVM_METRICS_HOST=0.0.0.0',
    IMAGE,
  ]);
  const m = await Migrator.connect({ temporal: { ...plane.temporal.settings, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  try {
    const buildId = await eventually(
      'the worker in the container to make its version Current',
      async () => (await describeDeployment(plane.temporal.client, deploymentName))?.view.current,
      180_000,
    );
    assert.equal(buildId, `${JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version}-${revision}`);
    const ready = (Date.now() - t0) / 1000;
    // The host's network: the port the worker bound, as its log says.
    const metricsPort = await eventually('the worker in the container to log its metrics port', async () =>
      loggedMetricsPort(await podman(['logs', name])),
    );
    const health = await fetch(`http://127.0.0.1:${metricsPort}/healthz`);
    assert.equal(health.status, 200);

    const result = await migrationResult(await m.start(crd.name));
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.equal(result.counters.migrated, count);

    const target = `${crd.group}/v2`;
    const verdict = await judgeMigration({
      etcd: plane.etcd,
      client: plane.temporal.client,
      workflowId: `migrate/${crd.name}`,
      before,
      targetApiVersion: target,
    });
    assert.deepEqual(verdictProblems(verdict, count, target), []);

    // Who did the work: every activity was taken by the worker in the container (pid 1 on its hostname).
    const history: { events?: temporal.api.history.v1.IHistoryEvent[] | null } = await plane.temporal.client.workflow
      .getHandle(`migrate/${crd.name}`)
      .fetchHistory();
    const identities = new Set((history.events ?? []).flatMap((e) => e.activityTaskStartedEventAttributes?.identity ?? []));
    assert.deepEqual([...identities], [`1@${hostname}`]);

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(metrics, /^svm_/m, 'the worker in the container serves its metrics');
    process.stderr.write(
      `  worker Current ${ready.toFixed(0)}s after podman run; migration done after ${((Date.now() - t0) / 1000).toFixed(0)}s\n`,
    );

    // SIGTERM, as the kubelet stops a Pod: node is pid 1 and the worker shuts down cleanly.
    await podman(['stop', '--time', '60', name], 120_000);
    assert.equal((await podman(['inspect', '--format', '{{.State.ExitCode}}', name])).trim(), '0');
  } catch (err) {
    process.stderr.write(`--- the container's log (last 60 lines)\n${await podman(['logs', '--tail', '60', name]).catch(() => '')}\n`);
    throw err;
  } finally {
    await m.close();
    await podman(['rm', '--force', name], 120_000).catch(() => undefined);
  }
});
