/**
 * Do all API servers agree on the storage (encoding) version of a resource?
 * Pure rules; the I/O that feeds them is in src/kube/server-agreements.ts
 * (for the agreement activity and `svm plan` alike) and src/kube/apiservers.ts.
 *
 * - Built-in resources, where the StorageVersion API is served: every live API
 *   server (an identity lease that has not expired) must have an entry, and all
 *   live entries must name the same encodingVersion. Entries of servers with no
 *   live lease are stale: they neither block agreement nor fake it. The token is
 *   the StorageVersion's resourceVersion plus the live server processes (each
 *   identity lease's holderIdentity, new on every restart), so it changes
 *   whenever the answer might have, and whenever any server restarted.
 * - Custom resources (not covered by that API), or where it is not served: the
 *   storageVersionHash each API server serves in its own discovery, asked at
 *   its own address (the `kubernetes` EndpointSlice lists them, as a Pod sees
 *   them); the live identity leases say how many servers exist, and their
 *   holderIdentity (new on every restart) goes into the token. What was asked
 *   decides what may be claimed:
 *     - any server that answered with another hash (or without the resource):
 *       no agreement, naming it;
 *     - some addresses answered and some did not: no agreement yet (a server
 *       we cannot hear may be the one that disagrees);
 *     - every address answered, all agree, and there are at least as many
 *       addresses as live identity leases: agreed and verified;
 *     - fewer addresses than identity leases (a managed cluster behind one
 *       virtual IP), or no address reachable at all: svm cannot verify
 *       agreement per server. It agrees on what it can check (the hash through
 *       its own API address, and whatever addresses answered) with
 *       `verified: false`, and the token (compared at the end) holds exactly
 *       those answers.
 *   For a CRD the token also holds its storage version and metadata.generation,
 *   so a storage version switched away and back (even while the worker was
 *   down) changes the token.
 */
import { createHash } from 'node:crypto';
import type { StorageVersion, IdentityLease } from '../api/storage-version';
import type { Agreement, ServerView } from '../contract/agreement';
import { compareStrings } from '../api/order';

export type { Agreement, ServerView };

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

const isLive = (l: IdentityLease, now: number): boolean => {
  // Like kube-apiserver's own lease GC: no renew time or no duration means expired.
  const renew = l.spec.renewTime ? Date.parse(l.spec.renewTime) : NaN;
  if (l.spec.leaseDurationSeconds === undefined || !Number.isFinite(renew)) return false;
  return renew + l.spec.leaseDurationSeconds * 1000 > now;
};

/** The names of the live identity leases: one per API server (its apiServerID, stable across restarts). */
export function liveIdentities(leases: IdentityLease[], now: number): Set<string> {
  return new Set(leases.filter((l) => isLive(l, now)).map((l) => l.metadata.name));
}

/**
 * The live API server processes, sorted, as `<lease name>=<holderIdentity>`. A kube-apiserver
 * writes a new holderIdentity (its name and a fresh UUID) each time it starts, so any restart
 * between two readings changes this list, even one back to the same flags: a pass during which a
 * server restarted (a rollback and a roll forward within one check, say) does not count.
 */
export function liveProcesses(leases: IdentityLease[], now: number): string[] {
  return leases
    .filter((l) => isLive(l, now))
    .map((l) => `${l.metadata.name}=${l.spec.holderIdentity ?? '-'}`)
    .sort();
}

/**
 * Agreement from a StorageVersion object and the live API server identities. The token names the
 * server processes (liveProcesses) where given, so that a restart of any server changes it.
 */
export function agreementFromStorageVersion(sv: StorageVersion, live: Set<string>, processes?: string[]): Agreement {
  const entries = sv.status?.storageVersions ?? [];
  const liveEntries = entries.filter((e) => live.has(e.apiServerID));
  const servers: ServerView[] = [...live]
    .sort()
    .map((id) => ({ id, value: liveEntries.find((e) => e.apiServerID === id)?.encodingVersion }));
  const token = `sv:${sv.metadata.resourceVersion}:${(processes ?? [...live].sort()).join(',')}`;
  const missing = servers.filter((s) => s.value === undefined);
  const versions = [...new Set(liveEntries.map((e) => e.encodingVersion))];
  const stale = entries.filter((e) => !live.has(e.apiServerID)).map((e) => e.apiServerID);
  const staleNote = stale.length > 0 ? ` (ignoring stale entries of ${stale.join(', ')})` : '';
  const base = {
    token,
    source: 'StorageVersion' as const,
    servers,
    verified: servers.length > 0,
    checked: `the StorageVersion API: ${plural(servers.length, 'live API server')}`,
  };
  if (servers.length === 0) return { ...base, agreed: false, reason: 'no live API server identity leases' };
  if (missing.length > 0) {
    return {
      ...base,
      agreed: false,
      reason: `API server(s) ${missing.map((s) => s.id).join(', ')} have not published a storage version for ${sv.metadata.name}${staleNote}`,
    };
  }
  if (versions.length !== 1) {
    const who = servers.map((s) => `${s.id}=${s.value}`).join(', ');
    return { ...base, agreed: false, reason: `API servers disagree on the encoding version of ${sv.metadata.name}: ${who}${staleNote}` };
  }
  return { ...base, agreed: true, encodingVersion: versions[0], ...(staleNote ? { reason: `agreed${staleNote}` } : {}) };
}

