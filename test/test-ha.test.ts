/**
 * HA safety on real disagreement: two kube-apiservers of one binary, one of
 * them started with --min-compatibility-version=1.33, encode
 * admissionregistration.k8s.io/mutatingadmissionpolicybindings as v1beta1 where the default encodes v1
 * (test/helpers/old-encoding.ts).
 * A migration waits while they disagree, stops when agreement breaks, ignores
 * servers that are gone, and succeeds only when agreement held from its start
 * to its end. etcd is checked at the end of every scenario.
 *
 * The worker is configured as deploy/ does (one load-balanced KUBECONFIG, nothing per server):
 * - StorageVersion API off (the default, as in real clusters): the worker
 *   finds each server in the `kubernetes` EndpointSlice, asks each one's
 *   discovery at its own address, and counts them by their identity leases.
 *   One test walks a disagreement from the start, an agreement, and a break
 *   mid-pass on one migration (each disagreement judged by etcd over all of
 *   it; each ended by a restart of server 1 while the migration is paused, and
 *   the pause held until both servers are listed again, so the success names
 *   exactly 2 of 2); the removal for good and the CRD's switch are tests of
 *   their own.
 * - StorageVersion API on: agreement from StorageVersion objects. One test
 *   walks the same three scenarios in a row on one migration (broken mid-pass,
 *   it waits on the disagreement; the disagreeing server then removed for
 *   good), so the API is switched on once and one data set serves; the CRD's
 *   scenario is not run again (a custom resource's agreement is read from
 *   discovery either way: src/kube/server-agreements.ts).
 * The plane is left with the API off.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { svmPath } from '../src/activities';
import type { MigrationHandle, MigrationProgress } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver, stopApiserver } from '../src/dev/plane';
import { storageVersionHashOf } from '../src/kube/agreement';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { createDisagreeing, DISAGREEING, OLD_ENCODING_FLAGS } from './helpers/old-encoding';
import { etcdRevision, rewrittenSince } from './helpers/etcd-interval';
import { endLeftovers, eventually, withWorker } from './helpers/migrate';
import { defaultApiservers, testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

const OLD = OLD_ENCODING_FLAGS;
const DEVICECLASSES = DISAGREEING.name;
const PREFIX = DISAGREEING.prefix;
const HASH_V1 = storageVersionHashOf(DISAGREEING.group, 'v1', DISAGREEING.kind);
const HASH_V1BETA2 = storageVersionHashOf(DISAGREEING.group, 'v1beta1', DISAGREEING.kind);

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  // The per-server answers below are only real where each server has its own address.
  assert.equal(plane.shape, 'cluster', `this test needs the cluster-shaped plane: ${plane.state.shapeReason}`);
  await installCrds(plane.kube);
});
// Every scenario leaves both API servers running with default flags.
// A failed scenario must not leave its migration running for the next one to join.
beforeEach(() => endLeftovers(plane));
afterEach(async () => {
  await defaultApiservers(plane, 1);
  await endLeftovers(plane);
});
after(async () => {
  await plane?.setStorageVersionApi(false); // the default
  await plane?.close();
});

const quiet = () => undefined;

/**
 * A server restarted with other flags without leaving the lists: killed, so
 * its identity lease and its endpoint stay (a graceful shutdown removes both,
 * and for those seconds the cluster honestly has one server fewer: a pass run
 * then is checked over the servers that exist, which these scenarios do not
 * want to race with). While it is down it does not answer; it comes back
 * under a new lease holder, which the watcher reports.
 */
async function restartInPlace(index: number, flags: string[]): Promise<void> {
  await stopApiserver(plane.dir, index, { kill: true });
  await restartApiserver(plane.dir, index, flags, quiet);
}

async function disagreeingVersions(): Promise<Record<string, number>> {
  return (await storedVersions(plane.etcd, PREFIX)).byApiVersion;
}

const phaseIs = (h: MigrationHandle, phase: string) => async () => {
  const p = await h.progress();
  return p.phase === phase && p;
};

/** How a server is named in discovery-mode messages: its own address and port. */
const serverId = (index: number) => `${plane.state.apiservers[index]!.address}:${plane.state.apiservers[index]!.port}`;

