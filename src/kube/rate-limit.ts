/**
 * A token bucket shared by every migration in one worker process: the load
 * budget. A 429 with Retry-After pauses the whole bucket, so parallel
 * migrations slow down together instead of each hammering the server.
 */
export class RateLimiter {
  private tokens: number;
  private last = Date.now();
  private pausedUntil = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private qps: number,
    private readonly burst = Math.max(1, Math.ceil(qps)),
  ) {
    this.tokens = this.burst;
  }

  setQps(qps: number): void {
    this.qps = qps;
  }

  /** Pauses every caller for at least ms (Retry-After). */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, Date.now() + ms);
  }

  /** Waits for one token. Callers are served in order. */
  take(): Promise<void> {
    const next = this.queue.then(() => this.acquire());
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async acquire(): Promise<void> {
    for (;;) {
      const now = Date.now();
      if (now < this.pausedUntil) {
        await sleep(this.pausedUntil - now);
        continue;
      }
      if (!(this.qps > 0)) return; // unlimited
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
      this.last = now;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await sleep(((1 - this.tokens) / this.qps) * 1000);
    }
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
