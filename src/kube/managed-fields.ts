/**
 * Which objects of a resource carry managedFields entries written at a
 * given apiVersion: server-side apply converts every entry to the version
 * of the request, and an entry whose version is no longer served makes it
 * fail ("request to convert CR to an invalid group/version", seen on
 * Kubernetes 1.36.3 and 1.37.2). Counted from a metadata-only list
 * (PartialObjectMetadataList): no object's content is ever read. And the
 * rewrite that renames those entries' apiVersion (svm managed-fields).
 */
import { objectPath, type ResourceRef } from '../api/resource';
import { METADATA_ONLY_ACCEPT, type KubeClient } from './client';

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

export interface ManagedFieldsRewrite {
  /** Objects listed. */
  objects: number;
  /** Objects whose entries at the old apiVersion were brought to the new one. */
  rewritten: number;
  /** Entries rewritten in all. */
  entries: number;
  /** Objects whose managedFields changed between the list and the patch (its tests failed): left as they are, counted again below. */
  changedMeanwhile: number;
  /** Objects deleted between the list and the patch. */
  gone: number;
  /** Objects that still have an entry at the old apiVersion, counted by a second list after the pass. */
  remaining: number;
}

/**
 * Brings every managedFields entry at apiVersion `from` to `to` (same group), so that server-side apply keeps
 * working once `from` is no longer served: the same field sets, named at a version that is. Lists with `lister`
 * (metadata only, at ref.version, which should be `to`'s version) and patches with `writer`, whose identity the
 * fence of deploy/managed-fields.yaml lets change nothing but such apiVersions. Each patch is a JSON patch that
 * tests each entry's manager and apiVersion before it replaces that apiVersion: an entry that moved meanwhile fails
 * the test (422) and the object is left as it is. No object's content is read or written. Then lists again and
 * counts what still names `from`.
 */
export async function rewriteManagedFieldsAt(
  lister: KubeClient,
  writer: KubeClient,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
  from: string,
  to: string,
  onPage?: (listed: number) => void,
): Promise<ManagedFieldsRewrite> {
  const out: ManagedFieldsRewrite = { objects: 0, rewritten: 0, entries: 0, changedMeanwhile: 0, gone: 0, remaining: 0 };
  let continueToken: string | undefined;
  do {
    const todo: Array<{ name: string; namespace?: string; ops: object[]; n: number }> = [];
    const meta = await lister.listEach(ref, { limit: PAGE, continueToken, managedFields: true }, (o) => {
      out.objects++;
      const ops: object[] = [];
      let n = 0;
      (o.managedFields ?? []).forEach((f, i) => {
        if (f.apiVersion !== from) return;
        n++;
        ops.push(
          { op: 'test', path: `/metadata/managedFields/${i}/apiVersion`, value: from },
          { op: 'test', path: `/metadata/managedFields/${i}/manager`, value: f.manager ?? '' },
          { op: 'replace', path: `/metadata/managedFields/${i}/apiVersion`, value: to },
        );
      });
      if (n > 0) todo.push({ name: o.name, namespace: o.namespace, ops, n });
    });
    for (const t of todo) {
      const res = await writer.request('PATCH', objectPath(ref, t.name, t.namespace), {
        body: JSON.stringify(t.ops),
        contentType: 'application/json-patch+json',
        accept: METADATA_ONLY_ACCEPT,
        allow: [404, 409, 422],
      });
      if (res.status === 404) out.gone++;
      else if (res.status === 409 || res.status === 422) out.changedMeanwhile++;
      else {
        out.rewritten++;
        out.entries += t.n;
      }
    }
    continueToken = meta.continueToken;
    onPage?.(out.objects);
  } while (continueToken);
  out.remaining = (await countManagedFieldsAt(lister, ref, from)).naming;
  return out;
}