export interface EndpointAnswers {
  /** For messages: the resource, e.g. deviceclasses.resource.k8s.io. */
  resource: string;
  /** One view per ready address of the `kubernetes` EndpointSlice (id: address:port), asked at that address. */
  endpoints: ServerView[];
  /** Why there are no addresses to ask, when there are none (e.g. listing EndpointSlices was forbidden). */
  endpointsNote?: string;
  /** Names of the live identity leases; undefined when they could not be read. */
  identities?: string[];
  /** The live server processes (liveProcesses): the token holds them, so a restart of any server changes it. */
  processes?: string[];
  /** Discovery through the worker's own API address (id: its URL); it answered (a failure there fails the activity). */
  via: ServerView;
  /** For a custom resource: its CRD's storage version and metadata.generation. */
  crd?: { storageVersion?: string; generation?: number };
  /** A readable version for a hash (e.g. resource.k8s.io/v1), where known. */
  versionOf?: (hash: string) => string | undefined;
}

/** Agreement from each API server's own discovery, asked at its endpoint address (see the rules above). */
export function agreementFromEndpoints(a: EndpointAnswers): Agreement {
  const eps = [...a.endpoints].sort((x, y) => compareStrings(x.id, y.id));
  const answered = eps.filter((e) => e.error === undefined);
  const silent = eps.filter((e) => e.error !== undefined);
  const ids = a.identities ? [...a.identities].sort() : undefined;
  const leases = ids ? plural(ids.length, 'identity lease') : 'identity leases unknown';
  const crd = a.crd ? `${a.crd.storageVersion ?? '-'}@${a.crd.generation ?? '-'}` : '';
  const token = `discovery:crd=${crd}:ids=${a.processes ? a.processes.join(',') : ids ? ids.join(',') : '?'}:eps=${eps.map((e) => `${e.id}=${e.error !== undefined ? '!' : (e.value ?? '-')}`).join(',')}:via=${a.via.value ?? '-'}`;
  const show = (v: ServerView) => {
    if (v.value === undefined) return `${v.id} does not serve it`;
    const version = a.versionOf?.(v.value);
    return `${v.id}=${v.value}${version ? ` (${version})` : ''}`;
  };
  const viaNote = a.endpointsNote ? ` (${a.endpointsNote})` : '';
  const silentNote = silent.length > 0 ? ` (${silent.map((s) => `${s.id}: ${s.error}`).join('; ')})` : '';
  const verified = silent.length === 0 && answered.length > 0 && ids !== undefined && ids.length > 0 && answered.length >= ids.length;
  const checked = verified
    ? `${answered.length} of ${plural(eps.length, 'API server')} (kubernetes EndpointSlice, ${leases}) by their discovery`
    : `could not verify per server: ${answered.length} of ${plural(eps.length, 'address', 'addresses')} answered${silentNote}${viaNote}, ${leases}; relied on discovery through ${a.via.id} at start and end`;
  const base = { token, source: 'discovery' as const, servers: eps, verified: false, checked };

  // 1. Anyone who answered differently: a disagreement, whatever else is true.
  const values = new Set(answered.map((e) => e.value));
  const viaDiffers = !values.has(a.via.value);
  if (values.size > 1 || (values.size === 1 && viaDiffers)) {
    const who = [...answered.map(show), ...(viaDiffers ? [`through ${show(a.via)}`] : [])].join(', ');
    return { ...base, agreed: false, reason: `API servers disagree on the storage version of ${a.resource}: ${who}` };
  }
  const hash = a.via.value;
  if (hash === undefined)
    return {
      ...base,
      agreed: false,
      reason: `${a.resource} is not served with a storageVersionHash (asked ${answered.length > 0 ? answered.map((e) => e.id).join(', ') : a.via.id})`,
    };
  // 2. Some answered, some did not: the silent one may be the one that disagrees.
  if (answered.length > 0 && silent.length > 0) {
    return {
      ...base,
      agreed: false,
      reason: `waiting for API server(s) ${silent.map((s) => `${s.id} (${s.error})`).join(', ')} to answer discovery at their own address; ${answered.map((e) => e.id).join(', ')} answered ${hash}`,
    };
  }
  if (a.crd && a.crd.storageVersion === undefined)
    return { ...base, agreed: false, reason: `the CustomResourceDefinition of ${a.resource} names no storage version` };
  // 3. Agreed: verified when every server was asked; otherwise on what could be checked, and saying so.
  const encodingVersion = a.crd?.storageVersion ?? a.versionOf?.(hash) ?? hash;
  return { ...base, agreed: true, verified, encodingVersion, hash };
}

