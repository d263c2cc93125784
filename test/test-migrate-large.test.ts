/**
 * Large objects: ~900 KB Secrets (the size of big Helm releases).
 *   - svm's re-encode holds no content: every page is listed as metadata only,
 *     a few hundred bytes per Secret whatever its size (the byte counts of
 *     every page read back from the workflow's history: no object data).
 *   - Where a server refuses the patch, the PUT path lists content: there the
 *     worker reads each page as a stream under backpressure (a 2 MiB list
 *     buffer), and the API server is never asked for a page much bigger than
 *     4 MiB once svm has seen objects this size (each page's limit comes from
 *     the size of the objects of the page before). Shown with
 *     SVM_REWRITE_METHOD=put, the setting that forces that path.
 * etcd is the judge that every Secret's data is intact, and the counters
 * account for every Secret of the cluster.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { readStoredObjects } from '../src/dev/etcd-truth';
import { ensureNamespace, parallel } from './helpers/crd';
import { chunkActivities, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
after(async () => plane?.close());

const COUNT = Number(process.env.SVM_TEST_LARGE_SECRETS || 40);
/** 675 KiB of random bytes: 900 KiB of base64 in the Secret, well under etcd's 1.5 MiB request limit. */
const PAYLOAD = 675 * 1024;
const BUFFER = 2 * 1024 * 1024;
const PAGE_BYTES = 4 * 1024 * 1024;

const ns = uniq('large');
const digests = new Map<string, string>();
let totalBefore = 0;
before(async () => {
  plane = await testPlane();
  await ensureNamespace(plane.kube, ns);
  await parallel(COUNT, 4, async (i) => {
    const blob = randomBytes(PAYLOAD);
    digests.set(`s-${i}`, createHash('sha256').update(blob).digest('hex'));
    await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
      body: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: `s-${i}` },
        type: 'helm.sh/release.v1',
        data: { release: blob.toString('base64') },
      }),
    });
  });
  assert.equal((await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`)).length, COUNT);
  totalBefore = (await readStoredObjects(plane.etcd, '/registry/secrets/')).length;
});

/** Migrates every Secret with these worker environment variables set; checks counters and etcd; returns the pages. */
async function migrateSecrets(env: Record<string, string>) {
  const previous = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  let result;
  let chunks;
  try {
    [result, chunks] = await withWorker(plane, async (m) => {
      const h = await m.start('secrets', { chunkSize: 500, concurrency: 4, pageBytes: PAGE_BYTES });
      const r = await migrationResult(h);
      return [r, await chunkActivities(plane.temporal.client, h.workflowId)] as const;
    });
  } finally {
    for (const [k, v] of Object.entries(previous)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  assert.equal(result.phase, 'Succeeded', result.message);

  // Counters: every Secret of the cluster listed once and accounted for once, none failed.
  const c = result.counters;
  assert.equal(c.failed, 0, JSON.stringify(result.failures));
  assert.ok(c.migrated >= COUNT, `migrated ${c.migrated} of at least ${COUNT}`);
  const accounted = c.migrated + c.conflicts + c.notFound;
  const totalAfter = (await readStoredObjects(plane.etcd, '/registry/secrets/')).length;
  assert.equal(totalAfter, totalBefore, 'no Secret came or went meanwhile');
  assert.equal(
    accounted,
    totalAfter,
    `every Secret in etcd accounted for exactly once (migrated ${c.migrated}, conflicts ${c.conflicts}, notFound ${c.notFound})`,
  );
  assert.equal(chunks.length, c.chunks);
  assert.equal(
    chunks.reduce((n, ch) => n + ch.result.listed, 0),
    accounted,
  );
  // etcd: every Secret still holds exactly its bytes.
  const stored = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(stored.length, COUNT);
  for (const o of stored) {
    const name = o.object.metadata!.name!;
    const data = (o.object.data as { release: string }).release;
    assert.equal(createHash('sha256').update(Buffer.from(data, 'base64')).digest('hex'), digests.get(name), `${name}: data changed`);
    assert.equal(Buffer.from(data, 'base64').length, PAYLOAD);
  }
  const pages = chunks.map(
    (ch) => `${ch.input.options.chunkSize}:${ch.result.listed}/${((ch.result.listedBytes ?? 0) / 2 ** 10).toFixed(1)}KiB`,
  );
  console.log(`pages (limit:listed/bytes): ${pages.join(' ')}`);
  return { chunks, pages, result };
}

void test(`${COUNT} Secrets of ~900 KB, svm's re-encode: every page listed as metadata only (no content enters the worker), every Secret intact in etcd, counters right`, async () => {
  const { chunks, pages, result } = await migrateSecrets({});
  assert.equal(result.message?.includes('PUT'), false, result.message);
  for (const ch of chunks) {
    assert.equal(ch.result.rewrite, undefined, `a chunk rewrote by PUT: ${pages.join(' ')}`);
    // Metadata only: far below one Secret's 900 KB per object (a Secret's metadata is a few hundred bytes).
    assert.ok((ch.result.listedBytes ?? 0) <= 4096 * Math.max(1, ch.result.listed), `a page held content: ${pages.join(' ')}`);
  }
});

void test(`${COUNT} Secrets of ~900 KB by the PUT path (SVM_REWRITE_METHOD=put), a 2 MiB list buffer and 4 MiB pages: pages bounded by bytes, every Secret intact in etcd, counters right`, async () => {
  const { chunks, pages } = await migrateSecrets({ SVM_REWRITE_METHOD: 'put', SVM_LIST_BUFFER_BYTES: String(BUFFER) });
  for (const ch of chunks) assert.equal(ch.result.rewrite, 'put');
  // The pages: the first at most 10 objects (asked as a metadata page of the chunk size whose content listing is cut
  // to 10: the workflow learns of the PUT from its result); after a page of big objects, the next one near PAGE_BYTES
  // (objects differ a little in size: within 1.5x).
  const first = chunks[0]!;
  assert.equal(first.input.options.contentLimit, 10, `first page: ${JSON.stringify(first.input.options)}`);
  assert.ok(first.result.listed <= 10, `first page listed ${first.result.listed} (${pages.join(' ')})`);
  // A page of big objects only (~900 KiB each): a page mixing them with small ones says little of the next.
  const big = (ch: (typeof chunks)[number]) => (ch.result.listedBytes ?? 0) / Math.max(1, ch.result.listed) >= 800 * 1024;
  const afterBig = chunks.filter((_, i) => i > 0 && big(chunks[i - 1]!));
  assert.ok(afterBig.length >= 3, `pages after a page of big objects: ${afterBig.length} (${pages.join(' ')})`);
  for (const ch of afterBig) assert.ok((ch.result.listedBytes ?? 0) <= 1.5 * PAGE_BYTES, `a page of ${pages.join(' ')} exceeds the bound`);
});
