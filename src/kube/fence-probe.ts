/**
 * Whether svm's fence guards the worker's writes of a resource, found by a dry run: a change of one object's labels
 * (dryRun=All: nothing is stored) that the fence refuses and nothing else would. Two questions are asked this way:
 *
 * - 'svm' (SVM_REQUIRE_FENCE): is any of svm's fences in force, the policy made through the API or the one loaded
 *   from a manifest? Not where an aggregated API server serves the resource (kube-apiserver proxies its requests
 *   past its own admission) unless that server runs the fence itself, nor where the fence is not installed: a grant
 *   of `patch` there lets the worker's token change the objects, and the migration is refused.
 * - 'static' (SVM_REQUIRE_STATIC_FENCE), for admission objects (admission policies, their bindings, webhook
 *   configurations): kube-apiserver never runs policies made through the API on them, so a grant on one lets the
 *   token change them, and through them switch the fence off, unless the fence loaded from a manifest (Kubernetes
 *   1.37's manifest-based admission, KEP-5793), which the API cannot change and which is evaluated on admission
 *   objects too, is in force. Each API server loads its own manifest, so each is asked at its own address.
 */
import { objectPath, type ResourceRef } from '../api/resource';

export { needsManifestFence } from '../api/resource';
import type { ApiServers } from './apiservers';
import { METADATA_ONLY_ACCEPT, type KubeClient } from './client';
import { KubeError } from './errors';

/** The suffix only policies loaded from manifests may carry (the API refuses it). */
const STATIC_SUFFIX = '.static.k8s.io';

/** How svm's fence is named: deploy/'s svm-worker-no-op-only, the chart's <namePrefix>-worker-no-op-only (scripts/fence.ts). */
const FENCE_NAME_SUFFIX = '-worker-no-op-only';

/** The label the dry run would set: a change the fence refuses (it admits only writes that change nothing). */
export const PROBE_LABEL = 'svm.probe/fence';

/** Which fence must refuse the dry run: any of svm's, or the one loaded from a manifest. */
export type FenceKind = 'svm' | 'static';

export type FenceProbe =
  | { inForce: true; policy: string }
  | { inForce: false; why: string }
  /** Nothing of the resource to try the change on: nothing to rewrite either. */
  | { nothingToProbe: true };

/** Whether a policy is svm's fence: by its name, as made through the API or loaded from a manifest. */
export function isSvmFence(policy: string, kind: FenceKind): boolean {
  const loaded = policy.endsWith(STATIC_SUFFIX);
  if (kind === 'static' && !loaded) return false;
  return (loaded ? policy.slice(0, -STATIC_SUFFIX.length) : policy).endsWith(FENCE_NAME_SUFFIX);
}

const FENCE_WORDS: Record<FenceKind, string> = { svm: "svm's fence", static: "svm's fence loaded from a manifest" };

/** What the dry run's answer says: refused by svm's fence (of the kind asked), or admitted, or refused by something else. */
export function judgeProbe(answer: { status: number } | KubeError, kind: FenceKind): FenceProbe {
  if (!(answer instanceof KubeError))
    return {
      inForce: false,
      why: `a change of its labels was admitted (dry run, HTTP ${answer.status}): ${FENCE_WORDS[kind]} does not refuse it`,
    };
  const policy = answer.info.policy;
  if (answer.status === 403 && policy !== undefined && isSvmFence(policy, kind)) return { inForce: true, policy };
  return { inForce: false, why: `the dry run was refused, but not by ${FENCE_WORDS[kind]}: ${answer.message}` };
}

/**
 * The path of the object to try the change on: the first a metadata-only list gives, but none of svm's own Leases
 * (the fence lets the worker write those). Undefined when there is none.
 */
export async function probeTarget(
  kube: KubeClient,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
): Promise<string | undefined> {
  const own = (name: string) => ref.group === 'coordination.k8s.io' && ref.resource === 'leases' && name.startsWith('svm-');
  const first = (await kube.listPage(ref, { limit: 5 })).items.find((o) => !own(o.name));
  return first && objectPath(ref, first.name, first.namespace);
}

/**
 * The dry run at one server (or the worker's one address). A throttled or failing server throws, and so does a refusal
 * by RBAC (no `patch` granted: the chunk's own failure says what to grant); every other answer is judged.
 */
export async function probeAt(server: KubeClient, path: string, kind: FenceKind): Promise<FenceProbe> {
  try {
    const answer = await server.request('PATCH', path, {
      query: { dryRun: 'All' },
      contentType: 'application/merge-patch+json',
      accept: METADATA_ONLY_ACCEPT,
      body: JSON.stringify({ metadata: { labels: { [PROBE_LABEL]: 'dry-run' } } }),
    });
    return judgeProbe(answer, kind);
  } catch (err) {
    const byRbac = err instanceof KubeError && err.status === 403 && err.info.policy === undefined && err.info.webhook === undefined;
    if (err instanceof KubeError && !byRbac && (err.status === 403 || err.status === 422 || err.status === 400))
      return judgeProbe(err, kind);
    throw err;
  }
}

/** One server's answer, named by its address. */
export type ServerFenceProbe = FenceProbe & { server: string };

/**
 * The dry run at every API server found (each loads its own manifest): each one's answer. Where no address is listed
 * (a managed cluster's one virtual address), through the worker's one address, named so.
 */
export async function probeEachServer(
  found: ApiServers,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
  kind: FenceKind,
): Promise<ServerFenceProbe[]> {
  const target = await probeTarget(found.via, ref);
  if (!target) return [{ server: found.via.server, nothingToProbe: true }];
  const servers =
    found.endpoints.length > 0
      ? found.endpoints
      : [{ id: `${found.via.server} (${found.endpointsNote ?? 'no address listed'})`, kube: found.via }];
  return Promise.all(servers.map(async (s) => ({ server: s.id, ...(await probeAt(s.kube, target, kind)) })));
}

/** The dry run through the worker's one address alone. */
export async function probeFence(
  kube: KubeClient,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
  kind: FenceKind,
): Promise<FenceProbe> {
  const [only] = await probeEachServer({ via: kube, endpoints: [{ id: kube.server, kube }] }, ref, kind);
  const { server: _server, ...probe } = only!;
  return probe;
}

/**
 * Whether an aggregated API server (an APIService with a service) serves the resource's group and version: its
 * requests are proxied past kube-apiserver's admission, so no fence of kube-apiserver's, made through the API or
 * loaded from a manifest, sees them. Undefined when the APIService cannot be read (no right to get it).
 */
export async function servedByAggregatedApi(kube: KubeClient, ref: Pick<ResourceRef, 'group' | 'version'>): Promise<boolean | undefined> {
  if (!ref.group) return false;
  const res = await kube.raw('GET', `/apis/apiregistration.k8s.io/v1/apiservices/${ref.version}.${ref.group}`);
  if (res.status === 404) return false;
  if (res.status !== 200) return undefined;
  const service = (JSON.parse(res.body) as { spec?: { service?: unknown } }).spec?.service;
  return service !== undefined && service !== null;
}
