/**
 * deploy/ for real: the manifests render with kustomize and pass the API
 * server (Pod Security "restricted" included); a whole migration runs as the
 * svm-migrator ServiceAccount under the ClusterRole of deploy/rbac.yaml
 * (Secrets by default; a CRD switched from v1 to v2, Roles and RoleBindings
 * granting what the migrator does not hold, ClusterRoles through the kubectl
 * bridge, each with the narrow grant `svm grant` prints), with metadata-only
 * lists and empty patches only (the API servers' own request counters); a
 * resource outside the rights fails clearly with the 403; and the same token
 * is refused (403) everything outside the role, including widening its own
 * rights. The attack table on the shipped manifests is test-worker-rights.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { svmPath } from '../src/activities';
import type { MigrationResult } from '../src/client';
import { grantManifests } from '../src/client/grant';
import { installCrds } from '../src/client/cli-migrate';
import { readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { ENDPOINTSLICES_PATH, IDENTITY_LEASES_PATH } from '../src/kube/apiservers';
import { KubeClient } from '../src/kube/client';
import { applyCrd, createObjects, ensureNamespace, parallel, testCrd } from './helpers/crd';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  canI,
  DEPLOY_DIR,
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  whoAmI,
  withWorkerAs,
  writeTokenKubeconfig,
  type Manifest,
} from './helpers/rbac-identity';
import { migrationResult } from './helpers/waits';

const run = promisify(execFile);
const SA_NAMESPACE = 'svm-system';
const SA_NAME = 'svm-migrator';
const SA_USER = `system:serviceaccount:${SA_NAMESPACE}:${SA_NAME}`;
const RBAC = 'rbac.authorization.k8s.io';

let plane: TestPlane;
let sa: KubeClient; // every request as the ServiceAccount
let kubeconfig: string;

before(async () => {
  plane = await testPlane();
  await serverSideApply(plane.kube, [
    ...readManifests('namespace.yaml'),
    ...readManifests('rbac.yaml'),
    ...readManifests('worker-policy.yaml'),
  ]);
  await installCrds(plane.kube);
  const token = await serviceAccountToken(plane.kube, SA_NAMESPACE, SA_NAME);
  kubeconfig = writeTokenKubeconfig(plane.kube.server, token, SA_NAME);
  sa = KubeClient.fromKubeconfig(kubeconfig);
});
after(async () => {
  sa?.close();
  removeTokenKubeconfig(kubeconfig);
  await plane?.close();
});

const kubectl = (args: string[]) => run(plane.env.KUBECTL!, ['--kubeconfig', plane.env.KUBECONFIG!, ...args], { timeout: 120_000 });

/** The API server's message of a refused request (asserting it was a 403). */
async function refused(method: string, path: string, body?: unknown, contentType?: string): Promise<string> {
  const res = await sa.raw(method, path, { body: body === undefined ? undefined : JSON.stringify(body), contentType });
  assert.equal(res.status, 403, `${method} ${path}: expected 403, got ${res.status} ${res.body.slice(0, 300)}`);
  const status = JSON.parse(res.body) as { kind: string; reason: string; code: number; message: string };
  assert.equal(status.kind, 'Status');
  assert.equal(status.reason, 'Forbidden');
  assert.equal(status.code, 403);
  return status.message;
}

const forbidden = (what: string, verb: string, resource: string, group: string, namespace?: string) =>
  `${what} is forbidden: User "${SA_USER}" cannot ${verb} resource "${resource}" in API group "${group}" ${namespace ? `in the namespace "${namespace}"` : 'at the cluster scope'}`;

