/**
 * `svm plan`: what must be migrated before the next upgrade step can go on?
 * A read: nothing is written, no migration is started.
 *
 * A resource is listed when
 *   - its CustomResourceDefinition's status.storedVersions holds a version
 *     other than its storage version (objects may still be stored in it, and
 *     the old version cannot be removed before a migration prunes the list);
 *   - its StorageState (kept by `svm trigger`) says objects may be persisted
 *     in more than one version, or in one nobody knows ("Unknown"), or in
 *     another than the one the API servers serve now;
 *   - its API servers disagree on its storage version (a rolling upgrade is
 *     under way): this blocks, since a migration now would be polluted.
 *
 * Agreement follows the worker's own rules (src/kube/agreement.ts) over the
 * same inputs: every API server's discovery asked at its own address (the
 * `kubernetes` EndpointSlice, src/kube/apiservers.ts), the identity leases,
 * and StorageVersion objects where that API is served.
 *
 * Each listed resource gets an object count from one list with limit=1
 * (metadata.remainingItemCount + the items returned; unknown when the server
 * omits remainingItemCount) and an estimate at a QPS budget (the worker's
 * default, SVM_QPS=100 updates/s; migrations share one budget, so the
 * estimates add up).
 *
 * Verdict and exit code: 0 nothing to migrate, 1 migrations needed (all can
 * run now), 2 something blocks. The CLI uses 3 for an error.
 */
import { groupResourceString, collectionPath, migrationWorkflowId } from '../api/resource';
import { StorageState } from '../api/migration';
import { CustomResourceDefinition } from '../api/custom-resource-definition';
import { StorageVersion } from '../api/storage-version';
import type { Agreement } from './agreement';
import { kubernetesEndpoints, type ApiServerSource } from './apiservers';
import type { DiscoveredResource, KubeClient, KubeResponse } from './client';
import { METADATA_ONLY_LIST_ACCEPT, parseJson } from './client';
import { CRDS_PATH } from './crds';
import { needsGrant } from './migratable';
import { KubeError } from './errors';
import { storageStatePath, storageStateReason, UNKNOWN_HASH } from './storage-states';
import { agreementReader } from './server-agreements';
import { STORAGE_VERSIONS_PATH } from './storage-versions';
import { listAllIfServed, MalformedObjectError, parseAs } from './typed';
import { notMigratableReason } from './resolve';
import { lookUpRecord, unbackedReason } from './drop-storage';
import type { DropCheckOptions } from './drop-shared';
import { migratableResources } from './migratable';
import { placedId } from '../contract/placement';
import { DEFAULT_PLAN_QPS, type Plan, type PlanExitCode, type PlanItem, type PlanVerdict } from '../contract/plan';
import { compareStrings } from '../api/order';
import { workerNotes } from './credential-exposure';

export { DEFAULT_PLAN_QPS, PLAN_ERROR_EXIT_CODE } from '../contract/plan';
export { storageStateReason };
export type { Plan, PlanExitCode, PlanItem, PlanSource, PlanVerdict } from '../contract/plan';

export interface PlanOptions {
  /** Updates per second the estimates assume (default 100, the worker's SVM_QPS default; 0: no estimates). */
  qps?: number;
  /** Where the API servers are found; default: the `kubernetes` EndpointSlice and identity leases, as the worker does. */
  apiservers?: ApiServerSource;
  /**
   * The resources' migration workflows in Temporal (migrationRecords over a client): a StorageState saying every
   * object is stored in the served hash counts only where a whole pass at that hash is on record there, since the
   * worker's token can write StorageStates. Without it, such StorageStates are believed, and a note says so.
   */
  migrationOf?: DropCheckOptions['migrationOf'];
  /** The cluster whose migration workflows migrationOf reads, when one Temporal namespace serves several. */
  cluster?: string;
  now?: () => number;
}

// ---------------------------------------------------------------- pure rules

export interface CrdInfo {
  metadata: { name: string; generation?: number };
  spec: { group: string; names: { plural: string; kind: string }; versions: Array<{ name: string; served?: boolean; storage?: boolean }> };
  status?: { storedVersions?: string[] };
}

