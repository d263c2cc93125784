/**
 * storagemigration.k8s.io StorageVersionMigration objects (the standard API:
 * v1 from Kubernetes 1.37, v1beta1 in 1.35 and 1.36), typed. The version is
 * whichever of STANDARD_VERSIONS the cluster serves, looked up again after
 * SERVED_VERSION_TTL_MS: a worker started on 1.36 sees v1 once the API
 * servers reach 1.37.
 * Status writes carry svm's field manager, so another writer shows in
 * managedFields (otherStatusWriters).
 */
import { collectionPath, type ResourceRef } from '../api/resource';
import {
  STANDARD_GROUP,
  STANDARD_VERSIONS,
  StandardMigration,
  SVM_FIELD_MANAGER,
  type StandardCondition,
  type StandardVersion,
} from '../api/standard-migration';
import { METADATA_ONLY_LIST_ACCEPT, parseJson, type KubeClient, type KubeResponse } from './client';
import { KubeError } from './errors';
import { WORKFLOW_ID_ANNOTATION } from './migrations';
import { ensureOk, MalformedObjectError, parseAs, parseBodyAs } from './typed';

/** How long a client keeps the served version it found: a rolling upgrade changes it under a running worker. */
export const SERVED_VERSION_TTL_MS = 60_000;

const served = new WeakMap<KubeClient, { version: StandardVersion | 'none'; at: number }>();

/** The newest standard version the cluster serves, or undefined when it serves none (before 1.35, or the API turned off). */
export async function standardVersion(kube: KubeClient, fresh = false): Promise<StandardVersion | undefined> {
  const cached = fresh ? undefined : served.get(kube);
  const known = cached && Date.now() - cached.at < SERVED_VERSION_TTL_MS ? cached.version : undefined;
  if (known) return known === 'none' ? undefined : known;
  const res = await kube.request('GET', `/apis/${STANDARD_GROUP}`, { allow: [404] });
  let found: StandardVersion | 'none' = 'none';
  if (res.status !== 404) {
    const group = parseJson<{ versions?: Array<{ version?: string }> }>(res.body, `the ${STANDARD_GROUP} API group`);
    const versions = new Set((group?.versions ?? []).map((v) => v.version));
    found = STANDARD_VERSIONS.find((v) => versions.has(v)) ?? 'none';
  }
  served.set(kube, { version: found, at: Date.now() });
  return found === 'none' ? undefined : found;
}

async function collection(kube: KubeClient): Promise<string> {
  const v = await standardVersion(kube);
  if (!v) throw new Error(`the API servers serve no ${STANDARD_GROUP} version svm speaks (${STANDARD_VERSIONS.join(', ')})`);
  return `/apis/${STANDARD_GROUP}/${v}/storageversionmigrations`;
}

/** The collection path (for watches), or undefined when the API is not served. */
export async function standardCollectionPath(kube: KubeClient): Promise<string | undefined> {
  return (await standardVersion(kube)) ? collection(kube) : undefined;
}

const itemPath = async (kube: KubeClient, name: string) => `${await collection(kube)}/${encodeURIComponent(name)}`;

export async function findStandardMigration(kube: KubeClient, name: string): Promise<StandardMigration | undefined> {
  const res = await kube.request('GET', await itemPath(kube, name), { allow: [404] });
  if (res.status === 404) return undefined;
  ensureOk(res);
  return parseBodyAs(StandardMigration, res.body, { kind: 'StorageVersionMigration', name });
}

export async function listStandardMigrations(kube: KubeClient): Promise<{ items: StandardMigration[]; malformed: MalformedObjectError[] }> {
  const res = await kube.request('GET', await collection(kube));
  const list = parseJson<{ items?: unknown }>(res.body, 'a StorageVersionMigration list');
  const items: StandardMigration[] = [];
  const malformed: MalformedObjectError[] = [];
  (Array.isArray(list?.items) ? (list.items as unknown[]) : []).forEach((item, i) => {
    try {
      items.push(parseAs(StandardMigration, item, { kind: 'StorageVersionMigration', name: `(list item ${i})` }));
    } catch (err) {
      if (!(err instanceof MalformedObjectError)) throw err;
      malformed.push(err);
    }
  });
  return { items, malformed };
}

