/**
 * Unit tests of src/kube/agreement.ts (do all API servers agree on a
 * resource's storage version, and what may be claimed from what was asked?),
 * src/kube/apiservers.ts (finding each API server as a Pod can) and
 * src/api/storage-version.ts (StorageVersion
 * names and the zod schemas of StorageVersion objects and identity leases).
 * Pure logic on hand-made objects shaped like the real API: no cluster, no
 * network, no clock (every "now" is a fixed number).
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import type * as https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';
import {
  agreementFromEndpoints,
  agreementFromStorageVersion,
  liveIdentities,
  liveProcesses,
  holdsSince,
  tokenChange,
  storageVersionHashOf,
  versionNamer,
  type EndpointAnswers,
  type ServerView,
} from '../src/kube/agreement';
import { acceptAgreement, sameAgreement, type Agreement } from '../src/contract/agreement';
import { endpointAddresses, endpointId, endpointKubeConfig, kubernetesEndpoints } from '../src/kube/apiservers';
import type { KubeClient } from '../src/kube/client';
import { KubeError } from '../src/kube/errors';
import {
  IDENTITY_LABEL,
  IdentityLease,
  StorageVersion,
  groupResourceOfStorageVersion,
  storageVersionName,
} from '../src/api/storage-version';

// --- fixtures ---------------------------------------------------------------------------

/** A fixed "now": 2026-11-22T03:33:13.705Z. */
const NOW = Date.parse('2026-11-22T03:33:13.705Z');
const HOUR = 3600 * 1000;

const A = 'apiserver-5vo2w273fdipykzxxvp5nvl4ou';
const B = 'apiserver-b7kq2mzx4lw6dvnh3rj5ptfyca';
const C = 'apiserver-zzq3c4hp6t7kdl2wmybvxe5rgi';
const GONE = 'apiserver-gone00000000000000000000';

/** An RFC3339 MicroTime like the API server writes (microseconds, Z). */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1832Z');
}

/** An identity lease in kube-system, as listed from the API (then parsed by the schema). */
function lease(name: string, spec: { renewTime?: string; leaseDurationSeconds?: number }): IdentityLease {
  return IdentityLease.parse({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace: 'kube-system',
      uid: '8d1c0c3e-4b0a-4f55-9a0e-7d7e6f1d2a11',
      resourceVersion: '4711',
      creationTimestamp: '2026-11-22T01:00:00Z',
      labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver', 'kubernetes.io/hostname': 'kind-control-plane' },
    },
    spec: { holderIdentity: `${name}_0b5e8c1f-3f44-4a7c-8a3b-4c1b2f9e6d70`, ...spec },
  });
}

/** A lease renewed `agoMs` before NOW, with the default 3600 s duration. */
const fresh = (name: string, agoMs = 10_000) => lease(name, { renewTime: microTime(NOW - agoMs), leaseDurationSeconds: 3600 });

interface Entry {
  apiServerID: string;
  encodingVersion: string;
}

/** A StorageVersion object as the API serves it, parsed by the schema. */
function sv(name: string, resourceVersion: string, entries: Entry[] | undefined): StorageVersion {
  return StorageVersion.parse({
    apiVersion: 'internal.apiserver.k8s.io/v1alpha1',
    kind: 'StorageVersion',
    metadata: {
      name,
      resourceVersion,
      uid: 'f3a2b1c0-0000-4000-8000-000000000001',
      generation: 1,
      creationTimestamp: '2026-11-22T01:00:05Z',
    },
    spec: {},
    status:
      entries === undefined
        ? undefined
        : {
            storageVersions: entries.map((e) => ({
              apiServerID: e.apiServerID,
              encodingVersion: e.encodingVersion,
              decodableVersions: [e.encodingVersion, 'resource.k8s.io/v1beta1', 'resource.k8s.io/v1beta2'],
              servedVersions: [e.encodingVersion, 'resource.k8s.io/v1beta2'],
            })),
            commonEncodingVersion: entries[0]?.encodingVersion,
            conditions: [
              {
                type: 'AllEncodingVersionsEqual',
                status: 'True',
                lastTransitionTime: '2026-11-22T01:00:05Z',
                reason: 'CommonEncodingVersionSet',
                message: 'Common encoding version set',
                observedGeneration: 1,
              },
            ],
          },
  });
}

const DC = 'resource.k8s.io.deviceclasses';
const V1 = 'resource.k8s.io/v1';
const V1B2 = 'resource.k8s.io/v1beta2';

const live = (...ids: string[]) => new Set(ids);

// --- liveIdentities ---------------------------------------------------------------------

void test('liveIdentities: a freshly renewed lease is live, an expired one is not', () => {
  const ids = liveIdentities([fresh(A), lease(B, { renewTime: microTime(NOW - 2 * HOUR), leaseDurationSeconds: 3600 })], NOW);
  assert.deepEqual([...ids], [A]);
});

void test('liveIdentities: renewed almost a full duration ago is still live', () => {
  assert.deepEqual([...liveIdentities([lease(A, { renewTime: microTime(NOW - HOUR + 1), leaseDurationSeconds: 3600 })], NOW)], [A]);
});

void test('liveIdentities: boundary: renew + duration == now is not live, one ms before is', () => {
  const renew = NOW - HOUR;
  const l = lease(A, { renewTime: new Date(renew).toISOString(), leaseDurationSeconds: 3600 });
  assert.equal(liveIdentities([l], renew + HOUR).size, 0, 'renew + duration == now');
  assert.deepEqual([...liveIdentities([l], renew + HOUR - 1)], [A], 'renew + duration == now + 1ms');
  assert.equal(liveIdentities([l], renew + HOUR + 1).size, 0, 'renew + duration == now - 1ms');
});

void test('liveIdentities: a lease without renewTime is not live', () => {
  assert.equal(liveIdentities([lease(A, { leaseDurationSeconds: 3600 })], NOW).size, 0);
});

void test('liveIdentities: a lease with an unparseable renewTime is not live', () => {
  assert.equal(liveIdentities([lease(A, { renewTime: 'not-a-time', leaseDurationSeconds: 3600 })], NOW).size, 0);
  assert.equal(liveIdentities([lease(A, { renewTime: '', leaseDurationSeconds: 3600 })], NOW).size, 0);
});

void test('liveIdentities: a lease without leaseDurationSeconds renewed in the past is not live', () => {
  assert.equal(liveIdentities([lease(A, { renewTime: microTime(NOW - 1000) })], NOW).size, 0);
  assert.equal(liveIdentities([lease(A, { renewTime: new Date(NOW).toISOString() })], NOW).size, 0);
});

