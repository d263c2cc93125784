/** The worker's Prometheus endpoint, scraped during a real migration and checked against etcd. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { freePort } from '../src/dev/ports';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').pop());
  }
  return undefined;
}

void test('the metrics endpoint counts what etcd shows, and carries the Temporal SDK metrics', async () => {
  const COUNT = 700;
  const crd = testCrd(`${uniq('mt')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/metrics`;
  const { during, end } = await withWorker(
    plane,
    async (m) => {
      const h = await m.start(crd.name, { chunkSize: 100, qps: 200 });
      const during = await eventually('a scrape in mid-migration', async () => {
        const text = await (await fetch(url)).text();
        const n = sample(text, 'svm_objects_total', { resource: crd.name, outcome: 'migrated' });
        return n !== undefined && n > 0 && n < COUNT && text;
      });
      const result = await h.wait();
      assert.equal(result.phase, 'Succeeded');
      return { during, end: await (await fetch(url)).text() };
    },
    { settings: { metricsPort: port, metricsHost: '127.0.0.1' } },
  );
  assert.ok(during.includes('svm_update_duration_seconds_bucket'));
  const etcd = await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true });
  assert.equal(etcd.byApiVersion[`${crd.group}/v2`], COUNT);
  assert.equal(sample(end, 'svm_objects_total', { resource: crd.name, outcome: 'migrated' }), COUNT);
  assert.equal(sample(end, 'svm_objects_rewritten_total', { resource: crd.name }), etcd.byApiVersion[`${crd.group}/v2`]);
  assert.equal(sample(end, 'svm_update_duration_seconds_count', { resource: crd.name }), COUNT);
  assert.equal(sample(end, 'svm_migrations_total', { resource: crd.name, result: 'Succeeded' }), 1);
  // Every series of the resource exists at 0 from the migration's start (src/activities/index.ts), so that
  // Prometheus's increase() counts a first failure instead of taking it as the series' baseline.
  assert.equal(sample(during, 'svm_objects_total', { resource: crd.name, outcome: 'failed' }), 0);
  assert.equal(sample(end, 'svm_objects_total', { resource: crd.name, outcome: 'failed' }), 0);
  assert.equal(sample(end, 'svm_migrations_total', { resource: crd.name, result: 'Failed' }), 0);
  assert.equal(sample(end, 'svm_migrations_total', { resource: crd.name, result: 'Aborted' }), 0);
  assert.match(end, /# Temporal SDK metrics\n[\s\S]*temporal_/, 'the SDK metrics are missing');
  assert.ok(!end.includes('"spec"') && !end.includes('object 1'), 'object data in metrics');
});
