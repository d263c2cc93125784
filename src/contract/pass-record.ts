/**
 * The record a verdict rests on: what the migration workflow writes into its own result, in Temporal, when a whole
 * pass under agreement succeeded. The worker's Kubernetes token cannot write it. A StorageState's
 * persistedStorageVersionHashes and a CRD's status.storedVersions mirror it: the token can write those, so a mirror
 * alone never makes a verdict (docs/security.md, "What a verdict rests on").
 */
import type { Agreement } from './agreement';

export interface PassRecord {
  /** Who rewrote the objects: svm itself, or the built-in migrator (deferring mode) on svm's object, named here. */
  by: 'svm' | 'built-in';
  /** The built-in's StorageVersionMigration (storagemigration.k8s.io), when by is built-in. */
  object?: string;
  /** The version the API servers agreed to encode in, from start to end: a CRD's version name, a built-in's group/version. */
  encodingVersion: string;
  /** The storageVersionHash of that encoding, as discovery serves it (what the StorageState mirrors), where read. */
  storageVersionHash?: string;
  /** Whether every API server was asked at its own address (false: only through the load-balanced one). */
  verified: boolean;
  /** What was checked, as a sentence. */
  checked: string;
  /**
   * The agreement's token at the final check. A verdict compares it with the agreement read now: any API server
   * restarted since (a rollback and roll-forward, say), a storage version moved, a CRD's storage changed, all change it.
   */
  token: string;
  /** When the final agreement was read (ms since the epoch, the worker's clock). */
  at?: number;
  /**
   * A named cluster's: the uid of its kube-system namespace the pass was made against (pinned to its name, checked
   * by every activity). A verdict counts only while it is the cluster's pinned uid. Absent in a single-cluster
   * install's records, and in records from before it was kept.
   */
  clusterUid?: string;
  /**
   * The resource the pass migrated (`plural.group`, a core resource's plural). A verdict on another resource does not
   * count (src/kube/migration-record.ts). Absent in records from before it was kept: there the run's start input
   * names the resource.
   */
  resource?: string;
}

/** The record of a pass that succeeded under `agreement`, its final reading. */
export function passRecord(
  agreement: Agreement,
  by: PassRecord['by'],
  extra: { storageVersionHash?: string; object?: string; clusterUid?: string; resource?: string } = {},
): PassRecord {
  const hash = extra.storageVersionHash ?? agreement.hash;
  return {
    by,
    ...(extra.object ? { object: extra.object } : {}),
    encodingVersion: agreement.encodingVersion ?? '',
    ...(hash ? { storageVersionHash: hash } : {}),
    verified: agreement.verified,
    checked: agreement.checked,
    token: agreement.token,
    ...(agreement.at !== undefined ? { at: agreement.at } : {}),
    ...(extra.clusterUid ? { clusterUid: extra.clusterUid } : {}),
    ...(extra.resource ? { resource: extra.resource } : {}),
  };
}
