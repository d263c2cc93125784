/**
 * Seeding many objects of the bench CRD straight into etcd, as the API server
 * would store them at version v1: creating 10^6 objects through the API
 * servers (admission, validation, one etcd transaction each) takes far longer
 * on a 2-core machine than the migration being measured. Each value is the
 * JSON the API server writes for a custom resource (the plane runs with
 * --storage-media-type=application/json; custom resources are JSON anyway):
 * apiVersion, kind, metadata with creationTimestamp, generation,
 * managedFields, name, namespace and uid (byte for byte what a create through
 * the API stores, but for uid and times), and no resourceVersion (the API server takes it from
 * etcd's mod revision when it reads the key). Keys are
 * /registry/<group>/<plural>/<namespace>/<name>. Puts go through etcd's v3
 * JSON gateway, up to 128 per transaction (etcd's default --max-txn-ops).
 */
import { randomUUID } from 'node:crypto';
import type { TestCrd } from '../../src/dev/test-crd';

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

/** The stored form of object i, exactly as createObjects() would have created it through the API at v1. */
export function storedWidget(c: TestCrd, namespace: string, name: string, i: number, created: string): string {
  return JSON.stringify({
    apiVersion: `${c.group}/v1`,
    kind: c.kind,
    metadata: {
      creationTimestamp: created,
      generation: 1,
      managedFields: [
        {
          apiVersion: `${c.group}/v1`,
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:spec': { '.': {}, 'f:index': {}, 'f:note': {} } },
          manager: 'unknown',
          operation: 'Update',
          time: created,
        },
      ],
      name,
      namespace,
      uid: randomUUID(),
    },
    spec: { index: i, note: `object ${i}` },
  });
}

/** Puts count objects (names `${prefix}-NNNNNNN`) of c into etcd at v1; returns the seconds it took. */
export async function seedIntoEtcd(
  endpoint: string,
  c: TestCrd,
  count: number,
  opts: { namespace: string; prefix: string; width?: number; perTxn?: number; log?: (s: string) => void },
): Promise<number> {
  const perTxn = opts.perTxn ?? 128;
  const width = opts.width ?? 4;
  const created = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const url = `${endpoint.replace(/\/$/, '')}/v3/kv/txn`;
  const t0 = performance.now();
  const txns = Math.ceil(count / perTxn);
  let next = 0;
  let done = 0;
  let lastLog = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let t = next++; t < txns; t = next++) {
        const success = [];
        for (let i = t * perTxn; i < Math.min(count, (t + 1) * perTxn); i++) {
          const name = `${opts.prefix}-${String(i).padStart(7, '0')}`;
          const key = `/registry/${c.group}/${c.plural}/${opts.namespace}/${name}`;
          success.push({ request_put: { key: b64(key), value: b64(storedWidget(c, opts.namespace, name, i, created)) } });
        }
        const res = await fetch(url, { method: 'POST', body: JSON.stringify({ success }) });
        if (!res.ok) throw new Error(`etcd txn failed: HTTP ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        done += success.length;
        if (opts.log && done - lastLog >= 100_000) {
          lastLog = done;
          opts.log(`  ${done} put into etcd`);
        }
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}