void test('liveIdentities: a lease without leaseDurationSeconds is expired even if renewTime is ahead of our clock (as kube-apiserver isLeaseExpired)', () => {
  // kube-apiserver (apiserverleasegc, peer proxy) treats RenewTime == nil ||
  // LeaseDurationSeconds == nil as expired. A renewTime a few seconds ahead of
  // the migrator's clock (ordinary clock skew) must not make such a lease live.
  const ids = liveIdentities([lease(A, { renewTime: microTime(NOW + 5000) })], NOW);
  assert.equal(ids.size, 0, `a lease with no leaseDurationSeconds counted as live: ${[...ids].join(', ')}`);
});

void test('liveIdentities: a lease with leaseDurationSeconds 0 renewed in the past is not live', () => {
  assert.equal(liveIdentities([lease(A, { renewTime: microTime(NOW - 1), leaseDurationSeconds: 0 })], NOW).size, 0);
});

void test('liveIdentities: RFC3339 with microseconds and with a numeric offset are both understood', () => {
  const now = Date.parse('2026-11-22T03:33:13.705Z');
  const micro = lease(A, { renewTime: '2026-11-22T03:33:13.705832Z', leaseDurationSeconds: 3600 });
  const offset = lease(B, { renewTime: '2026-11-22T05:33:13.705832+02:00', leaseDurationSeconds: 3600 });
  assert.deepEqual([...liveIdentities([micro, offset], now)].sort(), [A, B].sort());
  // one hour later (to the millisecond) both have expired
  assert.equal(liveIdentities([micro, offset], now + HOUR).size, 0);
  assert.equal(liveIdentities([micro, offset], now + HOUR - 1).size, 2);
});

void test('liveIdentities: the set holds lease names; mixed fresh, expired, missing fields', () => {
  const leases = [
    fresh(A),
    lease(GONE, { renewTime: microTime(NOW - 3 * HOUR), leaseDurationSeconds: 3600 }),
    fresh(B, HOUR - 60_000),
    lease('apiserver-norenew000000000000000000', { leaseDurationSeconds: 3600 }),
    lease('apiserver-noduration0000000000000000', { renewTime: microTime(NOW - 1000) }),
  ];
  assert.deepEqual([...liveIdentities(leases, NOW)].sort(), [A, B].sort());
  assert.deepEqual([...liveIdentities([...leases].reverse(), NOW)].sort(), [A, B].sort());
});

void test('liveIdentities: no leases → empty set', () => {
  assert.equal(liveIdentities([], NOW).size, 0);
});

// --- agreementFromStorageVersion ---------------------------------------------------------

void test('StorageVersion: all live servers on one version → agreed, encodingVersion, no reason', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '100', [
      { apiServerID: A, encodingVersion: V1 },
      { apiServerID: B, encodingVersion: V1 },
      { apiServerID: C, encodingVersion: V1 },
    ]),
    live(A, B, C),
  );
  assert.equal(a.agreed, true);
  assert.equal(a.encodingVersion, V1);
  assert.equal(a.reason, undefined);
  assert.equal(a.source, 'StorageVersion');
  assert.deepEqual(
    a.servers,
    [A, B, C].sort().map((id) => ({ id, value: V1 })),
  );
});

void test('StorageVersion: a single live server → agreed on its version', () => {
  const a = agreementFromStorageVersion(sv('core.configmaps', '7', [{ apiServerID: A, encodingVersion: 'v1' }]), live(A));
  assert.equal(a.agreed, true);
  assert.equal(a.encodingVersion, 'v1');
  assert.equal(a.reason, undefined);
});

void test('StorageVersion: two live servers disagree → not agreed, reason names both servers and both versions', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '101', [
      { apiServerID: A, encodingVersion: V1B2 },
      { apiServerID: B, encodingVersion: V1 },
    ]),
    live(A, B),
  );
  assert.equal(a.agreed, false);
  assert.equal(a.encodingVersion, undefined);
  assert.ok(a.reason);
  assert.match(a.reason, /disagree/);
  assert.ok(a.reason.includes(A), a.reason);
  assert.ok(a.reason.includes(B), a.reason);
  assert.ok(a.reason.includes(V1B2), a.reason);
  assert.ok(a.reason.includes(`${B}=${V1}`), a.reason);
  assert.ok(a.reason.includes(`${A}=${V1B2}`), a.reason);
  assert.ok(a.reason.includes(DC), a.reason);
  assert.deepEqual(a.servers, [
    { id: A, value: V1B2 },
    { id: B, value: V1 },
  ]);
});

void test('StorageVersion: three live servers, one behind → not agreed, the odd one is named', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '102', [
      { apiServerID: A, encodingVersion: V1 },
      { apiServerID: B, encodingVersion: V1 },
      { apiServerID: C, encodingVersion: V1B2 },
    ]),
    live(A, B, C),
  );
  assert.equal(a.agreed, false);
  assert.ok(a.reason?.includes(`${C}=${V1B2}`), a.reason);
});

void test('StorageVersion: a live server without an entry → not agreed, reason names it', () => {
  const a = agreementFromStorageVersion(sv(DC, '103', [{ apiServerID: A, encodingVersion: V1 }]), live(A, B));
  assert.equal(a.agreed, false);
  assert.equal(a.encodingVersion, undefined);
  assert.ok(a.reason);
  assert.ok(a.reason.includes(B), a.reason);
  assert.ok(!a.reason.includes(A), `only the missing server is named: ${a.reason}`);
  assert.match(a.reason, /not published/);
  assert.deepEqual(a.servers, [
    { id: A, value: V1 },
    { id: B, value: undefined },
  ]);
});

void test('StorageVersion: no status at all (fresh object) with live servers → not agreed, all named', () => {
  const a = agreementFromStorageVersion(sv(DC, '1', undefined), live(A, B));
  assert.equal(a.agreed, false);
  assert.ok(a.reason?.includes(A) && a.reason.includes(B), a.reason);
  const empty = agreementFromStorageVersion(sv(DC, '1', []), live(A));
  assert.equal(empty.agreed, false);
  assert.ok(empty.reason?.includes(A), empty.reason);
});

void test('StorageVersion: a stale entry that disagrees is ignored: still agreed, reason mentions it', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '104', [
      { apiServerID: A, encodingVersion: V1 },
      { apiServerID: GONE, encodingVersion: V1B2 },
      { apiServerID: B, encodingVersion: V1 },
    ]),
    live(A, B),
  );
  assert.equal(a.agreed, true);
  assert.equal(a.encodingVersion, V1);
  assert.ok(a.reason, 'the stale entry is mentioned');
  assert.ok(a.reason.includes(GONE), a.reason);
  assert.match(a.reason, /stale/);
  assert.deepEqual(
    a.servers.map((s) => s.id),
    [A, B],
    'stale servers are not listed as servers',
  );
});

