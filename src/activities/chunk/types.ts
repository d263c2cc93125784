/**
 * What a chunk of a migration takes and gives (the activity's input and result, the pause's resume point) and
 * what it is built from (its dependencies): the types that migrate-chunk.ts and its parts share, in a module
 * of their own so that the parts need not import the activity that uses them.
 */
import type { MigrationCounters, ObjectFailure } from '../../api/migration';
import type { ResourceRef } from '../../api/resource';
import type { AdaptiveConcurrency } from '../../kube/adaptive-concurrency';
import type { ApiServerSource } from '../../kube/apiservers';
import type { KubeClient, RewriteMethod } from '../../kube/client';
import type { ListAhead } from '../../kube/list-ahead';
import type { MemoryBudget } from '../../kube/memory-budget';
import type { RateLimiter } from '../../kube/rate-limit';

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

export interface ChunkDeps {
  kube: KubeClient;
  /** The worker-wide load budget shared by all migrations. */
  budget: RateLimiter;
  /** Updates in flight across the worker, adapted to the API servers' latency (src/kube/adaptive-concurrency.ts). */
  concurrency?: AdaptiveConcurrency;
  /** A per-resource limiter for the migration's own --qps. */
  limiterFor(resource: string, qps: number): RateLimiter | undefined;
  /** Called once per object with its outcome and the latency of its last attempt (metrics). */
  observe?(resource: string, outcome: 'migrated' | 'conflict' | 'notFound' | 'failed', seconds: number, rewritten: boolean): void;
  /** Bytes of listed objects waiting for or in their update before the list is read further (default: listBufferBytes()). */
  listBufferBytes?: number;
  /** The worker-wide memory budget shared by every chunk in the process; unset: only the chunk's own list buffer. */
  memory?: MemoryBudget;
  /** Rewrite every object by PUT (measurement only; default: SVM_REWRITE_METHOD, else the empty patch). */
  rewrite?: RewriteMethod;
  /** The worker's pages listed ahead (src/kube/list-ahead.ts); unset: every chunk lists its own page. */
  listAhead?: ListAhead;
  /**
   * SVM_REQUIRE_FENCE: rewrite a resource's objects only while a dry run finds svm's fence in force on them
   * (src/kube/fence-probe.ts); unset: no probe. Admission objects go by requireStaticFence instead.
   */
  requireFence?: boolean;
  /**
   * SVM_REQUIRE_STATIC_FENCE: rewrite objects that only the manifest-loaded fence can guard (admission objects) only
   * while a dry run finds it in force at every API server (src/kube/fence-probe.ts); unset: no probe.
   */
  requireStaticFence?: boolean;
  /** The API servers, each asked at its own address by the manifest-loaded fence's probe; unset: the one address. */
  apiservers?: ApiServerSource;
}
