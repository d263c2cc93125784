/**
 * What stops a chunk before its page is done: a cancel (a pause, an abort, a timeout) or the first error of an
 * update that the chunk cannot go on after (a fatal row of the error policy, a refused patch).
 */
import { setMaxListeners } from 'node:events';

/** Thrown into the list stream to stop reading it (an update's error, or a cancel). */
export class StopListing extends Error {}

export class ChunkStop {
  private firstUpdateError: unknown;
  // Fires on a cancel or on this chunk's first update error: ends a wait for the worker's memory budget, which
  // must never outlast the chunk (the bytes its queue holds are given back only once its listing has ended).
  private controller = new AbortController();
  private readonly onCancel = () => this.controller.abort();

  constructor(
    /** The activity's cancellation: a pause or an abort of the migration, or the activity timed out. */
    readonly cancelled: AbortSignal,
  ) {
    // Every updater waiting for the budget listens on these: as many listeners as the concurrency, not a leak.
    setMaxListeners(0, cancelled, this.controller.signal);
    cancelled.addEventListener('abort', this.onCancel);
  }

  /** Cancelled, or an update failed: nothing more is listed or sent. */
  get requested(): boolean {
    return this.firstUpdateError !== undefined || this.cancelled.aborted;
  }

  /** Aborts when the chunk stops: what waits for the memory budget listens on it. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The first error an update stopped the chunk with; undefined while none did. */
  get updateError(): unknown {
    return this.firstUpdateError;
  }

  /** An update's error stops the chunk; the first one is kept (it is what the chunk fails with). */
  fail(err: unknown): void {
    this.firstUpdateError ??= err;
    this.controller.abort();
  }

  /** The refused patch that stopped the chunk is handled (it goes on by PUT): forgotten, with a signal not aborted. */
  clear(): void {
    this.firstUpdateError = undefined;
    this.controller = new AbortController();
    setMaxListeners(0, this.controller.signal);
  }

  dispose(): void {
    this.cancelled.removeEventListener('abort', this.onCancel);
  }
}
