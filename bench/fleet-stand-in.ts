/**
 * A stand-in Kubernetes API for the fleet bench (bench/bench-fleet.ts): one small in-memory HTTP server that serves
 * many simulated clusters at once, cluster i under the path prefix `/clusters/<i>` (svm's KubeClient keeps a server
 * URL's path: src/kube/client.ts builds each request as server + path). Each simulated cluster has an identity of its
 * own (its kube-system namespace's uid, drawn at start) and objects of its own.
 *
 * It is NOT Kubernetes and must never be taken for it: no authentication, no admission, no storage encoding, no
 * watch, no field selectors; an object "re-encoded" is an object whose resourceVersion moved. It serves the minimum a
 * pool's worker and a campaign's step touch (discovery, the kube-system namespace, Leases, EndpointSlices, CRDs,
 * StorageStates and the like as plain stored objects, metadata-only lists, merge patches, access reviews) and counts
 * the writes to each object of the bench's resource, which the bench reports. Anything else is answered 404 and said
 * on stderr (`stand-in: not served: ...`): that is how what is missing is found. It lives in bench/, not src/dev/,
 * so that it ships with nothing and no test or tool reaches it: tests keep using real planes.
 *
 * Run: `tsx bench/fleet-stand-in.ts --clusters N [--objects M] [--port P]`; it prints `{"port":P}` on stdout once it
 * listens. GET /stand-in/stats answers the writes counted; GET /stand-in/clusters the uids.
 */
