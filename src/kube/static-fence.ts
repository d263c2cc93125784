/**
 * Whether the manifest-loaded fence (deploy/static-fence: Kubernetes 1.37's manifest-based admission, KEP-5793)
 * guards this worker's writes of a resource that no policy made through the API can guard. kube-apiserver never
 * runs such policies on admission objects (admission policies, their bindings, webhook configurations), so a grant
 * of `patch` on one of them lets the worker's token change them, and through them switch the fence off, unless the
 * fence loaded from a manifest, which the API cannot change and which is evaluated on admission objects too, is in
 * force. Found by a dry run: a change of one object's labels (dryRun=All: nothing is stored) that the fence refuses
 * and nothing else would.
 */
import { objectPath, type ResourceRef } from '../api/resource';

export { needsManifestFence } from '../api/resource';
import { METADATA_ONLY_ACCEPT, type KubeClient } from './client';
import { KubeError } from './errors';

/** The suffix only policies loaded from manifests may carry (the API refuses it). */
const STATIC_SUFFIX = '.static.k8s.io';

/** The label the dry run would set: a change the fence refuses (it admits only writes that change nothing). */
export const PROBE_LABEL = 'svm.probe/static-fence';

export type FenceProbe =
  | { inForce: true; policy: string }
  | { inForce: false; why: string }
  /** Nothing of the resource to try the change on: nothing to rewrite either. */
  | { nothingToProbe: true };

/** What the dry run's answer says: refused by a manifest-loaded policy, or admitted (or refused by something else). */
export function judgeProbe(answer: { status: number } | KubeError): FenceProbe {
  if (!(answer instanceof KubeError)) {
    return {
      inForce: false,
      why: `a change of its labels was admitted (dry run, HTTP ${answer.status}): no fence loaded from a manifest refuses it`,
    };
  }
  const policy = answer.info.policy;
  if (answer.status === 403 && policy?.endsWith(STATIC_SUFFIX)) return { inForce: true, policy };
  return { inForce: false, why: `the dry run was refused, but not by a fence loaded from a manifest: ${answer.message}` };
}

/**
 * The dry run on the first object a metadata-only list gives. A throttled or failing server throws (the caller's
 * retry takes over); every other answer is judged.
 */
export async function probeManifestFence(
  kube: KubeClient,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
): Promise<FenceProbe> {
  const first = (await kube.listPage(ref, { limit: 1 })).items[0];
  if (!first) return { nothingToProbe: true };
  const path = objectPath(ref, first.name, first.namespace);
  try {
    const answer = await kube.request('PATCH', path, {
      query: { dryRun: 'All' },
      contentType: 'application/merge-patch+json',
      accept: METADATA_ONLY_ACCEPT,
      body: JSON.stringify({ metadata: { labels: { [PROBE_LABEL]: 'dry-run' } } }),
    });
    return judgeProbe(answer);
  } catch (err) {
    if (err instanceof KubeError && (err.status === 403 || err.status === 422 || err.status === 400)) return judgeProbe(err);
    throw err;
  }
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
