/**
 * The StorageVersion API (internal.apiserver.k8s.io/v1alpha1), typed. It is
 * alpha and off by default: "not served" is an ordinary answer here, not an
 * error.
 */
import { StorageVersion, storageVersionName } from '../api/storage-version';
import type { KubeClient } from './client';
import { ensureOk, parseBodyAs } from './typed';

export const STORAGE_VERSIONS_GROUP_VERSION_PATH = '/apis/internal.apiserver.k8s.io/v1alpha1';
export const STORAGE_VERSIONS_PATH = `${STORAGE_VERSIONS_GROUP_VERSION_PATH}/storageversions`;

/**
 * The StorageVersion of a built-in resource, or undefined on 404: the API is
 * not served (its default), or it has no object for this resource. Other
 * failures throw classified.
 */
export async function findStorageVersion(kube: KubeClient, gr: { group: string; resource: string }): Promise<StorageVersion | undefined> {
  const name = storageVersionName(gr);
  const res = await kube.request('GET', `${STORAGE_VERSIONS_PATH}/${name}`, { allow: [404] });
  if (res.status === 404) return undefined;
  ensureOk(res);
  return parseBodyAs(StorageVersion, res.body, { kind: 'StorageVersion', name });
}

/**
 * Whether the API server serves the StorageVersion API now, with the HTTP
 * status it answered (undefined when the request failed: counted as not
 * served, and asked again later).
 */
export async function storageVersionApiServed(kube: KubeClient): Promise<{ served: boolean; status?: number }> {
  const res = await kube.raw('GET', STORAGE_VERSIONS_GROUP_VERSION_PATH).catch(() => undefined);
  return { served: res?.status === 200, status: res?.status };
}
