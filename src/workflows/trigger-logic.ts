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
  const since = memory.since ?? now;
  const next: TriggerMemory = { since, consensus: {}, backoff: { ...memory.backoff } };
  if (cfg.recordDecides) {
    next.recorded = { ...memory.recorded };
    for (const [name, seen] of Object.entries(recorded)) if ('hash' in seen) next.recorded[name] = seen.hash;
  }
  if (cfg.blindGapIsAbsence) next.lastApplied = now;
  const blind =
    cfg.blindGapIsAbsence === true &&
    memory.failing === true &&
    memory.lastApplied !== undefined &&
    now - memory.lastApplied > cfg.stalenessMs;
  const actions: TriggerAction[] = [];
  for (const r of observed) {
    const state = states[r.name];
    const notes: string[] = [];
    // Reporters: refresh those that answered, keep the others until they are three periods old.
    const fresh = new Map<string, ReporterEntry>();
    for (const e of state?.reporters ?? []) if (now - Date.parse(e.lastHeartbeatTime) < 3 * cfg.periodMs) fresh.set(e.reporterID, e);
    for (const [reporterID, hash] of Object.entries(r.hashes))
      fresh.set(reporterID, { reporterID, currentStorageVersionHash: hash, lastHeartbeatTime: iso(now) });
    const reporters = [...fresh.values()].sort((a, b) => compareStrings(a.reporterID, b.reporterID));
    const distinct = [...new Set(reporters.map((e) => e.currentStorageVersionHash))];
    const agreedHash = distinct.length === 1 ? distinct[0] : undefined;

    let persisted = state ? [...state.persisted] : [UNKNOWN];
    let current = state?.current;
    // Away, not merely slow: the last heartbeat is older than the bound, and it predates this trigger or
    // this trigger went blind for longer than the bound.
    const heartbeat = state?.lastHeartbeatTime !== undefined ? Date.parse(state.lastHeartbeatTime) : undefined;
    const stale = heartbeat !== undefined && now - heartbeat > cfg.stalenessMs && (heartbeat < since || blind);
    if (stale) {
      persisted = [UNKNOWN];
      notes.push(
        heartbeat! < since
          ? 'the trigger was away past the staleness bound: persisted reset to Unknown'
          : 'the trigger observed nothing for longer than the staleness bound: persisted reset to Unknown',
      );
    }
    let stop: string | undefined;
    if (agreedHash === undefined) {
      if (migrations[r.name] === 'running')
        stop = `the API servers serve different storage version hashes for ${r.name}: ${reporters.map((e) => `${e.reporterID}=${e.currentStorageVersionHash}`).join(', ')}`;
      notes.push('hashes diverge');
    } else if (agreedHash !== current) {
      if (current !== undefined && migrations[r.name] === 'running')
        stop = `the storage version hash of ${r.name} changed from ${current} to ${agreedHash}`;
      notes.push(current === undefined ? `current set to ${agreedHash}` : `current ${current} -> ${agreedHash}`);
      current = agreedHash;
    }
    // "Unknown" already covers every version; otherwise every hash served now may be persisted.
    if (!persisted.includes(UNKNOWN)) {
      for (const e of reporters) if (!persisted.includes(e.currentStorageVersionHash)) persisted.push(e.currentStorageVersionHash);
      if (current !== undefined && !persisted.includes(current)) persisted.push(current);
    }

    // How long have the entries agreed?
    const prev = memory.consensus[r.name];
    if (agreedHash !== undefined) next.consensus[r.name] = prev && prev.hash === agreedHash ? prev : { hash: agreedHash, since: now };
    const stableForAPeriod = agreedHash !== undefined && now - next.consensus[r.name]!.since >= cfg.periodMs;

    // Migrate?
    const status = stop ? 'aborted' : migrations[r.name];
    if (status === 'failed' && !next.backoff[r.name]?.notBefore) {
      const failures = (memory.backoff[r.name]?.failures ?? 0) + 1;
      next.backoff[r.name] = { failures, notBefore: now + Math.min(cfg.maxBackoffMs, cfg.periodMs * 2 ** failures) };
    }
    const settled = current !== undefined && persisted.length === 1 && persisted[0] === current;
    const mirrorWithoutRecord = cfg.recordDecides === true && settled && !onRecord(r.name, current, recorded[r.name], next);
    if (mirrorWithoutRecord)
      notes.push(
        `the StorageState says objects are persisted only in ${current}, but no whole pass at ${current} is on record in Temporal: the mirror alone does not count`,
      );
    const needed = current !== undefined && (!settled || mirrorWithoutRecord);
    if (!needed) delete next.backoff[r.name];
    const backoff = next.backoff[r.name];
    const waitingOut = backoff !== undefined && now < backoff.notBefore;
    const start = needed && agreedHash === current && stableForAPeriod && status !== 'running' && !waitingOut;
    if (needed && waitingOut) notes.push(`a failed migration is retried after ${iso(backoff.notBefore)}`);
    if (start && backoff) next.backoff[r.name] = { ...backoff, notBefore: 0 };

    actions.push({
      name: r.name,
      group: r.group,
      resource: r.resource,
      write: {
        create: state === undefined,
        resourceVersion: state?.resourceVersion,
        persisted,
        current,
        lastHeartbeatTime: iso(now),
        reporters,
        discoveryConsistent,
      },
      ...(stop ? { stopMigration: stop } : {}),
      ...(start ? { startMigration: true } : {}),
      ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
      ...(mirrorWithoutRecord ? { mirrorWithoutRecord: true } : {}),
    });
  }
  return { actions, memory: next };
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