void test('StorageVersion: a stale entry does not fake agreement: live server missing + stale entry present → not agreed', () => {
  // The live server A has not published yet; the old server GONE (whose lease
  // expired) left an entry. That entry must not stand in for A.
  const a = agreementFromStorageVersion(sv(DC, '105', [{ apiServerID: GONE, encodingVersion: V1 }]), live(A));
  assert.equal(a.agreed, false);
  assert.equal(a.encodingVersion, undefined);
  assert.ok(a.reason);
  assert.ok(a.reason.includes(A), a.reason);
  assert.ok(a.reason.includes(GONE), `the stale entry is mentioned: ${a.reason}`);
  assert.deepEqual(a.servers, [{ id: A, value: undefined }]);
});

void test('StorageVersion: a stale entry agreeing with one live server does not outvote a disagreeing live server', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '106', [
      { apiServerID: A, encodingVersion: V1 },
      { apiServerID: B, encodingVersion: V1B2 },
      { apiServerID: GONE, encodingVersion: V1 },
    ]),
    live(A, B),
  );
  assert.equal(a.agreed, false);
  assert.ok(a.reason?.includes(`${B}=${V1B2}`), a.reason);
});

void test('StorageVersion: no live leases at all → not agreed, even with entries', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '107', [
      { apiServerID: A, encodingVersion: V1 },
      { apiServerID: B, encodingVersion: V1 },
    ]),
    live(),
  );
  assert.equal(a.agreed, false);
  assert.equal(a.encodingVersion, undefined);
  assert.match(a.reason ?? '', /no live/);
  assert.deepEqual(a.servers, []);
  const none = agreementFromStorageVersion(sv(DC, '107', undefined), live());
  assert.equal(none.agreed, false);
});

void test('StorageVersion: duplicate entries of one live server with different versions → not agreed', () => {
  const a = agreementFromStorageVersion(
    sv(DC, '108', [
      { apiServerID: A, encodingVersion: V1 },
      { apiServerID: A, encodingVersion: V1B2 },
    ]),
    live(A),
  );
  assert.equal(a.agreed, false);
});

void test('StorageVersion: works through liveIdentities from real-looking leases', () => {
  const leases = [fresh(A), fresh(B), lease(GONE, { renewTime: microTime(NOW - 2 * HOUR), leaseDurationSeconds: 3600 })];
  const object = sv(DC, '109', [
    { apiServerID: A, encodingVersion: V1 },
    { apiServerID: B, encodingVersion: V1 },
    { apiServerID: GONE, encodingVersion: V1B2 },
  ]);
  const a = agreementFromStorageVersion(object, liveIdentities(leases, NOW));
  assert.equal(a.agreed, true);
  assert.equal(a.encodingVersion, V1);
  assert.ok(a.reason?.includes(GONE));
  // an hour later, A's and B's leases have expired too (no renewal): nothing is live
  assert.equal(agreementFromStorageVersion(object, liveIdentities(leases, NOW + HOUR)).agreed, false);
});

// --- the StorageVersion token ----------------------------------------------------------

const entriesAB: Entry[] = [
  { apiServerID: A, encodingVersion: V1 },
  { apiServerID: B, encodingVersion: V1 },
];

void test('StorageVersion token: changes when the resourceVersion changes', () => {
  const t1 = agreementFromStorageVersion(sv(DC, '200', entriesAB), live(A, B)).token;
  const t2 = agreementFromStorageVersion(sv(DC, '201', entriesAB), live(A, B)).token;
  assert.notEqual(t1, t2);
});

void test('StorageVersion token: changes when the set of live identities changes', () => {
  const object = sv(DC, '200', [...entriesAB, { apiServerID: C, encodingVersion: V1 }]);
  const tokens = [live(A, B), live(A, B, C), live(A), live(B), live(C), live()].map((l) => agreementFromStorageVersion(object, l).token);
  assert.equal(new Set(tokens).size, tokens.length, `distinct tokens: ${tokens.join(' | ')}`);
});

void test('StorageVersion token: a lease expiring (same object) changes the token', () => {
  const object = sv(DC, '200', entriesAB);
  const leases = [fresh(A), fresh(B, HOUR - 1000)];
  const before = agreementFromStorageVersion(object, liveIdentities(leases, NOW));
  const after = agreementFromStorageVersion(object, liveIdentities(leases, NOW + 1000));
  assert.notEqual(before.token, after.token);
});

void test('StorageVersion token: same inputs → same token regardless of entry or lease order', () => {
  const leases = [fresh(A), fresh(B), fresh(C)];
  const e = [...entriesAB, { apiServerID: C, encodingVersion: V1 }];
  const x = agreementFromStorageVersion(sv(DC, '300', e), liveIdentities(leases, NOW));
  const y = agreementFromStorageVersion(sv(DC, '300', [...e].reverse()), liveIdentities([...leases].reverse(), NOW));
  const z = agreementFromStorageVersion(sv(DC, '300', [e[1]!, e[2]!, e[0]!]), live(C, A, B));
  assert.equal(x.token, y.token);
  assert.equal(x.token, z.token);
  assert.deepEqual(x, y);
  assert.deepEqual(x, z);
  // and calling twice gives the same answer
  assert.deepEqual(agreementFromStorageVersion(sv(DC, '300', e), live(A, B, C)), x);
});

void test('StorageVersion token: does not depend on a stale lease that was never live', () => {
  const object = sv(DC, '200', entriesAB);
  const x = agreementFromStorageVersion(object, liveIdentities([fresh(A), fresh(B)], NOW));
  const y = agreementFromStorageVersion(
    object,
    liveIdentities([fresh(A), fresh(B), lease(GONE, { renewTime: microTime(NOW - 5 * HOUR), leaseDurationSeconds: 3600 })], NOW),
  );
  assert.equal(x.token, y.token);
});

// --- agreementFromEndpoints: each API server's own discovery, at its own address -------

const H1 = 'Yk2PTc1Ybxk='; // resource.k8s.io/v1 DeviceClass
const H2 = 'weQRMT6DeYM='; // resource.k8s.io/v1beta2 DeviceClass
const E1 = '198.18.1.10:6443';
const E2 = '198.18.1.11:6443';
const E3 = '198.18.1.12:6443';
const VIA = 'https://127.0.0.1:36443';
const RES = 'deviceclasses.resource.k8s.io';
const name = versionNamer('resource.k8s.io', 'DeviceClass', ['v1', 'v1beta2']);
const ep = (id: string, value?: string, error?: string): ServerView => ({
  id,
  ...(value !== undefined ? { value } : {}),
  ...(error !== undefined ? { error } : {}),
});
const answers = (over: Partial<EndpointAnswers>): EndpointAnswers => ({
  resource: RES,
  endpoints: [ep(E1, H1), ep(E2, H1)],
  identities: [A, B],
  via: ep(VIA, H1),
  versionOf: name,
  ...over,
});

