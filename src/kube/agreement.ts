/**
 * Do all API servers agree on the storage (encoding) version of a resource?
 *
 * - Built-in resources, where the StorageVersion API is served: every live API
 *   server (an identity lease that has not expired) must have an entry, and all
 *   live entries must name the same encodingVersion. Entries of servers with no
 *   live lease are stale: they neither block agreement nor fake it. The token is
 *   the StorageVersion's resourceVersion plus the live identities, so it changes
 *   whenever the answer might have.
 * - Custom resources (not covered by that API), or where it is not served: the
 *   storageVersionHash each API server serves in its own discovery, and for a
 *   CRD its storage version. The token is those hashes and that version.
 */
import type { StorageVersion, IdentityLease } from '../api/storage-version';

export interface ServerView {
  id: string;
  /** What this server encodes the resource as (encodingVersion or discovery hash). */
  value?: string;
}

export interface Agreement {
  agreed: boolean;
  /** The agreed encoding version (e.g. resource.k8s.io/v1, or a CRD's v2); undefined without agreement. */
  encodingVersion?: string;
  /** Changes whenever the answer might have changed. */
  token: string;
  source: 'StorageVersion' | 'discovery';
  /** Which servers disagree, or why there is no agreement. */
  reason?: string;
  servers: ServerView[];
}

export function liveIdentities(leases: IdentityLease[], now: number): Set<string> {
  const live = new Set<string>();
  for (const l of leases) {
    // Like kube-apiserver's own lease GC: no renew time or no duration means expired.
    const renew = l.spec.renewTime ? Date.parse(l.spec.renewTime) : NaN;
    if (l.spec.leaseDurationSeconds === undefined || !Number.isFinite(renew)) continue;
    if (renew + l.spec.leaseDurationSeconds * 1000 > now) live.add(l.metadata.name);
  }
  return live;
}

/** Agreement from a StorageVersion object and the live API server identities. */
export function agreementFromStorageVersion(sv: StorageVersion, live: Set<string>): Agreement {
  const entries = sv.status?.storageVersions ?? [];
  const liveEntries = entries.filter((e) => live.has(e.apiServerID));
  const servers: ServerView[] = [...live].sort().map((id) => ({ id, value: liveEntries.find((e) => e.apiServerID === id)?.encodingVersion }));
  const token = `sv:${sv.metadata.resourceVersion}:${[...live].sort().join(',')}`;
  const missing = servers.filter((s) => s.value === undefined);
  const versions = [...new Set(liveEntries.map((e) => e.encodingVersion))];
  const stale = entries.filter((e) => !live.has(e.apiServerID)).map((e) => e.apiServerID);
  const staleNote = stale.length > 0 ? ` (ignoring stale entries of ${stale.join(', ')})` : '';
  if (servers.length === 0) return { agreed: false, token, source: 'StorageVersion', reason: 'no live API server identity leases', servers };
  if (missing.length > 0) {
    return { agreed: false, token, source: 'StorageVersion', reason: `API server(s) ${missing.map((s) => s.id).join(', ')} have not published a storage version for ${sv.metadata.name}${staleNote}`, servers };
  }
  if (versions.length !== 1) {
    const who = servers.map((s) => `${s.id}=${s.value}`).join(', ');
    return { agreed: false, token, source: 'StorageVersion', reason: `API servers disagree on the encoding version of ${sv.metadata.name}: ${who}${staleNote}`, servers };
  }
  return { agreed: true, encodingVersion: versions[0], token, source: 'StorageVersion', servers, ...(staleNote ? { reason: `agreed${staleNote}` } : {}) };
}

/** Agreement from each API server's discovery hash (and a CRD's storage version). */
export function agreementFromDiscovery(views: ServerView[], crdStorageVersion?: string): Agreement {
  const servers = [...views].sort((a, b) => a.id.localeCompare(b.id));
  const token = `discovery:${crdStorageVersion ?? ''}:${servers.map((s) => `${s.id}=${s.value ?? '-'}`).join(',')}`;
  const unknown = servers.filter((s) => s.value === undefined);
  const hashes = [...new Set(servers.map((s) => s.value))];
  if (servers.length === 0) return { agreed: false, token, source: 'discovery', reason: 'no API server answered discovery', servers };
  if (unknown.length > 0) return { agreed: false, token, source: 'discovery', reason: `API server(s) ${unknown.map((s) => s.id).join(', ')} did not answer or do not serve the resource`, servers };
  if (hashes.length !== 1) {
    return { agreed: false, token, source: 'discovery', reason: `API servers serve different storageVersionHashes: ${servers.map((s) => `${s.id}=${s.value}`).join(', ')}`, servers };
  }
  return { agreed: true, encodingVersion: crdStorageVersion ?? hashes[0], token, source: 'discovery', servers };
}
