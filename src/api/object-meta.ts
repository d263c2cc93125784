/** The least every Kubernetes object has: a name. For watch events of kinds whose other fields do not matter. */
import { z } from 'zod';

export const NamedObject = z.object({ metadata: z.object({ name: z.string() }).loose() }).loose();
export type NamedObject = z.infer<typeof NamedObject>;

/** The object's name, or undefined when it has none (not a Kubernetes object). */
export const nameOf = (obj: unknown): string | undefined => {
  const parsed = NamedObject.safeParse(obj);
  return parsed.success ? parsed.data.metadata.name : undefined;
};
