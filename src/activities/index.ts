/**
 * All activities, created from their dependencies (a real kube layer in the
 * worker, or whatever a test passes). Each one is a unit of retryable work
 * that returns small results: counters, tokens, hashes. Never object bodies.
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { storageVersionOf } from '../api/custom-resource-definition';
import type { StorageVersionMigrationStatus } from '../api/migration';
import type { StatusReport } from '../contract/definitions';
import { COMMON_VERSIONS, groupResourceString, type ResourceRef } from '../api/resource';
import {
  agreementFromEndpoints,
  agreementFromStorageVersion,
  liveIdentities,
  liveProcesses,
  versionNamer,
  type Agreement,
  type ServerView,
} from '../kube/agreement';
import { ListAhead, listAheadEnabled } from '../kube/list-ahead';
import { kubernetesEndpoints, type ApiServerSource } from '../kube/apiservers';
import type { KubeClient } from '../kube/client';
import { getCrd, markCrdMigrationFailed, pruneStoredVersions, setCrdStoredVersions } from '../kube/crds';
import { findApiGroup, getResourceList } from '../kube/discovery';
import { isRetryable, KubeError } from '../kube/errors';
import { withTimeout } from '../kube/timeout';
import { listIdentityLeases } from '../kube/leases';
import { createMigrationObject, svmPath, WORKFLOW_ID_ANNOTATION } from '../kube/migrations';
import { adapterFor, sigsApi, standardApi } from '../kube/migration-objects';
import { createBuiltInActivities } from './built-in';
import { createResolveActivities } from './resolve';
import { RateLimiter } from '../kube/rate-limit';
import { refineStorageState } from '../kube/storage-states';
import { findStorageVersion } from '../kube/storage-versions';
import type { MigratorMetrics } from '../worker/metrics';
import type { AdaptiveConcurrency } from '../kube/adaptive-concurrency';
import type { MemoryBudget } from '../kube/memory-budget';
import { migrateChunk, type ChunkDeps, type ChunkInput, type ChunkResult } from './migrate-chunk';
import { createDropActivities } from './drop';
import { createManagedFieldsActivities } from './managed-fields';
import { createFollowActivities } from './follow-migration';
import { createTriggerActivities } from './trigger';

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
  temporal?: { client: Client; taskQueue: string };
  /** For the trigger: migrate through svm's own workflow (default) or hand over to the built-in migrator. */
  triggerApi?: 'svm' | 'standard';
  /** For the trigger: who acts on storagemigration.k8s.io objects (SVM_STANDARD_MIGRATIONS); default defer. */
  standardMigrations?: 'defer' | 'own' | 'off';
  /** The identity the managedFields rewrite writes as (SVM_MANAGED_FIELDS_AS); unset: that rewrite is refused. */
  managedFieldsAs?: string;
}

export type { Agreement };
/** An agreement on a custom resource also carries the CRD's generation when it was read. */
type CrdAgreement = Agreement & { crdGeneration?: number };

/** Where they live now (src/kube/migrations.ts); exported here too, for the code and tests that import them from here. */
export { svmPath, WORKFLOW_ID_ANNOTATION };
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
/** An API server asked at its own address answers within this, or counts as not answering. */
const ENDPOINT_TIMEOUT_MS = 5000;

