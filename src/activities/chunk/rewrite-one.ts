/**
 * The rewrite of one object, attempt by attempt, and what each answer means: one Outcome per row of the error
 * policy in migrate-chunk.ts's opening comment (outcomeOf).
 */
import type { ResourceRef } from '../../api/resource';
import type { ObjectFailure } from '../../api/migration';
import type { KubeClient, ListedObject, RewriteMethod } from '../../kube/client';
import { isPerObjectFailure, isRetryable, KubeError } from '../../kube/errors';
import type { AdaptiveConcurrency } from '../../kube/adaptive-concurrency';
import { sleep, WaitAbortedError, type RateLimiter } from '../../kube/rate-limit';
import type { ChunkStop } from './stop';

export const MAX_OBJECT_ATTEMPTS = 8;

/** The server refuses the empty merge patch or the metadata-only list: this resource is rewritten by PUT. */
export class PatchRefused extends Error {}

/**
 * What an answer to an object's rewrite means, by the row of the error policy it falls in. The first four are
 * final: the object is counted and finished (seconds: the latency of its last attempt). throttled and retry send
 * it again after waitMs; patchRefused and fatal stop the chunk.
 */
export type Outcome =
  | { kind: 'migrated'; rewritten: boolean; seconds: number } // 2xx
  | { kind: 'conflict'; seconds: number } // 409
  | { kind: 'notFound'; seconds: number } // 404 of it
  | { kind: 'failed'; failure: ObjectFailure; seconds: number } // 403/422/400/webhook denial
  | { kind: 'throttled'; waitMs: number } // 429
  | { kind: 'retry'; waitMs: number } // 5xx/timeout/reset, below MAX_OBJECT_ATTEMPTS
  | { kind: 'patchRefused'; error: KubeError } // 405/406/415 on the empty patch
  | { kind: 'fatal'; error: KubeError }; // other 404, a 5xx at the last attempt, anything else

export type FinalOutcome = Extract<Outcome, { kind: 'migrated' | 'conflict' | 'notFound' | 'failed' }>;

/** The API server's answer to one attempt: the object's new resourceVersion, or the error. */
export type Answer = ({ resourceVersion: string } | { error: KubeError }) & { seconds: number };

/** How far the object's attempts have got: attempts counted (a 429 is not one) and 429s answered. */
export interface Tries {
  attempt: number;
  throttled: number;
}

/** The error policy's row for an answer to obj's rewrite by `method`. */
export function outcomeOf(answer: Answer, obj: ListedObject, resource: ResourceRef, method: RewriteMethod, tries: Tries): Outcome {
  const { seconds } = answer;
  if ('resourceVersion' in answer) return { kind: 'migrated', rewritten: answer.resourceVersion !== obj.resourceVersion, seconds };
  const e = answer.error;
  if (method === 'patch' && refusesPatch(e, 'patch')) return { kind: 'patchRefused', error: e };
  // Note: a 409 means the object was rewritten after the list, so it is already in the current storage version.
  if (e.kind === 'conflict') return { kind: 'conflict', seconds };
  if (e.kind === 'notFound') {
    // A 404 not naming this object is the resource gone (migrate-chunk.ts's toFailure makes it ResourceGone).
    return isObjectNotFound(e, resource, obj) ? { kind: 'notFound', seconds } : { kind: 'fatal', error: e };
  }
  if (isPerObjectFailure(e.kind))
    return { kind: 'failed', failure: { namespace: obj.namespace, name: obj.name, reason: e.message }, seconds };
  if (e.kind === 'throttled') {
    const backoff = Math.min(10_000, 200 * 2 ** Math.min(tries.throttled, 6));
    return { kind: 'throttled', waitMs: Math.max(backoff, (e.retryAfterSeconds ?? 0) * 1000) };
  }
  if (isRetryable(e.kind) && tries.attempt < MAX_OBJECT_ATTEMPTS) {
    const backoff = Math.min(10_000, 200 * 2 ** (tries.attempt - 1));
    return { kind: 'retry', waitMs: e.retryAfterSeconds !== undefined ? Math.max(backoff, e.retryAfterSeconds * 1000) : backoff };
  }
  return { kind: 'fatal', error: e };
}

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

/**
 * 405 MethodNotAllowed or 415 UnsupportedMediaType on the patch, or 406
 * NotAcceptable on the patch's metadata-only reply or on the metadata-only
 * list: the server cannot do the built-in's rewrite for this resource (some
 * aggregated APIs), so the chunk falls back to the PUT, the one path that
 * says it reads content. Never a 403 (RBAC) or a denial: those are failures
 * as before.
 * Note: a 406 on the patch is the same refusal as a 406 on the list, a server
 * that cannot answer with metadata only; asking it again for the object whole
 * would read content on a path that says it reads none.
 */
