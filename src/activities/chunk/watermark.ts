/**
 * A chunk's watermark and what it counts, as its heartbeat carries them: the key below which every object of the
 * page is finished (lastKey), the finished keys above it (doneAfter, updates finish out of order), and the counters
 * and failures of exactly those objects. A retry of the chunk, on this worker or on one of another version, resumes
 * from the last heartbeat and skips them: nothing is updated or counted twice.
 */
import type { Context } from '@temporalio/activity';
import { zeroCounters } from '../../api/counters';
import type { MigrationCounters, ObjectFailure } from '../../api/migration';
import type { ListedObject } from '../../kube/client';
import { MAX_FAILURES_KEPT, type ChunkResume } from '../../contract/chunk';
import type { FinalOutcome } from './rewrite-one';

/** The heartbeat's details. Note: read back by retries on workers of other versions: add fields, never change one. */
export interface ChunkHeartbeat {
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

const HEARTBEAT_EVERY_MS = 1000;

const keyOf = (o: ListedObject) => `${o.namespace ?? ''}/${o.name}`;

export class Watermark {
  // Per listing of the page: the key of every object seen, which are finished, and how many from the start are.
  private keys: string[] = [];
  private finished: boolean[] = [];
  private finishedInOrder = 0;
  /** Set while a listing passes objects an earlier attempt or listing finished: skipped up to this key. */
  private skipThrough: string | undefined;
  private lastBeat = 0;

  private constructor(
    /** Everything the heartbeat carries but doneAfter: the counters, failures and flags, and lastKey. */
    readonly progress: ChunkHeartbeat,
    /** Finished objects after the watermark (progress.lastKey), counted (here or before the pause). */
    private readonly doneAfter: Set<string>,
    private readonly ctx: Pick<Context, 'heartbeat'>,
  ) {}

  /** A retry of this activity goes on from its heartbeat; a chunk stopped by a pause, from where the workflow says. */
  static resume(ctx: Pick<Context, 'info' | 'heartbeat'>, pause: ChunkResume | undefined): Watermark {
    const lastHeartbeat = ctx.info.heartbeatDetails as ChunkHeartbeat | undefined;
    if (lastHeartbeat) return new Watermark(lastHeartbeat, new Set(lastHeartbeat.doneAfter ?? []), ctx);
    const progress: ChunkHeartbeat = {
      counters: zeroCounters(),
      failures: [],
      tokenResumed: false,
      listRestarted: false,
      ...(pause?.afterKey !== undefined ? { lastKey: pause.afterKey } : {}),
    };
    return new Watermark(progress, new Set(pause?.doneAfter ?? []), ctx);
  }

  get lastKey(): string | undefined {
    return this.progress.lastKey;
  }

  /** Nothing of the page is finished yet. */
  get nothingFinished(): boolean {
    return this.progress.lastKey === undefined && this.doneAfter.size === 0;
  }

  /** Objects seen by the latest listing. */
  get seen(): number {
    return this.keys.length;
  }

  /** Objects of the latest listing up to the watermark: all finished. */
  get position(): number {
    return this.finishedInOrder;
  }

  /** Where a cancelled chunk stopped: its next run lists the same page and skips what is finished. */
  get resumePoint(): ChunkResume {
    return { afterKey: this.progress.lastKey, doneAfter: [...this.doneAfter] };
  }

  /** A listing of the page begins; it skips the objects up to resumeAfter and those finished after it. */
  newListing(resumeAfter: string | undefined): void {
    this.keys = [];
    this.finished = [];
    this.finishedInOrder = 0;
    this.skipThrough = resumeAfter;
  }

  /** The listing's next object: its index in the listing, or undefined when it is finished already (skipped). */
  see(obj: ListedObject): number | undefined {
    const key = keyOf(obj);
    const index = this.keys.push(key) - 1;
    if ((this.skipThrough !== undefined && key <= this.skipThrough) || this.doneAfter.has(key)) {
      this.finished.push(true);
      return undefined;
    }
    this.skipThrough = undefined;
    this.finished.push(false);
    return index;
  }

  /** Counts the object's outcome and marks it finished in the same step: a heartbeat never sees one without the other. */
  settle(index: number, outcome: FinalOutcome): void {
    count(this.progress, outcome);
    this.finished[index] = true;
    this.doneAfter.add(this.keys[index]!);
  }

  /** Moves the watermark over what is finished; heartbeats at most once a second, unless forced. */
  beat(force = false): void {
    while (this.finishedInOrder < this.finished.length && this.finished[this.finishedInOrder]) this.finishedInOrder++;
    if (this.finishedInOrder > 0) this.progress.lastKey = this.keys[this.finishedInOrder - 1];
    const now = Date.now();
    if (!force && now - this.lastBeat <= HEARTBEAT_EVERY_MS) return;
    this.lastBeat = now;
    const { lastKey } = this.progress;
    for (const k of this.doneAfter) if (lastKey !== undefined && k <= lastKey) this.doneAfter.delete(k);
    // A snapshot: counters, watermark and done keys of one moment, whenever the SDK sends it.
    this.ctx.heartbeat({
      ...this.progress,
      counters: { ...this.progress.counters },
      failures: [...this.progress.failures],
      doneAfter: [...this.doneAfter],
    } satisfies ChunkHeartbeat);
  }
}

function count({ counters, failures }: ChunkHeartbeat, outcome: FinalOutcome): void {
  switch (outcome.kind) {
    case 'migrated':
      counters.migrated++;
      if (outcome.rewritten) counters.rewritten++;
      return;
    case 'conflict':
      counters.conflicts++;
      return;
    case 'notFound':
      counters.notFound++;
      return;
    case 'failed':
      counters.failed++;
      if (failures.length < MAX_FAILURES_KEPT) failures.push(outcome.failure);
  }
}
