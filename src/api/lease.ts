/**
 * coordination.k8s.io/v1 Lease: the worker's own leases (leader election,
 * budget membership). The API servers' identity leases are read with the
 * narrower IdentityLease of ./storage-version.
 */
import { z } from 'zod';

export const Lease = z.object({
  metadata: z
    .object({
      name: z.string(),
      namespace: z.string().optional(),
      resourceVersion: z.string(),
      labels: z.record(z.string(), z.string()).optional(),
      annotations: z.record(z.string(), z.string()).optional(),
    })
    .loose(),
  spec: z
    .object({
      holderIdentity: z.string().optional(),
      leaseDurationSeconds: z.number().optional(),
      acquireTime: z.string().optional(),
      renewTime: z.string().optional(),
      leaseTransitions: z.number().optional(),
    })
    .loose()
    .default({}),
});
export type Lease = z.infer<typeof Lease>;
export type LeaseSpec = Lease['spec'];
