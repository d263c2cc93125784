/**
 * `npx tsx bench/bench-chunk.ts [--objects 5000 --rounds 3 --chunk-size 2000 --concurrency 8 --dir DIR]`
 *
 * svm's activity code without a worker: the `migrateChunk` activity run chunk after chunk in this process (the
 * SDK's MockActivityEnvironment, with the worker's metrics and an unlimited budget), against the raw loop
 * (bench/lib/raw-loop.ts) in the same process, alternating, each pass moving every object to the other storage
 * version. Prints each pass's objects per second and CPU ms per object of this process: what svm's own per-object
 * work (the streaming list, its bookkeeping, metrics) costs over the raw loop, apart from Temporal's worker. The
 * first pass of each warms the code; compare the later ones. Not part of `npm test`.
 */
import { parseArgs } from 'node:util';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../src/activities';
import type { ResourceRef } from '../src/api/resource';
import { installCrds } from '../src/client/cli-migrate';
import { defaultDevDir, readEnv, up } from '../src/dev/plane';
import { applyCrd, createObjects, testCrd } from '../src/dev/test-crd';
import { KubeClient } from '../src/kube/client';
import { RateLimiter } from '../src/kube/rate-limit';
import { createMetrics } from '../src/worker/metrics';
import { rawLoop } from './lib/raw-loop';
import { roundNumbers, roundOptions } from './lib/args';

const { values } = parseArgs({
  options: {
    ...roundOptions,
  },
});
const [N, ROUNDS, CHUNK, CONC] = roundNumbers(values);
if (N > 20_000) throw new Error('--objects: at most 20000 (they are created through the API)');

const log = (s: string) => process.stderr.write(`[bench:chunk] ${new Date().toISOString().slice(11, 19)} ${s}\n`);

async function main() {
  const dir = values.dir ?? defaultDevDir();
  await up({ dir, log });
  const env = readEnv(dir);
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG, { maxSockets: 128 });
  const crd = testCrd(`chunk${Date.now().toString(36)}.svm.example`, 'widgets', 'Widget');
  const activities = createActivities({
    kube,
    budget: new RateLimiter(0),
    metrics: createMetrics(),
    // Only migrateChunk runs here: nothing asks where the API servers are.
    apiservers: {
      find: () => Promise.reject(new Error('not used by migrateChunk')),
    } as unknown as NonNullable<Parameters<typeof createActivities>[0]['apiservers']>,
  });
  try {
    await installCrds(kube);
    await applyCrd(kube, crd, 'v1');
    log(`creating ${N} objects at v1 through the API (not measured)`);
    await createObjects(kube, crd, 'v1', N, { namespace: 'bench', prefix: 'c' });
    let at: 'v1' | 'v2' = 'v1';
    const passes: Array<{ what: string; perSecond: number; cpuMsPerObject: number }> = [];
    for (let r = 1; r <= ROUNDS; r++) {
      for (const what of ['raw loop', 'migrateChunk'] as const) {
        const to: 'v1' | 'v2' = at === 'v1' ? 'v2' : 'v1';
        await applyCrd(kube, crd, to);
        const ref = { group: crd.group, version: to, resource: crd.plural, kind: crd.kind, namespaced: true, custom: true };
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        const objects =
          what === 'raw loop'
            ? (
                await rawLoop(kube, {
                  group: crd.group,
                  version: to,
                  plural: crd.plural,
                  kind: crd.kind,
                  objects: N,
                  chunk: CHUNK,
                  concurrency: CONC,
                })
              ).objects
            : await chunks(activities, ref as ResourceRef);
        const cpu = process.cpuUsage(cpu0);
        const seconds = (performance.now() - t0) / 1000;
        if (objects !== N) throw new Error(`${what} rewrote ${objects} objects, not ${N}`);
        const pass = { what, perSecond: Math.round(N / seconds), cpuMsPerObject: Number(((cpu.user + cpu.system) / 1000 / N).toFixed(3)) };
        passes.push(pass);
        log(`round ${r}: ${what} ${at} -> ${to}: ${pass.perSecond} objects/s, ${pass.cpuMsPerObject} CPU ms per object (this process)`);
        at = to;
      }
    }
    const later = passes.slice(2);
    const avg = (what: string) => {
      const xs = later.filter((p) => p.what === what).map((p) => p.cpuMsPerObject);
      return xs.length ? (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3) : '-';
    };
    process.stdout.write(
      ROUNDS > 1
        ? `CPU ms per object after the first round: raw loop ${avg('raw loop')}, migrateChunk ${avg('migrateChunk')} (${N} objects, chunk ${CHUNK}, concurrency ${CONC})\n`
        : 'one round only warms the code: compare the rounds after the first (--rounds 2 or more)\n',
    );
  } finally {
    kube.close();
  }
}

/** Every chunk of the resource, one after another, as the workflow runs them (without the workflow). */
async function chunks(activities: ReturnType<typeof createActivities>, resource: ResourceRef): Promise<number> {
  const env = new MockActivityEnvironment();
  let continueToken: string | undefined;
  let migrated = 0;
  do {
    const r: Awaited<ReturnType<typeof activities.migrateChunk>> = await env.run(activities.migrateChunk, {
      resource,
      continueToken,
      options: { chunkSize: CHUNK, concurrency: CONC, qps: 0 },
    });
    migrated += r.counters.migrated;
    continueToken = r.continueToken;
  } while (continueToken);
  return migrated;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
