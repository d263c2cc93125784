/** Legacy discovery documents (the only ones that carry storageVersionHash). */
import { z } from 'zod';

export const APIResource = z.object({
  name: z.string(),
  singularName: z.string().optional(),
  namespaced: z.boolean(),
  group: z.string().optional(),
  version: z.string().optional(),
  kind: z.string(),
  verbs: z.array(z.string()).default([]),
  shortNames: z.array(z.string()).optional(),
  categories: z.array(z.string()).optional(),
  storageVersionHash: z.string().optional(),
});
export type APIResource = z.infer<typeof APIResource>;

export const APIResourceList = z.object({
  kind: z.literal('APIResourceList').optional(),
  groupVersion: z.string(),
  resources: z.array(APIResource),
});
export type APIResourceList = z.infer<typeof APIResourceList>;

const GroupVersionForDiscovery = z.object({ groupVersion: z.string(), version: z.string() });

/** One group, as /apis/<group> serves it. */
export const APIGroup = z.object({
  name: z.string(),
  versions: z.array(GroupVersionForDiscovery),
  preferredVersion: GroupVersionForDiscovery.optional(),
});
export type APIGroup = z.infer<typeof APIGroup>;

export const APIGroupList = z.object({
  groups: z.array(APIGroup),
});
export type APIGroupList = z.infer<typeof APIGroupList>;

export const APIVersions = z.object({ versions: z.array(z.string()) });