import { createHash, randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { parseArgs } from 'node:util';

/** A resource type the stand-in serves, in every simulated cluster. */
export interface ServedType {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  subresources?: string[];
}

/** The group/version/kind of the bench's resource: a CRD of its own, migrated by no-op updates. */
export const BENCH_GROUP = 'fleet.svm.test';
export const BENCH_RESOURCE = 'widgets';
export const BENCH_KIND = 'Widget';
export const BENCH_VERSION = 'v1';
export const BENCH_NAMESPACE = 'bench';

const VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update'];

export const SERVED_TYPES: ServedType[] = [
  { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false },
  { group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
  { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true },
  { group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices', kind: 'EndpointSlice', namespaced: true },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    resource: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    subresources: ['status'],
  },
  { group: 'internal.apiserver.k8s.io', version: 'v1alpha1', resource: 'storageversions', kind: 'StorageVersion', namespaced: false },
  // svm's own API (its CRDs, as `svm install` would have put them): the migrations mirrored for kubectl, StorageStates.
  {
    group: 'migration.k8s.io',
    version: 'v1alpha1',
    resource: 'storageversionmigrations',
    kind: 'StorageVersionMigration',
    namespaced: false,
    subresources: ['status'],
  },
  {
    group: 'migration.k8s.io',
    version: 'v1alpha1',
    resource: 'storagestates',
    kind: 'StorageState',
    namespaced: false,
    subresources: ['status'],
  },
  { group: BENCH_GROUP, version: BENCH_VERSION, resource: BENCH_RESOURCE, kind: BENCH_KIND, namespaced: true },
];

/** The one API server each simulated cluster has: its identity lease's name. */
export const APISERVER_ID = 'apiserver-stand-in';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid: string; resourceVersion: string; creationTimestamp: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** What a request's path names, the cluster prefix taken off. */
export interface ParsedPath {
  kind: 'discovery-root' | 'discovery-core' | 'discovery-groups' | 'discovery-group' | 'discovery-gv' | 'version' | 'object' | 'other';
  group?: string;
  version?: string;
  namespace?: string;
  resource?: string;
  name?: string;
  subresource?: string;
}

/** The path of a request to a Kubernetes API, read as the stand-in reads it (pure: unit-tested). */
export function parsePath(p: string): ParsedPath {
  const s = p.split('/').filter((x) => x !== '');
  if (s.length === 0) return { kind: 'other' };
  if (s[0] === 'version' && s.length === 1) return { kind: 'version' };
  let group: string;
  let version: string;
  let rest: string[];
  if (s[0] === 'api') {
    if (s.length === 1) return { kind: 'discovery-core' };
    group = '';
    version = s[1]!;
    rest = s.slice(2);
  } else if (s[0] === 'apis') {
    if (s.length === 1) return { kind: 'discovery-groups' };
    if (s.length === 2) return { kind: 'discovery-group', group: s[1] };
    group = s[1]!;
    version = s[2]!;
    rest = s.slice(3);
  } else return { kind: 'other' };
  if (rest.length === 0) return { kind: 'discovery-gv', group, version };
  if (rest[0] === 'namespaces' && rest.length >= 3)
    return { kind: 'object', group, version, namespace: rest[1], resource: rest[2], name: rest[3], subresource: rest[4] };
  return { kind: 'object', group, version, resource: rest[0], name: rest[1], subresource: rest[2] };
}

/** RFC 7386 merge patch (pure). */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** One simulated cluster: its identity and its objects, keyed by type then namespace/name. */
export class SimCluster {
  readonly uid = randomUUID();
  private rv = 1;
  private readonly store = new Map<string, Map<string, Obj>>();
  /** Writes (PATCH, PUT) to each object of the bench's resource, by namespace/name. */
  readonly writes = new Map<string, number>();

  constructor(readonly index: number) {
    this.put(typeOf('', 'namespaces')!, { metadata: { name: 'kube-system', uid: this.uid } });
    this.put(typeOf('', 'namespaces')!, { metadata: { name: 'default' } });
    this.put(typeOf('', 'namespaces')!, { metadata: { name: BENCH_NAMESPACE } });
    // The bench's resource is served as a built-in one (no CRD): its agreement is read from the StorageVersion API
    // and the identity leases, which the stand-in can answer whole (one API server, always agreeing). A CRD's is read
    // from each API server's own discovery over TLS, at the addresses of the `kubernetes` EndpointSlice.
    this.put(typeOf('internal.apiserver.k8s.io', 'storageversions')!, {
      metadata: { name: `${BENCH_GROUP}.${BENCH_RESOURCE}` },
      status: {
        storageVersions: [
          {
            apiServerID: APISERVER_ID,
            encodingVersion: `${BENCH_GROUP}/${BENCH_VERSION}`,
            decodableVersions: [`${BENCH_GROUP}/${BENCH_VERSION}`],
            servedVersions: [`${BENCH_GROUP}/${BENCH_VERSION}`],
          },
        ],
        commonEncodingVersion: `${BENCH_GROUP}/${BENCH_VERSION}`,
      },
    });
    this.put(typeOf('coordination.k8s.io', 'leases')!, {
      metadata: { name: APISERVER_ID, namespace: 'kube-system', labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver' } },
      spec: { holderIdentity: `${APISERVER_ID}_${this.uid}`, leaseDurationSeconds: 3600 },
    });
  }

  /** The API server's identity lease, renewed as it is read (the stand-in's one server is always alive). */
  renewed(o: Obj): Obj {
    if (o.kind !== 'Lease' || o.metadata.name !== APISERVER_ID) return o;
    return { ...o, spec: { ...(o.spec as object), renewTime: new Date().toISOString().replace('Z', '000Z') } };
  }

  nextRv(): string {
    return String(++this.rv);
  }

  table(t: ServedType): Map<string, Obj> {
    const k = `${t.group}/${t.resource}`;
    let m = this.store.get(k);
    if (!m) this.store.set(k, (m = new Map()));
    return m;
  }

  /** Stores an object (created or replaced), with a new resourceVersion. */
  put(
    t: ServedType,
    o: { metadata: { name: string; namespace?: string; uid?: string } & Record<string, unknown> } & Record<string, unknown>,
  ): Obj {
    const key = keyOf(o.metadata.namespace, o.metadata.name);
    const old = this.table(t).get(key);
    const obj = {
      ...o,
      apiVersion: t.group ? `${t.group}/${t.version}` : t.version,
      kind: t.kind,
      metadata: {
        ...o.metadata,
        uid: old?.metadata.uid ?? o.metadata.uid ?? randomUUID(),
        creationTimestamp: old?.metadata.creationTimestamp ?? new Date().toISOString(),
        resourceVersion: this.nextRv(),
      },
    } as Obj;
    this.table(t).set(key, obj);
    return obj;
  }

  /** The bench's objects: n of them in its namespace. */
  seed(n: number): void {
    const t = typeOf(BENCH_GROUP, BENCH_RESOURCE)!;
    for (let i = 0; i < n; i++) this.put(t, { metadata: { name: `w${i}`, namespace: BENCH_NAMESPACE }, spec: { i } });
  }
}

function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

function typeOf(group: string, resource: string): ServedType | undefined {
  return SERVED_TYPES.find((t) => t.group === group && t.resource === resource);
}

function groupVersion(t: Pick<ServedType, 'group' | 'version'>): string {
  return t.group ? `${t.group}/${t.version}` : t.version;
}

function apiGroup(group: string) {
  const versions = [...new Set(SERVED_TYPES.filter((t) => t.group === group).map((t) => t.version))].map((v) => ({
    groupVersion: `${group}/${v}`,
    version: v,
  }));
  return { kind: 'APIGroup', apiVersion: 'v1', name: group, versions, preferredVersion: versions[0] };
}

function resourceList(group: string, version: string) {
  const types = SERVED_TYPES.filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: groupVersion({ group, version }),
    resources: types.flatMap((t) => [
      {
        name: t.resource,
        singularName: t.kind.toLowerCase(),
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: [...VERBS, 'watch'],
        // As kube-apiserver derives it: from the storage version's group, version and kind.
        storageVersionHash: createHash('sha256')
          .update(`${groupVersion(t)}/${t.kind}`)
          .digest()
          .subarray(0, 8)
          .toString('base64'),
      },
      ...(t.subresources ?? []).map((s) => ({
        name: `${t.resource}/${s}`,
        singularName: '',
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: ['get', 'patch', 'update'],
      })),
    ]),
  };
}

const METADATA_ONLY = /as=PartialObjectMetadata(List)?\b/;

function partial(o: Obj) {
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
}

/** The server of N simulated clusters. */
export class StandIn {
  readonly clusters: SimCluster[];
  /** Requests answered 404 because nothing serves them, by method and path shape. */
  readonly unserved = new Map<string, number>();
  requests = 0;

  constructor(n: number, objects: number) {
    this.clusters = Array.from({ length: n }, (_, i) => new SimCluster(i));
    for (const c of this.clusters) c.seed(objects);
  }

  stats() {
    let writes = 0;
    let objectsWritten = 0;
    let maxPerObject = 0;
    for (const c of this.clusters)
      for (const n of c.writes.values()) {
        writes += n;
        objectsWritten++;
        maxPerObject = Math.max(maxPerObject, n);
      }
    return {
      clusters: this.clusters.length,
      requests: this.requests,
      writes,
      objectsWritten,
      maxPerObject,
      unserved: Object.fromEntries(this.unserved),
    };
  }

  /** Answers one request: status and JSON body. */
  handle(method: string, url: URL, accept: string, body: string): { status: number; body: unknown } {
    this.requests++;
    if (url.pathname === '/stand-in/stats') return { status: 200, body: this.stats() };
    if (url.pathname === '/stand-in/clusters') return { status: 200, body: this.clusters.map((c) => ({ index: c.index, uid: c.uid })) };
    const m = /^\/clusters\/(\d+)(\/.*)?$/.exec(url.pathname);
    const cluster = m ? this.clusters[Number(m[1])] : undefined;
    if (!cluster) return this.notServed(method, url.pathname, 'no such simulated cluster');
    const p = parsePath(m![2] ?? '/');
    switch (p.kind) {
      case 'version':
        return { status: 200, body: { major: '1', minor: '34', gitVersion: 'v1.34.0-stand-in', platform: 'linux/amd64' } };
      case 'discovery-core':
        return { status: 200, body: { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] } };
      case 'discovery-groups': {
        const groups = [...new Set(SERVED_TYPES.map((t) => t.group).filter((g) => g !== ''))];
        return { status: 200, body: { kind: 'APIGroupList', apiVersion: 'v1', groups: groups.map(apiGroup) } };
      }
      case 'discovery-group':
        return SERVED_TYPES.some((t) => t.group === p.group) ? { status: 200, body: apiGroup(p.group!) } : this.notFound();
      case 'discovery-gv': {
        const list = resourceList(p.group!, p.version!);
        return list ? { status: 200, body: list } : this.notServed(method, url.pathname, 'group/version not served');
      }
      case 'object':
        return this.object(cluster, method, url, p, accept, body);
      default:
        return this.notServed(method, url.pathname, 'not an API path');
    }
  }

  private object(c: SimCluster, method: string, url: URL, p: ParsedPath, accept: string, body: string): { status: number; body: unknown } {
    if (p.group === 'authorization.k8s.io' && p.resource === 'selfsubjectaccessreviews' && method === 'POST') {
      const review = JSON.parse(body || '{}') as Record<string, unknown>;
      return { status: 201, body: { ...review, status: { allowed: true, reason: 'the fleet bench stand-in allows everything' } } };
    }
    const t = typeOf(p.group!, p.resource!);
    if (!t || t.version !== p.version) return this.notServed(method, url.pathname, 'resource not served');
    const table = c.table(t);
    const metadataOnly = METADATA_ONLY.test(accept);
    if (!p.name) {
      if (method === 'GET') {
        if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1')
          return this.notServed(method, url.pathname, 'watch');
        let items = [...table.values()].filter((o) => !p.namespace || o.metadata.namespace === p.namespace);
        items = items.filter((o) => matchesLabels(o, url.searchParams.get('labelSelector')));
        items.sort((a, b) => (keyOf(a.metadata.namespace, a.metadata.name) < keyOf(b.metadata.namespace, b.metadata.name) ? -1 : 1));
        const limit = Number(url.searchParams.get('limit') ?? 0);
        const from = Number(url.searchParams.get('continue') || 0);
        const page = limit > 0 ? items.slice(from, from + limit) : items.slice(from);
        const next = limit > 0 && from + limit < items.length ? String(from + limit) : undefined;
        const meta = {
          resourceVersion: String(c.nextRv()),
          ...(next ? { continue: next, remainingItemCount: items.length - from - limit } : {}),
        };
        return {
          status: 200,
          body: metadataOnly
            ? { kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: meta, items: page.map(partial) }
            : { kind: `${t.kind}List`, apiVersion: groupVersion(t), metadata: meta, items: page.map((o) => c.renewed(o)) },
        };
      }
      if (method === 'POST') {
        const o = JSON.parse(body) as Obj;
        if (!o.metadata?.name) return this.notServed(method, url.pathname, 'create without a name (generateName)');
        if (table.has(keyOf(p.namespace, o.metadata.name)))
          return conflict('AlreadyExists', `${t.resource} "${o.metadata.name}" already exists`);
        return { status: 201, body: c.put(t, { ...o, metadata: { ...o.metadata, namespace: p.namespace } }) };
      }
      return this.notServed(method, url.pathname, 'collection verb');
    }
    const key = keyOf(p.namespace, p.name);
    const old = table.get(key);
    const reply = (o: Obj, status = 200) => ({ status, body: metadataOnly ? partial(o) : o });
    if (p.subresource && p.subresource !== 'status') return this.notServed(method, url.pathname, `subresource ${p.subresource}`);
    switch (method) {
      case 'GET':
        return old ? reply(c.renewed(old)) : this.notFound(t.resource, p.name);
      case 'DELETE':
        if (!old) return this.notFound(t.resource, p.name);
        table.delete(key);
        return { status: 200, body: { kind: 'Status', apiVersion: 'v1', status: 'Success' } };
      case 'PUT':
      case 'PATCH': {
        const sent = JSON.parse(body || '{}') as Obj;
        if (!old) {
          if (method === 'PATCH') return this.notFound(t.resource, p.name);
          return { status: 201, body: c.put(t, { ...sent, metadata: { ...sent.metadata, namespace: p.namespace } }) };
        }
        const want = sent.metadata?.resourceVersion;
        if (want && want !== old.metadata.resourceVersion)
          return conflict('Conflict', `Operation cannot be fulfilled on ${t.resource} "${p.name}": the object has been modified`);
        const merged = (method === 'PUT' ? sent : mergePatch(old, sent)) as Obj;
        const next = c.put(t, { ...merged, metadata: { ...merged.metadata, name: old.metadata.name, namespace: old.metadata.namespace } });
        if (t.group === BENCH_GROUP) c.writes.set(key, (c.writes.get(key) ?? 0) + 1);
        return reply(next);
      }
      default:
        return this.notServed(method, url.pathname, 'object verb');
    }
  }

  private notFound(resource?: string, name?: string) {
    return {
      status: 404,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        reason: 'NotFound',
        code: 404,
        message: `${resource ?? 'the server'} "${name ?? ''}" not found`,
      },
    };
  }

  private notServed(method: string, path: string, why: string) {
    const shape = `${method} ${path.replace(/^\/clusters\/\d+/, '/clusters/*')} (${why})`;
    const n = (this.unserved.get(shape) ?? 0) + 1;
    this.unserved.set(shape, n);
    if (n === 1 || n % 1000 === 0) process.stderr.write(`stand-in: not served: ${shape} x${n}\n`);
    return this.notFound();
  }
}

