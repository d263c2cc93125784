/**
 * What the worker's own identity may do (SelfSubjectAccessReview, which every
 * authenticated identity may create): whether it holds the re-encode's rights
 * on a resource (list and patch, cluster-wide). The shipped rights leave out
 * custom resources and admission and RBAC objects until the operator grants
 * them (`svm grant`), so the trigger asks before it starts a migration that
 * could only fail with a 403.
 */
import type { ResourceRef } from '../api/resource';
import type { KubeClient } from './client';

async function allowed(kube: KubeClient, verb: string, group: string, resource: string): Promise<boolean> {
  const res = await kube.request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    body: JSON.stringify({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { verb, group, resource } },
    }),
  });
  return (JSON.parse(res.body) as { status?: { allowed?: boolean } }).status?.allowed === true;
}

/** The verbs of the re-encode this identity lacks on the resource (empty: it may migrate it). */
export async function missingReencodeRights(kube: KubeClient, ref: Pick<ResourceRef, 'group' | 'resource'>): Promise<string[]> {
  const missing: string[] = [];
  for (const verb of ['list', 'patch']) if (!(await allowed(kube, verb, ref.group, ref.resource))) missing.push(verb);
  return missing;
}