/** The storage version of a CRD and whether its storedVersions hold any other. */
export function crdStoredVersionsLeft(crd: CrdInfo): { storageVersion?: string; storedVersions: string[]; left: string[] } {
  const storageVersion = crd.spec.versions.find((v) => v.storage)?.name;
  const storedVersions = crd.status?.storedVersions ?? [];
  return { storageVersion, storedVersions, left: storedVersions.filter((v) => v !== storageVersion) };
}

/**
 * The object count from a list with limit=1: exact when the list is complete
 * (no continue token), items + remainingItemCount when the server gives it,
 * unknown otherwise (servers omit it, e.g. some aggregated APIs).
 */
export function countFromFirstPage(page: { items?: unknown[]; metadata?: { continue?: string; remainingItemCount?: number } }): {
  objects: number | null;
  note?: string;
} {
  const n = page.items?.length ?? 0;
  if (!page.metadata?.continue) return { objects: n };
  if (typeof page.metadata.remainingItemCount === 'number') return { objects: n + page.metadata.remainingItemCount };
  return { objects: null, note: 'the API server gave no remainingItemCount' };
}

/** Seconds to migrate objects at qps (0: unlimited, no estimate). */
export function estimateSeconds(objects: number | null, qps: number): number | null {
  if (objects === null || !(qps > 0)) return null;
  return objects / qps;
}

/** The verdict and exit code of a list of items. */
export function planVerdict(items: Array<Pick<PlanItem, 'action'>>): { verdict: PlanVerdict; exitCode: PlanExitCode } {
  if (items.some((i) => i.action === 'blocked')) return { verdict: 'Blocked', exitCode: 2 };
  if (items.length > 0) return { verdict: 'MigrationsNeeded', exitCode: 1 };
  return { verdict: 'NothingToMigrate', exitCode: 0 };
}

/** Assembles the plan from its items (pure). */
export function finishPlan(items: PlanItem[], qps: number, checked: string, notes: string[]): Plan {
  const sorted = [...items].sort((a, b) =>
    a.action === b.action ? compareStrings(a.resource, b.resource) : a.action === 'blocked' ? -1 : 1,
  );
  const known = sorted.filter((i) => i.objects !== null);
  const objects = known.reduce((n, i) => n + i.objects!, 0);
  return {
    ...planVerdict(sorted),
    qps,
    items: sorted,
    totals: {
      resources: sorted.length,
      blocked: sorted.filter((i) => i.action === 'blocked').length,
      objects,
      objectsUnknown: sorted.length - known.length,
      estimateSeconds: estimateSeconds(objects, qps),
    },
    checked,
    notes,
  };
}

// ---------------------------------------------------------------------- I/O

/** What a resource is listed with before its objects are counted: the reasons of its PlanItem. */
type Candidate = Pick<
  PlanItem,
  'group' | 'name' | 'sources' | 'reasons' | 'blockedBy' | 'storedVersions' | 'storageVersion' | 'persistedStorageVersionHashes'
>;

/**
 * Makes the plan: reads CRDs, StorageStates, every API server's discovery
 * (and StorageVersions where served), then counts the objects of each listed
 * resource; reads svm's worker Deployments for what the plan should say about them (credential-exposure.ts). Only
 * GETs, and access reviews that store nothing: nothing is written.
 */