void test('storageVersionHashOf: the hashes kube-apiserver serves (ConfigMap v1, DeviceClass v1 and v1beta2)', () => {
  assert.equal(storageVersionHashOf('', 'v1', 'ConfigMap'), 'qFsyl6wFWjQ=');
  assert.equal(storageVersionHashOf('resource.k8s.io', 'v1', 'DeviceClass'), H1);
  assert.equal(storageVersionHashOf('resource.k8s.io', 'v1beta2', 'DeviceClass'), H2);
  assert.equal(name(H1), 'resource.k8s.io/v1');
  assert.equal(name('nope'), undefined);
  assert.equal(versionNamer('', 'ConfigMap', ['v1'])('qFsyl6wFWjQ='), 'v1', 'the core group names the bare version');
});

void test('endpoints: every address answered, all agree, addresses = identity leases → agreed AND verified, readable version, says 2 of 2', () => {
  const a = agreementFromEndpoints(answers({}));
  assert.equal(a.agreed, true);
  assert.equal(a.verified, true);
  assert.equal(a.encodingVersion, 'resource.k8s.io/v1');
  assert.equal(a.hash, H1);
  assert.equal(a.source, 'discovery');
  assert.equal(a.checked, '2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases) by their discovery');
  assert.equal(a.reason, undefined);
  assert.deepEqual(
    a.servers.map((s) => s.id),
    [E1, E2],
  );
});

void test('endpoints: more addresses than identity leases still verifies (every lease has someone answering)', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [ep(E1, H1), ep(E2, H1), ep(E3, H1)] }));
  assert.equal(a.verified, true);
  assert.match(a.checked, /^3 of 3 API servers \(kubernetes EndpointSlice, 2 identity leases\)/);
});

void test('endpoints: a server answering another hash → not agreed, naming its address, hash and version', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [ep(E1, H1), ep(E2, H2)] }));
  assert.equal(a.agreed, false);
  assert.equal(a.encodingVersion, undefined);
  assert.equal(
    a.reason,
    `API servers disagree on the storage version of ${RES}: ${E1}=${H1} (resource.k8s.io/v1), ${E2}=${H2} (resource.k8s.io/v1beta2)`,
  );
});

void test('endpoints: a disagreement is reported even when other servers did not answer', () => {
  const a = agreementFromEndpoints(
    answers({ endpoints: [ep(E1, H1), ep(E2, H2), ep(E3, undefined, 'connect ECONNREFUSED')], identities: [A, B, C] }),
  );
  assert.equal(a.agreed, false);
  assert.match(a.reason ?? '', /disagree/);
  assert.ok(a.reason?.includes(`${E2}=${H2}`), a.reason);
});

void test('endpoints: a server that answers without serving the resource disagrees', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [ep(E1, H1), ep(E2)] }));
  assert.equal(a.agreed, false);
  assert.ok(a.reason?.includes(`${E2} does not serve it`), a.reason);
});

void test('endpoints: our own address reaching a server that disagrees with every listed one → not agreed, naming it', () => {
  const a = agreementFromEndpoints(answers({ via: ep(VIA, H2) }));
  assert.equal(a.agreed, false);
  assert.ok(a.reason?.includes(`through ${VIA}=${H2} (resource.k8s.io/v1beta2)`), a.reason);
});

void test('endpoints: some addresses did not answer while others did → not agreed (wait), naming the silent ones and why', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [ep(E1, H1), ep(E2, undefined, 'request timed out after 5000ms')] }));
  assert.equal(a.agreed, false);
  assert.equal(a.verified, false);
  assert.ok(a.reason?.startsWith(`waiting for API server(s) ${E2} (request timed out after 5000ms)`), a.reason);
  assert.ok(a.reason?.includes(`${E1} answered ${H1}`), a.reason);
});

void test('endpoints: one virtual IP for three identity leases (a managed cluster) → agreed on what was checked, NOT verified, and says so', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [ep('10.0.0.1:443', H1)], identities: [A, B, C] }));
  assert.equal(a.agreed, true);
  assert.equal(a.verified, false);
  assert.equal(a.encodingVersion, 'resource.k8s.io/v1');
  assert.equal(
    a.checked,
    `could not verify per server: 1 of 1 address answered, 3 identity leases; relied on discovery through ${VIA} at start and end`,
  );
});

void test('endpoints: no address reachable at all → agreed through our own address only, NOT verified, naming why', () => {
  const a = agreementFromEndpoints(
    answers({ endpoints: [ep(E1, undefined, 'connect EHOSTUNREACH'), ep(E2, undefined, 'connect EHOSTUNREACH')] }),
  );
  assert.equal(a.agreed, true);
  assert.equal(a.verified, false);
  assert.equal(
    a.checked,
    `could not verify per server: 0 of 2 addresses answered (${E1}: connect EHOSTUNREACH; ${E2}: connect EHOSTUNREACH), 2 identity leases; relied on discovery through ${VIA} at start and end`,
  );
});

void test('endpoints: no EndpointSlice readable (forbidden) → not verified, the note is in what was checked', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [], endpointsNote: 'could not list the kubernetes EndpointSlice: forbidden' }));
  assert.equal(a.agreed, true);
  assert.equal(a.verified, false);
  assert.match(a.checked, /0 of 0 addresses answered \(could not list the kubernetes EndpointSlice: forbidden\)/);
});

void test('endpoints: identity leases unknown or none → never verified', () => {
  for (const identities of [undefined, []]) {
    const a = agreementFromEndpoints(answers({ identities }));
    assert.equal(a.agreed, true);
    assert.equal(a.verified, false, JSON.stringify(identities));
    assert.match(a.checked, /^could not verify per server/);
  }
});

void test('endpoints: nobody serves a hash for the resource → not agreed', () => {
  const a = agreementFromEndpoints(answers({ endpoints: [ep(E1), ep(E2)], via: ep(VIA) }));
  assert.equal(a.agreed, false);
  assert.match(a.reason ?? '', /not served with a storageVersionHash/);
});

void test('endpoints: a CRD agrees on its storage version, not on the hash', () => {
  const a = agreementFromEndpoints(
    answers({ resource: 'widgets.svm.test', versionOf: undefined, crd: { storageVersion: 'v2', generation: 3 } }),
  );
  assert.equal(a.agreed, true);
  assert.equal(a.encodingVersion, 'v2');
  assert.equal(a.hash, H1);
});

void test('endpoints token: a CRD storage version switched away and back (generation moved) changes the token', () => {
  const before = agreementFromEndpoints(answers({ crd: { storageVersion: 'v1', generation: 1 } })).token;
  const away = agreementFromEndpoints(answers({ crd: { storageVersion: 'v2', generation: 2 } })).token;
  const back = agreementFromEndpoints(answers({ crd: { storageVersion: 'v1', generation: 3 } })).token;
  assert.equal(new Set([before, away, back]).size, 3);
  assert.equal(agreementFromEndpoints(answers({ crd: { storageVersion: 'v1', generation: 1 } })).token, before, 'same inputs, same token');
});