/**
 * The storageVersionHash kube-apiserver serves for a storage version:
 * base64 of the first 8 bytes of sha256("<group>/<version>/<kind>")
 * (k8s.io/apiserver/pkg/endpoints/discovery StorageVersionHash). Used only to
 * name a hash in messages (resource.k8s.io/v1 rather than bXLbnwEv5AQ=);
 * agreement itself compares hashes.
 */
export function storageVersionHashOf(group: string, version: string, kind: string): string {
  return createHash('sha256').update(`${group}/${version}/${kind}`).digest().subarray(0, 8).toString('base64');
}

/** Names a hash among candidate versions of a group and kind: "<group>/<version>" (or the version for the core group). */
export function versionNamer(group: string, kind: string, versions: Iterable<string>): (hash: string) => string | undefined {
  const byHash = new Map<string, string>();
  for (const v of versions) byHash.set(storageVersionHashOf(group, v, kind), group ? `${group}/${v}` : v);
  return (hash) => byHash.get(hash);
}

/** The parts of an agreement token (its two forms, above), for saying what changed between two readings. */
function tokenParts(token: string): Record<string, string> | undefined {
  const d = /^discovery:crd=(.*?):ids=(.*?):eps=(.*?):via=(.*)$/.exec(token);
  if (d) return { source: 'discovery', crd: d[1]!, processes: d[2]!, servers: d[3]!, via: d[4]! };
  const s = /^sv:([^:]*):(.*)$/.exec(token);
  if (s) return { source: 'StorageVersion', storageVersion: s[1]!, processes: s[2]! };
  return undefined;
}

const PART_NAMES: Record<string, string> = {
  source: 'where agreement is read',
  crd: "the CRD's storage version and generation",
  processes: 'the API server processes (a restart changes them)',
  servers: 'what each API server serves',
  via: 'what the worker’s own address serves',
  storageVersion: 'the StorageVersion object',
};

/** What differs between two agreement tokens, as a phrase: "the API server processes (...): a=1 -> a=2", say. */
export function tokenChange(before: string, after: string): string {
  if (before === after) return 'nothing';
  const b = tokenParts(before);
  const a = tokenParts(after);
  if (!b || !a || b.source !== a.source) return `${PART_NAMES.source}: ${b?.source ?? '?'} -> ${a?.source ?? '?'}`;
  return Object.keys(b)
    .filter((k) => b[k] !== a[k])
    .map((k) => `${PART_NAMES[k] ?? k}: ${b[k] || '-'} -> ${a[k] || '-'}`)
    .join('; ');
}

/**
 * Whether an agreement read now still holds the one a pass was recorded under (its token then): nothing added or
 * changed since, only servers gone. The same CRD storage and the same answer through the worker's address; every
 * server process now was one then (a restart, which gives a process a new identity, is not), and every server's
 * answer now was its answer then, and each server listed now has a live process (a server restarted is listed
 * before its new identity lease is written). A server gone since (its identity lease expired, its address no
 * longer listed) wrote nothing after it went. The StorageVersion form compares the processes alone: its object's resourceVersion
 * moves when a gone server's entry is collected, and the agreed version itself is compared by the caller.
 */
export function holdsSince(recorded: string, now: string): boolean {
  if (recorded === now) return true;
  const r = tokenParts(recorded);
  const n = tokenParts(now);
  if (!r || !n || r.source !== n.source) return false;
  const subset = (a: string, b: string) => {
    const had = new Set(b.split(','));
    return a.split(',').every((x) => had.has(x));
  };
  if (!subset(n.processes!, r.processes!) || n.processes === '?' || n.processes === '') return false;
  if (n.source === 'StorageVersion') return true;
  // Fewer live processes than listed servers: one answers whose process has no identity lease yet (a server just
  // restarted and ready before its lease is written), so it may be a process the pass never saw.
  if (n.processes!.split(',').length < n.servers!.split(',').length) return false;
  return n.crd === r.crd && n.via === r.via && n.servers !== '' && subset(n.servers!, r.servers!);
}
