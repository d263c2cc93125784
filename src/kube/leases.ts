/**
 * coordination.k8s.io/v1 Leases, typed: what the worker's leader election
 * and its budget membership are made of (src/worker/leader.ts,
 * src/worker/budget.ts). Every write carries the resourceVersion it read
 * (optimistic concurrency): a 409 means someone else wrote in between, and is
 * returned as 'conflict', never retried blindly.
 */
import { IDENTITY_LABEL, IdentityLease } from '../api/storage-version';
import { Lease, type LeaseSpec } from '../api/lease';
import type { KubeClient } from './client';
import { classifyResponse, KubeError } from './errors';
import { parseBodyAs, parseListAs } from './typed';

export { Lease, type LeaseSpec } from '../api/lease';

export const leasesPath = (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
const leasePath = (namespace: string, name: string) => `${leasesPath(namespace)}/${encodeURIComponent(name)}`;

/** A MicroTime as the API server writes it (RFC 3339 with microseconds). */
export const microTime = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

const parse = (body: string, name: string): Lease => parseBodyAs(Lease, body, { kind: 'Lease', name });

/** Where kube-apiserver keeps one lease per running server (apiserver.kubernetes.io/identity=kube-apiserver). */
export const IDENTITY_LEASES_PATH = leasesPath('kube-system');

/** The lease, or undefined when there is none. */
export async function getLease(kube: KubeClient, namespace: string, name: string): Promise<Lease | undefined> {
  const res = await kube.request('GET', leasePath(namespace, name), { timeoutMs: 10_000, allow: [404] });
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw classifyResponse(res.status, res.body, res.headers['retry-after']);
  return parse(res.body, name);
}

/** Leases of the namespace matching a label selector. */
export async function listLeases(kube: KubeClient, namespace: string, labelSelector: string): Promise<Lease[]> {
  const res = await kube.request('GET', leasesPath(namespace), { query: { labelSelector }, timeoutMs: 10_000 });
  return parseListAs(Lease, res.body, 'Lease');
}

/**
 * The API servers' identity leases in kube-system, one per running
 * kube-apiserver (see liveIdentities in ./agreement for which are live).
 * Through request(): a 429 is waited out, anything else throws classified.
 */
export async function listIdentityLeases(kube: KubeClient): Promise<IdentityLease[]> {
  const res = await kube.request('GET', IDENTITY_LEASES_PATH, { query: { labelSelector: IDENTITY_LABEL } });
  return parseListAs(IdentityLease, res.body, 'identity Lease');
}

/** Creates the lease; 'conflict' when it exists already (someone else created it first). */
export async function createLease(
  kube: KubeClient,
  namespace: string,
  name: string,
  spec: LeaseSpec,
  labels?: Record<string, string>,
  annotations?: Record<string, string>,
): Promise<Lease | 'conflict'> {
  const metadata = { name, namespace, ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) };
  const body = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata, spec };
  let res = await kube.raw('POST', leasesPath(namespace), { body: JSON.stringify(body), timeoutMs: 10_000 });
  if (res.status === 404) {
    // The namespace is missing: only outside a cluster (in one it is the Pod's own). Create it if we may.
    const ns = await kube.raw('POST', '/api/v1/namespaces', {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }),
      timeoutMs: 10_000,
    });
    if (ns.status >= 300 && ns.status !== 409) {
      throw new KubeError(
        'notFound',
        `namespace ${namespace} does not exist and could not be created (${ns.status}): create it, or set SVM_NAMESPACE to the worker's namespace`,
      );
    }
    res = await kube.raw('POST', leasesPath(namespace), { body: JSON.stringify(body), timeoutMs: 10_000 });
  }
  if (res.status === 409) return 'conflict';
  if (res.status >= 300) throw classifyResponse(res.status, res.body, res.headers['retry-after']);
  return parse(res.body, name);
}

/**
 * Replaces the lease's spec, only if it is still at the resourceVersion read:
 * 'conflict' when it changed meanwhile (or was deleted: 404).
 */
export async function updateLease(kube: KubeClient, lease: Lease, spec: LeaseSpec): Promise<Lease | 'conflict'> {
  const namespace = lease.metadata.namespace;
  if (!namespace) throw new Error(`lease ${lease.metadata.name} has no namespace`);
  const body = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: lease.metadata, spec };
  const res = await kube.raw('PUT', leasePath(namespace, lease.metadata.name), { body: JSON.stringify(body), timeoutMs: 10_000 });
  if (res.status === 409 || res.status === 404) return 'conflict';
  if (res.status >= 300) throw classifyResponse(res.status, res.body, res.headers['retry-after']);
  return parse(res.body, lease.metadata.name);
}

/** Deletes the lease if it is still at that resourceVersion; false when it changed or is gone. */
export async function deleteLease(kube: KubeClient, namespace: string, name: string, resourceVersion: string): Promise<boolean> {
  const body = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { resourceVersion } };
  const res = await kube.raw('DELETE', leasePath(namespace, name), { body: JSON.stringify(body), timeoutMs: 10_000 });
  if (res.status === 409 || res.status === 404) return false;
  if (res.status >= 300) throw classifyResponse(res.status, res.body, res.headers['retry-after']);
  return true;
}

/**
 * Expiry as seen from here, without trusting other machines' clocks (as
 * client-go's leader election does): a lease is live while it keeps
 * changing; once its resourceVersion has stayed the same for its
 * leaseDurationSeconds, measured on this process's clock from when this
 * process first saw that version, it has expired. A lease seen for the first
 * time counts as just renewed: assuming life is the safe side for both
 * election (no second leader) and budget (smaller shares).
 */
export class LeaseObserver {
  private readonly seen = new Map<string, { resourceVersion: string; at: number }>();

  /** Records what was read at `now`; returns when this version was first seen. */
  observe(lease: Lease, now: number): number {
    const key = lease.metadata.name;
    const prev = this.seen.get(key);
    if (prev && prev.resourceVersion === lease.metadata.resourceVersion) return prev.at;
    this.seen.set(key, { resourceVersion: lease.metadata.resourceVersion, at: now });
    return now;
  }

  /** Whether the lease (observed at now) has expired by this process's clock. */
  expired(lease: Lease, now: number, defaultDurationSeconds: number): boolean {
    const at = this.observe(lease, now);
    const duration = (lease.spec.leaseDurationSeconds ?? defaultDurationSeconds) * 1000;
    return now - at >= duration;
  }

  /** Forgets leases not in names (deleted ones). */
  retain(names: Iterable<string>): void {
    const keep = new Set(names);
    for (const k of this.seen.keys()) if (!keep.has(k)) this.seen.delete(k);
  }
}
