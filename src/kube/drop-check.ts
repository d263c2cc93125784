/**
 * `svm plan --drop <group>/<version>` and the checkVersionDrop workflow's
 * activity: can this API version be removed now, from a CRD's versions or by
 * the next Kubernetes release? A read: nothing is written.
 *
 * For every resource served at the version, every CRD of the group that
 * still names it, and every built-in resource of the group (objects written
 * before an upgrade may still be stored in the version), one verdict from
 * these checks, each Ready, NotYet or Unknown with its reason:
 *
 *   storageVersion     the API servers agree on a storage version, and it is
 *                      not the one to drop (the worker's agreement rules,
 *                      each server asked at its own address);
 *   migration          a whole pass under that agreement is on record: the
 *                      resource's migration workflow in Temporal (which the
 *                      worker's token cannot write) ended Succeeded with the
 *                      record of its pass, under an agreement that still
 *                      holds (no API server restarted or added since, the
 *                      storage version unmoved). Unknown without a Temporal
 *                      client, without a workflow (another migrator, retention)
 *                      or without a record in its result. The StorageState and
 *                      a CRD's storedVersions are mirrors the token can write:
 *                      "migrated" never counts without the record, "not
 *                      migrated" holds the verdict back, each named;
 *   storedVersions     a CRD's status.storedVersions no longer names it;
 *   managedFields      no object has a managedFields entry at the version:
 *                      server-side apply on such an object fails once the
 *                      version is not served (seen on 1.36.3 and 1.37.2),
 *                      counted from a metadata-only list at another version;
 *   requests           no API server served a request at the version during
 *                      the window, and none is open now (each server's own
 *                      /metrics; Unknown where it may not be read, or where
 *                      the servers cannot be asked one by one). A client that
 *                      calls less often than the window is not seen, and the
 *                      reason says so. Unknown where an aggregated API serves
 *                      the version (kube-apiserver does not count the
 *                      requests it proxies). A resource discovery does not
 *                      list at the version has no client there; Unknown where
 *                      it is served at a version other than its storage
 *                      version (a version nothing serves may be a misspelling
 *                      of that one);
 *   conversionWebhook  a CRD's conversion webhook, probed by metadata-only
 *                      lists at its served versions but the one to drop
 *                      (NotYet when it fails them): it has to keep converting
 *                      the version until the CRD no longer names it.
 *
 * A resource is NotYet if any check is, else Unknown if any is, else Ready;
 * the report likewise over its resources, and Unknown when there is none (a
 * version nothing serves and no CRD names: a misspelt one, or one already
 * removed; the notes say what the group serves). Exit code 0 Ready, 1 NotYet,
 * 2 Unknown (the CLI also exits 2 on an error).
 */
import { groupResourceString, migrationWorkflowId } from '../api/resource';
import { placedId } from '../contract/placement';
import {
  combineVerdicts,
  DEFAULT_REQUESTS_WINDOW_SECONDS,
  dropExitCode,
  groupVersionRefusal,
  type DropCheck,
  type DropReport,
  type DropResource,
  type DropVerdict,
} from '../contract/drop';
import { kubernetesEndpoints } from './apiservers';
import type { KubeClient } from './client';
import { conversionWebhookFinding } from './drop-conversion';
import { readGroup, resourcesToCheck, unservedNote } from './drop-group';
import { managedFieldsFinding } from './drop-managed-fields';
import { readAfterWindow, readEach, requestsFinding, type WindowReadings } from './drop-requests';
import { DropInputError, type DropCheckOptions, type DropTarget, type GroupReading, type ResourceFindings } from './drop-shared';
import { lookUpRecord, migrationCheck, storageApiVersion, storageVersionCheck, storedVersionsCheck } from './drop-storage';

export { DropInputError, type DropCheckOptions, type MigrationRecord } from './drop-shared';
export { requestsCheck, serverRequests } from './drop-requests';
export { storageVersionCheck } from './drop-storage';
export { checkRecord, migrationRecords, type RecordExpectation } from './migration-record';
export { managedFieldsCheck } from './drop-managed-fields';

/**
 * The check itself. Reads discovery, CRDs, StorageStates, StorageVersions
 * (where served), every API server's discovery and /metrics, and lists each
 * resource's metadata at another version. Only GETs.
 */