void test('endpoints token: changes when a hash, an address, an identity lease, an answer or our own view changes', () => {
  const base = agreementFromEndpoints(answers({})).token;
  const variants: Array<Partial<EndpointAnswers>> = [
    { endpoints: [ep(E1, H2), ep(E2, H2)], via: ep(VIA, H2) },
    { endpoints: [ep(E1, H1)] },
    { endpoints: [ep(E1, H1), ep(E3, H1)] },
    { identities: [A] },
    { identities: [A, C] },
    { identities: undefined },
    { endpoints: [ep(E1, H1), ep(E2, undefined, 'timeout')] },
    { via: ep(VIA, H2) },
  ];
  const tokens = variants.map((v) => agreementFromEndpoints(answers(v)).token);
  for (const [i, t] of tokens.entries()) assert.notEqual(t, base, JSON.stringify(variants[i]));
  assert.equal(new Set(tokens).size, tokens.length, tokens.join(' | '));
});

void test('endpoints token: same in any order; the caller array is not reordered', () => {
  const eps = [ep(E3, H1), ep(E1, H1), ep(E2, H1)];
  const copy = structuredClone(eps);
  const x = agreementFromEndpoints(answers({ endpoints: eps, identities: [C, A, B] }));
  const y = agreementFromEndpoints(answers({ endpoints: [...eps].reverse(), identities: [A, B, C] }));
  assert.deepEqual(eps, copy);
  assert.equal(x.token, y.token);
  assert.deepEqual(x, y);
});

void test('discovery and StorageVersion tokens never collide; StorageVersion says what it checked and is verified', () => {
  const d = agreementFromEndpoints(answers({ endpoints: [ep(A, V1)], identities: [A], via: ep(VIA, V1) }));
  const s = agreementFromStorageVersion(sv(DC, '1', [{ apiServerID: A, encodingVersion: V1 }]), live(A));
  assert.notEqual(d.token, s.token);
  assert.equal(s.verified, true);
  assert.equal(s.checked, 'the StorageVersion API: 1 live API server');
  assert.equal(agreementFromStorageVersion(sv(DC, '1', []), live(A, B, C)).checked, 'the StorageVersion API: 3 live API servers');
  assert.equal(agreementFromStorageVersion(sv(DC, '1', []), live()).verified, false);
});

// --- apiservers.ts: the kubernetes EndpointSlice and per-address clients ---------------

const slice = (
  addressType: string,
  endpoints: Array<{ addresses: string[]; conditions?: { ready?: boolean | null; terminating?: boolean } }>,
  port = 6443,
) => ({
  metadata: { name: 'kubernetes' },
  addressType,
  endpoints,
  ports: [{ name: 'https', port, protocol: 'TCP' }],
});

void test('endpointAddresses: ready addresses and the https port; nil ready means ready; not-ready and terminating skipped', () => {
  const got = endpointAddresses([
    slice('IPv4', [
      { addresses: ['198.18.1.11'], conditions: { ready: true } },
      { addresses: ['198.18.1.10'] },
      { addresses: ['198.18.1.12'], conditions: { ready: null } },
      { addresses: ['198.18.1.13'], conditions: { ready: false } },
      { addresses: ['198.18.1.14'], conditions: { ready: true, terminating: true } },
    ]),
  ]);
  assert.deepEqual(
    got,
    ['198.18.1.10', '198.18.1.11', '198.18.1.12'].map((address) => ({ address, port: 6443 })),
  );
});