/** etcd's judge of "writes nothing": no object of the resource rewritten after `since` (creates are not rewrites). */
async function assertNothingRewritten(since: number, why: string): Promise<void> {
  const rewritten = await rewrittenSince(plane.etcd, PREFIX, since);
  assert.deepEqual(rewritten.slice(0, 10), [], `${why}: ${rewritten.length} objects rewritten after etcd revision ${since}`);
}

/** Server 1's identity leases, newest first: an earlier restart may have left a stale one beside its current one. */
async function server1Leases() {
  const leases = await plane.kube.getJson<{
    items: Array<{ metadata: { name: string; labels: Record<string, string> }; spec?: { renewTime?: string; holderIdentity?: string } }>;
  }>('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases', {
    labelSelector: 'apiserver.kubernetes.io/identity=kube-apiserver',
  });
  return leases.items
    .filter((l) => l.metadata.labels['kubernetes.io/hostname'] === 'svm-apiserver-1')
    .sort((a, b) => String(b.spec?.renewTime ?? '').localeCompare(String(a.spec?.renewTime ?? '')));
}

/** Every lease of server 1 deleted (one already collected by the API servers is gone too: a 404 is that). */
async function deleteLeases(own: Array<{ metadata: { name: string } }>): Promise<void> {
  for (const l of own) {
    const res = await plane.kube.raw('DELETE', `/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/${l.metadata.name}`);
    assert.ok(res.status < 300 || res.status === 404, `deleting lease ${l.metadata.name}: HTTP ${res.status}`);
  }
}

/**
 * Ends a disagreement so that the migration's pass cannot finish before both servers are listed again: the migration
 * paused (acknowledged) while it waits, server 1 restarted in place with the default flags, then held until the
 * EndpointSlice lists both addresses ready and server 1's identity lease names a new process, seen from outside (the
 * wait for agreement does not stop for a pause, but the pass does: it is held before its first chunk, and a pass
 * started in the moment server 1 was out of the lists is found changed at its verdict and run again).
 */
async function agreeAgainHeld(h: MigrationHandle): Promise<void> {
  const ack = await h.steer('pause');
  assert.equal(ack?.paused, true, 'the pause acknowledged');
  const before = (await server1Leases())[0]?.spec?.holderIdentity;
  await restartInPlace(1, []);
  await eventually(
    'both API servers listed again (EndpointSlice, server 1 lease renewed by its new process)',
    async () => {
      const slices = await plane.kube.getJson<{
        items: Array<{ endpoints?: Array<{ addresses: string[]; conditions?: { ready?: boolean } }>; ports?: Array<{ port?: number }> }>;
      }>('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', { labelSelector: 'kubernetes.io/service-name=kubernetes' });
      const ready = new Set(
        slices.items.flatMap((s) =>
          (s.endpoints ?? [])
            .filter((e) => e.conditions?.ready !== false)
            .flatMap((e) => e.addresses.flatMap((a) => (s.ports ?? []).map((p) => `${a}:${p.port}`))),
        ),
      );
      const lease = (await server1Leases())[0];
      // Live: renewed within its 15 s duration.
      const fresh = Date.parse(lease?.spec?.renewTime ?? '') > Date.now() - 15_000;
      return ready.has(serverId(0)) && ready.has(serverId(1)) && lease?.spec?.holderIdentity !== before && fresh;
    },
    120_000,
  );
  await eventually('the pass held by the pause', phaseIs(h, 'Paused'));
}

const storageVersionApi = async (on: boolean) => {
  await plane.setStorageVersionApi(on);
  assert.equal(plane.storageVersionApi, on);
  const res = await plane.kube.raw('GET', '/apis/internal.apiserver.k8s.io/v1alpha1');
  assert.equal(res.status, on ? 200 : 404, `the StorageVersion API should be ${on ? '' : 'not '}served`);
};

void describe('StorageVersion API off', () => {
  before(() => storageVersionApi(false));
  scenarios();
});