void test('deploy/ renders with kustomize and the API server accepts all of it (server dry run) with no Pod Security warning', async () => {
  const rendered = YAML.parseAllDocuments((await kubectl(['kustomize', DEPLOY_DIR])).stdout).map((d) => d.toJS() as Manifest);
  assert.deepEqual(rendered.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
    'ClusterRole/svm-migrator',
    'ClusterRole/svm-migrator-crd-status',
    'ClusterRoleBinding/svm-migrator',
    'ClusterRoleBinding/svm-migrator-crd-status',
    'CustomResourceDefinition/storagestates.migration.k8s.io',
    'CustomResourceDefinition/storageversionmigrations.migration.k8s.io',
    'Deployment/svm-worker',
    'FlowSchema/svm-migrator',
    'FlowSchema/svm-migrator-leases',
    'Namespace/svm-system',
    'PriorityLevelConfiguration/svm-migrator',
    'Role/svm-migrator-events',
    'Role/svm-migrator-leases',
    'RoleBinding/svm-migrator-events',
    'RoleBinding/svm-migrator-leases',
    'Service/svm-worker-metrics',
    'ServiceAccount/svm-migrator',
    'ValidatingAdmissionPolicy/svm-storageversionmigrations',
    'ValidatingAdmissionPolicy/svm-worker-no-op-only',
    'ValidatingAdmissionPolicyBinding/svm-storageversionmigrations',
    'ValidatingAdmissionPolicyBinding/svm-worker-no-op-only',
  ]);
  const dry = await kubectl([
    'apply',
    '-k',
    DEPLOY_DIR,
    '--server-side',
    '--field-manager=svm-test',
    '--force-conflicts',
    '--dry-run=server',
  ]);
  assert.match(dry.stdout, /deployment\.apps\/svm-worker serverside-applied \(server dry run\)/);
  assert.match(dry.stdout, /service\/svm-worker-metrics serverside-applied \(server dry run\)/);
  assert.match(
    dry.stdout,
    /validatingadmissionpolicy\.admissionregistration\.k8s\.io\/svm-storageversionmigrations serverside-applied \(server dry run\)/,
  );
  assert.equal(dry.stderr, '', 'the API server warned about deploy/');

  // The namespace enforces "restricted": a Deployment without our securityContext is warned about (the control).
  const bare = await plane.kube.raw('POST', `/apis/apps/v1/namespaces/${SA_NAMESPACE}/deployments`, {
    query: { dryRun: 'All' },
    body: JSON.stringify({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'bare' },
      spec: {
        selector: { matchLabels: { a: 'b' } },
        template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      },
    }),
  });
  assert.equal(bare.status, 201);
  assert.match(String(bare.headers.warning), /would violate PodSecurity \\"restricted:latest\\"/);

  // The worker's settings and probes agree with what it serves.
  const deployment = readManifests('deployment.yaml').find((o) => o.kind === 'Deployment') as unknown as {
    spec: {
      template: {
        spec: {
          serviceAccountName: string;
          containers: Array<{
            args: string[];
            env: Array<{ name: string; value: string }>;
            livenessProbe: { httpGet: { path: string; port: number } };
            readinessProbe: { httpGet: { path: string; port: number } };
            securityContext: Record<string, unknown>;
          }>;
        };
      };
    };
  };
  const pod = deployment.spec.template.spec;
  const c = pod.containers[0]!;
  assert.equal(pod.serviceAccountName, SA_NAME);
  assert.deepEqual(c.args, ['worker']);
  const env = Object.fromEntries(c.env.map((e) => [e.name, e.value]));
  assert.deepEqual(Object.keys(env).sort(), [
    'SVM_CLUSTER',
    'SVM_METRICS_HOST',
    'SVM_METRICS_PORT',
    'SVM_PROMOTE_VERSION',
    'SVM_REQUIRE_FENCE',
    'SVM_REQUIRE_STATIC_FENCE',
    'TEMPORAL_ADDRESS',
    'TEMPORAL_DEPLOYMENT_NAME',
    'TEMPORAL_NAMESPACE',
    'TEMPORAL_TASK_QUEUE',
  ]);
  // A version of the svm-worker Worker Deployment that makes itself Current (docs/deploy.md, "Upgrading svm"); no
  // TEMPORAL_WORKER_BUILD_ID: the build ID is the image's own <version>-<revision>, new with every image.
  assert.equal(env.TEMPORAL_DEPLOYMENT_NAME, 'svm-worker');
  assert.equal(env.SVM_PROMOTE_VERSION, 'true');
  assert.equal(env.SVM_METRICS_PORT, '9464');
  assert.equal(env.SVM_METRICS_HOST, '0.0.0.0');
  assert.equal(env.SVM_REQUIRE_STATIC_FENCE, 'true');
  assert.equal(env.SVM_REQUIRE_FENCE, 'true');
  for (const probe of [c.livenessProbe, c.readinessProbe]) assert.deepEqual(probe.httpGet, { path: '/healthz', port: 9464 });
  assert.deepEqual(c.securityContext, {
    runAsNonRoot: true,
    runAsUser: 1000,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  });
});

