/**
 * What the trigger workflow and its activities exchange (the automated-migration design of kube-storage-version-migrator):
 * the resources observed, the StorageState read and the write decided.
 * The decisions themselves are in src/workflows/trigger-logic.ts.
 */
import type { ClusterRef } from '../api/cluster';

export const UNKNOWN = 'Unknown';

export interface ReporterEntry {
  reporterID: string;
  currentStorageVersionHash: string;
  lastHeartbeatTime: string; // RFC 3339
}

export interface ObservedResource {
  /** StorageState name: <resource>.<group>, or <resource> for the core group. */
  name: string;
  group: string;
  resource: string;
  /** reporterID -> the hash that API server serves now. */
  hashes: Record<string, string>;
}

export interface StateSnapshot {
  /** The version read: the write applies only if nothing changed it since (no lost updates). */
  resourceVersion?: string;
  persisted: string[];
  current?: string;
  lastHeartbeatTime?: string;
  reporters: ReporterEntry[];
}

export type MigrationStatus = 'none' | 'running' | 'succeeded' | 'failed' | 'aborted';

/**
 * What Temporal records of a resource's last successful pass: the storageVersionHash its result's record names
 * (contract/pass-record.ts), or `legacy` for a Succeeded result from an svm that wrote no record, or whose record
 * names no hash (its StorageState is then believed, as before).
 */
export type RecordedPass = { hash: string } | { legacy: true };

export interface StorageStateWrite {
  create: boolean;
  /** Precondition: the version the decision was made on. */
  resourceVersion?: string;
  persisted: string[];
  current?: string;
  lastHeartbeatTime: string;
  reporters: ReporterEntry[];
  discoveryConsistent: boolean;
}

export interface TriggerAction {
  name: string;
  group: string;
  resource: string;
  write: StorageStateWrite;
  stopMigration?: string;
  startMigration?: boolean;
  /** Why, for logs and the workflow's details. */
  note?: string;
  /** The StorageState says migrated but no whole pass at its hash is on record in Temporal (the mirror does not count). */
  mirrorWithoutRecord?: boolean;
}

export interface TriggerMemory {
  /** When this trigger (across continue-as-new) first observed: heartbeats older than that were not its own. */
  since?: number;
  /** When this trigger last observed and applied a period (ms). */
  lastApplied?: number;
  /** A period failed since then: with a gap longer than the staleness bound, that is absence too. */
  failing?: boolean;
  /** name -> since when (ms) the fresh entries have agreed on hash. */
  consensus: Record<string, { hash: string; since: number }>;
  /** name -> failed attempts and when the next may start (ms). */
  backoff: Record<string, { failures: number; notBefore: number }>;
  /**
   * name -> the storageVersionHash of the last whole pass on record (a Succeeded migration's result): kept here, so
   * a record past Temporal's retention still counts while this trigger runs.
   */
  recorded?: Record<string, string>;
}

/** The start input of the trigger workflow (storageVersionTrigger). */
export interface TriggerInput {
  periodSeconds: number;
  /** Default: three periods. */
  stalenessSeconds?: number;
  /** Longest wait between attempts of a failing migration. Default: one hour. */
  maxBackoffSeconds?: number;
  /** The cluster, when one Temporal namespace serves several (src/api/cluster.ts): its migrations are started in it. */
  cluster?: ClusterRef;
  memory?: TriggerMemory;
}
