/**
 * The dry run that tells whether svm's fence guards the worker's writes of a resource (src/kube/fence-probe.ts),
 * against fake API servers: what it sends, which object it tries, how each answer is judged, and the manifest's
 * fence asked of every server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyResponse, KubeError } from '../src/kube/errors';
import { grantManifests } from '../src/client/grant';
import { fenceRequired } from '../src/activities/migrate-chunk';
import {
  isSvmFence,
  judgeProbe,
  needsManifestFence,
  PROBE_LABEL,
  probeEachServer,
  probeFence,
  servedByAggregatedApi,
} from '../src/kube/fence-probe';
import { fakeApi } from './helpers/fake-api';

const VAPS = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  resource: 'validatingadmissionpolicies',
  kind: 'ValidatingAdmissionPolicy',
};
const LEASES = { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease' };

/** A 403 Status as kube-apiserver writes a ValidatingAdmissionPolicy's denial. */
const denial = (policy: string) =>
  JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    reason: 'Forbidden',
    code: 403,
    message: `validatingadmissionpolicies.admissionregistration.k8s.io "p" is forbidden: ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request: svm only re-encodes objects unchanged`,
  });

const RBAC_DENIAL = JSON.stringify({
  kind: 'Status',
  code: 403,
  reason: 'Forbidden',
  message:
    'validatingadmissionpolicies.admissionregistration.k8s.io "p" is forbidden: User "system:serviceaccount:svm-system:svm-migrator" cannot patch resource "validatingadmissionpolicies" in API group "admissionregistration.k8s.io" at the cluster scope',
});

void test("which fence a chunk needs: the manifest-loaded one for admission objects, any of svm's for the rest, each by its setting", () => {
  assert.equal(needsManifestFence(VAPS), true);
  assert.equal(needsManifestFence({ group: '' }), false);
  assert.equal(needsManifestFence({ group: 'rbac.authorization.k8s.io' }), false);
  const secrets = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true, custom: false };
  const vaps = { ...VAPS, namespaced: false, custom: false };
  assert.equal(fenceRequired({ requireFence: true, requireStaticFence: true }, vaps), 'static');
  assert.equal(
    fenceRequired({ requireFence: true, requireStaticFence: false }, vaps),
    undefined,
    'no API policy guards them: not probed for one',
  );
  assert.equal(fenceRequired({ requireFence: true, requireStaticFence: true }, secrets), 'svm');
  assert.equal(fenceRequired({ requireStaticFence: true }, secrets), undefined);
  assert.equal(fenceRequired({}, vaps), undefined);
});

void test("svm's fence by its name: deploy/'s, the chart's prefixed one, and each as loaded from a manifest", () => {
  assert.equal(isSvmFence('svm-worker-no-op-only', 'svm'), true);
  assert.equal(isSvmFence('acme-svm-worker-no-op-only', 'svm'), true);
  assert.equal(isSvmFence('svm-worker-no-op-only.static.k8s.io', 'svm'), true);
  assert.equal(isSvmFence('svm-worker-no-op-only.static.k8s.io', 'static'), true);
  assert.equal(isSvmFence('svm-worker-no-op-only', 'static'), false, 'made through the API');
  assert.equal(isSvmFence('kyverno-no-labels', 'svm'), false, "another policy refusing the change is not svm's fence");
  assert.equal(isSvmFence('other.static.k8s.io', 'static'), false);
});

