/**
 * Someone holds the worker's token and tries everything it allows (DESIGN.md
 * rule 14, docs/security.md): on the shipped manifests, applied as an
 * operator applies them (deploy/ through kustomize on the current release,
 * the Helm chart's rendering on the previous one, each on a plane of that
 * release), every attempt to change, create, delete, reach through a
 * subresource or proxy, or switch the fence off is refused (403), and the
 * object's resourceVersion shows nothing was written (a refused create: no
 * object); a create right granted later is fenced too, and so is every write
 * of svm's own kinds but the ones the worker makes; the re-encode of each
 * kind (the empty merge patch svm sends) still passes and writes nothing when
 * the object is already current, and the worker's own Lease and Event
 * creates pass; the default rights cover every built-in stored resource the
 * fence can see and none it cannot.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, test } from 'node:test';
import YAML from 'yaml';
import type { Client } from '@temporalio/client';
import { Migrator } from '../src/client';
import { zeroCounters } from '../src/api/counters';
import { Placement } from '../src/contract/placement';
import { kubernetesEndpoints } from '../src/kube/apiservers';
import { CRDS_PATH, getCrd } from '../src/kube/crds';
import { checkDrop } from '../src/kube/drop-check';
import { migrationRecords } from '../src/kube/migration-record';
import { resolveResource } from '../src/kube/resolve';
import { readAgreement } from '../src/kube/server-agreements';
import { createMigratorWorker } from '../src/worker/worker';
import { installCrds } from '../src/client/cli-migrate';
import { grantManifests, UNFENCED_GROUPS } from '../src/client/grant';
import { etcdPrefix, readStoredObjects, storedVersions } from '../src/dev/etcd-truth';
import { restartApiserver } from '../src/dev/plane';
import { kubeVersions } from '../src/dev/tools';
import { KubeClient } from '../src/kube/client';
import { standardVersion } from '../src/kube/standard-migrations';
import { CREATED_BY_ANNOTATION } from '../src/activities/built-in';
import { applyCrd, createObjects, ensureNamespace, testCrd } from './helpers/crd';
import { completeAsForger } from './helpers/forge';
import { eventually } from './helpers/migrate';
import { migrationResult } from './helpers/waits';
import { previousPlane, removePlanes, testPlane, uniq, type TestPlane } from './helpers/plane';
import {
  canI,
  deleteManifests,
  DEPLOY_DIR,
  readManifests,
  removeTokenKubeconfig,
  serverSideApply,
  serviceAccountToken,
  writeTokenKubeconfig,
  withWorkerAs,
  type Manifest,
} from './helpers/rbac-identity';

const run = promisify(execFile);
const quiet = () => undefined;
const SA_NAMESPACE = 'svm-system';
const SA_NAME = 'svm-migrator';
const POLICY = 'svm-worker-no-op-only';
const MERGE = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';
const APPLY = 'application/apply-patch+yaml';

/** The plane this file brought up for the previous release when it ran alone (previousPlane), taken down at its end. */
let previousOwn: string | undefined;
after(async () => {
  if (previousOwn) await removePlanes(previousOwn);
});

/** The shipped worker objects as kustomize renders deploy/ (what `kubectl apply -k deploy/` applies). */
async function kustomized(plane: TestPlane): Promise<Manifest[]> {
  const { stdout } = await run(plane.env.KUBECTL!, ['kustomize', DEPLOY_DIR], { timeout: 120_000, maxBuffer: 64 << 20 });
  return YAML.parseAllDocuments(stdout).map((d) => d.toJS() as Manifest);
}