void test('endpointAddresses: dual stack counts each server once (IPv4 preferred); IPv6 alone works; duplicates and FQDN ignored; no port → none', () => {
  const v4 = slice('IPv4', [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'] }]);
  const v6 = slice('IPv6', [{ addresses: ['fd00::1'] }, { addresses: ['fd00::2'] }]);
  assert.equal(endpointAddresses([v6, v4]).length, 2);
  assert.deepEqual(
    endpointAddresses([v6, v4]).map((a) => a.address),
    ['10.0.0.1', '10.0.0.2'],
  );
  assert.deepEqual(
    endpointAddresses([v6]).map((a) => endpointId(a.address, a.port)),
    ['[fd00::1]:6443', '[fd00::2]:6443'],
  );
  assert.equal(endpointAddresses([slice('IPv4', [{ addresses: ['10.0.0.1'] }]), slice('IPv4', [{ addresses: ['10.0.0.1'] }])]).length, 1);
  assert.equal(endpointAddresses([slice('FQDN', [{ addresses: ['a.example'] }])]).length, 0);
  assert.equal(endpointAddresses([{ addressType: 'IPv4', endpoints: [{ addresses: ['10.0.0.1'] }], ports: [] }]).length, 0);
  assert.equal(endpointAddresses([]).length, 0);
});

void test('endpointKubeConfig: same user, the CA, server = the address, TLS name kubernetes.default.svc, verification never skipped', async () => {
  const base = new KubeConfig();
  base.loadFromOptions({
    clusters: [
      {
        name: 'lb',
        server: 'https://127.0.0.1:36443',
        caData: Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64'),
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'svm', token: 'secret-token' }],
    contexts: [{ name: 'ctx', cluster: 'lb', user: 'svm' }],
    currentContext: 'ctx',
  });
  const kc = endpointKubeConfig(base, '198.18.1.11', 6443);
  const c = kc.getCurrentCluster()!;
  assert.equal(c.server, 'https://198.18.1.11:6443');
  assert.equal(c.tlsServerName, 'kubernetes.default.svc');
  assert.equal(c.skipTLSVerify, false, 'the base skipped verification; an endpoint never does');
  assert.equal(c.caData, base.getCurrentCluster()!.caData);
  assert.equal(kc.getCurrentUser()!.token, 'secret-token');
  // What client-node hands to https.request: the servername and the CA, and no rejectUnauthorized=false.
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  assert.equal(opts.servername, 'kubernetes.default.svc');
  assert.ok(opts.ca, 'the CA is passed');
  assert.notEqual(opts.rejectUnauthorized, false);
  assert.equal((opts.headers as Record<string, string>).Authorization, 'Bearer secret-token');
  assert.equal(endpointKubeConfig(base, 'fd00::1', 6443).getCurrentCluster()!.server, 'https://[fd00::1]:6443');
});

void test('kubernetesEndpoints: one cached client per listed address, closed when its address leaves; live identity leases only; a forbidden list is a note', async () => {
  const base = new KubeConfig();
  base.loadFromOptions({
    clusters: [{ name: 'lb', server: 'https://127.0.0.1:36443', skipTLSVerify: false }],
    users: [{ name: 'svm', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'lb', user: 'svm' }],
    currentContext: 'ctx',
  });
  let addresses = ['198.18.1.10', '198.18.1.11'];
  let forbidden = false;
  const asked: string[] = [];
  const via = {
    kubeConfig: base,
    server: 'https://127.0.0.1:36443',
    request: (method: string, path: string, opts?: { query?: Record<string, string> }) => {
      asked.push(`${path}?${new URLSearchParams(opts?.query).toString()}`);
      const ok = (body: unknown) => Promise.resolve({ status: 200, headers: {}, body: JSON.stringify(body) });
      if (path.includes('endpointslices')) {
        if (forbidden) return Promise.reject(new KubeError('forbidden', 'endpointslices is forbidden', 403));
        return ok({
          items: [
            slice(
              'IPv4',
              addresses.map((a) => ({ addresses: [a] })),
            ),
          ],
        });
      }
      return ok({
        items: [fresh(A), fresh(B), lease(GONE, { renewTime: microTime(NOW - 2 * HOUR), leaseDurationSeconds: 3600 })],
      });
    },
  } as unknown as KubeClient;
  const source = kubernetesEndpoints(via, { now: () => NOW });
  const first = await source.find();
  assert.deepEqual(
    first.endpoints.map((e) => e.id),
    ['198.18.1.10:6443', '198.18.1.11:6443'],
  );
  assert.deepEqual(first.identities, [A, B].sort(), 'the expired lease is not a live server');
  assert.equal(first.endpoints[0]!.kube.server, 'https://198.18.1.10:6443');
  assert.ok(
    asked.includes('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes'),
    asked.join(' '),
  );
  assert.ok(
    asked.includes(
      '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver',
    ),
    asked.join(' '),
  );
  const second = await source.find();
  assert.equal(second.endpoints[0]!.kube, first.endpoints[0]!.kube, 'cached per address');
  addresses = ['198.18.1.10'];
  const third = await source.find();
  assert.deepEqual(
    third.endpoints.map((e) => e.id),
    ['198.18.1.10:6443'],
  );
  assert.equal(third.endpoints[0]!.kube, first.endpoints[0]!.kube);
  forbidden = true;
  const fourth = await source.find();
  assert.deepEqual(fourth.endpoints, []);
  assert.equal(fourth.endpointsNote, 'could not list the kubernetes EndpointSlice: forbidden');
  source.close();
});

// --- storage-version.ts: names ----------------------------------------------------------

void test('storageVersionName: <group>.<resource>, core.<resource> for the core group', () => {
  assert.equal(storageVersionName({ group: '', resource: 'configmaps' }), 'core.configmaps');
  assert.equal(storageVersionName({ group: '', resource: 'secrets' }), 'core.secrets');
  assert.equal(storageVersionName({ group: 'apps', resource: 'deployments' }), 'apps.deployments');
  assert.equal(storageVersionName({ group: 'resource.k8s.io', resource: 'deviceclasses' }), 'resource.k8s.io.deviceclasses');
  assert.equal(
    storageVersionName({ group: 'admissionregistration.k8s.io', resource: 'validatingadmissionpolicies' }),
    'admissionregistration.k8s.io.validatingadmissionpolicies',
  );
});

void test('storageVersionName: ignores other fields of the reference', () => {
  const ref = { group: 'apps', resource: 'deployments', version: 'v1', name: 'deployments' };
  assert.equal(storageVersionName(ref), 'apps.deployments');
});

void test('groupResourceOfStorageVersion: parses real names', () => {
  assert.deepEqual(groupResourceOfStorageVersion('core.configmaps'), { group: '', resource: 'configmaps' });
  assert.deepEqual(groupResourceOfStorageVersion('apps.deployments'), { group: 'apps', resource: 'deployments' });
  assert.deepEqual(groupResourceOfStorageVersion('resource.k8s.io.deviceclasses'), { group: 'resource.k8s.io', resource: 'deviceclasses' });
  assert.deepEqual(groupResourceOfStorageVersion('flowcontrol.apiserver.k8s.io.prioritylevelconfigurations'), {
    group: 'flowcontrol.apiserver.k8s.io',
    resource: 'prioritylevelconfigurations',
  });
});

void test('groupResourceOfStorageVersion is the inverse of storageVersionName (core and dotted groups)', () => {
  const refs = [
    { group: '', resource: 'configmaps' },
    { group: '', resource: 'secrets' },
    { group: '', resource: 'namespaces' },
    { group: 'apps', resource: 'deployments' },
    { group: 'batch', resource: 'cronjobs' },
    { group: 'resource.k8s.io', resource: 'deviceclasses' },
    { group: 'resource.k8s.io', resource: 'resourceclaims' },
    { group: 'networking.k8s.io', resource: 'ingresses' },
    { group: 'storage.k8s.io', resource: 'volumeattributesclasses' },
    { group: 'internal.apiserver.k8s.io', resource: 'storageversions' },
    { group: 'core.example.com', resource: 'widgets' },
  ];
  for (const ref of refs) {
    const name = storageVersionName(ref);
    assert.deepEqual(groupResourceOfStorageVersion(name), ref, name);
    assert.equal(storageVersionName(groupResourceOfStorageVersion(name)), name, name);
  }
});

void test('groupResourceOfStorageVersion: a name without a dot does not yield a truncated group', () => {
  // Not a valid StorageVersion name; whatever comes back (or is thrown), the
  // group must not be the name with its last character cut off.
  const name = 'configmaps';
  let result: { group: string; resource: string } | undefined;
  try {
    result = groupResourceOfStorageVersion(name);
  } catch {
    return; // refusing is fine
  }
  assert.ok(result.group === '' || name.startsWith(`${result.group}.`), `"${name}" → ${JSON.stringify(result)}`);
});

// --- storage-version.ts: schemas --------------------------------------------------------

void test('StorageVersion schema: parses a real-looking object and keeps the fields we read', () => {
  const raw = {
    apiVersion: 'internal.apiserver.k8s.io/v1alpha1',
    kind: 'StorageVersion',
    metadata: {
      name: 'resource.k8s.io.deviceclasses',
      uid: '2c8f4a1e-77b0-4d0f-9a51-0e1f6a1b9c3d',
      resourceVersion: '52341',
      generation: 1,
      creationTimestamp: '2026-11-22T01:00:05Z',
      managedFields: [
        { manager: 'kube-apiserver', operation: 'Update', apiVersion: 'internal.apiserver.k8s.io/v1alpha1', subresource: 'status' },
      ],
    },
    spec: {},
    status: {
      storageVersions: [
        {
          apiServerID: A,
          encodingVersion: V1,
          decodableVersions: [V1, 'resource.k8s.io/v1beta1', V1B2],
          servedVersions: [V1, 'resource.k8s.io/v1beta1', V1B2],
        },
        {
          apiServerID: B,
          encodingVersion: V1B2,
          decodableVersions: ['resource.k8s.io/v1beta1', V1B2],
          servedVersions: ['resource.k8s.io/v1beta1', V1B2],
        },
      ],
      conditions: [
        {
          type: 'AllEncodingVersionsEqual',
          status: 'False',
          lastTransitionTime: '2026-11-22T03:30:00Z',
          reason: 'CommonEncodingVersionUnset',
          message: 'Common encoding version unset',
          observedGeneration: 1,
        },
      ],
    },
  };
  const parsed = StorageVersion.parse(raw);
  assert.equal(parsed.metadata.name, 'resource.k8s.io.deviceclasses');
  assert.equal(parsed.metadata.resourceVersion, '52341');
  assert.equal((parsed.metadata as Record<string, unknown>)['uid'], raw.metadata.uid, 'metadata is loose');
  assert.equal(parsed.status?.storageVersions?.length, 2);
  assert.deepEqual(parsed.status.storageVersions[0], raw.status.storageVersions[0]);
  assert.deepEqual(parsed.status.storageVersions[1]?.servedVersions, ['resource.k8s.io/v1beta1', V1B2]);
  assert.equal(parsed.status.commonEncodingVersion, undefined);
  assert.equal(parsed.status.conditions?.[0]?.type, 'AllEncodingVersionsEqual');
  assert.equal(parsed.status.conditions[0]?.status, 'False');
  assert.equal((parsed.status.conditions[0] as Record<string, unknown>)['reason'], 'CommonEncodingVersionUnset', 'conditions are loose');
  // and it feeds agreementFromStorageVersion directly
  const a = agreementFromStorageVersion(parsed, live(A, B));
  assert.equal(a.agreed, false);
});

void test('StorageVersion schema: commonEncodingVersion is read when present', () => {
  const parsed = StorageVersion.parse({
    metadata: { name: 'core.configmaps', resourceVersion: '9' },
    status: {
      storageVersions: [{ apiServerID: A, encodingVersion: 'v1', decodableVersions: ['v1'], servedVersions: ['v1'] }],
      commonEncodingVersion: 'v1',
    },
  });
  assert.equal(parsed.status?.commonEncodingVersion, 'v1');
});

void test('StorageVersion schema: entries without decodable/served versions and objects without status parse', () => {
  const a = StorageVersion.parse({
    metadata: { name: 'apps.deployments', resourceVersion: '1' },
    status: { storageVersions: [{ apiServerID: A, encodingVersion: 'apps/v1' }] },
  });
  assert.equal(a.status?.storageVersions?.[0]?.decodableVersions, undefined);
  const b = StorageVersion.parse({
    apiVersion: 'internal.apiserver.k8s.io/v1alpha1',
    kind: 'StorageVersion',
    metadata: { name: 'apps.deployments', resourceVersion: '1' },
    spec: {},
  });
  assert.equal(b.status, undefined);
  const c = StorageVersion.parse({ metadata: { name: 'apps.deployments', resourceVersion: '1' }, status: {} });
  assert.equal(c.status?.storageVersions, undefined);
});

void test('StorageVersion schema: refuses objects missing what agreement needs', () => {
  assert.throws(() => StorageVersion.parse({ metadata: { name: 'apps.deployments' } }), 'no resourceVersion');
  assert.throws(() => StorageVersion.parse({ metadata: { resourceVersion: '1' } }), 'no name');
  assert.throws(() => StorageVersion.parse({}), 'no metadata');
  assert.throws(
    () => StorageVersion.parse({ metadata: { name: 'a.b', resourceVersion: '1' }, status: { storageVersions: [{ apiServerID: A }] } }),
    'entry without encodingVersion',
  );
  assert.throws(
    () =>
      StorageVersion.parse({ metadata: { name: 'a.b', resourceVersion: '1' }, status: { storageVersions: [{ encodingVersion: 'v1' }] } }),
    'entry without apiServerID',
  );
  assert.throws(() => StorageVersion.parse({ metadata: { name: 'a.b', resourceVersion: 1 } }), 'numeric resourceVersion');
});

void test('IdentityLease schema: parses a real identity lease from kube-system', () => {
  const raw = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: A,
      namespace: 'kube-system',
      uid: '0d6b2b8e-2f3c-4d8e-9a7f-3b1e5c6d7f80',
      resourceVersion: '52377',
      creationTimestamp: '2026-11-22T01:00:00Z',
      labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver', 'kubernetes.io/hostname': 'kind-control-plane' },
    },
    spec: {
      holderIdentity: `${A}_0b5e8c1f-3f44-4a7c-8a3b-4c1b2f9e6d70`,
      leaseDurationSeconds: 3600,
      renewTime: '2026-11-22T03:33:13.705832Z',
      acquireTime: '2026-11-22T01:00:00.000000Z',
    },
  };
  const parsed = IdentityLease.parse(raw);
  assert.equal(parsed.metadata.name, A);
  assert.equal(parsed.metadata.labels?.['apiserver.kubernetes.io/identity'], 'kube-apiserver');
  assert.equal(parsed.spec.leaseDurationSeconds, 3600);
  assert.equal(parsed.spec.renewTime, '2026-11-22T03:33:13.705832Z');
  assert.equal(parsed.spec.holderIdentity, raw.spec.holderIdentity);
  assert.equal((parsed.spec as Record<string, unknown>)['acquireTime'], raw.spec.acquireTime, 'spec is loose');
  assert.equal((parsed.metadata as Record<string, unknown>)['namespace'], 'kube-system', 'metadata is loose');
  assert.deepEqual([...liveIdentities([parsed], Date.parse('2026-11-22T04:00:00Z'))], [A]);
  assert.equal(liveIdentities([parsed], Date.parse('2026-11-22T04:33:13.706Z')).size, 0);
});

