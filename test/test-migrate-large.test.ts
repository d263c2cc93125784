/**
 * Large objects: a page of ~900 KB Secrets (chunk 500, so the whole set is
 * one page) is migrated with a list buffer of 2 MiB, far below the page's
 * size. The list is then read as a stream under backpressure; etcd is the
 * judge that every Secret's data is intact, and the counters account for
 * every Secret of the cluster.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { readStoredObjects } from '../src/dev/etcd-truth';
import { ensureNamespace, parallel } from './helpers/crd';
import { withWorker } from './helpers/migrate';
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

void test(`${COUNT} Secrets of ~900 KB in one page, with a 2 MiB list buffer: every Secret intact in etcd, counters right`, async () => {
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
  try {
    result = await withWorker(plane, async (m) => (await m.start('secrets', { chunkSize: 500, concurrency: 4 })).wait());
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
  assert.equal(c.chunks, Math.max(1, Math.ceil(accounted / 500)), 'a page of 500 holds them');

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