void describe('StorageVersion API on', () => {
  before(() => storageVersionApi(true));
  void test('agreement from StorageVersion objects: broken mid-pass, the migration stops and waits on the disagreement writing nothing; the disagreeing server removed for good, its stale entry is ignored once its lease is gone, and the pass starts over and finishes; etcd clean', async () => {
    const tag = uniq('sv');
    await restartApiserver(plane.dir, 1, OLD, quiet);
    await createDisagreeing(plane.kubeOf(1), tag, 600); // v1beta1
    await restartApiserver(plane.dir, 1, [], quiet); // agreement on v1
    let gone = '';
    const result = await withWorker(plane, async (m) => {
      // qps 30: the pass (600 objects) lasts ~20s, longer than a restart of server 1.
      const h = await m.start(DEVICECLASSES, { chunkSize: 50, concurrency: 2, qps: 30, agreementPollSeconds: 2 });
      await eventually('a few chunks', async () => (await h.progress()).counters.chunks >= 2);
      // A rolling upgrade step backwards: server 1 encodes v1beta1 again, and publishes it in the StorageVersion.
      await restartInPlace(1, OLD);
      const waiting = await eventually('back to WaitingForAgreement on the disagreement', async () => {
        const p = await h.progress();
        return p.phase === 'WaitingForAgreement' && /disagree/.test(p.message ?? '') && p;
      });
      assert.ok(waiting.restarts >= 1, 'the polluted pass must be abandoned');
      assert.equal(waiting.counters.migrated, 0, 'counters restart with the new pass');
      assert.match(
        waiting.message ?? '',
        /disagree on the encoding version of admissionregistration\.k8s\.io\.mutatingadmissionpolicybindings: /,
      );
      assert.match(waiting.message ?? '', /=admissionregistration\.k8s\.io\/v1beta1\b/);
      assert.match(waiting.message ?? '', /=admissionregistration\.k8s\.io\/v1(,|$)/);
      process.stderr.write(`[ha sv-on] waiting: ${waiting.message}\n`);
      // From here to the removal below the migration waits: etcd shows nothing rewritten over all of it, while writes
      // through the old server store the old version.
      const waitingFrom = await etcdRevision(plane.etcd);
      await createDisagreeing(plane.kubeOf(1), `${tag}-late`, 30);
      assert.ok(((await disagreeingVersions())[DISAGREEING.oldApiVersion] ?? 0) >= 30);
      const own = await server1Leases();
      gone = own[0]!.metadata.name;
      // The scenario needs the stale entry: server 1's current lease holder has published v1beta1.
      await eventually('server 1 to publish v1beta1', async () => {
        const obj = await plane.kube.getJson<{ status?: { storageVersions?: Array<{ apiServerID: string; encodingVersion: string }> } }>(
          `/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/${DISAGREEING.storageVersionName}`,
        );
        return obj.status?.storageVersions?.some((e) => e.apiServerID === gone && e.encodingVersion === DISAGREEING.oldApiVersion);
      });
      const still = await h.progress();
      assert.equal(still.phase, 'WaitingForAgreement', still.message);
      await assertNothingRewritten(waitingFrom, 'written while the servers disagreed');
      // Removed for good: killed (a vanished server leaves its lease and entry behind), then its leases deleted. Its
      // stale v1beta1 entry stays in the StorageVersion, and no longer blocks agreement.
      await stopApiserver(plane.dir, 1, { kill: true });
      await deleteLeases(own);
      return migrationResult(h);
    });
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.ok(result.restarts >= 1);
    process.stderr.write(`[ha sv-on] result: ${result.message}\n`);
    assert.ok(result.message?.endsWith('the StorageVersion API: 1 live API server'), result.message);
    const total = (await storedVersions(plane.etcd, PREFIX)).total;
    assert.equal(result.counters.migrated + result.counters.conflicts, total, 'the final pass must cover every object');
    assert.deepEqual(Object.keys(await disagreeingVersions()), [DISAGREEING.newApiVersion]);
    const obj = await plane.kube.getJson<{ status: { storageVersions: Array<{ apiServerID: string }> } }>(
      `/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/${DISAGREEING.storageVersionName}`,
    );
    assert.ok(
      obj.status.storageVersions.some((e) => e.apiServerID === gone),
      'the stale entry was still there: it was ignored, not removed',
    );
  });
});

