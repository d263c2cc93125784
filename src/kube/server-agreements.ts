/**
 * The agreement on every resource's storage version for a one-shot read
 * (`svm plan`, `svm plan --drop`), by the worker's own rules
 * (src/kube/agreement.ts) over the same inputs: the StorageVersion object
 * where that API is served (built-in resources), else every API server's
 * own discovery, each asked at its own address (src/kube/apiservers.ts).
 */
import { COMMON_VERSIONS, groupResourceString } from '../api/resource';
import { storageVersionOf, type CustomResourceDefinition } from '../api/custom-resource-definition';
import { storageVersionName, type StorageVersion } from '../api/storage-version';
import {
  agreementFromEndpoints,
  agreementFromStorageVersion,
  liveIdentities,
  versionNamer,
  type Agreement,
  type ServerView,
} from './agreement';
import type { ApiServers } from './apiservers';
import type { DiscoveredResource, KubeClient } from './client';
import { KubeError } from './errors';
import { listIdentityLeases } from './leases';
import { withTimeout } from './timeout';

/** An API server asked at its own address answers its whole discovery within this. */
const ENDPOINT_DISCOVERY_TIMEOUT_MS = 20_000;

/** One API server's own discovery, asked at its own address; error when it did not answer. */
export interface ServerDiscovery {
  id: string;
  resources?: DiscoveredResource[];
  error?: string;
}

/** Every found API server's discovery, each asked at its own address within ENDPOINT_DISCOVERY_TIMEOUT_MS. */
export async function discoverEachServer(found: ApiServers): Promise<ServerDiscovery[]> {
  return Promise.all(
    found.endpoints.map(async (e): Promise<ServerDiscovery> => {
      try {
        return {
          id: e.id,
          resources: await withTimeout(
            e.kube.discover(),
            ENDPOINT_DISCOVERY_TIMEOUT_MS,
            `no discovery within ${ENDPOINT_DISCOVERY_TIMEOUT_MS / 1000}s`,
          ),
        };
      } catch (err) {
        return {
          id: e.id,
          error: err instanceof KubeError && err.kind === 'forbidden' ? 'forbidden' : err instanceof Error ? err.message : String(err),
        };
      }
    }),
  );
}

/**
 * The agreement on each resource's storage version, by the worker's own rules (src/kube/agreement.ts): the
 * StorageVersion object where that API is served (built-in resources), else every API server's own discovery.
 * Reads each server's discovery (and the identity leases when StorageVersions are served) once.
 */
export async function agreementReader(
  kube: KubeClient,
  ctx: {
    discovered: DiscoveredResource[];
    crds: CustomResourceDefinition[];
    storageVersions: StorageVersion[] | undefined;
    found: ApiServers;
    now: () => number;
  },
): Promise<(r: DiscoveredResource) => Agreement> {
  const { discovered, crds, storageVersions, found } = ctx;
  const perServer = await discoverEachServer(found);
  const liveIds = storageVersions ? liveIdentities(await listIdentityLeases(kube), ctx.now()) : undefined;
  const svByName = new Map((storageVersions ?? []).map((s) => [s.metadata.name, s]));
  const crdByResource = new Map(crds.map((c) => [`${c.spec.names.plural}.${c.spec.group}`, c]));
  const versionsOfGroup = new Map<string, Set<string>>();
  for (const r of discovered)
    (versionsOfGroup.get(r.group) ?? versionsOfGroup.set(r.group, new Set(COMMON_VERSIONS)).get(r.group)!).add(r.version);
  return (r: DiscoveredResource): Agreement => {
    const key = groupResourceString({ group: r.group, resource: r.name });
    const crd = crdByResource.get(key);
    if (!crd) {
      const sv = svByName.get(storageVersionName({ group: r.group, resource: r.name }));
      if (sv && liveIds) return agreementFromStorageVersion(sv, liveIds);
    }
    const endpoints: ServerView[] = perServer.map((s) =>
      s.error !== undefined || !s.resources
        ? { id: s.id, error: s.error ?? 'no answer' }
        : {
            id: s.id,
            value: s.resources.find((x) => x.group === r.group && x.version === r.version && x.name === r.name)?.storageVersionHash,
          },
    );
    return agreementFromEndpoints({
      resource: key,
      endpoints,
      endpointsNote: found.endpointsNote,
      identities: found.identities,
      via: { id: kube.server, value: r.storageVersionHash },
      crd: crd ? { storageVersion: storageVersionOf(crd), generation: crd.metadata.generation } : undefined,
      versionOf: crd ? undefined : versionNamer(r.group, r.kind, versionsOfGroup.get(r.group) ?? []),
    });
  };
}
