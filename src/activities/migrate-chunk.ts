/**
 * One chunk of a migration: list one page, re-encode each object with
 * bounded concurrency under the shared QPS budget, and return counters and the
 * next continue token. Never object data: only counts, names of refused
 * objects with their reason, and tokens.
 *
 * The rewrite is the GA built-in's: the page is listed as
 * metadata only and each object gets an empty JSON merge patch carrying its
 * resourceVersion (KubeClient.reencode), so no object's content, no Secret
 * value, ever enters the worker. A server that refuses the patch (405 or 415:
 * some aggregated APIs) or the metadata-only list (406) makes this chunk list
 * the page again with content and PUT each object back exactly as listed,
 * going on after what is finished; the result says so (rewrite: 'put') and the
 * workflow keeps the PUT for the rest of the pass and says it in the status.
 *
 * Memory is bounded by bytes, not by the page: the page is read as a stream
 * and each object goes to the updaters as soon as its text is complete. While
 * the objects listed but not yet updated hold more than the list buffer
 * (SVM_LIST_BUFFER_BYTES, 32 MiB by default; at least one object), the
 * response is not read further and TCP keeps the rest at the API server. So a
 * page of 500 one-megabyte Secrets costs about the buffer plus one reply per
 * updater, not 500 MB. Above the chunks, the worker's memory budget
 * (SVM_MEMORY_BUDGET_BYTES, src/kube/memory-budget.ts) bounds the bytes that
 * every chunk of every migration in the process holds together: each object's
 * bytes are taken from it before the list is read further and given back when
 * its update ends, so four migrations of large objects at once hold what one
 * budget allows, not four buffers. Should the API server cut a slow response off, the
 * page is listed again with the same continue token and resumes after the
 * last finished object, as long as each listing makes progress.
 *
 * Error policy, per object:
 *   2xx            migrated (rewritten when its resourceVersion changed)
 *   409            changed after the list, so already current: counted, never retried
 *   404 of it      deleted after the list (the Status names this object of this
 *                  resource): counted as notFound, skipped
 *   other 404      the resource itself is not served (a version no longer served,
 *                  a CRD changed or deleted): the chunk stops, non-retryable
 *                  'ResourceGone', nothing counted as notFound; so does a 404 on the list
 *   429            the server asks to wait: waited out (Retry-After, at least a growing backoff up
 *                  to 10 s, pausing the shared budget) and sent again, never counted as an attempt,
 *                  so throttling (API Priority and Fairness) slows a migration but never fails it
 *   5xx/timeout/reset   retried with backoff, at most 8 attempts per object
 *   403/422/400/webhook denial   a per-object failure with its reason; the rest goes on
 *   anything else  the migration cannot go on: a non-retryable failure with the reason
 * A 410 on the continue token resumes from the inconsistent token in the error
 * body, and restarts the list only when there is none.
 *
 * Reasons recorded per object and failure messages are KubeError messages,
 * which never quote a response body (src/kube/errors.ts, rule 4).
 *
 * A crash mid-chunk loses nothing and counts nothing twice: each heartbeat
 * is a snapshot of the counters, the key below which every object is done,
 * and the keys above it that are done too (updates finish out of order); the
 * retry resumes there and skips them. The chunk heartbeats every second while
 * it lives, progress or not: a chunk whose updates all wait on 429s is slow,
 * not dead, and must not be timed out and run twice at once.
 */
