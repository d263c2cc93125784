/**
 * The only place that talks HTTP to Kubernetes. Authentication and TLS come
 * from @kubernetes/client-node's KubeConfig (kubeconfig files, in-cluster
 * service accounts, exec plugins); requests go over one keep-alive agent so
 * that a chunk of concurrent rewrites reuses its connections. When a request
 * is sent again is decided in one place, retryDelayMs (retry.ts).
 *
 * A migration never holds an object's content: list
 * pages are asked for as metadata only (PartialObjectMetadataList) and each
 * object is re-encoded by an empty JSON merge patch that carries nothing but
 * apiVersion, kind and its resourceVersion (reencode), as the GA built-in
 * does; the API server reads, re-encodes and writes the object itself, and
 * answers with metadata only. Every list and every reply svm asks for is
 * metadata only, and a server that cannot answer so refuses it (406): no
 * request falls back to asking for content. The one path that reads content
 * is the PUT: only for a resource whose server refuses that patch is the page
 * listed whole and each object PUT back exactly as listed (putAsListed), and
 * the migration's status says so. Either way pages are read as a stream and
 * split into the raw text of each item as it arrives (listEach), never held
 * whole.
 */
import * as fs from 'node:fs';
import { existsSync } from 'node:fs';
import * as http from 'node:http';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as https from 'node:https';
import { packageRoot } from '../config/build-info';
import type { RewriteMethod } from '../contract/chunk';
import { KubeConfig } from './kubeconfig';
import { APIGroup, APIGroupList, APIResourceList, APIVersions, type APIResource } from '../api/discovery';
import { apiVersionOf, collectionPath, objectPath, type ResourceRef } from '../api/resource';
import { classifyResponse, classifyTransportError, KubeError } from './errors';
import { itemIdentity, RawListSplitter, withTypeMeta } from './raw-list';
import { sleep } from './rate-limit';
import { LIST_RETRY, neverHandled, retrying, retryDelayMs, SVM_RETRY, type RetryPolicy } from './retry';

// A KubeClient's retry policy is one of its options: what decides it comes with the client.
export { neverSent, retryDelayMs, SVM_RETRY, type RetryPolicy } from './retry';
/** How a migration rewrites each object (the chunk's, in the contract). */
export type { RewriteMethod };

export interface KubeResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RequestOptions {
  body?: string;
  query?: Record<string, string | number | undefined>;
  timeoutMs?: number;
  contentType?: string;
  /** Default application/json. */
  accept?: string;
  /** Statuses handed back like a success instead of thrown (e.g. [404] for "find, or undefined"); throttling is still retried first. */
  allow?: readonly number[];
}

/** A list answered with metadata only, or 406: never the objects' content. */
export const METADATA_ONLY_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io';
/** One object answered with metadata only, or 406 (the reply of a re-encode: never the object's content). */
export const METADATA_ONLY_ACCEPT =
  'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io';
/**
 * The reply of the PUT as listed: metadata only where the server can, else the object. Note: the PUT's body is
 * that object, listed with content; a server that cannot answer with metadata only (the 406 that sends a migration
 * to the PUT) answers with what svm has just sent, nothing it did not hold.
 */
const PUT_REPLY_ACCEPT = `${METADATA_ONLY_ACCEPT},application/json`;

/** The field manager of svm's writes (an empty patch sets no field, so it never appears in managedFields). */
export const FIELD_MANAGER = 'svm';

