/**
 * The trigger's decisions, as the automated-migration design of kube-storage-version-migrator (automated migration, with its
 * HA extension) describes them: pure and deterministic, so the trigger
 * workflow can run them and tests can check them case by case.
 *
 * Per resource with a storageVersionHash, each period:
 * - every API server (reporter) that answered refreshes its entry in
 *   currentStorageVersionHashes; entries older than three periods are dropped;
 * - any hash a fresh reporter serves that is not yet in
 *   persistedStorageVersionHashes is appended (objects may now be written in it);
 * - when all fresh entries agree on a hash different from
 *   currentStorageVersionHash: a running migration is stopped and current
 *   becomes that hash, in the same write;
 * - when they diverge: a running migration is stopped, nothing is started;
 * - when the trigger was away longer than the staleness bound, persisted is
 *   reset to ["Unknown"]: changes may have been missed. Away means the
 *   StorageState's heartbeat is older than the bound and either predates
 *   this trigger, or this trigger itself went longer than the bound without
 *   an applied period while its periods failed (running but blind: API
 *   servers unreachable, writes refused). A slow period that succeeds is not
 *   absence, however long it took;
 * - a migration is started when persisted != [current], the entries have
 *   agreed on current for at least one period, no migration runs, and a
 *   failed one is not retried before its backoff ends;
 * - a successful migration refines persisted to [current] (done by the
 *   migration itself, so it happens at once);
 * - with recordDecides, a StorageState settled at current counts only when a
 *   whole pass at current is on record in Temporal (the resource's last
 *   Succeeded result, or remembered by the trigger): the StorageState is a
 *   mirror the worker's token can write, so without the record it migrates.
 */
import {
  UNKNOWN,
  type ReporterEntry,
  type StateSnapshot,
  type MigrationStatus,
  type ObservedResource,
  type TriggerAction,
  type TriggerMemory,
  type RecordedPass,
} from '../contract/trigger';
import { compareStrings } from '../api/order';

