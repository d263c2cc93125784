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
 *                      StorageState (kept by `svm trigger`, refined by a
 *                      successful migration) holds only the agreed hash; for
 *                      a CRD without one, storedVersions is the record; the
 *                      resource's migration workflow is not running (when a
 *                      Temporal client is at hand, its last outcome is named);
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
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import { CustomResourceDefinition } from '../api/custom-resource-definition';
import { StorageState } from '../api/migration';
import { groupResourceString, migrationWorkflowId } from '../api/resource';
import { StorageVersion } from '../api/storage-version';
import {
  combineVerdicts,
  DEFAULT_REQUESTS_WINDOW_SECONDS,
  dropExitCode,
  groupVersionRefusal,
  type DropCheck,
  type DropReport,
  type DropResource,
  type DropServerRequests,
  type DropVerdict,
  unseenClients,
} from '../contract/drop';
import type { Agreement } from './agreement';
import { kubernetesEndpoints, type ApiServers, type ApiServerSource } from './apiservers';
import { readMetrics, requestCounts } from './apiserver-metrics';
import type { DiscoveredResource, KubeClient } from './client';
import { CRDS_PATH } from './crds';
import { KubeError } from './errors';
import { countManagedFieldsAt, type ManagedFieldsCount } from './managed-fields';
import { sleep } from './rate-limit';
import { STORAGE_VERSIONS_PATH } from './storage-versions';
import { listAllIfServed, MalformedObjectError, parseAs } from './typed';
import { agreementReader } from './server-agreements';
import { storageStatePath, storageStateReason } from './storage-states';

/** A refused input (a malformed group version): nothing was read. */
export class DropInputError extends Error {
  override name = 'DropInputError';
}

/** The last migration workflow of a resource, as Temporal describes it. */
export interface MigrationRecord {
  workflowId: string;
  /** RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT, CONTINUED_AS_NEW. */
  status: string;
  /** The result's phase, for a completed run. */
  phase?: string;
  closeTime?: string;
}

