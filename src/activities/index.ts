/**
 * All activities, created from their dependencies (a real kube layer in the
 * worker, or whatever a test passes). Each one is a unit of retryable work
 * that returns small results: counters, tokens, hashes. Never object bodies.
 */
import { clusterUidReader } from '../kube/cluster-uid';
import { createCampaignStepActivities } from './fleet';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Placement } from '../contract/placement';
import { ApplicationFailure } from '@temporalio/common';
import type { StorageVersionMigrationStatus } from '../api/migration';
import { FINAL_PHASES, isTerminalPhase } from '../api/phases';
import type { StatusReport } from '../contract/definitions';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { sameAgreement, type Agreement } from '../contract/agreement';
import { ListAhead, listAheadEnabled } from '../kube/list-ahead';
import type { RequestSamples } from '../kube/request-samples';
import { kubernetesEndpoints, type ApiServerSource } from '../kube/apiservers';
import type { KubeClient } from '../kube/client';
import { markCrdMigrationFailed, pruneStoredVersions, setCrdStoredVersions } from '../kube/crds';
import { KubeError } from '../kube/errors';
import { isConflict, isTransientError, retryBounded } from '../kube/retry';
import { withTimeout } from '../kube/timeout';
import { createMigrationObject, svmPath, WORKFLOW_ID_ANNOTATION } from '../kube/migrations';
import { adapterFor, sigsApi, standardApi, type MigrationObjectApi } from '../kube/migration-objects';
import { discoveryHash, readAgreement, type CrdAgreement } from '../kube/server-agreements';
import { createBuiltInActivities } from './built-in';
import { createResolveActivities } from './resolve';
import { RateLimiter } from '../kube/rate-limit';
import { refineStorageState } from '../kube/storage-states';
import type { MigratorMetrics } from '../worker/metrics';
import type { AdaptiveConcurrency } from '../kube/adaptive-concurrency';
import type { MemoryBudget } from '../kube/memory-budget';
import { migrateChunk, type ChunkDeps, type ChunkInput, type ChunkResult } from './migrate-chunk';
import { createDropActivities } from './drop';
import { createManagedFieldsActivities } from './managed-fields';
import { createFollowActivities } from './follow-migration';
import { createTriggerActivities } from './trigger';
import { AGREEMENT_CHANGED } from '../contract/reasons';

export interface ActivityDeps {
  kube: KubeClient;
  /** The worker-wide load budget (QPS) shared by every migration. */
  budget: RateLimiter;
  /** Updates in flight across the worker, adapted to the API servers' latency; unset: only each migration's concurrency. */
  concurrency?: AdaptiveConcurrency;
  /** Bytes of listed objects every chunk of the worker holds together (SVM_MEMORY_BUDGET_BYTES); unset: only each chunk's list buffer. */
  memory?: MemoryBudget;
  metrics?: MigratorMetrics;
  /** Bounds of the status mirror's writes (tests shorten them); default MIRROR_WRITE_TIMEOUT_MS, MIRROR_BUDGET_MS. */
  mirror?: { writeTimeoutMs?: number; budgetMs?: number };
  /**
   * Where every API server is found, to ask each one's own discovery (HA).
   * Default: the `kubernetes` EndpointSlice and identity leases, read through
   * `kube` (src/kube/apiservers.ts).
   */
  apiservers?: ApiServerSource;
  /** For the trigger: start and stop migrations. */
  temporal?: { client: Client; placement: Placement };
  /** The uid of the cluster's kube-system namespace as the API answers now (src/worker/cluster-check.ts). */
  clusterUid?: () => Promise<string>;
  /** For the trigger: migrate through svm's own workflow (default) or hand over to the built-in migrator. */
  triggerApi?: 'svm' | 'standard';
  /** For the trigger: who acts on storagemigration.k8s.io objects (SVM_STANDARD_MIGRATIONS); default defer. */
  standardMigrations?: 'defer' | 'own' | 'off';
  /** The identity the managedFields rewrite writes as (SVM_MANAGED_FIELDS_AS); unset: that rewrite is refused. */
  managedFieldsAs?: string;
  /** The worker's samples of the API servers' request counters, for the drop check (SVM_REQUEST_SAMPLE_SECONDS). */
  requestSamples?: RequestSamples;
  /** SVM_REQUIRE_STATIC_FENCE: admission objects only under the manifest-loaded fence (src/kube/fence-probe.ts). */
  requireStaticFence?: boolean;
  /** SVM_REQUIRE_FENCE: every other resource only where svm's fence refuses the worker a change (src/kube/fence-probe.ts). */
  requireFence?: boolean;
  /** SVM_PRUNE: 'operator' leaves a CRD's status (storedVersions, its condition) to `svm prune`; default 'worker'. */
  prune?: 'worker' | 'operator';
}