/** Applies the narrow grant of each resource (`svm grant`); returns a function that removes them. */
async function grant(resources: Array<{ group: string; resource: string; custom: boolean }>): Promise<() => Promise<void>> {
  const objects = resources.flatMap((r) => YAML.parseAllDocuments(grantManifests(r)).map((d) => d.toJS() as Manifest));
  await serverSideApply(plane.kube, objects);
  return async () => {
    for (const o of objects)
      await plane.kube.raw(
        'DELETE',
        `/apis/${RBAC}/v1/${o.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings'}/${o.metadata.name}`,
      );
  };
}

/** apiserver_request_total of one verb on one resource, summed over every API server of the plane. */
async function requestCount(verb: string, group: string, resource: string): Promise<number> {
  let n = 0;
  for (let i = 0; i < plane.apiserverUrls.length; i++) {
    const text = (await plane.kubeOf(i).request('GET', '/metrics')).body;
    for (const line of text.split('\n')) {
      if (!line.startsWith('apiserver_request_total{')) continue;
      if (!line.includes(`verb="${verb}"`) || !line.includes(`resource="${resource}"`) || !line.includes(`group="${group}"`)) continue;
      if (!line.includes('subresource=""')) continue;
      n += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return n;
}

void test('a whole migration runs as svm-migrator: Secrets by default; a CRD v1 -> v2, Roles and RoleBindings it could not grant, ClusterRoles through the bridge, each with its narrow grant', async () => {
  assert.equal((await whoAmI(sa)).username, SA_USER);
  // It holds neither escalate nor bind, nor what the Roles below grant.
  for (const resource of ['roles', 'clusterroles']) {
    assert.equal(await canI(sa, { verb: 'escalate', group: RBAC, resource }), false, `escalate ${resource}`);
    assert.equal(await canI(sa, { verb: 'bind', group: RBAC, resource }), false, `bind ${resource}`);
  }
  assert.equal(await canI(sa, { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'default' }), false);

  // The watches the worker keeps (bridge, agreement watcher) and the reads of
  // the agreement check: a refused watch would only make the worker re-list
  // quietly, so each is tried here for real.
  // The StorageVersion API (alpha) is off unless the plane turns it on: watched only when served.
  const storageVersionsServed = (await plane.kube.raw('GET', '/apis/internal.apiserver.k8s.io/v1alpha1')).status === 200;
  for (const path of [
    '/apis/migration.k8s.io/v1alpha1/storageversionmigrations',
    '/apis/migration.k8s.io/v1alpha1/storagestates',
    ...(storageVersionsServed ? ['/apis/internal.apiserver.k8s.io/v1alpha1/storageversions'] : []),
    '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
    IDENTITY_LEASES_PATH,
    ENDPOINTSLICES_PATH,
  ]) {
    for (const query of [{ limit: 1 }, { watch: 'true', timeoutSeconds: 1 }]) {
      const res = await sa.request('GET', path, { query });
      assert.equal(res.status, 200, `GET ${path} ${JSON.stringify(query)}`);
    }
  }
  // The writes of the role, including those this run may not reach (the trigger's StorageStates).
  for (const [verb, group, resource, subresource] of [
    ['create', 'migration.k8s.io', 'storageversionmigrations'],
    ['patch', 'migration.k8s.io', 'storageversionmigrations'],
    ['patch', 'migration.k8s.io', 'storageversionmigrations', 'status'],
    ['create', 'migration.k8s.io', 'storagestates'],
    ['patch', 'migration.k8s.io', 'storagestates', 'status'],
    ['patch', 'apiextensions.k8s.io', 'customresourcedefinitions', 'status'],
    ['get', 'internal.apiserver.k8s.io', 'storageversions'],
  ] as const) {
    assert.equal(
      await canI(sa, { verb, group, resource, subresource }),
      true,
      `${verb} ${resource}${subresource ? '/' + subresource : ''}.${group}`,
    );
  }

  // A CRD whose objects are stored at v1, then switched to v2.
  const crd = testCrd(`${uniq('rbac')}.svm.test`);
  const crdNs = uniq('rbac-w');
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 300, { namespace: crdNs });
  await applyCrd(plane.kube, crd, 'v2');
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v1`]: 300,
  });

  // Secrets, Roles granting what the migrator does not hold, RoleBindings to cluster-admin.
  const ns = uniq('rbac-ns');
  await ensureNamespace(plane.kube, ns);
  const SECRETS = 60;
  const ROLES = 20;
  const BINDINGS = 10;
  const CLUSTER_ROLES = 10;
  await parallel(SECRETS, 16, async (i) => {
    await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `s-${i}` }, stringData: { password: `pw-${i}` } }),
    });
  });
  const roleRules = (i: number) => [
    { apiGroups: [''], resources: ['pods/exec', 'pods/attach'], verbs: ['create', 'get'] },
    { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'watch', 'delete'] },
    ...(i % 2 === 0 ? [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] : []),
  ];
  await parallel(ROLES, 8, async (i) => {
    await plane.kube.request('POST', `/apis/${RBAC}/v1/namespaces/${ns}/roles`, {
      body: JSON.stringify({ apiVersion: `${RBAC}/v1`, kind: 'Role', metadata: { name: `r-${i}` }, rules: roleRules(i) }),
    });
  });
  await parallel(BINDINGS, 8, async (i) => {
    const roleRef =
      i % 2 === 0 ? { apiGroup: RBAC, kind: 'ClusterRole', name: 'cluster-admin' } : { apiGroup: RBAC, kind: 'Role', name: `r-${i}` };
    await plane.kube.request('POST', `/apis/${RBAC}/v1/namespaces/${ns}/rolebindings`, {
      body: JSON.stringify({
        apiVersion: `${RBAC}/v1`,
        kind: 'RoleBinding',
        metadata: { name: `rb-${i}` },
        roleRef,
        subjects: [{ kind: 'User', apiGroup: RBAC, name: `someone-${i}` }],
      }),
    });
  });
  const clusterRoleNames = Array.from({ length: CLUSTER_ROLES }, (_, i) => `${ns}-cr-${i}`);
  await parallel(CLUSTER_ROLES, 8, async (i) => {
    const body =
      i === 0
        ? { aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [`${ns}/aggregate`]: 'true' } }] }, rules: [] }
        : {
            rules: [
              { apiGroups: [''], resources: ['nodes/proxy', 'pods/exec'], verbs: ['*'] },
              ...(i % 2 === 0
                ? [
                    { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
                    { nonResourceURLs: ['*'], verbs: ['*'] },
                  ]
                : []),
            ],
          };
    await plane.kube.request('POST', `/apis/${RBAC}/v1/clusterroles`, {
      body: JSON.stringify({ apiVersion: `${RBAC}/v1`, kind: 'ClusterRole', metadata: { name: clusterRoleNames[i] }, ...body }),
    });
  });

  // Outside the default rights until granted, one resource at a time.
  for (const [group, resource] of [
    [crd.group, crd.plural],
    [RBAC, 'roles'],
    [RBAC, 'rolebindings'],
    [RBAC, 'clusterroles'],
  ] as const)
    assert.equal(await canI(sa, { verb: 'patch', group, resource }), false, `patch ${resource}.${group} before its grant`);
  const ungrant = await grant([
    { group: crd.group, resource: crd.plural, custom: true },
    { group: RBAC, resource: 'roles', custom: false },
    { group: RBAC, resource: 'rolebindings', custom: false },
    { group: RBAC, resource: 'clusterroles', custom: false },
  ]);
  const secretWrites0 = { patch: await requestCount('PATCH', '', 'secrets'), put: await requestCount('PUT', '', 'secrets') };

  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString('utf8'));
      cb();
    },
  });
  const bridgeName = uniq('clusterroles');
  const results = await withWorkerAs(
    plane,
    kubeconfig,
    async (m, w) => {
      // Every Kubernetes call of the worker is made as the ServiceAccount.
      assert.equal((await whoAmI(w.kube)).username, SA_USER);
      const opts = { chunkSize: 50, concurrency: 8 };
      const handles = await Promise.all(
        [`${crd.plural}.${crd.group}`, 'secrets', `roles.${RBAC}`, `rolebindings.${RBAC}`].map((r) => m.start(r, opts)),
      );
      // ClusterRoles the kubectl way: the bridge (list/watch/patch of StorageVersionMigrations) starts it.
      await plane.kube.request('POST', `/apis/migration.k8s.io/v1alpha1/storageversionmigrations`, {
        body: JSON.stringify({
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageVersionMigration',
          metadata: { name: bridgeName },
          spec: { resource: { group: RBAC, resource: 'clusterroles' } },
        }),
      });
      await eventually(
        'the bridge to finish the ClusterRole migration',
        async () => {
          const o = await plane.kube.getJson<{ status?: { phase?: string } }>(svmPath(bridgeName));
          return ['Succeeded', 'Failed', 'Aborted'].includes(o.status?.phase ?? '');
        },
        120_000,
      );
      const viaBridge = await m.handle(`clusterroles.${RBAC}`);
      const all = await Promise.all([...handles, viaBridge].map(async (h) => [h.resource.resource, await migrationResult(h)] as const));
      return Object.fromEntries(all) as Record<string, MigrationResult>;
    },
    { settings: { bridge: true }, logTo: sink },
  ).finally(ungrant);
  // The rewrite is the empty patch: the API servers counted PATCHes of Secrets (one or more per Secret), no PUT.
  const secretWrites = {
    patch: (await requestCount('PATCH', '', 'secrets')) - secretWrites0.patch,
    put: (await requestCount('PUT', '', 'secrets')) - secretWrites0.put,
  };
  assert.ok(secretWrites.patch >= SECRETS, `PATCHes of Secrets: ${secretWrites.patch}`);
  assert.equal(secretWrites.put, 0, 'a Secret was PUT');
  const warnings = logs.filter((l) => /"level":"(warn|error)"/.test(l));
  const expected: Record<string, number> = {
    [crd.plural]: 300,
    secrets: SECRETS,
    roles: ROLES,
    rolebindings: BINDINGS,
    clusterroles: CLUSTER_ROLES,
  };
  for (const [resource, atLeast] of Object.entries(expected)) {
    const r = results[resource]!;
    assert.equal(r.phase, 'Succeeded', `${resource}: ${r.message}\n${warnings.join('')}`);
    assert.equal(r.counters.failed, 0, `${resource}: ${JSON.stringify(r.failures)}`);
    assert.ok(r.counters.migrated >= atLeast, `${resource}: migrated ${r.counters.migrated} of at least ${atLeast}`);
    // Its kubectl mirror, created and updated by the ServiceAccount, says so too.
    assert.ok(r.migrationObjects.length > 0, `${resource} has no StorageVersionMigration object`);
    for (const name of r.migrationObjects) {
      const o = await plane.kube.getJson<{ status?: { phase?: string } }>(svmPath(name));
      assert.equal(o.status?.phase, 'Succeeded', `StorageVersionMigration ${name}`);
    }
  }
  assert.equal(results[crd.plural]!.counters.rewritten, 300, 'every custom object was re-encoded');
  assert.ok(results.clusterroles!.migrationObjects.includes(bridgeName), 'the ClusterRole migration was started by the bridge');

  // etcd: every custom object is now stored at v2, and storedVersions was reduced by the ServiceAccount.
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 300,
  });
  const crdObj = await plane.kube.getJson<{ status: { storedVersions: string[] } }>(
    `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
  );
  assert.deepEqual(crdObj.status.storedVersions, ['v2']);

  // etcd: the built-in objects are all there, unchanged.
  const secrets = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(secrets.length, SECRETS);
  for (const s of secrets) {
    const i = Number(s.key.split('/s-')[1]);
    assert.equal(Buffer.from((s.object.data as { password: string }).password, 'base64').toString(), `pw-${i}`);
  }
  const roles = await readStoredObjects(plane.etcd, `/registry/roles/${ns}/`);
  assert.equal(roles.length, ROLES);
  for (const r of roles) {
    assert.equal(r.object.apiVersion, `${RBAC}/v1`);
    assert.deepEqual(r.object.rules, roleRules(Number(r.key.split('/r-')[1])));
  }
  assert.equal((await readStoredObjects(plane.etcd, `/registry/rolebindings/${ns}/`)).length, BINDINGS);
  const clusterRoles = (await readStoredObjects(plane.etcd, '/registry/clusterroles/')).map((o) =>
    o.key.slice('/registry/clusterroles/'.length),
  );
  for (const name of clusterRoleNames) assert.ok(clusterRoles.includes(name), `etcd has no ClusterRole ${name}`);
  assert.ok(clusterRoles.includes('cluster-admin') && clusterRoles.includes(SA_NAME));
});

