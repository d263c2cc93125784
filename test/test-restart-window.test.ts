/**
 * Agreement names server processes, not only hashes (issue 20, point 1): a
 * kube-apiserver rolled back to the old encoding and forward again between two
 * agreement checks writes old-encoded objects in between, while both checks
 * see the same servers at the same addresses serving the same hash. Each
 * restart gives the server's identity Lease a new holderIdentity, which the
 * agreement token holds: the pass that spanned the restarts does not count,
 * another whole pass runs, and etcd ends holding only the new encoding.
 *
 * To put the rollback between two checks deterministically, the migration is
 * paused and its worker stopped while server 1 goes back and forth (an
 * operator pausing during an upgrade, a worker rescheduled): nothing checks
 * in that window. StorageVersion API off, as in real clusters.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Migrator } from '../src/client';
import { storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, stopApiserver } from '../src/dev/plane';
import { createMigratorWorker } from '../src/worker/worker';
import { createDisagreeing, DISAGREEING, OLD_ENCODING_FLAGS } from './helpers/old-encoding';
import { endLeftovers, eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  assert.equal(plane.shape, 'cluster', `this test needs the cluster-shaped plane: ${plane.state.shapeReason}`);
  await plane.setStorageVersionApi(false);
  await endLeftovers(plane);
});
after(async () => {
  await restartApiserver(plane.dir, 1, [], () => undefined);
  await endLeftovers(plane);
  await plane?.close();
});

const quiet = () => undefined;
/** Killed and started again at the same address with the same identity Lease name: only its holderIdentity changes. */
async function restartInPlace(flags: string[]): Promise<void> {
  await stopApiserver(plane.dir, 1, { kill: true });
  await restartApiserver(plane.dir, 1, flags, quiet);
}
const versions = async () => (await storedVersions(plane.etcd, DISAGREEING.prefix)).byApiVersion;
const holders = async () =>
  (
    await plane.kube.getJson<{ items: Array<{ metadata: { name: string }; spec: { holderIdentity?: string } }> }>(
      '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases',
      { labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver' },
    )
  ).items.map((l) => `${l.metadata.name}=${l.spec.holderIdentity}`);

void test('a rollback and roll-forward of one API server between two checks: that pass does not count, another runs, etcd ends on the new encoding only', async () => {
  const tag = uniq('rw');
  await createDisagreeing(plane.kubeOf(0), tag, 400); // the new encoding
  const taskQueue = uniq('tq');
  const migrator = await Migrator.connect({ temporal: { address: plane.temporal.address, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
  try {
    // 1. The pass starts under agreement and gets a few chunks in; then it is paused and its worker goes away.
    const first = await createMigratorWorker(plane.workerSettings(taskQueue));
    const [h, pausedAt] = await first.runUntil(async () => {
      const h = await migrator.start(DISAGREEING.name, { chunkSize: 50, concurrency: 2, qps: 25, agreementPollSeconds: 3600 });
      await eventually('a few chunks', async () => (await h.progress()).counters.chunks >= 2);
      await h.pause();
      return [
        h,
        await eventually('paused', async () => {
          const p = await h.progress();
          return p.phase === 'Paused' && p;
        }),
      ] as const;
    });
    assert.equal(pausedAt.restarts, 0);
    assert.ok(pausedAt.counters.migrated > 0 && pausedAt.counters.migrated < 400, `paused mid-pass: ${pausedAt.counters.migrated}`);
    const holdersBefore = await holders();

    // 2. Server 1 back to the old encoding; objects written through it land in the part of the list already passed
    //    ("0000-..." sorts first); then forward to the new encoding, same address, same Lease name.
    await restartInPlace(OLD_ENCODING_FLAGS);
    await createDisagreeing(plane.kubeOf(1), `0000-late-${tag}`, 20);
    assert.ok(((await versions())[DISAGREEING.oldApiVersion] ?? 0) >= 20, JSON.stringify(await versions()));
    await restartInPlace([]);
    await eventually('server 1 renewed its identity lease', async () => {
      const now = await holders();
      return now.length === holdersBefore.length && now.join() !== holdersBefore.join();
    });
    process.stderr.write(
      `[restart-window] holders before ${holdersBefore.join(' ')}\n[restart-window] holders after ${(await holders()).join(' ')}\n`,
    );

    // 3. A worker again, resume: the servers and hashes are the same as at the start, the processes are not.
    const second = await createMigratorWorker(plane.workerSettings(taskQueue));
    const result = await second.runUntil(async () => {
      await h.resume();
      return migrationResult(h);
    });
    process.stderr.write(`[restart-window] ${result.phase} after ${result.restarts} restart(s): ${result.message}\n`);
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.ok(result.restarts >= 1, 'the pass that spanned the restarts must not count');
    const total = (await storedVersions(plane.etcd, DISAGREEING.prefix)).total;
    assert.equal(result.counters.migrated + result.counters.conflicts, total, 'the final pass covers every object');
  } finally {
    await migrator.close();
  }
  assert.deepEqual(Object.keys(await versions()), [DISAGREEING.newApiVersion], JSON.stringify(await versions()));
});
