/**
 * The schema of what a verdict reads from a migration's result in Temporal (contract/pass-record.ts says what the
 * record is): its phase, its counters, its message and the record of its pass. A result that does not parse is no
 * record (src/kube/migration-record.ts): whoever can complete a workflow in the namespace can write any result, and
 * nothing of it is believed before it is checked. Fields a verdict does not read are let through (a newer svm's).
 */
import { z } from 'zod';
import { MigrationCounters, MigrationPhase } from '../api/migration';

export const PassRecordSchema = z
  .object({
    by: z.enum(['svm', 'built-in']),
    object: z.string().max(320).optional(),
    encodingVersion: z.string().max(320),
    storageVersionHash: z.string().max(64).optional(),
    verified: z.boolean(),
    checked: z.string().max(4096),
    token: z.string().max(16_384),
    at: z.number().optional(),
    clusterUid: z.string().min(1).max(64).optional(),
    resource: z.string().min(1).max(320).optional(),
  })
  .loose();

/** A completed migration's result, as far as a verdict reads it (migrateResource's and delegateToBuiltIn's). */
export const MigrationVerdictSchema = z
  .object({
    phase: MigrationPhase,
    counters: MigrationCounters,
    message: z.string().max(65_536).optional(),
    record: PassRecordSchema.optional(),
  })
  .loose();
export type MigrationVerdict = z.infer<typeof MigrationVerdictSchema>;