export async function makePlan(kube: KubeClient, opts: PlanOptions = {}): Promise<Plan> {
  const qps = opts.qps ?? DEFAULT_PLAN_QPS;
  if (!Number.isFinite(qps) || qps < 0) throw new RangeError(`qps must be a number >= 0 (0: unlimited), got ${qps}`);
  const ownSource = opts.apiservers ? undefined : kubernetesEndpoints(kube);
  try {
    const seen = await readCluster(kube, opts.apiservers ?? ownSource!, opts.now ?? Date.now);
    const candidates = new Candidates();
    // 1. CRDs whose storedVersions hold more than their storage version.
    for (const crd of seen.crds) candidates.addStoredVersions(crd);
    // 2. StorageStates that say objects may be stored in another version.
    const settled = storageStateCandidates(seen.states ?? [], {
      served: (group, name) => seen.served(group, name) !== undefined,
      agreedHash: (key) => {
        const a = seen.agreements.get(key);
        return a?.agreed ? a.hash : undefined;
      },
      notes: seen.notes,
      candidate: (group, name) => candidates.get(group, name),
    });
    // 2b. StorageStates saying every object is stored in the served hash: mirrors, believed only on the record.
    await checkSettledStates(settled, opts.migrationOf && { of: opts.migrationOf, cluster: opts.cluster }, seen.notes, (st) =>
      candidates.get(st.group, st.resource),
    );
    // 3. Resources whose API servers disagree.
    for (const [key, a] of seen.agreements) if (!a.agreed) candidates.addDisagreement(seen.byKey.get(key)!, a);
    // What can run now, and what blocks.
    for (const [key, c] of candidates.all()) {
      const blocked = blockedBy(key, seen.served(c.group, c.name), seen.agreements.get(key));
      if (blocked) c.blockedBy = blocked;
    }
    // svm's own workers: a Temporal credential within their token's reach, a prune left to the operator.
    seen.notes.push(...(await workerNotes(kube, { crdsToPrune: candidates.fromStoredVersions() })));
    // Counts: one list with limit=1 per listed resource (a read).
    const items = await Promise.all(
      candidates.all().map(async ([key, c]) => {
        const r = seen.served(c.group, c.name);
        return planItem(key, c, r ? await countObjects(kube, r) : { objects: null, note: 'not served' }, {
          qps,
          custom: seen.crdByResource.has(key),
        });
      }),
    );
    return finishPlan(items, qps, seen.checked || 'no migratable resources', seen.notes);
  } finally {
    ownSource?.close();
  }
}

/** What the plan reads of the cluster, and each migratable resource's agreement, with the notes so far. */
async function readCluster(kube: KubeClient, source: ApiServerSource, now: () => number) {
  const notes: string[] = [];
  const [discovered, crds, states, storageVersions, found] = await Promise.all([
    kube.discover(),
    listAllIfServed(kube, CRDS_PATH, 'CustomResourceDefinition').then((l) =>
      l?.map((c) => parseAs(CustomResourceDefinition, c, { kind: 'CustomResourceDefinition' })),
    ),
    listAllIfServed(kube, storageStatePath(), 'StorageState'),
    listAllIfServed(kube, STORAGE_VERSIONS_PATH, 'StorageVersion').then((l) =>
      l?.map((v) => parseAs(StorageVersion, v, { kind: 'StorageVersion' })),
    ),
    source.find(),
  ]);
  if (!crds) throw new Error('the API server does not serve CustomResourceDefinitions (apiextensions.k8s.io/v1)');
  if (!states)
    notes.push('StorageStates are not served (the migration.k8s.io CRDs are not installed): only CRDs and agreement were checked');
  else if (states.length === 0)
    notes.push('no StorageState objects (`svm trigger start` keeps them): built-in resources were checked for agreement only');

  const agreementOf = await agreementReader(kube, { discovered, crds, storageVersions, found, now });
  const byKey = new Map(migratableResources(discovered).map((r) => [groupResourceString({ group: r.group, resource: r.name }), r]));
  const agreements = new Map<string, Agreement>();
  const unverified = new Set<string>();
  let checked = '';
  for (const [key, r] of byKey) {
    const a = agreementOf(r);
    agreements.set(key, a);
    if (a.agreed && !a.verified) unverified.add(a.checked);
    if (a.source === 'discovery' || !checked) checked = a.checked;
  }
  if (unverified.size > 0) notes.push(`agreement could not be verified per API server for some resources: ${[...unverified].join('; ')}`);
  return {
    crds,
    states,
    notes,
    byKey,
    agreements,
    checked,
    crdByResource: new Map(crds.map((c) => [`${c.spec.names.plural}.${c.spec.group}`, c])),
    /** The resource as the migrator would list it: the version it is stored in, or the preferred served version. */
    served: (group: string, name: string): DiscoveredResource | undefined =>
      byKey.get(groupResourceString({ group, resource: name })) ??
      discovered.find((r) => r.group === group && r.name === name && r.preferred) ??
      discovered.find((r) => r.group === group && r.name === name),
  };
}

