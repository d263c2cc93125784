/**
 * All activities, created from their dependencies (a real kube layer in the
 * worker, or whatever a test passes). Each one is a unit of retryable work
 * that returns small results: counters, tokens, hashes. Never object bodies.
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { conditionsFor } from '../api/conditions';
import {
  MIGRATION_API_VERSION,
  type StorageVersionMigrationStatus,
} from '../api/migration';
import { groupResourceString, type GroupResource, type ResourceRef } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { classifyResponse, KubeError } from '../kube/errors';
import { agreementFromDiscovery, agreementFromStorageVersion, liveIdentities, type Agreement } from '../kube/agreement';
import { IDENTITY_LABEL, IdentityLease, StorageVersion, storageVersionName } from '../api/storage-version';
import { RateLimiter } from '../kube/rate-limit';
import type { MigratorMetrics } from '../worker/metrics';
import { migrateChunk, type ChunkDeps, type ChunkInput, type ChunkResult } from './migrate-chunk';
import { createTriggerActivities, refineStorageState } from './trigger';

export interface ActivityDeps {
  kube: KubeClient;
  /** The worker-wide load budget (QPS) shared by every migration. */
  budget: RateLimiter;
  metrics?: MigratorMetrics;
  /**
   * One client per API server, to read each one's own discovery (HA). Without
   * them, `kube`'s server speaks for all.
   */
  servers?: Array<{ id: string; kube: KubeClient }>;
  /** For the trigger: start and stop migrations. */
  temporal?: { client: Client; taskQueue: string };
}

export type { Agreement };

