/**
 * Whether the KubeClient sends a failed request again, and after how long:
 * the one retry decision of the kube layer (retryDelayMs), which every loop
 * of the client (request(), raw(), listEach) asks, each under its policy.
 * For the kube layer's callers, the same rule as one question
 * (isTransientError), and the loops built on one loop (retryWhile): a
 * bounded retry with a linear backoff (retryBounded) and the read-modify-
 * write that reads again after a 409 (retryOnConflict).
 */
import { isRetryable, KubeError } from './errors';
import { sleep } from './rate-limit';

/**
 * When a KubeClient sends a request again, in attempts (1: never again).
 * svm's (SVM_RETRY) keeps what the client does within one call short and
 * leaves longer waits to its callers (an activity's retry policy retries
 * every transient kind); the tests' own client (test/helpers/plane.ts) has no
 * such caller, so it retries transient reads too and waits longer for an
 * unsent request, e.g. while haproxy still routes to a server just removed.
 */
export interface RetryPolicy {
  /** A request that never reached an API server or none handled (neverHandled), whatever its verb; backoff 250 ms times the attempt. */
  unsentAttempts: number;
  /** A GET answered 429, after its Retry-After (at most 10 s). */
  throttledReadAttempts: number;
  /** A GET that failed transiently after it was sent (isRetryable: reset, hang-up, timeout, 5xx); backoff as unsent. */
  transientReadAttempts: number;
  /** Whether raw() applies the transport part too (svm's raw() callers decide on failures themselves). */
  retryRaw: boolean;
}

const MAX_THROTTLED_READS = 10;
const MAX_UNSENT_RETRIES = 4;

export const SVM_RETRY: Readonly<RetryPolicy> = {
  unsentAttempts: MAX_UNSENT_RETRIES,
  throttledReadAttempts: MAX_THROTTLED_READS,
  transientReadAttempts: 1,
  retryRaw: false,
};

/**
 * How listEach sends a list again, whatever the client's policy: only after a 429, as SVM_RETRY sends a GET again.
 * Note: any other failure is its caller's to retry (the chunk activity's retry policy; a page cut off mid-stream is
 * listed again by the chunk, after its watermark, since the items handed out so far stay valid).
 */
export const LIST_RETRY: Readonly<RetryPolicy> = {
  unsentAttempts: 1,
  throttledReadAttempts: MAX_THROTTLED_READS,
  transientReadAttempts: 1,
  retryRaw: false,
};

/** The wait after a 429: its Retry-After, at most 10 s (1 s when the server named none). */
const throttledWaitMs = (err: KubeError) => Math.min(10, err.retryAfterSeconds ?? 1) * 1000;

/** The backoff after an unsent request or a transient read: 250 ms times the attempt. */
const backoffMs = (attempt: number) => 250 * attempt;

/**
 * The wait before attempt `attempt + 1` of a request that failed with err
 * (a transport error, or a response classified by classifyResponse), or
 * undefined when it is not sent again. Only reads are sent again after they
 * may have reached a server; a write only when it never did.
 */
export function retryDelayMs(policy: Readonly<RetryPolicy>, method: string, attempt: number, err: KubeError): number | undefined {
  if (neverHandled(err)) return attempt < policy.unsentAttempts ? backoffMs(attempt) : undefined;
  if (method !== 'GET') return undefined;
  if (err.kind === 'throttled') return attempt < policy.throttledReadAttempts ? throttledWaitMs(err) : undefined;
  if (isRetryable(err.kind)) return attempt < policy.transientReadAttempts ? backoffMs(attempt) : undefined;
  return undefined;
}

/**
 * Runs attempt until it resolves; after one that fails with a KubeError, waits as retryDelayMs decides and runs it
 * again, or throws that error when it decides no more. Any other error is thrown as it is.
 */
export function retrying<T>(policy: Readonly<RetryPolicy>, method: string, attempt: () => Promise<T>): Promise<T> {
  return retryWhile((err, n) => (err instanceof KubeError ? retryDelayMs(policy, method, n, err) : undefined), attempt);
}

/**
 * The one retry loop: runs attempt (given its number, from 1) until it resolves. After attempt n fails with err,
 * again(err, n) decides: the wait in ms before attempt n + 1, or undefined to throw err as it is.
 */
