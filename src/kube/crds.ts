/**
 * CustomResourceDefinitions, typed: what the migrator reads of a CRD (its
 * storage version, generation, storedVersions) and the one write it makes
 * (status.storedVersions, after a pass under agreement).
 */
import { CustomResourceDefinition, crdName, storageVersionOf } from '../api/custom-resource-definition';
import type { KubeClient } from './client';
import { retryOnConflict } from './retry';
import { parseBodyAs } from './typed';
import { MIGRATION_FAILED } from '../contract/reasons';

export const CRDS_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
export const crdPath = (gr: { group: string; resource: string }) => `${CRDS_PATH}/${crdName(gr)}`;

/** The CRD that serves the resource. Throws a classified KubeError ('notFound' when there is none). */
export async function getCrd(kube: KubeClient, gr: { group: string; resource: string }): Promise<CustomResourceDefinition> {
  const res = await kube.request('GET', crdPath(gr));
  return parseBodyAs(CustomResourceDefinition, res.body, { kind: 'CustomResourceDefinition', name: crdName(gr) });
}

/**
 * Sets the CRD's status.storedVersions (a merge patch of the status
 * subresource): the versions objects may still be stored in. Only after a
 * whole pass under agreement may it shrink to the agreed storage version.
 */
export async function setCrdStoredVersions(
  kube: KubeClient,
  gr: { group: string; resource: string },
  storedVersions: string[],
): Promise<void> {
  await kube.patchStatus(crdPath(gr), { storedVersions });
}

/** The CRD condition the built-in migrator keeps (apiextensions StorageMigrating), which svm keeps the same way. */
export const STORAGE_MIGRATING = 'StorageMigrating';

/** Status writes of one CRD tried, each on the CRD read just before, before a conflict is thrown. */
const CRD_STATUS_ATTEMPTS = 5;

/**
 * The built-in's storedVersions protocol (kube-controller-manager 1.37,
 * migration runner): prune status.storedVersions to the storage version only
 * if the CRD's generation is the one recorded when the pass started, in one
 * status write made on exactly the CRD that was checked (its resourceVersion
 * as precondition), with the StorageMigrating condition saying what was done
 * or why not. So svm and the built-in never race on a CRD: a change of the
 * CRD between the check and the write is a conflict, read again.
 */
export async function pruneStoredVersions(
  kube: KubeClient,
  gr: { group: string; resource: string },
  expected: { generation: number; storageVersion: string },
  who: string,
): Promise<{ pruned: true; storedVersions: string[] } | { pruned: false; why: string }> {
  return retryOnConflict(CRD_STATUS_ATTEMPTS, async () => {
    const crd = await getCrd(kube, gr);
    const generation = crd.metadata.generation;
    const storage = storageVersionOf(crd);
    const ok = generation === expected.generation && storage === expected.storageVersion;
    const why = ok
      ? undefined
      : generation !== expected.generation
        ? `the CRD's generation is ${generation}, not ${expected.generation} as when the pass started`
        : `the CRD stores ${storage} now, not ${expected.storageVersion}`;
    const now = new Date().toISOString();
    const condition = {
      type: STORAGE_MIGRATING,
      status: 'False',
      lastTransitionTime: now,
      reason: 'MigrationSucceeded',
      message: ok
        ? `The migration has succeeded and the stored versions have been updated (${who})`
        : `The migration has succeeded but the stored versions have not been updated: ${why} (${who})`,
      observedGeneration: generation,
    };
    const conditions = [...(crd.status?.conditions ?? []).filter((c) => c.type !== STORAGE_MIGRATING), condition];
    await kube.patchStatus(
      crdPath(gr),
      { conditions, ...(ok ? { storedVersions: [expected.storageVersion] } : {}) },
      crd.metadata.resourceVersion,
    );
    return ok ? { pruned: true, storedVersions: [expected.storageVersion] } : { pruned: false, why: why! };
  });
}

/**
 * After a failed pass of a custom resource, the StorageMigrating condition says so, as the built-in's does
 * (`MigrationFailed`, `The migration has failed`); storedVersions are left as they are. A resource that is not
 * a custom one (no such CRD) is left alone. On exactly the CRD read (its resourceVersion as precondition).
 */
export async function markCrdMigrationFailed(kube: KubeClient, crdName: string, who: string): Promise<'marked' | 'noCrd'> {
  const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(crdName)}`;
  return retryOnConflict(CRD_STATUS_ATTEMPTS, async () => {
    const res = await kube.request('GET', path, { allow: [404] });
    if (res.status === 404) return 'noCrd';
    const crd = parseBodyAs(CustomResourceDefinition, res.body, { kind: 'CustomResourceDefinition', name: crdName });
    const condition = {
      type: STORAGE_MIGRATING,
      status: 'False',
      lastTransitionTime: new Date().toISOString(),
      reason: MIGRATION_FAILED,
      message: `The migration has failed (${who})`,
      observedGeneration: crd.metadata.generation,
    };
    const conditions = [...(crd.status?.conditions ?? []).filter((c) => c.type !== STORAGE_MIGRATING), condition];
    await kube.patchStatus(path, { conditions }, crd.metadata.resourceVersion);
    return 'marked';
  });
}
