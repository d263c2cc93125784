/**
 * The drop check's reads of the whole group: discovery, CRDs, StorageStates, StorageVersions, the API servers and
 * the group version's APIService; and from them, the resources to check and the note of a version nothing serves.
 */
import { z } from 'zod';
import { CustomResourceDefinition } from '../api/custom-resource-definition';
import { StorageState } from '../api/migration';
import { groupResourceString } from '../api/resource';
import { StorageVersion } from '../api/storage-version';
import type { ApiServerSource } from './apiservers';
import type { KubeClient } from './client';
import { CRDS_PATH } from './crds';
import { DropInputError, why, type Aggregation, type DropTarget, type GroupReading } from './drop-shared';
import { KubeError } from './errors';
import { STORAGE_VERSIONS_PATH } from './storage-versions';
import { listAllIfServed, MalformedObjectError, parseAs } from './typed';
import { agreementReader } from './server-agreements';
import { storageStatePath } from './storage-states';

const NOT_SERVED_GROUP = (group: string) => `no API group ${group} is served and no CustomResourceDefinition names it`;

/** Discovery, CRDs, StorageStates, StorageVersions and the API servers, read at once; then the agreement reader over them. */
export async function readGroup(
  kube: KubeClient,
  source: ApiServerSource,
  target: DropTarget,
  now: () => number,
  notes: string[],
): Promise<GroupReading> {
  const { group } = target;
  const [discovered, crdList, stateList, storageVersions, found, aggregation] = await Promise.all([
    kube.discover(),
    listAllIfServed(kube, CRDS_PATH, 'CustomResourceDefinition'),
    listAllIfServed(kube, storageStatePath(), 'StorageState'),
    listAllIfServed(kube, STORAGE_VERSIONS_PATH, 'StorageVersion').then((l) =>
      l?.map((v) => parseAs(StorageVersion, v, { kind: 'StorageVersion' })),
    ),
    source.find(),
    aggregationOf(kube, target),
  ]);
  const crds = (crdList ?? []).map((c) => parseAs(CustomResourceDefinition, c, { kind: 'CustomResourceDefinition' }));
  const states = storageStates(stateList, notes);
  const agreementOf = await agreementReader(kube, { discovered, crds, storageVersions, found, now });
  const stateOf = (name: string) =>
    states.find((s) => {
      const gr = s.spec?.resource;
      return gr ? (gr.group ?? '') === group && gr.resource === name : s.metadata.name === groupResourceString({ group, resource: name });
    });
  const crdOf = new Map(crds.filter((c) => c.spec.group === group).map((c) => [c.spec.names.plural, c]));
  return { discovered, crdOf, stateOf, found, agreementOf, aggregation };
}

const APISERVICES_PATH = '/apis/apiregistration.k8s.io/v1/apiservices';

/** The parts of an apiregistration.k8s.io/v1 APIService read here: its spec.service, set where an aggregated API serves it. */
const ApiService = z
  .object({
    metadata: z.object({ name: z.string() }).loose(),
    spec: z
      .object({ service: z.object({ namespace: z.string().optional(), name: z.string().optional() }).loose().nullish() })
      .loose()
      .optional(),
  })
  .loose();

/** The group version's APIService (named <version>.<group>), listed by name: the worker may list APIServices, not get them. */
async function aggregationOf(kube: KubeClient, { group, version }: DropTarget): Promise<Aggregation> {
  const name = `${version}.${group}`;
  try {
    const items = await listAllIfServed(kube, APISERVICES_PATH, 'APIService', { fieldSelector: `metadata.name=${name}` });
    const service = (items ?? []).map((i) => parseAs(ApiService, i, { kind: 'APIService' })).find((a) => a.metadata.name === name)
      ?.spec?.service;
    return service ? { service: `${service.namespace ?? '?'}/${service.name ?? '?'}` } : {};
  } catch (err) {
    if (!(err instanceof KubeError) && !(err instanceof MalformedObjectError)) throw err;
    return { unreadable: `APIService ${name} could not be listed: ${why(err)}` };
  }
}

/** The StorageStates that parse; a malformed one is skipped, and each skip said in notes, as are StorageStates not served. */
function storageStates(list: unknown[] | undefined, notes: string[]): StorageState[] {
  const states: StorageState[] = [];
  for (const [i, raw] of (list ?? []).entries()) {
    try {
      states.push(parseAs(StorageState, raw, { kind: 'StorageState', name: `(list item ${i})` }));
    } catch (err) {
      if (!(err instanceof MalformedObjectError)) throw err;
      notes.push(`skipped: ${err.message}`);
    }
  }
  if (!list) notes.push('StorageStates are not served (the migration.k8s.io CRDs are not installed)');
  return states;
}

/**
 * The resources to check, by plural, sorted: what is served at the version; the CRDs of the group that still name
 * it (served or not); and every built-in resource of the group, served at the version or not: a release may store
 * a version it no longer serves by default, and objects written before an upgrade stay in the old version in etcd
 * until a migration (their StorageState says so; without one, nothing does). A DropInputError when the group is
 * neither served nor named by a CRD.
 */
export function resourcesToCheck(g: GroupReading, { group, version }: DropTarget): string[] {
  const topLevel = topLevelOf(g, group);
  const names = new Set(topLevel.filter((r) => r.version === version).map((r) => r.name));
  for (const [plural, c] of g.crdOf) if (c.spec.versions.some((v) => v.name === version)) names.add(plural);
  for (const r of topLevel) if (r.preferred && r.storageVersionHash && !g.crdOf.has(r.name)) names.add(r.name);
  if (names.size === 0 && !g.discovered.some((r) => r.group === group) && g.crdOf.size === 0)
    throw new DropInputError(NOT_SERVED_GROUP(group));
  return [...names].sort();
}

/** The group's top-level resources in discovery (no subresources), one entry per version serving each. */
const topLevelOf = (g: GroupReading, group: string) => g.discovered.filter((r) => r.group === group && !r.name.includes('/'));

/**
 * The note of a group version no resource is served at: what the group serves instead, and with no resource to check
 * at all (no CRD names the version, no built-in resource may be stored in it), why the report is Unknown.
 */
export function unservedNote(g: GroupReading, { groupVersion, group, version }: DropTarget, resources: number): string | undefined {
  const topLevel = topLevelOf(g, group);
  if (topLevel.some((r) => r.version === version)) return undefined;
  const byVersion = new Map<string, string[]>();
  for (const r of topLevel) (byVersion.get(r.version) ?? byVersion.set(r.version, []).get(r.version)!).push(r.name);
  const served =
    byVersion.size > 0
      ? `${group} serves ${[...byVersion].map(([v, names]) => `${v} (${names.sort().join(', ')})`).join(', ')}`
      : `${group} serves no resource`;
  if (g.aggregation.service)
    return `discovery lists nothing at ${groupVersion}, whose APIService names the aggregated API ${g.aggregation.service}: its discovery did not answer (${served})`;
  if (resources > 0) return `nothing serves ${groupVersion}: ${served}`;
  return (
    `nothing serves ${groupVersion} and no CustomResourceDefinition names ${version}: ${served}. There is nothing to ` +
    'check: a version already removed from every CRD has nothing left to drop, a misspelt one was never checked'
  );
}
