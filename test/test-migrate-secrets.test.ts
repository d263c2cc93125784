/**
 * Secrets are migrated like everything else, and nothing of their content
 * reaches workflow history or the worker's logs.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { readStoredObjects } from '../src/dev/etcd-truth';
import { ensureNamespace, parallel } from './helpers/crd';
import { withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
});
after(async () => plane?.close());

const COUNT = Number(process.env.SVM_TEST_SECRETS || 2000);

void test(`${COUNT} Secrets are migrated and no secret value appears in workflow history or worker logs`, async () => {
  const ns = uniq('secrets');
  await ensureNamespace(plane.kube, ns);
  const marker = `svmleak${randomBytes(6).toString('hex')}`;
  const value = (i: number) => `${marker}-${i}`;
  await parallel(COUNT, 16, async (i) => {
    await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `s-${i}` }, stringData: { password: value(i) } }),
    });
  });
  const before = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(before.length, COUNT);

  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const { result, history } = await withWorker(
    plane,
    async (m) => {
      const h = await m.start('secrets', { chunkSize: 250, concurrency: 8 });
      const result = await migrationResult(h);
      const history = await h.workflow.fetchHistory();
      return { result, history };
    },
    { logTo: sink, settings: {} },
  );
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.ok(result.counters.migrated >= COUNT, `migrated ${result.counters.migrated} of at least ${COUNT}`);

  // Every secret is still there with its value (the update was a no-op on content).
  const after = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(after.length, COUNT);
  for (const o of after) {
    const i = Number(o.key.split('/s-')[1]);
    assert.equal(Buffer.from((o.object.data as { password: string }).password, 'base64').toString(), value(i));
  }

  // Nothing of any value, in clear or base64, in the exported history or logs.
  const historyText = JSON.stringify(history);
  const needles = [marker, Buffer.from(value(1)).toString('base64').slice(0, 16), Buffer.from(marker).toString('base64').slice(0, 12)];
  assert.ok(historyText.length > 1000, 'history export looks empty');
  assert.ok((history.events ?? []).length > 10);
  const logText = logs.join('');
  assert.match(logText, /migration finished/, 'the worker logs were not captured');
  for (const n of needles) {
    assert.ok(!historyText.includes(n), `workflow history contains ${n}`);
    assert.ok(!logText.includes(n), `worker logs contain ${n}`);
  }
  // Payloads are base64 inside the history JSON: decode them and look again.
  const decoded = [...historyText.matchAll(/"data":"([A-Za-z0-9+/=]+)"/g)]
    .map((x) => Buffer.from(x[1]!, 'base64').toString('utf8'))
    .join('\n');
  assert.ok(decoded.includes('secrets'), 'decoded payloads should mention the resource');
  for (const n of needles) assert.ok(!decoded.includes(n), `a history payload contains ${n}`);
});