void test("the manifest's fence: in force only when its policy (*.static.k8s.io) refuses the dry run", () => {
  assert.deepEqual(judgeProbe(classifyResponse(403, denial('svm-worker-no-op-only.static.k8s.io')), 'static'), {
    inForce: true,
    policy: 'svm-worker-no-op-only.static.k8s.io',
  });
  const api = judgeProbe(classifyResponse(403, denial('svm-worker-no-op-only')), 'static');
  assert.equal('inForce' in api && api.inForce, false);
  assert.match(
    (api as { why: string }).why,
    /refused, but not by svm's fence loaded from a manifest: .*ValidatingAdmissionPolicy "svm-worker-no-op-only"/,
  );
  const rbac = judgeProbe(classifyResponse(403, RBAC_DENIAL), 'static');
  assert.match((rbac as { why: string }).why, /not by svm's fence loaded from a manifest: HTTP 403 Forbidden \(RBAC: cannot patch/);
  assert.deepEqual(judgeProbe({ status: 200 }, 'static'), {
    inForce: false,
    why: "a change of its labels was admitted (dry run, HTTP 200): svm's fence loaded from a manifest does not refuse it",
  });
});

void test("any of svm's fences: the API's or the manifest's refusing is in force; admitted (an aggregated API, no fence installed) or another's refusal is not", () => {
  assert.deepEqual(judgeProbe(classifyResponse(403, denial('svm-worker-no-op-only')), 'svm'), {
    inForce: true,
    policy: 'svm-worker-no-op-only',
  });
  assert.deepEqual(judgeProbe(classifyResponse(403, denial('svm-worker-no-op-only.static.k8s.io')), 'svm'), {
    inForce: true,
    policy: 'svm-worker-no-op-only.static.k8s.io',
  });
  assert.match((judgeProbe(classifyResponse(403, denial('no-labels')), 'svm') as { why: string }).why, /refused, but not by svm's fence: /);
  assert.match((judgeProbe(classifyResponse(403, RBAC_DENIAL), 'svm') as { why: string }).why, /RBAC: cannot patch/);
  assert.deepEqual(judgeProbe({ status: 200 }, 'svm'), {
    inForce: false,
    why: "a change of its labels was admitted (dry run, HTTP 200): svm's fence does not refuse it",
  });
});

/** A fake API server recording each request: lists answer with the given objects, patches with answer(). */
async function recordingApi(objects: () => Array<{ name: string; namespace?: string }>, answer: () => [number, string]) {
  const seen: Array<{ method: string; url: string; accept?: string; type?: string; body: string }> = [];
  const api = await fakeApi((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, accept: req.headers.accept, type: req.headers['content-type'], body });
      if (req.method === 'GET') {
        const items = objects().map((o) => ({ metadata: { ...o, resourceVersion: '7' } }));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'PartialObjectMetadataList', items }));
      } else {
        const [status, text] = answer();
        res.writeHead(status, { 'content-type': 'application/json' }).end(text);
      }
    });
  });
  return { ...api, seen };
}

void test("the probe lists a few objects as metadata, then sends a dry-run change of one's labels; nothing to list, nothing to probe", async () => {
  let objects = [{ name: 'svm-worker-no-op-only' }];
  const api = await recordingApi(
    () => objects,
    () => [403, denial('fence-worker-no-op-only.static.k8s.io')],
  );
  try {
    assert.deepEqual(await probeFence(api.kube, VAPS, 'static'), { inForce: true, policy: 'fence-worker-no-op-only.static.k8s.io' });
    assert.equal(api.seen.length, 2);
    assert.equal(api.seen[0]!.url, '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies?limit=5');
    assert.match(api.seen[0]!.accept!, /as=PartialObjectMetadataList/);
    assert.equal(api.seen[1]!.method, 'PATCH');
    assert.equal(api.seen[1]!.url, '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/svm-worker-no-op-only?dryRun=All');
    assert.equal(api.seen[1]!.type, 'application/merge-patch+json');
    assert.match(api.seen[1]!.accept!, /as=PartialObjectMetadata/, 'the reply as metadata only');
    assert.deepEqual(JSON.parse(api.seen[1]!.body), { metadata: { labels: { [PROBE_LABEL]: 'dry-run' } } });
    objects = [];
    assert.deepEqual(await probeFence(api.kube, VAPS, 'static'), { nothingToProbe: true });
    assert.equal(api.seen.length, 3, 'no patch without an object');
  } finally {
    await api.close();
  }
});

void test('a refusal by RBAC (no patch granted) is not judged: it is thrown, for the chunk to fail as forbidden, saying what to grant', async () => {
  const api = await recordingApi(
    () => [{ name: 'p' }],
    () => [403, RBAC_DENIAL],
  );
  try {
    await assert.rejects(probeFence(api.kube, VAPS, 'svm'), (err: unknown) => err instanceof KubeError && err.kind === 'forbidden');
  } finally {
    await api.close();
  }
});

