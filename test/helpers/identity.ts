/**
 * Cluster names on the suite's planes. A cluster's uid is pinned to its name in Temporal (src/client/identity.ts),
 * and the suite's planes stand for clusters under names of each file's own: before a file uses a name for a plane,
 * the operator's act frees the plane's uid (`svm fleet forget` of whatever name holds it, as a platform team does
 * for a decommissioned cluster), and the file forgets its names when it ends, so that files run in any order.
 */
import type { Client } from '@temporalio/client';
import { claimOf, forget, pinOf } from '../../src/kube/cluster-identity';
import type { KubeClient } from '../../src/kube/client';

/** The uid of kube-system as the API at kube answers. */
export async function kubeSystemUid(kube: Pick<KubeClient, 'getJson'>): Promise<string> {
  return (await kube.getJson<{ metadata: { uid: string } }>('/api/v1/namespaces/kube-system')).metadata.uid;
}

/**
 * Frees the plane behind kube for cluster `name` on the namespace of client: the name its uid is pinned to (when
 * another) and the name itself (when pinned to another uid) are forgotten. Returns the uid.
 */
export async function freeIdentity(client: Client, kube: Pick<KubeClient, 'getJson'>, name: string): Promise<string> {
  const uid = await kubeSystemUid(kube);
  const holder = await claimOf(client, uid);
  if (holder !== undefined && holder !== name) await forget(client, holder, 'the test suite (a name of another file)');
  const pin = await pinOf(client, name);
  if (pin && pin.uid !== uid) await forget(client, name, 'the test suite (a name of another file)');
  return uid;
}

/** Forgets the names a file used (its end). */
export async function forgetNames(client: Client, names: string[]): Promise<void> {
  for (const n of names) await forget(client, n, 'the test suite (its file ended)');
}
