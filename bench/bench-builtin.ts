/**
 * `npm run bench:builtin [-- --objects N --dir DIR --qps N]`
 *
 * svm and the built-in migrator (kube-controller-manager's
 * storage-version-migrator-controller, GA in Kubernetes 1.37) side by side on
 * the same plane: the same number of objects of two CRDs of the same shape,
 * each moved v1 -> v2, one migrated by each. Printed for each: wall time,
 * objects per second, the CPU seconds of the migrator's own process (the
 * `svm worker` child; kube-controller-manager) and of the API servers and
 * etcd during its run, what it reported while it ran (sampled once a second
 * from its status), and what etcd held after. Figures go to
 * bench/results/builtin-<time>.json. Not part of `npm test`.
 *
 * The built-in runs first with kube-controller-manager's migrator on; then
 * kube-controller-manager runs without it (svm owns the standard API when the
 * built-in is off) and svm migrates the second CRD through a
 * storagemigration.k8s.io/v1 object too, so both are started the same way.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { defaultDevDir, readEnv, readState, startControllerManager, up } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd } from '../src/dev/test-crd';
import { KubeClient } from '../src/kube/client';
import { findStandardMigration } from '../src/kube/standard-migrations';
import { imageEnv } from './lib/image-env';
import { compiledWorkerTree } from './lib/worker-tree';

const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '5000' },
    dir: { type: 'string' },
    qps: { type: 'string', default: '0' },
    note: { type: 'string' },
  },
});
const N = Number(values.objects);
const log = (s: string) => process.stderr.write(`[bench:builtin] ${s}\n`);
const TICKS = 100; // USER_HZ

/** CPU seconds a process has used (utime + stime), 0 when it is gone. */
function cpuSeconds(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS;
  } catch {
    return 0;
  }
}

interface Run {
  migrator: string;
  seconds: number;
  objectsPerSecond: number;
  migratorCpuSeconds: number;
  apiserversCpuSeconds: number;
  etcdCpuSeconds: number;
  reported: string[];
  etcdAfter: Record<string, number>;
}