export type { Agreement };

/** Where they live now (src/kube/migrations.ts); exported here too, for the code and tests that import them from here. */
export { svmPath, WORKFLOW_ID_ANNOTATION };

export function createActivities(deps: ActivityDeps) {
  const { kube } = deps;
  const apiservers = deps.apiservers ?? kubernetesEndpoints(kube);
  const metrics = resourceMetrics(deps.metrics);
  /** Do all API servers agree on the resource's encoding version? A read: it changes nothing (src/kube/server-agreements.ts). */
  const agreement = (ref: ResourceRef) => readAgreement(kube, apiservers, ref);
  // A named cluster's records count only when made against its uid: the API's, which the worker checks is the pinned
  // one before any activity runs (src/worker/cluster-check.ts). None for a single cluster.
  const pinnedUid = deps.temporal?.placement.name && deps.clusterUid ? deps.clusterUid : undefined;
  return {
    ...createTriggerActivities({
      kube,
      apiservers,
      temporal: deps.temporal,
      pinnedUid,
      triggerApi: deps.triggerApi,
      standardMigrations: deps.standardMigrations,
      mirrorWithoutRecord: deps.metrics && ((resource, without) => deps.metrics!.mirrorsWithoutRecord.set({ resource }, without ? 1 : 0)),
    }),
    ...createFollowActivities(deps.temporal, pinnedUid),
    ...createResolveActivities(kube),
    ...createDropActivities({ kube, apiservers, temporal: deps.temporal, requestSamples: deps.requestSamples }),
    ...createManagedFieldsActivities({ kube, managedFieldsAs: deps.managedFieldsAs }),
    ...createBuiltInActivities({ kube, agreement, discoveryHash: (ref) => discoveryHash(kube, ref) }),
    ...createChunkActivities({ ...deps, apiservers }, metrics),
    ...createAgreementActivities(kube, agreement, deps.prune ?? 'worker'),
    ...createCampaignStepActivities({ kube, apiservers, temporal: deps.temporal, pinnedUid }),
    /**
     * The cluster this worker serves, as its API answers now: what a named workflow records at its start
     * (src/workflows/cluster-context.ts). A campaign's probe, which carries no cluster header, names the cluster it asks
     * (`asked`): a pool serves the one named (src/worker/pool-dispatch.ts); a worker of one cluster answers its own.
     */
    async clusterIdentity(_asked?: { name: string }): Promise<{ name?: string; uid: string }> {
      const uid = deps.clusterUid ? await deps.clusterUid() : await clusterUidReader(kube)();
      // A single-cluster worker's answer names none (undefined is left out of the payload).
      return { name: deps.temporal?.placement.name, uid };
    },
    ...createMirrorActivities(deps, metrics),
  };
}

export type Activities = ReturnType<typeof createActivities>;

// ------------------------------------------------------------------ metrics

/**
 * The worker's series of each resource (src/worker/metrics.ts). Note: Prometheus takes a counter series' first
 * sample as its baseline: a series first scraped at 1 (a migration's first Failed, the first denied object) never
 * shows in increase() or rate(), and the dashboard and alerts would miss it. So every series of a resource starts
 * at 0 on this replica when it first reports the migration's status (at its start) or runs one of its chunks.
 */
