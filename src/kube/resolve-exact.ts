/**
 * A StorageVersionMigration names its resource exactly: the plural and the
 * group as the API serves them (the fields as the upstream types define
 * them). No kubectl-style guessing (short names, kinds, singulars, a missing
 * group meaning any group, a version read as a group): what an admission
 * policy authorized is exactly what is migrated. Anything else is refused
 * with a message that names the exact form to use.
 */
import type { ResourceRef } from '../api/resource';
import type { DiscoveredResource, KubeClient } from './client';
import { InvalidResourceError, matchDiscovering, matchResource, refOf, throughVersion } from './resolve';

export interface ExactResource {
  group?: string;
  resource: string;
  /** migration.k8s.io/v1alpha1 only: a served version of that resource to list and update through (default: throughVersion). */
  version?: string;
}

const exactForm = (r: { group: string; name: string }) => `{group: "${r.group}", resource: "${r.name}"}`;

/** Pure: the discovered resource spec.resource names exactly, or an InvalidResourceError naming the exact form. */
export function matchExact(spec: ExactResource, discovered: DiscoveredResource[]): DiscoveredResource {
  const group = spec.group ?? '';
  const resource = spec.resource;
  if (resource.includes('/')) {
    const top = resource.split('/')[0]!;
    throw new InvalidResourceError(
      `"${resource}" is a subresource; migrate the resource itself: spec.resource ${exactForm({ group, name: top })}`,
    );
  }
  const same = discovered.filter((r) => r.group === group && r.name === resource);
  if (same.length === 0) {
    let hint = '';
    try {
      // Only to say what was probably meant; never to migrate it.
      const guess = matchResource(group ? `${resource}.${group}` : resource, discovered);
      hint = `; did you mean ${exactForm(guess)}?`;
    } catch {
      try {
        const guess = matchResource(spec.version && !group ? `${resource}.${spec.version}` : resource, discovered);
        hint = `; did you mean ${exactForm(guess)}?`;
      } catch {
        hint = '';
      }
    }
    throw new InvalidResourceError(
      `the API servers serve no resource "${resource}" in ${group ? `group "${group}"` : 'the core group'}: a resource is named by its plural and its group exactly as the API serves them, e.g. {group: "apps", resource: "deployments"} or {group: "", resource: "secrets"}${hint}`,
    );
  }
  let pool = same;
  if (spec.version) {
    pool = same.filter((r) => r.version === spec.version);
    if (pool.length === 0) {
      throw new InvalidResourceError(
        `${exactForm({ group, name: resource })} is not served in version "${spec.version}" (served: ${[...new Set(same.map((r) => r.version))].join(', ')}); leave spec.resource.version empty to use the version it is stored in (or the preferred one)`,
      );
    }
  }
  return throughVersion(pool)!;
}

/** Resolves spec.resource against the discovery of its group alone (the whole discovery only to word a refusal). */
export async function resolveExact(kube: KubeClient, spec: ExactResource, discovered?: DiscoveredResource[]): Promise<ResourceRef> {
  if (discovered) return refOf(kube, matchExact(spec, discovered));
  return refOf(kube, await matchDiscovering(kube, [spec.group ?? ''], (d) => matchExact(spec, d)));
}
