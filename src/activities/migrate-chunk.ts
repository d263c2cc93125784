/**
 * One chunk of a migration: list one page, no-op update each object with
 * bounded concurrency under the shared QPS budget, and return counters and the
 * next continue token. Never object data: only counts, names of refused
 * objects with their reason, and tokens.
 *
 * Error policy, per object (rule 2 and 5 of DESIGN.md):
 *   2xx            migrated (rewritten when its resourceVersion changed)
 *   409            changed after the list, so already current: counted, never retried
 *   404 of it      deleted after the list (the Status names this object of this
 *                  resource): counted as notFound, skipped
 *   other 404      the resource itself is not served (a version no longer served,
 *                  a CRD changed or deleted): the chunk stops, non-retryable
 *                  'ResourceGone', nothing counted as notFound; so does a 404 on the list
 *   429/5xx/timeout/reset   retried with backoff (Retry-After pauses the shared budget), bounded
 *   403/422/400/webhook denial   a per-object failure with its reason; the rest goes on
 *   anything else  the migration cannot go on: a non-retryable failure with the reason
 * A 410 on the continue token resumes from the inconsistent token in the error
 * body, and restarts the list only when there is none.
 *
 * Reasons recorded per object and failure messages are KubeError messages,
 * which never quote a response body (src/kube/errors.ts, rule 4).
 *
 * A crash mid-chunk loses nothing: heartbeats carry the counters and the
 * index below which every object is done, and the retry resumes there.
 */
