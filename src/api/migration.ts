/**
 * Our own API, migration.k8s.io/v1alpha1: StorageVersionMigration (one
 * migration, kubectl-visible, schema-compatible with
 * kube-storage-version-migrator) and StorageState (what storage version each
 * resource is persisted in). The zod schemas here are the source of truth:
 * the CRD manifests in deploy/ are generated from them (src/api/crds.ts).
 */
import { z } from 'zod';

export const MIGRATION_GROUP = 'migration.k8s.io';
export const MIGRATION_VERSION = 'v1alpha1';
export const MIGRATION_API_VERSION = `${MIGRATION_GROUP}/${MIGRATION_VERSION}`;

/** The phases a migration goes through, shown in the UI, the CLI and kubectl. */
export const MigrationPhase = z.enum(['Pending', 'WaitingForAgreement', 'Running', 'Paused', 'Succeeded', 'Failed', 'Aborted']);
export type MigrationPhase = z.infer<typeof MigrationPhase>;

export const MigrationCondition = z.object({
  type: z.enum(['Running', 'Succeeded', 'Failed']).describe('Running, Succeeded or Failed, as in kube-storage-version-migrator'),
  status: z.enum(['True', 'False', 'Unknown']),
  lastUpdateTime: z.string().optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
});
export type MigrationCondition = z.infer<typeof MigrationCondition>;

export const MigrationCounters = z.object({
  migrated: z.number().int().describe('objects updated successfully (rewritten or already current)'),
  rewritten: z.number().int().describe('objects whose update changed their resourceVersion: re-encoded in etcd'),
  conflicts: z.number().int().describe('objects changed after the list (409): already in the current version'),
  notFound: z.number().int().describe('objects deleted after the list (404)'),
  failed: z.number().int().describe('objects whose update was refused (403, 422, 400, webhook denial)'),
  chunks: z.number().int().describe('list pages processed'),
  listRestarts: z.number().int().describe('times an expired continue token could not be resumed and the list started over'),
  tokenResumes: z.number().int().describe('times an expired continue token was resumed from the inconsistent token the API server gave'),
});
export type MigrationCounters = z.infer<typeof MigrationCounters>;

export const ObjectFailure = z.object({
  namespace: z.string().optional(),
  name: z.string(),
  reason: z.string(),
});
export type ObjectFailure = z.infer<typeof ObjectFailure>;

export const StorageVersionMigrationSpec = z.object({
  resource: z
    .object({
      group: z.string().optional().describe('API group; empty for the core group'),
      version: z.string().optional().describe('version to list and update through; defaults to the preferred version'),
      resource: z.string().describe('plural resource name, e.g. secrets'),
    })
    .describe('the resource whose objects are migrated'),
  continueToken: z.string().optional().describe('where to start listing (kube-storage-version-migrator compatible)'),
});

export const StorageVersionMigrationStatus = z.object({
  conditions: z.array(MigrationCondition).optional(),
  phase: MigrationPhase.optional(),
  message: z.string().optional(),
  workflowId: z.string().optional(),
  progress: MigrationCounters.partial().extend({ remainingEstimate: z.number().int().optional() }).optional(),
  failures: z.array(ObjectFailure).optional().describe('the first objects whose update was refused, with the reason'),
  startTime: z.string().optional(),
  completionTime: z.string().optional(),
});
export type StorageVersionMigrationStatus = z.infer<typeof StorageVersionMigrationStatus>;

export const StorageVersionMigration = z.object({
  apiVersion: z.literal(MIGRATION_API_VERSION),
  kind: z.literal('StorageVersionMigration'),
  metadata: z.object({ name: z.string(), resourceVersion: z.string().optional(), annotations: z.record(z.string(), z.string()).optional() }).loose(),
  spec: StorageVersionMigrationSpec,
  status: StorageVersionMigrationStatus.optional(),
});
export type StorageVersionMigration = z.infer<typeof StorageVersionMigration>;

export const StorageStateSpec = z.object({
  resource: z.object({ group: z.string().optional(), resource: z.string() }).describe('the resource this state tracks'),
});

export const StorageStateStatus = z.object({
  persistedStorageVersionHashes: z
    .array(z.string())
    .optional()
    .describe('hashes of the storage versions objects may be persisted in; "Unknown" when that cannot be known'),
  currentStorageVersionHash: z.string().optional().describe('the storage version hash the API servers use now'),
  lastHeartbeatTime: z.string().optional(),
  currentStorageVersionHashes: z
    .array(z.object({ reporterID: z.string(), currentStorageVersionHash: z.string(), lastHeartbeatTime: z.string() }))
    .optional()
    .describe('one entry per API server that reported its hash (HA)'),
  discoveryConsistent: z.boolean().optional().describe('whether every API server serves the same discovery document'),
});

export const StorageState = z.object({
  apiVersion: z.literal(MIGRATION_API_VERSION),
  kind: z.literal('StorageState'),
  metadata: z.object({ name: z.string(), resourceVersion: z.string().optional() }).loose(),
  spec: StorageStateSpec.optional(),
  status: StorageStateStatus.optional(),
});
export type StorageState = z.infer<typeof StorageState>;
