/**
 * CustomResourceDefinitions, typed: what the migrator reads of a CRD (its
 * storage version, generation, storedVersions) and the one write it makes
 * (status.storedVersions, after a pass under agreement).
 */
import { CustomResourceDefinition, crdName } from '../api/custom-resource-definition';
import type { KubeClient } from './client';
import { parseBodyAs } from './typed';

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
