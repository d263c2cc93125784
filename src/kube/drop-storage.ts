/**
 * The drop check's storage checks: storageVersion (the agreement), storedVersions (a CRD's status) and migration
 * (the StorageState or storedVersions on record, and the resource's migration workflow in Temporal).
 */
import type { Client } from '@temporalio/client';
import type { CustomResourceDefinition } from '../api/custom-resource-definition';
import type { StorageState } from '../api/migration';
import type { DropCheck } from '../contract/drop';
import type { Agreement } from './agreement';
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

/**
 * The migration check from the record of a whole pass: the resource's StorageState, or else a CRD's storedVersions
 * (its storedVersions check); before its migration workflow is asked.
 */
export function migrationCheck(
  { groupVersion, version }: DropTarget,
  key: string,
  m: { storageVersion?: string; state?: StorageState; servedHash?: string; storedCheck?: DropCheck },
): DropCheck {
  if (m.storageVersion === groupVersion)
    return {
      check: 'migration',
      verdict: 'NotYet',
      reason: `the storage version has not left ${version}: no migration can move objects off it yet`,
    };
  if (m.state) return storageStateMigrationCheck(m.state, m.servedHash, m.storageVersion, version, key);
  if (m.storedCheck)
    return {
      check: 'migration',
      verdict: m.storedCheck.verdict,
      reason:
        m.storedCheck.verdict === 'Ready'
          ? `no StorageState; status.storedVersions is the record (svm prunes it only after a whole pass under agreement) and no longer names ${version}`
          : `no StorageState; status.storedVersions still names ${version}: no whole pass under agreement is on record`,
    };
  return {
    check: 'migration',
    verdict: 'Unknown',
    reason: `no StorageState records whether objects are still stored at ${version} (\`svm trigger start\` keeps them; a successful migration refines them)`,
  };
}

/** Ready when the StorageState holds only the hash the API servers agree on (written after a whole pass under agreement). */
function storageStateMigrationCheck(
  st: StorageState,
  servedHash: string | undefined,
  storageVersion: string | undefined,
  version: string,
  key: string,
): DropCheck {
  const persisted = st.status?.persistedStorageVersionHashes ?? ['Unknown'];
  if (servedHash !== undefined && persisted.length === 1 && persisted[0] === servedHash) {
    const named = storageVersion ? ` (${storageVersion})` : '';
    return {
      check: 'migration',
      verdict: 'Ready',
      reason: `StorageState ${st.metadata.name}: objects persisted only in ${servedHash}${named}, recorded after a whole pass under agreement`,
    };
  }
  const state =
    storageStateReason(persisted, st.status?.currentStorageVersionHash, servedHash) ??
    `StorageState persistedStorageVersionHashes [${persisted.join(', ')}]`;
  return {
    check: 'migration',
    verdict: 'NotYet',
    reason: `${state}: no whole pass since the storage version left ${version} is on record (svm migrate ${key})`,
  };
}

/** The migration check with the resource's migration workflow, as Temporal describes it: one still running is NotYet. */
export async function withMigrationWorkflow(
  migration: DropCheck,
  id: string,
  migrationOf: NonNullable<DropCheckOptions['migrationOf']>,
): Promise<DropCheck> {
  let reason = migration.reason;
  let rec: MigrationRecord | undefined;
  try {
    rec = await migrationOf(id);
  } catch (err) {
    reason += `; its migration workflow ${id} could not be described: ${why(err)}`;
  }
  if (rec?.status === 'RUNNING') return { ...migration, verdict: 'NotYet', reason: `${reason}; its migration workflow ${id} is running` };
  if (rec) {
    const ended = `${rec.phase ?? rec.status}${rec.closeTime ? ` at ${rec.closeTime}` : ''}`;
    return { ...migration, reason: `${reason}; its last migration workflow ${id} ended ${ended}` };
  }
  return { ...migration, reason: `${reason}; no migration workflow ${id} in Temporal` };
}

/**
 * MigrationRecords from a Temporal client the caller holds (the worker's, or the CLI's with TEMPORAL_ADDRESS):
 * the workflow's description, and its result's phase when it completed. Only the migration's own summary is read.
 */
export function migrationRecords(client: Client): (workflowId: string) => Promise<MigrationRecord | undefined> {
  return async (workflowId) => {
    const handle = client.workflow.getHandle(workflowId);
    let d: Awaited<ReturnType<typeof handle.describe>>;
    try {
      d = await handle.describe();
    } catch (err) {
      if (err instanceof Error && err.name === 'WorkflowNotFoundError') return undefined;
      throw err;
    }
    const status = d.status.name;
    let phase: string | undefined;
    if (status === 'COMPLETED') phase = ((await handle.result()) as { phase?: string } | undefined)?.phase;
    return { workflowId, status, ...(phase ? { phase } : {}), ...(d.closeTime ? { closeTime: d.closeTime.toISOString() } : {}) };
  };
}