void test('svm-migrator is refused (403) what lies outside its role', async () => {
  const ns = uniq('rbac-deny');
  await ensureNamespace(plane.kube, ns);
  await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'keep' }, stringData: { k: 'v' } }),
  });

  // Creating a ConfigMap.
  assert.equal(
    await refused('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'x' },
      data: { a: 'b' },
    }),
    forbidden('configmaps', 'create', 'configmaps', '', ns),
  );
  // Deleting a Secret.
  assert.equal(await refused('DELETE', `/api/v1/namespaces/${ns}/secrets/keep`), forbidden('secrets "keep"', 'delete', 'secrets', '', ns));
  // Reading one Secret, or watching them.
  assert.equal(await refused('GET', `/api/v1/namespaces/${ns}/secrets/keep`), forbidden('secrets "keep"', 'get', 'secrets', '', ns));
  assert.equal(await refused('GET', `/api/v1/namespaces/${ns}/secrets?watch=true`), forbidden('secrets', 'watch', 'secrets', '', ns));
  // Exec into a pod: refused before the pod is even looked up (there is no such pod).
  assert.equal(
    await refused('POST', `/api/v1/namespaces/${ns}/pods/nosuchpod/exec?command=id&stdout=true`),
    forbidden('pods "nosuchpod"', 'create', 'pods/exec', '', ns),
  );
  // Pod logs.
  assert.equal(
    await refused('GET', `/api/v1/namespaces/${ns}/pods/nosuchpod/log`),
    forbidden('pods "nosuchpod"', 'get', 'pods/log', '', ns),
  );
  // Binding itself to cluster-admin.
  assert.equal(
    await refused('POST', `/apis/${RBAC}/v1/clusterrolebindings`, {
      apiVersion: `${RBAC}/v1`,
      kind: 'ClusterRoleBinding',
      metadata: { name: 'svm-migrator-is-admin' },
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: SA_NAME, namespace: SA_NAMESPACE }],
    }),
    forbidden('clusterrolebindings.rbac.authorization.k8s.io', 'create', 'clusterrolebindings', RBAC),
  );
  // Updating (PUT) a ConfigMap: the re-encode is a patch, update is not granted.
  await plane.kube.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
    body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { a: 'b' } }),
  });
  assert.equal(
    await refused('PUT', `/api/v1/namespaces/${ns}/configmaps/c`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } }),
    forbidden('configmaps "c"', 'update', 'configmaps', '', ns),
  );
});