/** The same objects as the Helm chart renders them with its defaults. */
async function charted(): Promise<Manifest[]> {
  const { stdout: tools } = await run('bash', [path.join(__dirname, '..', 'scripts', 'tools.d', 'helm.sh')], { timeout: 1_800_000 });
  const helm = /^helm=(.+)$/m.exec(tools)![1]!;
  const home = mkdtempSync(path.join(tmpdir(), 'svm-rights-helm-'));
  try {
    const { stdout } = await run(helm, ['template', 'svm', path.join(__dirname, '..', 'charts', 'svm'), '-n', SA_NAMESPACE], {
      timeout: 120_000,
      maxBuffer: 64 << 20,
      env: { ...process.env, HELM_CONFIG_HOME: home, HELM_CACHE_HOME: home, HELM_DATA_HOME: home },
    });
    return [...readManifests('namespace.yaml'), ...YAML.parseAllDocuments(stdout).map((d) => d.toJS() as Manifest)];
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * What the attack needs of the shipped objects: identity, rights and the fence; not the worker's Deployment,
 * nor the policy on who may create a StorageVersionMigration (it would refuse the workflow-id annotation to the
 * other test files' workers, which run as the plane's admin).
 */
const RIGHTS_KINDS = [
  'Namespace',
  'ServiceAccount',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
];
const rightsOf = (manifests: Manifest[]) =>
  manifests.filter((o) => RIGHTS_KINDS.includes(o.kind) && !(o.kind.startsWith('ValidatingAdmissionPolicy') && o.metadata.name !== POLICY));

interface Attempt {
  what: string;
  method: string;
  path: string;
  body?: unknown;
  contentType?: string;
  /** Who must refuse it: RBAC, or the fence (the admission policy). */
  by: 'RBAC' | 'fence';
  /** An object (admin's path) whose resourceVersion must not move. */
  guards?: string;
  /** The object (admin's path) a refused create would have made: it must not exist after. */
  creates?: string;
}

interface Row {
  what: string;
  status: number;
  by: string;
}

async function attackTable(plane: TestPlane, release: string, manifests: Manifest[]): Promise<Row[]> {
  const admin = plane.kube;
  await serverSideApply(admin, rightsOf(manifests));
  const token = await serviceAccountToken(admin, SA_NAMESPACE, SA_NAME);
  const kubeconfig = writeTokenKubeconfig(admin.server, token, SA_NAME, plane.dir);
  const sa = KubeClient.fromKubeconfig(kubeconfig);
  const ns = uniq('attack');
  const node = uniq('node');
  const hook = uniq('hook');
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    await ensureNamespace(admin, ns);
    cleanup.push(() => admin.raw('DELETE', `/api/v1/namespaces/${ns}`));
    const post = async (p: string, body: Record<string, unknown>) => {
      await admin.request('POST', p, { body: JSON.stringify(body) });
    };
    const base = `/api/v1/namespaces/${ns}`;
    const apps = `/apis/apps/v1/namespaces/${ns}`;
    await post(`${base}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' } });
    await post(`${base}/secrets`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' }, stringData: { password: 'hunter2' } });
    await post(`${base}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'c', labels: { a: 'b' }, annotations: { note: 'x' } },
      data: { k: 'v' },
    });
    await post(`${base}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'kept', finalizers: ['example.com/keep'] },
      data: { k: 'v' },
    });
    await post(`${base}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p' },
      spec: { containers: [{ name: 'c', image: 'busybox' }] },
    });
    await post(`${base}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'svc' },
      spec: { ports: [{ port: 80 }], selector: { a: 'b' } },
    });
    await post(`${apps}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { a: 'b' } },
        template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      },
    });
    await post(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'leader' },
      spec: { holderIdentity: 'controller-a', leaseDurationSeconds: 15 },
    });
    // The namespace goes only once the finalizer is gone.
    cleanup.push(() =>
      admin.raw('PATCH', `${base}/configmaps/kept`, { body: JSON.stringify({ metadata: { finalizers: null } }), contentType: MERGE }),
    );
    await post('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: node } });
    cleanup.push(() => admin.raw('DELETE', `/api/v1/nodes/${node}`));
    await post('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: hook },
      webhooks: [],
    });
    cleanup.push(() => admin.raw('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${hook}`));
    // A custom resource the operator granted with `svm grant` (the fence guards it all the same), and its CRD
    // stored at v2 with storedVersions [v1, v2].
    const crd = testCrd(`${uniq('atk')}.svm.test`);
    await applyCrd(admin, crd, 'v1');
    await createObjects(admin, crd, 'v1', 1, { namespace: ns });
    await applyCrd(admin, crd, 'v2');
    cleanup.push(() => admin.raw('DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`));
    const grant = YAML.parseAllDocuments(grantManifests({ group: crd.group, resource: crd.plural, custom: true })).map(
      (d) => d.toJS() as Manifest,
    );
    await serverSideApply(admin, grant);
    cleanup.push(() => admin.raw('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${grant[1]!.metadata.name}`));
    cleanup.push(() => admin.raw('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${grant[0]!.metadata.name}`));
    const cr = `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}/w-000000`;
    const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`;
    const fenceBinding = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${POLICY}`;
    const fencePolicy = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${POLICY}`;
    const lease = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/leader`;
    // svm's own records (the CRDs of migration.k8s.io), and the standard API where the release serves it.
    await installCrds(admin);
    const standard = await standardVersion(admin, true);
    // A create right someone grants the worker later (a binding of its own, or one to its groups): fenced all the same.
    await post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'create' },
      rules: [{ apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['create'] }],
    });
    await post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'create' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'create' },
      subjects: [{ kind: 'ServiceAccount', name: SA_NAME, namespace: SA_NAMESPACE }],
    });
    await eventually('the create right to be in force', () => canI(sa, { verb: 'create', resource: 'configmaps', namespace: ns }), 30_000);
    // In the worker's namespace, where its Role lets it create, update and delete Leases: one named as a budget
    // member's (no member label: no worker counts it) and one of another name.
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${SA_NAMESPACE}/leases`;
    const member = uniq('svm-worker-attack');
    const other = uniq('other');
    for (const name of [member, other]) {
      await post(leases, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name },
        spec: { holderIdentity: 'replica-a', leaseDurationSeconds: 15 },
      });
      cleanup.push(() => admin.raw('DELETE', `${leases}/${name}`));
    }
    const absent = {
      configMap: uniq('new'),
      secret: uniq('new'),
      lease: uniq('lease'),
      memberLease: uniq('svm-worker-day'),
      storageState: uniq('state'),
      migration: uniq('svm'),
      builtIn: uniq('kcm'),
      event: uniq('event'),
    };
    const svms = '/apis/migration.k8s.io/v1alpha1/storageversionmigrations';
    const storageStates = '/apis/migration.k8s.io/v1alpha1/storagestates';
    const standardSvms = standard ? `/apis/storagemigration.k8s.io/${standard}/storageversionmigrations` : undefined;
    const events = '/api/v1/namespaces/default/events';
    // Should a refused create go through after all, it is not left behind.
    for (const p of [
      `${base}/configmaps/${absent.configMap}`,
      `${base}/secrets/${absent.secret}`,
      `${leases}/${absent.lease}`,
      `${leases}/${absent.memberLease}`,
      `${storageStates}/${absent.storageState}`,
      `${svms}/${absent.migration}`,
      ...(standardSvms ? [`${standardSvms}/${absent.builtIn}`] : []),
      `${events}/${absent.event}`,
    ])
      cleanup.push(() => admin.raw('DELETE', p));

    // The fence takes effect a moment after it is created: wait until it denies (a ConfigMap of its own as the probe).
    await post(`${base}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'probe' }, data: { k: 'v' } });
    let last = '';
    await eventually(
      'the fence to deny a change',
      async () => {
        const r = await sa.raw('PATCH', `${base}/configmaps/probe`, {
          body: JSON.stringify({ data: { k: uniq('p') } }),
          contentType: MERGE,
        });
        last = `${r.status} ${r.body.slice(0, 300)}`;
        return r.status === 403 && r.body.includes(POLICY);
      },
      30_000,
    ).catch((err: Error) => {
      throw new Error(`${release}: ${err.message}; the last answer: ${last}`);
    });

    const attempts: Attempt[] = [
      // Content and metadata of every kind, by every kind of patch.
      {
        what: 'ConfigMap data (merge patch)',
        method: 'PATCH',
        path: `${base}/configmaps/c`,
        body: { data: { k: 'w' } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'ConfigMap labels (JSON patch)',
        method: 'PATCH',
        path: `${base}/configmaps/c`,
        body: [{ op: 'replace', path: '/metadata/labels/a', value: 'z' }],
        contentType: JSON_PATCH,
        by: 'fence',
      },
      {
        what: 'ConfigMap annotations (server-side apply)',
        method: 'PATCH',
        path: `${base}/configmaps/c?fieldManager=x&force=true`,
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', annotations: { note: 'y' } } },
        contentType: APPLY,
        by: 'fence',
      },
      {
        what: 'ConfigMap ownerReferences to a missing owner (the garbage collector would delete it)',
        method: 'PATCH',
        path: `${base}/configmaps/c`,
        body: {
          metadata: {
            ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'gone', uid: '00000000-0000-0000-0000-000000000001' }],
          },
        },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'ConfigMap finalizers added',
        method: 'PATCH',
        path: `${base}/configmaps/c`,
        body: { metadata: { finalizers: ['example.com/block'] } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'ConfigMap finalizers stripped',
        method: 'PATCH',
        path: `${base}/configmaps/kept`,
        body: { metadata: { finalizers: null } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'Secret data',
        method: 'PATCH',
        path: `${base}/secrets/s`,
        body: { data: { password: Buffer.from('mine').toString('base64') } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'Deployment spec (replicas)',
        method: 'PATCH',
        path: `${apps}/deployments/d`,
        body: { spec: { replicas: 0 } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'Deployment pod template (image)',
        method: 'PATCH',
        path: `${apps}/deployments/d`,
        body: [{ op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'evil' }],
        contentType: JSON_PATCH,
        by: 'fence',
      },
      {
        what: 'custom resource spec (granted resource)',
        method: 'PATCH',
        path: cr,
        body: { spec: { index: -1 } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'Node taints',
        method: 'PATCH',
        path: `/api/v1/nodes/${node}`,
        body: { spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'leader Lease holder',
        method: 'PATCH',
        path: lease,
        body: { spec: { holderIdentity: 'attacker' } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'CRD spec',
        method: 'PATCH',
        path: crdPath,
        body: {
          spec: {
            versions: [
              { name: 'v1', served: false, storage: false, schema: { openAPIV3Schema: { type: 'object' } } },
              { name: 'v2', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object' } } },
            ],
          },
        },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'CRD status.storedVersions set to a version not stored',
        method: 'PATCH',
        path: `${crdPath}/status`,
        body: { status: { storedVersions: ['v1'] } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'CRD status.storedVersions widened',
        method: 'PATCH',
        path: `${crdPath}/status`,
        body: { status: { storedVersions: ['v1', 'v2', 'v3'] } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: 'CRD status conditions',
        method: 'PATCH',
        path: `${crdPath}/status`,
        body: {
          status: {
            conditions: [{ type: 'Established', status: 'False', reason: 'x', message: 'x', lastTransitionTime: new Date().toISOString() }],
          },
        },
        contentType: MERGE,
        by: 'fence',
      },
      // Subresources and proxies.
      {
        what: 'deployments/scale',
        method: 'PATCH',
        path: `${apps}/deployments/d/scale`,
        body: { spec: { replicas: 0 } },
        contentType: MERGE,
        by: 'RBAC',
        guards: `${apps}/deployments/d`,
      },
      {
        what: 'deployments/status',
        method: 'PATCH',
        path: `${apps}/deployments/d/status`,
        body: { status: { replicas: 9 } },
        contentType: MERGE,
        by: 'RBAC',
        guards: `${apps}/deployments/d`,
      },
      {
        what: 'pods/ephemeralcontainers',
        method: 'PATCH',
        path: `${base}/pods/p/ephemeralcontainers`,
        body: { spec: { ephemeralContainers: [{ name: 'shell', image: 'busybox', command: ['sh'] }] } },
        contentType: 'application/strategic-merge-patch+json',
        by: 'RBAC',
        guards: `${base}/pods/p`,
      },
      { what: 'pods/exec', method: 'POST', path: `${base}/pods/p/exec?command=id&stdout=true`, by: 'RBAC' },
      { what: 'pods/proxy (PUT)', method: 'PUT', path: `${base}/pods/p/proxy/`, body: {}, by: 'RBAC', guards: `${base}/pods/p` },
      {
        what: 'services/proxy (PUT)',
        method: 'PUT',
        path: `${base}/services/svc/proxy/`,
        body: {},
        by: 'RBAC',
        guards: `${base}/services/svc`,
      },
      { what: 'nodes/proxy (GET)', method: 'GET', path: `/api/v1/nodes/${node}/proxy/`, by: 'RBAC' },
      // The fence itself and what it cannot see.
      {
        what: "the fence's binding to Audit",
        method: 'PATCH',
        path: fenceBinding,
        body: { spec: { validationActions: ['Audit'] } },
        contentType: MERGE,
        by: 'RBAC',
        guards: fenceBinding,
      },
      {
        what: "the fence's policy",
        method: 'PATCH',
        path: fencePolicy,
        body: { spec: { failurePolicy: 'Ignore' } },
        contentType: MERGE,
        by: 'RBAC',
        guards: fencePolicy,
      },
      { what: "the fence's binding deleted", method: 'DELETE', path: fenceBinding, by: 'RBAC', guards: fenceBinding },
      {
        what: 'a webhook configuration',
        method: 'PATCH',
        path: `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${hook}`,
        body: { metadata: { labels: { x: 'y' } } },
        contentType: MERGE,
        by: 'RBAC',
      },
      {
        what: 'its own ClusterRole widened',
        method: 'PATCH',
        path: `/apis/rbac.authorization.k8s.io/v1/clusterroles/${SA_NAME}`,
        body: [{ op: 'add', path: '/rules/-', value: { apiGroups: [''], resources: ['secrets'], verbs: ['get'] } }],
        contentType: JSON_PATCH,
        by: 'RBAC',
        guards: `/apis/rbac.authorization.k8s.io/v1/clusterroles/${SA_NAME}`,
      },
      {
        what: 'a ClusterRoleBinding to cluster-admin',
        method: 'POST',
        path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
        body: {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: 'svm-is-admin' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
          subjects: [{ kind: 'ServiceAccount', name: SA_NAME, namespace: SA_NAMESPACE }],
        },
        by: 'RBAC',
      },
      // Other verbs.
      {
        what: 'create a ConfigMap (no create right)',
        method: 'POST',
        path: `/api/v1/namespaces/${SA_NAMESPACE}/configmaps`,
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: absent.configMap } },
        by: 'RBAC',
        creates: `/api/v1/namespaces/${SA_NAMESPACE}/configmaps/${absent.configMap}`,
      },
      // Creates: a right granted later, and svm's own kinds in any shape but the worker's.
      {
        what: 'create a ConfigMap (a create right granted)',
        method: 'POST',
        path: `${base}/configmaps`,
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: absent.configMap }, data: { k: 'v' } },
        by: 'fence',
        creates: `${base}/configmaps/${absent.configMap}`,
      },
      {
        what: 'create a Secret (a create right granted)',
        method: 'POST',
        path: `${base}/secrets`,
        body: { apiVersion: 'v1', kind: 'Secret', metadata: { name: absent.secret }, stringData: { password: 'mine' } },
        by: 'fence',
        creates: `${base}/secrets/${absent.secret}`,
      },
      {
        what: `create a Lease of another name in ${SA_NAMESPACE}`,
        method: 'POST',
        path: leases,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: absent.lease }, spec: { leaseDurationSeconds: 15 } },
        by: 'fence',
        creates: `${leases}/${absent.lease}`,
      },
      {
        what: "create a budget member's Lease for a day",
        method: 'POST',
        path: leases,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: absent.memberLease },
          spec: { holderIdentity: 'attacker', leaseDurationSeconds: 86_400 },
        },
        by: 'fence',
        creates: `${leases}/${absent.memberLease}`,
      },
      {
        what: "hold a budget member's Lease for a day",
        method: 'PATCH',
        path: `${leases}/${member}`,
        body: { spec: { holderIdentity: 'attacker', leaseDurationSeconds: 86_400 } },
        contentType: MERGE,
        by: 'fence',
      },
      {
        what: `delete a Lease in ${SA_NAMESPACE} that is not a budget member's`,
        method: 'DELETE',
        path: `${leases}/${other}`,
        by: 'fence',
      },
      {
        what: 'create a StorageState not named for its resource',
        method: 'POST',
        path: storageStates,
        body: {
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageState',
          metadata: { name: absent.storageState },
          spec: { resource: { group: '', resource: 'secrets' } },
        },
        by: 'fence',
        creates: `${storageStates}/${absent.storageState}`,
      },
      {
        what: "create a StorageVersionMigration (svm's API) without svm's workflow-id",
        method: 'POST',
        path: svms,
        body: {
          apiVersion: 'migration.k8s.io/v1alpha1',
          kind: 'StorageVersionMigration',
          metadata: { name: absent.migration },
          spec: { resource: { group: '', version: 'v1', resource: 'secrets' } },
        },
        by: 'fence',
        creates: `${svms}/${absent.migration}`,
      },
      // The standard API where it is served (1.37's v1; 1.36's v1beta1, off by default, is switched on for this test).
      ...(standardSvms
        ? [
            {
              what: 'create a standard StorageVersionMigration as the built-in delegation does not',
              method: 'POST',
              path: standardSvms,
              body: {
                apiVersion: `storagemigration.k8s.io/${standard}`,
                kind: 'StorageVersionMigration',
                metadata: { name: absent.builtIn },
                spec: { resource: { group: '', resource: 'secrets' } },
              },
              by: 'fence' as const,
              creates: `${standardSvms}/${absent.builtIn}`,
            },
          ]
        : []),
      {
        what: 'create an Event in default about anything but a StorageVersionMigration',
        method: 'POST',
        path: events,
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name: absent.event, namespace: 'default' },
          involvedObject: { apiVersion: 'v1', kind: 'Node', name: node },
          reason: 'NodeNotReady',
          message: 'forged',
          type: 'Warning',
          source: { component: 'kubelet' },
        },
        by: 'fence',
        creates: `${events}/${absent.event}`,
      },
      { what: 'delete a Secret', method: 'DELETE', path: `${base}/secrets/s`, by: 'RBAC', guards: `${base}/secrets/s` },
      {
        what: 'update (PUT) a ConfigMap',
        method: 'PUT',
        path: `${base}/configmaps/c`,
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { k: 'v' } },
        by: 'RBAC',
      },
      { what: 'get a Secret', method: 'GET', path: `${base}/secrets/s`, by: 'RBAC' },
      { what: 'watch Secrets', method: 'GET', path: `${base}/secrets?watch=true`, by: 'RBAC' },
    ];

    const rv = async (p: string) => (await admin.getJson<{ metadata: { resourceVersion: string } }>(p)).metadata.resourceVersion;
    const rows: Row[] = [];
    for (const a of attempts) {
      const guarded = a.guards ?? (['PATCH', 'PUT', 'DELETE'].includes(a.method) ? a.path.split('?')[0]! : undefined);
      const before = guarded ? await rv(guarded) : undefined;
      const body = a.body === undefined ? undefined : JSON.stringify(a.body);
      const res = await sa.raw(a.method, a.path, { body, contentType: a.contentType, timeoutMs: 10_000 });
      // RBAC names the verb it refused; the fence is named as the policy that denied.
      const by = /cannot (get|list|watch|create|update|patch|delete|deletecollection) resource/.test(res.body)
        ? 'RBAC'
        : /ValidatingAdmissionPolicy 'svm-worker-no-op-only/.test(res.body)
          ? 'fence'
          : `? ${res.body.slice(0, 160)}`;
      rows.push({ what: a.what, status: res.status, by });
      assert.equal(res.status, 403, `${release}: ${a.what}: ${a.method} ${a.path} answered ${res.status} ${res.body.slice(0, 300)}`);
      assert.equal(by, a.by, `${release}: ${a.what}: refused by ${by}, expected ${a.by}`);
      if (guarded) assert.equal(await rv(guarded), before, `${release}: ${a.what}: ${guarded} was written`);
      if (a.creates) assert.equal((await admin.raw('GET', a.creates)).status, 404, `${release}: ${a.what}: ${a.creates} was created`);
    }
    rows.push(...(await ownCreates(sa, admin, release, leases)));
    if (standardSvms) rows.push(await delegatedStatusForgery(sa, admin, standardSvms, standard!, release, cleanup));

    // The re-encode (svm's empty merge patch with the listed resourceVersion) of each kind passes, and writes
    // nothing where the object is already in the storage version (its resourceVersion does not move).
    const reencodes: Array<{
      what: string;
      ref: { group: string; version: string; resource: string; kind: string };
      name: string;
      namespace?: string;
    }> = [
      { what: 'ConfigMap', ref: { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap' }, name: 'c', namespace: ns },
      { what: 'Secret', ref: { group: '', version: 'v1', resource: 'secrets', kind: 'Secret' }, name: 's', namespace: ns },
      { what: 'Pod', ref: { group: '', version: 'v1', resource: 'pods', kind: 'Pod' }, name: 'p', namespace: ns },
      { what: 'Service', ref: { group: '', version: 'v1', resource: 'services', kind: 'Service' }, name: 'svc', namespace: ns },
      { what: 'Node', ref: { group: '', version: 'v1', resource: 'nodes', kind: 'Node' }, name: node },
      { what: 'Deployment', ref: { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment' }, name: 'd', namespace: ns },
      {
        what: 'Lease',
        ref: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease' },
        name: 'leader',
        namespace: ns,
      },
      {
        what: 'custom resource (v1 -> v2)',
        ref: { group: crd.group, version: 'v2', resource: crd.plural, kind: crd.kind },
        name: 'w-000000',
        namespace: ns,
      },
    ];
    // etcd is the judge: the stored object, and the revision that last wrote it.
    const stored = async (r: (typeof reencodes)[number]) => {
      const key = `${etcdPrefix({ group: r.ref.group, resource: r.ref.resource, custom: r.what.startsWith('custom') })}${r.namespace ? `${r.namespace}/` : ''}${r.name}`;
      const found = (await readStoredObjects(plane.etcd, key)).find((o) => o.key === key);
      assert.ok(found, `${release}: no etcd key ${key}`);
      return found;
    };
    for (const r of reencodes) {
      const p = `${r.ref.group ? `/apis/${r.ref.group}` : '/api'}/${r.ref.version}${r.namespace ? `/namespaces/${r.namespace}` : ''}/${r.ref.resource}/${r.name}`;
      const inEtcd = await stored(r);
      const before = await admin.getJson<Record<string, unknown> & { metadata: { resourceVersion: string } }>(p);
      const after1 = await sa.reencode(r.ref, { name: r.name, namespace: r.namespace, resourceVersion: before.metadata.resourceVersion });
      const after2 = await sa.reencode(r.ref, { name: r.name, namespace: r.namespace, resourceVersion: after1 });
      assert.equal(after2, after1, `${release}: a second re-encode of the ${r.what} wrote again`);
      const now = await admin.getJson<Record<string, unknown> & { metadata: { resourceVersion: string } }>(p);
      // Nothing but the resourceVersion may differ (the custom resource was re-encoded from v1: a write).
      const strip = (o: typeof now) => ({ ...o, metadata: { ...o.metadata, resourceVersion: '' } });
      assert.deepEqual(strip(now), strip(before), `${release}: the re-encode changed the ${r.what}`);
      if (!r.what.startsWith('custom'))
        assert.equal(after1, before.metadata.resourceVersion, `${release}: the ${r.what} was rewritten although current`);
      else assert.notEqual(after1, before.metadata.resourceVersion, `${release}: the custom resource stored at v1 was not re-encoded`);
      const inEtcdAfter = await stored(r);
      if (!r.what.startsWith('custom')) {
        assert.equal(inEtcdAfter.modRevision, inEtcd.modRevision, `${release}: etcd: the ${r.what} was written although current`);
      } else {
        // Re-encoded: v1 -> v2 in etcd, every other byte of meaning (metadata with managedFields, spec) the same.
        assert.equal(inEtcd.object.apiVersion, `${crd.group}/v1`);
        assert.equal(inEtcdAfter.object.apiVersion, `${crd.group}/v2`);
        assert.deepEqual(
          { ...inEtcdAfter.object, apiVersion: '' },
          { ...inEtcd.object, apiVersion: '' },
          `${release}: etcd: the custom resource changed`,
        );
      }
      rows.push({ what: `re-encode ${r.what}`, status: 200, by: 'admitted' });
    }
    // An object deleted and created again under the same name (a new uid): the listed resourceVersion makes the
    // re-encode a conflict, never a write to the new object (a uid in the patch would add nothing).
    const listedRv = (await admin.getJson<{ metadata: { resourceVersion: string } }>(`${base}/configmaps/probe`)).metadata.resourceVersion;
    await admin.request('DELETE', `${base}/configmaps/probe`);
    await post(`${base}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'probe' }, data: { k: 'new' } });
    const recreated = await sa.raw('PATCH', `${base}/configmaps/probe`, {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { resourceVersion: listedRv } }),
      contentType: MERGE,
    });
    assert.equal(recreated.status, 409, `${release}: a re-encode of a recreated object answered ${recreated.status}`);
    rows.push({ what: 're-encode of an object deleted and created again (listed resourceVersion)', status: 409, by: 'the API server' });
    // A re-encode with a stale resourceVersion is a conflict, never an overwrite.
    const stale = await sa.raw('PATCH', `${base}/configmaps/c`, {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { resourceVersion: '1' } }),
      contentType: MERGE,
    });
    assert.equal(stale.status, 409, `${release}: a stale re-encode answered ${stale.status}`);
    // The storedVersions protocol: pruning to the storage version is admitted.
    const pruned = await sa.raw('PATCH', `${crdPath}/status`, {
      body: JSON.stringify({ status: { storedVersions: ['v2'] } }),
      contentType: MERGE,
    });
    assert.equal(
      pruned.status,
      200,
      `${release}: pruning storedVersions to the storage version: ${pruned.status} ${pruned.body.slice(0, 300)}`,
    );
    rows.push({ what: 'CRD status.storedVersions pruned to the storage version', status: 200, by: 'admitted' });
    // Each API server's /metrics, for the drop check's samples: request counts, no object data (the Secret's
    // password is not in it).
    const metrics = await sa.raw('GET', '/metrics', { accept: 'text/plain' });
    assert.equal(metrics.status, 200, `${release}: /metrics answered ${metrics.status}`);
    assert.match(metrics.body, /^apiserver_request_total\{/m);
    assert.ok(!metrics.body.includes('hunter2'), `${release}: /metrics holds a Secret's data`);
    rows.push({ what: 'get /metrics (request counters, no object data)', status: 200, by: 'granted' });
    // The cluster's identity (a named cluster's workflows check it): kube-system, and no other namespace.
    const kubeSystem = await sa.raw('GET', '/api/v1/namespaces/kube-system');
    assert.equal(kubeSystem.status, 200, `${release}: get the kube-system namespace answered ${kubeSystem.status}`);
    assert.ok((JSON.parse(kubeSystem.body) as { metadata?: { uid?: string } }).metadata?.uid, `${release}: kube-system has no uid`);
    const otherNamespace = await sa.raw('GET', '/api/v1/namespaces/default');
    assert.equal(otherNamespace.status, 403, `${release}: get the default namespace answered ${otherNamespace.status}`);
    rows.push({ what: 'get the kube-system namespace (the cluster uid); any other namespace: 403', status: 200, by: 'granted' });
    rows.push(await unfencedMigration(plane, kubeconfig, manifests, release, `${base}/configmaps/c`));

    // The default rights: list and patch on every built-in stored resource the fence can see, on none it cannot.
    const discovered = await admin.discover();
    const crdGroups = new Set(
      (
        await admin.getJson<{ items: Array<{ spec: { group: string } }> }>('/apis/apiextensions.k8s.io/v1/customresourcedefinitions')
      ).items.map((c) => c.spec.group),
    );
    const builtIn = discovered.filter(
      (d) => d.preferred && !d.name.includes('/') && d.storageVersionHash && !crdGroups.has(d.group) && d.verbs.includes('patch'),
    );
    assert.ok(builtIn.length > 40, `${release}: only ${builtIn.length} built-in stored resources found`);
    for (const d of builtIn) {
      const expected = !UNFENCED_GROUPS.includes(d.group);
      for (const verb of ['list', 'patch']) {
        assert.equal(
          await canI(sa, { verb, group: d.group, resource: d.name }),
          expected,
          `${release}: ${verb} ${d.name}.${d.group || 'core'}: ${expected ? 'missing from' : 'must not be in'} the default rights`,
        );
      }
      assert.equal(await canI(sa, { verb: 'update', group: d.group, resource: d.name }), false, `${release}: update ${d.name}.${d.group}`);
    }
    return rows;
  } finally {
    sa.close();
    removeTokenKubeconfig(kubeconfig);
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
  }
}

/**
 * The shipped worker (SVM_REQUIRE_FENCE) migrates a resource only where a dry run finds svm's fence refusing it: with
 * the fence's binding deleted (the state of a resource an aggregated API server serves: its requests pass
 * kube-apiserver's admission), its migration of ConfigMaps fails before any write; with the fence, it succeeds. The
 * binding is put back, and in force again, before this returns.
 */
async function unfencedMigration(
  plane: TestPlane,
  kubeconfig: string,
  manifests: Manifest[],
  release: string,
  probe: string,
): Promise<Row> {
  const admin = plane.kube;
  const binding = manifests.find((m) => m.kind === 'ValidatingAdmissionPolicyBinding' && m.metadata.name.endsWith('-worker-no-op-only'))!;
  const bindingPath = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${binding.metadata.name}`;
  const sa = KubeClient.fromKubeconfig(kubeconfig);
  // Every server (the load balancer spreads the tries) admitting, or refusing, a dry-run change of labels.
  const everyServer = (what: string, admitted: boolean) => {
    let inARow = 0;
    return eventually(
      what,
      async () => {
        const r = await sa.raw('PATCH', `${probe}?dryRun=All`, {
          body: JSON.stringify({ metadata: { labels: { probe: 'x' } } }),
          contentType: MERGE,
        });
        inARow = (r.status === 200) === admitted ? inARow + 1 : 0;
        return inARow >= 6;
      },
      60_000,
    );
  };
  const migrate = () =>
    withWorkerAs(plane, kubeconfig, async (m) => migrationResult(await m.start('configmaps')), { settings: { requireFence: true } });
  const versions = async () =>
    (
      await admin.getJson<{ items: Array<{ metadata: { namespace: string; name: string; resourceVersion: string } }> }>(
        '/api/v1/configmaps',
      )
    ).items
      .map((o) => `${o.metadata.namespace}/${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort();
  try {
    const fenced = await migrate();
    assert.equal(fenced.phase, 'Succeeded', `${release}: under the fence: ${fenced.message}`);
    assert.equal((await admin.raw('DELETE', bindingPath)).status, 200);
    await everyServer(`${release}: every server to admit the change once the fence's binding is deleted`, true);
    const before = await versions();
    const refused = await migrate();
    assert.equal(refused.phase, 'Failed', `${release}: without a fence: ${refused.message}`);
    assert.match(refused.message ?? '', /migrated only where svm's fence guards the worker's writes \(SVM_REQUIRE_FENCE=true\)/);
    assert.equal(refused.counters.migrated, 0);
    assert.deepEqual(await versions(), before, `${release}: a ConfigMap was written without a fence`);
  } finally {
    await serverSideApply(admin, [binding]);
    await everyServer(`${release}: the fence back in force on every server`, false);
    sa.close();
  }
  return {
    what: "the shipped worker migrating a resource no fence of svm's guards (its binding deleted): fails, nothing written",
    status: 0,
    by: 'the worker',
  };
}

/**
 * The deferring mode's record of a pass by the built-in rests on the built-in's status of the standard object svm
 * created for it: the worker's token may not write that status (Succeeded set by hand would be a forged record).
 */
async function delegatedStatusForgery(
  sa: KubeClient,
  admin: KubeClient,
  standardSvms: string,
  standard: string,
  release: string,
  cleanup: Array<() => Promise<unknown>>,
): Promise<Row> {
  const name = uniq('svm-forge');
  const made = await admin.raw('POST', standardSvms, {
    body: JSON.stringify({
      apiVersion: `storagemigration.k8s.io/${standard}`,
      kind: 'StorageVersionMigration',
      metadata: { name, annotations: { [CREATED_BY_ANNOTATION]: 'migrate/things.nowhere.svm.test' } },
      spec: { resource: { group: 'nowhere.svm.test', resource: 'things' } },
    }),
  });
  assert.equal(made.status, 201, made.body);
  cleanup.push(() => admin.raw('DELETE', `${standardSvms}/${name}`));
  const forged = await sa.raw('PATCH', `${standardSvms}/${name}/status`, {
    body: JSON.stringify({
      status: {
        conditions: [
          {
            type: 'Succeeded',
            status: 'True',
            reason: 'Forged',
            message: 'by the worker token',
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
    }),
    contentType: 'application/merge-patch+json',
    timeoutMs: 10_000,
  });
  assert.equal(forged.status, 403, `${release}: Succeeded on svm's object for the built-in: ${forged.status} ${forged.body.slice(0, 300)}`);
  assert.match(forged.body, /ValidatingAdmissionPolicy 'svm-worker-no-op-only/);
  assert.match(forged.body, /a StorageVersionMigration svm created for the built-in migrator, is for the built-in migrator to write/);
  const after = await admin.getJson<{ status?: { conditions?: Array<{ reason?: string }> } }>(`${standardSvms}/${name}`);
  assert.ok(!(after.status?.conditions ?? []).some((c) => c.reason === 'Forged'), `${release}: the forged condition was written`);
  return {
    what: 'set Succeeded on a standard StorageVersionMigration svm created for the built-in (the record of a delegated pass)',
    status: 403,
    by: 'fence',
  };
}

/**
 * The creates the worker makes pass the fence: a budget member's Lease (and its delete), and an Event in default
 * about a StorageVersionMigration (the deferring mode's word that no controller acts on one).
 */
async function ownCreates(sa: KubeClient, admin: KubeClient, release: string, leases: string): Promise<Row[]> {
  const member = uniq('svm-worker-own');
  const created = await sa.raw('POST', leases, {
    body: JSON.stringify({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: member },
      spec: { holderIdentity: 'replica-b', leaseDurationSeconds: 15 },
    }),
  });
  assert.equal(created.status, 201, `${release}: the worker's own member Lease: ${created.status} ${created.body.slice(0, 300)}`);
  const deleted = await sa.raw('DELETE', `${leases}/${member}`);
  assert.equal(deleted.status, 200, `${release}: deleting its member Lease: ${deleted.status} ${deleted.body.slice(0, 300)}`);
  const eventName = uniq('svm-event');
  const event = await sa.raw('POST', '/api/v1/namespaces/default/events', {
    body: JSON.stringify({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: eventName, namespace: 'default' },
      involvedObject: { apiVersion: 'storagemigration.k8s.io/v1', kind: 'StorageVersionMigration', name: uniq('svm') },
      reason: 'NoControllerActing',
      message: 'no controller has acted on it (test-worker-rights)',
      type: 'Warning',
      source: { component: 'svm' },
    }),
  });
  assert.equal(event.status, 201, `${release}: an Event about a StorageVersionMigration: ${event.status} ${event.body.slice(0, 300)}`);
  await admin.raw('DELETE', `/api/v1/namespaces/default/events/${eventName}`);
  return [
    { what: "create and delete a budget member's Lease (15 s)", status: 201, by: 'admitted' },
    { what: 'create an Event in default about a StorageVersionMigration', status: 201, by: 'admitted' },
  ];
}

function print(release: string, rows: Row[]): void {
  process.stdout.write(`\n${release}: the worker's token against the shipped manifests\n`);
  for (const r of rows) process.stdout.write(`  ${String(r.status).padEnd(4)} ${r.by.padEnd(9)} ${r.what}\n`);
}

void test(`${kubeVersions().current}, deploy/ through kustomize: every attempt beyond a re-encode is refused and writes nothing; each re-encode passes`, async () => {
  const plane = await testPlane();
  try {
    print(kubeVersions().current, await attackTable(plane, kubeVersions().current, await kustomized(plane)));
  } finally {
    await plane.close();
  }
});

void test(`${kubeVersions().previous}, the Helm chart's defaults: every attempt beyond a re-encode is refused and writes nothing; each re-encode passes`, async () => {
  // The run's previous-release plane (test-standard-v1beta1's too), which serves the standard API as a 1.36 cluster
  // serves it once its migrator is on (storagemigration.k8s.io/v1beta1), so that the rows about it (a create, the
  // status of svm's objects for the built-in) are tried here too.
  const { plane, own } = await previousPlane();
  previousOwn = own;
  try {
    print(kubeVersions().previous, await attackTable(plane, kubeVersions().previous, await charted()));
  } finally {
    await plane.close();
  }
});

void test(`${kubeVersions().current}: the fence loaded from a manifest (deploy/static-fence) holds when the fence made through the API is deleted, and no API request can remove it; the shipped worker migrates admission objects only under it on every server, and any other resource only under one of svm's fences`, async () => {
  const plane = await testPlane();
  const admin = plane.kube;
  const fenceDir = mkdtempSync(path.join(tmpdir(), 'svm-static-fence-'));
  copyFileSync(path.join(DEPLOY_DIR, 'static-fence', 'svm-worker-no-op-only.yaml'), path.join(fenceDir, 'svm-worker-no-op-only.yaml'));
  const config = YAML.parse(readFileSync(path.join(DEPLOY_DIR, 'static-fence', 'admission-configuration.yaml'), 'utf8')) as {
    plugins: Array<{ configuration: { staticManifestsDir: string } }>;
  };
  config.plugins[0]!.configuration.staticManifestsDir = fenceDir;
  const configFile = path.join(mkdtempSync(path.join(tmpdir(), 'svm-admission-config-')), 'admission-configuration.yaml');
  writeFileSync(configFile, YAML.stringify(config));
  const flagsBefore = plane.state.apiservers.map((a) => [...a.extraArgs]);
  const apiBinding = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${POLICY}`;
  let kubeconfig: string | undefined;
  let sa: KubeClient | undefined;
  const vaps = { group: 'admissionregistration.k8s.io', resource: 'validatingadmissionpolicies', custom: false };
  const grant = YAML.parseAllDocuments(grantManifests(vaps)).map((d) => d.toJS() as Manifest);
  try {
    await serverSideApply(admin, rightsOf(await kustomized(plane)));
    await serverSideApply(admin, grant);
    kubeconfig = writeTokenKubeconfig(admin.server, await serviceAccountToken(admin, SA_NAMESPACE, SA_NAME), SA_NAME, plane.dir);
    sa = KubeClient.fromKubeconfig(kubeconfig);
    // The shipped worker (SVM_REQUIRE_STATIC_FENCE=true, SVM_REQUIRE_FENCE=true), granted validatingadmissionpolicies:
    // with only the fence made through the API, which never guards admission objects, their migration is refused and
    // writes nothing.
    const versionsOf = async (list: string) =>
      (await admin.getJson<{ items: Array<{ metadata: { namespace?: string; name: string; resourceVersion: string } }> }>(list)).items
        .map((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}@${o.metadata.resourceVersion}`)
        .sort();
    const vapVersions = () => versionsOf('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies');
    const configMapVersions = () => versionsOf('/api/v1/configmaps');
    const migrateAsShipped = (resource: string) =>
      withWorkerAs(plane, kubeconfig!, async (m) => migrationResult(await m.start(resource)), {
        settings: { requireStaticFence: true, requireFence: true },
      });
    const migrateVaps = () => migrateAsShipped('validatingadmissionpolicies.admissionregistration.k8s.io');
    const untouched = await vapVersions();
    const refused = await migrateVaps();
    assert.equal(refused.phase, 'Failed', refused.message);
    assert.match(refused.message ?? '', /migrated only under the fence loaded from a manifest \(SVM_REQUIRE_STATIC_FENCE=true\)/);
    assert.match(refused.message ?? '', /a change of its labels was admitted \(dry run, HTTP 200\)/);
    assert.equal(refused.counters.migrated, 0);
    assert.deepEqual(await vapVersions(), untouched, 'nothing written');
    console.log(`[static fence] without it: ${refused.phase}: ${refused.message}`);
    // Any other resource goes by the fence made through the API: in force, the migration goes through.
    const fenced = await migrateAsShipped('configmaps');
    assert.equal(fenced.phase, 'Succeeded', fenced.message);
    assert.ok(fenced.counters.migrated > 0, JSON.stringify(fenced.counters));
    // A cluster administrator (or anyone with the rights) switches the fence made through the API off: with no
    // fence of svm's in force (as where an aggregated API server serves a resource), the shipped worker refuses it.
    assert.equal((await admin.raw('DELETE', apiBinding)).status, 200);
    const someConfigMap = (
      await admin.getJson<{ items: Array<{ metadata: { namespace: string; name: string } }> }>('/api/v1/configmaps?limit=1')
    ).items[0]!.metadata;
    let admitted = 0;
    await eventually(
      'every server to admit a dry-run label change of the worker once the API fence is deleted',
      async () => {
        const r = await sa!.raw('PATCH', `/api/v1/namespaces/${someConfigMap.namespace}/configmaps/${someConfigMap.name}?dryRun=All`, {
          body: JSON.stringify({ metadata: { labels: { probe: 'x' } } }),
          contentType: MERGE,
        });
        admitted = r.status === 200 ? admitted + 1 : 0;
        return admitted >= 6;
      },
      60_000,
    );
    const configMapsBefore = await configMapVersions();
    const unfenced = await migrateAsShipped('configmaps');
    assert.equal(unfenced.phase, 'Failed', unfenced.message);
    assert.match(unfenced.message ?? '', /migrated only where svm's fence guards the worker's writes \(SVM_REQUIRE_FENCE=true\)/);
    assert.match(unfenced.message ?? '', /admitted \(dry run, HTTP 200\): svm's fence does not refuse it/);
    assert.equal(unfenced.counters.migrated, 0);
    assert.deepEqual(await configMapVersions(), configMapsBefore, 'no ConfigMap written');
    console.log(`[fence] none in force: ${unfenced.phase}: ${unfenced.message}`);
    // The manifest's fence is asked of every server: loaded on the first only, the admission objects' migration is
    // refused, naming the server without it.
    await restartApiserver(plane.dir, 0, [...flagsBefore[0]!, `--admission-control-config-file=${configFile}`], quiet);
    if (flagsBefore.length > 1) {
      const oneOfTwo = await migrateVaps();
      assert.equal(oneOfTwo.phase, 'Failed', oneOfTwo.message);
      const [first, second] = plane.state.apiservers.map((a) => `${a.address}:${a.port}`);
      assert.ok((oneOfTwo.message ?? '').includes(`Probed at ${second}: a change of its labels was admitted`), oneOfTwo.message);
      assert.ok(!(oneOfTwo.message ?? '').includes(`${first}:`), `the server with the manifest's fence is named: ${oneOfTwo.message}`);
      assert.deepEqual(await vapVersions(), untouched, 'nothing written');
      console.log(`[static fence] on one server of ${flagsBefore.length}: ${oneOfTwo.phase}: ${oneOfTwo.message}`);
    }
    for (let i = 1; i < flagsBefore.length; i++)
      await restartApiserver(plane.dir, i, [...flagsBefore[i]!, `--admission-control-config-file=${configFile}`], quiet);
    const ns = uniq('static');
    await ensureNamespace(admin, ns);
    const cm = `/api/v1/namespaces/${ns}/configmaps/c`;
    await admin.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { k: 'v' } }),
    });
    const rv = async () => (await admin.getJson<{ metadata: { resourceVersion: string } }>(cm)).metadata.resourceVersion;
    const before = await rv();
    // Every server denies by the manifest's fence alone (the load balancer spreads the tries over them).
    let denials = 0;
    await eventually(
      'the manifest-loaded fence to deny on every try',
      async () => {
        const r = await sa!.raw('PATCH', cm, { body: JSON.stringify({ data: { k: 'changed' } }), contentType: MERGE });
        assert.notEqual(r.status, 200, 'a change went through with the API fence deleted: the manifest fence is not in force');
        denials = r.status === 403 && r.body.includes(`${POLICY}.static.k8s.io`) ? denials + 1 : 0;
        return denials >= 6;
      },
      60_000,
    );
    assert.equal(await rv(), before, 'the ConfigMap was written');
    // Creates too: a Lease of another name where the worker's Role lets it create Leases.
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${SA_NAMESPACE}/leases`;
    const name = uniq('lease');
    const created = await sa.raw('POST', leases, {
      body: JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec: { leaseDurationSeconds: 15 } }),
    });
    assert.equal(created.status, 403, `a Lease create with the API fence deleted: ${created.status} ${created.body.slice(0, 200)}`);
    assert.ok(created.body.includes(`${POLICY}.static.k8s.io`), created.body.slice(0, 300));
    assert.equal((await admin.raw('GET', `${leases}/${name}`)).status, 404);
    // The re-encode still passes.
    assert.equal(
      await sa.reencode(
        { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap' },
        { name: 'c', namespace: ns, resourceVersion: before },
      ),
      before,
    );
    // The manifest's policy is not an API object: nothing to read, patch or delete; its names are reserved.
    const staticPolicy = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${POLICY}.static.k8s.io`;
    assert.equal((await admin.raw('GET', staticPolicy)).status, 404);
    assert.equal((await admin.raw('DELETE', staticPolicy)).status, 404);
    const impostor = await admin.raw('POST', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', {
      body: JSON.stringify({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: `${POLICY}.static.k8s.io` },
        spec: { policyName: `${POLICY}.static.k8s.io`, validationActions: ['Audit'] },
      }),
    });
    assert.equal(impostor.status, 422, `a binding with the reserved suffix: ${impostor.status} ${impostor.body.slice(0, 200)}`);
    // Under the manifest's fence (the API's still deleted), the same migration goes through: every object re-encoded.
    const done = await migrateVaps();
    assert.equal(done.phase, 'Succeeded', done.message);
    assert.ok(done.counters.migrated > 0, JSON.stringify(done.counters));
    // And any other resource under the manifest's fence alone.
    const staticOnly = await migrateAsShipped('configmaps');
    assert.equal(staticOnly.phase, 'Succeeded', staticOnly.message);
    await admin.raw('DELETE', `/api/v1/namespaces/${ns}`);
  } finally {
    sa?.close();
    await deleteManifests(admin, grant).catch(() => undefined);
    removeTokenKubeconfig(kubeconfig);
    await serverSideApply(admin, readManifests('worker-policy.yaml'));
    for (let i = 0; i < flagsBefore.length; i++) await restartApiserver(plane.dir, i, flagsBefore[i]!, quiet);
    rmSync(fenceDir, { recursive: true, force: true });
    rmSync(path.dirname(configFile), { recursive: true, force: true });
    await plane.close();
  }
});

