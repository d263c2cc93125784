/**
 * Large objects: ~900 KB Secrets (the size of big Helm releases) are
 * migrated with a list buffer of 2 MiB and pages bounded to 4 MiB.
 *   - The worker reads each page as a stream under backpressure, never whole.
 *   - The API server is never asked for a page much bigger than 4 MiB once
 *     svm has seen objects this size: each page's limit comes from the size
 *     of the objects of the page before (read back from the workflow's
 *     history: limits and byte counts, no object data).
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

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
});
after(async () => plane?.close());

const COUNT = Number(process.env.SVM_TEST_LARGE_SECRETS || 40);
/** 675 KiB of random bytes: 900 KiB of base64 in the Secret, well under etcd's 1.5 MiB request limit. */
const PAYLOAD = 675 * 1024;
const BUFFER = 2 * 1024 * 1024;
const PAGE_BYTES = 4 * 1024 * 1024;

void test(`${COUNT} Secrets of ~900 KB with a 2 MiB list buffer and 4 MiB pages: pages bounded by bytes, every Secret intact in etcd, counters right`, async () => {
  const ns = uniq('large');
  await ensureNamespace(plane.kube, ns);
  const digests = new Map<string, string>();
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
  const before = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(before.length, COUNT);
  const totalBefore = (await readStoredObjects(plane.etcd, '/registry/secrets/')).length;

  const previous = process.env.SVM_LIST_BUFFER_BYTES;
  process.env.SVM_LIST_BUFFER_BYTES = String(BUFFER);
  let result;
  let chunks;
  try {
    [result, chunks] = await withWorker(plane, async (m) => {
      const h = await m.start('secrets', { chunkSize: 500, concurrency: 4, pageBytes: PAGE_BYTES });
      const r = await h.wait();
      return [r, await chunkActivities(plane.temporal.client, h.workflowId)] as const;
    });
  } finally {
    if (previous === undefined) delete process.env.SVM_LIST_BUFFER_BYTES;
    else process.env.SVM_LIST_BUFFER_BYTES = previous;
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
  // The pages, from the history: every object listed once; the first page at most 10 objects; after a
  // page of big objects, the next one near PAGE_BYTES (objects differ a little in size: within 1.5x).
  assert.equal(chunks.length, c.chunks);
  assert.equal(
    chunks.reduce((n, ch) => n + ch.result.listed, 0),
    accounted,
  );
  assert.ok(chunks[0]!.input.options.chunkSize <= 10, `first page limit ${chunks[0]!.input.options.chunkSize}`);
  const big = (ch: (typeof chunks)[number]) => (ch.result.listedBytes ?? 0) / Math.max(1, ch.result.listed) >= 256 * 1024;
  const afterBig = chunks.filter((_, i) => i > 0 && big(chunks[i - 1]!));
  const pages = chunks.map(
    (ch) => `${ch.input.options.chunkSize}:${ch.result.listed}/${((ch.result.listedBytes ?? 0) / 2 ** 20).toFixed(1)}MiB`,
  );
  console.log(`pages (limit:listed/bytes): ${pages.join(' ')}`);
  assert.ok(afterBig.length >= 3, `pages after a page of big objects: ${afterBig.length} (${pages.join(' ')})`);
  for (const ch of afterBig) assert.ok((ch.result.listedBytes ?? 0) <= 1.5 * PAGE_BYTES, `a page of ${pages.join(' ')} exceeds the bound`);

  // etcd: every Secret still holds exactly its bytes.
  const stored = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(stored.length, COUNT);
  for (const o of stored) {
    const name = o.object.metadata!.name!;
    const data = (o.object.data as { release: string }).release;
    assert.equal(createHash('sha256').update(Buffer.from(data, 'base64')).digest('hex'), digests.get(name), `${name}: data changed`);
    assert.equal(Buffer.from(data, 'base64').length, PAYLOAD);
  }
});
