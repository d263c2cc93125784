/**
 * Ground truth of a migration: what etcd itself holds for a resource. Reads
 * keys through etcd's gRPC-gateway JSON API (v3), which the plane's etcd
 * serves on its client URL. The API servers run with
 * --storage-media-type=application/json, so values are readable JSON (custom
 * resources are always JSON).
 */

export interface ResourceKey {
  group: string; // '' for the core group
  resource: string;
  /** True for custom resources (stored under /registry/<group>/<resource>/). */
  custom?: boolean;
}

/** Built-in resources whose etcd prefix is not /registry/<resource>/. */
const builtinPrefixOverrides: Record<string, string> = {
  services: '/registry/services/specs/',
  nodes: '/registry/minions/',
  'apiregistration.k8s.io/apiservices': '/registry/apiregistration.k8s.io/apiservices/',
  'apiextensions.k8s.io/customresourcedefinitions': '/registry/apiextensions.k8s.io/customresourcedefinitions/',
};

export function etcdPrefix(r: ResourceKey): string {
  if (r.custom) return `/registry/${r.group}/${r.resource}/`;
  return (
    builtinPrefixOverrides[r.group ? `${r.group}/${r.resource}` : r.resource] ??
    builtinPrefixOverrides[r.resource] ??
    `/registry/${r.resource}/`
  );
}

export interface StoredObject {
  key: string;
  modRevision: number;
  /** The stored bytes as text. */
  raw: string;
  /** The stored object, parsed. Test-side only: never sent anywhere. */
  object: {
    apiVersion?: string;
    kind?: string;
    metadata?: { name?: string; namespace?: string; resourceVersion?: string };
    [k: string]: unknown;
  };
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

/** prefix + 1 on the last byte: the range end that covers every key with the prefix. */
function prefixEnd(prefix: string): string {
  const buf = Buffer.from(prefix, 'utf8');
  buf[buf.length - 1]! += 1;
  return buf.toString('utf8');
}

async function etcdPost(endpoint: string, api: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${endpoint.replace(/\/$/, '')}/v3/${api}`, { method: 'POST', body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${api} failed: HTTP ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Every key under prefix with its parsed value, paged 500 at a time at one revision. */
export async function readStoredObjects(endpoint: string, prefix: string): Promise<StoredObject[]> {
  const out: StoredObject[] = [];
  await forEachStoredObject(endpoint, prefix, (o) => void out.push(o), 500);
  return out;
}

/**
 * Every key under prefix, `pageSize` at a time at one revision, handed to fn one by one and not kept: for
 * resources too big to hold whole in the reader (hundreds of objects near 1 MB).
 */
export async function forEachStoredObject(
  endpoint: string,
  prefix: string,
  fn: (o: StoredObject) => void | Promise<void>,
  pageSize = 20,
): Promise<number> {
  const end = b64(prefixEnd(prefix));
  let start = b64(prefix);
  let revision: string | undefined;
  let n = 0;
  for (;;) {
    const res = (await etcdPost(endpoint, 'kv/range', {
      key: start,
      range_end: end,
      limit: pageSize,
      ...(revision ? { revision } : {}),
    })) as {
      header: { revision: string };
      kvs?: Array<{ key: string; value: string; mod_revision: string }>;
      more?: boolean;
    };
    revision ??= res.header.revision;
    const kvs = res.kvs ?? [];
    for (const kv of kvs) {
      const raw = unb64(kv.value);
      let object: StoredObject['object'];
      try {
        object = JSON.parse(raw) as StoredObject['object'];
      } catch {
        object = { apiVersion: raw.startsWith('k8s\u0000') ? '<protobuf>' : '<unreadable>' };
      }
      n++;
      await fn({ key: unb64(kv.key), modRevision: Number(kv.mod_revision), raw, object });
    }
    if (!res.more || kvs.length === 0) return n;
    start = b64(unb64(kvs[kvs.length - 1]!.key) + '\u0000');
  }
}

/** How many keys there are under prefix (etcd counts them; no value is read). */
export async function countKeys(endpoint: string, prefix: string): Promise<number> {
  const res = (await etcdPost(endpoint, 'kv/range', { key: b64(prefix), range_end: b64(prefixEnd(prefix)), count_only: true })) as {
    count?: string;
  };
  return Number(res.count ?? 0);
}

export interface StoredVersionReport {
  prefix: string;
  total: number;
  /** apiVersion -> number of keys holding it. */
  byApiVersion: Record<string, number>;
}

/** How many keys of a resource hold which apiVersion. */
export async function storedVersions(endpoint: string, r: ResourceKey | string): Promise<StoredVersionReport> {
  const prefix = typeof r === 'string' ? r : etcdPrefix(r);
  const objects = await readStoredObjects(endpoint, prefix);
  const byApiVersion: Record<string, number> = {};
  for (const o of objects) {
    const v = o.object.apiVersion ?? '<none>';
    byApiVersion[v] = (byApiVersion[v] ?? 0) + 1;
  }
  return { prefix, total: objects.length, byApiVersion };
}

/** Compacts etcd at its current revision (expires every older continue token). */
export async function compactEtcd(endpoint: string): Promise<number> {
  const status = (await etcdPost(endpoint, 'kv/range', { key: b64('\u0000'), limit: 1 })) as { header: { revision: string } };
  const revision = Number(status.header.revision);
  await etcdPost(endpoint, 'kv/compaction', { revision: String(revision), physical: true });
  return revision;
}