void test('RBAC objects are outside the default rights; with the grant of one migration a Role is re-encoded, but no change widens the rights', async () => {
  const ns = uniq('rbac-esc');
  await ensureNamespace(plane.kube, ns);
  const rules = [{ apiGroups: [''], resources: ['pods/exec'], verbs: ['create'] }];
  await plane.kube.request('POST', `/apis/${RBAC}/v1/namespaces/${ns}/roles`, {
    body: JSON.stringify({ apiVersion: `${RBAC}/v1`, kind: 'Role', metadata: { name: 'exec' }, rules }),
  });
  const ref = { group: RBAC, version: 'v1', resource: 'roles', kind: 'Role' };
  const rolePath = `/apis/${RBAC}/v1/namespaces/${ns}/roles/exec`;
  const rv = async () => (await plane.kube.getJson<{ metadata: { resourceVersion: string } }>(rolePath)).metadata.resourceVersion;
  const listed = await rv();

  // Without the grant: neither the re-encode nor a list.
  assert.equal(
    await refused(
      'PATCH',
      rolePath,
      { apiVersion: `${RBAC}/v1`, kind: 'Role', metadata: { resourceVersion: listed } },
      'application/merge-patch+json',
    ),
    forbidden('roles.rbac.authorization.k8s.io "exec"', 'patch', 'roles', RBAC, ns),
  );
  const ungrant = await grant([{ group: RBAC, resource: 'roles', custom: false }]);
  try {
    await eventually('the grant to be in force', () => canI(sa, { verb: 'patch', group: RBAC, resource: 'roles', namespace: ns }));
    // The re-encode: admitted, and nothing is written (the Role is already current).
    assert.equal(await sa.reencode(ref, { name: 'exec', namespace: ns, resourceVersion: listed }), listed);
    // Any real change of the same Role is refused, by the fence (and RBAC's escalation check behind it).
    const res = await sa.raw('PATCH', rolePath, {
      body: JSON.stringify({ rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] }),
      contentType: 'application/merge-patch+json',
    });
    assert.equal(res.status, 403, res.body.slice(0, 300));
    assert.equal(await rv(), listed, 'the Role was written');
    // Its own ClusterRole and the cluster-admin binding stay out of reach: the grant names roles only.
    assert.equal(
      await refused(
        'PATCH',
        `/apis/${RBAC}/v1/clusterroles/${SA_NAME}`,
        [{ op: 'add', path: '/rules/-', value: { apiGroups: [''], resources: ['secrets'], verbs: ['get'] } }],
        'application/json-patch+json',
      ),
      forbidden(`clusterroles.rbac.authorization.k8s.io "${SA_NAME}"`, 'patch', 'clusterroles', RBAC),
    );
    assert.equal(
      await refused(
        'PATCH',
        `/apis/${RBAC}/v1/clusterrolebindings/cluster-admin`,
        { subjects: [{ kind: 'ServiceAccount', name: SA_NAME, namespace: SA_NAMESPACE }] },
        'application/merge-patch+json',
      ),
      forbidden('clusterrolebindings.rbac.authorization.k8s.io "cluster-admin"', 'patch', 'clusterrolebindings', RBAC),
    );
  } finally {
    await ungrant();
  }
});

