/** Which of a cluster's resources a migration of "every resource" covers (`svm migrate --all`, `svm plan`). */
import type { DiscoveredResource } from './client';
import { notMigratableReason, throughVersion } from './resolve';
import { compareStrings } from '../api/order';
import type { ResourceRef } from '../api/resource';

/** Groups whose changes admission policies cannot see, or whose objects grant rights: never in the default rights. */
export const UNFENCED_GROUPS: readonly string[] = ['admissionregistration.k8s.io', 'rbac.authorization.k8s.io'];

/** Whether the default rights (deploy/rbac.yaml) leave this resource out: custom resources and the unfenced groups. */
export function needsGrant(ref: Pick<ResourceRef, 'group' | 'custom'>): boolean {
  return ref.custom || UNFENCED_GROUPS.includes(ref.group);
}

/**
 * Every migratable resource of the cluster, from discovery: built-in, custom
 * and aggregated; top-level, persisted (a storageVersionHash), with list and
 * update; one version per group (throughVersion: the one stored in, else the preferred). Resources that share storage
 * (core events and events.k8s.io events carry the same plural and
 * storageVersionHash) are migrated once, through the core group or the first
 * group found.
 */
export function migratableResources(discovered: DiscoveredResource[]): DiscoveredResource[] {
  const servedIn = new Map<string, DiscoveredResource[]>();
  for (const r of discovered) {
    if (notMigratableReason(r)) continue;
    const key = `${r.name}.${r.group}`;
    servedIn.set(key, [...(servedIn.get(key) ?? []), r]);
  }
  const byGroup = new Map([...servedIn].map(([key, served]) => [key, throughVersion(served)!]));
  const byStorage = new Map<string, DiscoveredResource>();
  for (const r of [...byGroup.values()].sort(
    (a, b) => (a.group === '' ? -1 : b.group === '' ? 1 : compareStrings(a.group, b.group)) || compareStrings(a.name, b.name),
  )) {
    const key = `${r.name}|${r.storageVersionHash}`;
    if (!byStorage.has(key)) byStorage.set(key, r);
  }
  return [...byStorage.values()];
}
