/**
 * A built-in resource two API servers of one binary disagree on: with
 * --min-compatibility-version=1.34 a v1.37 kube-apiserver encodes
 * MutatingAdmissionPolicyBindings as admissionregistration.k8s.io/v1beta1
 * (1.34 cannot read v1), where the default encodes v1: a real rolling-upgrade
 * disagreement on one machine (found by comparing every resource's discovery
 * hash between a server with and without the flag). Bindings need nothing but
 * a policy name, and no policy needs to exist for them.
 */
import type { KubeClient } from '../../src/kube/client';
import { KubeError } from '../../src/kube/errors';
import { parallel } from './crd';

export const OLD_ENCODING_FLAGS = ['--min-compatibility-version=1.34'];

export const DISAGREEING = {
  group: 'admissionregistration.k8s.io',
  resource: 'mutatingadmissionpolicybindings',
  kind: 'MutatingAdmissionPolicyBinding',
  /** kubectl-style, as svm takes it. */
  name: 'mutatingadmissionpolicybindings.admissionregistration.k8s.io',
  /** The StorageVersion object's name (internal.apiserver.k8s.io). */
  storageVersionName: 'admissionregistration.k8s.io.mutatingadmissionpolicybindings',
  newVersion: 'v1',
  oldVersion: 'v1beta1',
  newApiVersion: 'admissionregistration.k8s.io/v1',
  oldApiVersion: 'admissionregistration.k8s.io/v1beta1',
  prefix: '/registry/mutatingadmissionpolicybindings/',
} as const;

/** Creates objects of it through one API server, retrying the 503 of a server that has not published its storage versions yet. */
export async function createDisagreeing(kube: KubeClient, prefix: string, count: number): Promise<void> {
  await parallel(count, 8, async (i) => {
    const body = JSON.stringify({
      apiVersion: DISAGREEING.newApiVersion,
      kind: DISAGREEING.kind,
      metadata: { name: `${prefix}-${i}` },
      spec: { policyName: `${prefix}-policy` },
    });
    for (let attempt = 0; ; attempt++) {
      try {
        await kube.request('POST', `/apis/${DISAGREEING.newApiVersion}/${DISAGREEING.resource}`, { body });
        return;
      } catch (err) {
        if (!(err instanceof KubeError && err.kind === 'unavailable' && attempt < 30)) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  });
}