/** The resources the plan lists, by group/resource, each with why. */
class Candidates {
  private readonly byKey = new Map<string, Candidate>();

  get(group: string, name: string): Candidate {
    const key = groupResourceString({ group, resource: name });
    let c = this.byKey.get(key);
    if (!c) this.byKey.set(key, (c = { group, name, sources: [], reasons: [] }));
    return c;
  }

  all(): Array<[string, Candidate]> {
    return [...this.byKey.entries()];
  }

  /** A CRD whose storedVersions hold more than its storage version. */
  addStoredVersions(crd: CrdInfo & { spec: { group: string; names: { plural: string } } }): void {
    const { storageVersion, storedVersions, left } = crdStoredVersionsLeft(crd);
    if (left.length === 0) return;
    const c = this.get(crd.spec.group, crd.spec.names.plural);
    c.sources.push('storedVersions');
    c.storedVersions = storedVersions;
    c.storageVersion = storageVersion;
    c.reasons.push(
      `CRD status.storedVersions [${storedVersions.join(', ')}] holds ${left.join(', ')} besides the storage version ${storageVersion ?? '(none)'}`,
    );
  }

  addDisagreement(r: DiscoveredResource, a: Agreement): void {
    const c = this.get(r.group, r.name);
    c.sources.push('disagreement');
    c.reasons.push(a.reason ?? 'the API servers do not agree on its storage version');
  }

  fromStoredVersions(): number {
    return [...this.byKey.values()].filter((c) => c.sources.includes('storedVersions')).length;
  }
}

/** Why a listed resource cannot be migrated now, or undefined when it can. */
function blockedBy(key: string, r: DiscoveredResource | undefined, a: Agreement | undefined): string | undefined {
  if (!r) return `no version of ${key} is served, so its objects cannot be listed`;
  const notMigratable = notMigratableReason(r);
  if (notMigratable) return notMigratable;
  if (a && !a.agreed) return `${a.reason ?? 'the API servers do not agree on its storage version'} (checked: ${a.checked})`;
  return undefined;
}

/**
 * Lists each StorageState that says objects may be stored in another version than the agreed one (or in one
 * nobody knows); answers those saying every object is stored in it (settled: mirrors, checked against the record
 * next). A malformed one, or one naming a resource nothing serves, is noted and left out.
 */
function storageStateCandidates(
  states: unknown[],
  on: {
    served: (group: string, name: string) => boolean;
    agreedHash: (key: string) => string | undefined;
    notes: string[];
    candidate: (group: string, name: string) => Candidate;
  },
): SettledState[] {
  const settled: SettledState[] = [];
  for (const [i, raw] of states.entries()) {
    let st: StorageState;
    try {
      st = parseAs(StorageState, raw, { kind: 'StorageState', name: `(list item ${i})` });
    } catch (err) {
      // One malformed object does not hide the others; the message names its fields, never a value.
      if (!(err instanceof MalformedObjectError)) throw err;
      on.notes.push(`skipped: ${err.message}`);
      continue;
    }
    const gr = st.spec?.resource ?? nameToGroupResource(st.metadata.name);
    const group = gr.group ?? '';
    if (!on.served(group, gr.resource)) {
      on.notes.push(`StorageState ${st.metadata.name} names a resource the API servers do not serve: ignored`);
      continue;
    }
    const persisted = st.status?.persistedStorageVersionHashes;
    const reason = storageStateReason(
      persisted,
      st.status?.currentStorageVersionHash,
      on.agreedHash(groupResourceString({ group, resource: gr.resource })),
    );
    if (!reason) {
      if (persisted?.length === 1) settled.push({ group, resource: gr.resource, hash: persisted[0]! });
      continue;
    }
    const c = on.candidate(group, gr.resource);
    c.sources.push('storageState');
    c.persistedStorageVersionHashes = persisted ?? [UNKNOWN_HASH];
    c.reasons.push(reason);
  }
  return settled;
}