export async function checkDrop(kube: KubeClient, groupVersion: string, opts: DropCheckOptions = {}): Promise<DropReport> {
  const target = dropTarget(groupVersion, opts.requestsWindowSeconds);
  const now = opts.now ?? Date.now;
  const notes: string[] = [];
  const ownSource = opts.apiservers ? undefined : kubernetesEndpoints(kube);
  try {
    const reading = await readGroup(kube, opts.apiservers ?? ownSource!, target, now, notes);
    const names = resourcesToCheck(reading, target);
    const unserved = unservedNote(reading, target, names.length);
    if (unserved) notes.push(unserved);

    // The request counters' first reading; the window runs while the objects are listed.
    const windowStart = now();
    const firstReading = target.windowSeconds > 0 && names.length > 0 ? await readEach(reading.found) : [];
    const windowEnd = windowStart + target.windowSeconds * 1000;
    let checked = '';
    const findings: ResourceFindings[] = [];
    for (const name of names) {
      const f = await checkResource(kube, reading, target, name, opts);
      // The report names one sentence of what was checked: the last agreement read from discovery, else the first.
      if (f.agreement && (f.agreement.source === 'discovery' || !checked)) checked = f.agreement.checked;
      findings.push(f);
    }

    // The request counters' second reading, once the window has passed.
    const lastReading = names.length > 0 ? await readAfterWindow(reading.found, windowEnd, now, opts) : [];
    const readings: WindowReadings = {
      first: firstReading,
      last: lastReading,
      lastAt: now(),
      sampled: opts.requestSamples && ((server) => opts.requestSamples!.oldest(server, windowStart - 1)),
    };
    const resources = findings.map((f) => dropResource(f, target, reading, readings));
    // Note: no resource to check is not Ready: a misspelt version has none (the notes say what the group serves).
    const verdict: DropVerdict = resources.length > 0 ? combineVerdicts(resources.map((r) => r.verdict)) : 'Unknown';
    return {
      groupVersion,
      verdict,
      exitCode: dropExitCode(verdict),
      resources,
      requestsWindowSeconds: target.windowSeconds,
      checked: checked || 'nothing',
      notes,
      at: new Date(now()).toISOString(),
    };
  } finally {
    ownSource?.close();
  }
}

/** The input checked (a refusal throws DropInputError before anything is read) and split. */
function dropTarget(groupVersion: string, requestsWindowSeconds: number | undefined): DropTarget {
  const refusal = groupVersionRefusal(groupVersion);
  if (refusal) throw new DropInputError(refusal);
  const windowSeconds = requestsWindowSeconds ?? DEFAULT_REQUESTS_WINDOW_SECONDS;
  if (!Number.isInteger(windowSeconds) || windowSeconds < 0 || windowSeconds > 3600)
    throw new DropInputError(`the requests window must be a whole number of seconds from 0 to 3600, got ${windowSeconds}`);
  const slash = groupVersion.indexOf('/');
  return { groupVersion, group: groupVersion.slice(0, slash), version: groupVersion.slice(slash + 1), windowSeconds };
}

/**
 * Every check of one resource but requests. Each is judged through another version of the resource than the one to
 * drop where one is served (listed metadata only: a request at the version itself would count as a client of it).
 */
async function checkResource(
  kube: KubeClient,
  g: GroupReading,
  target: DropTarget,
  name: string,
  opts: DropCheckOptions,
): Promise<ResourceFindings> {
  const { group, version, groupVersion } = target;
  const key = groupResourceString({ group, resource: name });
  const crd = g.crdOf.get(name);
  const entries = g.discovered.filter((r) => r.group === group && r.name === name);
  const at = entries.find((r) => r.version === version);
  const other = entries.find((r) => r.version !== version && r.preferred) ?? entries.find((r) => r.version !== version);
  const viaEntry = other ?? at;
  const agreement = viaEntry && g.agreementOf(viaEntry);
  const storageVersion = agreement && storageApiVersion(agreement, group, crd !== undefined);
  const storedCheck = crd && storedVersionsCheck(crd, version, key);
  const servedHash = agreement?.agreed ? (agreement.hash ?? viaEntry?.storageVersionHash) : undefined;
  const lookup = await lookUpRecord(
    { group, resource: name },
    placedId(migrationWorkflowId({ group, resource: name }), opts.cluster),
    opts.migrationOf,
  );
  const migration = migrationCheck(target, key, { storageVersion, state: g.stateOf(name), servedHash, storedCheck, agreement }, lookup);
  const managedFields = await managedFieldsFinding(kube, target, name, key, other, opts.heartbeat ?? (() => undefined));
  const storageVersionFinding: DropCheck = agreement
    ? storageVersionCheck(groupVersion, agreement, storageVersion)
    : { check: 'storageVersion', verdict: 'Unknown', reason: `no version of ${key} is served` };
  return {
    name,
    key,
    kind: at?.kind || other?.kind,
    crd,
    storageVersion,
    agreement,
    servedAt: at !== undefined,
    servedVersions: entries.map((r) => r.version).sort(),
    checks: [storageVersionFinding, migration, ...(storedCheck ? [storedCheck] : []), managedFields.check],
    ...(crd ? { conversion: await conversionWebhookFinding(kube, target, crd, managedFields) } : {}),
    managedFields,
  };
}

/**
 * The resource as the report has it: its checks with requests (each server's figures from the two readings) after
 * managedFields, and their verdict together.
 */
function dropResource(
  f: ResourceFindings,
  target: DropTarget,
  g: Pick<GroupReading, 'found' | 'aggregation'>,
  readings: WindowReadings,
): DropResource {
  const { requests, check } = requestsFinding(f, target, g, readings);
  const checks = [...f.checks, check, ...(f.conversion ? [f.conversion] : [])];
  return {
    resource: f.key,
    ...(f.kind ? { kind: f.kind } : {}),
    custom: f.crd !== undefined,
    verdict: combineVerdicts(checks.map((c) => c.verdict)),
    ...(f.storageVersion ? { storageVersion: f.storageVersion } : {}),
    objects: f.managedFields.objects,
    managedFieldsNaming: f.managedFields.naming,
    ...(f.managedFields.managers ? { managers: f.managedFields.managers } : {}),
    requests,
    checks,
  };
}
