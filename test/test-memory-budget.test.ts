/**
 * The worker's memory budget binds where objects' content passes through the
 * worker, and holds: four migrations of large objects at once on ONE worker,
 * started as the shipped Deployment runs it (deploy/deployment.yaml's
 * environment on top of the image's, the code compiled as the image holds it,
 * as its ServiceAccount under deploy/'s rights and fence, `svm grant` of each
 * CRD with `update` besides, which the PUT needs), on the PUT path.
 *
 * Why the PUT path: the default rewrite lists metadata only and sends an empty
 * patch, so no object's content ever enters the worker (this test on that
 * path held 0.5 MiB of a 64 MiB budget at most, never waited, and peaked at
 * 188 MiB against the 1 GiB limit: it could not fail). The PUT path
 * (SVM_REWRITE_METHOD=put, what a server that refuses the patch gets) lists
 * each object with its content and PUTs it back as listed: there every
 * object's bytes are taken from the budget before its chunk reads its list
 * further and given back when its update ends (src/activities/chunk/
 * updater-pool.ts, src/kube/memory-budget.ts).
 *
 * Four CRDs, each with 32 objects of ~900 KiB (675 KiB of random bytes in
 * base64) stored at v1, their storage version switched to v2, then migrated
 * at once (SVM_MAX_CONCURRENT_CHUNKS is 4: one chunk of each runs at the same
 * time) under a budget of 4 MiB: about four objects, where four chunks, each
 * with its 32 MiB list buffer and several updaters, would hold dozens. What
 * is asserted is what the worker's own accounting guarantees:
 *   - it bound: svm_memory_budget_waits_total > 0 (a counter: no sample can
 *     miss it; on the empty patch it stays 0: each object is listed as its
 *     metadata, under a KiB, and all 128 of them never fill the budget);
 *   - it held: every sample of svm_memory_budget_held_bytes <= the budget.
 *     The budget admits more only for one object larger than the whole
 *     budget, alone; these are under half of it (asserted), so the rule here
 *     is held <= budget exactly (a sample can miss the peak, but any sample
 *     above the budget is a breach);
 *   - every byte given back: held 0 and no chunk waiting at the end;
 *   - the worker's peak RSS (VmHWM) stays below the Deployment's limit;
 *   - judged from /proc, not the worker's gauges: its peak RSS rose over the
 *     idle worker's by less than the objects' content (about 115 MiB; 40 MiB
 *     measured under the 4 MiB budget, where an unbound PUT path holds the
 *     four pages of content at once, more than their bytes once parsed);
 *   - every migration Succeeded with every object migrated, and etcd, the
 *     judge, holds every object at v2 with its content unchanged.
 * The figures (budget, held at most, waits, peak RSS, the limit, seconds) are
 * printed, not timed.
 *
 * 128 objects (~115 MiB) are enough for the budget to bind on most of them
 * (114 waits, 2026-12-05) and cost etcd and the API server little (600 and
 * more of them grew each by gigabytes); the test still brings up a plane of
 * its own with one API server and takes it down afterwards. SVM_TEST_MEMORY_OBJECTS sets the objects per
 * CRD and SVM_TEST_MEMORY_BUDGET_BYTES the budget (it must still bind, and
 * hold two objects at least: the test asserts both).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { compactEtcd, countKeys, forEachStoredObject } from '../src/dev/etcd-truth';
import { down } from '../src/dev/plane';
import { imageEnv } from '../bench/lib/image-env';
import { compiledWorkerTree } from '../bench/lib/worker-tree';
import { applyCrd, deleteCrd, ensureNamespace, parallel, testCrd, type TestCrd } from './helpers/crd';
import { eventually, metricsPortOf } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  readManifests,
  serverSideApply,
  serviceAccountToken,
  writeTokenKubeconfig,
  removeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { grantManifests } from '../src/client/grant';
import YAML from 'yaml';
import { migrationResult } from './helpers/waits';

// A plane of its own (one API server), taken down afterwards: objects of ~900 KiB grow etcd and the API servers'
// watch caches by many times their bytes, which the suite's shared plane would otherwise carry into every later test.
let plane: TestPlane;
const ownDir = mkdtempSync(path.join(os.tmpdir(), 'svm-test-memory-'));
before(async () => {
  plane = await testPlane({ dir: ownDir, up: { apiservers: 1 } });
  await installCrds(plane.kube);
});
after(async () => {
  await plane?.close();
  await down(ownDir, () => undefined);
  rmSync(ownDir, { recursive: true, force: true });
});

const RESOURCES = 4;
// 32: 128 objects of ~900 KiB, ~115 MiB in all, about 28 budgets' worth: the budget binds on most of them. 150 (its
// size until 2026-12-05, on the empty patch that held none of their content) cost minutes and gigabytes of etcd.
const COUNT = Number(process.env.SVM_TEST_MEMORY_OBJECTS || 32);
/** 675 KiB of random bytes: ~900 KiB of base64 in each object. */
const PAYLOAD = 675 * 1024;
const MiB = 2 ** 20;
/**
 * The worker's budget here: 4 MiB, about four of these objects, where four chunks at once (each with its 32 MiB
 * list buffer and several updaters) would hold dozens on the PUT path.
 */