void test("the probe never tries svm's own Leases (the fence lets the worker write them): the first other one", async () => {
  let leases = [
    { name: 'svm-leader', namespace: 'svm-system' },
    { name: 'svm-worker-a', namespace: 'svm-system' },
    { name: 'kube-controller-manager', namespace: 'kube-system' },
  ];
  const api = await recordingApi(
    () => leases,
    () => [403, denial('svm-worker-no-op-only')],
  );
  try {
    assert.deepEqual(await probeFence(api.kube, LEASES, 'svm'), { inForce: true, policy: 'svm-worker-no-op-only' });
    assert.equal(api.seen[1]!.url, '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager?dryRun=All');
    leases = leases.slice(0, 2);
    assert.deepEqual(await probeFence(api.kube, LEASES, 'svm'), { nothingToProbe: true }, "only svm's own: none to try");
  } finally {
    await api.close();
  }
});

void test("the manifest's fence is asked of every API server at its own address; where none is listed, of the one address, named so", async () => {
  const objects = () => [{ name: 'p' }];
  const fenced = await recordingApi(objects, () => [403, denial('svm-worker-no-op-only.static.k8s.io')]);
  const open = await recordingApi(objects, () => [200, JSON.stringify({ kind: 'PartialObjectMetadata', metadata: { name: 'p' } })]);
  try {
    const probes = await probeEachServer(
      {
        via: fenced.kube,
        endpoints: [
          { id: '198.18.1.10:6443', kube: fenced.kube },
          { id: '198.18.1.11:6443', kube: open.kube },
        ],
      },
      VAPS,
      'static',
    );
    assert.deepEqual(
      probes.map((p) => [p.server, 'inForce' in p && p.inForce]),
      [
        ['198.18.1.10:6443', true],
        ['198.18.1.11:6443', false],
      ],
    );
    assert.equal(fenced.seen.filter((r) => r.method === 'GET').length, 1, 'listed once, through the one address');
    assert.equal(open.seen.filter((r) => r.method === 'GET').length, 0);
    const alone = await probeEachServer({ via: open.kube, endpoints: [], endpointsNote: 'forbidden' }, VAPS, 'static');
    assert.equal(alone.length, 1);
    assert.match(alone[0]!.server, /^http:\/\/127\.0\.0\.1:\d+ \(forbidden\)$/);
    assert.equal('inForce' in alone[0]! && alone[0].inForce, false);
  } finally {
    await fenced.close();
    await open.close();
  }
});

void test('an aggregated API is one whose APIService names a service; svm grant says no fence sees its requests', async () => {
  const answers: Record<string, [number, unknown]> = {
    '/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.example.com': [200, { spec: { service: { name: 'm', namespace: 'x' } } }],
    '/apis/apiregistration.k8s.io/v1/apiservices/v1.apps': [200, { spec: { service: null } }],
    '/apis/apiregistration.k8s.io/v1/apiservices/v1.gone.example.com': [404, { kind: 'Status', code: 404 }],
    '/apis/apiregistration.k8s.io/v1/apiservices/v1.secret.example.com': [403, { kind: 'Status', code: 403 }],
  };
  const api = await fakeApi((req, res) => {
    const [status, body] = answers[req.url!] ?? [500, {}];
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  try {
    assert.equal(await servedByAggregatedApi(api.kube, { group: 'metrics.example.com', version: 'v1beta1' }), true);
    assert.equal(await servedByAggregatedApi(api.kube, { group: 'apps', version: 'v1' }), false);
    assert.equal(await servedByAggregatedApi(api.kube, { group: 'gone.example.com', version: 'v1' }), false);
    assert.equal(await servedByAggregatedApi(api.kube, { group: 'secret.example.com', version: 'v1' }), undefined);
    assert.equal(await servedByAggregatedApi(api.kube, { group: '', version: 'v1' }), false, 'the core group: no request');
  } finally {
    await api.close();
  }
  const head = grantManifests({ group: 'metrics.example.com', resource: 'widgets', custom: false, aggregated: true });
  assert.match(head, /^# Lets svm re-encode widgets\.metrics\.example\.com for one migration\. An aggregated API server serves it/);
  assert.match(head, /kubectl delete clusterrolebinding,clusterrole svm-migrate-widgets\.metrics\.example\.com/);
  assert.doesNotMatch(grantManifests({ group: 'metrics.example.com', resource: 'widgets', custom: false }), /aggregated/);
});
