/**
 * The workflow contract as JSON Schema: what any Temporal SDK or the CLI may
 * send to migrateResource (its start input, each signal and update) and read
 * back (the progress query, the result, each update's answer). Generated from
 * the zod schemas the workflow itself checks with, into contract/v<N>/ by
 * `npm run gen:contract` (scripts/gen-contract.ts); test/unit-contract.test.ts fails
 * when the checked-in files and the code drift. Pure: no workflow code.
 */
import { z } from 'zod';
import { MigrationCounters, MigrationPhase, ObjectFailure } from '../api/migration';
import {
  AbortArgSchema,
  AttachArgSchema,
  CONTRACT_VERSION,
  EmptyArgSchema as Empty,
  MigrateResourceInputSchema,
  MigrationOptionsSchema,
  type MigrationProgress,
  type SteerResult,
} from './definitions';
import { DropCheckInputSchema, DropReportSchema, ManagedFieldsInputSchema, ManagedFieldsResultSchema } from './drop';
import { CampaignInputSchema, CampaignStatusSchema, ClusterReportSchema } from './fleet';

export const ProgressSchema = z
  .object({
    resource: z.string().describe('plural.group, e.g. gizmos.example.com'),
    phase: MigrationPhase,
    counters: MigrationCounters,
    failures: z.array(ObjectFailure).describe('the first objects whose update was refused, with the reason'),
    continueTokenPresent: z.boolean(),
    remainingEstimate: z.number().int().optional(),
    objectsPerSecond: z.number(),
    startedAt: z.number().describe('milliseconds since the epoch'),
    runs: z.number().int(),
    restarts: z.number().int().describe('times the whole pass started over (the agreement moved)'),
    message: z.string().optional(),
    record: z
      .object({
        by: z.enum(['svm', 'built-in']).describe("who rewrote the objects: svm, or the built-in migrator on svm's object"),
        object: z.string().optional().describe("the built-in's StorageVersionMigration, when by is built-in"),
        encodingVersion: z.string().describe('the version the API servers agreed to encode in, from start to end'),
        storageVersionHash: z.string().optional().describe("discovery's storageVersionHash of that encoding"),
        verified: z.boolean().describe('every API server asked at its own address'),
        checked: z.string().describe('what was checked'),
        token: z.string().describe('the agreement token at the final check: any API server restart since changes it'),
        at: z.number().optional().describe('when the final agreement was read, milliseconds since the epoch'),
      })
      .optional()
      .describe('on a Succeeded result only: the record of the whole pass that verdicts rest on'),
    migrationObjects: z
      .array(z.string())
      .describe('StorageVersionMigration objects that mirror it: a name, or storagemigration.k8s.io/<name>'),
  })
  .describe('the progress query (name "progress") and the result of the workflow');

export const SteerResultSchema = ProgressSchema.extend({
  paused: z.boolean(),
  abortRequested: z.string().optional(),
}).describe('the answer of pauseMigration, resumeMigration and abortMigration');

// The schemas describe exactly the types the workflow uses: a change to one without the other does not compile.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameProgress: Same<z.infer<typeof ProgressSchema>, MigrationProgress> = true;
const sameSteer: Same<z.infer<typeof SteerResultSchema>, SteerResult> = true;
void sameProgress;
void sameSteer;

/** What a caller sends to start: everything but the state svm carries across continue-as-new. */
export const StartInputSchema = MigrateResourceInputSchema.omit({ carried: true }).describe(
  'the start input of migrateResource; minimal: {"resource": "gizmos.example.com"}',
);

/** Every file of contract/v<CONTRACT_VERSION>/, by name. */
export function contractSchemas(): Record<string, unknown> {
  const schema = (s: z.ZodType, title: string) => ({
    ...z.toJSONSchema(s, { io: 'input' }),
    title,
    'x-contract-version': CONTRACT_VERSION,
  });
  return {
    'start-input': schema(StartInputSchema, 'migrateResource start input'),
    options: schema(MigrationOptionsSchema.partial(), 'migration options (all optional)'),
    progress: schema(ProgressSchema, 'progress query'),
    result: schema(
      ProgressSchema,
      'workflow result (Succeeded or Aborted; a Failed migration fails the workflow with this document in its details)',
    ),
    'signal-abort': schema(AbortArgSchema, 'signal "abort"'),
    'signal-pause': schema(Empty, 'signal "pause"'),
    'signal-resume': schema(Empty, 'signal "resume"'),
    'signal-attachMigrationObject': schema(AttachArgSchema, 'signal "attachMigrationObject"'),
    'update-pauseMigration-input': schema(Empty, 'update "pauseMigration" input'),
    'update-resumeMigration-input': schema(Empty, 'update "resumeMigration" input'),
    'update-abortMigration-input': schema(AbortArgSchema, 'update "abortMigration" input'),
    'update-steer-result': schema(SteerResultSchema, 'answer of pauseMigration, resumeMigration, abortMigration'),
    'update-resolution-input': schema(Empty, 'update "resolution" input'),
    'drop-check-input': schema(DropCheckInputSchema, 'checkVersionDrop start input'),
    'drop-check-result': schema(DropReportSchema, 'checkVersionDrop result, and the output of svm plan --drop -o json'),
    'managed-fields-input': schema(ManagedFieldsInputSchema, 'rewriteManagedFields start input'),
    'campaign-input': schema(CampaignInputSchema, 'fleetCampaign start input'),
    'campaign-status': schema(
      CampaignStatusSchema,
      'fleetCampaign result, campaignStatus query, and the output of svm fleet status -o json',
    ),
    'signal-clusterSeen': schema(ClusterReportSchema, 'signal "clusterSeen" of clusterRegistration: a worker\'s report of its cluster'),
    'managed-fields-result': schema(ManagedFieldsResultSchema, 'rewriteManagedFields result, and the output of svm managed-fields -o json'),
    'update-resolution-result': schema(
      MigrateResourceInputSchema.shape.resource.options[1],
      'answer of "resolution": the resolved resource',
    ),
  };
}