import { Context, ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { zeroCounters } from '../api/counters';
import type { MigrationCounters, ObjectFailure } from '../api/migration';
import type { KubeClient, ListedObject, ListPage } from '../kube/client';
import { isPerObjectFailure, isRetryable, KubeError } from '../kube/errors';
import { sleep, type RateLimiter } from '../kube/rate-limit';

export interface ChunkOptions {
  chunkSize: number;
  concurrency: number;
  /** Per-migration QPS ceiling; 0 = only the worker's shared budget. */
  qps: number;
}

export interface ChunkInput {
  resource: ResourceRef;
  continueToken?: string;
  options: ChunkOptions;
}

export interface ChunkResult {
  counters: MigrationCounters;
  failures: ObjectFailure[];
  /** Undefined when the list is complete. */
  continueToken?: string;
  remainingItemCount?: number;
  listed: number;
}

interface ChunkHeartbeat {
  /** Key (namespace/name) up to which every object of the page is finished: a re-list resumes after it. */
  lastKey?: string;
  counters: MigrationCounters;
  failures: ObjectFailure[];
  tokenResumed: boolean;
  listRestarted: boolean;
}

export const MAX_FAILURES_KEPT = 50;
const MAX_OBJECT_ATTEMPTS = 8;


const keyOf = (o: ListedObject) => `${o.namespace ?? ''}/${o.name}`;

/** The failure type of a chunk whose resource is not served (any more): the workflow starts the pass over. */
export const RESOURCE_GONE = 'ResourceGone';

/**
 * A 404 on the PUT of obj means "this object is deleted" only when the Status
 * says so: details.name is the object's name and details.group/kind are this
 * resource (the API server puts the resource's plural in `kind`). A 404
 * without them ("the server could not find the requested resource") is the
 * resource itself gone.
 */
export function isObjectNotFound(e: KubeError, resource: Pick<ResourceRef, 'group' | 'resource' | 'kind'>, obj: Pick<ListedObject, 'name'>): boolean {
  if (e.kind !== 'notFound' || e.info.resourceNotServed) return false;
  const d = e.info.details;
  if (!d || d.name !== obj.name) return false;
  if ((d.group ?? '') !== resource.group) return false;
  const kind = (d.kind ?? '').toLowerCase();
  return kind === resource.resource.toLowerCase() || kind === resource.kind.toLowerCase();
}

export interface ChunkDeps {
  kube: KubeClient;
  /** The worker-wide load budget shared by all migrations. */
  budget: RateLimiter;
  /** A per-resource limiter for the migration's own --qps. */
  limiterFor(resource: string, qps: number): RateLimiter | undefined;
  /** Called once per object with its outcome and the latency of its last attempt (metrics). */
  observe?(resource: string, outcome: 'migrated' | 'conflict' | 'notFound' | 'failed', seconds: number, rewritten: boolean): void;
}

export async function migrateChunk(deps: ChunkDeps, input: ChunkInput): Promise<ChunkResult> {
  const ctx = Context.current();
  const { resource, options } = input;
  const name = groupResourceString(resource);
  const resumed = ctx.info.heartbeatDetails as ChunkHeartbeat | undefined;
  const hb: ChunkHeartbeat = resumed ?? { counters: zeroCounters(), failures: [], tokenResumed: false, listRestarted: false };

  // -- list one page
  let page: ListPage;
  let continueToken = input.continueToken;
  for (;;) {
    try {
      page = await deps.kube.listPage(resource, { limit: options.chunkSize, continueToken });
      break;
    } catch (err) {
      if (err instanceof KubeError && err.kind === 'gone' && continueToken !== undefined) {
        if (err.continueToken) {
          ctx.log.warn('continue token expired; resuming from the inconsistent continue token', { resource: name });
          continueToken = err.continueToken;
          hb.tokenResumed = true;
        } else {
          ctx.log.warn('continue token expired and no inconsistent token was given; restarting the list', { resource: name });
          continueToken = undefined;
          hb.listRestarted = true;
        }
        continue;
      }
      throw toFailure(err, `listing ${name}`, resource);
    }
  }

  // -- skip what a previous attempt of this chunk finished
  let start = 0;
  if (resumed?.lastKey !== undefined) {
    const at = page.items.findIndex((o) => keyOf(o) > resumed.lastKey!);
    start = at < 0 ? page.items.length : at;
  }

  const limiter = deps.limiterFor(name, options.qps);
  const finished = new Array<boolean>(page.items.length).fill(false);
  for (let i = 0; i < start; i++) finished[i] = true;
  let next = start;
  let fatal: unknown;
  let lastBeat = 0;
  let doneIdx = start; // every object below doneIdx is finished
  const beat = (force = false) => {
    while (doneIdx < finished.length && finished[doneIdx]) doneIdx++;
    if (doneIdx > 0) hb.lastKey = keyOf(page.items[doneIdx - 1]!);
    const now = Date.now();
    if (force || now - lastBeat > 1000) {
      lastBeat = now;
      ctx.heartbeat(hb);
    }
  };

  const updateOne = async (obj: ListedObject): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      await deps.budget.take();
      if (limiter) await limiter.take();
      const t0 = performance.now();
      const seconds = () => (performance.now() - t0) / 1000;
      try {
        const rv = await deps.kube.noopUpdate(resource, obj);
        hb.counters.migrated++;
        if (rv !== obj.resourceVersion) hb.counters.rewritten++;
        deps.observe?.(name, 'migrated', seconds(), rv !== obj.resourceVersion);
        return;
      } catch (err) {
        const e = err instanceof KubeError ? err : new KubeError('other', err instanceof Error ? `${err.name}: ${err.message}` : String(err));
        if (e.kind === 'conflict') {
          hb.counters.conflicts++;
          deps.observe?.(name, 'conflict', seconds(), false);
          return;
        }
        if (e.kind === 'notFound') {
          if (!isObjectNotFound(e, resource, obj)) throw e; // the resource is gone: toFailure makes it ResourceGone
          hb.counters.notFound++;
          deps.observe?.(name, 'notFound', seconds(), false);
          return;
        }
        if (isPerObjectFailure(e.kind)) {
          hb.counters.failed++;
          deps.observe?.(name, 'failed', seconds(), false);
          if (hb.failures.length < MAX_FAILURES_KEPT) hb.failures.push({ namespace: obj.namespace, name: obj.name, reason: e.message });
          return;
        }
        if (isRetryable(e.kind) && attempt < MAX_OBJECT_ATTEMPTS) {
          const backoff = Math.min(10_000, 200 * 2 ** (attempt - 1));
          const wait = e.retryAfterSeconds !== undefined ? Math.max(backoff, e.retryAfterSeconds * 1000) : backoff;
          if (e.kind === 'throttled') deps.budget.pause(wait);
          await sleep(wait);
          continue;
        }
        throw e;
      }
    }
  };

  const worker = async (): Promise<void> => {
    while (fatal === undefined && !ctx.cancellationSignal.aborted) {
      const i = next++;
      if (i >= page.items.length) return;
      try {
        await updateOne(page.items[i]!);
        finished[i] = true;
        beat();
      } catch (err) {
        fatal ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency, page.items.length - start)) }, worker));
  beat(true);

  const result: ChunkResult = {
    counters: { ...hb.counters, chunks: 1, listRestarts: hb.listRestarted ? 1 : 0, tokenResumes: hb.tokenResumed ? 1 : 0 },
    failures: hb.failures,
    continueToken: page.continueToken,
    remainingItemCount: page.remainingItemCount,
    listed: page.items.length,
  };
  if (ctx.cancellationSignal.aborted) {
    // What was done before the cancel still counts: it travels in the failure's details.
    throw new CancelledFailure(`chunk of ${name} cancelled after ${doneIdx} of ${page.items.length} objects`, [{ ...result, continueToken: undefined }]);
  }
  if (fatal !== undefined) throw toFailure(fatal, `updating ${name}`, resource);
  return result;
}

/**
 * Transient errors stay retryable (the activity's bounded retry policy takes
 * over, resuming from the heartbeat); a 404 that reaches here (on the list, or
 * not naming the object) is the resource gone; the rest fail the migration at
 * once with a clear reason.
 */
function toFailure(err: unknown, doing: string, resource: ResourceRef): Error {
  if (err instanceof KubeError) {
    if (err.kind === 'notFound') {
      return ApplicationFailure.create({
        type: RESOURCE_GONE,
        nonRetryable: true,
        message: `${doing}: ${groupResourceString(resource)} version ${resource.version} is not served (${err.message})`,
      });
    }
    const message = `${doing}: ${err.message}`;
    if (isRetryable(err.kind)) return ApplicationFailure.retryable(message, `Kube${err.kind}`);
    return ApplicationFailure.nonRetryable(message, `Kube${err.kind}`);
  }
  return err instanceof Error ? err : new Error(String(err));
}
