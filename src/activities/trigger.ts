/**
 * The trigger's I/O: observe every API server's discovery, the StorageState
 * objects and the migrations that matter; then apply the trigger's decisions
 * (StorageState writes, stopping and starting migrations). Returns hashes,
 * names and counts only.
 */
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { groupResourceString } from '../api/resource';
import type { ApiServer, ApiServerSource } from '../kube/apiservers';
import type { DiscoveredResource, KubeClient } from '../kube/client';
import { withTimeout } from '../kube/timeout';
import { listStorageStates, refineStorageState, storageStatePath } from '../kube/storage-states';
import type { Placement } from '../contract/placement';
import type { MigrationStatus, ObservedResource, RecordedPass, StateSnapshot, TriggerAction } from '../contract/trigger';
import { migrationRecords } from '../kube/drop-storage';
import { UNKNOWN } from '../contract/trigger';
import { compareStrings } from '../api/order';
import { TriggerPeriod, type TriggerApplied } from './trigger-apply';

export interface TriggerDeps {
  kube: KubeClient;
  /** Every API server (src/kube/apiservers.ts): each reports its own discovery. */
  apiservers: ApiServerSource;
  temporal?: { client: Client; placement: Placement };
  /** A named cluster's pinned uid (its API's, checked before any activity); none for a single cluster. */
  pinnedUid?: () => Promise<string>;
  /** 'standard': hand each migration to the built-in migrator (delegateToBuiltIn) instead of svm's own pass. */
  triggerApi?: 'svm' | 'standard';
  /**
   * Who acts on storagemigration.k8s.io objects. Except under 'own' (where such an object runs as svm's own
   * workflow, the one the trigger would start), an unfinished one that somebody else created for a resource (upgrade
   * tooling, for the built-in) is waited for: never two migrations of one resource. Default defer.
   */
  standardMigrations?: 'defer' | 'own' | 'off';
  /** Told per resource each applied period whether its StorageState says migrated with no pass on record (a metric). */
  mirrorWithoutRecord?: (resource: string, without: boolean) => void;
}

export interface Observation {
  observed: ObservedResource[];
  states: Record<string, StateSnapshot>;
  migrations: Record<string, MigrationStatus>;
  /** The last whole pass on record in Temporal, for the resources looked up (those not already known at their hash). */
  recorded?: Record<string, RecordedPass>;
  /**
   * Every API server answered at its own address (as many addresses as live
   * identity leases) and all serve the same discovery document
   * (coordinated discovery for HA API servers). False when that could not be verified.
   */
  discoveryConsistent: boolean;
  /**
   * Who reported: the address:port of each API server that answered at its
   * own address, or, when none did, the worker's own API URL (one
   * load-balanced reporter, which may be any server).
   */
  reporters: string[];
  /** What was asked, as a sentence (e.g. "2 of 2 API servers (kubernetes EndpointSlice, 2 identity leases)"). */
  checked: string;
  /**
   * When the observation was complete (ms since the epoch, the worker's
   * clock): the trigger decides by this reading, recorded in history, not by
   * its own clock (see Agreement.at). Absent in older histories.
   */
  at?: number;
}

/** Where they live now (src/kube/storage-states.ts); exported here too, for the code and tests that import them from here. */
export { refineStorageState, storageStatePath };

/** A digest of what a server's discovery says about storage: equal digests, consistent discovery. */
function discoveryDigest(resources: DiscoveredResource[]): string {
  const lines = resources
    .map((r) => `${r.group}/${r.version}/${r.name} ${r.storageVersionHash ?? ''} ${[...r.verbs].sort().join(',')}`)
    .sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex').slice(0, 16);
}

/** A server asked at its own address answers its whole discovery within this, or does not report this period. */
const ENDPOINT_DISCOVERY_TIMEOUT_MS = 20_000;

/** One period's discovery: the resources each reporter serves with their storage version hashes, and who was silent. */
class DiscoveryReading {
  readonly byName = new Map<string, ObservedResource>();
  readonly digests = new Set<string>();
  readonly reporters: string[] = [];
  readonly silent: string[] = [];

  report(id: string, resources: DiscoveredResource[]): void {
    this.reporters.push(id);
    this.digests.add(discoveryDigest(resources));
    for (const r of resources) {
      if (r.name.includes('/') || !r.storageVersionHash) continue;
      const name = groupResourceString({ group: r.group, resource: r.name });
      const o = this.byName.get(name) ?? { name, group: r.group, resource: r.name, hashes: {} };
      o.hashes[id] ??= r.storageVersionHash;
      this.byName.set(name, o);
    }
  }

  /** One API server asked at its own address. */
  async ask(s: ApiServer): Promise<void> {
    let resources: DiscoveredResource[];
    try {
      resources = await withTimeout(
        s.kube.discover(),
        ENDPOINT_DISCOVERY_TIMEOUT_MS,
        `${s.id} did not answer discovery within ${ENDPOINT_DISCOVERY_TIMEOUT_MS / 1000}s`,
      );
    } catch {
      this.silent.push(s.id);
      return; // this server does not report this period; its entries age out
    }
    this.report(s.id, resources);
  }
}