/** Every request names svm and its version, as client-go's do (binary/version (os/arch)): audit logs and request metrics tell svm apart. */
const userAgent = defaultUserAgent();
function defaultUserAgent(): string {
  let version = 'unknown';
  try {
    const root = packageRoot();
    version = (JSON.parse(fs.readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    // a bundle outside the package: the version stays unknown
  }
  return `svm/${version} (${process.platform}/${process.arch})`;
}

/** One object of a list page: identity and version (and its exact text only when listed with content). */
export interface ListedObject {
  namespace?: string;
  name: string;
  resourceVersion: string;
  /** The object as listed, with apiVersion and kind: the body of putAsListed. Only in a list with content. */
  raw?: string;
  /** Who wrote it at which apiVersion (metadata.managedFields without fieldsV1). Only in a list asked with `managedFields`. */
  managedFields?: Array<{ manager?: string; apiVersion?: string }>;
}

/** What a list page says besides its items. */
export interface ListMeta {
  continueToken?: string;
  remainingItemCount?: number;
  resourceVersion?: string;
  /** Items in the page, and the bytes of their text. */
  items: number;
  bytes: number;
}

export interface ListPage {
  items: ListedObject[];
  continueToken?: string;
  remainingItemCount?: number;
  resourceVersion?: string;
}

export interface DiscoveredResource extends APIResource {
  group: string;
  version: string;
  /** The group's preferred version serves it. */
  preferred: boolean;
}

interface ServedGroupVersion {
  group: string;
  version: string;
  preferred: boolean;
  path: string;
}

const coreVersions = (core: { versions: string[] }): ServedGroupVersion[] =>
  core.versions.map((v, i) => ({ group: '', version: v, preferred: i === 0, path: `/api/${v}` }));

const groupVersions = (g: APIGroup): ServedGroupVersion[] =>
  g.versions.map((v) => ({
    group: g.name,
    version: v.version,
    preferred: (g.preferredVersion?.version ?? g.versions[0]?.version) === v.version,
    path: `/apis/${v.groupVersion}`,
  }));

/**
 * JSON.parse whose failure says nothing of the text: V8's SyntaxError quotes
 * the input ("Unexpected token …, \"<text>\" is not valid JSON"), and the
 * text may be a Secret.
 */
export function parseJson<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new KubeError('other', `${what}: the response is not valid JSON (${text.length} bytes)`);
  }
}

/**
 * The resourceVersion of a write's reply; only the metadata is parsed (an object in the reply stays one string).
 * With `metadataOnly`, a reply that is not PartialObjectMetadata (a server that ignored the Accept) is refused: the
 * worker does not go on reading objects it did not ask for.
 */
function replyResourceVersion(res: KubeResponse, ref: Pick<ResourceRef, 'resource'>, metadataOnly: boolean): string {
  let id: ReturnType<typeof itemIdentity>;
  try {
    id = itemIdentity(res.body);
  } catch {
    throw new KubeError('other', `update of ${ref.resource}: the response is not valid JSON (${res.body.length} bytes)`);
  }
  if (metadataOnly && id.kind !== undefined && id.kind !== 'PartialObjectMetadata')
    throw new KubeError(
      'other',
      `update of ${ref.resource}: the server answered ${id.kind.slice(0, 80)} where metadata only was asked for`,
    );
  return id.metadata?.resourceVersion ?? '';
}

/** The error a request's own timer destroys it with: classified 'timeout', as Node's own ETIMEDOUT is. */
const timedOut = (message: string) => Object.assign(new Error(message), { code: 'ETIMEDOUT' });

/** How a kept-alive socket the server closed as idle fails the request sent on it (before any byte of a response). */
const closedAsIdle = (e: NodeJS.ErrnoException) => e.code === 'ECONNRESET' || e.code === 'EPIPE' || /socket hang up/.test(e.message);

const succeeded = (status: number) => status >= 200 && status < 300;

/** A response's body, whole. */
function readBody(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', (e) => reject(classifyTransportError(e)));
  });
}

/** Loads a kubeconfig; one that does not parse is named, with the parser's first line (not its code frame). */
function loadKubeconfig(file: string | undefined, load: () => void): void {
  try {
    load();
  } catch (err) {
    const said = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    throw new Error(`the kubeconfig ${file ?? '(in-cluster)'} could not be read: ${said}`);
  }
}

/** Makes the named context the current one; a context the kubeconfig does not have is refused with the ones it has. */
function useContext(kc: KubeConfig, context: string, file: string | undefined): void {
  if (!kc.getContextObject(context)) {
    const names = kc.getContexts().map((c) => c.name);
    throw new Error(
      `the kubeconfig ${file ?? '(in-cluster)'} has no context "${context}" (${names.length ? `its contexts: ${names.join(', ')}` : 'it has none'})`,
    );
  }
  kc.setCurrentContext(context);
}

export class KubeClient {
  readonly server: string;
  private readonly agent: http.Agent;

  /** When a request is sent again (svm's by default; the tests' own client retries more). */
  readonly retry: Readonly<RetryPolicy>;