export interface DropCheckOptions {
  /** Seconds between the two readings of each server's request counters (default 30; 0: one reading, any request since start counts). */
  requestsWindowSeconds?: number;
  /** Where the API servers are found; default: the `kubernetes` EndpointSlice and identity leases, as the worker does. */
  apiservers?: ApiServerSource;
  /** The resource's migration workflow, where a Temporal client is at hand (the worker's activity; the CLI with TEMPORAL_ADDRESS). */
  migrationOf?: (workflowId: string) => Promise<MigrationRecord | undefined>;
  /** Called while objects are listed and the window runs (an activity heartbeats). */
  heartbeat?: (what: string) => void;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const SINCE = (n: number) => `${n} since the server started`;
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const why = (err: unknown) =>
  err instanceof KubeError && err.kind === 'forbidden' ? `forbidden (${err.message})` : err instanceof Error ? err.message : String(err);

interface MetricsReading {
  id: string;
  text?: string;
  error?: string;
}

async function readEach(found: ApiServers): Promise<MetricsReading[]> {
  return Promise.all(
    found.endpoints.map(async (e): Promise<MetricsReading> => {
      try {
        return { id: e.id, text: await readMetrics(e.kube) };
      } catch (err) {
        const forbidden = err instanceof KubeError && err.kind === 'forbidden';
        return {
          id: e.id,
          error: forbidden
            ? 'may not read /metrics (it needs get on the non-resource URL /metrics; docs/usage.md)'
            : `could not read /metrics: ${why(err)}`,
        };
      }
    }),
  );
}

/** One server's request figures, unknown for the reason given. */
const unknownRequests = (server: string, reason: string): DropServerRequests => ({
  server,
  verdict: 'Unknown',
  requestsInWindow: null,
  requestsSinceStart: null,
  open: null,
  reason,
});

/** One server's request figures for one resource at the version (pure). */
export function serverRequests(
  id: string,
  gvr: { group: string; version: string; resource: string },
  first: MetricsReading | undefined,
  last: MetricsReading,
  windowSeconds: number,
): DropServerRequests {
  const unknown = (reason: string) => unknownRequests(id, reason);
  if (last.text === undefined) return unknown(last.error ?? 'no answer');
  const end = requestCounts(last.text, gvr);
  const deprecated = end.deprecatedRemovedRelease !== undefined ? { deprecatedRemovedRelease: end.deprecatedRemovedRelease } : {};
  if (windowSeconds === 0) {
    return {
      server: id,
      verdict: end.requests > 0 || end.open > 0 ? 'NotYet' : 'Ready',
      requestsInWindow: null,
      requestsSinceStart: end.requests,
      open: end.open,
      ...deprecated,
    };
  }
  if (first?.text === undefined) return unknown(first?.error ?? 'not read at the start of the window');
  const start = requestCounts(first.text, gvr);
  const inWindow = end.requests - start.requests;
  if (inWindow < 0) return unknown('its counters went back during the window (the server restarted)');
  return {
    server: id,
    verdict: inWindow > 0 || end.open > 0 ? 'NotYet' : 'Ready',
    requestsInWindow: inWindow,
    requestsSinceStart: end.requests,
    open: end.open,
    ...deprecated,
  };
}

/** The requests check over every server (pure). */
export function requestsCheck(
  gv: string,
  servers: DropServerRequests[],
  windowSeconds: number,
  found: Pick<ApiServers, 'endpoints' | 'endpointsNote' | 'identities' | 'identitiesNote'>,
): DropCheck {
  if (servers.length === 0)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason: `the API servers could not be asked one by one (${found.endpointsNote ?? 'no address'}): a request at ${gv} to any of them would go unseen`,
    };
  const span = windowSeconds > 0 ? `in ${windowSeconds}s` : 'since it started';
  const described = servers.map((s) => {
    if (s.verdict === 'Unknown') return `${s.server}: ${s.reason}`;
    const parts = [
      windowSeconds > 0 ? `${plural(s.requestsInWindow!, 'request')} ${span}` : `${plural(s.requestsSinceStart!, 'request')} ${span}`,
      ...(s.open! > 0 ? [`${s.open} open now (watches)`] : []),
      ...(windowSeconds > 0 ? [SINCE(s.requestsSinceStart!)] : []),
      ...(s.deprecatedRemovedRelease !== undefined
        ? [`requested as a deprecated API${s.deprecatedRemovedRelease ? ` removed in ${s.deprecatedRemovedRelease}` : ''}`]
        : []),
    ];
    return `${s.server}: ${parts.join(', ')}`;
  });
  let verdict = combineVerdicts(servers.map((s) => s.verdict));
  const notes: string[] = [];
  if (found.identities && found.identities.length > servers.length) {
    if (verdict === 'Ready') verdict = 'Unknown';
    notes.push(`${plural(found.identities.length, 'identity lease')} but ${plural(servers.length, 'address', 'addresses')} to ask`);
  } else if (!found.identities) {
    if (verdict === 'Ready') verdict = 'Unknown';
    notes.push(`how many API servers exist is unknown (${found.identitiesNote ?? 'identity leases not read'})`);
  }
  const lead =
    verdict === 'NotYet'
      ? `clients still use ${gv}`
      : verdict === 'Ready'
        ? `no client used ${gv} ${windowSeconds > 0 ? `in the last ${windowSeconds}s` : 'since the servers started'}`
        : `requests at ${gv} could not be counted on every API server`;
  const unseen = verdict === 'Ready' ? [unseenClients(windowSeconds)] : [];
  return { check: 'requests', verdict, reason: `${lead}: ${[...described, ...notes, ...unseen].join('; ')}` };
}

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

/** The managedFields check from a count (pure). */
export function managedFieldsCheck(gv: string, version: string, count: ManagedFieldsCount, resource?: string): DropCheck {
  if (count.naming === 0)
    return {
      check: 'managedFields',
      verdict: 'Ready',
      reason: `none of ${plural(count.objects, 'object')} has a managedFields entry at ${gv}`,
    };
  const rename = resource ? ` or svm managed-fields ${resource} --from ${gv} renames them` : '';
  return {
    check: 'managedFields',
    verdict: 'NotYet',
    reason:
      `${count.naming} of ${plural(count.objects, 'object')} have managedFields entries at ${gv} (managers: ${count.managers.join(', ')}): ` +
      `server-side apply on them fails once ${version} is no longer served, until each manager applies at another version${rename}`,
  };
}