export const WORKFLOW_ID_ANNOTATION = 'migration.k8s.io/workflow-id';
export const svmPath = (name: string) => `/apis/${MIGRATION_API_VERSION}/storageversionmigrations/${encodeURIComponent(name)}`;
const crdPath = (gr: GroupResource) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${gr.resource}.${gr.group}`;

interface Crd {
  spec: { versions: Array<{ name: string; storage: boolean }> };
  status?: { storedVersions?: string[] };
}

export function createActivities(deps: ActivityDeps) {
  const { kube } = deps;
  const limiters = new Map<string, RateLimiter>();
  const limiterFor = (resource: string, qps: number): RateLimiter | undefined => {
    if (!(qps > 0)) return undefined;
    let l = limiters.get(resource);
    if (!l) limiters.set(resource, (l = new RateLimiter(qps)));
    l.setQps(qps);
    return l;
  };

  const m = deps.metrics;
  const observe: ChunkDeps['observe'] = m
    ? (resource, outcome, seconds, rewritten) => {
        m.objects.inc({ resource, outcome });
        m.updateLatency.observe({ resource }, seconds);
        if (rewritten) m.rewritten.inc({ resource });
      }
    : undefined;

  const servers = deps.servers && deps.servers.length > 0 ? deps.servers : [{ id: kube.server, kube }];

  /** The storageVersionHash one API server serves for the resource in its own discovery. */
  async function discoveryHash(server: KubeClient, ref: ResourceRef): Promise<string | undefined> {
    const path = ref.group ? `/apis/${ref.group}/${ref.version}` : `/api/${ref.version}`;
    const list = await server.getJson<{ resources: Array<{ name: string; storageVersionHash?: string }> }>(path);
    return list.resources.find((r) => r.name === ref.resource)?.storageVersionHash;
  }

  /** Do all API servers agree on the resource's encoding version? (see src/kube/agreement.ts) */
  async function agreement(ref: ResourceRef): Promise<Agreement> {
    if (!ref.custom) {
      const res = await kube.raw('GET', `/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/${storageVersionName(ref)}`);
      if (res.status === 200) {
        const sv = StorageVersion.parse(JSON.parse(res.body));
        const leases = await kube.getJson<{ items: unknown[] }>('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases', { labelSelector: IDENTITY_LABEL });
        return agreementFromStorageVersion(sv, liveIdentities(leases.items.map((l) => IdentityLease.parse(l)), Date.now()));
      }
      if (res.status !== 404) throw classifyResponse(res.status, res.body);
      // 404: the StorageVersion API is not served (or not for this resource): fall back to discovery.
    }
    const views = await Promise.all(servers.map(async (s) => ({ id: s.id, value: await discoveryHash(s.kube, ref).catch(() => undefined) })));
    const crdStorage = ref.custom ? (await kube.getJson<Crd>(crdPath(ref))).spec.versions.find((v) => v.storage)?.name : undefined;
    return agreementFromDiscovery(views, crdStorage);
  }

  return {
    ...createTriggerActivities({ kube, servers, temporal: deps.temporal }),

    /** One page: list, no-op update each object, return counters and the next token. */
    async migrateChunk(input: ChunkInput): Promise<ChunkResult> {
      return migrateChunk({ kube, budget: deps.budget, limiterFor, observe }, input);
    },

    /** The storage version the API server encodes the resource in now. */
    agreement,

    /**
     * The verdict's last step: is the agreement the migration started under
     * still the one in force? If so, refine the resource's StorageState to
     * [current], and for a custom resource reduce the CRD's
     * status.storedVersions to its storage version, so the old version can
     * be removed.
     */
    async confirmAgreement(ref: ResourceRef, expected: Agreement): Promise<{ held: boolean; now: Agreement; storedVersions?: string[] }> {
      const now = await agreement(ref);
      const held = now.agreed && now.token === expected.token && now.encodingVersion === expected.encodingVersion;
      if (!held) return { held, now };
      // The StorageState (if the trigger keeps one) now knows objects are persisted in the current version only.
      const hash = await discoveryHash(kube, ref);
      if (hash) await refineStorageState(kube, groupResourceString(ref), hash);
      if (!ref.custom) return { held, now };
      const storedVersions = [expected.encodingVersion!];
      await kube.patchStatus(crdPath(ref), { storedVersions });
      return { held, now, storedVersions };
    },

    /**
     * Creates the StorageVersionMigration object kubectl users see, unless one
     * exists. Returns undefined when the CRD is not installed: the migration
     * then runs without a kubectl mirror.
     */
    async ensureMigrationObject(ref: ResourceRef, workflowId: string, name: string): Promise<string | undefined> {
      const body = {
        apiVersion: MIGRATION_API_VERSION,
        kind: 'StorageVersionMigration',
        metadata: { name, annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } },
        spec: { resource: { group: ref.group, version: ref.version, resource: ref.resource } },
      };
      const res = await kube.raw('POST', `/apis/${MIGRATION_API_VERSION}/storageversionmigrations`, { body: JSON.stringify(body) });
      if (res.status === 404) {
        Context.current().log.warn('the StorageVersionMigration CRD is not installed; the migration is not mirrored for kubectl', { resource: groupResourceString(ref) });
        return undefined;
      }
      if (res.status >= 300 && res.status !== 409) {
        throw new Error(`creating StorageVersionMigration ${name}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
      }
      return name;
    },

    /** Mirrors a migration's status to its StorageVersionMigration objects (missing ones are skipped). */
    async reportStatus(names: string[], status: StorageVersionMigrationStatus, resource: string): Promise<void> {
      if (m && (status.phase === 'Succeeded' || status.phase === 'Failed' || status.phase === 'Aborted')) m.migrations.inc({ resource, result: status.phase });
      if (m) m.waiting.set({ resource }, status.phase === 'WaitingForAgreement' ? 1 : 0);
      const full: StorageVersionMigrationStatus = {
        ...status,
        conditions: conditionsFor(status.phase ?? 'Running', status.message, new Date().toISOString()),
      };
      for (const name of names) {
        try {
          await kube.patchStatus(svmPath(name), full);
        } catch (err) {
          if (err instanceof KubeError && err.kind === 'notFound') {
            Context.current().log.info('StorageVersionMigration object is gone; not mirroring status to it', { name });
            continue;
          }
          throw err;
        }
      }
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
