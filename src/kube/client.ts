/**
 * The only place that talks HTTP to Kubernetes. Authentication and TLS come
 * from @kubernetes/client-node's KubeConfig (kubeconfig files, in-cluster
 * service accounts, exec plugins); requests go over one keep-alive agent so
 * that a chunk of concurrent no-op updates reuses its connections.
 *
 * A migration never holds an object's content: list
 * pages are asked for as metadata only (PartialObjectMetadataList) and each
 * object is re-encoded by an empty JSON merge patch that carries nothing but
 * apiVersion, kind and its resourceVersion (reencode), as the GA built-in
 * does; the API server reads, re-encodes and writes the object itself, and
 * answers with metadata only. Only for a resource whose server refuses that
 * patch is the page listed whole and each object PUT back exactly as listed
 * (putAsListed). Either way pages are read as a stream and split into the raw
 * text of each item as it arrives (listEach), never held whole.
 */
import * as fs from 'node:fs';
import { existsSync } from 'node:fs';
import * as http from 'node:http';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as https from 'node:https';
import { packageRoot } from '../config/build-info';
import { KubeConfig } from './kubeconfig';
import { APIGroup, APIGroupList, APIResourceList, APIVersions, type APIResource } from '../api/discovery';
import { apiVersionOf, collectionPath, objectPath, type ResourceRef } from '../api/resource';
import { classifyResponse, classifyTransportError, isRetryable, KubeError } from './errors';
import { itemIdentity, RawListSplitter, withTypeMeta } from './raw-list';

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

/**
 * Lists answered with metadata only (PartialObjectMetadataList), falling back
 * to the full list where the server cannot: for counting objects without
 * reading any object's content (Secrets included).
 */
export const METADATA_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json';

/** A list answered with metadata only, or 406: never the objects' content. */
export const METADATA_ONLY_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io';
/** One object answered with metadata only (the reply of a re-encode: never the object's content). */
export const METADATA_ONLY_ACCEPT =
  'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io';

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
  /** The object as listed, with apiVersion and kind: the body of a PUT rewrite. Only in a list with content. */
  raw?: string;
  /** Who wrote it at which apiVersion (metadata.managedFields without fieldsV1). Only in a list asked with `managedFields`. */
  managedFields?: Array<{ manager?: string; apiVersion?: string }>;
}

/** How a migration rewrites each object: the empty merge patch (no content), or a PUT as listed where a server refuses it. */
export type RewriteMethod = 'patch' | 'put';

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

const MAX_THROTTLED_READS = 10;
const MAX_UNSENT_RETRIES = 4;

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

export const SVM_RETRY: Readonly<RetryPolicy> = {
  unsentAttempts: MAX_UNSENT_RETRIES,
  throttledReadAttempts: MAX_THROTTLED_READS,
  transientReadAttempts: 1,
  retryRaw: false,
};

/**
 * The wait before attempt `attempt + 1` of a request that failed with err
 * (a transport error, or a response classified by classifyResponse), or
 * undefined when it is not sent again. Only reads are sent again after they
 * may have reached a server; a write only when it never did.
 */
