/**
 * Names of resources as the migrator uses them. Pure data and string logic:
 * safe to import from workflow code.
 */

/** A group and resource (no version): what storage is keyed by. */
export interface GroupResource {
  group: string; // '' for the core group
  resource: string;
}

/** A fully resolved, migratable resource. */
export interface ResourceRef extends GroupResource {
  /** The version the migrator lists and updates through (the one stored in when served, else the preferred one: throughVersion). */
  version: string;
  kind: string;
  namespaced: boolean;
  /** Discovery's storageVersionHash when the resource was resolved. */
  storageVersionHash: string;
  /** True when a CustomResourceDefinition serves it. */
  custom: boolean;
}

/**
 * Versions tried when naming a storage version hash, besides those the resource's group serves: a hash names an
 * encoding version the servers may no longer serve (the one being migrated away from), so discovery alone cannot.
 */
export const COMMON_VERSIONS: readonly string[] = [
  'v1',
  'v2',
  'v1beta1',
  'v1beta2',
  'v1beta3',
  'v1alpha1',
  'v1alpha2',
  'v1alpha3',
  'v2beta1',
  'v2beta2',
];

/** kubectl-style name: `secrets`, `deployments.apps`, `widgets.example.com`. */
export function groupResourceString(gr: GroupResource): string {
  return gr.group ? `${gr.resource}.${gr.group}` : gr.resource;
}

/**
 * One running migration per resource: the workflow ID is derived from it, as a single-cluster install names it
 * (`migrate/secrets`); a named cluster's is its Placement's `id` of it (src/contract/placement.ts).
 */
export function migrationWorkflowId(gr: GroupResource): string {
  return `migrate/${groupResourceString(gr)}`;
}

export function apiVersionOf(r: { group: string; version: string }): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** The collection path of a resource, optionally in one namespace. */
export function collectionPath(r: { group: string; version: string; resource: string }, namespace?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  return namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${r.resource}` : `${base}/${r.resource}`;
}

export function objectPath(r: { group: string; version: string; resource: string }, name: string, namespace?: string): string {
  return `${collectionPath(r, namespace)}/${encodeURIComponent(name)}`;
}

/**
 * Whether only the fence loaded from a manifest can guard a fenced worker's writes of this resource: admission
 * objects, on which kube-apiserver never runs admission policies made through the API (src/kube/fence-probe.ts).
 */
export function needsManifestFence(ref: Pick<GroupResource, 'group'>): boolean {
  return ref.group === 'admissionregistration.k8s.io';
}

/**
 * Why a name cannot name a resource at all, whatever the cluster serves (undefined when it may): checked before
 * anything is reached, so a typo or an unset variable in a script is refused at once.
 */
export function resourceNameRefusal(input: string): string | undefined {
  const text = input.trim();
  if (!text) return 'no resource given (an empty name: an unset variable?)';
  if (text.includes('/')) return `"${text}" is a subresource; migrate the resource "${text.split('/')[0]}" instead`;
  if (!/^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$/.test(text))
    return `"${text}" is not a resource name: a resource, kind or short name, optionally with its group (deployments.apps), in letters, digits, '-' and '.'`;
  return undefined;
}