/** A listed resource as the plan reports it, with its count and the estimate at qps. */
function planItem(
  key: string,
  c: Candidate,
  count: { objects: number | null; note?: string },
  o: { qps: number; custom: boolean },
): PlanItem {
  return {
    resource: key,
    group: c.group,
    name: c.name,
    action: c.blockedBy ? 'blocked' : 'migrate',
    sources: c.sources,
    reasons: c.reasons,
    ...(c.blockedBy ? { blockedBy: c.blockedBy } : {}),
    ...(c.storedVersions ? { storedVersions: c.storedVersions, storageVersion: c.storageVersion } : {}),
    ...(c.persistedStorageVersionHashes ? { persistedStorageVersionHashes: c.persistedStorageVersionHashes } : {}),
    objects: count.objects,
    ...(count.note ? { objectsNote: count.note } : {}),
    estimateSeconds: estimateSeconds(count.objects, o.qps),
    ...(needsGrant({ group: c.group, custom: o.custom }) ? { needsGrant: true } : {}),
  };
}

interface SettledState {
  group: string;
  resource: string;
  hash: string;
}

/**
 * Lists each settled StorageState whose migration workflow in Temporal holds no whole pass at its hash (a forged
 * mirror, or one another migrator kept): the trigger migrates such a resource once too. Without Temporal, a note.
 */
async function checkSettledStates(
  settled: SettledState[],
  records: { of: NonNullable<PlanOptions['migrationOf']>; cluster?: string } | undefined,
  notes: string[],
  candidate: (s: SettledState) => Candidate,
): Promise<void> {
  if (settled.length === 0) return;
  if (!records) {
    notes.push(
      `${settled.length} StorageState(s) saying every object is stored in the served version were believed: the migration records in Temporal were not read (set TEMPORAL_ADDRESS)`,
    );
    return;
  }
  const lookups = await Promise.all(
    settled.map(async (s) => ({
      s,
      lookup: await lookUpRecord(
        { group: s.group, resource: s.resource },
        placedId(migrationWorkflowId({ group: s.group, resource: s.resource }), records.cluster),
        records.of,
      ),
    })),
  );
  for (const { s, lookup } of lookups) {
    const why = unbackedReason(lookup, s.hash);
    if (why === undefined) continue;
    const c = candidate(s);
    c.sources.push('noRecord');
    c.persistedStorageVersionHashes = [s.hash];
    c.reasons.push(`StorageState says every object is stored in ${s.hash}, but no whole pass at it is on record: ${why}`);
  }
}

/** A StorageState's name back to group and resource: <resource>.<group>, or <resource> for the core group. */
function nameToGroupResource(name: string): { group: string; resource: string } {
  const dot = name.indexOf('.');
  return dot < 0 ? { group: '', resource: name } : { group: name.slice(dot + 1), resource: name.slice(0, dot) };
}

/**
 * The objects of r from one list of limit 1, asked for as metadata only: the one object listed comes without its
 * content (a Secret's data is never read). A server that cannot answer so (406) is not asked for the objects whole:
 * the count is unknown.
 */
export async function countObjects(kube: KubeClient, r: DiscoveredResource): Promise<{ objects: number | null; note?: string }> {
  let res: KubeResponse;
  try {
    res = await kube.request('GET', collectionPath({ group: r.group, version: r.version, resource: r.name }), {
      query: { limit: 1 },
      accept: METADATA_ONLY_LIST_ACCEPT,
    });
  } catch (err) {
    if (!(err instanceof KubeError)) throw err;
    if (err.status === 406) return { objects: null, note: 'the server refuses a metadata-only list' };
    return { objects: null, note: `counting failed: ${err.message}` };
  }
  // Only the list's metadata and the number of items are read from the page.
  return countFromFirstPage(
    parseJson<{ items?: unknown[]; metadata?: { continue?: string; remainingItemCount?: number } }>(res.body, `list of ${r.name}`),
  );
}
