/**
 * A token bucket shared by every migration in one worker process: this
 * replica's part of the load budget. A 429 with Retry-After pauses the whole
 * bucket, so parallel migrations slow down together instead of each hammering
 * the server.
 *
 * The rate can change at run time (setQps: the replica's share of the
 * cluster-wide budget grows or shrinks as replicas come and go, see
 * src/worker/budget.ts) and the bucket can be held shut (hold: this replica
 * holds no share right now). Tokens earned at the old rate are credited before
 * the rate changes, and the bucket never holds more than its burst, so a
 * change can never release more than one burst at once.
 */
/**
 * Milliseconds on a monotonic clock (never steps back or jumps with the wall clock): for durations,
 * deadlines and idle times. Wall-clock time is only for what is written to the API (lease renewTime).
 */
export const monotonicNow = (): number => performance.now();

export interface RateLimiterOptions {
  /** Tokens the bucket holds at most. Default: one second's worth (at least 1). */
  burst?: number;
}

/** The promise every token served at once resolves with: one, not one per token. */
const RESOLVED: Promise<void> = Promise.resolve();

export class RateLimiter {
  private tokens: number;
  private last = monotonicNow();
  private pausedUntil = 0;
  private held = false;
  private lastTake = -Infinity;
  private pending = 0;
  private burst: number;
  private readonly fixedBurst: number | undefined;
  private queue: Promise<void> = Promise.resolve();
  /** Wakes a caller waiting for tokens (or for the hold to end) when the rate changes. */
  private wake: (() => void) | undefined;

  /** qps > 0: that many tokens per second; 0 (or less): unlimited. */
  constructor(
    private qps: number,
    burstOrOptions: number | RateLimiterOptions = {},
  ) {
    this.fixedBurst = typeof burstOrOptions === 'number' ? burstOrOptions : burstOrOptions.burst;
    this.burst = this.fixedBurst ?? defaultBurst(qps);
    this.tokens = this.burst;
  }

  /** The current rate (0: unlimited). */
  get rate(): number {
    return this.qps;
  }

  /** Whether the bucket is held shut (no share). */
  get isHeld(): boolean {
    return this.held;
  }

  /**
   * Changes the rate from now on and opens the bucket if it was held. The
   * burst follows the rate (unless fixed at construction, or given here).
   */
  setQps(qps: number, burst?: number): void {
    this.credit(monotonicNow());
    this.qps = qps;
    this.burst = burst ?? this.fixedBurst ?? defaultBurst(qps);
    this.tokens = Math.min(this.tokens, this.burst);
    this.held = false;
    this.wakeUp();
  }

  /** Shuts the bucket: take() waits until setQps opens it again. Tokens on hand are dropped. */
  hold(): void {
    this.credit(monotonicNow());
    this.held = true;
    this.tokens = 0;
  }

  /** Pauses every caller for at least ms (Retry-After). */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, monotonicNow() + ms);
  }

  /** When take() was last called or last served (demand for this bucket); -Infinity: never. */
  get lastTakeAt(): number {
    return this.lastTake;
  }

  /** Callers waiting for a token now. */
  get waiting(): number {
    return this.pending;
  }

  /**
   * Waits for one token. Callers are served in order. With a signal, the wait ends as soon as it aborts
   * (rejecting with WaitAbortedError) and the caller's turn is given up without taking a token: a chunk
   * that is cancelled (pause, abort) never waits for a budget that is held shut.
   */
  take(signal?: AbortSignal): Promise<void> {
    const now = monotonicNow();
    this.lastTake = now;
    // Served at once when nobody waits before this caller and the bucket can give a token now (unlimited, or one on
    // hand): no turn in the queue and no listener on the signal, the same answer acquire() would give at once.
    // Every object of a migration takes a token: this is its usual path at the default rate and when unlimited.
    if (this.pending === 0 && !this.held && now >= this.pausedUntil) {
      if (signal?.aborted) return Promise.reject(new WaitAbortedError());
      if (!(this.qps > 0)) return RESOLVED;
      this.credit(now);
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return RESOLVED;
      }
    }
    this.pending++;
    let abandoned = signal?.aborted ?? false;
    const next = this.queue
      .then(() => (abandoned ? undefined : this.acquire(() => abandoned)))
      .finally(() => {
        this.pending--;
        this.lastTake = monotonicNow();
      });
    this.queue = next.catch(() => undefined);
    if (!signal) return next;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        abandoned = true;
        this.wakeUp(); // if this caller is the one waiting, it gives up its turn now
        reject(new WaitAbortedError());
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      next.then(
        () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  private credit(now: number): void {
    if (!this.held && this.qps > 0) this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }

  private wakeUp(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Sleeps ms, or until the rate changes (whichever comes first). */
  private wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private async acquire(abandoned: () => boolean): Promise<void> {
    for (;;) {
      if (abandoned()) return;
      const now = monotonicNow();
      if (now < this.pausedUntil) {
        await this.wait(this.pausedUntil - now);
        continue;
      }
      if (this.held) {
        this.last = now;
        await this.wait(1000);
        continue;
      }
      if (!(this.qps > 0)) return; // unlimited
      this.credit(now);
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await this.wait(((1 - this.tokens) / this.qps) * 1000);
    }
  }
}

/** A wait for a token given up because its signal aborted (the chunk was cancelled). */
export class WaitAbortedError extends Error {
  constructor(what = 'the load budget') {
    super(`the wait for ${what} was given up (cancelled)`);
    this.name = 'WaitAbortedError';
  }
}

function defaultBurst(qps: number): number {
  return Math.max(1, Math.ceil(qps));
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