async function run(
  kube: KubeClient,
  dir: string,
  who: string,
  migratorPid: () => number | undefined,
  crd: ReturnType<typeof testCrd>,
): Promise<Run> {
  const state = readState(dir)!;
  const planePids = () => ({ api: state.apiservers.map((a) => a.pid), etcd: state.etcd.pid });
  const cpu = () => ({
    migrator: cpuSeconds(migratorPid()),
    api: planePids().api.reduce((s, p) => s + cpuSeconds(p), 0),
    etcd: cpuSeconds(planePids().etcd),
  });
  const name = `bench-${who}-${Date.now().toString(36)}`;
  const before = cpu();
  const t0 = performance.now();
  await kube.request('POST', '/apis/storagemigration.k8s.io/v1/storageversionmigrations', {
    body: JSON.stringify({
      apiVersion: 'storagemigration.k8s.io/v1',
      kind: 'StorageVersionMigration',
      metadata: { name },
      spec: { resource: { group: crd.group, resource: crd.plural } },
    }),
  });
  const reported: string[] = [];
  for (;;) {
    const o = await findStandardMigration(kube, name);
    const line = (o?.status?.conditions ?? []).map((c) => `${c.type}=${c.status}${c.message ? ` "${c.message}"` : ''}`).join('; ');
    if (line && reported.at(-1)?.slice(reported.at(-1)!.indexOf(' ') + 1) !== line) {
      reported.push(`${((performance.now() - t0) / 1000).toFixed(1)}s ${line}`);
    }
    const done = o?.status?.conditions?.find((c) => (c.type === 'Succeeded' || c.type === 'Failed') && c.status === 'True');
    if (done) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  const seconds = (performance.now() - t0) / 1000;
  const after = cpu();
  const etcdAfter = (await storedVersions(readEnv(dir).ETCD_ENDPOINTS!, { group: crd.group, resource: crd.plural, custom: true }))
    .byApiVersion;
  return {
    migrator: who,
    seconds,
    objectsPerSecond: Math.round((N / seconds) * 10) / 10,
    migratorCpuSeconds: Math.round((after.migrator - before.migrator) * 100) / 100,
    apiserversCpuSeconds: Math.round((after.api - before.api) * 100) / 100,
    etcdCpuSeconds: Math.round((after.etcd - before.etcd) * 100) / 100,
    reported,
    etcdAfter,
  };
}

async function prepare(kube: KubeClient, who: string): Promise<ReturnType<typeof testCrd>> {
  const crd = testCrd(`${who}${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
  await applyCrd(kube, crd, 'v1');
  log(`${who}: creating ${N} objects at v1`);
  await createObjects(kube, crd, 'v1', N, { namespace: `${who}-${Date.now().toString(36)}` });
  await applyCrd(kube, crd, 'v2');
  return crd;
}

async function main() {
  const dir = values.dir ?? defaultDevDir();
  await up({ dir, log });
  const env = readEnv(dir);
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG);
  await installCrds(kube);
  const runs: Run[] = [];

  // The built-in: kube-controller-manager with its migrator.
  const crdA = await prepare(kube, 'builtin');
  await startControllerManager(dir, { builtInMigrator: true }, log);
  log('built-in: one storagemigration.k8s.io/v1 object');
  runs.push(await run(kube, dir, 'built-in', () => readState(dir)?.controllerManager?.pid, crdA));

  // svm: the built-in off (never two controllers), svm owning the standard API.
  await startControllerManager(dir, { builtInMigrator: false }, log);
  const crdB = await prepare(kube, 'svm');
  const tree = compiledWorkerTree(path.join(__dirname, '..'), log);
  const worker = spawn(process.execPath, [tree.bin, 'worker'], {
    env: {
      ...process.env,
      ...imageEnv(),
      KUBECONFIG: env.KUBECONFIG,
      TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: `bench-builtin-${Date.now().toString(36)}`,
      SVM_QPS: values.qps,
      SVM_STANDARD_MIGRATIONS: 'own',
      SVM_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await new Promise((r) => setTimeout(r, 5000)); // leader election, the bridge's first list
    log(`svm (worker pid ${worker.pid}, SVM_QPS=${values.qps}): one storagemigration.k8s.io/v1 object`);
    runs.push(await run(kube, dir, 'svm', () => worker.pid, crdB));
  } finally {
    worker.kill('SIGTERM');
    tree.dispose();
    kube.close();
  }

  const [b, s] = runs as [Run, Run];
  const table = [
    ['', 'built-in', 'svm'],
    ['objects', String(N), String(N)],
    ['seconds', b.seconds.toFixed(1), s.seconds.toFixed(1)],
    ['objects/s', String(b.objectsPerSecond), String(s.objectsPerSecond)],
    ['migrator CPU s', String(b.migratorCpuSeconds), String(s.migratorCpuSeconds)],
    ['API servers CPU s', String(b.apiserversCpuSeconds), String(s.apiserversCpuSeconds)],
    ['etcd CPU s', String(b.etcdCpuSeconds), String(s.etcdCpuSeconds)],
    ['etcd after', JSON.stringify(b.etcdAfter), JSON.stringify(s.etcdAfter)],
  ];
  const w = [20, 40, 40];
  process.stdout.write(
    table
      .map((r) =>
        r
          .map((c, i) => c.padEnd(w[i]!))
          .join(' ')
          .trimEnd(),
      )
      .join('\n') + '\n',
  );
  for (const r of runs) process.stdout.write(`\n${r.migrator} reported while it ran:\n${r.reported.map((l) => `  ${l}`).join('\n')}\n`);
  const out = path.join(__dirname, 'results');
  mkdirSync(out, { recursive: true });
  const file = path.join(out, `builtin-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    JSON.stringify({ date: new Date().toISOString(), cpus: cpus().length, note: values.note, objects: N, runs }, null, 2),
  );
  log(`results: ${file}`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
