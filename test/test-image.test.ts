/**
 * The container image is real: the project's Dockerfile, unchanged, built by podman, and `svm worker` run from
 * the image against the shared plane migrates a resource, judged by etcd.
 *
 * No registry image can be pulled here, so the base the Dockerfile names (FROM node:20-bookworm-slim) is made
 * first, from Debian packages (scripts/image-base.sh: mmdebstrap of bookworm, this machine's Node.js 20 and npm
 * in /usr/local, the user `node` uid 1000, as the official image has them), and imported under that exact name;
 * the build then runs with pulls off. Everything lives in a podman store of the test's own (a temporary
 * directory, removed at the end): nothing is cached across runs, and nothing of another podman user is touched.
 *
 * The build's `npm ci` reaches the registry the host's npm uses, with the host's npm settings that make that
 * possible (registry, CA file, proxies) in a global npmrc mounted for the build only, and the host's npm cache
 * mounted as an overlay (what the build adds to it is thrown away): packages the host's `npm ci` already
 * fetched are not fetched again. Build mounts are not part of any layer.
 *
 * The worker runs as deploy/deployment.yaml runs it: uid 1000 from the image, read-only root filesystem with a
 * scratch /tmp, no capabilities, its env (a Worker Deployment of its own that makes itself Current, metrics on
 * 0.0.0.0), the plane's kubeconfig mounted read-only; host network, so the plane's one API address and its
 * Temporal are the host's loopback addresses.
 *
 * This machine's podman needs two settings the test passes everywhere: runc (Debian's crun 1.8 refuses the
 * hybrid cgroup layout here), and open-file and process limits within the machine's own (podman's defaults are
 * higher, and raising a limit needs a capability the test does not have).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import type { temporal } from '@temporalio/proto';
import { Migrator } from '../src/client';
import { etcdPrefix } from '../src/dev/etcd-truth';
import { beforeMigration, judgeMigration, verdictProblems } from '../src/dev/migration-judge';
import { describeDeployment } from '../src/worker/versioning';
import { freePort } from '../src/worker/free-port';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

const execFileP = promisify(execFile);
const root = path.join(__dirname, '..');
const BASE = 'docker.io/library/node:20-bookworm-slim';
const IMAGE = 'localhost/svm-image-test:latest';
const LIMITS = ['--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096'];

let plane: TestPlane;
let work: string;
let podmanArgs: string[];
let revision: string;
const seconds: Record<string, number> = {};

/** The same environment as this process's, minus what would point npm or node into this checkout. */
const env = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(NODE_OPTIONS|NODE_TEST_CONTEXT|npm_)/i.test(k)));

async function run(file: string, args: string[], timeout = 60_000): Promise<string> {
  try {
    return (await execFileP(file, args, { cwd: root, env: env(), maxBuffer: 256 * 1024 * 1024, timeout })).stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    const tail = (s = '') => s.split('\n').slice(-40).join('\n');
    throw new Error(`${file} ${args.join(' ')}: ${e.message}\n${tail(e.stdout)}\n${tail(e.stderr)}`);
  }
}
const podman = (args: string[], timeout?: number) => run('podman', [...podmanArgs, ...args], timeout);
async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  const v = await fn();
  seconds[what] = (Date.now() - t0) / 1000;
  return v;
}

/** The host npm's settings that let it reach its registry, as an npmrc. */
async function hostNpmrc(): Promise<{ npmrc: string; mounts: string[] }> {
  const get = async (key: string) => (await run('npm', ['config', 'get', key])).trim();
  const lines = [`registry=${await get('registry')}`];
  const mounts: string[] = [];
  for (const key of ['proxy', 'https-proxy', 'noproxy', 'strict-ssl']) {
    const v = await get(key);
    if (v && v !== 'null' && v !== 'undefined' && !(key === 'strict-ssl' && v === 'true')) lines.push(`${key}=${v}`);
  }
  const cafile = await get('cafile');
  if (cafile && cafile !== 'null' && cafile !== 'undefined') {
    lines.push('cafile=/etc/svm-build-npm-ca.crt');
    mounts.push('-v', `${cafile}:/etc/svm-build-npm-ca.crt:ro`);
  }
  const cache = await get('cache');
  if (fs.existsSync(cache)) mounts.push('-v', `${cache}:/root/.npm:O`);
  return { npmrc: `${lines.join('\n')}\n`, mounts };
}

before(async () => {
  for (const cmd of ['podman', 'mmdebstrap', 'runc'])
    await run('sh', ['-c', `command -v ${cmd}`]).catch(() => {
      throw new Error(`${cmd} is missing: npm test installs it as root (scripts/preflight.ts, from Debian)`);
    });
  plane = await testPlane();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-image-'));
  podmanArgs = [
    '--root',
    path.join(work, 'storage'),
    '--runroot',
    path.join(work, 'run'),
    '--storage-driver',
    'overlay',
    '--runtime',
    'runc',
  ];

  const tar = path.join(work, 'base.tar');
  await timed('base rootfs', () => run('bash', [path.join(root, 'scripts', 'image-base.sh'), tar], 900_000));
  await timed('base import', () => podman(['import', '--change', 'CMD ["node"]', tar, BASE], 300_000));
  fs.rmSync(tar);

  const { npmrc, mounts } = await hostNpmrc();
  fs.writeFileSync(path.join(work, 'npmrc'), npmrc);
  revision = (await run('git', ['rev-parse', '--short', 'HEAD'])).trim();
  await timed('build', () =>
    podman(
      [
        'build',
        '--pull=never',
        '--network',
        'host',
        ...LIMITS,
        '-v',
        `${path.join(work, 'npmrc')}:/usr/local/etc/npmrc:ro`,
        ...mounts,
        '--build-arg',
        `SVM_GIT_REVISION=${revision}`,
        '-f',
        'Dockerfile',
        '-t',
        IMAGE,
        root,
      ],
      1_500_000,
    ),
  );
  const size = (await podman(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).trim();
  process.stderr.write(
    `  base rootfs ${seconds['base rootfs']!.toFixed(0)}s, import ${seconds['base import']!.toFixed(0)}s, ` +
      `build ${seconds.build!.toFixed(0)}s; image ${(Number(size) / 1024 / 1024).toFixed(0)} MiB\n`,
  );
});

after(async () => {
  await plane?.close();
  if (!work) return;
  // The store holds only this test's images and containers: remove them, then the directory.
  await podman(['rm', '--all', '--force'], 120_000).catch(() => undefined);
  await podman(['rmi', '--all', '--force'], 120_000).catch(() => undefined);
  fs.rmSync(work, { recursive: true, force: true });
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
  const version = JSON.parse(await podman(['run', '--rm', '--network', 'none', ...LIMITS, IMAGE, 'version', '-o', 'json'])) as {
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
    ...LIMITS,
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
  const kubeconfig = path.join(work, 'kubeconfig');
  fs.copyFileSync(plane.env.KUBECONFIG!, kubeconfig);
  fs.chmodSync(kubeconfig, 0o444);
  const taskQueue = uniq('tq');
  const deploymentName = uniq('svm-image');
  const hostname = uniq('svm-worker');
  const metricsPort = await freePort();
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
    ...LIMITS,
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
    `SVM_METRICS_PORT=${metricsPort}`,
    '-e',
    'SVM_METRICS_HOST=0.0.0.0',
    // The shared plane's other tests run workers of their own: this one serves its task queue only.
    '-e',
    'SVM_BRIDGE=false',
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
    const health = await fetch(`http://127.0.0.1:${metricsPort}/healthz`);
    assert.equal(health.status, 200);

    const result = await (await m.start(crd.name)).wait();
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
