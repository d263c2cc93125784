/**
 * The defaults of a migration's options and of the initializer's parallelism, as plain values: `svm migrate --help`
 * shows them without loading zod or the rest of the contract (test/unit-cli-start.test.ts), and the workflow reads
 * the same object (definitions.ts re-exports it).
 */
import type { MigrationOptions } from './definitions';

export const defaultMigrationOptions: MigrationOptions = {
  chunkSize: 2000,
  pageBytes: 64 * 1024 * 1024,
  concurrency: 8,
  qps: 0,
  maxChunksPerRun: 200,
  heartbeatTimeoutSeconds: 30,
  taskStartTimeoutSeconds: 120,
  agreementPollSeconds: 15,
  unverifiedAgreementSeconds: 120,
};

/** Migrations at once of `svm migrate --all` or several resources (Migrator.migrateAll, startAll) when none is given. */
export const DEFAULT_MIGRATE_ALL_PARALLELISM = 4;