function resourceMetrics(m: MigratorMetrics | undefined) {
  const zeroed = new Set<string>();
  const zero = (resource: string) => {
    if (!m || zeroed.has(resource)) return;
    zeroed.add(resource);
    for (const outcome of ['migrated', 'conflict', 'notFound', 'failed']) m.objects.inc({ resource, outcome }, 0);
    m.rewritten.inc({ resource }, 0);
    for (const result of FINAL_PHASES) m.migrations.inc({ resource, result }, 0);
  };
  const observe: ChunkDeps['observe'] = m
    ? (resource, outcome, seconds, rewritten) => {
        zero(resource);
        m.objects.inc({ resource, outcome });
        m.updateLatency.observe({ resource }, seconds);
        if (rewritten) m.rewritten.inc({ resource });
      }
    : undefined;
  return {
    zero,
    observe,
    /** A status reported: a migration's end counted by its result. */
    phase(resource: string, phase: StorageVersionMigrationStatus['phase']) {
      zero(resource);
      if (m && isTerminalPhase(phase)) m.migrations.inc({ resource, result: phase });
    },
    /** A status reported: whether the migration waits for agreement, and when it last reported. */
    reported(resource: string, phase: StorageVersionMigrationStatus['phase']) {
      if (m) m.waiting.set({ resource }, phase === 'WaitingForAgreement' ? 1 : 0);
      m?.statusReported.set({ resource }, Date.now() / 1000);
    },
    mirrorFailed: () => m?.mirrorFailures.inc(),
  };
}

type ResourceMetrics = ReturnType<typeof resourceMetrics>;

// ------------------------------------------------------------------- chunks

/** The migration's pass, one page at a time (src/activities/migrate-chunk.ts). */
function createChunkActivities(deps: ActivityDeps, metrics: ResourceMetrics) {
  const limiters = new Map<string, RateLimiter>();
  // A migration's own qps ceiling, whole on whichever replica runs its chunk: it runs one chunk at a time.
  const limiterFor = (resource: string, qps: number): RateLimiter | undefined => {
    if (!(qps > 0)) return undefined;
    let l = limiters.get(resource);
    if (!l) limiters.set(resource, (l = new RateLimiter(qps)));
    l.setQps(qps);
    return l;
  };
  const listAhead = listAheadEnabled() ? new ListAhead(deps.kube) : undefined;
  const { kube, budget, concurrency, memory, requireStaticFence, requireFence, apiservers } = deps;
  return {
    /** One page: list, no-op update each object, return counters and the next token. */
    async migrateChunk(input: ChunkInput): Promise<ChunkResult> {
      metrics.zero(groupResourceString(input.resource));
      return migrateChunk(
        {
          kube,
          budget,
          concurrency,
          memory,
          limiterFor,
          observe: metrics.observe,
          listAhead,
          requireStaticFence,
          requireFence,
          apiservers,
        },
        input,
      );
    },
  };
}

// ---------------------------------------------------------------- agreement

