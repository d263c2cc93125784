/**
 * Who may start a migration (DESIGN rule 11), against the real API server:
 * deploy/admission-policy.yaml applied as it ships, then StorageVersionMigrations
 * created by ServiceAccounts with different rights. Admitted only for someone
 * who may list and patch the resource cluster-wide (the worker's re-encode); the workflow-id
 * annotation only from svm-migrator.
 *
 * The policy is removed at the end: the other test files run their workers
 * as the plane's admin, whose workflow-created objects carry the annotation.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { svmPath, WORKFLOW_ID_ANNOTATION } from '../src/activities';
import { installCrds } from '../src/client/cli-migrate';
import { KubeClient } from '../src/kube/client';
import { ensureNamespace } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';

const RBAC = 'rbac.authorization.k8s.io';
const POLICY = 'svm-storageversionmigrations';
const SVMS = '/apis/migration.k8s.io/v1alpha1/storageversionmigrations';

let plane: TestPlane;
const ns = uniq('adm');
const cleanup: Array<() => Promise<unknown>> = [];
const clients: Record<string, KubeClient> = {};
const tokens: Record<string, string> = {};

/** A ServiceAccount with a ClusterRole of the given rules (and create/update/patch on StorageVersionMigrations); a client as it. */
async function identity(name: string, rules: unknown[]): Promise<KubeClient> {
  const role = `${ns}-${name}`;
  await serverSideApply(plane.kube, [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: ns } },
    {
      apiVersion: `${RBAC}/v1`,
      kind: 'ClusterRole',
      metadata: { name: role },
      rules: [
        { apiGroups: ['migration.k8s.io'], resources: ['storageversionmigrations'], verbs: ['get', 'create', 'update', 'patch', 'delete'] },
        ...rules,
      ],
    },
    {
      apiVersion: `${RBAC}/v1`,
      kind: 'ClusterRoleBinding',
      metadata: { name: role },
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
    },
  ] as Manifest[]);
  cleanup.push(
    () => plane.kube.raw('DELETE', `/apis/${RBAC}/v1/clusterrolebindings/${role}`),
    () => plane.kube.raw('DELETE', `/apis/${RBAC}/v1/clusterroles/${role}`),
  );
  const token = await serviceAccountToken(plane.kube, ns, name);
  tokens[name] = token;
  const kubeconfig = writeTokenKubeconfig(plane.kube.server, token, name);
  cleanup.push(async () => removeTokenKubeconfig(kubeconfig));
  const c = KubeClient.fromKubeconfig(kubeconfig);
  clients[name] = c;
  return c;
}

const svm = (name: string, resource: { group?: string; resource: string }, annotations?: Record<string, string>) => ({
  apiVersion: 'migration.k8s.io/v1alpha1',
  kind: 'StorageVersionMigration',
  metadata: { name, ...(annotations ? { annotations } : {}) },
  spec: { resource },
});

/** Creates (for real, then deletes it at the end) and returns the HTTP status and the API server's message. */
async function create(as: KubeClient, obj: ReturnType<typeof svm>, dryRun = false): Promise<{ status: number; message: string }> {
  const res = await as.raw('POST', SVMS, { body: JSON.stringify(obj), query: dryRun ? { dryRun: 'All' } : {} });
  if (res.status === 201 && !dryRun) cleanup.push(() => plane.kube.raw('DELETE', svmPath(obj.metadata.name)));
  return { status: res.status, message: res.status >= 300 ? (JSON.parse(res.body) as { message: string }).message : '' };
}

const denied = (name: string, message: string) =>
  `storageversionmigrations.migration.k8s.io "${name}" is forbidden: ValidatingAdmissionPolicy '${POLICY}' with binding '${POLICY}' denied request: ${message}`;
const user = (name: string) => `system:serviceaccount:${ns}:${name}`;
const mayNot = (label: string, who: string) =>
  `a StorageVersionMigration makes svm list and patch every ${label} object with its own rights, so only someone who may list and patch ${label} cluster-wide may create one; ${who} may not`;
const annotationDenied = (who: string) =>
  `the annotation migration.k8s.io/workflow-id is set by svm only (ServiceAccount svm-system/svm-migrator); ${who} may not set or change it: create the StorageVersionMigration without it`;

before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
  await ensureNamespace(plane.kube, ns);
  // The migrator's identity (deploy/rbac.yaml), and the policy exactly as deploy/ ships it.
  await serverSideApply(plane.kube, [...readManifests('namespace.yaml'), ...readManifests('rbac.yaml')]);
  const policy = readManifests('admission-policy.yaml');
  assert.deepEqual(
    policy.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`),
    [
      `admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy/${POLICY}`,
      `admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding/${POLICY}`,
    ],
  );
  await serverSideApply(plane.kube, policy);
  cleanup.push(
    () => plane.kube.raw('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${POLICY}`),
    () => plane.kube.raw('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${POLICY}`),
  );
  await identity('cm-migrator', [
    { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'patch'] },
    { apiGroups: ['apps'], resources: ['deployments'], verbs: ['list', 'patch'] },
  ]);
  await identity('secret-lister', [{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }]);
  // The policy takes effect a moment after it is created, on each API server in its own time (and a
  // client's kept-alive connection through the load balancer stays with one): wait until every one denies.
  for (const [i, url] of plane.apiserverUrls.entries()) {
    const kubeconfig = writeTokenKubeconfig(url, tokens['secret-lister']!, `secret-lister-${i}`);
    const direct = KubeClient.fromKubeconfig(kubeconfig);
    try {
      await eventually(
        `the policy to take effect on API server ${i}`,
        async () => (await create(direct, svm(uniq('probe'), { resource: 'secrets' }), true)).status === 403,
        60_000,
      );
    } finally {
      direct.close();
      removeTokenKubeconfig(kubeconfig);
    }
  }
});
after(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  for (const c of Object.values(clients)) c.close();
  await plane?.close();
});