import { setMaxListeners } from 'node:events';
import { Context, ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { zeroCounters } from '../api/counters';
import type { MigrationCounters, ObjectFailure } from '../api/migration';
import type { KubeClient, ListedObject, ListMeta, RewriteMethod } from '../kube/client';
import { isPerObjectFailure, isRetryable, KubeError } from '../kube/errors';
import type { AdaptiveConcurrency } from '../kube/adaptive-concurrency';
import type { ListAhead } from '../kube/list-ahead';
import type { MemoryBudget } from '../kube/memory-budget';
import { sleep, WaitAbortedError, type RateLimiter } from '../kube/rate-limit';

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

interface ChunkHeartbeat {
  /** Key (namespace/name) up to which every object of the page is finished: a re-list resumes after it. */
  lastKey?: string;
  /** Keys after lastKey whose objects are finished too (and counted): a re-list skips them. */
  doneAfter?: string[];
  counters: MigrationCounters;
  failures: ObjectFailure[];
  tokenResumed: boolean;
  listRestarted: boolean;
  /** Set once this chunk found the empty patch refused: a retry lists with content and PUTs. */
  rewrite?: 'put';
  /** Set once this chunk listed its page with content cut to options.contentLimit: every listing of it (a retry's too) is. */
  contentLimited?: boolean;
}

export const MAX_FAILURES_KEPT = 50;
const MAX_OBJECT_ATTEMPTS = 8;
export const DEFAULT_LIST_BUFFER_BYTES = 32 * 1024 * 1024;

/** The list buffer: deps, else SVM_LIST_BUFFER_BYTES, else 32 MiB. */
export function listBufferBytes(deps: Pick<ChunkDeps, 'listBufferBytes'>): number {
  const fromEnv = Number(process.env.SVM_LIST_BUFFER_BYTES);
  const v = deps.listBufferBytes ?? (Number.isFinite(fromEnv) && fromEnv > 0 ? fromEnv : DEFAULT_LIST_BUFFER_BYTES);
  return Math.max(1, v);
}

/**
 * SVM_REWRITE_METHOD=put makes every chunk of this worker rewrite by PUT as listed, content and all: for
 * measuring the two paths side by side (npm run bench:memory -- --rewrite patch --rewrite put), never needed
 * otherwise (a server that refuses the patch is found at run time). Unset or `patch`: the empty patch.
 */
function forcedRewrite(deps: Pick<ChunkDeps, 'rewrite'>): RewriteMethod | undefined {
  if (deps.rewrite) return deps.rewrite;
  return process.env.SVM_REWRITE_METHOD === 'put' ? 'put' : undefined;
}

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
export function isObjectNotFound(
  e: KubeError,
  resource: Pick<ResourceRef, 'group' | 'resource' | 'kind'>,
  obj: Pick<ListedObject, 'name'>,
): boolean {
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
}

/** Thrown into the list stream to stop reading it (a fatal update error, or a cancel). */
class StopListing extends Error {}

/** The server refuses the empty merge patch or the metadata-only list: this resource is rewritten by PUT. */
class PatchRefused extends Error {}

/**
 * 405 MethodNotAllowed or 415 UnsupportedMediaType on the patch, 406
 * NotAcceptable on the metadata-only list: the server cannot do the built-in's
 * rewrite for this resource (some aggregated APIs), so the chunk falls back to
 * the PUT. Never a 403 (RBAC) or a denial: those are failures as before.
 */
export function refusesPatch(e: KubeError, on: 'patch' | 'list'): boolean {
  return on === 'patch' ? e.status === 405 || e.status === 415 : e.status === 406;
}

export async function migrateChunk(deps: ChunkDeps, input: ChunkInput): Promise<ChunkResult> {
  const ctx = Context.current();
  const { resource, options } = input;
  const name = groupResourceString(resource);
  // A retry of this activity goes on from its heartbeat; a chunk stopped by a pause, from where the workflow says.
  const resumed = ctx.info.heartbeatDetails as ChunkHeartbeat | undefined;
  const hb: ChunkHeartbeat = resumed ?? {
    counters: zeroCounters(),
    failures: [],
    tokenResumed: false,
    listRestarted: false,
    ...(input.resume?.afterKey !== undefined ? { lastKey: input.resume.afterKey } : {}),
  };
  // Finished objects after the watermark (hb.lastKey), counted (here or before the pause): never updated or counted again.
  const doneAfter = new Set<string>(resumed ? (resumed.doneAfter ?? []) : (input.resume?.doneAfter ?? []));

  let method: RewriteMethod = hb.rewrite ?? input.rewrite ?? forcedRewrite(deps) ?? 'patch';
  const limiter = deps.limiterFor(name, options.qps);
  const bufferBytes = listBufferBytes(deps);
  let fatal: unknown;
  let lastBeat = 0;
  const stopping = () => fatal !== undefined || ctx.cancellationSignal.aborted;
  // Fires on a cancel or on this chunk's first fatal error: ends a wait for the worker's memory budget, which
  // must never outlast the chunk (the bytes its queue holds are given back only once its listing has ended).
  let stopped = new AbortController();
  // Every updater waiting for the budget listens on these: as many listeners as the concurrency, not a leak.
  setMaxListeners(0, ctx.cancellationSignal, stopped.signal);
  const onCancel = () => stopped.abort();
  ctx.cancellationSignal.addEventListener('abort', onCancel);
  const failWith = (err: unknown) => {
    fatal ??= err;
    stopped.abort();
  };

  // Per listing of the page: the key of every object seen, which are finished, and the watermark.
  let keys: string[] = [];
  let finished: boolean[] = [];
  let doneIdx = 0; // every object below doneIdx is finished
  const beat = (force = false) => {
    while (doneIdx < finished.length && finished[doneIdx]) doneIdx++;
    if (doneIdx > 0) hb.lastKey = keys[doneIdx - 1];
    const now = Date.now();
    if (force || now - lastBeat > 1000) {
      lastBeat = now;
      for (const k of doneAfter) if (hb.lastKey !== undefined && k <= hb.lastKey) doneAfter.delete(k);
      // A snapshot: counters, watermark and done keys of one moment, whenever the SDK sends it.
      ctx.heartbeat({
        ...hb,
        counters: { ...hb.counters },
        failures: [...hb.failures],
        doneAfter: [...doneAfter],
      } satisfies ChunkHeartbeat);
    }
  };
  // Alive is not the same as progressing: beat while updates wait out 429s and backoffs.
  const keepAlive = setInterval(() => beat(), 1000);

  /** Updates one object; settle() marks it finished in the same step that counts it (a heartbeat never sees one without the other). */
  const updateOne = async (obj: ListedObject, settle: () => void): Promise<void> => {
    // A 429 is the server asking to wait, not a failure: it never uses up an attempt, however long it lasts
    // (the chunk stays alive by its heartbeat, and a cancel or a fatal error elsewhere still stops it).
    for (let attempt = 1, throttled = 0; ;) {
      if (stopping()) return;
      let t0 = performance.now();
      const seconds = () => (performance.now() - t0) / 1000;
      /**
       * One PUT under the worker's adaptive concurrency and the budgets (undefined: stopped while waiting for them);
       * the limit learns from answers the server processed.
       */
      const put = async (): Promise<string | undefined> => {
        await deps.concurrency?.acquire();
        let answered: number | undefined;
        try {
          // Cancellable: a pause or an abort ends the wait at once, even while the budget is held shut.
          try {
            await deps.budget.take(ctx.cancellationSignal);
            if (limiter) await limiter.take(ctx.cancellationSignal);
          } catch (err) {
            if (err instanceof WaitAbortedError) return undefined;
            throw err;
          }
          if (stopping()) return undefined;
          t0 = performance.now();
          try {
            const rv = method === 'patch' ? await deps.kube.reencode(resource, obj) : await deps.kube.putAsListed(resource, obj);
            answered = seconds();
            return rv;
          } catch (err) {
            if (err instanceof KubeError && err.kind === 'conflict') answered = seconds();
            throw err;
          }
        } finally {
          deps.concurrency?.release(answered, obj.raw?.length);
        }
      };
      try {
        const rv = await put();
        if (rv === undefined) return;
        hb.counters.migrated++;
        if (rv !== obj.resourceVersion) hb.counters.rewritten++;
        settle();
        deps.observe?.(name, 'migrated', seconds(), rv !== obj.resourceVersion);
        return;
      } catch (err) {
        const e =
          err instanceof KubeError ? err : new KubeError('other', err instanceof Error ? `${err.name}: ${err.message}` : String(err));
        if (method === 'patch' && refusesPatch(e, 'patch')) throw new PatchRefused(e.message);
        if (e.kind === 'conflict') {
          hb.counters.conflicts++;
          settle();
          deps.observe?.(name, 'conflict', seconds(), false);
          return;
        }
        if (e.kind === 'notFound') {
          if (!isObjectNotFound(e, resource, obj)) throw e; // the resource is gone: toFailure makes it ResourceGone
          hb.counters.notFound++;
          settle();
          deps.observe?.(name, 'notFound', seconds(), false);
          return;
        }
        if (isPerObjectFailure(e.kind)) {
          hb.counters.failed++;
          deps.observe?.(name, 'failed', seconds(), false);
          if (hb.failures.length < MAX_FAILURES_KEPT) hb.failures.push({ namespace: obj.namespace, name: obj.name, reason: e.message });
          settle();
          return;
        }
        if (e.kind === 'throttled') {
          const backoff = Math.min(10_000, 200 * 2 ** Math.min(throttled++, 6));
          const wait = Math.max(backoff, (e.retryAfterSeconds ?? 0) * 1000);
          deps.budget.pause(wait);
          deps.concurrency?.throttled(); // fewer in flight once the pause ends
          await sleep(wait);
          continue;
        }
        if (isRetryable(e.kind) && attempt < MAX_OBJECT_ATTEMPTS) {
          const backoff = Math.min(10_000, 200 * 2 ** (attempt - 1));
          const wait = e.retryAfterSeconds !== undefined ? Math.max(backoff, e.retryAfterSeconds * 1000) : backoff;
          attempt++;
          await sleep(wait);
          continue;
        }
        throw e;
      }
    }
  };

  // -- the objects between the list stream and the updaters, bounded by bytes
  interface Job {
    i: number;
    obj: ListedObject;
    bytes: number;
  }
  const queue: Job[] = [];
  let held = 0; // bytes of objects queued or being updated
  let listingDone = false;
  // Whoever waits (the list stream for room, idle updaters for work) waits for the next change, then looks again.
  let waiters: Array<() => void> = [];
  const signal = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const changed = () => new Promise<void>((r) => waiters.push(r));
  ctx.cancellationSignal.addEventListener('abort', signal);

  const updater = async (): Promise<void> => {
    for (;;) {
      if (stopping()) return;
      const job = queue.shift();
      if (!job) {
        if (listingDone) return;
        await changed();
        continue;
      }
      try {
        await updateOne(job.obj, () => {
          finished[job.i] = true;
          doneAfter.add(keys[job.i]!);
        });
        beat();
      } catch (err) {
        failWith(err);
      } finally {
        held -= job.bytes;
        deps.memory?.release(job.bytes);
        signal();
      }
    }
  };

  // This chunk's first listing may take its page from what an earlier chunk listed ahead (the same snapshot); a
  // listing again (after a 410, a cut-off response, a refused patch) always asks the API server.
  let firstListing = true;
  /** Lists the page once, feeding the updaters; resolves with the page's metadata when every listed object is done. */
  const listAndUpdate = async (token: string | undefined, resumeAfter: string | undefined): Promise<ListMeta> => {
    keys = [];
    finished = [];
    doneIdx = 0;
    listingDone = false;
    let skipping = resumeAfter !== undefined;
    // More updaters than `concurrency` would be waiting anyway: each is started by the object that needs it.
    const updaters: Array<Promise<void>> = [];
    let listErr: unknown;
    let meta: ListMeta | undefined;
    try {
      const content = method === 'put';
      // A first page listed with content is cut to its content limit when nothing of it is finished yet (after a
      // refused patch, nothing was), and so is every later listing of it, a retry's included (the heartbeat says so).
      // Once something is finished under the full limit the page keeps it: what a shorter page left out would be
      // listed, and counted, again by the next chunk.
      if (content && options.contentLimit !== undefined && hb.lastKey === undefined && doneAfter.size === 0) hb.contentLimited = true;
      const limit =
        content && hb.contentLimited
          ? Math.max(1, Math.min(options.chunkSize, options.contentLimit ?? options.chunkSize))
          : options.chunkSize;
      const onItem = async (obj: ListedObject, bytes: number): Promise<void> => {
        if (stopping()) throw new StopListing();
        const i = keys.length;
        keys.push(keyOf(obj));
        // Skip what a previous attempt (or listing) of this chunk finished.
        if ((skipping && keyOf(obj) <= resumeAfter!) || doneAfter.has(keyOf(obj))) {
          finished.push(true);
          return;
        }
        skipping = false;
        finished.push(false);
        // The worker's memory budget, in turn with every other chunk of the process: the list is not read further
        // until this object's bytes are granted (a stop gives the wait up; the object is then not finished).
        if (deps.memory) {
          try {
            await deps.memory.acquire(bytes, stopped.signal);
          } catch (err) {
            if (err instanceof WaitAbortedError) throw new StopListing();
            throw err;
          }
        }
        held += bytes;
        queue.push({ i, obj, bytes });
        if (updaters.length < options.concurrency) updaters.push(updater());
        signal();
        // Backpressure: read no further while the objects held exceed the buffer and some
        // wait for an updater (the updaters are never starved: held stays below the buffer
        // plus one object per updater).
        while (held > bufferBytes && queue.length > 0 && !stopping()) await changed();
      };
      const ahead = firstListing && !content && token !== undefined ? await deps.listAhead?.take(resource, token, limit) : undefined;
      firstListing = false;
      if (ahead) {
        for (const { obj, bytes } of ahead.items) await onItem(obj, bytes);
        meta = ahead.meta;
      } else {
        meta = await deps.kube.listEach(resource, { limit, continueToken: token, content }, onItem);
      }
      // The page is read whole: list the next one while its objects are updated (metadata only; the next chunk takes it).
      if (!content && meta.continueToken && !stopping()) deps.listAhead?.start(resource, meta.continueToken, limit);
    } catch (err) {
      listErr = err;
    }
    listingDone = true;
    signal(); // idle updaters see the end
    await Promise.all(updaters);
    for (const job of queue) {
      // left by a stop
      held -= job.bytes;
      deps.memory?.release(job.bytes);
    }
    queue.length = 0;
    if (listErr !== undefined && !(listErr instanceof StopListing)) throw listErr;
    return meta ?? { items: keys.length, bytes: 0 };
  };

  // -- list the page (again, after a 410 or a cut-off stream) until every object of it is done
  let continueToken = input.continueToken;
  let resumeAfter = hb.lastKey;
  let meta: ListMeta | undefined;
  for (;;) {
    try {
      meta = await listAndUpdate(continueToken, resumeAfter);
      if (!(fatal instanceof PatchRefused)) break;
      throw fatal;
    } catch (err) {
      if (method === 'patch' && (err instanceof PatchRefused || (err instanceof KubeError && refusesPatch(err, 'list')))) {
        // The server cannot do the built-in's rewrite here: list the page again with content and PUT, after what is finished.
        ctx.log.warn('the server refuses the empty merge patch or the metadata-only list; rewriting by PUT as listed', {
          resource: name,
          reason: err.message,
        });
        method = 'put';
        hb.rewrite = 'put';
        fatal = undefined;
        stopped = new AbortController();
        setMaxListeners(0, stopped.signal);
        beat(true);
        resumeAfter = hb.lastKey;
        continue;
      }
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
      // A response cut off mid-page (the API server's request timeout while we held it back):
      // list the page again and resume after the watermark, as long as this listing got further.
      beat(true);
      if (fatal !== undefined) break; // an update's error says more than the stream it stopped
      if (
        err instanceof KubeError &&
        isRetryable(err.kind) &&
        !ctx.cancellationSignal.aborted &&
        hb.lastKey !== undefined &&
        hb.lastKey !== resumeAfter
      ) {
        ctx.log.warn('list response cut off mid-page; listing the page again after the last finished object', {
          resource: name,
          kind: err.kind,
        });
        resumeAfter = hb.lastKey;
        continue;
      }
      clearInterval(keepAlive);
      ctx.cancellationSignal.removeEventListener('abort', onCancel);
      throw unreadable(err, `listing ${name}`, Date.now() - ctx.info.scheduledTimestampMs) ?? toFailure(err, `listing ${name}`, resource);
    }
  }
  clearInterval(keepAlive);
  ctx.cancellationSignal.removeEventListener('abort', signal);
  ctx.cancellationSignal.removeEventListener('abort', onCancel);
  beat(true);
  const listed = meta?.items ?? keys.length;

  const result: ChunkResult = {
    counters: { ...hb.counters, chunks: 1, listRestarts: hb.listRestarted ? 1 : 0, tokenResumes: hb.tokenResumed ? 1 : 0 },
    failures: hb.failures,
    continueToken: meta?.continueToken,
    remainingItemCount: meta?.remainingItemCount,
    listed,
    ...(meta?.bytes ? { listedBytes: meta.bytes } : {}),
    ...(method === 'put' ? { rewrite: 'put' as const } : {}),
    ...(hb.contentLimited ? { contentLimited: true as const } : {}),
  };
  if (ctx.cancellationSignal.aborted) {
    // What was done before the cancel still counts: it travels in the failure's details.
    throw new CancelledFailure(`chunk of ${name} cancelled after ${doneIdx} of ${listed} objects`, [
      { ...result, continueToken: undefined, resume: { afterKey: hb.lastKey, doneAfter: [...doneAfter] } },
    ]);
  }
  if (fatal !== undefined)
    throw (
      unreadable(fatal, `updating ${name}`, Date.now() - ctx.info.scheduledTimestampMs) ?? toFailure(fatal, `updating ${name}`, resource)
    );
  return result;
}

/** How long the API servers may fail to convert a resource's objects before its migration fails, naming it (the built-in's bound). */
export const CONVERSION_FAILURE_BOUND_MS = 60_000;

/**
 * A list or an update the API servers answer with a failed conversion webhook (a CRD whose webhook is down: the
 * list may still be served from the watch cache, the update reads the object from etcd) is retried like
 * any server error, but not for ever: once this chunk's attempts have spanned CONVERSION_FAILURE_BOUND_MS, the
 * migration fails naming the broken webhook (kubernetes/kubernetes#127105: a resource that cannot be read must
 * not hold up the others, and must be named). Undefined for any other error.
 */
export function unreadable(err: unknown, doing: string, triedMs: number): ApplicationFailure | undefined {
  if (!(err instanceof KubeError) || !isRetryable(err.kind) || !err.info.conversionFailed) return undefined;
  if (triedMs < CONVERSION_FAILURE_BOUND_MS) return undefined;
  return ApplicationFailure.create({
    type: 'ConversionWebhookFailed',
    nonRetryable: true,
    message: `${doing}: the API servers cannot convert its objects (tried for ${Math.round(triedMs / 1000)}s): ${err.message}`,
  });
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