/** Every API server's discovery, whether every one answered (verified), and what was asked, as a sentence. */
async function readDiscovery(deps: TriggerDeps): Promise<{ reading: DiscoveryReading; verified: boolean; checked: string }> {
  const found = await deps.apiservers.find();
  const reading = new DiscoveryReading();
  await Promise.all(found.endpoints.map((s) => reading.ask(s)));
  const { reporters, silent } = reading;
  const ids = found.identities;
  const verified = silent.length === 0 && reporters.length > 0 && ids !== undefined && ids.length > 0 && reporters.length >= ids.length;
  const leases = ids ? `${ids.length} identity lease${ids.length === 1 ? '' : 's'}` : 'identity leases unknown';
  if (verified) {
    return {
      reading,
      verified,
      checked: `${reporters.length} of ${found.endpoints.length} API servers (kubernetes EndpointSlice, ${leases})`,
    };
  }
  const note = [found.endpointsNote, silent.length > 0 ? `not answering: ${silent.sort().join(', ')}` : undefined]
    .filter(Boolean)
    .join('; ');
  let checked = `could not verify per server: ${reporters.length} of ${found.endpoints.length} addresses answered${note ? ` (${note})` : ''}, ${leases}`;
  if (reporters.length === 0) {
    // No server heard at its own address: our own address reports (whichever server it reaches).
    reading.report(deps.kube.server, await deps.kube.discover());
    checked += `; discovery through ${deps.kube.server}`;
  }
  return { reading, verified, checked };
}

/** Every StorageState as read now. */
async function readStates(kube: KubeClient): Promise<Record<string, StateSnapshot>> {
  const states: Record<string, StateSnapshot> = {};
  for (const i of await listStorageStates(kube)) {
    states[i.metadata.name] = {
      resourceVersion: i.metadata.resourceVersion,
      persisted: i.status?.persistedStorageVersionHashes ?? [UNKNOWN],
      current: i.status?.currentStorageVersionHash,
      lastHeartbeatTime: i.status?.lastHeartbeatTime,
      reporters: i.status?.currentStorageVersionHashes ?? [],
    };
  }
  return states;
}

/** The resource's migration workflow: how its last run stands, and the pass its result records when it succeeded. */
async function migrationStatus(
  deps: TriggerDeps,
  resource: { group: string; resource: string },
): Promise<{ status: MigrationStatus; recorded?: RecordedPass }> {
  if (!deps.temporal) return { status: 'none' };
  // Checked against the worker's placement (its queue, its cluster with the uid pinned to it): src/kube/migration-record.ts.
  const placement = deps.temporal.placement.withUid(await deps.pinnedUid?.());
  const r = await migrationRecords(deps.temporal.client, placement)(resource);
  if (!r) return { status: 'none' };
  if (r.status === 'RUNNING') return { status: 'running' };
  if (r.status !== 'COMPLETED') return { status: 'failed' };
  // A run that is not svm's record of this resource in this cluster (another workflow type, queue, input, result
  // or uid: checkRecord) is no pass of it: migrated again.
  if (r.refused) return { status: 'failed' };
  if (r.phase !== 'Succeeded') return { status: 'aborted' };
  // A result with no record (an older svm), or a record naming no hash (none was read), cannot be matched to a
  // hash: the StorageState is believed, as before (never a migration started again every period for it).
  if (!r.record?.storageVersionHash) return { status: 'succeeded', recorded: { legacy: true } };
  return { status: 'succeeded', recorded: { hash: r.record.storageVersionHash } };
}

/**
 * Only migrations that may matter: where a state is not settled, or settled at a hash with no pass on record yet
 * (the StorageState is a mirror the worker's token can write: the trigger asks Temporal).
 */
async function lookUpMigrations(
  deps: TriggerDeps,
  resources: Iterable<ObservedResource>,
  states: Record<string, StateSnapshot>,
  known: Record<string, string> | undefined,
): Promise<{ migrations: Record<string, MigrationStatus>; recorded: Record<string, RecordedPass> }> {
  const migrations: Record<string, MigrationStatus> = {};
  const recorded: Record<string, RecordedPass> = {};
  for (const o of resources) {
    const name = o.name;
    const st = states[name];
    const settled = st !== undefined && st.persisted.length === 1 && st.persisted[0] === st.current;
    if (settled && (!known || known[name] === st.current)) continue;
    const m = await migrationStatus(deps, o);
    migrations[name] = m.status;
    if (m.recorded) recorded[name] = m.recorded;
  }
  return { migrations, recorded };
}

/**
 * known: the hash of the last whole pass on record of each resource, as the trigger remembers it (given by a
 * trigger that decides by the record: a settled StorageState is then looked up in Temporal unless known there).
 */
async function observe(deps: TriggerDeps, known: Record<string, string> | undefined): Promise<Observation> {
  const { reading, verified, checked } = await readDiscovery(deps);
  const states = await readStates(deps.kube);
  const { migrations, recorded } = await lookUpMigrations(deps, reading.byName.values(), states, known);
  return {
    observed: [...reading.byName.values()].sort((a, b) => compareStrings(a.name, b.name)),
    states,
    migrations,
    ...(known ? { recorded } : {}),
    discoveryConsistent: verified && reading.digests.size === 1,
    reporters: reading.reporters.sort(),
    checked,
    at: Date.now(),
  };
}

export function createTriggerActivities(deps: TriggerDeps) {
  return {
    /** known: the last whole pass on record of each resource, as the trigger remembers it (see observe above). */
    async observeStorage(known?: Record<string, string>): Promise<Observation> {
      return observe(deps, known);
    },

    async applyTriggerActions(actions: TriggerAction[]): Promise<TriggerApplied> {
      return new TriggerPeriod(deps).apply(actions);
    },
  };
}
