/**
 * The objects of one listing between the list stream and the updaters, bounded by bytes. Each object listed is
 * queued for the next free updater (at most `concurrency` of them, each started by the object that needs it);
 * while the objects queued or being updated hold more than the list buffer and some wait for an updater, the list
 * is not read further (TCP keeps the rest at the API server). Before it is queued, each object's bytes are taken
 * from the worker's memory budget, in turn with every other chunk of the process, and given back when its update
 * ends (or, queued when the chunk stopped, when the listing's updaters are done).
 */
import type { ListedObject } from '../../kube/client';
import type { MemoryBudget } from '../../kube/memory-budget';
import { WaitAbortedError } from '../../kube/rate-limit';
import { StopListing, type ChunkStop } from './stop';

export interface PoolLimits {
  concurrency: number;
  /** The chunk's list buffer: bytes of objects queued or being updated before the list is read further. */
  bufferBytes: number;
  /** The worker-wide memory budget shared by every chunk in the process. */
  memory?: MemoryBudget;
}

/** An object listed and not updated yet: its index in the listing, and the bytes of its text. */
interface Queued {
  index: number;
  obj: ListedObject;
  bytes: number;
}

export class UpdaterPool {
  private readonly queue: Queued[] = [];
  /** Bytes of the objects queued or being updated. */
  private heldBytes = 0;
  private listingEnded = false;
  private readonly updaters: Array<Promise<void>> = [];
  // Whoever waits (the list stream for room, idle updaters for work) waits for the next change, then looks again.
  private waiters: Array<() => void> = [];
  private readonly wake = (): void => {
    const waiters = this.waiters;
    this.waiters = [];
    for (const f of waiters) f();
  };

  constructor(
    private readonly limits: PoolLimits,
    private readonly stop: ChunkStop,
    /** Updates one object; what it throws stops the chunk. */
    private readonly update: (obj: ListedObject, index: number) => Promise<void>,
  ) {
    stop.cancelled.addEventListener('abort', this.wake);
  }

  /** Hands a listed object to the updaters; resolves when the list may be read further. Throws StopListing on a stop. */
  async add(index: number, obj: ListedObject, bytes: number): Promise<void> {
    if (this.limits.memory) await this.reserve(this.limits.memory, bytes);
    this.heldBytes += bytes;
    this.queue.push({ index, obj, bytes });
    if (this.updaters.length < this.limits.concurrency) this.updaters.push(this.updater());
    this.wake();
    // Backpressure: read no further while the objects held exceed the buffer and some
    // wait for an updater (the updaters are never starved: heldBytes stays below the buffer
    // plus one object per updater).
    while (this.heldBytes > this.limits.bufferBytes && this.queue.length > 0 && !this.stop.requested) await this.changed();
  }

  /** The listing has ended: waits for the updaters (they finish the queue unless the chunk stops) and gives back the rest. */
  async drain(): Promise<void> {
    this.listingEnded = true;
    this.wake(); // idle updaters see the end
    await Promise.all(this.updaters);
    for (const left of this.queue.splice(0)) this.free(left.bytes); // left by a stop
    this.stop.cancelled.removeEventListener('abort', this.wake);
  }

  /**
   * The worker's memory budget: the list is not read further until the object's bytes are granted (a stop gives
   * the wait up; the object is then not finished).
   */
  private async reserve(memory: MemoryBudget, bytes: number): Promise<void> {
    try {
      await memory.acquire(bytes, this.stop.signal);
    } catch (err) {
      if (err instanceof WaitAbortedError) throw new StopListing();
      throw err;
    }
  }

  private async updater(): Promise<void> {
    for (;;) {
      if (this.stop.requested) return;
      const job = this.queue.shift();
      if (!job) {
        if (this.listingEnded) return;
        await this.changed();
        continue;
      }
      try {
        await this.update(job.obj, job.index);
      } catch (err) {
        this.stop.fail(err);
      } finally {
        this.free(job.bytes);
        this.wake();
      }
    }
  }

  private free(bytes: number): void {
    this.heldBytes -= bytes;
    this.limits.memory?.release(bytes);
  }

  private changed(): Promise<void> {
    return new Promise<void>((r) => this.waiters.push(r));
  }
}