export function retryDelayMs(policy: Readonly<RetryPolicy>, method: string, attempt: number, err: KubeError): number | undefined {
  if (neverHandled(err)) return attempt < policy.unsentAttempts ? 250 * attempt : undefined;
  if (method !== 'GET') return undefined;
  if (err.kind === 'throttled') return attempt < policy.throttledReadAttempts ? Math.min(10, err.retryAfterSeconds ?? 1) * 1000 : undefined;
  if (isRetryable(err.kind)) return attempt < policy.transientReadAttempts ? 250 * attempt : undefined;
  return undefined;
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

/** The resourceVersion of a write's reply; only the metadata is parsed (a server that ignored the metadata-only Accept sends the object, which stays one string). */
function replyResourceVersion(res: KubeResponse, ref: Pick<ResourceRef, 'resource'>): string {
  try {
    return itemIdentity(res.body).metadata?.resourceVersion ?? '';
  } catch {
    throw new KubeError('other', `update of ${ref.resource}: the response is not valid JSON (${res.body.length} bytes)`);
  }
}

function readBody(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', (e) => reject(classifyTransportError(e)));
  });
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

  /** From a kubeconfig path, or KUBECONFIG / ~/.kube/config / in-cluster when undefined. */
  static fromKubeconfig(path?: string, opts: { maxSockets?: number; retry?: Readonly<RetryPolicy> } = {}): KubeClient {
    const kc = new KubeConfig();
    if (path) kc.loadFromFile(path);
    else if (!process.env.KUBECONFIG && !process.env.KUBERNETES_SERVICE_HOST && !existsSync(join(homedir(), '.kube', 'config'))) {
      // client-node would fall back to http://localhost:8080 and fail with a puzzling message.
      throw new Error(
        'no Kubernetes configuration: set KUBECONFIG or --kubeconfig, or run in a cluster (`svm dev up` writes one and `source .svm-dev/env` exports it)',
      );
    } else kc.loadFromDefault();
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
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** One attempt of a request (what raw() and request() send; a test double answers here). */
  protected async send(method: string, path: string, opts: RequestOptions): Promise<KubeResponse> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const reqOpts: https.RequestOptions = { method, headers: this.headers(opts) };
    await this.kubeConfig.applyToHTTPSOptions(reqOpts);
    reqOpts.agent = this.agent;
    if (opts.body !== undefined) {
      (reqOpts.headers as Record<string, string>)['Content-Type'] = opts.contentType ?? 'application/json';
    }
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise<KubeResponse>((resolve, reject) => {
      let answered = false;
      const req = mod.request(url, reqOpts, (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (e) => reject(classifyTransportError(e)));
      });
      req.setTimeout(opts.timeoutMs ?? 60_000, () =>
        req.destroy(Object.assign(new Error(`request timed out after ${opts.timeoutMs ?? 60_000}ms`), { code: 'ETIMEDOUT' })),
      );
      req.on('error', (e: NodeJS.ErrnoException) => {
        const err = classifyTransportError(e);
        if (!answered && req.reusedSocket && (e.code === 'ECONNRESET' || e.code === 'EPIPE' || /socket hang up/.test(e.message)))
          err.info.closedIdleConnection = true;
        reject(err);
      });
      if (opts.body !== undefined) req.end(opts.body);
      else req.end();
    });
  }

  /** A request that must succeed: throws a classified KubeError otherwise. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<KubeResponse> {
    // The client's retry policy (retryDelayMs): a request that never reached an API server (refused, or reset
    // before TLS was up: a load balancer still sending to a server that just went away) is safe to send again,
    // whatever its verb; like client-go, a read told to come back later (429 with Retry-After, e.g. "storage is
    // (re)initializing") comes back, a bounded number of times.
    for (let attempt = 1; ; attempt++) {
      let err: KubeError;
      try {
        const res = await this.send(method, path, opts);
        if ((res.status >= 200 && res.status < 300) || opts.allow?.includes(res.status)) return res;
        err = classifyResponse(res.status, res.body, res.headers['retry-after']);
      } catch (e) {
        if (!(e instanceof KubeError)) throw e;
        err = e;
      }
      const wait = retryDelayMs(this.retry, method, attempt, err);
      if (wait === undefined) throw err;
      await new Promise((r) => setTimeout(r, wait));
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
   * Errors before the first byte of the body behave like request(): a 410
   * throws KubeError('gone') with the inconsistent continue token, a 429 with
   * Retry-After is retried a bounded number of times. A response cut
   * mid-stream throws a retryable KubeError (the items handed out so far were
   * complete and stay valid). timeoutMs bounds each wait for the API server
   * (headers, then each chunk), never the time onItem takes.
   */
  async listEach(
    ref: Pick<ResourceRef, 'group' | 'version' | 'resource' | 'kind'>,
    opts: { limit: number; continueToken?: string; timeoutMs?: number; content?: boolean; managedFields?: boolean },
    onItem: (obj: ListedObject, bytes: number) => void | Promise<void>,
  ): Promise<ListMeta> {
    const path = collectionPath(ref);
    const timeoutMs = opts.timeoutMs ?? 120_000;
    const apiVersion = apiVersionOf(ref);
    const content = opts.content === true;
    for (let attempt = 1; ; attempt++) {
      const { req, res } = await this.open('GET', path, {
        query: { limit: opts.limit, continue: opts.continueToken },
        timeoutMs,
        accept: content ? 'application/json' : METADATA_ONLY_LIST_ACCEPT,
      });
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        const body = await readBody(res);
        const err = classifyResponse(status, body, res.headers['retry-after']);
        if (err.kind === 'throttled' && attempt < MAX_THROTTLED_READS) {
          await new Promise((r) => setTimeout(r, Math.min(10, err.retryAfterSeconds ?? 1) * 1000));
          continue;
        }
        throw err;
      }
      // An idle timer that runs only while we wait for the API server, never while onItem holds the stream.
      let timer: NodeJS.Timeout | undefined;
      const arm = () => {
        timer = setTimeout(
          () => req.destroy(Object.assign(new Error(`list response stalled for ${timeoutMs}ms`), { code: 'ETIMEDOUT' })),
          timeoutMs,
        );
      };
      const splitter = new RawListSplitter();
      let items = 0;
      let bytes = 0;
      try {
        const chunks = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
        for (;;) {
          arm();
          let next: IteratorResult<Buffer>;
          try {
            next = await chunks.next();
          } catch (e) {
            throw classifyTransportError(e as Error);
          } finally {
            clearTimeout(timer);
          }
          if (next.done) break;
          let completed: Buffer[];
          try {
            completed = splitter.push(next.value);
          } catch (e) {
            throw new KubeError('other', `list of ${ref.resource}: ${(e as Error).message}`);
          }
          for (const item of completed) {
            const raw = item.toString('utf8');
            let id: ReturnType<typeof itemIdentity>;
            try {
              id = itemIdentity(raw);
            } catch (e) {
              throw new KubeError('other', `list of ${ref.resource}: item ${items}: ${(e as Error).message}`);
            }
            const m = id.metadata;
            if (!m?.name || m.resourceVersion === undefined)
              throw new KubeError('other', `list of ${ref.resource}: item ${items} has no name or resourceVersion`);
            items++;
            bytes += item.length;
            const listed: ListedObject = { namespace: m.namespace || undefined, name: m.name, resourceVersion: m.resourceVersion };
            if (content) listed.raw = withTypeMeta(raw, apiVersion, ref.kind, id);
            if (opts.managedFields)
              listed.managedFields = (m.managedFields ?? []).map((f) => ({ manager: f.manager, apiVersion: f.apiVersion }));
            await onItem(listed, item.length);
          }
        }
        try {
          splitter.end();
        } catch (e) {
          // Ended early: the connection closed without an error (a server cut it off).
          throw new KubeError('network', `list of ${ref.resource} was cut off after ${items} items: ${(e as Error).message}`);
        }
      } finally {
        if (!res.complete) req.destroy();
      }
      const kindText = splitter.fields.get('kind');
      if (!content && kindText !== undefined && kindText !== '"PartialObjectMetadataList"')
        throw new KubeError(
          'other',
          `list of ${ref.resource}: the server answered ${kindText.slice(0, 80)} where metadata only was asked for`,
        );
      const metaText = splitter.fields.get('metadata');
      const meta = metaText
        ? parseJson<{ continue?: string; remainingItemCount?: number; resourceVersion?: string }>(metaText, `list of ${ref.resource}`)
        : {};
      return {
        continueToken: meta.continue || undefined,
        remainingItemCount: meta.remainingItemCount,
        resourceVersion: meta.resourceVersion,
        items,
        bytes,
      };
    }
  }

  /** Sends a request and resolves with the response once its headers are in; the body is the caller's to read (or destroy). */
  private async open(method: string, path: string, opts: RequestOptions): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const reqOpts: https.RequestOptions = { method, headers: this.headers(opts) };
    await this.kubeConfig.applyToHTTPSOptions(reqOpts);
    reqOpts.agent = this.agent;
    const mod = url.protocol === 'https:' ? https : http;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      const req = mod.request(url, reqOpts, (res) => {
        clearTimeout(timer);
        resolve({ req, res });
      });
      const timer = setTimeout(
        () => req.destroy(Object.assign(new Error(`request timed out after ${timeoutMs}ms`), { code: 'ETIMEDOUT' })),
        timeoutMs,
      );
      req.on('error', (e) => {
        clearTimeout(timer);
        reject(classifyTransportError(e));
      });
      req.end();
    });
  }

  /**
   * The re-encode, as the GA built-in sends it: a JSON merge patch holding
   * only apiVersion, kind and metadata.resourceVersion. It sets no field, so
   * the object (managedFields included) stays as it was; the API server
   * re-encodes it in the storage version, and writes nothing when the stored
   * bytes are already current. A changed resourceVersion (a concurrent write,
   * a deleted and recreated object) is a 409. The reply is asked for as
   * metadata only. Returns the resourceVersion after it.
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
    return replyResourceVersion(res, ref);
  }

  /**
   * The rewrite where a server refuses the patch (some aggregated APIs): PUT
   * the object exactly as listed (a list with content), with its
   * resourceVersion. Returns the resourceVersion after the update (equal to
   * the listed one when the API server found nothing to rewrite).
   */
  async putAsListed(ref: Pick<ResourceRef, 'group' | 'version' | 'resource'>, obj: ListedObject, timeoutMs = 30_000): Promise<string> {
    if (obj.raw === undefined) throw new KubeError('other', `update of ${ref.resource}: the object was listed without its content`);
    const res = await this.request('PUT', objectPath(ref, obj.name, obj.namespace), {
      body: obj.raw,
      timeoutMs,
      accept: METADATA_ONLY_ACCEPT,
      query: { fieldManager: FIELD_MANAGER },
    });
    return replyResourceVersion(res, ref);
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
