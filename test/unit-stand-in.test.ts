/**
 * The fleet bench's stand-in API (bench/fleet-stand-in.ts): its path reading and merge patch, and, through svm's own
 * KubeClient over HTTP, that each simulated cluster is a cluster of its own (its kube-system uid, its objects) and
 * that what a migration does there (a metadata-only list, the empty merge patch of a re-encode) is answered as
 * kube-apiserver would, with the writes counted per object and a stale resourceVersion refused.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  BENCH_GROUP,
  BENCH_KIND,
  BENCH_RESOURCE,
  BENCH_VERSION,
  mergePatch,
  parsePath,
  serveStandIn,
  StandIn,
  standInKubeconfig,
} from '../bench/fleet-stand-in';
import { KubeClient } from '../src/kube/client';
import { clusterUidReader } from '../src/kube/cluster-uid';
import { KubeError } from '../src/kube/errors';

void test('parsePath reads core, group, namespaced and cluster-scoped paths', () => {
  assert.deepEqual(parsePath('/api/v1/namespaces/kube-system'), {
    kind: 'object',
    group: '',
    version: 'v1',
    resource: 'namespaces',
    name: 'kube-system',
    subresource: undefined,
  });
  assert.deepEqual(parsePath('/apis/coordination.k8s.io/v1/namespaces/svm-system/leases/x'), {
    kind: 'object',
    group: 'coordination.k8s.io',
    version: 'v1',
    namespace: 'svm-system',
    resource: 'leases',
    name: 'x',
    subresource: undefined,
  });
  assert.equal(parsePath('/apis/migration.k8s.io/v1alpha1/storagestates/a/status').subresource, 'status');
  assert.equal(parsePath('/apis').kind, 'discovery-groups');
  assert.equal(parsePath('/apis/fleet.svm.test/v1').kind, 'discovery-gv');
  assert.equal(parsePath('/healthz').kind, 'other');
});

void test('mergePatch follows RFC 7386: null deletes, objects merge, the rest replaces', () => {
  assert.deepEqual(mergePatch({ a: 1, b: { c: 2, d: 3 }, e: [1] }, { a: null, b: { c: 4 }, e: [2] }), { b: { c: 4, d: 3 }, e: [2] });
});

let server: Server;
let port: number;
let standIn: StandIn;
let dir: string;
const kube = (i: number) => {
  const file = path.join(dir, `c${i}.kubeconfig`);
  writeFileSync(file, standInKubeconfig(port, i, `c${i}`));
  return KubeClient.fromKubeconfig(file);
};
const ref = { group: BENCH_GROUP, version: BENCH_VERSION, resource: BENCH_RESOURCE, kind: BENCH_KIND };

before(async () => {
  standIn = new StandIn(3, 5);
  ({ server, port } = await serveStandIn(standIn));
  dir = mkdtempSync(path.join(tmpdir(), 'svm-stand-in-'));
});
after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

void test('each simulated cluster answers with a kube-system uid of its own', async () => {
  const clients = [0, 1, 2].map(kube);
  const uids = await Promise.all(clients.map((k) => clusterUidReader(k)()));
  assert.equal(new Set(uids).size, 3);
  assert.deepEqual(
    uids,
    standIn.clusters.map((c) => c.uid),
  );
  clients.forEach((k) => k.close());
});

void test('discovery serves the bench resource with a storageVersionHash', async () => {
  const k = kube(0);
  const found = (await k.discover()).find((r) => r.group === BENCH_GROUP && r.name === BENCH_RESOURCE);
  assert.ok(found?.storageVersionHash, 'the bench resource has a storageVersionHash');
  k.close();
});

void test('a metadata-only list and the re-encode of each object: counted per object, in that cluster only', async () => {
  const k = kube(1);
  const page = await k.listPage(ref, { limit: 3 });
  assert.equal(page.items.length, 3);
  assert.ok(page.continueToken, 'a page of 3 of 5 continues');
  const rest = await k.listPage(ref, { limit: 3, continueToken: page.continueToken });
  assert.equal(rest.items.length, 2);
  assert.equal(rest.continueToken, undefined);
  for (const o of [...page.items, ...rest.items]) {
    const rv = await k.reencode(ref, o);
    assert.notEqual(rv, o.resourceVersion);
  }
  assert.equal(standIn.clusters[1]!.writes.size, 5);
  assert.ok([...standIn.clusters[1]!.writes.values()].every((n) => n === 1));
  assert.equal(standIn.clusters[0]!.writes.size, 0);
  // The listed resourceVersion is now stale: a conflict, as kube-apiserver answers, and not counted.
  await assert.rejects(
    () => k.reencode(ref, page.items[0]!),
    (err: unknown) => err instanceof KubeError && /409/.test(err.message),
  );
  assert.equal(standIn.stats().writes, 5);
  k.close();
});

void test('a path nothing serves is a 404, and remembered', async () => {
  const k = kube(2);
  const res = await k.request('GET', '/apis/nothing.example/v1/things', { allow: [404] });
  assert.equal(res.status, 404);
  assert.ok(Object.keys(standIn.stats().unserved).some((s) => s.includes('/apis/nothing.example/v1/things')));
  k.close();
});
