/**
 * The worker's memory budget: one count of the bytes of listed objects that
 * every chunk of every migration in this process holds at once (objects
 * waiting for their no-op update or in it). A chunk takes an object's bytes
 * before it reads its list response further and gives them back when the
 * object's update has ended, so however many migrations of large objects run
 * at once, the objects they hold together stay within SVM_MEMORY_BUDGET_BYTES
 * (each chunk's own SVM_LIST_BUFFER_BYTES still applies beneath it).
 *
 * A semaphore counted in bytes, with three properties the chunks rely on:
 *
 * - Fair: waiters are served in the order they came (first in, first out).
 *   A request that does not fit holds up the ones behind it, even smaller
 *   ones that would fit, so a chunk of big objects is never starved by
 *   chunks of small ones.
 * - Never stuck on one object: a request larger than the whole budget is
 *   granted once nothing else is held, and runs alone.
 * - Cancellable: a wait ends at once when its AbortSignal fires (the chunk's
 *   cancellation: a pause, an abort, a worker shutdown), taking nothing, and
 *   the waiters behind it move up. A stop never waits for memory.
 *
 * No deadlock: what is held is given back by the updates, and an update never
 * waits for this budget, only a chunk's reading of its list does.
 */
import { WaitAbortedError } from './rate-limit';

export interface MemoryBudgetObserver {
  /** After every change: bytes held, and requests waiting. */
  changed?(held: number, waiting: number): void;
  /** A request that had to wait was granted after `seconds`. */
  waited?(seconds: number): void;
}

interface Waiter {
  bytes: number;
  since: number;
  grant(): void;
}

export class MemoryBudget {
  private used = 0;
  private peak = 0;
  private readonly queue: Waiter[] = [];

  /** capacity: bytes held at most (a single larger request is granted alone). */
  constructor(
    readonly capacity: number,
    private readonly observer: MemoryBudgetObserver = {},
  ) {
    if (!(capacity > 0)) throw new RangeError(`memory budget must be positive (got ${capacity})`);
  }

  /** Bytes held now. */
  get held(): number {
    return this.used;
  }

  /** The most bytes ever held at once (for tests and benches). */
  get peakHeld(): number {
    return this.peak;
  }

  /** Requests waiting now. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Resolves once `bytes` are held for the caller, who must release() them.
   * Rejects with WaitAbortedError, holding nothing, when signal aborts first.
   */
  acquire(bytes: number, signal?: AbortSignal): Promise<void> {
    const n = Math.max(0, bytes);
    if (signal?.aborted) return Promise.reject(new WaitAbortedError('the memory budget'));
    if (this.queue.length === 0 && this.fits(n)) {
      this.take(n);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.queue.indexOf(w);
        if (i < 0) return; // granted already
        this.queue.splice(i, 1);
        reject(new WaitAbortedError('the memory budget'));
        this.grantWaiting(); // the head may have been what held the others up
        this.notify();
      };
      const w: Waiter = {
        bytes: n,
        since: performance.now(),
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          this.observer.waited?.((performance.now() - w.since) / 1000);
          resolve();
        },
      };
      this.queue.push(w);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.notify();
    });
  }

  /** Gives back bytes acquired before; the waiters that now fit are granted, in order. */
  release(bytes: number): void {
    const n = Math.max(0, bytes);
    // Never below zero, whatever a caller does: a budget that counted negative would admit too much.
    this.used = Math.max(0, this.used - n);
    this.grantWaiting();
    this.notify();
  }

  /** Within the budget, or alone (a request larger than the whole budget waits until nothing else is held). */
  private fits(n: number): boolean {
    return this.used === 0 || this.used + n <= this.capacity;
  }

  private take(n: number): void {
    this.used += n;
    if (this.used > this.peak) this.peak = this.used;
    this.notify();
  }

  private grantWaiting(): void {
    while (this.queue.length > 0 && this.fits(this.queue[0]!.bytes)) {
      const w = this.queue.shift()!;
      this.take(w.bytes);
      w.grant();
    }
  }

  private notify(): void {
    this.observer.changed?.(this.used, this.queue.length);
  }
}