export interface TriggerConfig {
  periodMs: number;
  /** A StorageState whose heartbeat is older than this was not watched: reset to Unknown. */
  stalenessMs: number;
  /**
   * Whether a gap in this trigger's own applied periods longer than the bound counts as absence.
   * The workflow turns it on with a patch (histories from before it replay as they ran).
   */
  blindGapIsAbsence?: boolean;
  /** Longest wait between attempts of a failing migration. */
  maxBackoffMs: number;
  /**
   * Whether "migrated" needs the record in Temporal (a Succeeded result naming the current hash), not the StorageState
   * alone. The workflow turns it on with a patch (histories from before it replay as they ran).
   */
  recordDecides?: boolean;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** What every resource's decision of one period shares: the inputs, and the memory the period carries to the next. */
interface Period {
  migrations: Record<string, MigrationStatus | undefined>;
  memory: TriggerMemory;
  /** The memory carried to the next period, filled in resource by resource. */
  next: TriggerMemory;
  cfg: TriggerConfig;
  now: number;
  /** Whether this trigger went blind (its periods failing) for longer than the staleness bound. */
  blind: boolean;
  recorded: Record<string, RecordedPass>;
  discoveryConsistent: boolean;
}

/**
 * One period: for each resource observed, the StorageState to write and whether to stop or start its migration
 * (decideResource); the memory the trigger carries to its next period.
 */
export function decide(
  observed: ObservedResource[],
  states: Record<string, StateSnapshot | undefined>,
  migrations: Record<string, MigrationStatus | undefined>,
  memory: TriggerMemory,
  cfg: TriggerConfig,
  now: number,
  discoveryConsistent: boolean,
  recorded: Record<string, RecordedPass> = {},
): { actions: TriggerAction[]; memory: TriggerMemory } {
  const p: Period = {
    migrations,
    memory,
    next: nextMemory(memory, cfg, now, recorded),
    cfg,
    now,
    blind: wentBlind(memory, cfg, now),
    recorded,
    discoveryConsistent,
  };
  const actions = observed.map((r) => decideResource(r, states[r.name], p));
  return { actions, memory: p.next };
}

/** The memory the period starts for the next: when the trigger started, the passes on record, this period applied. */
function nextMemory(memory: TriggerMemory, cfg: TriggerConfig, now: number, recorded: Record<string, RecordedPass>): TriggerMemory {
  const next: TriggerMemory = { since: memory.since ?? now, consensus: {}, backoff: { ...memory.backoff } };
  if (cfg.recordDecides) {
    next.recorded = { ...memory.recorded };
    for (const [name, seen] of Object.entries(recorded)) if ('hash' in seen) next.recorded[name] = seen.hash;
  }
  if (cfg.blindGapIsAbsence) next.lastApplied = now;
  return next;
}

/** Running but blind: its periods failing, and none applied for longer than the staleness bound. */
function wentBlind(memory: TriggerMemory, cfg: TriggerConfig, now: number): boolean {
  return (
    cfg.blindGapIsAbsence === true &&
    memory.failing === true &&
    memory.lastApplied !== undefined &&
    now - memory.lastApplied > cfg.stalenessMs
  );
}

/** One resource's decision: its reporters, its persisted and current hashes, then whether to stop or start. */
function decideResource(r: ObservedResource, state: StateSnapshot | undefined, p: Period): TriggerAction {
  const notes: string[] = [];
  const reporters = reportersOf(r, state, p);
  const distinct = [...new Set(reporters.map((e) => e.currentStorageVersionHash))];
  const agreedHash = distinct.length === 1 ? distinct[0] : undefined;

  const reset = staleness(state, p);
  if (reset) notes.push(reset);
  let persisted = state && !reset ? [...state.persisted] : [UNKNOWN];
  const hashes = followHash(r.name, reporters, agreedHash, state?.current, p.migrations[r.name]);
  if (hashes.note) notes.push(hashes.note);
  const current = hashes.current;
  persisted = widenPersisted(persisted, reporters, current);

  const stableForAPeriod = agreedFor(r.name, agreedHash, p) >= p.cfg.periodMs;
  const { start, mirrorWithoutRecord } = migrate(r.name, { persisted, current, agreedHash, stableForAPeriod, stop: hashes.stop }, p, notes);

  return {
    name: r.name,
    group: r.group,
    resource: r.resource,
    write: {
      create: state === undefined,
      resourceVersion: state?.resourceVersion,
      persisted,
      current,
      lastHeartbeatTime: iso(p.now),
      reporters,
      discoveryConsistent: p.discoveryConsistent,
    },
    ...(hashes.stop ? { stopMigration: hashes.stop } : {}),
    ...(start ? { startMigration: true } : {}),
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
    ...(mirrorWithoutRecord ? { mirrorWithoutRecord: true } : {}),
  };
}

/** Reporters: those that answered refreshed, the others kept until they are three periods old; by reporterID. */
function reportersOf(r: ObservedResource, state: StateSnapshot | undefined, p: Period): ReporterEntry[] {
  const fresh = new Map<string, ReporterEntry>();
  for (const e of state?.reporters ?? []) if (p.now - Date.parse(e.lastHeartbeatTime) < 3 * p.cfg.periodMs) fresh.set(e.reporterID, e);
  for (const [reporterID, hash] of Object.entries(r.hashes))
    fresh.set(reporterID, { reporterID, currentStorageVersionHash: hash, lastHeartbeatTime: iso(p.now) });
  return [...fresh.values()].sort((a, b) => compareStrings(a.reporterID, b.reporterID));
}

/**
 * Why persisted is reset to Unknown, or undefined. Away, not merely slow: the last heartbeat is older than the bound,
 * and it predates this trigger or this trigger went blind for longer than the bound.
 */
function staleness(state: StateSnapshot | undefined, p: Period): string | undefined {
  if (state?.lastHeartbeatTime === undefined) return undefined;
  const heartbeat = Date.parse(state.lastHeartbeatTime);
  const since = p.next.since!;
  if (!(p.now - heartbeat > p.cfg.stalenessMs && (heartbeat < since || p.blind))) return undefined;
  return heartbeat < since
    ? 'the trigger was away past the staleness bound: persisted reset to Unknown'
    : 'the trigger observed nothing for longer than the staleness bound: persisted reset to Unknown';
}

/** The current hash after this period, and why a running migration stops: the servers diverge, or agree on a new hash. */
function followHash(
  name: string,
  reporters: ReporterEntry[],
  agreedHash: string | undefined,
  current: string | undefined,
  status: MigrationStatus | undefined,
): { current: string | undefined; stop?: string; note?: string } {
  if (agreedHash === undefined) {
    const stop =
      status === 'running'
        ? `the API servers serve different storage version hashes for ${name}: ${reporters.map((e) => `${e.reporterID}=${e.currentStorageVersionHash}`).join(', ')}`
        : undefined;
    return { current, stop, note: 'hashes diverge' };
  }
  if (agreedHash === current) return { current };
  const stop =
    current !== undefined && status === 'running'
      ? `the storage version hash of ${name} changed from ${current} to ${agreedHash}`
      : undefined;
  return {
    current: agreedHash,
    stop,
    note: current === undefined ? `current set to ${agreedHash}` : `current ${current} -> ${agreedHash}`,
  };
}

/** "Unknown" already covers every version; otherwise every hash served now (and current) may be persisted. */
function widenPersisted(persisted: string[], reporters: ReporterEntry[], current: string | undefined): string[] {
  if (persisted.includes(UNKNOWN)) return persisted;
  for (const e of reporters) if (!persisted.includes(e.currentStorageVersionHash)) persisted.push(e.currentStorageVersionHash);
  if (current !== undefined && !persisted.includes(current)) persisted.push(current);
  return persisted;
}

/** How long the entries have agreed on agreedHash (kept in next.consensus); -Infinity when they do not agree. */
function agreedFor(name: string, agreedHash: string | undefined, p: Period): number {
  if (agreedHash === undefined) return -Infinity;
  const prev = p.memory.consensus[name];
  p.next.consensus[name] = prev && prev.hash === agreedHash ? prev : { hash: agreedHash, since: p.now };
  return p.now - p.next.consensus[name]!.since;
}

/**
 * Migrate? Needed while persisted is not [current] (or, with recordDecides, no whole pass at current is on record);
 * started once the servers agreed on current for a period, none runs, and a failed one's backoff has ended. Keeps
 * the backoff in next.backoff and says why in notes.
 */
function migrate(
  name: string,
  s: {
    persisted: string[];
    current: string | undefined;
    agreedHash: string | undefined;
    stableForAPeriod: boolean;
    stop: string | undefined;
  },
  p: Period,
  notes: string[],
): { start: boolean; mirrorWithoutRecord: boolean } {
  const { next, now, cfg } = p;
  const status = s.stop ? 'aborted' : p.migrations[name];
  if (status === 'failed' && !next.backoff[name]?.notBefore) {
    const failures = (p.memory.backoff[name]?.failures ?? 0) + 1;
    next.backoff[name] = { failures, notBefore: now + Math.min(cfg.maxBackoffMs, cfg.periodMs * 2 ** failures) };
  }
  const settled = s.current !== undefined && s.persisted.length === 1 && s.persisted[0] === s.current;
  const mirrorWithoutRecord = cfg.recordDecides === true && settled && !onRecord(name, s.current, p.recorded[name], next);
  if (mirrorWithoutRecord)
    notes.push(
      `the StorageState says objects are persisted only in ${s.current}, but no whole pass at ${s.current} is on record in Temporal: the mirror alone does not count`,
    );
  const needed = s.current !== undefined && (!settled || mirrorWithoutRecord);
  if (!needed) delete next.backoff[name];
  const backoff = next.backoff[name];
  const waitingOut = backoff !== undefined && now < backoff.notBefore;
  const start = needed && s.agreedHash === s.current && s.stableForAPeriod && status !== 'running' && !waitingOut;
  if (needed && waitingOut) notes.push(`a failed migration is retried after ${iso(backoff.notBefore)}`);
  if (start && backoff) next.backoff[name] = { ...backoff, notBefore: 0 };
  return { start, mirrorWithoutRecord };
}

/**
 * Whether a whole pass at `hash` is on record: the resource's last Succeeded result names it, or the trigger remembers
 * one (both in next.recorded), or that result is from an svm that kept no record (its StorageState is believed, as
 * before).
 */
function onRecord(name: string, hash: string | undefined, seen: RecordedPass | undefined, next: TriggerMemory): boolean {
  if (seen && 'legacy' in seen) return true;
  return hash !== undefined && next.recorded?.[name] === hash;
}
