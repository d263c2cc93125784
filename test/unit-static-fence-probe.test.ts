/**
 * The dry run that tells whether the manifest-loaded fence guards the worker's writes of admission objects
 * (src/kube/static-fence.ts), against a fake API server: what it sends, and how each answer is judged.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyResponse } from '../src/kube/errors';
import { grantManifests } from '../src/client/grant';
import { judgeProbe, needsManifestFence, PROBE_LABEL, probeManifestFence, servedByAggregatedApi } from '../src/kube/static-fence';
import { fakeApi } from './helpers/fake-api';

const VAPS = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  resource: 'validatingadmissionpolicies',
  kind: 'ValidatingAdmissionPolicy',
};

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

void test('only admission objects need the manifest-loaded fence', () => {
  assert.equal(needsManifestFence(VAPS), true);
  assert.equal(needsManifestFence({ group: '' }), false);
  assert.equal(needsManifestFence({ group: 'rbac.authorization.k8s.io' }), false);
});

void test('in force only when a policy loaded from a manifest (*.static.k8s.io) refuses the dry run', () => {
  assert.deepEqual(judgeProbe(classifyResponse(403, denial('svm-worker-no-op-only.static.k8s.io'))), {
    inForce: true,
    policy: 'svm-worker-no-op-only.static.k8s.io',
  });
  const api = judgeProbe(classifyResponse(403, denial('svm-worker-no-op-only')));
  assert.equal('inForce' in api && api.inForce, false);
  assert.match(
    (api as { why: string }).why,
    /refused, but not by a fence loaded from a manifest: .*ValidatingAdmissionPolicy "svm-worker-no-op-only"/,
  );
  const rbac = judgeProbe(
    classifyResponse(
      403,
      JSON.stringify({
        kind: 'Status',
        code: 403,
        reason: 'Forbidden',
        message:
          'validatingadmissionpolicies.admissionregistration.k8s.io "p" is forbidden: User "system:serviceaccount:svm-system:svm-migrator" cannot patch resource "validatingadmissionpolicies" in API group "admissionregistration.k8s.io" at the cluster scope',
      }),
    ),
  );
  assert.match((rbac as { why: string }).why, /not by a fence loaded from a manifest: HTTP 403 Forbidden \(RBAC: cannot patch/);
  const admitted = judgeProbe({ status: 200 });
  assert.deepEqual(admitted, {
    inForce: false,
    why: 'a change of its labels was admitted (dry run, HTTP 200): no fence loaded from a manifest refuses it',
  });
});

void test('the probe lists one object as metadata, then sends a dry-run change of its labels; nothing to list, nothing to probe', async () => {
  const seen: Array<{ method: string; url: string; accept?: string; type?: string; body: string }> = [];
  let objects = 1;
  const api = await fakeApi((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, accept: req.headers.accept, type: req.headers['content-type'], body });
      if (req.method === 'GET') {
        const items = objects ? [{ metadata: { name: 'svm-worker-no-op-only', resourceVersion: '7' } }] : [];
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'PartialObjectMetadataList', items }));
      } else res.writeHead(403, { 'content-type': 'application/json' }).end(denial('fence.static.k8s.io'));
    });
  });
  try {
    assert.deepEqual(await probeManifestFence(api.kube, VAPS), { inForce: true, policy: 'fence.static.k8s.io' });
    assert.equal(seen.length, 2);
    assert.equal(seen[0]!.url, '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies?limit=1');
    assert.match(seen[0]!.accept!, /as=PartialObjectMetadataList/);
    assert.equal(seen[1]!.method, 'PATCH');
    assert.equal(seen[1]!.url, '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/svm-worker-no-op-only?dryRun=All');
    assert.equal(seen[1]!.type, 'application/merge-patch+json');
    assert.deepEqual(JSON.parse(seen[1]!.body), { metadata: { labels: { [PROBE_LABEL]: 'dry-run' } } });
    objects = 0;
    assert.deepEqual(await probeManifestFence(api.kube, VAPS), { nothingToProbe: true });
    assert.equal(seen.length, 3, 'no patch without an object');
  } finally {
    await api.close();
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
