/**
 * StorageState objects (migration.k8s.io/v1alpha1, cluster-scoped), typed:
 * what storage version hashes each resource may be persisted in. The
 * trigger creates them and writes their status every period; a successful
 * migration refines persistedStorageVersionHashes. Status writes carry the
 * resourceVersion they were decided on, so a 409 (KubeError 'conflict')
 * means someone wrote in between and the caller decides again.
 */
import { MIGRATION_API_VERSION, StorageState, type StorageStateStatus } from '../api/migration';
import type { KubeClient } from './client';
import { retryOnConflict } from './retry';
import { ensureOk, parseBodyAs, parseListAs } from './typed';

export const storageStatePath = (name?: string) =>
  `/apis/${MIGRATION_API_VERSION}/storagestates${name ? `/${encodeURIComponent(name)}` : ''}`;

/** Every StorageState. */
export async function listStorageStates(kube: KubeClient): Promise<StorageState[]> {
  const res = await kube.request('GET', storageStatePath());
  return parseListAs(StorageState, res.body, 'StorageState');
}

/** One StorageState, or undefined when there is none. */
export async function findStorageState(kube: KubeClient, name: string): Promise<StorageState | undefined> {
  const res = await kube.request('GET', storageStatePath(name), { allow: [404] });
  if (res.status === 404) return undefined;
  ensureOk(res);
  return parseBodyAs(StorageState, res.body, { kind: 'StorageState', name });
}

/** Creates the StorageState of a resource (no status: that is a subresource). 'exists' when it is there already. */
export async function createStorageState(
  kube: KubeClient,
  name: string,
  resource: { group: string; resource: string },
): Promise<'created' | 'exists'> {
  const body: StorageState = {
    apiVersion: MIGRATION_API_VERSION,
    kind: 'StorageState',
    metadata: { name },
    spec: { resource: { group: resource.group, resource: resource.resource } },
  };
  const res = await kube.raw('POST', storageStatePath(), { body: JSON.stringify(body) });
  if (res.status === 409) return 'exists';
  ensureOk(res);
  return 'created';
}

/**
 * Merge-patches the status. With a resourceVersion it applies only to that
 * version of the object: KubeError 'conflict' when it changed since.
 */
export async function patchStorageStateStatus(
  kube: KubeClient,
  name: string,
  status: StorageStateStatus,
  resourceVersion?: string,
): Promise<void> {
  await kube.patchStatus(storageStatePath(name), status, resourceVersion);
}

/** Writes of the refined status tried, each on the StorageState read just before (the trigger writes it every period). */
const REFINE_ATTEMPTS = 10;

/**
 * After a successful migration: persistedStorageVersionHashes becomes
 * [hash], if the StorageState's current hash is still the one migrated to.
 * Read-modify-write on the resourceVersion read; a conflict (the trigger's
 * heartbeat meanwhile) reads again, a bounded number of times. False when
 * there is no StorageState or its current hash moved on.
 */
export function refineStorageState(kube: KubeClient, name: string, hash: string): Promise<boolean> {
  return retryOnConflict(REFINE_ATTEMPTS, async () => {
    const st = await findStorageState(kube, name);
    if (!st) return false;
    if (st.status?.currentStorageVersionHash !== hash) return false;
    await patchStorageStateStatus(kube, name, { persistedStorageVersionHashes: [hash] }, st.metadata.resourceVersion);
    return true;
  });
}

/** What the trigger writes when it cannot know where objects are persisted. */
export const UNKNOWN_HASH = 'Unknown';

/**
 * Why a StorageState says a migration is due, or undefined when it does not
 * (the trigger's own rule: due unless persisted is exactly [current]).
 * servedHash: what the API servers serve now, when known.
 */
export function storageStateReason(
  persisted: string[] | undefined,
  current: string | undefined,
  servedHash: string | undefined,
): string | undefined {
  const p = persisted ?? [UNKNOWN_HASH];
  const list = `[${p.join(', ')}]`;
  if (p.includes(UNKNOWN_HASH)) return `StorageState persistedStorageVersionHashes ${list}: objects may be stored in any version`;
  if (p.length > 1) return `StorageState persistedStorageVersionHashes ${list}: objects are stored in more than one version`;
  if (p.length === 0) return undefined;
  const now = servedHash ?? current;
  if (now && p[0] !== now) return `StorageState persistedStorageVersionHashes ${list}, but the API servers now serve ${now}`;
  return undefined;
}
