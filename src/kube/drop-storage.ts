/**
 * The drop check's storage checks: storageVersion (the agreement), storedVersions (a CRD's status) and migration
 * (the StorageState or storedVersions on record, and the resource's migration workflow in Temporal).
 */
import type { CustomResourceDefinition } from '../api/custom-resource-definition';
import type { StorageState } from '../api/migration';
import type { DropCheck } from '../contract/drop';
import { holdsSince, tokenChange, type Agreement } from './agreement';
import { why, type DropCheckOptions, type DropTarget, type MigrationRecord } from './drop-shared';
import { storageStateReason } from './storage-states';

/** The storageVersion check from an agreement (pure). storageApiVersion: the agreed version as <group>/<version>, when named. */
export function storageVersionCheck(gv: string, a: Agreement, storageApiVersion: string | undefined): DropCheck {
  if (!a.agreed)
    return { check: 'storageVersion', verdict: 'NotYet', reason: a.reason ?? 'the API servers do not agree on its storage version' };
  if (!storageApiVersion)
    return {
      check: 'storageVersion',
      verdict: 'Unknown',
      reason: `the storage version hash ${a.hash ?? a.encodingVersion ?? '?'} names no known version (checked: ${a.checked})`,
    };
  if (storageApiVersion === gv) return { check: 'storageVersion', verdict: 'NotYet', reason: `${gv} is still the storage version` };
  if (!a.verified)
    return {
      check: 'storageVersion',
      verdict: 'Unknown',
      reason: `stored as ${storageApiVersion}, but that could not be verified on every API server`,
    };
  return { check: 'storageVersion', verdict: 'Ready', reason: `every API server stores it as ${storageApiVersion}` };
}

/**
 * The agreed storage version as <group>/<version>, where the agreement names one: a CRD's agreed encodingVersion
 * (a version of its group), a built-in resource's encodingVersion unless that is only the discovery hash (a
 * StorageVersion's carries its group).
 */
export function storageApiVersion(a: Agreement, group: string, custom: boolean): string | undefined {
  if (custom) return a.agreed && a.encodingVersion ? `${group}/${a.encodingVersion}` : undefined;
  if (!a.encodingVersion || a.encodingVersion === a.hash) return undefined;
  return a.encodingVersion.includes('/') ? a.encodingVersion : `${group}/${a.encodingVersion}`;
}

/** The storedVersions check of a CRD: its status.storedVersions no longer names the version. */
export function storedVersionsCheck(crd: CustomResourceDefinition, version: string, key: string): DropCheck {
  const storedVersions = crd.status?.storedVersions ?? [];
  const stored = `status.storedVersions [${storedVersions.join(', ')}]`;
  if (!storedVersions.includes(version))
    return { check: 'storedVersions', verdict: 'Ready', reason: `${stored} no longer names ${version}` };
  return {
    check: 'storedVersions',
    verdict: 'NotYet',
    reason: `${stored} still names ${version}: objects may be stored at ${version} until a whole pass under agreement prunes it (svm migrate ${key})`,
  };
}

/** What Temporal answered for the resource's migration workflow: its last run, or why there is none to read. */
export type RecordLookup = { found: MigrationRecord } | { missing: string };

/** What the Kubernetes objects say of the migration: mirrors of the record, which the worker's token can write. */
interface Mirror {
  says: 'migrated' | 'not migrated' | 'nothing';
  what: string;
}

/**
 * The migration check. Its verdict rests on the record alone: the resource's migration workflow in Temporal, whose
 * Succeeded result names the whole pass and the agreement it held under (contract/pass-record.ts). Ready only when
 * that agreement still holds now (holdsSince): an API server restarted since (a rollback and roll-forward), one
 * added, or a storage version that moved, does not; a server gone since does. The StorageState and a CRD's
 * storedVersions are mirrors the worker's token can write: one saying "migrated" never counts without the record;
 * one saying "not migrated" holds the verdict back, record or not (named either way).
 */
export function migrationCheck(
  { groupVersion, version }: DropTarget,
  key: string,
  m: { storageVersion?: string; state?: StorageState; servedHash?: string; storedCheck?: DropCheck; agreement?: Agreement },
  lookup: RecordLookup,
): DropCheck {
  if (m.storageVersion === groupVersion)
    return {
      check: 'migration',
      verdict: 'NotYet',
      reason: `the storage version has not left ${version}: no migration can move objects off it yet`,
    };
  const mirror = mirrorOf(m, version);
  const judged = judgeRecord(lookup, m.agreement, key);
  let reason = judged.reason;
  // A mirror saying "not migrated" is believed, record or not: a forged one only holds the drop back, and a true one
  // knows what the record cannot (a hash the trigger saw served after the pass, by a server that restarted since).
  const verdict = mirror.says === 'not migrated' && judged.verdict !== 'NotYet' ? 'NotYet' : judged.verdict;
  if (judged.verdict === 'Ready' && mirror.says === 'not migrated')
    reason += `; but the mirror disagrees: ${mirror.what} (believed: it only holds the drop back)`;
  else if (judged.verdict !== 'Ready' && mirror.says === 'migrated')
    reason += `; ${mirror.what}, but that mirror is the worker's token's to write: without the record it does not count`;
  else if (judged.verdict !== 'Ready' && mirror.says === 'not migrated') reason += `; ${mirror.what}`;
  return { check: 'migration', verdict, reason };
}