export async function retryWhile<T>(
  again: (err: unknown, attempt: number) => number | undefined | Promise<number | undefined>,
  attempt: (n: number) => Promise<T>,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      const wait = await again(err, n);
      if (wait === undefined) throw err;
      await sleep(wait);
    }
  }
}

/**
 * Whether a failed request is worth sending again later: a KubeError of a transient kind (isRetryable: a network
 * error, 429, 5xx, a timeout), the rule by which the client itself sends a read again (retryDelayMs). Not a
 * conflict: the same write fails the same way until its object is read again (retryOnConflict). An error that is
 * not a KubeError is no answer of the API: its caller knows what else it may be.
 */
export function isTransientError(err: unknown): boolean {
  return err instanceof KubeError && isRetryable(err.kind);
}

/** A 409: the object changed since it was read (a write with its resourceVersion), or one of that name exists (a create). */
export function isConflict(err: unknown): boolean {
  return err instanceof KubeError && err.kind === 'conflict';
}

/** How retryBounded retries. */
export interface BoundedRetry {
  /** Attempts in all (1: never again). */
  attempts: number;
  /** The wait after attempt n is stepMs times n (0: none). */
  stepMs: number;
  /** Whether err is worth another attempt (default isTransientError); may ask something first, e.g. whether the work is still wanted. */
  retryIf?: (err: unknown, attempt: number) => boolean | Promise<boolean>;
  /** A time (epoch ms) no wait may reach: a retry that would start at or after it is not made. */
  until?: number;
}

/**
 * Runs attempt until it resolves, again after a failure retryIf accepts, at most opts.attempts times in all, waiting
 * stepMs times the attempt in between; the last error, or one retryIf refuses, is thrown as it is. Note: retryIf is
 * asked only when the bound and until leave room for another attempt, so what it asks costs nothing after the last.
 */
export function retryBounded<T>(opts: Readonly<BoundedRetry>, attempt: (n: number) => Promise<T>): Promise<T> {
  const { attempts, stepMs, retryIf = isTransientError, until } = opts;
  return retryWhile(async (err, n) => {
    if (n >= attempts) return undefined;
    const wait = stepMs * n;
    if (until !== undefined && Date.now() + wait >= until) return undefined;
    return (await retryIf(err, n)) ? wait : undefined;
  }, attempt);
}

/**
 * A read-modify-write on the resourceVersion read, bounded: readAndWrite reads the object afresh, decides, and
 * writes with the resourceVersion it read; after a 409 (someone wrote in between) it runs again at once, at most
 * `attempts` times in all. The last conflict, or any other error, is thrown as it is.
 */
export function retryOnConflict<T>(attempts: number, readAndWrite: (attempt: number) => Promise<T>): Promise<T> {
  return retryBounded({ attempts, stepMs: 0, retryIf: isConflict }, readAndWrite);
}

/**
 * Transport errors after which the request is sent again, whatever its verb:
 * the connection refused or reset before TLS was up (it never reached a
 * server), or a kept-alive connection reset or hung up before any byte of a
 * response (the API server closes a connection idle for 90 s, and a request
 * sent at that moment was not read: Node's documented keep-alive race). In
 * the second case a proxy that cut the connection after forwarding would
 * look the same; every write svm makes is safe to repeat (updates carry
 * their resourceVersion and answer 409, creates answer AlreadyExists).
 */
export function neverSent(err: KubeError): boolean {
  return (
    err.kind === 'network' &&
    (/^ECONNREFUSED\b/.test(err.message) ||
      /before secure TLS connection was established/.test(err.message) ||
      err.info.closedIdleConnection === true)
  );
}

/**
 * neverSent, or an API server refused the request in front of every handler (KubeErrorInfo.notHandled): the 503 of
 * a server that has not yet published its StorageVersion objects (the StorageVersion API on, just started, behind a
 * load balancer that routes to it until its /readyz has failed twice) or of one shutting down. Nothing was done, so
 * any verb may be sent again.
 */
export function neverHandled(err: KubeError): boolean {
  return neverSent(err) || err.info.notHandled !== undefined;
}
