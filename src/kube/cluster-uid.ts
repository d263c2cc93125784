/**
 * Which cluster an API is: the uid of its kube-system namespace, the de-facto cluster ID (Cluster API, Gardener
 * and most fleet tools use it). A workflow of a named cluster records it at its start, and the worker checks it
 * before each activity (src/worker/cluster-check.ts). One GET, cached for UID_CACHE_MS.
 */
import type { KubeClient } from './client';

export const UID_CACHE_MS = 5_000;

/** The uid of kube-system as the API at kube answers now (cached for UID_CACHE_MS). */
export function clusterUidReader(kube: Pick<KubeClient, 'getJson'>, now: () => number = Date.now): () => Promise<string> {
  let cached: { uid: string; at: number } | undefined;
  return async () => {
    if (cached && now() - cached.at < UID_CACHE_MS) return cached.uid;
    const ns = await kube.getJson<{ metadata?: { uid?: string } }>('/api/v1/namespaces/kube-system');
    const uid = ns.metadata?.uid;
    if (!uid) throw new Error('the kube-system namespace has no uid');
    cached = { uid, at: now() };
    return uid;
  };
}