/**
 * A workflow at `id` on task queue `queue`, started and completed by a hand-written poller with `result`: what anyone
 * holding the Temporal namespace's credentials can make, no worker of svm's involved (issue 61's ten-line worker).
 */
async function forgeRun(client: Client, queue: string, id: string, type: string, input: unknown, result: unknown): Promise<void> {
  await client.workflow.start(type, { taskQueue: queue, workflowId: id, args: [input] });
  assert.equal(await completeAsForger(client, queue, result), id, 'the forger took its own workflow task');
  assert.equal((await client.workflow.getHandle(id).describe()).status.name, 'COMPLETED');
}

/** deploy/ as an overlay with the prune-operator component renders it (SVM_PRUNE=operator). */
async function kustomizedPruneOperator(plane: TestPlane): Promise<Manifest[]> {
  const root = mkdtempSync(path.join(tmpdir(), 'svm-prune-operator-'));
  try {
    cpSync(DEPLOY_DIR, path.join(root, 'deploy'), { recursive: true });
    mkdirSync(path.join(root, 'overlay'));
    writeFileSync(path.join(root, 'overlay', 'kustomization.yaml'), 'resources: [../deploy]\ncomponents: [../deploy/prune-operator]\n');
    const { stdout } = await run(plane.env.KUBECTL!, ['kustomize', path.join(root, 'overlay')], { timeout: 120_000, maxBuffer: 64 << 20 });
    return YAML.parseAllDocuments(stdout).map((d) => d.toJS() as Manifest);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

void test(`${kubeVersions().current}: a record counts only once checked, and under SVM_PRUNE=operator storedVersions are the operator's to prune: forged runs (another type, another queue, an input for another resource, an off-schema result, a pass record of another resource) make no drop verdict and no prune, with etcd at v1; a migration leaves storedVersions as they are and the worker's token is refused the status write; svm prune prunes on the real record`, async () => {
  const plane = await testPlane();
  const admin = plane.kube;
  const client = plane.temporal.client;
  const crdStatus = ['clusterrolebindings', 'clusterroles'].map((k) => `/apis/rbac.authorization.k8s.io/v1/${k}/svm-migrator-crd-status`);
  const c = testCrd(`${uniq('prune')}.svm.test`);
  const ns = uniq('prune');
  const N = 20;
  const queue = uniq('tq-prune');
  const id = `migrate/${c.name}`;
  const crdPath = `${CRDS_PATH}/${c.name}`;
  const grant = YAML.parseAllDocuments(grantManifests({ group: c.group, resource: c.plural, custom: true })).map(
    (d) => d.toJS() as Manifest,
  );
  let kubeconfig: string | undefined;
  let sa: KubeClient | undefined;
  const storedNow = async () => (await getCrd(admin, { group: c.group, resource: c.plural })).status?.storedVersions;
  const etcdNow = async () => (await storedVersions(plane.etcd, { group: c.group, resource: c.plural, custom: true })).byApiVersion;
  try {
    // The shipped rights as the component renders them: no svm-migrator-crd-status. An install moved to the component
    // deletes what `kubectl apply -k` does not prune (the role and binding other test files apply with rbac.yaml).
    const manifests = await kustomizedPruneOperator(plane);
    assert.equal(manifests.filter((m) => m.metadata.name === 'svm-migrator-crd-status').length, 0, 'the component drops the rule');
    const env = (
      manifests.find((m) => m.kind === 'Deployment') as unknown as {
        spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
      }
    ).spec.template.spec.containers[0]!.env;
    assert.deepEqual(
      env.find((e) => e.name === 'SVM_PRUNE'),
      { name: 'SVM_PRUNE', value: 'operator' },
    );
    await serverSideApply(admin, rightsOf(manifests));
    for (const p of crdStatus) await admin.raw('DELETE', p);
    await serverSideApply(admin, grant);
    await installCrds(admin);
    await applyCrd(admin, c, 'v1');
    await createObjects(admin, c, 'v1', N, { namespace: ns });
    await applyCrd(admin, c, 'v2');
    assert.deepEqual(await storedNow(), ['v1', 'v2']);
    assert.deepEqual(await etcdNow(), { [`${c.group}/v1`]: N });
    kubeconfig = writeTokenKubeconfig(admin.server, await serviceAccountToken(admin, SA_NAMESPACE, SA_NAME), SA_NAME, plane.dir);
    sa = KubeClient.fromKubeconfig(kubeconfig);

    // The worker's token may not prune (RBAC: no right on CRD status), and nothing is written.
    await eventually(
      'RBAC to drop the status right',
      async () =>
        !(await canI(sa!, { verb: 'patch', group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions', subresource: 'status' })),
      30_000,
    );
    const byToken = await sa.raw('PATCH', `${crdPath}/status`, {
      body: JSON.stringify({ status: { storedVersions: ['v2'] } }),
      contentType: MERGE,
    });
    assert.equal(byToken.status, 403, `the token's prune: ${byToken.status} ${byToken.body.slice(0, 300)}`);
    assert.deepEqual(await storedNow(), ['v1', 'v2'], 'storedVersions unchanged');
    console.log(`[prune] the worker's token prunes storedVersions under SVM_PRUNE=operator: ${byToken.status}`);

    // The forger: what it would complete a run with, a record that holds now (it can have the agreement's token by
    // asking as svm does), and the drop check and svm prune that read it as the workers' queue's.
    const apiservers = kubernetesEndpoints(admin);
    const ref = await resolveResource(admin, c.name);
    const agreed = await readAgreement(admin, apiservers, ref);
    apiservers.close();
    assert.ok(agreed.agreed, agreed.reason);
    const record = {
      by: 'svm',
      encodingVersion: 'v2',
      storageVersionHash: agreed.hash,
      verified: agreed.verified,
      checked: agreed.checked,
      token: agreed.token,
      resource: c.name,
    };
    const honest = { phase: 'Succeeded', counters: zeroCounters(), message: 'forged', record, migrationObjects: [] };
    const records = migrationRecords(client, Placement.of(queue));
    const migrationVerdict = async () => {
      const report = await checkDrop(admin, `${c.group}/v1`, { requestsWindowSeconds: 0, migrationOf: records });
      return report.resources.find((r) => r.resource === c.name)!.checks.find((x) => x.check === 'migration')!;
    };
    const pruneCli = (taskQueue: string) =>
      svmCli(['prune', c.name], {
        KUBECONFIG: plane.env.KUBECONFIG!,
        TEMPORAL_ADDRESS: plane.temporal.address,
        TEMPORAL_TASK_QUEUE: taskQueue,
      });
    const routes: Array<[string, () => Promise<void>, RegExp]> = [
      [
        'another workflow type',
        () => forgeRun(client, queue, id, 'forgedMigration', { resource: ref }, honest),
        /is a forgedMigration workflow, not a migration/,
      ],
      [
        'another task queue',
        () => forgeRun(client, uniq('attacker'), id, 'migrateResource', { resource: ref }, honest),
        /ran on task queue attacker-.*, not tq-prune-.* \(the one svm's workers of this cluster poll\)/,
      ],
      [
        'an input naming another resource',
        () => forgeRun(client, queue, id, 'migrateResource', { resource: 'configmaps' }, honest),
        /was started for configmaps/,
      ],
      [
        'a result off the schema',
        () => forgeRun(client, queue, id, 'migrateResource', { resource: ref }, { phase: 'Succeeded', record }),
        /ended with a result that is not a migration's \(counters: /,
      ],
      [
        'a pass record of another resource',
        () =>
          forgeRun(client, queue, id, 'migrateResource', { resource: ref }, { ...honest, record: { ...record, resource: 'configmaps' } }),
        /recorded a pass of configmaps/,
      ],
    ];
    for (const [what, forge, reason] of routes) {
      await forge();
      // Not Ready: the record does not count (the check's reason first; the storedVersions mirror, which still names
      // v1, holds the verdict at NotYet besides).
      const m = await migrationVerdict();
      assert.notEqual(m.verdict, 'Ready', `${what}: ${m.reason}`);
      assert.match(m.reason, reason, what);
      assert.match(m.reason, /: not svm's record of .*, so it does not count/, what);
      const pruned = await pruneCli(queue);
      assert.equal(pruned.code, 1, `${what}: svm prune exited ${pruned.code}: ${pruned.stdout}${pruned.stderr}`);
      assert.match(pruned.stdout, new RegExp(`${c.name.replace(/\./g, '\\.')} +refused +\\[v1, v2\\] +`), what);
      assert.match(pruned.stdout, reason, what);
      assert.deepEqual(await storedNow(), ['v1', 'v2'], `${what}: storedVersions unchanged`);
      console.log(`[forged: ${what}] drop: ${m.verdict}: ${m.reason}`);
    }
    // The limit the check says it has: the same result by a poller of the workers' own queue counts (only trust
    // domains refuse that). Shown so that each refusal above is the check's, not the record's.
    await forgeRun(client, queue, id, 'migrateResource', { resource: ref }, honest);
    const beyond = await migrationVerdict();
    assert.match(
      beyond.reason,
      /ended Succeeded at .*: a whole pass by svm to v2, under the agreement that holds now/,
      `a poller of the real queue is beyond the check (docs/security.md): ${beyond.reason}`,
    );
    console.log(`[forged by a poller of the workers' queue: beyond the check] drop: ${beyond.verdict}: ${beyond.reason}`);
    assert.deepEqual(await etcdNow(), { [`${c.group}/v1`]: N }, 'etcd: every object still at v1');

    // The real migration, by the shipped worker under SVM_PRUNE=operator: Succeeded, etcd at v2, storedVersions left.
    const w = await createMigratorWorker({ ...plane.workerSettings(queue, { requireFence: true, prune: 'operator' }), kubeconfig });
    const m = await Migrator.connect({ temporal: { ...plane.temporal.settings, taskQueue: queue }, kubeconfig });
    try {
      const result = await w.runUntil(async () => migrationResult(await m.start(c.name)));
      assert.equal(result.phase, 'Succeeded', result.message);
      assert.equal(result.record?.resource, c.name);
    } finally {
      await m.close();
    }
    assert.deepEqual(await etcdNow(), { [`${c.group}/v2`]: N });
    assert.deepEqual(await storedNow(), ['v1', 'v2'], 'the worker left storedVersions');
    // svm prune, with the operator's kubeconfig: a CLI on another queue than the workers' refuses their record too.
    const elsewhere = await pruneCli(uniq('tq-other'));
    assert.equal(elsewhere.code, 1, elsewhere.stdout + elsewhere.stderr);
    assert.match(elsewhere.stdout, /ran on task queue tq-prune-.*, not tq-other-.*/);
    const done = await pruneCli(queue);
    console.log(`$ svm prune ${c.name}\n${done.stdout}`);
    assert.equal(done.code, 0, done.stdout + done.stderr);
    assert.match(
      done.stdout,
      new RegExp(`${c.name.replace(/\./g, '\\.')} +pruned +\\[v1, v2\\] -> \\[v2\\] +its last migration workflow ${id}`),
    );
    assert.deepEqual(await storedNow(), ['v2']);
    const again = await pruneCli(queue);
    assert.equal(again.code, 0, again.stdout);
    assert.match(again.stdout, /nothing +\[v2\] +status\.storedVersions is \[v2\] already/);
  } finally {
    sa?.close();
    removeTokenKubeconfig(kubeconfig);
    await admin.raw('DELETE', crdPath);
    await deleteManifests(admin, grant).catch(() => undefined);
    // The shared plane as rbac.yaml leaves it for the other files.
    await serverSideApply(admin, readManifests('rbac.yaml'));
    await plane.close();
  }
});

/** The CLI as a user runs it (bin/svm.js), its exit code and output. */
function svmCli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(__dirname, '..', 'bin', 'svm.js'), ...args],
      { env: { ...process.env, ...env }, timeout: 180_000, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return reject(new Error(`svm ${args.join(' ')}: ${err.message}\n${stderr}`));
        resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}
