/**
 * `npm run bench [-- --objects N --chunk-size N --concurrency N]`
 *
 * Migrates N objects of a CRD on the local control plane and prints, beside a
 * raw ceiling measured in the same run on the same objects:
 *   - objects per second (the migration workflow vs a tight loop of the same
 *     list + no-op PUTs at the same concurrency, without Temporal);
 *   - p50/p99 update latency (from the worker's latency histogram, and exact
 *     for the raw loop);
 *   - the worker process's peak RSS (VmHWM of the `svm worker` child);
 *   - workflow history events per 1000 objects, and continue-as-new count.
 * Both runs re-encode every object (the raw loop moves them v1 -> v2, the
 * migration v2 -> v1), so both do real etcd writes. Figures go to
 * bench/results/bench-<time>.json. Not part of `npm test`: these are
 * measurements, not assertions.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { defaultDevDir, readEnv, up } from '../src/dev/plane';
import { KubeClient } from '../src/kube/client';
import { histogramQuantile } from '../src/worker/metrics';
import { applyCrd, createObjects, testCrd } from '../src/dev/test-crd';

const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '10000' },
    'chunk-size': { type: 'string', default: '500' },
    concurrency: { type: 'string', default: '16' },
  },
});
const N = Number(values.objects);
const CHUNK = Number(values['chunk-size']);
const CONC = Number(values.concurrency);
for (const [k, v] of [
  ['--objects', N],
  ['--chunk-size', CHUNK],
  ['--concurrency', CONC],
] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`${k} must be a positive whole number`);
}

const log = (s: string) => process.stderr.write(`[bench] ${s}\n`);
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

async function rawCeiling(
  kube: KubeClient,
  group: string,
  plural: string,
  kind: string,
): Promise<{ seconds: number; latencies: number[] }> {
  const ref = { group, version: 'v2', resource: plural, kind };
  const latencies: number[] = [];
  const t0 = performance.now();
  let token: string | undefined;
  do {
    const page = await kube.listPage(ref, { limit: CHUNK, continueToken: token });
    let next = 0;
    await Promise.all(
      Array.from({ length: CONC }, async () => {
        for (let i = next++; i < page.items.length; i = next++) {
          const t = performance.now();
          await kube.noopUpdate(ref, page.items[i]!);
          latencies.push((performance.now() - t) / 1000);
        }
      }),
    );
    token = page.continueToken;
  } while (token);
  return { seconds: (performance.now() - t0) / 1000, latencies: latencies.sort((a, b) => a - b) };
}

function parseHistogram(text: string, name: string): Array<{ le: number; count: number }> {
  const byLe = new Map<number, number>();
  for (const line of text.split('\n')) {
    const m = line.match(new RegExp(`^${name}_bucket\\{.*le="([^"]+)".*\\} (\\d+)`));
    if (m) byLe.set(m[1] === '+Inf' ? Infinity : Number(m[1]), (byLe.get(m[1] === '+Inf' ? Infinity : Number(m[1])) ?? 0) + Number(m[2]));
  }
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
}

async function main() {
  const dir = defaultDevDir();
  await up({ dir, log });
  const env = readEnv(dir);
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG, { maxSockets: CONC * 2 });
  await installCrds(kube);
  const crd = testCrd(`bench${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
  const key = { group: crd.group, resource: crd.plural, custom: true };

  log(`creating ${N} objects at v1 (not measured)`);
  await applyCrd(kube, crd, 'v1');
  for (let done = 0; done < N; done += 10_000) {
    await createObjects(kube, crd, 'v1', Math.min(10_000, N - done), { namespace: 'bench', prefix: `b${done / 10_000}` });
    log(`  ${Math.min(N, done + 10_000)} created`);
  }

  log('raw ceiling: storage v1 -> v2, a tight list + PUT loop without Temporal');
  await applyCrd(kube, crd, 'v2');
  const raw = await rawCeiling(kube, crd.group, crd.plural, crd.kind);
  const afterRaw = await storedVersions(env.ETCD_ENDPOINTS!, key);
  log(`  ${(N / raw.seconds).toFixed(0)} objects/s; etcd ${JSON.stringify(afterRaw.byApiVersion)}`);

  log('migration workflow: storage v2 -> v1, `svm worker` in a child process');
  await applyCrd(kube, crd, 'v1');
  const taskQueue = `bench-${Date.now().toString(36)}`;
  const metricsPort = 20000 + Math.floor(Math.random() * 20000);
  const worker = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'worker', '--no-bridge'], {
    env: {
      ...process.env,
      KUBECONFIG: env.KUBECONFIG,
      TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: taskQueue,
      SVM_QPS: '0',
      SVM_METRICS_PORT: String(metricsPort),
      SVM_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const migrator = await Migrator.connect({ temporal: { address: env.TEMPORAL_ADDRESS!, taskQueue }, kubeconfig: env.KUBECONFIG });
  let result;
  let metricsText = '';
  let peakRssMiB = NaN;
  const t0 = performance.now();
  try {
    const h = await migrator.start(crd.name, { chunkSize: CHUNK, concurrency: CONC });
    result = await h.wait();
    const seconds = (performance.now() - t0) / 1000;
    metricsText = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const status = readFileSync(`/proc/${worker.pid}/status`, 'utf8');
    peakRssMiB = Number(status.match(/VmHWM:\s+(\d+) kB/)![1]) / 1024;
    let events = 0;
    let runs = 0;
    for await (const w of migrator.client.workflow.list({ query: `WorkflowId = '${h.workflowId}'` })) {
      if (w.runId && w.startTime >= new Date(Date.now() - seconds * 1000 - 60_000)) {
        events += w.historyLength;
        runs++;
      }
    }
    const afterMigration = await storedVersions(env.ETCD_ENDPOINTS!, key);
    const hist = parseHistogram(metricsText, 'svm_update_duration_seconds');
    const figures = {
      date: new Date().toISOString(),
      objects: N,
      chunkSize: CHUNK,
      concurrency: CONC,
      apiservers: 2,
      raw: {
        objectsPerSecond: Math.round(N / raw.seconds),
        seconds: Number(raw.seconds.toFixed(2)),
        p50ms: Number((quantile(raw.latencies, 0.5) * 1000).toFixed(2)),
        p99ms: Number((quantile(raw.latencies, 0.99) * 1000).toFixed(2)),
      },
      workflow: {
        phase: result.phase,
        objectsPerSecond: Math.round(N / seconds),
        seconds: Number(seconds.toFixed(2)),
        p50ms: Number((histogramQuantile(0.5, hist) * 1000).toFixed(2)),
        p99ms: Number((histogramQuantile(0.99, hist) * 1000).toFixed(2)),
        workerPeakRssMiB: Number(peakRssMiB.toFixed(1)),
        historyEvents: events,
        historyEventsPer1000Objects: Number(((events / N) * 1000).toFixed(1)),
        runs,
        continueAsNew: result.runs - 1,
        counters: result.counters,
      },
      ratioWorkflowToRaw: Number((N / seconds / (N / raw.seconds)).toFixed(3)),
      etcd: { afterRaw: afterRaw.byApiVersion, afterMigration: afterMigration.byApiVersion },
    };
    const outDir = path.join(__dirname, 'results');
    mkdirSync(outDir, { recursive: true });
    const out = path.join(outDir, `bench-${figures.date.replace(/[:.]/g, '-')}.json`);
    writeFileSync(out, JSON.stringify(figures, null, 2) + '\n');
    process.stdout.write(
      [
        `objects                      ${N} (chunk ${CHUNK}, concurrency ${CONC}, 2 API servers)`,
        `raw ceiling                  ${figures.raw.objectsPerSecond} objects/s  p50 ${figures.raw.p50ms} ms  p99 ${figures.raw.p99ms} ms`,
        `migration workflow           ${figures.workflow.objectsPerSecond} objects/s  p50 ${figures.workflow.p50ms} ms  p99 ${figures.workflow.p99ms} ms (histogram)  ${result.phase}`,
        `workflow / raw               ${figures.ratioWorkflowToRaw}`,
        `worker peak RSS              ${figures.workflow.workerPeakRssMiB} MiB`,
        `history events / 1000 obj    ${figures.workflow.historyEventsPer1000Objects} (${events} events in ${runs} runs; ${figures.workflow.continueAsNew} continue-as-new)`,
        `etcd after migration         ${JSON.stringify(afterMigration.byApiVersion)}`,
        `written                      ${out}`,
        '',
      ].join('\n'),
    );
  } finally {
    worker.kill('SIGTERM');
    await migrator.close();
    kube.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
