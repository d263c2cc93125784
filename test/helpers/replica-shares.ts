/**
 * Each worker replica's share of the rewrites, counted by the API servers, not by the replicas (issue 63, deliverable
 * 3). Each replica runs as a ServiceAccount of its own (a token kubeconfig of the load-balanced address: the worker
 * still sees one API address), and a FlowSchema per replica sends that account's rewrites of the test's resources
 * (patch and update of the resource itself) to the priority level service accounts use anyway (workload-low). API
 * Priority and Fairness counts every request it dispatches by flow schema
 * (apiserver_flowcontrol_dispatched_requests_total{flow_schema}), so each server says how many rewrites each replica
 * sent it, whatever the replicas log. The schemas are in force on every server before a replica starts: a probe as
 * each account, to each server directly, is answered with the schema's uid in X-Kubernetes-PF-FlowSchema-UID.
 */
import { KubeClient } from '../../src/kube/client';
import { KubeError } from '../../src/kube/errors';
import { samples } from '../../src/kube/apiserver-metrics';
import { removeTokenKubeconfig, serviceAccountToken, writeTokenKubeconfig } from './rbac-identity';
import { countPuts, metricsSampler, type PutSample } from './puts';
import { eventually } from './waits';
import type { TestPlane } from './plane';

const FLOWCONTROL = '/apis/flowcontrol.apiserver.k8s.io/v1';
const PRIORITY_LEVEL = 'workload-low';
/** Before the suggested schemas that would take a ServiceAccount's requests (service-accounts is 9000). */
const MATCHING_PRECEDENCE = 500;

export interface ReplicaIdentity {
  /** The ServiceAccount's username (system:serviceaccount:NS:NAME). */
  username: string;
  /** A kubeconfig of the plane's load-balanced address with the account's token: the replica's KUBECONFIG. */
  kubeconfig: string;
  /** The FlowSchema that counts its rewrites. */
  flowSchema: string;
}

type Resource = { group: string; plural: string };

async function create(kube: KubeClient, path: string, obj: unknown): Promise<{ metadata: { uid: string } }> {
  try {
    return JSON.parse((await kube.request('POST', path, { body: JSON.stringify(obj) })).body) as { metadata: { uid: string } };
  } catch (err) {
    if (!(err instanceof KubeError && err.kind === 'conflict')) throw err;
    const name = (obj as { metadata: { name: string } }).metadata.name;
    return kube.getJson<{ metadata: { uid: string } }>(`${path}/${name}`);
  }
}

/**
 * `count` identities named `${prefix}-${i}` in `namespace`: a ServiceAccount bound to cluster-admin (the rights are
 * not what these tests prove) and a FlowSchema matching its rewrites of `resources`, in force on every API server when
 * this returns. remove() deletes them and the kubeconfigs (the plane's ledger would delete the objects too).
 */
