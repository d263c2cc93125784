/**
 * The parts of apiextensions.k8s.io/v1 CustomResourceDefinition the migrator
 * reads: its versions (which one is the storage version), its generation,
 * and status.storedVersions (what may still be in etcd). Everything else is
 * kept but not looked at (a CRD carries much more).
 */
import { z } from 'zod';

export const CRD_GROUP_VERSION = 'apiextensions.k8s.io/v1';

export const CustomResourceDefinitionVersion = z
  .object({
    name: z.string(),
    served: z.boolean(),
    storage: z.boolean(),
  })
  .loose();

export const CustomResourceDefinition = z
  .object({
    metadata: z
      .object({
        name: z.string(),
        resourceVersion: z.string().optional(),
        generation: z.number().int().optional(),
      })
      .loose(),
    spec: z
      .object({
        group: z.string(),
        names: z.object({ plural: z.string(), kind: z.string() }).loose(),
        versions: z.array(CustomResourceDefinitionVersion),
      })
      .loose(),
    status: z
      .object({
        storedVersions: z.array(z.string()).optional(),
        conditions: z.array(z.object({ type: z.string(), status: z.string() }).loose()).optional(),
      })
      .loose()
      .optional(),
  })
  .loose();
export type CustomResourceDefinition = z.infer<typeof CustomResourceDefinition>;

/** A CRD is named <plural>.<group>: exactly the resource's kubectl name. */
export const crdName = (gr: { group: string; resource: string }) => `${gr.resource}.${gr.group}`;

/** The inverse, for a name read from a watch: undefined when it has no group. */
export function groupResourceOfCrd(name: string): { group: string; resource: string } | undefined {
  const dot = name.indexOf('.');
  return dot > 0 ? { resource: name.slice(0, dot), group: name.slice(dot + 1) } : undefined;
}

/** The version whose storage: true is set (exactly one, in a valid CRD). */
export const storageVersionOf = (crd: CustomResourceDefinition): string | undefined => crd.spec.versions.find((v) => v.storage)?.name;
