/**
 * Activities of the deferring mode (SVM_STANDARD_MIGRATIONS=defer): svm does
 * not migrate, kube-controller-manager's built-in migrator does, and svm adds
 * what it lacks around it: the standard object is created only once the API
 * servers agree, and success is recorded only if that agreement held until
 * the built-in reported success (src/workflows/delegate-to-built-in.ts).
 * Small results only: a name, a state, a message.
 */
import { ApplicationFailure } from '@temporalio/common';
import { STANDARD_GROUP, standardFinished, type StandardMigration } from '../api/standard-migration';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { sameAgreement, type Agreement } from '../contract/agreement';
import type { BuiltInView } from '../contract/built-in';
import type { KubeClient } from '../kube/client';
import { createStandardMigration, findStandardMigration, standardVersion } from '../kube/standard-migrations';
import { refineStorageState } from '../kube/storage-states';
import { AGREEMENT_CHANGED, STANDARD_API_NOT_SERVED } from '../contract/reasons';

/** Who created a standard object for the built-in: the workflow that follows it (not the workflow-id annotation: svm does not act on it). */
export const CREATED_BY_ANNOTATION = 'migration.k8s.io/created-by-workflow';

export type { BuiltInState, BuiltInView } from '../contract/built-in';

/** What the built-in's conditions say (pure). */
export function builtInView(o: StandardMigration | undefined): BuiltInView {
  if (!o) return { state: 'gone' };
  const c = (t: string) => o.status?.conditions?.find((x) => x.type === t);
  if (standardFinished(o.status)) {
    const ok = c('Succeeded')?.status === 'True';
    return { state: ok ? 'succeeded' : 'failed', message: (ok ? c('Succeeded') : c('Failed'))?.message };
  }
  if (c('Running')?.status === 'True') return { state: 'running', message: c('Running')?.message };
  return { state: 'pending' };
}

export function createBuiltInActivities(deps: {
  kube: KubeClient;
  agreement: (ref: ResourceRef) => Promise<Agreement>;
  discoveryHash: (ref: ResourceRef) => Promise<string | undefined>;
}) {
  const { kube } = deps;
  return {
    /** Creates the standard object the built-in migrates; refuses (non-retryable) where the API is not served. */
    async createBuiltInMigration(ref: ResourceRef, name: string, workflowId: string): Promise<string> {
      if (!(await standardVersion(kube, true))) {
        throw ApplicationFailure.nonRetryable(
          `the API servers do not serve ${STANDARD_GROUP}: there is no built-in migrator to defer to; run the worker with SVM_STANDARD_MIGRATIONS=own or off`,
          STANDARD_API_NOT_SERVED,
        );
      }
      // 'exists' after a retry of this same call: the name comes from the workflow, so it is ours.
      await createStandardMigration(kube, name, ref, { [CREATED_BY_ANNOTATION]: workflowId });
      return name;
    },

    /** The built-in's progress on one object, from its conditions. */
    async builtInMigrationState(name: string): Promise<BuiltInView> {
      return builtInView(await findStandardMigration(kube, name));
    },

    /**
     * The effect of the built-in's success, applied only under the agreement
     * its object was created under: the StorageState is refined to the agreed
     * hash. The CRD's storedVersions are the built-in's to prune (with its
     * generation check): svm does not race it on a CRD.
     */
    /** Refines the StorageState under the agreement; returns the hash it recorded. */
    async recordAgreedHash(ref: ResourceRef, agreed: Agreement): Promise<{ hash?: string }> {
      const now = await deps.agreement(ref);
      if (!sameAgreement(agreed, now)) {
        throw ApplicationFailure.nonRetryable(`the agreement on ${groupResourceString(ref)} changed`, AGREEMENT_CHANGED);
      }
      const hash = now.hash ?? (await deps.discoveryHash(ref));
      if (hash) await refineStorageState(kube, groupResourceString(ref), hash);
      return hash ? { hash } : {};
    },
  };
}