const NOT_SERVED_GROUP = (group: string) => `no API group ${group} is served and no CustomResourceDefinition names it`;

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
    const firstReading = target.windowSeconds > 0 && names.length > 0 ? await readEach(reading.found) : [];
    const windowEnd = now() + target.windowSeconds * 1000;
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
    const resources = findings.map((f) => dropResource(f, target, reading, { first: firstReading, last: lastReading }));
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

/** The group version asked about, and the requests window. */
interface DropTarget {
  groupVersion: string;
  group: string;
  version: string;
  windowSeconds: number;
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

/** What the check reads once for the whole group. */
interface GroupReading {
  discovered: DiscoveredResource[];
  /** The group's CustomResourceDefinitions, by plural. */
  crdOf: Map<string, CustomResourceDefinition>;
  /** The StorageState of one of the group's resources (its plural). */
  stateOf: (resource: string) => StorageState | undefined;
  found: ApiServers;
  agreementOf: (r: DiscoveredResource) => Agreement;
  /** Whether an aggregated API serves the group version. */
  aggregation: Aggregation;
}

/** Discovery, CRDs, StorageStates, StorageVersions and the API servers, read at once; then the agreement reader over them. */
async function readGroup(
  kube: KubeClient,
  source: ApiServerSource,
  target: DropTarget,
  now: () => number,
  notes: string[],
): Promise<GroupReading> {
  const { group } = target;
  const [discovered, crdList, stateList, storageVersions, found, aggregation] = await Promise.all([
    kube.discover(),
    listAllIfServed(kube, CRDS_PATH, 'CustomResourceDefinition'),
    listAllIfServed(kube, storageStatePath(), 'StorageState'),
    listAllIfServed(kube, STORAGE_VERSIONS_PATH, 'StorageVersion').then((l) =>
      l?.map((v) => parseAs(StorageVersion, v, { kind: 'StorageVersion' })),
    ),
    source.find(),
    aggregationOf(kube, target),
  ]);
  const crds = (crdList ?? []).map((c) => parseAs(CustomResourceDefinition, c, { kind: 'CustomResourceDefinition' }));
  const states = storageStates(stateList, notes);
  const agreementOf = await agreementReader(kube, { discovered, crds, storageVersions, found, now });
  const stateOf = (name: string) =>
    states.find((s) => {
      const gr = s.spec?.resource;
      return gr ? (gr.group ?? '') === group && gr.resource === name : s.metadata.name === groupResourceString({ group, resource: name });
    });
  const crdOf = new Map(crds.filter((c) => c.spec.group === group).map((c) => [c.spec.names.plural, c]));
  return { discovered, crdOf, stateOf, found, agreementOf, aggregation };
}

const APISERVICES_PATH = '/apis/apiregistration.k8s.io/v1/apiservices';

/** The parts of an apiregistration.k8s.io/v1 APIService read here: its spec.service, set where an aggregated API serves it. */
const ApiService = z
  .object({
    metadata: z.object({ name: z.string() }).loose(),
    spec: z
      .object({ service: z.object({ namespace: z.string().optional(), name: z.string().optional() }).loose().nullish() })
      .loose()
      .optional(),
  })
  .loose();

/** Whether kube-apiserver serves a group version itself or proxies it to an aggregated API. */
interface Aggregation {
  /** The APIService's service (namespace/name), where an aggregated API serves the group version. */
  service?: string;
  /** Why that could not be read. */
  unreadable?: string;
}

/** The group version's APIService (named <version>.<group>), listed by name: the worker may list APIServices, not get them. */
async function aggregationOf(kube: KubeClient, { group, version }: DropTarget): Promise<Aggregation> {
  const name = `${version}.${group}`;
  try {
    const items = await listAllIfServed(kube, APISERVICES_PATH, 'APIService', { fieldSelector: `metadata.name=${name}` });
    const service = (items ?? []).map((i) => parseAs(ApiService, i, { kind: 'APIService' })).find((a) => a.metadata.name === name)
      ?.spec?.service;
    return service ? { service: `${service.namespace ?? '?'}/${service.name ?? '?'}` } : {};
  } catch (err) {
    if (!(err instanceof KubeError) && !(err instanceof MalformedObjectError)) throw err;
    return { unreadable: `APIService ${name} could not be listed: ${why(err)}` };
  }
}

/** The StorageStates that parse; a malformed one is skipped, and each skip said in notes, as are StorageStates not served. */
function storageStates(list: unknown[] | undefined, notes: string[]): StorageState[] {
  const states: StorageState[] = [];
  for (const [i, raw] of (list ?? []).entries()) {
    try {
      states.push(parseAs(StorageState, raw, { kind: 'StorageState', name: `(list item ${i})` }));
    } catch (err) {
      if (!(err instanceof MalformedObjectError)) throw err;
      notes.push(`skipped: ${err.message}`);
    }
  }
  if (!list) notes.push('StorageStates are not served (the migration.k8s.io CRDs are not installed)');
  return states;
}

/**
 * The resources to check, by plural, sorted: what is served at the version; the CRDs of the group that still name
 * it (served or not); and every built-in resource of the group, served at the version or not: a release may store
 * a version it no longer serves by default, and objects written before an upgrade stay in the old version in etcd
 * until a migration (their StorageState says so; without one, nothing does). A DropInputError when the group is
 * neither served nor named by a CRD.
 */
function resourcesToCheck(g: GroupReading, { group, version }: DropTarget): string[] {
  const topLevel = topLevelOf(g, group);
  const names = new Set(topLevel.filter((r) => r.version === version).map((r) => r.name));
  for (const [plural, c] of g.crdOf) if (c.spec.versions.some((v) => v.name === version)) names.add(plural);
  for (const r of topLevel) if (r.preferred && r.storageVersionHash && !g.crdOf.has(r.name)) names.add(r.name);
  if (names.size === 0 && !g.discovered.some((r) => r.group === group) && g.crdOf.size === 0)
    throw new DropInputError(NOT_SERVED_GROUP(group));
  return [...names].sort();
}

/** The group's top-level resources in discovery (no subresources), one entry per version serving each. */
const topLevelOf = (g: GroupReading, group: string) => g.discovered.filter((r) => r.group === group && !r.name.includes('/'));

/**
 * The note of a group version no resource is served at: what the group serves instead, and with no resource to check
 * at all (no CRD names the version, no built-in resource may be stored in it), why the report is Unknown.
 */
function unservedNote(g: GroupReading, { groupVersion, group, version }: DropTarget, resources: number): string | undefined {
  const topLevel = topLevelOf(g, group);
  if (topLevel.some((r) => r.version === version)) return undefined;
  const byVersion = new Map<string, string[]>();
  for (const r of topLevel) (byVersion.get(r.version) ?? byVersion.set(r.version, []).get(r.version)!).push(r.name);
  const served =
    byVersion.size > 0
      ? `${group} serves ${[...byVersion].map(([v, names]) => `${v} (${names.sort().join(', ')})`).join(', ')}`
      : `${group} serves no resource`;
  if (g.aggregation.service)
    return `discovery lists nothing at ${groupVersion}, whose APIService names the aggregated API ${g.aggregation.service}: its discovery did not answer (${served})`;
  if (resources > 0) return `nothing serves ${groupVersion}: ${served}`;
  return (
    `nothing serves ${groupVersion} and no CustomResourceDefinition names ${version}: ${served}. There is nothing to ` +
    'check: a version already removed from every CRD has nothing left to drop, a misspelt one was never checked'
  );
}

/** One resource's findings: every check but requests (read once the window has passed), and what the resource reports. */
interface ResourceFindings {
  name: string;
  key: string;
  kind?: string;
  crd?: CustomResourceDefinition;
  storageVersion?: string;
  /** The agreement the storageVersion check read, when a version of the resource is served. */
  agreement?: Agreement;
  /** Discovery lists the resource at the version to drop. */
  servedAt: boolean;
  /** The versions discovery lists the resource at. */
  servedVersions: string[];
  /** storageVersion, migration, storedVersions (a CRD), managedFields: the checks before requests. */
  checks: DropCheck[];
  /** A CRD's conversionWebhook check, after requests. */
  conversion?: DropCheck;
  managedFields: ManagedFieldsFinding;
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
  let migration = migrationCheck(target, key, { storageVersion, state: g.stateOf(name), servedHash, storedCheck });
  if (opts.migrationOf)
    migration = await withMigrationWorkflow(migration, migrationWorkflowId({ group, resource: name }), opts.migrationOf);
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
 * The agreed storage version as <group>/<version>, where the agreement names one: a CRD's agreed encodingVersion
 * (a version of its group), a built-in resource's encodingVersion unless that is only the discovery hash (a
 * StorageVersion's carries its group).
 */
function storageApiVersion(a: Agreement, group: string, custom: boolean): string | undefined {
  if (custom) return a.agreed && a.encodingVersion ? `${group}/${a.encodingVersion}` : undefined;
  if (!a.encodingVersion || a.encodingVersion === a.hash) return undefined;
  return a.encodingVersion.includes('/') ? a.encodingVersion : `${group}/${a.encodingVersion}`;
}

/** The storedVersions check of a CRD: its status.storedVersions no longer names the version. */
function storedVersionsCheck(crd: CustomResourceDefinition, version: string, key: string): DropCheck {
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
function migrationCheck(
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
async function withMigrationWorkflow(
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

/** The managedFields check, and the counts the resource reports (null where the objects could not be listed). */
interface ManagedFieldsFinding {
  check: DropCheck;
  objects: number | null;
  naming: number | null;
  managers?: string[];
  /** The version the objects were listed at, and the list's error: a conversion webhook's probe too. */
  listedAt?: string;
  listError?: KubeError;
}

/** Every object's metadata, listed through `other` (another version than the one to drop), counted by its managedFields. */
async function managedFieldsFinding(
  kube: KubeClient,
  { group, version, groupVersion }: DropTarget,
  name: string,
  key: string,
  other: DiscoveredResource | undefined,
  heartbeat: (what: string) => void,
): Promise<ManagedFieldsFinding> {
  const unknown = (reason: string): ManagedFieldsFinding => ({
    check: { check: 'managedFields', verdict: 'Unknown', reason },
    objects: null,
    naming: null,
  });
  if (!other)
    return unknown(`no other version of ${key} is served to list it through (a list at ${version} would itself be a request at it)`);
  try {
    const count = await countManagedFieldsAt(kube, { group, version: other.version, resource: name, kind: other.kind }, groupVersion, (n) =>
      heartbeat(`${key}: ${n} objects listed`),
    );
    return {
      check: managedFieldsCheck(groupVersion, version, count, key),
      objects: count.objects,
      naming: count.naming,
      ...(count.managers.length > 0 ? { managers: count.managers } : {}),
      listedAt: other.version,
    };
  } catch (err) {
    if (!(err instanceof KubeError)) throw err;
    return { ...unknown(`could not list ${key} (metadata only): ${why(err)}`), listedAt: other.version, listError: err };
  }
}

/** A CRD's conversion webhook client config, where its strategy is Webhook. */
function conversionWebhookOf(crd: CustomResourceDefinition): WebhookClientConfig | undefined {
  const conversion = (crd.spec as { conversion?: { strategy?: string; webhook?: { clientConfig?: WebhookClientConfig } } }).conversion;
  return conversion?.strategy === 'Webhook' ? (conversion.webhook?.clientConfig ?? {}) : undefined;
}

/** One metadata-only list that probed a conversion webhook: the version it was asked at, and its error. */
interface ConversionProbe {
  version: string;
  error?: KubeError;
}

/**
 * The conversionWebhook check of a CRD, from lists at each of its served versions but the one to drop: the
 * managedFields list (every object) where it read that version, else a list of one object, metadata only.
 *
 * Note: a list converts only the objects stored at another version than the one it asks for, and may be served
 * from a watch cache filled while the webhook worked; no list is asked at the version to drop (it would count as a
 * client of it). So a working answer is what clients see now, not a proof the webhook converts every object.
 */
async function conversionWebhookFinding(
  kube: KubeClient,
  { group, version }: DropTarget,
  crd: CustomResourceDefinition,
  listed: ManagedFieldsFinding,
): Promise<DropCheck> {
  if (!conversionWebhookOf(crd)) return conversionWebhookCheck(crd, version, []);
  const ref = { group, resource: crd.spec.names.plural, kind: crd.spec.names.kind };
  const versions = crd.spec.versions.filter((v) => v.served && v.name !== version).map((v) => v.name);
  const probes = await Promise.all(
    versions.map(async (v): Promise<ConversionProbe> => {
      if (v === listed.listedAt) return { version: v, ...(listed.listError ? { error: listed.listError } : {}) };
      try {
        await kube.listEach({ ...ref, version: v }, { limit: 1 }, () => undefined);
        return { version: v };
      } catch (err) {
        if (!(err instanceof KubeError)) throw err;
        return { version: v, error: err };
      }
    }),
  );
  return conversionWebhookCheck(crd, version, probes);
}

/** The conversionWebhook check from the probes (pure): NotYet where a list failed to convert, Unknown where one failed otherwise. */
function conversionWebhookCheck(crd: CustomResourceDefinition, version: string, probes: ConversionProbe[]): DropCheck {
  const webhook = conversionWebhookOf(crd);
  if (!webhook) return { check: 'conversionWebhook', verdict: 'Ready', reason: 'no conversion webhook (strategy None)' };
  const at = (p: ConversionProbe) => `${crd.spec.group}/${p.version}`;
  const converted = `converted by the webhook at ${webhookWhere(webhook)}`;
  const keep = `it has to keep converting ${version} until ${version} is removed from the CRD; remove it there first, then from the webhook`;
  const failed = probes.find((p) => p.error?.info.conversionFailed);
  if (failed)
    return {
      check: 'conversionWebhook',
      verdict: 'NotYet',
      reason:
        `${converted}, which fails: a metadata-only list at ${at(failed)} failed (${failed.error!.message}); until it converts ` +
        `again, objects stored at another version cannot be read or migrated, and ${keep}`,
    };
  const unprobed = probes.find((p) => p.error);
  if (unprobed)
    return {
      check: 'conversionWebhook',
      verdict: 'Unknown',
      reason: `${converted}, which could not be probed: a metadata-only list at ${at(unprobed)} failed (${why(unprobed.error)})`,
    };
  if (probes.length === 0)
    return {
      check: 'conversionWebhook',
      verdict: 'Unknown',
      reason: `${converted}, which could not be probed: no version but ${version} is served (a list at ${version} would itself be a request at it)`,
    };
  return {
    check: 'conversionWebhook',
    verdict: 'Ready',
    reason:
      `${converted}; metadata-only lists at ${probes.map(at).join(', ')} answered (each converts what is stored at another version; ` +
      `none is asked at ${version}, which would count as a client of it): ${keep}`,
  };
}

/** Every server's /metrics once windowEnd has passed: waits for it, heartbeating every 5 s with the seconds left. */
async function readAfterWindow(
  found: ApiServers,
  windowEnd: number,
  now: () => number,
  opts: Pick<DropCheckOptions, 'sleep' | 'heartbeat'>,
): Promise<MetricsReading[]> {
  const heartbeat = opts.heartbeat ?? (() => undefined);
  for (let left = windowEnd - now(); left > 0; left -= 5000) {
    heartbeat(`watching request counters: ${Math.ceil(left / 1000)}s left`);
    await (opts.sleep ?? sleep)(Math.min(left, 5000));
  }
  return readEach(found);
}

/**
 * The resource as the report has it: its checks with requests (each server's figures from the two readings) after
 * managedFields, and their verdict together.
 */
function dropResource(
  f: ResourceFindings,
  target: DropTarget,
  g: Pick<GroupReading, 'found' | 'aggregation'>,
  readings: { first: MetricsReading[]; last: MetricsReading[] },
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

/**
 * The requests check of one resource and each server's figures: counted from the two readings, unless an
 * aggregated API serves the version (kube-apiserver does not count what it proxies) or discovery does not list the
 * resource at it.
 */
function requestsFinding(
  f: ResourceFindings,
  { groupVersion, group, version, windowSeconds }: DropTarget,
  { found, aggregation }: Pick<GroupReading, 'found' | 'aggregation'>,
  readings: { first: MetricsReading[]; last: MetricsReading[] },
): { requests: DropServerRequests[]; check: DropCheck } {
  // Note: an aggregated API whose discovery does not answer serves the version all the same.
  const proxied = proxiedRequestsCheck(groupVersion, f.servedAt ? aggregation : { service: aggregation.service });
  if (proxied)
    return {
      requests: readings.last.map((r) =>
        unknownRequests(r.id, 'kube-apiserver does not count the requests it proxies to an aggregated API'),
      ),
      check: proxied,
    };
  const gvr = { group, version, resource: f.name };
  const requests = readings.last.map((last) =>
    serverRequests(
      last.id,
      gvr,
      readings.first.find((r) => r.id === last.id),
      last,
      windowSeconds,
    ),
  );
  const counted = requestsCheck(groupVersion, requests, windowSeconds, found);
  return { requests, check: f.servedAt ? counted : unservedRequestsCheck(groupVersion, f, counted) };
}

/**
 * The requests check of a group version an aggregated API serves, or may serve (its APIService unread): Unknown,
 * since kube-apiserver counts none of the requests it proxies; undefined where kube-apiserver serves it itself (pure).
 */
function proxiedRequestsCheck(gv: string, a: Aggregation): DropCheck | undefined {
  const why = 'kube-apiserver does not count the requests it proxies to an aggregated API, so its /metrics cannot show who still uses';
  if (a.service)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason: `${gv} is served by the aggregated API ${a.service}: ${why} it (the aggregated API's own metrics or logs can)`,
    };
  if (a.unreadable)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason: `whether an aggregated API serves ${gv} is unknown (${a.unreadable}): ${why} such a version`,
    };
  return undefined;
}

/**
 * The requests check of a resource discovery does not list at the version (a built-in resource stored there before an
 * upgrade, a CRD version with served: false, a storage version no longer served): no client can use it there. Unknown
 * where a built-in resource neither served nor stored at the version is served at a version other than its storage
 * version: the version asked may misspell that one, whose clients were not counted. A check the counters made NotYet
 * or Unknown is kept (pure).
 */
function unservedRequestsCheck(
  gv: string,
  f: Pick<ResourceFindings, 'key' | 'crd' | 'storageVersion' | 'servedVersions'>,
  counted: DropCheck,
): DropCheck {
  if (counted.verdict !== 'Ready') return counted;
  const group = gv.slice(0, gv.indexOf('/'));
  const served = f.servedVersions.map((v) => `${group}/${v}`);
  const lead = `discovery does not list ${f.key} at ${gv}`;
  if (f.crd) return { ...counted, reason: `${lead} (its CRD does not serve it): no client can use it there` };
  if (f.storageVersion === gv)
    return { ...counted, reason: `${lead}, its storage version (it is served at ${served.join(', ')}): no client can use it there` };
  const others = served.filter((v) => v !== f.storageVersion);
  const storage = f.storageVersion ? `its storage version ${f.storageVersion}` : 'its storage version, which is unknown';
  if (others.length > 0)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason:
        `${lead} but at ${others.join(', ')}, not ${storage}: if ${gv} misspells one of those, its clients were not ` +
        'counted (check that version instead)',
    };
  return {
    ...counted,
    reason: `${lead}, only at ${served.join(', ') || 'no version'} (${storage}): no client can use ${gv} for it`,
  };
}

interface WebhookClientConfig {
  url?: string;
  service?: { namespace?: string; name?: string; path?: string; port?: number };
}

function webhookWhere(c: WebhookClientConfig | undefined): string {
  if (c?.url) {
    try {
      const u = new URL(c.url);
      return `${u.host}${u.pathname}`;
    } catch {
      return 'a URL';
    }
  }
  if (c?.service) return `service ${c.service.namespace ?? '?'}/${c.service.name ?? '?'}:${c.service.port ?? 443}${c.service.path ?? ''}`;
  return '(no client config)';
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