export async function replicaIdentities(
  plane: TestPlane,
  opts: { namespace: string; prefix: string; count: number; resources: Resource[] },
): Promise<{ identities: ReplicaIdentity[]; remove(): Promise<void> }> {
  const kube = plane.kube;
  await create(kube, '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: opts.namespace } });
  const identities: ReplicaIdentity[] = [];
  const uids: string[] = [];
  const tokens: string[] = [];
  const names = Array.from({ length: opts.count }, (_, i) => `${opts.prefix}-${i}`);
  const remove = async () => {
    for (const f of identities) removeTokenKubeconfig(f.kubeconfig);
    for (const name of names)
      for (const path of [
        `${FLOWCONTROL}/flowschemas/${name}`,
        `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`,
        `/api/v1/namespaces/${opts.namespace}/serviceaccounts/${name}`,
      ])
        await kube.request('DELETE', path, { allow: [404] });
  };
  for (const name of names) {
    await create(kube, `/api/v1/namespaces/${opts.namespace}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name, namespace: opts.namespace },
    });
    await create(kube, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name, namespace: opts.namespace }],
    });
    const fs = await create(kube, `${FLOWCONTROL}/flowschemas`, {
      apiVersion: 'flowcontrol.apiserver.k8s.io/v1',
      kind: 'FlowSchema',
      metadata: { name },
      spec: {
        priorityLevelConfiguration: { name: PRIORITY_LEVEL },
        matchingPrecedence: MATCHING_PRECEDENCE,
        distinguisherMethod: { type: 'ByUser' },
        rules: [
          {
            subjects: [{ kind: 'ServiceAccount', serviceAccount: { name, namespace: opts.namespace } }],
            resourceRules: [
              {
                verbs: ['patch', 'update'],
                apiGroups: [...new Set(opts.resources.map((r) => r.group))],
                resources: [...new Set(opts.resources.map((r) => r.plural))],
                namespaces: ['*'],
                clusterScope: true,
              },
            ],
          },
        ],
      },
    });
    uids.push(fs.metadata.uid);
    const token = await serviceAccountToken(kube, opts.namespace, name);
    tokens.push(token);
    identities.push({
      username: `system:serviceaccount:${opts.namespace}:${name}`,
      kubeconfig: writeTokenKubeconfig(kube.server, token, name, plane.dir),
      flowSchema: name,
    });
  }
  // In force on every server: a rewrite as each account, of an object that is not there (404, nothing written),
  // classified under its schema. Sent before the counts are sampled, so no count includes it.
  const r = opts.resources[0]!;
  for (let s = 0; s < plane.apiserverUrls.length; s++)
    for (let i = 0; i < names.length; i++) {
      const file = writeTokenKubeconfig(plane.apiserverUrls[s]!, tokens[i]!, `${names[i]}-probe`, plane.dir);
      const probe = KubeClient.fromKubeconfig(file);
      try {
        await eventually(
          `FlowSchema ${names[i]} in force on API server ${s}`,
          async () => {
            const res = await probe.request('PATCH', `/apis/${r.group}/v1/namespaces/default/${r.plural}/svm-flowschema-probe`, {
              body: '{}',
              contentType: 'application/merge-patch+json',
              allow: [404],
            });
            return res.headers['x-kubernetes-pf-flowschema-uid'] === uids[i];
          },
          60_000,
        );
      } finally {
        probe.close();
        removeTokenKubeconfig(file);
      }
    }
  return { identities, remove };
}

/** A sample of the rewrites of the resources: in all (apiserver_request_total), and per replica (by flow schema). */
export interface ReplicaSample extends PutSample {
  byReplica: number[];
}

/** The rewrites each flow schema's requests were dispatched, on one server. */
function dispatchedBy(metrics: string, flowSchemas: string[]): number[] {
  const all = samples(metrics, 'apiserver_flowcontrol_dispatched_requests_total');
  return flowSchemas.map((f) => all.filter((s) => s.labels.flow_schema === f).reduce((a, s) => a + s.value, 0));
}

/** Samples, every second until stop(), the rewrites of `resources` summed over every API server: in all and per replica. */
export function replicaSampler(plane: TestPlane, resources: Resource[], identities: ReplicaIdentity[]) {
  const flowSchemas = identities.map((x) => x.flowSchema);
  return metricsSampler(plane, (bodies, t0, t1): ReplicaSample => {
    const byServer = bodies.map((b) => dispatchedBy(b, flowSchemas));
    return {
      t0,
      t1,
      t: (t0 + t1) / 2,
      puts: bodies.reduce((sum, b) => sum + countPuts(b, resources), 0),
      byReplica: flowSchemas.map((_, k) => byServer.reduce((sum, counts) => sum + counts[k]!, 0)),
    };
  });
}

/** One replica's samples, as busiestWindow (helpers/puts.ts) reads them. */
export function replicaSamples(taken: ReplicaSample[], k: number): PutSample[] {
  return taken.map((s) => ({ t0: s.t0, t1: s.t1, t: s.t, puts: s.byReplica[k]! }));
}

/** Each replica's rewrites between two samples. */
export function rewritesBetween(a: ReplicaSample, b: ReplicaSample): number[] {
  return b.byReplica.map((n, k) => n - a.byReplica[k]!);
}
