/**
 * The workflow contract as the package exports it (`temporal-storage-version-migrator/contract`): what
 * upgrade tooling in TypeScript needs to drive migrateResource through its own Temporal client, without the
 * typed client (src/client) or any workflow code. The same definitions the workflow checks its input with;
 * contract/v<CONTRACT_VERSION>/*.schema.json is their JSON Schema (docs/upgrade-tooling.md).
 */
export * from './definitions';
export { startOptions } from './start-options';
/** The search attribute keys (MigrationResource, MigrationGroup, MigrationPhase, MigrationMigrated) and their definitions. */
export * as searchAttributes from './search-attributes';
export { contractSchemas, ProgressSchema, StartInputSchema, SteerResultSchema } from './json-schema';
export type { Agreement, ServerView } from './agreement';
export type { PassRecord } from './pass-record';
export type { TriggerInput } from './trigger';
export { groupResourceString, migrationWorkflowId, type GroupResource, type ResourceRef } from '../api/resource';
export type { MigrationCounters, MigrationPhase, ObjectFailure } from '../api/migration';