/** The agreement the workflow waits for and checks, and the effect of a pass made under it. */
function createAgreementActivities(kube: KubeClient, agreement: (ref: ResourceRef) => Promise<CrdAgreement>, prune: 'worker' | 'operator') {
  return {
    /**
     * Do the API servers agree on the resource's storage version, and what was checked? A read: it changes nothing.
     * With when it was read: the workflow decides by this reading, not its own clock (Agreement.at).
     */
    agreement: async (ref: ResourceRef): Promise<Agreement> => ({ ...(await agreement(ref)), at: Date.now() }),

    /**
     * The effect of a successful pass, applied only under the agreement it
     * was made under: first re-reads the agreement and refuses (non-retryable
     * ApplicationFailure 'AgreementChanged') if its token moved. Then refines
     * the resource's StorageState to [the agreed hash] (if the trigger keeps
     * one), and for a custom resource reduces the CRD's status.storedVersions
     * to the agreed storage version, so the old version can be removed.
     */
    /** Refines the StorageState (and a CRD's storedVersions) under the agreement; returns the hash it recorded. */
    async recordMigrated(ref: ResourceRef, agreed: Agreement): Promise<{ storedVersions?: string[]; hash?: string }> {
      const now = await agreement(ref);
      if (!sameAgreement(agreed, now)) {
        throw ApplicationFailure.nonRetryable(
          `the agreement on ${groupResourceString(ref)} changed: ${now.agreed ? `now ${now.encodingVersion} (${now.checked})` : `now not agreed: ${now.reason}`}`,
          AGREEMENT_CHANGED,
        );
      }
      const hash = now.hash ?? (await discoveryHash(kube, ref));
      if (hash) await refineStorageState(kube, groupResourceString(ref), hash);
      const recorded = hash ? { hash } : {};
      if (!ref.custom) return recorded;
      // SVM_PRUNE=operator: the pass's record in Temporal is what says the CRD is ready to prune; `svm prune`, under
      // the operator's identity, prunes on it (src/kube/prune.ts). The worker's token holds no right on CRD status.
      if (prune === 'operator') {
        Context.current().log.info('storedVersions left for svm prune (SVM_PRUNE=operator)', { resource: groupResourceString(ref) });
        return recorded;
      }
      return { storedVersions: await pruneToAgreed(kube, ref, agreed), ...recorded };
    },
  };
}

/** A custom resource's status.storedVersions reduced to the agreed storage version, under the CRD generation agreed on. */
async function pruneToAgreed(kube: KubeClient, ref: ResourceRef, agreed: CrdAgreement): Promise<string[]> {
  const generation = agreed.crdGeneration;
  if (generation === undefined) {
    // An agreement from before crdGeneration was recorded (a history of an older svm): its token holds the generation.
    const storedVersions = [agreed.encodingVersion!];
    await setCrdStoredVersions(kube, ref, storedVersions);
    return storedVersions;
  }
  const done = await pruneStoredVersions(kube, ref, { generation, storageVersion: agreed.encodingVersion! }, 'svm');
  if (!done.pruned)
    throw ApplicationFailure.nonRetryable(`storedVersions of ${groupResourceString(ref)} not pruned: ${done.why}`, AGREEMENT_CHANGED);
  return done.storedVersions;
}

// ------------------------------------------------------------------- mirror

/** Writes of one StorageVersionMigration status tried before the mirror gives up (the migration goes on). */
const MIRROR_ATTEMPTS = 4;
/**
 * A status write that does not answer is given up after this (and counted as a failed attempt), and all of one
 * report's writes within MIRROR_BUDGET_MS: a hanging API server must never make the activity outlive its
 * start-to-close timeout, whose retries would end the migration Failed for the sake of its mirror.
 */
const MIRROR_WRITE_TIMEOUT_MS = 10_000;
const MIRROR_BUDGET_MS = 40_000;

class MirrorTimeout extends Error {}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return withTimeout(p, ms, () => new MirrorTimeout(`${what}: no answer within ${ms / 1000}s`));
}

/** How one report writes: the objects' APIs, its bounds, and what to count when a write is given up. */
interface MirrorWrites {
  apis: { sigs: MigrationObjectApi; standard: MigrationObjectApi };
  writeTimeoutMs: number;
  budgetMs: number;
  failed: () => void;
}

