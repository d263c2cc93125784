/**
 * What the migration workflow and its migrateChunk activity exchange: a chunk's input (the page to list, how to
 * rewrite, where a paused one left off) and its result (counters, the failures kept, the next page's token).
 * Made by src/activities/migrate-chunk.ts, read by src/workflows/migrate-resource.ts.
 * Note: both travel in workflow history, read back by workers of other versions: add fields, never change one.
 */
import type { MigrationCounters, ObjectFailure } from '../api/migration';
import type { ResourceRef } from '../api/resource';

/** How a chunk rewrites each object: the empty merge patch, or a PUT as listed where a server refuses the patch. */
export type RewriteMethod = 'patch' | 'put';

/**
 * The failed objects a migration keeps: a chunk's result holds at most this many, and so does the workflow's state
 * across continue-as-new (the first ones). The counters count them all.
 */
export const MAX_FAILURES_KEPT = 50;

export interface ChunkOptions {
  chunkSize: number;
  /**
   * Set on a migration's first page, listed as metadata only with the chunk size: should this chunk have to list it
   * with content instead (the server refuses the empty patch or the metadata-only list), that page holds at most this
   * many objects, their size not known yet (FIRST_PAGE_LIMIT). Absent: a page with content holds chunkSize.
   */
  contentLimit?: number;
  concurrency: number;
  /** Per-migration QPS ceiling; 0 = only the worker's shared budget. */
  qps: number;
}

/** Where a chunk stopped by a pause left off: its next run lists the same page and skips what is finished. */
export interface ChunkResume {
  /** Every object of the page up to this key (namespace/name) is finished and counted. */
  afterKey?: string;
  /** Keys after afterKey whose objects are finished and counted too. */
  doneAfter?: string[];
}

export interface ChunkInput {
  resource: ResourceRef;
  continueToken?: string;
  options: ChunkOptions;
  /** Set when this chunk was stopped by a pause before: go on where it stopped. */
  resume?: ChunkResume;
  /** 'put' once an earlier chunk found the server refusing the empty patch; default 'patch'. */
  rewrite?: RewriteMethod;
}

export interface ChunkResult {
  counters: MigrationCounters;
  failures: ObjectFailure[];
  /** Undefined when the list is complete. */
  continueToken?: string;
  remainingItemCount?: number;
  listed: number;
  /** Bytes of the listed objects' text (the workflow bounds the next page by bytes with it). */
  listedBytes?: number;
  /** Only in a cancelled chunk's details: where it stopped (what its counters count). */
  resume?: ChunkResume;
  /** 'put' when this chunk rewrote by PUT (the server refuses the empty patch); absent for the patch. */
  rewrite?: 'put';
  /** Set when the page was listed with content cut to options.contentLimit (a paused one is resumed at that limit). */
  contentLimited?: true;
}
