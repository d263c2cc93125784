/**
 * All activities, created from their dependencies (a real kube layer in the
 * worker, or whatever a test passes). Each one is a unit of retryable work
 * that returns small results: counters, tokens, hashes. Never object bodies.
 */
import { Context } from '@temporalio/activity';
import { conditionsFor } from '../api/conditions';
import {
  MIGRATION_API_VERSION,
  type StorageVersionMigrationStatus,
} from '../api/migration';
import { apiVersionOf, groupResourceString, type GroupResource, type ResourceRef } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { KubeError } from '../kube/errors';
import { RateLimiter } from '../kube/rate-limit';
import type { MigratorMetrics } from '../worker/metrics';
import { migrateChunk, type ChunkDeps, type ChunkInput, type ChunkResult } from './migrate-chunk';

export interface ActivityDeps {
  kube: KubeClient;
  /** The worker-wide load budget (QPS) shared by every migration. */
  budget: RateLimiter;
  metrics?: MigratorMetrics;
}

/** What the servers store a resource as: compared before and after a migration. */
export interface StorageTarget {
  storageVersionHash: string;
  /** For custom resources: the CRD's storage version. */
  storageVersion?: string;
}

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

  async function discoveryHash(ref: ResourceRef): Promise<string> {
    const path = ref.group ? `/apis/${ref.group}/${ref.version}` : `/api/${ref.version}`;
    const list = await kube.getJson<{ resources: Array<{ name: string; storageVersionHash?: string }> }>(path);
    const hash = list.resources.find((r) => r.name === ref.resource)?.storageVersionHash;
    if (!hash) throw new Error(`${groupResourceString(ref)} is no longer served with a storageVersionHash by ${apiVersionOf(ref)}`);
    return hash;
  }

  async function storageTarget(ref: ResourceRef): Promise<StorageTarget> {
    const storageVersionHash = await discoveryHash(ref);
    if (!ref.custom) return { storageVersionHash };
    const crd = await kube.getJson<Crd>(crdPath(ref));
    return { storageVersionHash, storageVersion: crd.spec.versions.find((v) => v.storage)?.name };
  }

  return {
    /** One page: list, no-op update each object, return counters and the next token. */
    async migrateChunk(input: ChunkInput): Promise<ChunkResult> {
      return migrateChunk({ kube, budget: deps.budget, limiterFor, observe }, input);
    },

    /** The storage version the API server encodes the resource in now. */
    storageTarget,

    /**
     * After a successful migration of a custom resource: reduce the CRD's
     * status.storedVersions to its storage version, so the old version can
     * be removed. Refuses (returns changed) if the storage version moved.
     */
    async finalizeCustomResource(ref: ResourceRef, expected: StorageTarget): Promise<{ changed: boolean; storedVersions: string[] }> {
      const now = await storageTarget(ref);
      const crd = await kube.getJson<Crd>(crdPath(ref));
      if (now.storageVersionHash !== expected.storageVersionHash || now.storageVersion !== expected.storageVersion) {
        return { changed: true, storedVersions: crd.status?.storedVersions ?? [] };
      }
      const storedVersions = [expected.storageVersion!];
      await kube.patchStatus(crdPath(ref), { storedVersions });
      return { changed: false, storedVersions };
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
