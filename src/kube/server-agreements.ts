/**
 * The inputs of the agreement on a resource's storage version, gathered for
 * the worker's agreement activity and for a one-shot read (`svm plan`,
 * `svm plan --drop`) alike, and decided by the rules of src/kube/agreement.ts:
 * the StorageVersion object where that API is served (built-in resources),
 * else every API server's own discovery, each asked at its own address
 * (src/kube/apiservers.ts). They are read in one of two ways: for one resource
 * at a time, as the activity does (readAgreement), or for every resource from
 * lists read once (agreementReader); either way, agreementOn turns them into
 * the rules' inputs, so both decide alike.
 */
import { COMMON_VERSIONS, groupResourceString, type ResourceRef } from '../api/resource';
import type { APIResource } from '../api/discovery';
import { storageVersionOf, type CustomResourceDefinition } from '../api/custom-resource-definition';
import { storageVersionName, type IdentityLease, type StorageVersion } from '../api/storage-version';
import {
  agreementFromEndpoints,
  agreementFromStorageVersion,
  liveIdentities,
  liveProcesses,
  versionNamer,
  type Agreement,
  type ServerView,
} from './agreement';
import type { ApiServer, ApiServers, ApiServerSource } from './apiservers';
import type { DiscoveredResource, KubeClient } from './client';
import { getCrd } from './crds';
import { findApiGroup, getResourceList } from './discovery';
import { KubeError } from './errors';
import { listIdentityLeases } from './leases';
import { findStorageVersion } from './storage-versions';
import { withTimeout } from './timeout';

/** An API server asked at its own address answers one group version's discovery within this, or counts as not answering. */
const ENDPOINT_TIMEOUT_MS = 5000;
/** An API server asked at its own address answers its whole discovery within this. */
const ENDPOINT_DISCOVERY_TIMEOUT_MS = 20_000;

/** What the agreement on one resource is decided from, however it was read. */
export type AgreementInputs =
  | {
      /** A built-in resource's StorageVersion object, where that API serves one. */
      storageVersion: StorageVersion;
      /** The identity leases, read with it: which servers are alive, and their processes (for the token). */
      leases: IdentityLease[];
      now: number;
    }
  | {
      storageVersion?: undefined;
      /** For messages: the resource, e.g. deviceclasses.resource.k8s.io. */
      resource: string;
      found: ApiServers;
      /** Each found API server's answer for the resource, asked at its own address. */
      endpoints: ServerView[];
      /** The resource's hash in discovery through our own address (id: its URL). */
      via: ServerView;
      /** For a custom resource: its CRD. */
      crd?: CustomResourceDefinition;
      /** For a built-in resource: its kind and the versions a hash may name, for readable messages. */
      names?: { group: string; kind: string; versions: Iterable<string> };
    };

/** The agreement its inputs make, by the rules of src/kube/agreement.ts. */
export function agreementOn(inputs: AgreementInputs): Agreement {
  if (inputs.storageVersion) {
    const { storageVersion, leases, now } = inputs;
    return agreementFromStorageVersion(storageVersion, liveIdentities(leases, now), liveProcesses(leases, now));
  }
  const { found, crd, names } = inputs;
  return agreementFromEndpoints({
    resource: inputs.resource,
    endpoints: inputs.endpoints,
    endpointsNote: found.endpointsNote,
    identities: found.identities,
    processes: found.processes,
    via: inputs.via,
    crd: crd ? { storageVersion: storageVersionOf(crd), generation: crd.metadata.generation } : undefined,
    versionOf: names ? versionNamer(names.group, names.kind, names.versions) : undefined,
  });
}

// ------------------------------------------------------------ one resource, now

/** The agreement the activity answers; on a custom resource it also carries the CRD's generation when it was read. */
export type CrdAgreement = Agreement & { crdGeneration?: number };

/** A 404 read as `value` (the thing is not there), any other failure thrown. */
const notFoundAs =
  <T>(value: T) =>
  (err: unknown): T => {
    if (err instanceof KubeError && err.kind === 'notFound') return value;
    throw err;
  };

/** Discovery of the resource's group version, as one API server serves it. */
const resourceList = async (server: KubeClient, ref: ResourceRef, timeoutMs?: number) =>
  (await getResourceList(server, ref, { timeoutMs })).resources;

/** The storageVersionHash one API server serves for the resource in its own discovery. */
export async function discoveryHash(server: KubeClient, ref: ResourceRef): Promise<string | undefined> {
  return (await resourceList(server, ref)).find((r) => r.name === ref.resource)?.storageVersionHash;
}

/** One API server asked at its own address: its hash, "does not serve it" (404), or why it did not answer. */
async function askEndpoint(server: ApiServer, ref: ResourceRef): Promise<ServerView> {
  try {
    const list = await resourceList(server.kube, ref, ENDPOINT_TIMEOUT_MS);
    return { id: server.id, value: list.find((r) => r.name === ref.resource)?.storageVersionHash };
  } catch (err) {
    if (err instanceof KubeError && err.kind === 'notFound') return { id: server.id }; // answered: it does not serve the group version
    return { id: server.id, error: err instanceof Error ? err.message : String(err) };
  }
}