  /** The user every request acts as (the Impersonate-User header), when set: see impersonating(). */
  readonly impersonate?: string;

  constructor(
    readonly kubeConfig: KubeConfig,
    opts: { maxSockets?: number; retry?: Readonly<RetryPolicy>; impersonate?: string } = {},
  ) {
    this.retry = opts.retry ?? SVM_RETRY;
    this.impersonate = opts.impersonate;
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster: set KUBECONFIG or --kubeconfig');
    this.server = cluster.server.replace(/\/$/, '');
    const Agent = this.server.startsWith('https:') ? https.Agent : http.Agent;
    this.agent = new Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 64 });
  }

  /**
   * From a kubeconfig path, or KUBECONFIG / ~/.kube/config / in-cluster when undefined; opts.context names the
   * kubeconfig's context to use instead of its current-context (kubectl's --context).
   */
  static fromKubeconfig(path?: string, opts: { maxSockets?: number; retry?: Readonly<RetryPolicy>; context?: string } = {}): KubeClient {
    const kc = new KubeConfig();
    if (path) loadKubeconfig(path, () => kc.loadFromFile(path));
    else if (!process.env.KUBECONFIG && !process.env.KUBERNETES_SERVICE_HOST && !existsSync(join(homedir(), '.kube', 'config'))) {
      // client-node would fall back to http://localhost:8080 and fail with a puzzling message.
      throw new Error(
        'no Kubernetes configuration: set KUBECONFIG or --kubeconfig, or run in a cluster (`svm dev up` writes one and `source .svm-dev/env` exports it)',
      );
    } else
      loadKubeconfig(process.env.KUBECONFIG || (process.env.KUBERNETES_SERVICE_HOST ? undefined : join(homedir(), '.kube', 'config')), () =>
        kc.loadFromDefault(),
      );
    if (opts.context !== undefined) useContext(kc, opts.context, path ?? process.env.KUBECONFIG);
    return new KubeClient(kc, opts);
  }

  close(): void {
    this.agent.destroy();
  }

  /**
   * A client of the same configuration whose requests act as `user` (a ServiceAccount's username): the API server
   * lets it only if this client's identity may impersonate that user, and then authorizes and admits each request
   * as that user alone.
   */
  impersonating(user: string): KubeClient {
    return new KubeClient(this.kubeConfig, { retry: this.retry, impersonate: user, maxSockets: 16 });
  }

  private headers(opts: RequestOptions): Record<string, string> {
    const h: Record<string, string> = { Accept: opts.accept ?? 'application/json', 'User-Agent': userAgent };
    if (this.impersonate) h['Impersonate-User'] = this.impersonate;
    return h;
  }

  /**
   * Any request; returns the response whatever its status. Sent once, unless the client's retry policy has
   * retryRaw: then a transport error is retried as request() retries it, and so is a 503 that no handler saw
   * (neverHandled); the last such response is returned as it came.
   */
  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<KubeResponse> {
    if (!this.retry.retryRaw) return this.send(method, path, opts);
    for (let attempt = 1; ; attempt++) {
      let wait: number | undefined;
      try {
        const res = await this.send(method, path, opts);
        if (res.status !== 503) return res;
        const refused = classifyResponse(res.status, res.body);
        wait = neverHandled(refused) ? retryDelayMs(this.retry, method, attempt, refused) : undefined;
        if (wait === undefined) return res;
      } catch (err) {
        wait = err instanceof KubeError ? retryDelayMs(this.retry, method, attempt, err) : undefined;
        if (wait === undefined) throw err;
      }
      await sleep(wait);
    }
  }

  /** A request that must succeed: throws a classified KubeError otherwise. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<KubeResponse> {
    // The client's retry policy (retryDelayMs): a request that never reached an API server (refused, or reset
    // before TLS was up: a load balancer still sending to a server that just went away) is safe to send again,
    // whatever its verb; like client-go, a read told to come back later (429 with Retry-After, e.g. "storage is
    // (re)initializing") comes back, a bounded number of times.
    return retrying(this.retry, method, async () => {
      const res = await this.send(method, path, opts);
      if (succeeded(res.status) || opts.allow?.includes(res.status)) return res;
      throw classifyResponse(res.status, res.body, res.headers['retry-after']);
    });
  }

  /**
   * What every request shares before it is sent: the URL with its query, svm's headers (and the body's
   * Content-Type), the kubeconfig's authentication and TLS, the keep-alive agent. Resolves with the function that
   * sends it; its timeout, errors and body are the caller's.
   */
  private async prepare(
    method: string,
    path: string,
    opts: RequestOptions,
  ): Promise<(onResponse: (res: http.IncomingMessage) => void) => http.ClientRequest> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const reqOpts: https.RequestOptions = { method, headers: this.headers(opts) };
    await this.kubeConfig.applyToHTTPSOptions(reqOpts);
    reqOpts.agent = this.agent;
    if (opts.body !== undefined) {
      const headers = reqOpts.headers as Record<string, string | number>;
      headers['Content-Type'] = opts.contentType ?? 'application/json';
      // Note: node frames a body by itself only for methods it expects one with: a DELETE's body (DeleteOptions: a
      // precondition, a grace period) went out with neither Content-Length nor chunking, so the API server read no
      // body (the precondition ignored: an unconditional delete) and took its bytes for the next request on the
      // kept-alive connection (a bare "400 Bad Request").
      headers['Content-Length'] = Buffer.byteLength(opts.body);
    }
    const transport = url.protocol === 'https:' ? https : http;
    return (onResponse) => transport.request(url, reqOpts, onResponse);
  }

  /** One attempt of a request, its response read whole (what raw() and request() send; a test double answers here). */
  protected async send(method: string, path: string, opts: RequestOptions): Promise<KubeResponse> {
    const start = await this.prepare(method, path, opts);
    const timeoutMs = opts.timeoutMs ?? 60_000;
    return new Promise<KubeResponse>((resolve, reject) => {
      let answered = false;
      const req = start((res) => {
        answered = true;
        readBody(res).then((body) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }), reject);
      });
      req.setTimeout(timeoutMs, () => req.destroy(timedOut(`request timed out after ${timeoutMs}ms`)));
      req.on('error', (e: NodeJS.ErrnoException) => {
        const err = classifyTransportError(e);
        if (!answered && req.reusedSocket && closedAsIdle(e)) err.info.closedIdleConnection = true;
        err.info.server ??= this.server;
        reject(err);
      });
      if (opts.body !== undefined) req.end(opts.body);
      else req.end();
    });
  }

  /**
   * One attempt of a request without a body, resolved once the response's headers are in (timeoutMs bounds the
   * wait for them); the body is the caller's to read (or destroy). Note: a timer until the headers, not the socket's
   * idle timeout that send() sets: the caller may hold the body's stream far longer than any wait for the server.
   */
  private async open(
    method: string,
    path: string,
    opts: Omit<RequestOptions, 'body' | 'contentType'>,
  ): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
    const start = await this.prepare(method, path, opts);
    const timeoutMs = opts.timeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      const req = start((res) => {
        clearTimeout(timer);
        resolve({ req, res });
      });
      const timer = setTimeout(() => req.destroy(timedOut(`request timed out after ${timeoutMs}ms`)), timeoutMs);
      req.on('error', (e) => {
        clearTimeout(timer);
        const err = classifyTransportError(e);
        err.info.server ??= this.server;
        reject(err);
      });
      req.end();
    });
  }

  /**
   * A text body (a server's /metrics: megabytes, of which a caller keeps a few lines) handed over line by line as it
   * arrives, never held whole; within timeoutMs in all (default 60 s). A failed status throws a classified KubeError.
   */
  async eachLine(path: string, opts: Pick<RequestOptions, 'timeoutMs' | 'accept'>, onLine: (line: string) => void): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    const { req, res } = await this.open('GET', path, opts);
    const status = res.statusCode ?? 0;
    if (!succeeded(status)) throw classifyResponse(status, await readBody(res), res.headers['retry-after']);
    const timer = setTimeout(() => req.destroy(timedOut(`reading ${path} took over ${timeoutMs}ms`)), Math.max(0, deadline - Date.now()));
    try {
      res.setEncoding('utf8');
      let rest = '';
      for await (const chunk of res as AsyncIterable<string>) {
        const lines = (rest + chunk).split('\n');
        rest = lines.pop()!;
        for (const line of lines) onLine(line);
      }
      if (rest) onLine(rest);
    } catch (err) {
      throw err instanceof KubeError ? err : classifyTransportError(err as Error);
    } finally {
      clearTimeout(timer);
    }
  }

  async getJson<T = unknown>(path: string, query?: RequestOptions['query']): Promise<T> {
    return parseJson<T>((await this.request('GET', path, { query })).body, `GET ${path}`);
  }

  // ---------------------------------------------------------------- discovery

  /** Every top-level and sub- resource of every served group version (legacy discovery). */
  async discover(): Promise<DiscoveredResource[]> {
    const core = APIVersions.parse(await this.getJson('/api'));
    const groups = APIGroupList.parse(await this.getJson('/apis'));
    return this.resourcesOf([...coreVersions(core), ...groups.groups.flatMap(groupVersions)]);
  }

  /**
   * Discovery of one group only ('' for the core group): the group's document and its versions' resource lists,
   * 2-4 requests where discover() sends one per served group-version. [] when the group is not served.
   */
  async discoverGroup(group: string): Promise<DiscoveredResource[]> {
    try {
      const gvs =
        group === ''
          ? coreVersions(APIVersions.parse(await this.getJson('/api')))
          : groupVersions(APIGroup.parse(await this.getJson(`/apis/${encodeURIComponent(group)}`)));
      return await this.resourcesOf(gvs);
    } catch (err) {
      if (err instanceof KubeError && err.kind === 'notFound') return [];
      throw err;
    }
  }

  /** The resources each group-version serves; an aggregated API whose backend is down is skipped, like kubectl does. */
  private async resourcesOf(gvs: ServedGroupVersion[]): Promise<DiscoveredResource[]> {
    const lists = await Promise.all(
      gvs.map(async (gv) => {
        try {
          return { gv, list: APIResourceList.parse(await this.getJson(gv.path)) };
        } catch (err) {
          if (err instanceof KubeError && (err.kind === 'unavailable' || err.kind === 'notFound')) return { gv, list: undefined };
          throw err;
        }
      }),
    );
    return lists.flatMap(({ gv, list }) =>
      list ? list.resources.map((r) => ({ ...r, group: gv.group, version: gv.version, preferred: gv.preferred })) : [],
    );
  }

  async isCustomResource(group: string, resource: string): Promise<boolean> {
    if (!group.includes('.')) return false;
    const res = await this.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${resource}.${group}`, {
      allow: [404],
    });
    return res.status !== 404;
  }

  // ------------------------------------------------------------ list & update

  /** One page of a list, whole (for small lists: listEach never holds a page). A 410 throws KubeError('gone') with the inconsistent continue token. */
  async listPage(
    ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
    opts: { limit: number; continueToken?: string; timeoutMs?: number; content?: boolean },
  ): Promise<ListPage> {
    const items: ListedObject[] = [];
    const meta = await this.listEach(ref, opts, (o) => {
      items.push(o);
    });
    return { items, continueToken: meta.continueToken, remainingItemCount: meta.remainingItemCount, resourceVersion: meta.resourceVersion };
  }

  /**
   * One page of a list, read as a stream: onItem gets each object (its name
   * and resourceVersion; with `content`, its exact text too) as soon as the
   * response holds all of it. Without `content` the page is asked for as
   * metadata only and a server that cannot answer so fails with 406
   * (KubeError 'other', status 406): no object's content is read. While the promise onItem
   * returns is pending, the response is not read further: TCP holds the rest
   * at the API server, so what the worker holds is what onItem keeps (the
   * caller's byte budget), not the page. Resolves with the page's metadata
   * once the response is complete and well formed.
   *
   * Errors before the first byte of the body are classified as request()
   * classifies them: a 410 throws KubeError('gone') with the inconsistent
   * continue token; only a 429 is sent again (LIST_RETRY). A response cut
   * mid-stream throws a retryable KubeError (the items handed out so far were
   * complete and stay valid). timeoutMs bounds each wait for the API server
   * (headers, then each chunk), never the time onItem takes.
   */
  async listEach(
    ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
    opts: { limit: number; continueToken?: string; timeoutMs?: number; content?: boolean; managedFields?: boolean },
    onItem: (obj: ListedObject, bytes: number) => void | Promise<void>,
  ): Promise<ListMeta> {
    const list: ListReading = {
      ref,
      apiVersion: apiVersionOf(ref),
      content: opts.content === true,
      managedFields: opts.managedFields === true,
      timeoutMs: opts.timeoutMs ?? 120_000,
    };
    const { req, res } = await retrying(LIST_RETRY, 'GET', async () => {
      const opened = await this.open('GET', collectionPath(ref), {
        query: { limit: opts.limit, continue: opts.continueToken },
        timeoutMs: list.timeoutMs,
        accept: list.content ? 'application/json' : METADATA_ONLY_LIST_ACCEPT,
      });
      const status = opened.res.statusCode ?? 0;
      if (succeeded(status)) return opened;
      throw classifyResponse(status, await readBody(opened.res), opened.res.headers['retry-after']);
    });
    return readListStream(req, res, list, onItem);
  }

  /**
   * The re-encode: the empty merge patch, as the GA built-in sends it (a JSON
   * merge patch of apiVersion, kind and metadata.resourceVersion, nothing
   * else). It sets no field, so the object (managedFields included) stays as
   * it was; the API server re-encodes it in the storage version, and writes
   * nothing when the stored bytes are already current. A changed
   * resourceVersion (a concurrent write, a deleted and recreated object) is a
   * 409. The reply is asked for as metadata only: a server that cannot
   * answer so refuses the patch with 406 (before it applies it: the reply's
   * media type is negotiated first, k8s.io/apiserver handlers/patch.go), and
   * is never asked again for the object whole. Returns the resourceVersion
   * after it. Where a server refuses this patch, putAsListed is the rewrite.
   */
  async reencode(
    ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
    obj: ListedObject,
    timeoutMs = 30_000,
  ): Promise<string> {
    const body = JSON.stringify({ apiVersion: apiVersionOf(ref), kind: ref.kind, metadata: { resourceVersion: obj.resourceVersion } });
    const res = await this.request('PATCH', objectPath(ref, obj.name, obj.namespace), {
      body,
      timeoutMs,
      contentType: 'application/merge-patch+json',
      accept: METADATA_ONLY_ACCEPT,
      query: { fieldManager: FIELD_MANAGER },
    });
    return replyResourceVersion(res, ref, true);
  }

  /**
   * The PUT exactly as listed: the object's text from a list with content,
   * with its resourceVersion, sent back byte for byte. Used only where a
   * server refuses the empty patch of reencode (some aggregated APIs): the
   * one path of a migration that reads objects' content. Returns the
   * resourceVersion after the update (the listed one when the API server
   * found nothing to rewrite).
   */
  async putAsListed(ref: Pick<ResourceRef, 'group' | 'version' | 'resource'>, obj: ListedObject, timeoutMs = 30_000): Promise<string> {
    if (obj.raw === undefined) throw new KubeError('other', `update of ${ref.resource}: the object was listed without its content`);
    const res = await this.request('PUT', objectPath(ref, obj.name, obj.namespace), {
      body: obj.raw,
      timeoutMs,
      accept: PUT_REPLY_ACCEPT,
      query: { fieldManager: FIELD_MANAGER },
    });
    return replyResourceVersion(res, ref, false);
  }

  /**
   * Merge-patches an object's status subresource. With a resourceVersion the
   * patch only applies to that version of the object (409 otherwise): for
   * read-modify-write without lost updates.
   */
  async patchStatus(path: string, status: unknown, resourceVersion?: string): Promise<void> {
    await this.request('PATCH', `${path}/status`, {
      body: JSON.stringify({ ...(resourceVersion ? { metadata: { resourceVersion } } : {}), status }),
      contentType: 'application/merge-patch+json',
    });
  }
}

/** What reading a list response needs to know of the list asked for. */
interface ListReading {
  ref: Pick<ResourceRef, 'resource' | 'kind'>;
  apiVersion: string;
  /** Listed with content: each object's text is kept (ListedObject.raw); otherwise the page must be metadata only. */
  content: boolean;
  managedFields: boolean;
  /** Bounds each wait for the next chunk. */
  timeoutMs: number;
}

/**
 * The body of a 2xx list response, read as it arrives: each item handed to onItem once complete (the stream is not
 * read further until the promise it returns settles), then the page's metadata once the response ended complete.
 */
async function readListStream(
  req: http.ClientRequest,
  res: http.IncomingMessage,
  list: ListReading,
  onItem: (obj: ListedObject, bytes: number) => void | Promise<void>,
): Promise<ListMeta> {
  const splitter = new RawListSplitter();
  let items = 0;
  let bytes = 0;
  try {
    const chunks = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    for (;;) {
      const next = await nextChunk(chunks, req, list.timeoutMs);
      if (next.done) break;
      for (const item of splitChunk(splitter, next.value, list.ref)) {
        const listed = listedObject(item, items, list);
        items++;
        bytes += item.length;
        await onItem(listed, item.length);
      }
    }
    endList(splitter, list.ref, items);
  } finally {
    if (!res.complete) req.destroy();
  }
  return { ...listMetaOf(splitter, list), items, bytes };
}

/** The next chunk of the response, under an idle timer that runs only while we wait for the API server (never while onItem holds the stream). */
async function nextChunk(chunks: AsyncIterator<Buffer>, req: http.ClientRequest, timeoutMs: number): Promise<IteratorResult<Buffer>> {
  const timer = setTimeout(() => req.destroy(timedOut(`list response stalled for ${timeoutMs}ms`)), timeoutMs);
  try {
    return await chunks.next();
  } catch (e) {
    throw classifyTransportError(e as Error);
  } finally {
    clearTimeout(timer);
  }
}

/** The items a chunk completes; a malformed response is a KubeError. */
function splitChunk(splitter: RawListSplitter, chunk: Buffer, ref: Pick<ResourceRef, 'resource'>): Buffer[] {
  try {
    return splitter.push(chunk);
  } catch (e) {
    throw new KubeError('other', `list of ${ref.resource}: ${(e as Error).message}`);
  }
}

/** Checks that the response ended where a complete list ends. */
function endList(splitter: RawListSplitter, ref: Pick<ResourceRef, 'resource'>, items: number): void {
  try {
    splitter.end();
  } catch (e) {
    // Ended early: the connection closed without an error (a server cut it off).
    throw new KubeError('network', `list of ${ref.resource} was cut off after ${items} items: ${(e as Error).message}`);
  }
}

/** Item `index` of the page as a ListedObject: its identity and version, its text only when listed with content. */
function listedObject(item: Buffer, index: number, list: ListReading): ListedObject {
  const raw = item.toString('utf8');
  let id: ReturnType<typeof itemIdentity>;
  try {
    id = itemIdentity(raw);
  } catch (e) {
    throw new KubeError('other', `list of ${list.ref.resource}: item ${index}: ${(e as Error).message}`);
  }
  const m = id.metadata;
  if (!m?.name || m.resourceVersion === undefined)
    throw new KubeError('other', `list of ${list.ref.resource}: item ${index} has no name or resourceVersion`);
  const listed: ListedObject = { namespace: m.namespace || undefined, name: m.name, resourceVersion: m.resourceVersion };
  if (list.content) listed.raw = withTypeMeta(raw, list.apiVersion, list.ref.kind, id);
  if (list.managedFields) listed.managedFields = (m.managedFields ?? []).map((f) => ({ manager: f.manager, apiVersion: f.apiVersion }));
  return listed;
}

/** The page's own fields (its kind checked when metadata only was asked for), from the list's top-level text. */
function listMetaOf(splitter: RawListSplitter, list: ListReading): Omit<ListMeta, 'items' | 'bytes'> {
  const resource = list.ref.resource;
  const kindText = splitter.fields.get('kind');
  if (!list.content && kindText !== undefined && kindText !== '"PartialObjectMetadataList"')
    throw new KubeError('other', `list of ${resource}: the server answered ${kindText.slice(0, 80)} where metadata only was asked for`);
  const metaText = splitter.fields.get('metadata');
  const meta = metaText
    ? parseJson<{ continue?: string; remainingItemCount?: number; resourceVersion?: string }>(metaText, `list of ${resource}`)
    : {};
  return { continueToken: meta.continue || undefined, remainingItemCount: meta.remainingItemCount, resourceVersion: meta.resourceVersion };
}
