/**
 * The page loop: list the chunk's page, feeding each object to the updaters as its text arrives, and list it again
 * until every object of it is done: after a 410 on the continue token, a response cut off mid-page, or a server
 * refusing the empty patch (then with content, rewriting by PUT). A listing again resumes after the watermark.
 */
import type { Context } from '@temporalio/activity';
import { groupResourceString } from '../../api/resource';
import type { ListedObject, ListMeta, RewriteMethod } from '../../kube/client';
import { isRetryable, KubeError } from '../../kube/errors';
import type { ChunkDeps, ChunkInput, ChunkOptions } from './types';
import { ObjectRewriter, PatchRefused, refusesPatch } from './rewrite-one';
import { StopListing, type ChunkStop } from './stop';
import { UpdaterPool } from './updater-pool';
import type { Watermark } from './watermark';

/** What the page loop shares with the chunk around it. */
export interface ChunkParts {
  watermark: Watermark;
  stop: ChunkStop;
  log: Context['log'];
  /** How the chunk rewrites at first: the empty patch, or the PUT as listed. */
  method: RewriteMethod;
  /** The chunk's list buffer (listBufferBytes). */
  bufferBytes: number;
}

export class PageLoop {
  private readonly name: string;
  private readonly rewriter: ObjectRewriter;
  private rewriteBy: RewriteMethod;
  // This chunk's first listing may take its page from what an earlier chunk listed ahead (the same snapshot); a
  // listing again (after a 410, a cut-off response, a refused patch) always asks the API server.
  private firstListing = true;

  constructor(
    private readonly deps: ChunkDeps,
    private readonly input: ChunkInput,
    private readonly chunk: ChunkParts,
  ) {
    this.name = groupResourceString(input.resource);
    this.rewriteBy = chunk.method;
    const { kube, budget, concurrency } = deps;
    const limiter = deps.limiterFor(this.name, input.options.qps);
    this.rewriter = new ObjectRewriter({ kube, budget, concurrency, limiter }, input.resource, chunk.stop);
  }

  /** How the chunk rewrites now: 'put' once the server refused the empty patch or the metadata-only list. */
  get method(): RewriteMethod {
    return this.rewriteBy;
  }

  /**
   * Lists the page until every object of it is done, or an update stopped the chunk; resolves with the page's
   * metadata (undefined: no listing got to its end). Throws the listing's error when it cannot go on.
   */
  async listUntilDone(): Promise<ListMeta | undefined> {
    const { watermark, stop } = this.chunk;
    let continueToken = this.input.continueToken;
    let resumeAfter = watermark.lastKey;
    let meta: ListMeta | undefined;
    for (;;) {
      try {
        meta = await this.listOnce(continueToken, resumeAfter);
        if (!(stop.updateError instanceof PatchRefused)) return meta;
        throw stop.updateError; // handled below, as the metadata-only list refused is
      } catch (err) {
        if (this.rewriteBy === 'patch' && (err instanceof PatchRefused || (err instanceof KubeError && refusesPatch(err, 'list')))) {
          this.rewriteByPut(err);
          resumeAfter = watermark.lastKey;
          continue;
        }
        if (err instanceof KubeError && err.kind === 'gone' && continueToken !== undefined) {
          continueToken = this.afterExpiredToken(err);
          continue;
        }
        watermark.beat(true);
        if (stop.updateError !== undefined) return meta; // an update's error says more than the stream it stopped
        if (!(err instanceof KubeError) || !this.cutOffAfterProgress(err, resumeAfter)) throw err;
        this.chunk.log.warn('list response cut off mid-page; listing the page again after the last finished object', {
          resource: this.name,
          kind: err.kind,
        });
        resumeAfter = watermark.lastKey;
      }
    }
  }

  /** The server cannot do the built-in's rewrite here: list the page again with content and PUT, after what is finished. */
  private rewriteByPut(err: Error): void {
    this.chunk.log.warn('the server refuses the empty merge patch or the metadata-only list; rewriting by PUT as listed', {
      resource: this.name,
      reason: err.message,
    });
    this.rewriteBy = 'put';
    this.chunk.watermark.progress.rewrite = 'put';
    this.chunk.stop.clear();
    this.chunk.watermark.beat(true);
  }