/** The versions a built-in resource's hash may name: every one its group serves (through our address) and the usual ones. */
async function candidateVersions(kube: KubeClient, ref: ResourceRef): Promise<Set<string>> {
  const versions = new Set([ref.version, ...COMMON_VERSIONS]);
  if (ref.group) for (const v of (await findApiGroup(kube, ref.group))?.versions ?? []) versions.add(v.version);
  return versions;
}

/** One resource's discovery inputs: its CRD, our own address's discovery of it, and each API server's answer. */
async function readDiscoveryInputs(kube: KubeClient, apiservers: ApiServerSource, ref: ResourceRef) {
  // The CRD and our own address's discovery are read while the API servers are found, each server asked once they are.
  const servers = apiservers.find();
  const [crd, viaList, [found, endpoints]] = await Promise.all([
    // A deleted CRD is a resource no longer served (see readAgreement), not a failure to retry forever.
    ref.custom ? getCrd(kube, ref).catch(notFoundAs(undefined)) : Promise.resolve(undefined),
    // Our own address must answer: any failure but a 404 fails the read (the activity retries).
    resourceList(kube, ref).catch(notFoundAs<APIResource[]>([])),
    servers.then(async (f) => [f, await Promise.all(f.endpoints.map((e) => askEndpoint(e, ref)))] as const),
  ]);
  return { crd, own: viaList.find((r) => r.name === ref.resource), found, endpoints };
}

/**
 * Do all API servers agree on the resource's encoding version, as read now? A read: it changes nothing.
 * The StorageVersion object decides where that API serves one for a built-in resource; else each API server's
 * own discovery. Marked notServed when our own address no longer serves the resource at its version (or its CRD
 * is gone): the workflow resolves the resource again.
 */
export async function readAgreement(kube: KubeClient, apiservers: ApiServerSource, ref: ResourceRef): Promise<CrdAgreement> {
  // Undefined: the StorageVersion API is not served (its default: alpha, off), or not for this resource: ask each server.
  const storageVersion = ref.custom ? undefined : await findStorageVersion(kube, ref);
  if (storageVersion) {
    const leases = await listIdentityLeases(kube);
    return agreementOn({ storageVersion, leases, now: Date.now() });
  }
  const { crd, own, found, endpoints } = await readDiscoveryInputs(kube, apiservers, ref);
  const answer = agreementOn({
    resource: groupResourceString(ref),
    found,
    endpoints,
    via: { id: kube.server, value: own?.storageVersionHash },
    crd,
    names: !ref.custom && own?.kind ? { group: ref.group, kind: own.kind, versions: await candidateVersions(kube, ref) } : undefined,
  });
  const served = own === undefined || (ref.custom && !crd) ? { ...answer, notServed: true } : answer;
  // The CRD's generation when this answer was read: a pass records it at its start (the built-in's protocol).
  return crd?.metadata.generation !== undefined ? { ...served, crdGeneration: crd.metadata.generation } : served;
}

// ------------------------------------------------- every resource, from lists read once

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

/** One server's answer for a resource, from its whole discovery. */
function viewOf(s: ServerDiscovery, r: DiscoveredResource): ServerView {
  if (s.error !== undefined || !s.resources) return { id: s.id, error: s.error ?? 'no answer' };
  return {
    id: s.id,
    value: s.resources.find((x) => x.group === r.group && x.version === r.version && x.name === r.name)?.storageVersionHash,
  };
}

/** The versions each group's hashes may name: every one discovery lists for it, and the usual ones. */
function versionsByGroup(discovered: DiscoveredResource[]): Map<string, Set<string>> {
  const versions = new Map<string, Set<string>>();
  for (const r of discovered) (versions.get(r.group) ?? versions.set(r.group, new Set(COMMON_VERSIONS)).get(r.group)!).add(r.version);
  return versions;
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
  const leases = storageVersions ? await listIdentityLeases(kube) : undefined;
  const now = ctx.now();
  const svByName = new Map((storageVersions ?? []).map((s) => [s.metadata.name, s]));
  const crdByResource = new Map(crds.map((c) => [`${c.spec.names.plural}.${c.spec.group}`, c]));
  const versionsOfGroup = versionsByGroup(discovered);
  return (r: DiscoveredResource): Agreement => {
    const key = groupResourceString({ group: r.group, resource: r.name });
    const crd = crdByResource.get(key);
    const storageVersion = crd ? undefined : svByName.get(storageVersionName({ group: r.group, resource: r.name }));
    if (storageVersion && leases) return agreementOn({ storageVersion, leases, now });
    return agreementOn({
      resource: key,
      found,
      endpoints: perServer.map((s) => viewOf(s, r)),
      via: { id: kube.server, value: r.storageVersionHash },
      crd,
      names: crd ? undefined : { group: r.group, kind: r.kind, versions: versionsOfGroup.get(r.group) ?? [] },
    });
  };
}
