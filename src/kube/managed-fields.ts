/**
 * Which objects of a resource carry managedFields entries written at a
 * given apiVersion: server-side apply converts every entry to the version
 * of the request, and an entry whose version is no longer served makes it
 * fail ("request to convert CR to an invalid group/version", seen on
 * Kubernetes 1.36.3 and 1.37.2). Counted from a metadata-only list
 * (PartialObjectMetadataList): no object's content is ever read.
 */
import type { ResourceRef } from '../api/resource';
import type { KubeClient } from './client';

/** Objects per list page: metadata only, so a page stays small. */
const PAGE = 500;
/** Managers named in a report at most (names only, never fields). */
const MAX_MANAGERS = 20;

export interface ManagedFieldsCount {
  /** Objects listed. */
  objects: number;
  /** Objects with at least one managedFields entry at apiVersion. */
  naming: number;
  /** The field managers of those entries (at most MAX_MANAGERS, sorted). */
  managers: string[];
}

/**
 * Lists the resource (at ref.version, which should not be the version asked
 * about: the list would itself be a request at it) and counts the objects
 * whose managedFields name apiVersion. onPage is called after each page (a
 * heartbeat).
 */
export async function countManagedFieldsAt(
  kube: KubeClient,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
  apiVersion: string,
  onPage?: (listed: number) => void,
): Promise<ManagedFieldsCount> {
  let objects = 0;
  let naming = 0;
  const managers = new Set<string>();
  let continueToken: string | undefined;
  do {
    const meta = await kube.listEach(ref, { limit: PAGE, continueToken, managedFields: true }, (o) => {
      objects++;
      const at = (o.managedFields ?? []).filter((f) => f.apiVersion === apiVersion);
      if (at.length === 0) return;
      naming++;
      for (const f of at) if (managers.size < MAX_MANAGERS) managers.add(f.manager ?? '(no manager)');
    });
    continueToken = meta.continueToken;
    onPage?.(objects);
  } while (continueToken);
  return { objects, naming, managers: [...managers].sort() };
}