  /** The continue token after a 410 on this one: the inconsistent token in the error body, else none (the list restarts). */
  private afterExpiredToken(err: KubeError): string | undefined {
    const { progress } = this.chunk.watermark;
    if (err.continueToken) {
      this.chunk.log.warn('continue token expired; resuming from the inconsistent continue token', { resource: this.name });
      progress.tokenResumed = true;
      return err.continueToken;
    }
    this.chunk.log.warn('continue token expired and no inconsistent token was given; restarting the list', { resource: this.name });
    progress.listRestarted = true;
    return undefined;
  }

  /**
   * A response cut off mid-page (the API server's request timeout while we held it back) by a listing that got
   * further than the one before: the page is listed again after the watermark.
   */
  private cutOffAfterProgress(err: KubeError, resumeAfter: string | undefined): boolean {
    const { lastKey } = this.chunk.watermark;
    return isRetryable(err.kind) && !this.chunk.stop.cancelled.aborted && lastKey !== undefined && lastKey !== resumeAfter;
  }

  /** Lists the page once, feeding the updaters; resolves with the page's metadata when every listed object is done. */
  private async listOnce(token: string | undefined, resumeAfter: string | undefined): Promise<ListMeta> {
    const { watermark, stop } = this.chunk;
    const { options } = this.input;
    watermark.newListing(resumeAfter);
    const method = this.rewriteBy;
    const content = method === 'put';
    // A first page listed with content is cut to its content limit when nothing of it is finished yet (after a
    // refused patch, nothing was), and so is every later listing of it, a retry's included (the heartbeat says so).
    // Once something is finished under the full limit the page keeps it: what a shorter page left out would be
    // listed, and counted, again by the next chunk.
    if (content && options.contentLimit !== undefined && watermark.nothingFinished) watermark.progress.contentLimited = true;
    const limit = content && watermark.progress.contentLimited ? contentLimit(options) : options.chunkSize;
    const limits = { concurrency: options.concurrency, bufferBytes: this.chunk.bufferBytes, memory: this.deps.memory };
    const pool = new UpdaterPool(limits, stop, (obj, index) => this.update(obj, index, method));
    try {
      return await this.listInto(pool, token, limit, content);
    } catch (err) {
      if (!(err instanceof StopListing)) throw err;
      return { items: watermark.seen, bytes: 0 };
    } finally {
      await pool.drain();
    }
  }

  /** Reads the page (listed ahead by an earlier chunk, or asked now) into the pool, object by object. */
  private async listInto(pool: UpdaterPool, token: string | undefined, limit: number, content: boolean): Promise<ListMeta> {
    const { resource } = this.input;
    const { watermark, stop } = this.chunk;
    const onItem = async (obj: ListedObject, bytes: number): Promise<void> => {
      if (stop.requested) throw new StopListing();
      const index = watermark.see(obj);
      if (index !== undefined) await pool.add(index, obj, bytes);
    };
    const ahead =
      this.firstListing && !content && token !== undefined ? await this.deps.listAhead?.take(resource, token, limit) : undefined;
    this.firstListing = false;
    let meta: ListMeta;
    if (ahead) {
      for (const { obj, bytes } of ahead.items) await onItem(obj, bytes);
      meta = ahead.meta;
    } else {
      meta = await this.deps.kube.listEach(resource, { limit, continueToken: token, content }, onItem);
    }
    // The page is read whole: list the next one while its objects are updated (metadata only; the next chunk takes it).
    if (!content && meta.continueToken && !stop.requested) this.deps.listAhead?.start(resource, meta.continueToken, limit);
    return meta;
  }

  /** Rewrites one object and settles its outcome under the watermark. */
  private async update(obj: ListedObject, index: number, method: RewriteMethod): Promise<void> {
    const outcome = await this.rewriter.rewrite(obj, method);
    if (outcome) {
      this.chunk.watermark.settle(index, outcome);
      this.deps.observe?.(this.name, outcome.kind, outcome.seconds, outcome.kind === 'migrated' && outcome.rewritten);
    }
    this.chunk.watermark.beat();
  }
}

/** A page listed with content, its objects' size not known yet, holds at most options.contentLimit objects. */
function contentLimit(options: ChunkOptions): number {
  return Math.max(1, Math.min(options.chunkSize, options.contentLimit ?? options.chunkSize));
}
