/**
 * Whether a worker's Temporal credential sits within its own token's reach (src/kube/credential-exposure.ts): the
 * Secrets named, the access reviews asked (the worker's own, and `svm plan`'s for each worker Deployment's
 * ServiceAccount), and what the plan says. The authorizer is a fake API server answering from a table.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { credentialExposure, parseSecretRefs, serviceAccountSubject, workerNotes } from '../src/kube/credential-exposure';
import { fakeApi } from './helpers/fake-api';

interface Review {
  kind: string;
  spec: { user?: string; groups?: string[]; resourceAttributes: { verb: string; namespace: string; name?: string; resource: string } };
}

/** An API server whose authorizer allows what `allow` says, and which serves `deployments` (or refuses with 403). */
function authorizer(allow: (r: Review) => boolean, deployments: unknown[] | 403, seen: Review[]): http.RequestListener {
  return (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.method === 'POST' && /accessreviews$/.test(req.url ?? '')) {
        const review = JSON.parse(body) as Review;
        seen.push(review);
        res.end(JSON.stringify({ ...review, status: { allowed: allow(review) } }));
      } else if (req.url?.startsWith('/apis/apps/v1/deployments')) {
        if (deployments === 403) {
          res.statusCode = 403;
          res.end(
            JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'Forbidden', code: 403, message: 'deployments.apps is forbidden' }),
          );
        } else res.end(JSON.stringify({ kind: 'DeploymentList', items: deployments }));
      } else {
        res.statusCode = 404;
        res.end('{}');
      }
    });
  };
}

function worker(ns: string, env: Record<string, string>, serviceAccountName = 'svm-migrator') {
  return {
    metadata: { name: 'svm-worker', namespace: ns },
    spec: {
      template: {
        spec: { serviceAccountName, containers: [{ name: 'worker', env: Object.entries(env).map(([name, value]) => ({ name, value })) }] },
      },
    },
  };
}

void test('SVM_TEMPORAL_CREDENTIAL_SECRETS: namespace/name or name (the worker namespace); anything else refused, named', () => {
  assert.deepEqual(parseSecretRefs(' temporal-key , other/temporal-mtls,', 'svm-system'), [
    { namespace: 'svm-system', name: 'temporal-key' },
    { namespace: 'other', name: 'temporal-mtls' },
  ]);
  assert.deepEqual(parseSecretRefs(undefined, 'svm-system'), []);
  assert.throws(() => parseSecretRefs('a/b/c', 'x'), /"a\/b\/c" is not a Secret/);
  assert.throws(() => parseSecretRefs('Bad_Name', 'x'), /"Bad_Name" is not a Secret/);
});

void test('the worker asks for itself (SelfSubjectAccessReview): get on each Secret and list in its namespace; only what is allowed is reported', async () => {
  const seen: Review[] = [];
  const api = await fakeApi(
    authorizer((r) => r.spec.resourceAttributes.verb === 'list' && r.spec.resourceAttributes.namespace === 'svm-system', [], seen),
  );
  try {
    const found = await credentialExposure(api.kube, parseSecretRefs('temporal-key,vault/temporal-mtls', 'svm-system'));
    assert.deepEqual(found, [{ secret: 'svm-system/temporal-key', verbs: ['list'] }]);
    assert.deepEqual(
      seen.map((r) => [
        r.kind,
        r.spec.user,
        r.spec.resourceAttributes.verb,
        r.spec.resourceAttributes.namespace,
        r.spec.resourceAttributes.name,
        r.spec.resourceAttributes.resource,
      ]),
      [
        ['SelfSubjectAccessReview', undefined, 'get', 'svm-system', 'temporal-key', 'secrets'],
        ['SelfSubjectAccessReview', undefined, 'list', 'svm-system', undefined, 'secrets'],
        ['SelfSubjectAccessReview', undefined, 'get', 'vault', 'temporal-mtls', 'secrets'],
        ['SelfSubjectAccessReview', undefined, 'list', 'vault', undefined, 'secrets'],
      ],
    );
  } finally {
    await api.close();
  }
});

void test("svm plan asks about each worker Deployment's ServiceAccount and says what it found, and the prune left to the operator", async () => {
  const seen: Review[] = [];
  const sa = serviceAccountSubject('svm-system', 'svm-migrator');
  const api = await fakeApi(
    authorizer(
      (r) => r.spec.user === sa.user && r.spec.resourceAttributes.namespace === 'svm-system',
      [
        worker('svm-system', { SVM_TEMPORAL_CREDENTIAL_SECRETS: 'temporal-key', SVM_PRUNE: 'operator' }),
        worker('csi-ns', {}, 'other'),
        worker('bad', { SVM_TEMPORAL_CREDENTIAL_SECRETS: 'a/b/c' }),
      ],
      seen,
    ),
  );
  try {
    const notes = await workerNotes(api.kube, { crdsToPrune: 2 });
    assert.equal(notes.length, 3, notes.join('\n'));
    assert.match(notes[0]!, /^worker svm-system\/svm-worker leaves the prune .* run `svm prune --all`/);
    assert.match(
      notes[1]!,
      /^worker svm-system\/svm-worker's Temporal credential sits in Secret svm-system\/temporal-key \(get and list\)/,
    );
    assert.match(notes[2]!, /^worker bad\/svm-worker: SVM_TEMPORAL_CREDENTIAL_SECRETS is malformed/);
    // Only the worker that names Secrets is asked about, as its ServiceAccount with its groups.
    assert.deepEqual(
      new Set(seen.map((r) => `${r.kind} ${r.spec.user} ${r.spec.groups?.join(',')}`)),
      new Set([`SubjectAccessReview ${sa.user} ${sa.groups.join(',')}`]),
    );
    // Nothing to prune: no prune note; a credential beyond reach: no note.
    assert.deepEqual(await workerNotes(api.kube, { crdsToPrune: 0 }), notes.slice(1));
  } finally {
    await api.close();
  }
});

void test('svm plan as an identity that may not list Deployments: one note saying what was not checked, nothing fatal', async () => {
  const api = await fakeApi(authorizer(() => true, 403, []));
  try {
    assert.deepEqual(await workerNotes(api.kube, { crdsToPrune: 1 }), [
      "svm's worker Deployments were not read (forbidden to this identity): whether a worker's Temporal credential is within its token's reach was not checked",
    ]);
  } finally {
    await api.close();
  }
});