void test('IdentityLease schema: optional spec fields, wrong types refused', () => {
  const bare = IdentityLease.parse({ metadata: { name: A }, spec: {} });
  assert.equal(bare.spec.renewTime, undefined);
  assert.equal(bare.spec.leaseDurationSeconds, undefined);
  assert.equal(bare.metadata.labels, undefined);
  assert.throws(() => IdentityLease.parse({ metadata: { name: A } }), 'no spec');
  assert.throws(() => IdentityLease.parse({ metadata: {}, spec: {} }), 'no name');
  assert.throws(() => IdentityLease.parse({ metadata: { name: A }, spec: { leaseDurationSeconds: '3600' } }), 'string duration');
  assert.throws(() => IdentityLease.parse({ metadata: { name: A }, spec: { renewTime: 1795318393705 } }), 'numeric renewTime');
  assert.throws(() => IdentityLease.parse({ metadata: { name: A, labels: { x: 1 } }, spec: {} }), 'non-string label');
});

void test('IDENTITY_LABEL selects the kube-apiserver identity leases', () => {
  const [key, value] = IDENTITY_LABEL.split('=');
  assert.equal(key, 'apiserver.kubernetes.io/identity');
  assert.equal(value, 'kube-apiserver');
  assert.equal(lease(A, {}).metadata.labels?.[key], value);
});