function scenarios(): void {
  void test('servers disagree, then agree, then agreement breaks mid-pass: the migration waits visibly writing nothing (etcd over each whole disagreement), starts over, and succeeds on exactly 2 of 2 servers; etcd clean', async () => {
    await restartApiserver(plane.dir, 1, OLD, quiet);
    const tag = uniq('dc');
    // 600 objects, read at qps 30: a pass of ~20 s, longer than a restart of server 1 (the break below lands mid-pass).
    await createDisagreeing(plane.kubeOf(1), `${tag}-old`, 560); // stored as v1beta1
    await createDisagreeing(plane.kubeOf(0), `${tag}-new`, 40); // stored as v1
    const v = await disagreeingVersions();
    assert.ok((v[DISAGREEING.oldApiVersion] ?? 0) >= 560, `expected v1beta1 objects, got ${JSON.stringify(v)}`);

    const result = await withWorker(plane, async (m) => {
      // 1. Disagreeing from the start: from the migration's start to server 1's restart that ends the disagreement, and
      // on while the pass is held, etcd shows nothing rewritten.
      const startedAt = await etcdRevision(plane.etcd);
      const h = await m.start(DEVICECLASSES, { chunkSize: 50, concurrency: 2, qps: 30, agreementPollSeconds: 2 });
      const waiting = await eventually('WaitingForAgreement', phaseIs(h, 'WaitingForAgreement'));
      // Each server asked at its own address, named by it, with the hash it serves.
      const expected = `disagree on the storage version of ${DEVICECLASSES}: ${serverId(0)}=${HASH_V1} (${DISAGREEING.newApiVersion}), ${serverId(1)}=${HASH_V1BETA2} (${DISAGREEING.oldApiVersion})`;
      assert.ok(waiting.message?.includes(expected), `expected "${expected}" in: ${waiting.message}`);
      process.stderr.write(`[ha sv-off] waiting: ${waiting.message}\n`);
      const still = await h.progress();
      assert.equal(still.phase, 'WaitingForAgreement');
      assert.equal(still.counters.chunks, 0);
      // kubectl users see it too
      const svm = await plane.kube.getJson<{ status: { phase: string; message: string } }>(svmPath(still.migrationObjects[0]!));
      assert.equal(svm.status.phase, 'WaitingForAgreement');
      assert.match(svm.status.message, /disagree/);
      await agreeAgainHeld(h);
      await assertNothingRewritten(startedAt, 'written while the servers disagreed (or the pass was held)');
      await h.steer('resume');

      // 2. A rolling upgrade step backwards mid-pass: server 1 encodes v1beta1 again.
      await eventually('a few chunks', async () => (await h.progress()).counters.chunks >= 2);
      await restartInPlace(1, OLD);
      const again = await eventually('back to WaitingForAgreement on the disagreement', async () => {
        const p = await h.progress();
        return p.phase === 'WaitingForAgreement' && /disagree/.test(p.message ?? '') && p;
      });
      assert.ok(again.restarts >= 1, 'the polluted pass must be abandoned');
      assert.equal(again.counters.migrated, 0, 'counters restart with the new pass');
      // From here to the agreement the migration waits: etcd shows nothing rewritten over all of it, while writes
      // through the old server store the old version.
      const waitingFrom = await etcdRevision(plane.etcd);
      await createDisagreeing(plane.kubeOf(1), `${tag}-late`, 30);
      assert.ok(((await disagreeingVersions())[DISAGREEING.oldApiVersion] ?? 0) >= 30);
      await agreeAgainHeld(h);
      await assertNothingRewritten(waitingFrom, 'written while the servers disagreed again (or the pass was held)');
      await h.steer('resume');
      return migrationResult(h);
    });
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.ok(result.restarts >= 1);
    process.stderr.write(`[ha sv-off] result: ${result.message}\n`);
    // Exactly both servers: the pass was held until server 1 was listed again with its new process, so a pass started
    // in the moment of its restart (server 0 alone) is found changed at its verdict and run again.
    assert.ok(
      result.message?.endsWith(
        `${DISAGREEING.newApiVersion} in one whole pass; the API servers agreed from start to end: 2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases) by their discovery`,
      ),
      result.message,
    );
    const total = (await storedVersions(plane.etcd, PREFIX)).total;
    assert.equal(result.counters.migrated + result.counters.conflicts, total, 'the final pass must cover every object');
    assert.deepEqual(Object.keys(await disagreeingVersions()), [DISAGREEING.newApiVersion]);
  });

  void test('an API server removed for good: once its identity lease is gone, it no longer blocks agreement', async () => {
    const tag = uniq('gone');
    await restartApiserver(plane.dir, 1, OLD, quiet);
    await createDisagreeing(plane.kubeOf(1), tag, 50); // v1beta1
    const own = await server1Leases();
    // Killed, not stopped: a graceful shutdown deletes its own identity lease (and endpoint); a vanished server leaves them behind.
    const kill = () => stopApiserver(plane.dir, 1, { kill: true });

    const result = await withWorker(plane, async (m) => {
      // Started while server 1 answers at its own address with v1beta1: the migration waits on the disagreement.
      // Then server 1 vanishes: killed, its identity lease deleted at once, its address left in the EndpointSlice
      // until its endpoint lease expires (5 to 25 s after the kill: a 15 s lease renewed every 10 s, then the next
      // reconcile). The lease's deletion makes the worker ask again at once (and it asks every 2 s anyway): an
      // address that does not answer while another does means wait. CI once started the migration only after the
      // kill, and its first look came after the address had gone (succeeded on 1 of 1, never waiting): the start
      // of a workflow on a busy machine is not bounded, a look while the migration already waits is.
      const h = await m.start(DEVICECLASSES, { agreementPollSeconds: 2 });
      const disagreeing = await eventually('WaitingForAgreement on the disagreement', async () => {
        const p = await h.progress();
        return p.phase === 'WaitingForAgreement' && /disagree/.test(p.message ?? '') && p;
      });
      assert.ok(disagreeing.message?.includes(`${serverId(1)}=`), disagreeing.message);
      await kill();
      await deleteLeases(own);
      const vanished = `waiting for API server(s) ${serverId(1)} (`;
      let waiting: MigrationProgress | undefined;
      let ended = false;
      const watch = (async () => {
        while (!ended && !waiting) {
          const p = await h.progress().catch(() => undefined);
          if (p?.phase === 'WaitingForAgreement' && p.message?.includes(vanished)) waiting = p;
          else await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const r = await migrationResult(h);
      ended = true;
      await watch;
      assert.ok(waiting, `the migration never waited for the vanished server whose address was still listed (it ended: ${r.message})`);
      process.stderr.write(`[ha sv-off] waiting: ${waiting.message}\n`);
      return r;
    });
    assert.equal(result.phase, 'Succeeded', result.message);
    process.stderr.write(`[ha sv-off] result: ${result.message}\n`);
    // Exactly the one server left: server 1 is gone for good (killed, its leases deleted), not out for a moment.
    assert.ok(
      result.message?.endsWith('1 of 1 API server (kubernetes EndpointSlice, 1 identity lease) by their discovery'),
      result.message,
    );
    assert.deepEqual(Object.keys(await disagreeingVersions()), [DISAGREEING.newApiVersion]);
  });

  // Only with the API off: a custom resource's agreement is read from each API server's discovery whether the
  // StorageVersion API is served or not (it does not cover custom resources: src/kube/server-agreements.ts), so with
  // the API on this scenario would prove again what it proves here.
  void test("a CRD's storage version switched while its migration runs: it starts over at the new version", async () => {
    const crd = testCrd(`${uniq('ha')}.svm.test`);
    await applyCrd(plane.kube, crd, 'v1');
    // 300 objects at 30/s: a pass of ~10 s (as 600 at 60/s were), against a CRD update that takes a second.
    await createObjects(plane.kube, crd, 'v1', 300, { namespace: uniq('ns') });
    await applyCrd(plane.kube, crd, 'v2');
    const result = await withWorker(plane, async (m) => {
      const h = await m.start(crd.name, { chunkSize: 50, concurrency: 2, qps: 30, agreementPollSeconds: 2 });
      await eventually('a few chunks', async () => (await h.progress()).counters.chunks >= 2);
      await applyCrd(plane.kube, crd, 'v1'); // storage moves back to v1
      await eventually('a restart', async () => (await h.progress()).restarts >= 1);
      return migrationResult(h);
    });
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.match(
      result.message ?? '',
      / to v1 in one whole pass; the API servers agreed from start to end: (2 of 2 API servers \(kubernetes EndpointSlice, 2 identity leases\) by their discovery)$/,
    );
    assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
      [`${crd.group}/v1`]: 300,
    });
    const c = await plane.kube.getJson<{ status: { storedVersions: string[] } }>(
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
    );
    assert.deepEqual(c.status.storedVersions, ['v1']);
  });
}
