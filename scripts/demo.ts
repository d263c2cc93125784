/**
 * `npm run demo`: a real migration end to end on the local control plane.
 *   1. bring up etcd, 2 kube-apiservers and Temporal (building the first time those three servers and
 *      nothing else: no kube-controller-manager, kubectl, other release, Helm or temporal-server);
 *   2. create a CRD stored at v1 and 2,000 objects; etcd shows them at v1;
 *   3. switch the CRD's storage version to v2: etcd still holds v1;
 *   4. run the worker and `svm migrate` with live progress;
 *   5. etcd shows every object at v2, the CRD's storedVersions is [v2];
 *   6. where to look in the Temporal UI.
 * The plane keeps running afterwards (`node bin/svm.js dev down` stops it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { defaultDevDir, readEnv, up } from '../src/dev/plane';
import { missingTools, toolPath, toolsDir, type ToolName } from '../src/dev/tools';

const say = (s: string) => process.stdout.write(`\n\x1b[1m== ${s}\x1b[0m\n`);
const COUNT = Number(process.env.DEMO_OBJECTS || 2000);

/** What the demo starts, so what its first run builds (src/dev/plane.ts up() asks for exactly these). */
const DEMO_TOOLS: ToolName[] = ['etcd', 'kube-apiserver', 'temporal-cli'];

async function main() {
  const dir = defaultDevDir();
  say(`1. local control plane in ${dir}`);
  const missing = missingTools(DEMO_TOOLS);
  if (missing.length > 0)
    process.stdout.write(
      `   first run: building ${missing.map((m) => path.basename(toolPath(m))).join(', ')} from their Go modules into ${toolsDir()}\n` +
        '   (once; on 2 shared cores they took 2.3, 7.2 and 13.7 min: docs/benchmarks.md; progress below)\n',
    );
  const t0 = Date.now();
  await up({ dir, apiservers: 2, log: (l) => process.stdout.write(`   ${l}\n`) });
  const env = readEnv(dir);
  process.stdout.write(
    `   ready in ${((Date.now() - t0) / 1000).toFixed(1)}s: etcd ${env.ETCD_ENDPOINTS}, 2 kube-apiservers, Temporal ${env.TEMPORAL_ADDRESS}\n`,
  );
  // The worker loads the workflow code bundled ahead of time (skipped when it is up to date).
  execFileSync('npm', ['run', '--silent', 'build:workflows'], { stdio: 'inherit' });
  // The Temporal worker and clients take seconds to load: required now, so that the first line came at once.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const {
    Migrator,
    installCrds,
    storedVersions,
    KubeClient,
    loadWorkerSettings,
    createFileLogger,
    createMigratorWorker,
    applyCrd,
    createObjects,
    testCrd,
  } = {
    ...(require('../src/client') as typeof import('../src/client')),
    ...(require('../src/client/cli-migrate') as typeof import('../src/client/cli-migrate')),
    ...(require('../src/dev/etcd-truth') as typeof import('../src/dev/etcd-truth')),
    ...(require('../src/kube/client') as typeof import('../src/kube/client')),
    ...(require('../src/worker/config') as typeof import('../src/worker/config')),
    ...(require('../src/worker/worker') as typeof import('../src/worker/worker')),
    ...(require('../src/dev/test-crd') as typeof import('../src/dev/test-crd')),
  };
  /* eslint-enable @typescript-eslint/no-require-imports */

  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG);
  await installCrds(kube);
  const crd = testCrd(`demo${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
  say(`2. CRD ${crd.name} stored at v1, ${COUNT} objects`);
  await applyCrd(kube, crd, 'v1');
  const step = Math.max(1, Math.ceil(COUNT / 4));
  await createObjects(kube, crd, 'v1', COUNT, {
    namespace: 'demo',
    onProgress: (n) => {
      if (n % step === 0 || n === COUNT) process.stdout.write(`   created ${n} of ${COUNT}\n`);
    },
  });
  const key = { group: crd.group, resource: crd.plural, custom: true };
  process.stdout.write(`   etcd: ${JSON.stringify((await storedVersions(env.ETCD_ENDPOINTS!, key)).byApiVersion)}\n`);

  say('3. the storage version moves to v2 (an upgrade); etcd still holds v1');
  await applyCrd(kube, crd, 'v2');
  process.stdout.write(`   etcd: ${JSON.stringify((await storedVersions(env.ETCD_ENDPOINTS!, key)).byApiVersion)}\n`);

  say(`4. svm migrate ${crd.name}`);
  const settings = loadWorkerSettings({
    ...process.env,
    TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
    KUBECONFIG: env.KUBECONFIG,
    SVM_BRIDGE: 'false',
  });
  // The terminal gets sentences; the in-process worker's log entries (JSON lines) go to a file of the plane.
  const logFile = path.join(dir, 'demo-worker.log');
  process.stdout.write(`   the worker runs in this process; its log: ${logFile}\n`);
  const worker = await createMigratorWorker(settings, createFileLogger(logFile));
  const migrator = await Migrator.connect({ temporal: { address: env.TEMPORAL_ADDRESS! }, kubeconfig: env.KUBECONFIG });
  const result = await worker.runUntil(async () => {
    const h = await migrator.start(crd.name, { chunkSize: 200 });
    process.stdout.write(`   workflow ${h.workflowId}\n`);
    return h.wait((p) => {
      const c = p.counters;
      process.stdout.write(
        `   ${p.phase.padEnd(9)} migrated ${String(c.migrated).padStart(5)}  conflicts ${c.conflicts}  chunks ${c.chunks}  ${p.remainingEstimate !== undefined ? `remaining ~${p.remainingEstimate}  ` : ''}${p.objectsPerSecond}/s\n`,
      );
    }, 500);
  });
  await migrator.close();
  process.stdout.write(`   ${result.phase}: ${result.message}\n`);

  say('5. etcd, the ground truth');
  const after = await storedVersions(env.ETCD_ENDPOINTS!, key);
  process.stdout.write(`   etcd: ${JSON.stringify(after.byApiVersion)}\n`);
  const c = await kube.getJson<{ status: { storedVersions: string[] } }>(
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
  );
  process.stdout.write(`   CRD status.storedVersions: ${JSON.stringify(c.status.storedVersions)}\n`);
  kube.close();

  say('6. look at it');
  const wid = encodeURIComponent(`migrate/${crd.name}`);
  process.stdout.write(
    [
      `   Temporal UI:  ${env.TEMPORAL_UI_URL}/namespaces/default/workflows/${wid}`,
      `   all migrations: ${env.TEMPORAL_UI_URL}/namespaces/default/workflows?query=${encodeURIComponent("MigrationPhase='Succeeded'")}`,
      existsSync(env.KUBECTL!)
        ? `   kubectl:      ${env.KUBECTL} --kubeconfig ${env.KUBECONFIG} get storageversionmigrations.migration.k8s.io`
        : `   kubectl:      not built by the demo; 'bash scripts/tools.sh kubectl' builds it (${env.KUBECTL})`,
      `   environment:  source ${path.join(dir, 'env')}`,
      `   stop it all:  node bin/svm.js dev down --dir ${dir}`,
      '',
    ].join('\n'),
  );
  const ok = result.phase === 'Succeeded' && after.byApiVersion[`${crd.group}/v2`] === COUNT && after.total === COUNT;
  if (!ok) {
    process.stderr.write('demo FAILED: etcd does not hold every object at v2\n');
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
