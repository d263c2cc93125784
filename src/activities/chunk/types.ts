/**
 * What a chunk of a migration is built from (its dependencies), and what it takes and gives (the activity's input
 * and result, the pause's resume point: the workflow's too, so they live in src/contract/chunk.ts and are
 * re-exported here): the types that migrate-chunk.ts and its parts share, in a module of their own so that the
 * parts need not import the activity that uses them.
 */
import type { AdaptiveConcurrency } from '../../kube/adaptive-concurrency';
import type { ApiServerSource } from '../../kube/apiservers';
import type { RewriteMethod } from '../../contract/chunk';
import type { KubeClient } from '../../kube/client';
import type { ListAhead } from '../../kube/list-ahead';
import type { MemoryBudget } from '../../kube/memory-budget';
import type { RateLimiter } from '../../kube/rate-limit';

export type { ChunkInput, ChunkOptions, ChunkResult, ChunkResume } from '../../contract/chunk';

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