void test('a resource outside the rights (a custom resource without its grant) fails clearly with the 403; with the grant `svm grant` prints it migrates', async () => {
  const crd = testCrd(`${uniq('nogrant')}.svm.test`);
  const ns = uniq('rbac-nogrant');
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', 20, { namespace: ns });
  await applyCrd(plane.kube, crd, 'v2');
  const quietLog = { logTo: new Writable({ write: (_c, _e, cb) => cb() }) };
  const refusedRun = await withWorkerAs(plane, kubeconfig, async (m) => migrationResult(await m.start(crd.name)), quietLog);
  assert.equal(refusedRun.phase, 'Failed');
  assert.equal(refusedRun.message, `migration of ${crd.name} stopped: listing ${crd.name}: HTTP 403 Forbidden (RBAC: cannot list)`);

  const ungrant = await grant([{ group: crd.group, resource: crd.plural, custom: true }]);
  try {
    await eventually('the grant to be in force', () => canI(sa, { verb: 'patch', group: crd.group, resource: crd.plural }));
    const granted = await withWorkerAs(plane, kubeconfig, async (m) => migrationResult(await m.start(crd.name)), quietLog);
    assert.equal(granted.phase, 'Succeeded', granted.message);
    assert.equal(granted.counters.rewritten, 20);
  } finally {
    await ungrant();
  }
  assert.deepEqual((await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true })).byApiVersion, {
    [`${crd.group}/v2`]: 20,
  });
});
