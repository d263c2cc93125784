/**
 * The drop check's managedFields check: the objects with a managedFields entry at the version, counted from a
 * metadata-only list at another.
 */
import type { DropCheck } from '../contract/drop';
import type { DiscoveredResource, KubeClient } from './client';
import { plural, why, type DropTarget, type ManagedFieldsFinding } from './drop-shared';
import { KubeError } from './errors';
import { countManagedFieldsAt, type ManagedFieldsCount } from './managed-fields';

/** The managedFields check from a count (pure). */
export function managedFieldsCheck(gv: string, version: string, count: ManagedFieldsCount, resource?: string): DropCheck {
  if (count.naming === 0)
    return {
      check: 'managedFields',
      verdict: 'Ready',
      reason: `none of ${plural(count.objects, 'object')} has a managedFields entry at ${gv}`,
    };
  const rename = resource ? ` or svm managed-fields ${resource} --from ${gv} renames them` : '';
  return {
    check: 'managedFields',
    verdict: 'NotYet',
    reason:
      `${count.naming} of ${plural(count.objects, 'object')} have managedFields entries at ${gv} (managers: ${count.managers.join(', ')}): ` +
      `server-side apply on them fails once ${version} is no longer served, until each manager applies at another version${rename}`,
  };
}

/** Every object's metadata, listed through `other` (another version than the one to drop), counted by its managedFields. */
export async function managedFieldsFinding(
  kube: KubeClient,
  { group, version, groupVersion }: DropTarget,
  name: string,
  key: string,
  other: DiscoveredResource | undefined,
  heartbeat: (what: string) => void,
): Promise<ManagedFieldsFinding> {
  const unknown = (reason: string): ManagedFieldsFinding => ({
    check: { check: 'managedFields', verdict: 'Unknown', reason },
    objects: null,
    naming: null,
  });
  if (!other)
    return unknown(`no other version of ${key} is served to list it through (a list at ${version} would itself be a request at it)`);
  try {
    const count = await countManagedFieldsAt(kube, { group, version: other.version, resource: name, kind: other.kind }, groupVersion, (n) =>
      heartbeat(`${key}: ${n} objects listed`),
    );
    return {
      check: managedFieldsCheck(groupVersion, version, count, key),
      objects: count.objects,
      naming: count.naming,
      ...(count.managers.length > 0 ? { managers: count.managers } : {}),
      listedAt: other.version,
    };
  } catch (err) {
    if (!(err instanceof KubeError)) throw err;
    return { ...unknown(`could not list ${key} (metadata only): ${why(err)}`), listedAt: other.version, listError: err };
  }
}