void test('a creator who may list and patch the resource is admitted (core group and a named group)', async () => {
  const cm = uniq('cm');
  assert.deepEqual(await create(clients['cm-migrator']!, svm(cm, { resource: 'configmaps' })), { status: 201, message: '' });
  const created = await plane.kube.getJson<{ spec: { resource: { resource: string } } }>(svmPath(cm));
  assert.equal(created.spec.resource.resource, 'configmaps');
  // An explicit empty group is the core group too.
  assert.equal((await create(clients['cm-migrator']!, svm(uniq('cm'), { group: '', resource: 'configmaps' }))).status, 201);
  assert.equal((await create(clients['cm-migrator']!, svm(uniq('deploy'), { group: 'apps', resource: 'deployments' }))).status, 201);
});

void test('a creator who may not both list and patch the resource is denied with the policy message', async () => {
  // Only list on secrets.
  const s1 = uniq('secrets');
  assert.deepEqual(await create(clients['secret-lister']!, svm(s1, { resource: 'secrets' })), {
    status: 403,
    message: denied(s1, mayNot('secrets', user('secret-lister'))),
  });
  // Nothing on secrets at all (but list+patch on configmaps).
  const s2 = uniq('secrets');
  assert.deepEqual(await create(clients['cm-migrator']!, svm(s2, { resource: 'secrets' })), {
    status: 403,
    message: denied(s2, mayNot('secrets', user('cm-migrator'))),
  });
  // list+patch on deployments in apps does not reach deployments elsewhere, nor the same name in the core group.
  const d = uniq('deploy');
  assert.deepEqual(await create(clients['cm-migrator']!, svm(d, { group: 'extensions', resource: 'deployments' })), {
    status: 403,
    message: denied(d, mayNot('deployments.extensions', user('cm-migrator'))),
  });
  for (const name of [s1, s2, d]) assert.equal((await plane.kube.raw('GET', svmPath(name))).status, 404, `${name} was not created`);
});

void test('changing spec.resource of an admitted object is checked like a create', async () => {
  const name = uniq('cm');
  assert.equal((await create(clients['cm-migrator']!, svm(name, { resource: 'configmaps' }))).status, 201);
  const res = await clients['cm-migrator']!.raw('PATCH', svmPath(name), {
    body: JSON.stringify({ spec: { resource: { resource: 'secrets' } } }),
    contentType: 'application/merge-patch+json',
  });
  assert.equal(res.status, 403);
  assert.equal((JSON.parse(res.body) as { message: string }).message, denied(name, mayNot('secrets', user('cm-migrator'))));
  // A change that keeps the resource (a label) passes.
  const label = await clients['cm-migrator']!.raw('PATCH', svmPath(name), {
    body: JSON.stringify({ metadata: { labels: { team: 'a' } } }),
    contentType: 'application/merge-patch+json',
  });
  assert.equal(label.status, 200);
});

void test('only svm-migrator may set the workflow-id annotation, on create or later', async () => {
  const annotation = { [WORKFLOW_ID_ANNOTATION]: 'migrate/secrets' };
  // A creator who may migrate configmaps still may not attach its object to a workflow.
  const a = uniq('cm');
  assert.deepEqual(await create(clients['cm-migrator']!, svm(a, { resource: 'configmaps' }, annotation)), {
    status: 403,
    message: denied(a, annotationDenied(user('cm-migrator'))),
  });
  // Nor add it afterwards.
  const b = uniq('cm');
  assert.equal((await create(clients['cm-migrator']!, svm(b, { resource: 'configmaps' }))).status, 201);
  const res = await clients['cm-migrator']!.raw('PATCH', svmPath(b), {
    body: JSON.stringify({ metadata: { annotations: annotation } }),
    contentType: 'application/merge-patch+json',
  });
  assert.equal(res.status, 403);
  assert.equal((JSON.parse(res.body) as { message: string }).message, denied(b, annotationDenied(user('cm-migrator'))));
  // The plane's admin is no exception.
  const c = uniq('cm');
  const asAdmin = await create(plane.kube, svm(c, { resource: 'configmaps' }, annotation), true);
  assert.equal(asAdmin.status, 403);
  assert.match(asAdmin.message, /the annotation migration\.k8s\.io\/workflow-id is set by svm only/);
  // The migrator's own ServiceAccount may (this is how `svm migrate` creates its kubectl mirror).
  const kubeconfig = writeTokenKubeconfig(
    plane.kube.server,
    await serviceAccountToken(plane.kube, 'svm-system', 'svm-migrator'),
    'svm-migrator',
  );
  const migrator = KubeClient.fromKubeconfig(kubeconfig);
  try {
    assert.deepEqual(await create(migrator, svm(uniq('cm'), { resource: 'configmaps' }, annotation), true), { status: 201, message: '' });
  } finally {
    migrator.close();
    removeTokenKubeconfig(kubeconfig);
  }
});
