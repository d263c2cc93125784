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
 * some aggregated APIs), its metadata-only reply or the metadata-only list
 * (406) makes this chunk list the page again with content and PUT each object
 * back exactly as listed, going on after what is finished; the result says so
 * (rewrite: 'put') and the workflow keeps the PUT for the rest of the pass and
 * says it in the status.
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
 *   405/406/415 on the patch   the server refuses the empty patch: the page is listed again with content and PUT (above)
 *   anything else  the migration cannot go on: a non-retryable failure with the reason
 * Each row is one Outcome of the rewrite (outcomeOf, chunk/rewrite-one.ts). A
 * 410 on the continue token resumes from the inconsistent token in the error
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
 *
 * The parts, in src/activities/chunk: the page loop (page-loop.ts: list, and
 * list again), the updater pool between the list stream and the updaters
 * (updater-pool.ts: the list buffer, the memory budget), the rewrite of one
 * object (rewrite-one.ts: the policy above), the watermark and the heartbeat
 * (watermark.ts), and what stops a chunk (stop.ts: a cancel, an update's error).
 */
import { Context, ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import { groupResourceString, type ResourceRef } from '../api/resource';
import type { ListMeta, RewriteMethod } from '../kube/client';
import { isRetryable, KubeError } from '../kube/errors';
import { needsManifestFence, probeEachServer, type FenceKind, type ServerFenceProbe } from '../kube/fence-probe';
import { PageLoop } from './chunk/page-loop';
import { ChunkStop } from './chunk/stop';
import type { ChunkDeps, ChunkInput, ChunkResult } from './chunk/types';
import { Watermark } from './chunk/watermark';
import { CONVERSION_WEBHOOK_FAILED, FENCE_NOT_IN_FORCE, kubeFailureType, RESOURCE_GONE } from '../contract/reasons';

export { isObjectNotFound, refusesPatch } from './chunk/rewrite-one';
export type { ChunkDeps, ChunkInput, ChunkOptions, ChunkResult, ChunkResume } from './chunk/types';

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

/** At a worker's start: a warning when SVM_REWRITE_METHOD=put makes it read every object's content. */
export function warnIfRewriteForced(log: { warn(msg: string): void }): void {
  if (forcedRewrite({}) !== 'put') return;
  log.warn(
    "SVM_REWRITE_METHOD=put: every migration lists each resource with its objects' content (Secrets included) and rewrites by PUT; a setting of the memory benchmark, never for a cluster",
  );
}

/** The failure type of a chunk whose resource is not served (any more): the workflow starts the pass over. */
export { RESOURCE_GONE } from '../contract/reasons';

export async function migrateChunk(deps: ChunkDeps, input: ChunkInput): Promise<ChunkResult> {
  const ctx = Context.current();
  const { resource } = input;
  const name = groupResourceString(resource);
  const triedMs = () => Date.now() - ctx.info.scheduledTimestampMs;
  const watermark = Watermark.resume(ctx, input.resume);
  const stop = new ChunkStop(ctx.cancellationSignal);
  // Alive is not the same as progressing: beat while updates wait out 429s and backoffs.
  const keepAlive = setInterval(() => watermark.beat(), 1000);
  try {
    const fence = fenceRequired(deps, resource);
    if (fence) await assertFence(deps, resource, name, fence, triedMs);
    const method = watermark.progress.rewrite ?? input.rewrite ?? forcedRewrite(deps) ?? 'patch';
    const page = new PageLoop(deps, input, { watermark, stop, log: ctx.log, method, bufferBytes: listBufferBytes(deps) });
    const meta = await page.listUntilDone().catch((err: unknown) => {
      throw failureOf(err, `listing ${name}`, resource, triedMs());
    });
    watermark.beat(true);
    const result = resultOf(watermark, meta, page.method);
    if (ctx.cancellationSignal.aborted) {
      // What was done before the cancel still counts: it travels in the failure's details.
      throw new CancelledFailure(`chunk of ${name} cancelled after ${watermark.position} of ${result.listed} objects`, [
        { ...result, continueToken: undefined, resume: watermark.resumePoint },
      ]);
    }
    if (stop.updateError !== undefined) throw failureOf(stop.updateError, `updating ${name}`, resource, triedMs());
    return result;
  } finally {
    clearInterval(keepAlive);
    stop.dispose();
  }
}

/** The failure type of a chunk whose writes the fence it requires (SVM_REQUIRE_FENCE, SVM_REQUIRE_STATIC_FENCE) would not guard. */
export { FENCE_NOT_IN_FORCE } from '../contract/reasons';

/**
 * Which fence a chunk of the resource needs in force: the manifest-loaded one for admission objects (no policy made
 * through the API guards them) where SVM_REQUIRE_STATIC_FENCE is on, any of svm's for every other resource where
 * SVM_REQUIRE_FENCE is on; undefined: none asked.
 */
export function fenceRequired(
  deps: Pick<ChunkDeps, 'requireFence' | 'requireStaticFence'>,
  resource: Pick<ResourceRef, 'group'>,
): FenceKind | undefined {
  if (needsManifestFence(resource)) return deps.requireStaticFence ? 'static' : undefined;
  return deps.requireFence ? 'svm' : undefined;
}

/**
 * Before a chunk: the fence's dry run, each chunk again (a server restarted without the manifest's fence, or an
 * APIService pointed at an aggregated server, answers the next one); the manifest's at every API server. Not in
 * force: the migration fails before anything is written, saying why and what to do.
 */
async function assertFence(deps: ChunkDeps, resource: ResourceRef, name: string, kind: FenceKind, triedMs: () => number): Promise<void> {
  let probes: ServerFenceProbe[];
  try {
    // The manifest's fence at every API server (each loads its own); any of svm's through the one address.
    const one = { via: deps.kube, endpoints: [{ id: deps.kube.server, kube: deps.kube }] };
    probes = await probeEachServer(kind === 'static' && deps.apiservers ? await deps.apiservers.find() : one, resource, kind);
  } catch (err) {
    // As the list's own failure would be: a conversion webhook that stays down fails it, naming the webhook.
    throw failureOf(err, `probing svm's fence for ${name}`, resource, triedMs());
  }
  const open = probes.filter((p): p is ServerFenceProbe & { inForce: false; why: string } => 'inForce' in p && !p.inForce);
  if (open.length === 0) return;
  const probed = open.map((p) => `${kind === 'static' ? `at ${p.server}: ` : ''}${p.why}`).join('; ');
  throw ApplicationFailure.create({
    type: FENCE_NOT_IN_FORCE,
    nonRetryable: true,
    message:
      kind === 'static'
        ? `${name} is migrated only under the fence loaded from a manifest (SVM_REQUIRE_STATIC_FENCE=true): admission policies made through the API do not guard admission objects, so the grant on ${name} would let the worker's token change them. Probed ${probed}. Load deploy/static-fence on every API server (docs/security.md), then migrate again; nothing was written`
        : `${name} is migrated only where svm's fence guards the worker's writes (SVM_REQUIRE_FENCE=true): elsewhere the grant on ${name} lets the worker's token change its objects. Probed: ${probed}. Where the fence is not installed, apply deploy/worker-policy.yaml (or install the chart) and migrate again; where an aggregated API server serves ${name} (kube-apiserver proxies its requests past its admission), migrate it with a worker under your own credentials (docs/security.md). Nothing was written`,
  });
}

/** What the chunk counted (the heartbeat's counters, as a chunk's), and where the list goes on. */
function resultOf(watermark: Watermark, meta: ListMeta | undefined, method: RewriteMethod): ChunkResult {
  const { counters, failures, listRestarted, tokenResumed, contentLimited } = watermark.progress;
  return {
    counters: { ...counters, chunks: 1, listRestarts: listRestarted ? 1 : 0, tokenResumes: tokenResumed ? 1 : 0 },
    failures,
    continueToken: meta?.continueToken,
    remainingItemCount: meta?.remainingItemCount,
    listed: meta?.items ?? watermark.seen,
    ...(meta?.bytes ? { listedBytes: meta.bytes } : {}),
    ...(method === 'put' ? { rewrite: 'put' as const } : {}),
    ...(contentLimited ? { contentLimited: true as const } : {}),
  };
}

/** The failure a chunk ends with for err (a list's or an update's, says `doing`). */
function failureOf(err: unknown, doing: string, resource: ResourceRef, triedMs: number): Error {
  return unreadable(err, doing, triedMs) ?? toFailure(err, doing, resource);
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
    type: CONVERSION_WEBHOOK_FAILED,
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
    if (isRetryable(err.kind)) return ApplicationFailure.retryable(message, kubeFailureType(err.kind));
    return ApplicationFailure.nonRetryable(message, kubeFailureType(err.kind));
  }
  return err instanceof Error ? err : new Error(String(err));
}