export function createActivities(deps: ActivityDeps) {
  const { kube } = deps;
  const limiters = new Map<string, RateLimiter>();
  // A migration's own qps ceiling, whole on whichever replica runs its chunk: it runs one chunk at a time.
  const limiterFor = (resource: string, qps: number): RateLimiter | undefined => {
    if (!(qps > 0)) return undefined;
    let l = limiters.get(resource);
    if (!l) limiters.set(resource, (l = new RateLimiter(qps)));
    l.setQps(qps);
    return l;
  };

  const m = deps.metrics;
  // Prometheus takes a counter series' first sample as its baseline: a series first scraped at 1 (a migration's
  // first Failed, the first denied object) never shows in increase() or rate(), and the dashboard and alerts
  // would miss it. So every series of a resource starts at 0 on this replica when it first reports the
  // migration's status (at its start) or runs one of its chunks.
  const zeroed = new Set<string>();
  const zero = (resource: string) => {
    if (!m || zeroed.has(resource)) return;
    zeroed.add(resource);
    for (const outcome of ['migrated', 'conflict', 'notFound', 'failed']) m.objects.inc({ resource, outcome }, 0);
    m.rewritten.inc({ resource }, 0);
    for (const result of ['Succeeded', 'Failed', 'Aborted']) m.migrations.inc({ resource, result }, 0);
  };
  const observe: ChunkDeps['observe'] = m
    ? (resource, outcome, seconds, rewritten) => {
        zero(resource);
        m.objects.inc({ resource, outcome });
        m.updateLatency.observe({ resource }, seconds);
        if (rewritten) m.rewritten.inc({ resource });
      }
    : undefined;

  const apiservers = deps.apiservers ?? kubernetesEndpoints(kube);
  const listAhead = listAheadEnabled() ? new ListAhead(kube) : undefined;

  /** Discovery of the resource's group version, as one API server serves it. */
  const resourceList = async (server: KubeClient, ref: ResourceRef, timeoutMs?: number) =>
    (await getResourceList(server, ref, { timeoutMs })).resources;

  /** The storageVersionHash one API server serves for the resource in its own discovery. */
  async function discoveryHash(server: KubeClient, ref: ResourceRef): Promise<string | undefined> {
    return (await resourceList(server, ref)).find((r) => r.name === ref.resource)?.storageVersionHash;
  }

  /** One API server asked at its own address: its hash, "does not serve it" (404), or why it did not answer. */
  async function askEndpoint(id: string, server: KubeClient, ref: ResourceRef): Promise<ServerView> {
    try {
      const list = await resourceList(server, ref, ENDPOINT_TIMEOUT_MS);
      return { id, value: list.find((r) => r.name === ref.resource)?.storageVersionHash };
    } catch (err) {
      if (err instanceof KubeError && err.kind === 'notFound') return { id }; // answered: it does not serve the group version
      return { id, error: err instanceof Error ? err.message : String(err) };
    }
  }

  /** Readable names for hashes: every version the group serves (through our address) and the usual ones. */
  async function namer(ref: ResourceRef, kind: string | undefined): Promise<((hash: string) => string | undefined) | undefined> {
    if (!kind) return undefined;
    const versions = new Set([ref.version, ...COMMON_VERSIONS]);
    if (ref.group) for (const v of (await findApiGroup(kube, ref.group))?.versions ?? []) versions.add(v.version);
    return versionNamer(ref.group, kind, versions);
  }

  /** Do all API servers agree on the resource's encoding version? A read: it changes nothing (see src/kube/agreement.ts). */
  async function agreement(ref: ResourceRef): Promise<CrdAgreement> {
    if (!ref.custom) {
      // Undefined: the StorageVersion API is not served (its default: alpha, off), or not for this resource: ask each server.
      const sv = await findStorageVersion(kube, ref);
      if (sv) {
        const leases = await listIdentityLeases(kube);
        const now = Date.now();
        return agreementFromStorageVersion(sv, liveIdentities(leases, now), liveProcesses(leases, now));
      }
    }
    // The CRD and our own address's discovery are read while the API servers are found, each server asked once they are.
    const servers = apiservers.find();
    const [crd, viaList, [found, endpoints]] = await Promise.all([
      // A deleted CRD is a resource no longer served (below), not a failure to retry forever.
      ref.custom
        ? getCrd(kube, ref).catch((err: unknown) => {
            if (err instanceof KubeError && err.kind === 'notFound') return undefined;
            throw err;
          })
        : Promise.resolve(undefined),
      resourceList(kube, ref).catch((err: unknown) => {
        if (err instanceof KubeError && err.kind === 'notFound') return [];
        throw err; // our own address must answer: the activity retries
      }),
      servers.then(async (f) => [f, await Promise.all(f.endpoints.map((e) => askEndpoint(e.id, e.kube, ref)))] as const),
    ]);
    const own = viaList.find((r) => r.name === ref.resource);
    const answer = agreementFromEndpoints({
      resource: groupResourceString(ref),
      endpoints,
      endpointsNote: found.endpointsNote,
      identities: found.identities,
      processes: found.processes,
      via: { id: kube.server, value: own?.storageVersionHash },
      crd: crd ? { storageVersion: storageVersionOf(crd), generation: crd.metadata.generation } : undefined,
      versionOf: ref.custom ? undefined : await namer(ref, own?.kind),
    });
    // Not served at this version through our own address: the workflow resolves the resource again.
    const served = own === undefined || (ref.custom && !crd) ? { ...answer, notServed: true } : answer;
    // The CRD's generation when this answer was read: a pass records it at its start (the built-in's protocol).
    return crd?.metadata.generation !== undefined ? { ...served, crdGeneration: crd.metadata.generation } : served;
  }

  const objectApis = { sigs: sigsApi(kube), standard: standardApi(kube) };

  return {
    ...createTriggerActivities({
      kube,
      apiservers,
      temporal: deps.temporal,
      triggerApi: deps.triggerApi,
      standardMigrations: deps.standardMigrations,
    }),
    ...createFollowActivities(deps.temporal),
    ...createResolveActivities(kube),
    ...createDropActivities({ kube, apiservers, temporal: deps.temporal }),
    ...createManagedFieldsActivities({ kube, managedFieldsAs: deps.managedFieldsAs }),
    ...createBuiltInActivities({ kube, agreement, discoveryHash: (ref) => discoveryHash(kube, ref) }),

    /** One page: list, no-op update each object, return counters and the next token. */
    async migrateChunk(input: ChunkInput): Promise<ChunkResult> {
      zero(groupResourceString(input.resource));
      return migrateChunk(
        { kube, budget: deps.budget, concurrency: deps.concurrency, memory: deps.memory, limiterFor, observe, listAhead },
        input,
      );
    },

    /** Do the API servers agree on the resource's storage version, and what was checked? A read: it changes nothing. */
    /** The agreement, with when it was read: the workflow decides by this reading, not its own clock (Agreement.at). */
    agreement: async (ref: ResourceRef): Promise<Agreement> => ({ ...(await agreement(ref)), at: Date.now() }),

    /**
     * The effect of a successful pass, applied only under the agreement it
     * was made under: first re-reads the agreement and refuses (non-retryable
     * ApplicationFailure 'AgreementChanged') if its token moved. Then refines
     * the resource's StorageState to [the agreed hash] (if the trigger keeps
     * one), and for a custom resource reduces the CRD's status.storedVersions
     * to the agreed storage version, so the old version can be removed.
     */
    async recordMigrated(ref: ResourceRef, agreed: Agreement): Promise<{ storedVersions?: string[] }> {
      const now = await agreement(ref);
      if (!agreed.agreed || !now.agreed || now.token !== agreed.token || now.encodingVersion !== agreed.encodingVersion) {
        throw ApplicationFailure.nonRetryable(
          `the agreement on ${groupResourceString(ref)} changed: ${now.agreed ? `now ${now.encodingVersion} (${now.checked})` : `now not agreed: ${now.reason}`}`,
          'AgreementChanged',
        );
      }
      const hash = now.hash ?? (await discoveryHash(kube, ref));
      if (hash) await refineStorageState(kube, groupResourceString(ref), hash);
      if (!ref.custom) return {};
      const generation = (agreed as CrdAgreement).crdGeneration;
      if (generation === undefined) {
        // An agreement from before crdGeneration was recorded (a history of an older svm): its token holds the generation.
        const storedVersions = [agreed.encodingVersion!];
        await setCrdStoredVersions(kube, ref, storedVersions);
        return { storedVersions };
      }
      const done = await pruneStoredVersions(kube, ref, { generation, storageVersion: agreed.encodingVersion! }, 'svm');
      if (!done.pruned)
        throw ApplicationFailure.nonRetryable(`storedVersions of ${groupResourceString(ref)} not pruned: ${done.why}`, 'AgreementChanged');
      return { storedVersions: done.storedVersions };
    },

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
      const gone: string[] = [];
      zero(resource);
      if (m && (status.phase === 'Succeeded' || status.phase === 'Failed' || status.phase === 'Aborted'))
        m.migrations.inc({ resource, result: status.phase });
      // A custom resource's failed pass: its CRD's StorageMigrating condition says so, as the built-in's does.
      if (status.phase === 'Failed' && resource.includes('.')) {
        const marking = markCrdMigrationFailed(kube, resource, 'svm');
        marking.catch(() => undefined);
        await within(marking, deps.mirror?.writeTimeoutMs ?? MIRROR_WRITE_TIMEOUT_MS, `marking CRD ${resource} failed`).catch(
          (err: unknown) =>
            Context.current().log.warn('could not mark the CRD migration failed', {
              resource,
              err: err instanceof Error ? err.message : String(err),
            }),
        );
      }
      if (m) m.waiting.set({ resource }, status.phase === 'WaitingForAgreement' ? 1 : 0);
      m?.statusReported.set({ resource }, Date.now() / 1000);
      // Each object in its own API's status (src/worker/migration-objects.ts): a plain name is a
      // migration.k8s.io/v1alpha1 object, storagemigration.k8s.io/<name> a standard one.
      const budgetMs = deps.mirror?.budgetMs ?? MIRROR_BUDGET_MS;
      const deadline = Date.now() + budgetMs;
      for (const entry of names) {
        const { api, name } = adapterFor(entry, objectApis);
        for (let attempt = 1; ; attempt++) {
          try {
            const left = deadline - Date.now();
            if (left <= 0) throw new MirrorTimeout(`the status writes of this report took over ${budgetMs / 1000}s`);
            const write = api.write(name, status);
            write.catch(() => undefined); // given up on by within(): its own request timeout ends it
            await within(write, Math.min(deps.mirror?.writeTimeoutMs ?? MIRROR_WRITE_TIMEOUT_MS, left), `writing the status of ${name}`);
            break;
          } catch (err) {
            if (err instanceof KubeError && err.kind === 'notFound') {
              Context.current().log.info('StorageVersionMigration object is gone; not mirroring status to it', { name });
              gone.push(entry);
              break;
            }
            const transient = !(err instanceof KubeError) || isRetryable(err.kind) || err.kind === 'conflict';
            if (transient && attempt < MIRROR_ATTEMPTS && Date.now() + attempt * 1000 < deadline) {
              await new Promise((r) => setTimeout(r, attempt * 1000));
              continue;
            }
            // The mirror is not the migration: a status that cannot be written never fails one. The next
            // status write tries again, and the bridge writes the workflow's result once it closes.
            Context.current().log.warn(
              'could not write the StorageVersionMigration status; the migration goes on, the status is repaired later',
              {
                name,
                phase: status.phase,
                err: err instanceof Error ? err.message : String(err),
              },
            );
            m?.mirrorFailures.inc();
            break;
          }
        }
      }
      return { gone };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
