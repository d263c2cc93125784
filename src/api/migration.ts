/**
 * Our own API, migration.k8s.io/v1alpha1: StorageVersionMigration (one
 * migration, kubectl-visible, schema-compatible with
 * kube-storage-version-migrator) and StorageState (what storage version each
 * resource is persisted in). The zod schemas here are the source of truth:
 * the CRD manifests in deploy/ are generated from them (src/api/crds.ts).
 */
import { z } from 'zod';
import { CONTINUE_TOKEN_REFUSED } from '../contract/reasons';
import { isTerminalPhase } from './phases';

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
      version: z
        .string()
        .optional()
        .describe(
          'version to list and update through; defaults to the version the resource is stored in when served, else the preferred version',
        ),
      resource: z.string().describe('plural resource name, e.g. secrets'),
    })
    .describe('the resource whose objects are migrated'),
  continueToken: z
    .string()
    .optional()
    .describe(
      `kept for kube-storage-version-migrator compatibility only: svm never resumes from a given token. A new object that sets it is refused (phase Failed, reason ${CONTINUE_TOKEN_REFUSED}); one that kube-storage-version-migrator left running is taken over with a whole pass and its token ignored`,
    ),
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
  metadata: z
    .object({
      name: z.string(),
      uid: z.string().optional(),
      resourceVersion: z.string().optional(),
      annotations: z.record(z.string(), z.string()).optional(),
    })
    .loose(),
  spec: StorageVersionMigrationSpec,
  status: StorageVersionMigrationStatus.optional(),
});
export type StorageVersionMigration = z.infer<typeof StorageVersionMigration>;

export const CONTINUE_TOKEN_REFUSED_MESSAGE =
  'refused: spec.continueToken is set. svm records a success only for a whole pass of the resource that it started itself, so it never resumes from a given token; create the StorageVersionMigration without spec.continueToken';
export const TAKEOVER_MESSAGE =
  'taken over from kube-storage-version-migrator: svm runs a whole pass of the resource from the beginning; its continue token is not used';

/**
 * What a StorageVersionMigration is, from its status alone (pure):
 *  - finished: svm wrote a terminal phase, or kube-storage-version-migrator
 *    left it with Succeeded=True or Failed=True (no phase): never run again;
 *  - upstreamRunning: kube-storage-version-migrator left it with Running=True
 *    and no phase: svm takes it over (a whole pass; the token is ignored);
 *  - inProgress: svm wrote a non-terminal phase;
 *  - new: no status at all (a status cannot be set on create: it is a subresource).
 */
export type MigrationObjectState = 'finished' | 'upstreamRunning' | 'inProgress' | 'new';

export function migrationObjectState(status: StorageVersionMigrationStatus | undefined): MigrationObjectState {
  if (status?.phase) return isTerminalPhase(status.phase) ? 'finished' : 'inProgress';
  const conditions = status?.conditions ?? [];
  const isTrue = (type: MigrationCondition['type']) => conditions.some((c) => c.type === type && c.status === 'True');
  if (isTrue('Succeeded') || isTrue('Failed')) return 'finished';
  if (isTrue('Running')) return 'upstreamRunning';
  return 'new';
}

export const StorageStateSpec = z.object({
  resource: z.object({ group: z.string().optional(), resource: z.string() }).describe('the resource this state tracks'),
});
export type StorageStateSpec = z.infer<typeof StorageStateSpec>;

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
export type StorageStateStatus = z.infer<typeof StorageStateStatus>;

export const StorageState = z.object({
  apiVersion: z.literal(MIGRATION_API_VERSION),
  kind: z.literal('StorageState'),
  metadata: z.object({ name: z.string(), resourceVersion: z.string().optional() }).loose(),
  spec: StorageStateSpec.optional(),
  status: StorageStateStatus.optional(),
});
export type StorageState = z.infer<typeof StorageState>;