const BUDGET = Number(process.env.SVM_TEST_MEMORY_BUDGET_BYTES || 4 * MiB);

/** The worker container of deploy/deployment.yaml: its environment and memory limit. */
function shippedWorker(): { env: Record<string, string>; memoryLimit: number; args: string[] } {
  const deployment = readManifests('deployment.yaml').find((m) => m.kind === 'Deployment')! as unknown as {
    spec: {
      template: {
        spec: {
          containers: Array<{
            name: string;
            args?: string[];
            env?: Array<{ name: string; value?: string }>;
            resources: { limits: { memory: string } };
          }>;
        };
      };
    };
  };
  const c = deployment.spec.template.spec.containers.find((x) => x.name === 'worker')!;
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
  return { env, memoryLimit: quantityBytes(c.resources.limits.memory), args: c.args ?? ['worker'] };
}

/** A Kubernetes memory quantity (1Gi, 768Mi, 1G, plain bytes) in bytes. */
function quantityBytes(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q.trim());
  if (!m) throw new Error(`unreadable memory quantity ${q}`);
  const unit: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? unit[m[2]]! : 1);
}

const status = (pid: number) => readFileSync(`/proc/${pid}/status`, 'utf8');
const kib = (text: string, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(text)![1]) * 1024;

/** One sample of the worker's own gauges on /metrics. */
async function scrape(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^(svm_memory_budget_\w+|process_resident_memory_bytes) (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

void test(`${RESOURCES} migrations of ${COUNT} objects of ~900 KiB at once by PUT on one worker as shipped: the memory budget binds and holds, peak RSS within the Deployment's memory limit, etcd confirms every object`, async (t) => {
  const shipped = shippedWorker();
  const budget = BUDGET;
  const crds: TestCrd[] = Array.from({ length: RESOURCES }, (_, i) => testCrd(`${uniq(`mem${i}`)}.svm.test`));
  const ns = uniq('mem');
  const digests = new Map<string, string>(); // crd name -> sha256 of its objects' blob
  let worker: ChildProcess | undefined;
  let built: { bin: string; dispose(): void } | undefined;
  let kubeconfig: string | undefined;
  try {
    // -- 4 x COUNT objects of ~900 KiB, stored at v1 (not measured; bounded parallelism)
    await ensureNamespace(plane.kube, ns);
    for (const crd of crds) await applyCrd(plane.kube, crd, 'v1');
    const t0 = performance.now();
    let objectBytes = 0; // the largest object's text as created; as listed it adds its metadata (~1 KiB)
    for (const crd of crds) {
      const blob = randomBytes(PAYLOAD).toString('base64');
      digests.set(crd.name, createHash('sha256').update(blob).digest('hex'));
      await parallel(COUNT, 6, async (i) => {
        const body = JSON.stringify({
          apiVersion: `${crd.group}/v1`,
          kind: crd.kind,
          metadata: { name: `w-${String(i).padStart(4, '0')}`, namespace: ns },
          spec: { index: i, blob },
        });
        objectBytes = Math.max(objectBytes, Buffer.byteLength(body));
        await plane.kube.request('POST', `/apis/${crd.group}/v1/namespaces/${ns}/${crd.plural}`, { body, timeoutMs: 120_000 });
      });
    }
    // The budget admits more than itself only for one object larger than it, alone: with objects under half of it
    // (their metadata included), the worker's rule here is held <= budget, exactly.
    assert.ok(2 * (objectBytes + 64 * 1024) <= budget, `the budget (${budget} bytes) must hold two objects of ${objectBytes} bytes`);
    t.diagnostic(
      `created ${RESOURCES * COUNT} objects of ~${Math.round(((PAYLOAD / 3) * 4) / 1024)} KiB in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    );
    for (const crd of crds) await applyCrd(plane.kube, crd, 'v2');

    // -- one worker, as the Deployment runs it: its container's environment over the image's, compiled code, as its
    // ServiceAccount with deploy/'s rights and fence and `svm grant` of each CRD: the fence's whole-object comparison
    // of each ~900 KiB object is on the path too. Then the PUT path and this test's budget on top; the PUT needs
    // `update` besides the grant's list and patch, which the operator adds where a server refuses the patch
    // (docs/security.md).
    await serverSideApply(plane.kube, [
      ...readManifests('namespace.yaml'),
      ...readManifests('rbac.yaml'),
      ...readManifests('worker-policy.yaml'),
      ...crds.flatMap((c) =>
        YAML.parseAllDocuments(grantManifests({ group: c.group, resource: c.plural, custom: true }))
          .map((d) => d.toJS() as Manifest)
          .map((m) =>
            m.kind === 'ClusterRole'
              ? { ...m, rules: [{ apiGroups: [c.group], resources: [c.plural], verbs: ['list', 'patch', 'update'] }] }
              : m,
          ),
      ),
    ]);
    kubeconfig = writeTokenKubeconfig(
      plane.kube.server,
      await serviceAccountToken(plane.kube, 'svm-system', 'svm-migrator'),
      'svm-migrator',
      plane.dir,
    );
    built = compiledWorkerTree(path.join(__dirname, '..'), (s) => t.diagnostic(s));
    const taskQueue = uniq('tq-mem');
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      ...imageEnv(),
      ...shipped.env,
      // The plane instead of the cluster: its API address (the ServiceAccount's token) and its Temporal, a queue of
      // this test's own, and /metrics on a loopback port the OS gives, read from its log (9464 on 0.0.0.0 in the Pod).
      KUBECONFIG: kubeconfig,
      TEMPORAL_ADDRESS: plane.temporal.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      SVM_METRICS_PORT: '0',
      SVM_METRICS_HOST: '127.0.0.1',
      // The path that holds content (a server refusing the empty patch gets it): each object listed with its content
      // and PUT back as listed, its bytes held under the budget meanwhile. The default path holds none.
      SVM_REWRITE_METHOD: 'put',
      SVM_MEMORY_BUDGET_BYTES: String(budget),
    };
    const logFile = path.join(plane.dir, `memory-budget-worker-${taskQueue}.log`);
    const log = createWriteStream(logFile);
    worker = spawn(process.execPath, [built.bin, ...shipped.args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    worker.stdout!.pipe(log);
    worker.stderr!.pipe(log);
    const served = metricsPortOf(worker, 'the worker', { logFile });
    const pid = worker.pid!;
    const exited = new Promise<number | null>((r) => worker!.once('exit', (code) => r(code)));
    t.diagnostic(`worker pid ${pid}, log ${logFile}, memory budget ${budget} bytes, limit ${shipped.memoryLimit} bytes`);
    const metricsPort = await served;
    await eventually('the worker serves /metrics', async () => (await scrape(metricsPort)).process_resident_memory_bytes, 120_000);
    // Idle: started (its workflow bundle loaded) once its peak RSS stops moving for 3 s.
    let idle = 0;
    for (let stable = 0, i = 0; stable < 3 && i < 60; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      const now = kib(status(pid), 'VmHWM');
      stable = now === idle ? stable + 1 : 0;
      idle = now;
    }

    // -- sample while the four migrations run: RSS from /proc, held bytes from the worker's own metrics
    let maxRss = 0;
    let maxHeld = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        try {
          maxRss = Math.max(maxRss, kib(status(pid), 'VmRSS'));
          const m = await scrape(metricsPort);
          maxHeld = Math.max(maxHeld, m.svm_memory_budget_held_bytes ?? 0);
        } catch {
          // the worker is gone: the exit is checked below
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    const migrator = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
    const m0 = performance.now();
    let results;
    try {
      const handles = await Promise.all(crds.map((c) => migrator.start(c.name)));
      results = await Promise.race([
        Promise.all(handles.map((h) => migrationResult(h))),
        exited.then((code) => {
          throw new Error(`the worker exited (code ${code}) during the migrations; see ${logFile}`);
        }),
      ]);
    } finally {
      sampling = false;
      await sampler;
      await migrator.close();
    }
    const seconds = (performance.now() - m0) / 1000;
    const final = status(pid);
    const peak = kib(final, 'VmHWM');
    const metrics = await scrape(metricsPort);
    const figures = {
      objectKiB: +(objectBytes / 1024).toFixed(1),
      budgetMiB: +(budget / MiB).toFixed(2),
      limitMiB: shipped.memoryLimit / MiB,
      idlePeakRssMiB: +(idle / MiB).toFixed(1),
      peakRssMiB: +(peak / MiB).toFixed(1),
      riseOverIdleMiB: +((peak - idle) / MiB).toFixed(1),
      contentMiB: +((RESOURCES * COUNT * objectBytes) / MiB).toFixed(1),
      maxSampledRssMiB: +(maxRss / MiB).toFixed(1),
      maxHeldMiB: +(maxHeld / MiB).toFixed(2),
      maxHeldBytes: maxHeld,
      waits: metrics.svm_memory_budget_waits_total ?? 0,
      waitSeconds: +(metrics.svm_memory_budget_wait_seconds_total ?? 0).toFixed(1),
      seconds: +seconds.toFixed(0),
      objectsPerSecond: +((RESOURCES * COUNT) / seconds).toFixed(1),
    };
    t.diagnostic(`figures: ${JSON.stringify(figures)}`);

    for (const [i, r] of results.entries()) {
      assert.equal(r.phase, 'Succeeded', `${crds[i]!.name}: ${r.message}`);
      assert.equal(r.counters.migrated, COUNT, crds[i]!.name);
      assert.equal(r.counters.failed, 0, JSON.stringify(r.failures));
    }
    // The worker's own accounting. It bound: objects had to wait for room (a counter, so no sample misses it; on the
    // empty patch, which holds no content, it stays 0).
    assert.equal(metrics.svm_memory_budget_bytes, budget);
    assert.ok(figures.waits > 0, `the budget never bound: 0 waits, held at most ${maxHeld} bytes of ${budget}`);
    // It held: no sample saw more than the budget (the rule for objects smaller than it, asserted above).
    assert.ok(maxHeld <= budget, `held ${maxHeld} bytes, budget ${budget}`);
    // Every byte given back, no chunk left waiting.
    assert.equal(metrics.svm_memory_budget_held_bytes, 0, 'every byte given back');
    assert.equal(metrics.svm_memory_budget_waiting_chunks, 0, 'no chunk waiting');
    // The point: the worker's peak RSS stays below the Deployment's memory limit.
    assert.ok(peak < shipped.memoryLimit, `peak RSS ${figures.peakRssMiB} MiB, limit ${figures.limitMiB} MiB`);
    // Judged from outside the worker's own accounting (/proc): while the budget bound, its peak RSS rose over the
    // idle worker's by less than the objects' content. Unbound, the PUT path holds each chunk's page with its content,
    // the four resources' pages (all 32 objects each) at once: at least their bytes, twice that once parsed (a
    // 1 TiB budget on 4 x 100 such objects rose 306 MiB, docs/benchmarks-history.md). Bound at 4 MiB: 40 MiB, 2026-12-07.
    const content = RESOURCES * COUNT * objectBytes;
    assert.ok(
      peak - idle < content,
      `peak RSS rose ${((peak - idle) / MiB).toFixed(1)} MiB over the idle worker's, not less than the ${(content / MiB).toFixed(1)} MiB of content it migrated under a ${figures.budgetMiB} MiB budget`,
    );

    // etcd: every object of the four resources rewritten at v2, its content unchanged.
    for (const crd of crds) {
      let v2 = 0;
      const seen = await forEachStoredObject(plane.etcd, `/registry/${crd.group}/${crd.plural}/${ns}/`, (o) => {
        assert.equal(o.object.apiVersion, `${crd.group}/v2`, `${o.key} is not at v2`);
        const spec = o.object.spec as { index: number; blob: string };
        assert.equal(createHash('sha256').update(spec.blob).digest('hex'), digests.get(crd.name), `${o.key}: content changed`);
        assert.equal(o.object.metadata?.name, `w-${String(spec.index).padStart(4, '0')}`);
        v2++;
      });
      assert.equal(seen, COUNT, `${crd.name}: ${seen} keys in etcd`);
      assert.equal(v2, COUNT);
    }
  } finally {
    if (worker && worker.exitCode === null) {
      const gone = new Promise((r) => worker!.once('exit', r));
      worker.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 30_000))]);
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
    built?.dispose();
    removeTokenKubeconfig(kubeconfig);
    // Leave the shared plane usable: the CRDs go (their objects with them), then etcd drops the old revisions.
    for (const crd of crds) await deleteCrd(plane.kube, crd).catch(() => undefined);
    for (const crd of crds) {
      await eventually(
        `the objects of ${crd.name} deleted`,
        async () => (await countKeys(plane.etcd, `/registry/${crd.group}/${crd.plural}/`)) === 0,
        600_000,
      ).catch((err: unknown) => t.diagnostic(String(err)));
    }
    await plane.kube.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await compactEtcd(plane.etcd).catch((err: unknown) => t.diagnostic(`compacting etcd: ${String(err)}`));
  }
});