export function refusesPatch(e: KubeError, on: 'patch' | 'list'): boolean {
  if (e.status === 406) return true;
  return on === 'patch' && (e.status === 405 || e.status === 415);
}

export interface RewriteDeps {
  kube: KubeClient;
  /** The worker-wide load budget shared by all migrations. */
  budget: RateLimiter;
  /** The migration's own --qps. */
  limiter?: RateLimiter;
  concurrency?: AdaptiveConcurrency;
}

export class ObjectRewriter {
  constructor(
    private readonly deps: RewriteDeps,
    private readonly resource: ResourceRef,
    private readonly stop: ChunkStop,
  ) {}

  /**
   * Sends obj's rewrite until its outcome is final; undefined when the chunk stops first. Throws what stops the
   * chunk: PatchRefused, or the error of a fatal outcome.
   * Note: a 429 is the server asking to wait, not a failure: it never uses up an attempt, however long it lasts
   * (the chunk stays alive by its heartbeat, and a cancel or a fatal error elsewhere still stops it).
   */
  async rewrite(obj: ListedObject, method: RewriteMethod): Promise<FinalOutcome | undefined> {
    const tries: Tries = { attempt: 1, throttled: 0 };
    for (;;) {
      if (this.stop.requested) return undefined;
      const answer = await this.send(obj, method);
      if (!answer) return undefined;
      const outcome = outcomeOf(answer, obj, this.resource, method, tries);
      switch (outcome.kind) {
        case 'throttled':
          this.deps.budget.pause(outcome.waitMs);
          this.deps.concurrency?.throttled(); // fewer in flight once the pause ends
          tries.throttled++;
          await sleep(outcome.waitMs);
          break;
        case 'retry':
          tries.attempt++;
          await sleep(outcome.waitMs);
          break;
        case 'patchRefused':
          throw new PatchRefused(outcome.error.message);
        case 'fatal':
          throw outcome.error;
        default:
          return outcome;
      }
    }
  }

  /** One attempt; undefined when the chunk stopped while it waited for its turn. */
  private async send(obj: ListedObject, method: RewriteMethod): Promise<Answer | undefined> {
    const clock = new AttemptClock();
    try {
      const resourceVersion = await this.inTurn(obj, method, clock);
      return resourceVersion === undefined ? undefined : { resourceVersion, seconds: clock.seconds() };
    } catch (err) {
      const error =
        err instanceof KubeError ? err : new KubeError('other', err instanceof Error ? `${err.name}: ${err.message}` : String(err));
      return { error, seconds: clock.seconds() };
    }
  }

  /**
   * The request under the worker's adaptive concurrency and the budgets (undefined: stopped while waiting for
   * them); the limit learns from answers the server processed (a 2xx, a 409).
   */
  private async inTurn(obj: ListedObject, method: RewriteMethod, clock: AttemptClock): Promise<string | undefined> {
    await this.deps.concurrency?.acquire();
    let answered: number | undefined;
    try {
      if (!(await this.budgetsTaken()) || this.stop.requested) return undefined;
      clock.sent();
      try {
        const rv =
          method === 'patch' ? await this.deps.kube.reencode(this.resource, obj) : await this.deps.kube.putAsListed(this.resource, obj);
        answered = clock.seconds();
        return rv;
      } catch (err) {
        if (err instanceof KubeError && err.kind === 'conflict') answered = clock.seconds();
        throw err;
      }
    } finally {
      this.deps.concurrency?.release(answered, obj.raw?.length);
    }
  }

  /** A token of the worker's budget and of the migration's own; false when a cancel ended the wait. */
  private async budgetsTaken(): Promise<boolean> {
    // Cancellable: a pause or an abort ends the wait at once, even while the budget is held shut.
    try {
      await this.deps.budget.take(this.stop.cancelled);
      if (this.deps.limiter) await this.deps.limiter.take(this.stop.cancelled);
      return true;
    } catch (err) {
      if (err instanceof WaitAbortedError) return false;
      throw err;
    }
  }
}

/** An attempt's latency: from the request (from the attempt's start until it is sent). */
class AttemptClock {
  private t0 = performance.now();

  sent(): void {
    this.t0 = performance.now();
  }

  seconds(): number {
    return (performance.now() - this.t0) / 1000;
  }
}
