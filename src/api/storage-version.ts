/**
 * The StorageVersion API (internal.apiserver.k8s.io/v1alpha1) and the API
 * server identity leases it refers to.
 */
import { z } from 'zod';

export const StorageVersion = z.object({
  metadata: z.object({ name: z.string(), resourceVersion: z.string() }).loose(),
  status: z
    .object({
      storageVersions: z
        .array(
          z.object({
            apiServerID: z.string(),
            encodingVersion: z.string(),
            decodableVersions: z.array(z.string()).optional(),
            servedVersions: z.array(z.string()).optional(),
          }),
        )
        .optional(),
      commonEncodingVersion: z.string().optional(),
      conditions: z.array(z.object({ type: z.string(), status: z.string() }).loose()).optional(),
    })
    .loose()
    .optional(),
});
export type StorageVersion = z.infer<typeof StorageVersion>;

export const IdentityLease = z.object({
  metadata: z.object({ name: z.string(), labels: z.record(z.string(), z.string()).optional() }).loose(),
  spec: z
    .object({ holderIdentity: z.string().optional(), leaseDurationSeconds: z.number().optional(), renewTime: z.string().optional() })
    .loose(),
});
export type IdentityLease = z.infer<typeof IdentityLease>;

export const IDENTITY_LABEL = 'apiserver.kubernetes.io/identity=kube-apiserver';

/** StorageVersion objects are named <group>.<resource>, core.<resource> for the core group. */
export const storageVersionName = (gr: { group: string; resource: string }) => `${gr.group || 'core'}.${gr.resource}`;

/** The inverse: <group>.<resource> back to a group and resource (resources have no dots). */
export function groupResourceOfStorageVersion(name: string): { group: string; resource: string } {
  const i = name.lastIndexOf('.');
  if (i <= 0) throw new Error(`"${name}" is not a StorageVersion name (<group>.<resource>)`);
  const group = name.slice(0, i);
  return { group: group === 'core' ? '' : group, resource: name.slice(i + 1) };
}
