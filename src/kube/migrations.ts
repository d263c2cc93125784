/**
 * StorageVersionMigration objects (migration.k8s.io/v1alpha1,
 * cluster-scoped), typed: the kubectl-visible mirror of a migration. The
 * workflow's activities create them and write their status; the bridge
 * (src/worker/bridge.ts) reads them, annotates them, and repairs their status.
 */
import { MIGRATION_API_VERSION, StorageVersionMigration, type StorageVersionMigrationStatus } from '../api/migration';
import type { KubeClient } from './client';
import { ensureOk, MalformedObjectError, parseAs, parseBodyAs } from './typed';
import { parseJson } from './client';

/** The annotation that ties an object to its migration workflow; only svm sets it. */
export const WORKFLOW_ID_ANNOTATION = 'migration.k8s.io/workflow-id';

export const SVMS_PATH = `/apis/${MIGRATION_API_VERSION}/storageversionmigrations`;
export const svmPath = (name: string) => `${SVMS_PATH}/${encodeURIComponent(name)}`;

/** One StorageVersionMigration, or undefined when there is none. A malformed one throws MalformedObjectError. */
export async function findMigrationObject(kube: KubeClient, name: string): Promise<StorageVersionMigration | undefined> {
  const res = await kube.request('GET', svmPath(name), { allow: [404] });
  if (res.status === 404) return undefined;
  ensureOk(res);
  return parseBodyAs(StorageVersionMigration, res.body, { kind: 'StorageVersionMigration', name });
}

/**
 * Every StorageVersionMigration. One malformed object does not hide the
 * others: it is left out and its MalformedObjectError returned beside them.
 */
export async function listMigrationObjects(
  kube: KubeClient,
): Promise<{ items: StorageVersionMigration[]; malformed: MalformedObjectError[] }> {
  const res = await kube.request('GET', SVMS_PATH);
  const list = parseJson<{ items?: unknown }>(res.body, 'a StorageVersionMigration list');
  const raw = Array.isArray(list?.items) ? (list.items as unknown[]) : [];
  const items: StorageVersionMigration[] = [];
  const malformed: MalformedObjectError[] = [];
  raw.forEach((item, i) => {
    try {
      items.push(parseAs(StorageVersionMigration, item, { kind: 'StorageVersionMigration', name: `(list item ${i})` }));
    } catch (err) {
      if (!(err instanceof MalformedObjectError)) throw err;
      malformed.push(err);
    }
  });
  return { items, malformed };
}

/**
 * Creates the object for a migration, annotated with its workflow ID.
 * 'exists' when one of that name is there already; 'crdMissing' when the
 * StorageVersionMigration CRD is not installed (404).
 */
export async function createMigrationObject(
  kube: KubeClient,
  name: string,
  workflowId: string,
  resource: { group: string; version: string; resource: string },
): Promise<'created' | 'exists' | 'crdMissing'> {
  const body: StorageVersionMigration = {
    apiVersion: MIGRATION_API_VERSION,
    kind: 'StorageVersionMigration',
    metadata: { name, annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } },
    spec: { resource: { group: resource.group, version: resource.version, resource: resource.resource } },
  };
  const res = await kube.raw('POST', SVMS_PATH, { body: JSON.stringify(body) });
  if (res.status === 404) return 'crdMissing';
  if (res.status === 409) return 'exists';
  ensureOk(res);
  return 'created';
}

/** Merge-patches the object's status subresource. Throws a classified KubeError ('notFound' when it is gone). */
export async function patchMigrationStatus(kube: KubeClient, name: string, status: StorageVersionMigrationStatus): Promise<void> {
  await kube.patchStatus(svmPath(name), status);
}

/**
 * Sets the workflow-ID annotation on the object with this uid. 'gone' when
 * it was deleted, or deleted and created again (the uid precondition: 409).
 */
export async function annotateMigrationObject(
  kube: KubeClient,
  name: string,
  uid: string | undefined,
  workflowId: string,
): Promise<'annotated' | 'gone'> {
  const res = await kube.raw('PATCH', svmPath(name), {
    body: JSON.stringify({ metadata: { uid, annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } } }),
    contentType: 'application/merge-patch+json',
  });
  if (res.status === 404 || res.status === 409) return 'gone';
  ensureOk(res);
  return 'annotated';
}