function conflict(reason: 'Conflict' | 'AlreadyExists', message: string) {
  return { status: 409, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code: 409, message } };
}

/** Equality selectors only (`a=b,c`, `a`); anything else matches nothing. */
export function matchesLabels(o: { metadata: Record<string, unknown> }, selector: string | null): boolean {
  if (!selector) return true;
  const labels = (o.metadata.labels ?? {}) as Record<string, string>;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=').map((x) => x.trim());
    if (term.includes('!') || term.includes(' in ') || term.includes('notin')) return false;
    return v === undefined ? k! in labels : labels[k!] === v;
  });
}

/** Listens; resolves with the server and its port. */
export async function serveStandIn(standIn: StandIn, port = 0): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      let answer: { status: number; body: unknown };
      try {
        answer = standIn.handle(
          req.method ?? 'GET',
          new URL(req.url ?? '/', 'http://stand-in'),
          String(req.headers.accept ?? ''),
          Buffer.concat(chunks).toString('utf8'),
        );
      } catch (err) {
        process.stderr.write(`stand-in: ${req.method} ${req.url}: ${err instanceof Error ? err.message : String(err)}\n`);
        answer = {
          status: 400,
          body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 400, message: 'stand-in: bad request' },
        };
      }
      const text = JSON.stringify(answer.body);
      res.writeHead(answer.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

/** A kubeconfig that reaches simulated cluster i (no credentials: the stand-in asks none). */
export function standInKubeconfig(port: number, i: number, name: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{name: ${name}, cluster: {server: "http://127.0.0.1:${port}/clusters/${i}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: ${name}, user: {}}]`,
    `contexts: [{name: ${name}, context: {cluster: ${name}, user: ${name}}}]`,
    `current-context: ${name}`,
    '',
  ].join('\n');
}

if (require.main === module) {
  const { values } = parseArgs({
    options: { clusters: { type: 'string' }, objects: { type: 'string', default: '10' }, port: { type: 'string', default: '0' } },
  });
  const n = Number(values.clusters);
  const objects = Number(values.objects);
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(objects) || objects < 0)
    throw new Error('--clusters: a whole number of simulated clusters, at least 1; --objects: a whole number of objects each');
  const standIn = new StandIn(n, objects);
  void serveStandIn(standIn, Number(values.port)).then(({ port }) => process.stdout.write(`${JSON.stringify({ port })}\n`));
}
