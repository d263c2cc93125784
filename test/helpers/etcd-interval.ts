/**
 * etcd's own account of an interval, for negative claims ("nothing was migrated while ..."): the test takes etcd's
 * revision where the interval starts (etcdRevision) and, where it ends, asks which keys under a prefix were rewritten
 * after it (rewrittenSince). A migration rewrites objects that exist (an update: etcd's mod_revision moves past the
 * key's create_revision); the objects a test creates meanwhile are creates (mod_revision = create_revision) and are
 * told apart. Every revision of the interval is covered, whatever its length, not a sample of it.
 */

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

async function range(endpoint: string, body: Record<string, unknown>): Promise<RangeAnswer> {
  const res = await fetch(`${endpoint.replace(/\/$/, '')}/v3/kv/range`, { method: 'POST', body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd kv/range failed: HTTP ${res.status} ${text}`);
  return JSON.parse(text) as RangeAnswer;
}

interface RangeAnswer {
  header: { revision: string };
  kvs?: Array<{ key: string; create_revision?: string; mod_revision?: string }>;
  more?: boolean;
}

/** etcd's current revision: every write after this moment has a higher one. */
export async function etcdRevision(endpoint: string): Promise<number> {
  return Number((await range(endpoint, { key: b64('\u0000'), limit: 1, keys_only: true })).header.revision);
}

/** A key rewritten in the interval, with the revisions etcd gives it. */
export interface Rewrite {
  key: string;
  createRevision: number;
  modRevision: number;
}

/**
 * The keys under prefix whose value was rewritten (updated, not created) after `revision`, read at one revision:
 * those whose mod_revision is past both `revision` and their create_revision. A key created in the interval and
 * updated in it counts; one only created does not.
 */
export async function rewrittenSince(endpoint: string, prefix: string, revision: number): Promise<Rewrite[]> {
  const buf = Buffer.from(prefix, 'utf8');
  buf[buf.length - 1]! += 1;
  const end = b64(buf.toString('utf8'));
  const out: Rewrite[] = [];
  let start = b64(prefix);
  let at: string | undefined;
  for (;;) {
    const res = await range(endpoint, {
      key: start,
      range_end: end,
      limit: 500,
      keys_only: true,
      min_mod_revision: String(revision + 1),
      ...(at ? { revision: at } : {}),
    });
    at ??= res.header.revision;
    const kvs = res.kvs ?? [];
    for (const kv of kvs) {
      const w = { key: unb64(kv.key), createRevision: Number(kv.create_revision ?? 0), modRevision: Number(kv.mod_revision ?? 0) };
      if (w.modRevision > revision && w.modRevision > w.createRevision) out.push(w);
    }
    if (!res.more || kvs.length === 0) return out;
    start = b64(unb64(kvs[kvs.length - 1]!.key) + '\u0000');
  }
}