/** Creates one for a resource (what upgrade tooling does; svm's trigger in the deferring mode). 'exists' on a name clash. */
export async function createStandardMigration(
  kube: KubeClient,
  name: string,
  gr: { group: string; resource: string },
  annotations: Record<string, string> = {},
): Promise<'created' | 'exists'> {
  const version = await standardVersion(kube);
  const body = {
    apiVersion: `${STANDARD_GROUP}/${version}`,
    kind: 'StorageVersionMigration',
    metadata: { name, ...(Object.keys(annotations).length ? { annotations } : {}) },
    spec: { resource: { group: gr.group, resource: gr.resource } },
  };
  const res = await kube.raw('POST', await collection(kube), { body: JSON.stringify(body) });
  if (res.status === 409) return 'exists';
  ensureOk(res);
  return 'created';
}

/** Ties the object with this uid to its workflow (only svm sets the annotation). 'gone' when deleted or replaced. */
export async function annotateStandardMigration(
  kube: KubeClient,
  name: string,
  uid: string | undefined,
  workflowId: string,
): Promise<'annotated' | 'gone'> {
  const res = await kube.raw('PATCH', await itemPath(kube, name), {
    body: JSON.stringify({ metadata: { uid, annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } } }),
    contentType: 'application/merge-patch+json',
    query: { fieldManager: SVM_FIELD_MANAGER },
  });
  if (res.status === 404 || res.status === 409) return 'gone';
  ensureOk(res);
  return 'annotated';
}

/**
 * Writes the status subresource: the whole conditions list and, once, the
 * resourceVersion (immutable after it is set). Throws a classified KubeError
 * ('notFound' when the object is gone).
 */
export async function writeStandardStatus(
  kube: KubeClient,
  name: string,
  status: { conditions: StandardCondition[]; resourceVersion?: string },
): Promise<void> {
  await kube.request('PATCH', `${await itemPath(kube, name)}/status`, {
    body: JSON.stringify({ status }),
    contentType: 'application/merge-patch+json',
    query: { fieldManager: SVM_FIELD_MANAGER },
  });
}

/**
 * A namespace no object can be in (not a DNS label): the list of a namespaced resource in it is empty, and carries
 * the resource's current resourceVersion all the same (the built-in asks the same way).
 */
export const NO_NAMESPACE = '@svm:no-such-namespace!';

/**
 * The resource's current list resourceVersion: the built-in's status.resourceVersion (objects at or below it are
 * migrated). Read without any object's content: a namespaced resource is listed in NO_NAMESPACE, and the list asks
 * for metadata only (a CRD whose conversion webhook is down serves no content, and a Secret's is none of svm's
 * business). Undefined, and the status is written without it, when:
 * - the server cannot answer with metadata only (406: some aggregated APIs). Note: it is not asked for its plain
 *   list instead: that would be the one object of a cluster-scoped resource, content and all.
 * - the API servers cannot convert the one object a cluster-scoped resource's list holds (its CRD's conversion
 *   webhook fails): the migration goes on to fail naming the webhook (a retry would fail the same way for as long
 *   as the webhook is down, and leave the object without any status).
 */
export async function latestResourceVersion(
  kube: KubeClient,
  ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'namespaced'>,
): Promise<string | undefined> {
  const path = collectionPath(ref, ref.namespaced ? NO_NAMESPACE : undefined);
  let res: KubeResponse;
  try {
    res = await kube.request('GET', path, { query: { limit: 1 }, accept: METADATA_ONLY_LIST_ACCEPT });
  } catch (err) {
    if (err instanceof KubeError && (err.status === 406 || err.info.conversionFailed)) return undefined;
    throw err;
  }
  const list = parseJson<{ metadata?: { resourceVersion?: string } }>(res.body, `GET ${path}`);
  const rv = list?.metadata?.resourceVersion;
  if (!rv) throw new Error(`the list of ${ref.resource} gave no resourceVersion`);
  return rv;
}