/** The kubectl mirror: a migration's StorageVersionMigration objects and their status (rule 16: never the record). */
function createMirrorActivities(deps: ActivityDeps, metrics: ResourceMetrics) {
  const { kube } = deps;
  const apis = { sigs: sigsApi(kube), standard: standardApi(kube) };
  return {
    /**
     * Creates the StorageVersionMigration object kubectl users see, unless one
     * exists. Returns undefined when the CRD is not installed: the migration
     * then runs without a kubectl mirror.
     */
    async ensureMigrationObject(ref: ResourceRef, workflowId: string, name: string): Promise<string | undefined> {
      if ((await createMigrationObject(kube, name, workflowId, ref)) === 'crdMissing') {
        Context.current().log.warn('the StorageVersionMigration CRD is not installed; the migration is not mirrored for kubectl', {
          resource: groupResourceString(ref),
        });
        return undefined;
      }
      return name;
    },

    /** Mirrors a migration's status to its StorageVersionMigration objects (missing ones are skipped). */
    async reportStatus(names: string[], status: StorageVersionMigrationStatus, resource: string): Promise<StatusReport> {
      const writeTimeoutMs = deps.mirror?.writeTimeoutMs ?? MIRROR_WRITE_TIMEOUT_MS;
      metrics.phase(resource, status.phase);
      // A custom resource's failed pass: its CRD's StorageMigrating condition says so, as the built-in's does (not
      // under SVM_PRUNE=operator: the worker's token may not write a CRD's status there).
      if (status.phase === 'Failed' && resource.includes('.') && deps.prune !== 'operator')
        await markCrdFailed(kube, resource, writeTimeoutMs);
      metrics.reported(resource, status.phase);
      const budgetMs = deps.mirror?.budgetMs ?? MIRROR_BUDGET_MS;
      return { gone: await writeStatuses(names, status, { apis, writeTimeoutMs, budgetMs, failed: metrics.mirrorFailed }) };
    },
  };
}

/** The CRD's StorageMigrating condition set to failed, within writeTimeoutMs; a mirror: a failure is logged, never thrown. */
async function markCrdFailed(kube: KubeClient, resource: string, writeTimeoutMs: number): Promise<void> {
  const marking = markCrdMigrationFailed(kube, resource, 'svm');
  marking.catch(() => undefined);
  await within(marking, writeTimeoutMs, `marking CRD ${resource} failed`).catch((err: unknown) =>
    Context.current().log.warn('could not mark the CRD migration failed', {
      resource,
      err: err instanceof Error ? err.message : String(err),
    }),
  );
}

/**
 * The status written to each object in its own API (src/kube/migration-objects.ts: a plain name is a
 * migration.k8s.io/v1alpha1 object, storagemigration.k8s.io/<name> a standard one), all within the report's
 * budget. Returns the objects that are gone.
 */
async function writeStatuses(entries: string[], status: StorageVersionMigrationStatus, mirror: MirrorWrites): Promise<string[]> {
  const gone: string[] = [];
  const deadline = Date.now() + mirror.budgetMs;
  for (const entry of entries) if ((await writeStatus(entry, status, deadline, mirror)) === 'gone') gone.push(entry);
  return gone;
}

/** One object's status, tried up to MIRROR_ATTEMPTS times before the report's deadline. */
async function writeStatus(
  entry: string,
  status: StorageVersionMigrationStatus,
  deadline: number,
  mirror: MirrorWrites,
): Promise<'written' | 'gone' | 'givenUp'> {
  const { api, name } = adapterFor(entry, mirror.apis);
  // Tried again: a transient error, a conflict (the write is made again), and what is not the API's answer (a timeout).
  const retryIf = (err: unknown) => !(err instanceof KubeError) || isTransientError(err) || isConflict(err);
  try {
    await retryBounded({ attempts: MIRROR_ATTEMPTS, stepMs: 1000, retryIf, until: deadline }, async () => {
      const left = deadline - Date.now();
      if (left <= 0) throw new MirrorTimeout(`the status writes of this report took over ${mirror.budgetMs / 1000}s`);
      const write = api.write(name, status);
      write.catch(() => undefined); // given up on by within(): its own request timeout ends it
      await within(write, Math.min(mirror.writeTimeoutMs, left), `writing the status of ${name}`);
    });
    return 'written';
  } catch (err) {
    if (err instanceof KubeError && err.kind === 'notFound') {
      Context.current().log.info('StorageVersionMigration object is gone; not mirroring status to it', { name });
      return 'gone';
    }
    // The mirror is not the migration: a status that cannot be written never fails one. The next
    // status write tries again, and the bridge writes the workflow's result once it closes.
    Context.current().log.warn('could not write the StorageVersionMigration status; the migration goes on, the status is repaired later', {
      name,
      phase: status.phase,
      err: err instanceof Error ? err.message : String(err),
    });
    mirror.failed();
    return 'givenUp';
  }
}
