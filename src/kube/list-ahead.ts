/**
 * The next page of a migration, listed while the objects of the current one are still being updated.
 *
 * A chunk lists its page, updates its objects, and ends; the workflow then schedules the next chunk, which lists
 * the next page. Between the last update of one page and the first of the next, the API servers would sit idle for
 * a list's round trip (tens to hundreds of milliseconds under load) on every page. So once a chunk has read its
 * page whole (metadata only: names and resourceVersions, never content) and the list has a next page, it asks for
 * that page here, in the background; the next chunk, given the same continue token and limit on this worker, takes
 * it instead of listing again.
 *
 * The page is the one the chunk would list itself: a continue token pins the list to the resourceVersion of its first
 * page (one snapshot), so reading it a little earlier returns the same objects at the same resourceVersions. A page
 * that failed to list (an expired token: 410) or was not taken within ttlMs is dropped, and the chunk lists as
 * before. Held: at most `max` pages of metadata (~0.5 KB an object), each until taken or expired.
 */
import type { ResourceRef } from '../api/resource';
import type { KubeClient, ListedObject, ListMeta } from './client';

export interface ListedAhead {
  items: Array<{ obj: ListedObject; bytes: number }>;
  meta: ListMeta;
}

type Ref = Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>;

export class ListAhead {
  private readonly pages = new Map<string, { page: Promise<ListedAhead | undefined>; at: number }>();
  private readonly ttlMs: number;
  private readonly max: number;
  private readonly now: () => number;

  constructor(
    private readonly kube: Pick<KubeClient, 'listEach'>,
    opts: { ttlMs?: number; max?: number; now?: () => number } = {},
  ) {
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.max = opts.max ?? 8;
    this.now = opts.now ?? (() => performance.now());
  }

  /** Lists the page after `continueToken` (metadata only, `limit` objects) in the background, unless it is already. */
  start(ref: Ref, continueToken: string, limit: number): void {
    this.expire();
    const key = pageKey(ref, continueToken, limit);
    if (this.pages.has(key) || this.pages.size >= this.max) return;
    const items: ListedAhead['items'] = [];
    const page = this.kube.listEach(ref, { limit, continueToken }, (obj, bytes) => {
      items.push({ obj, bytes });
    });
    const entry = {
      // A failure is the chunk's to meet when it lists the page itself.
      page: page.then(
        (meta) => ({ items, meta }),
        () => undefined,
      ),
      at: this.now(),
    };
    this.pages.set(key, entry);
    // Dropped once expired even if no chunk comes again (an aborted migration, an idle worker); the timer keeps no
    // process alive.
    setTimeout(() => {
      if (this.pages.get(key) === entry) this.pages.delete(key);
    }, this.ttlMs).unref();
  }

  /** The page listed ahead for this token and limit (undefined when there is none, or it failed); taken once. */
  async take(ref: Ref, continueToken: string, limit: number): Promise<ListedAhead | undefined> {
    this.expire();
    const key = pageKey(ref, continueToken, limit);
    const entry = this.pages.get(key);
    if (!entry) return undefined;
    this.pages.delete(key);
    return entry.page;
  }

  /** Pages listed ahead and not taken yet. */
  get size(): number {
    return this.pages.size;
  }

  private expire(): void {
    const now = this.now();
    for (const [key, entry] of this.pages) if (now - entry.at > this.ttlMs) this.pages.delete(key);
  }
}

const pageKey = (ref: Ref, continueToken: string, limit: number) =>
  `${ref.group}/${ref.version}/${ref.resource}\n${limit}\n${continueToken}`;

/** SVM_LIST_AHEAD=false turns listing ahead off (for measuring it); on otherwise. */
export function listAheadEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return !['false', '0', 'off', 'no'].includes((env.SVM_LIST_AHEAD ?? '').trim().toLowerCase());
}