/** The record's verdict: Ready on a whole pass under the agreement that holds now, else NotYet or Unknown and why. */
export function judgeRecord(lookup: RecordLookup, now: Agreement | undefined, key: string): Omit<DropCheck, 'check'> {
  if ('missing' in lookup) return { verdict: 'Unknown', reason: lookup.missing };
  const rec = lookup.found;
  const id = rec.workflowId;
  if (rec.status === 'RUNNING') return { verdict: 'NotYet', reason: `its migration workflow ${id} is running` };
  if (rec.refused) return { verdict: 'Unknown', reason: rec.refused };
  const ended = `${rec.phase ?? rec.status}${rec.closeTime ? ` at ${rec.closeTime}` : ''}`;
  if (rec.phase !== 'Succeeded')
    return {
      verdict: 'NotYet',
      reason: `its last migration workflow ${id} ended ${ended}: no whole pass is on record (svm migrate ${key})`,
    };
  const p = rec.record;
  if (!p)
    return {
      verdict: 'Unknown',
      reason: `its last migration workflow ${id} ended ${ended} without a record of its pass (an svm from before records were kept): migrate again to record one (svm migrate ${key})`,
    };
  const by = p.by === 'built-in' ? `the built-in migrator${p.object ? ` (${p.object})` : ''}` : 'svm';
  if (!p.verified)
    return {
      verdict: 'Unknown',
      reason: `its last migration workflow ${id} ended ${ended}, but its agreement was not verified per API server (${p.checked})`,
    };
  // Discovery's form holds each server's hash; the StorageVersion form leaves the agreed version to be compared here.
  const sameVersion = now?.source !== 'StorageVersion' || now.encodingVersion === p.encodingVersion;
  if (!now?.agreed || !sameVersion || !holdsSince(p.token, now.token))
    return {
      verdict: 'NotYet',
      reason: `its last whole pass (${id}, by ${by}, ended ${ended}) was under an agreement that no longer holds (${now?.agreed ? tokenChange(p.token, now.token) : 'no agreement now'}): an API server restarted or the storage version moved since, and objects may have been written in another encoding meanwhile (svm migrate ${key})`,
    };
  return {
    verdict: 'Ready',
    reason: `its last migration workflow ${id} ended ${ended}: a whole pass by ${by} to ${p.encodingVersion}, under the agreement that holds now (${p.checked})`,
  };
}

/** What the StorageState, or else a CRD's storedVersions, says of the migration. */
function mirrorOf(
  m: { state?: StorageState; servedHash?: string; storageVersion?: string; storedCheck?: DropCheck },
  version: string,
): Mirror {
  if (m.state) {
    const persisted = m.state.status?.persistedStorageVersionHashes ?? ['Unknown'];
    const name = `StorageState ${m.state.metadata.name}`;
    if (m.servedHash !== undefined && persisted.length === 1 && persisted[0] === m.servedHash)
      return {
        says: 'migrated',
        what: `${name} says objects are persisted only in ${m.servedHash}${m.storageVersion ? ` (${m.storageVersion})` : ''}`,
      };
    const state =
      storageStateReason(persisted, m.state.status?.currentStorageVersionHash, m.servedHash) ??
      `${name} persistedStorageVersionHashes [${persisted.join(', ')}]`;
    return { says: 'not migrated', what: state };
  }
  if (m.storedCheck)
    return m.storedCheck.verdict === 'Ready'
      ? { says: 'migrated', what: `status.storedVersions no longer names ${version}` }
      : { says: 'not migrated', what: `status.storedVersions still names ${version}` };
  return { says: 'nothing', what: '' };
}

/**
 * The resource's last migration workflow as Temporal describes it, or why there is none to read: no Temporal
 * client at hand, none in Temporal, or Temporal did not answer.
 */
export async function lookUpRecord(
  resource: { group: string; resource: string },
  id: string,
  migrationOf: DropCheckOptions['migrationOf'],
): Promise<RecordLookup> {
  if (!migrationOf)
    return {
      missing: `the record of a whole pass is the migration workflow ${id} in Temporal, and no Temporal client is at hand (set TEMPORAL_ADDRESS)`,
    };
  try {
    const found = await migrationOf(resource);
    if (found) return { found };
    return {
      missing: `Temporal holds no migration workflow ${id}: never migrated by svm, migrated by another migrator, or past the namespace's retention`,
    };
  } catch (err) {
    return { missing: `its migration workflow ${id} could not be described: ${why(err)}` };
  }
}

/**
 * Why the record does not back a StorageState that says every object is stored at `hash`, or undefined when it
 * does: the resource's last run Succeeded with a pass at that hash, or with a result from an svm that kept no record
 * (believed, as the trigger believes it). `svm plan` lists a resource whose StorageState is backed by nothing.
 */
export function unbackedReason(lookup: RecordLookup, hash: string): string | undefined {
  if ('missing' in lookup) return lookup.missing;
  const { workflowId, status, phase, record, refused } = lookup.found;
  if (status === 'RUNNING') return `its migration workflow ${workflowId} is running`;
  if (refused) return refused;
  if (phase !== 'Succeeded') return `its last migration workflow ${workflowId} ended ${phase ?? status}`;
  const recorded = record?.storageVersionHash;
  return recorded === undefined || recorded === hash ? undefined : `its last whole pass on record (${workflowId}) was at ${recorded}`;
}

/** The reader of checked records and its check live in src/kube/migration-record.ts; re-exported for their readers here. */
export { checkRecord, migrationRecords, MIGRATION_WORKFLOW_TYPES } from './migration-record';