/** A lease of `name` held by the process `uuid` (a kube-apiserver writes `<name>_<uuid>`, a new UUID per start). */
const heldBy = (name: string, uuid: string) =>
  IdentityLease.parse({ ...fresh(name), spec: { ...fresh(name).spec, holderIdentity: `${name}_${uuid}` } });

void test('liveProcesses: one entry per live lease, its holderIdentity; expired leases left out; sorted', () => {
  const leases = [heldBy(B, 'u2'), heldBy(A, 'u1'), lease(GONE, { renewTime: microTime(NOW - 3 * HOUR), leaseDurationSeconds: 3600 })];
  assert.deepEqual(liveProcesses(leases, NOW), [`${A}=${A}_u1`, `${B}=${B}_u2`]);
});

void test('tokens name server processes: a restart of one server (same lease, new holderIdentity) changes both tokens, even with every answer the same', () => {
  const before = [heldBy(A, 'u1'), heldBy(B, 'u2')];
  const restarted = [heldBy(A, 'u1'), heldBy(B, 'u3')];
  const object = sv(DC, '200', entriesAB);
  const t = (leases: IdentityLease[]) => agreementFromStorageVersion(object, liveIdentities(leases, NOW), liveProcesses(leases, NOW));
  assert.equal(t(before).agreed, true);
  assert.notEqual(t(before).token, t(restarted).token);
  assert.equal(t(before).token, t([...before].reverse()).token, 'same processes, same token');
  const d = (leases: IdentityLease[]) =>
    agreementFromEndpoints(answers({ identities: [...liveIdentities(leases, NOW)], processes: liveProcesses(leases, NOW) }));
  assert.equal(d(before).agreed, d(restarted).agreed);
  assert.notEqual(d(before).token, d(restarted).token);
  assert.equal(d(before).token, d([...before].reverse()).token);
});

void test('holdsSince: a pass recorded under one agreement still holds with servers gone since, not with a restart, a new server or a new answer; tokenChange says what moved', () => {
  const procs = (ls: IdentityLease[]) => ({ identities: [...liveIdentities(ls, NOW)], processes: liveProcesses(ls, NOW) });
  const two = [heldBy(A, 'u1'), heldBy(B, 'u2')];
  const d = (over: Partial<EndpointAnswers>) => agreementFromEndpoints(answers({ ...procs(two), ...over })).token;
  const then = d({});
  assert.equal(holdsSince(then, then), true);
  // B gone since (its lease expired, its address no longer listed): A wrote as it did.
  assert.equal(holdsSince(then, d({ ...procs([heldBy(A, 'u1')]), endpoints: [ep(E1, H1)] })), true);
  // B restarted (new holderIdentity), a third server, a server answering another hash, no addresses: no longer.
  assert.equal(holdsSince(then, d(procs([heldBy(A, 'u1'), heldBy(B, 'u3')]))), false);
  // B restarted and listed again, its new identity lease not yet written: its process is unknown, so no longer.
  assert.equal(holdsSince(then, d(procs([heldBy(A, 'u1')]))), false);
  assert.equal(holdsSince(then, d({ endpoints: [ep(E1, H1), ep(E2, H1), ep(E3, H1)] })), false);
  assert.equal(holdsSince(then, d({ endpoints: [ep(E1, H1), ep(E2, H2)] })), false);
  assert.equal(holdsSince(then, d({ via: ep(VIA, H2) })), false);
  assert.equal(holdsSince(then, d({ endpoints: [] })), false);
  assert.equal(
    holdsSince(then, agreementFromEndpoints(answers({ ...procs(two), crd: { storageVersion: 'v2', generation: 4 } })).token),
    false,
  );
  assert.equal(
    tokenChange(then, d(procs([heldBy(A, 'u1'), heldBy(B, 'u3')]))),
    `the API server processes (a restart changes them): ${A}=${A}_u1,${B}=${B}_u2 -> ${A}=${A}_u1,${B}=${B}_u3`,
  );
  // The StorageVersion form: its object's resourceVersion moves when a gone server's entry is collected.
  const s = (rv: string, ls: IdentityLease[]) =>
    agreementFromStorageVersion(sv(DC, rv, entriesAB), liveIdentities(ls, NOW), liveProcesses(ls, NOW)).token;
  assert.equal(holdsSince(s('200', two), s('201', two)), true);
  assert.equal(holdsSince(s('200', two), s('201', [heldBy(A, 'u1'), heldBy(B, 'u3')])), false);
  assert.equal(holdsSince(s('200', two), then), false, 'another form');
});

// The rules the workflows and the recording activities share (src/contract/agreement.ts).
const reading = (over: Partial<Agreement>): Agreement => ({
  agreed: true,
  encodingVersion: 'example.com/v2',
  token: 't1',
  source: 'discovery',
  verified: true,
  checked: 'checked',
  servers: [],
  ...over,
});

void test('sameAgreement: agreed both times, on the same version, under the same token', () => {
  const then = reading({});
  assert.equal(sameAgreement(then, reading({})), true);
  assert.equal(sameAgreement(then, reading({ token: 't2' })), false, 'the token moved');
  assert.equal(sameAgreement(then, reading({ encodingVersion: 'example.com/v1' })), false, 'another version');
  assert.equal(sameAgreement(then, reading({ agreed: false, encodingVersion: undefined })), false, 'broken now');
  assert.equal(sameAgreement(reading({ agreed: false }), reading({})), false, 'never agreed');
});

void test('acceptAgreement: verified at once; unverified once read unchanged for long enough, timed by when it was read', () => {
  const verified = acceptAgreement(reading({ at: 1000 }), undefined, 120, 0);
  assert.deepEqual(verified, { accepted: true, hold: undefined });
  const first = acceptAgreement(reading({ verified: false, at: 1000 }), undefined, 120, 0);
  assert.deepEqual(first, { accepted: false, hold: { token: 't1', since: 1000 } });
  // A reading without agreement, or a verified one, leaves what was remembered as it was.
  assert.deepEqual(acceptAgreement(reading({ agreed: false, at: 50_000 }), first.hold, 120, 0), { accepted: false, hold: first.hold });
  assert.equal(acceptAgreement(reading({ verified: false, at: 120_999 }), first.hold, 120, 0).accepted, false);
  assert.deepEqual(acceptAgreement(reading({ verified: false, at: 121_000 }), first.hold, 120, 0), { accepted: true, hold: first.hold });
  // Another token starts the clock again.
  assert.deepEqual(acceptAgreement(reading({ verified: false, token: 't2', at: 500_000 }), first.hold, 120, 0), {
    accepted: false,
    hold: { token: 't2', since: 500_000 },
  });
  // A reading from before Agreement.at is timed by the caller's now.
  assert.deepEqual(acceptAgreement(reading({ verified: false }), undefined, 0, 7), { accepted: true, hold: { token: 't1', since: 7 } });
});
