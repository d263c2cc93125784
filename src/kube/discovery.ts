/**
 * Discovery documents of one group version or group, typed, as one API
 * server serves them (the KubeClient decides which: the worker's own
 * address, or one server at its own address). Whole-cluster discovery is
 * KubeClient.discover().
 */
import { APIGroup, APIResourceList } from '../api/discovery';
import type { KubeClient } from './client';
import { parseBodyAs } from './typed';

/** /api/<version> for the core group, /apis/<group>/<version> otherwise. */
export const groupVersionPath = (gv: { group: string; version: string }) =>
  gv.group ? `/apis/${gv.group}/${gv.version}` : `/api/${gv.version}`;

/**
 * The resources one API server serves in a group version, with their
 * storageVersionHash. Throws a classified KubeError (a 404 when that server
 * does not serve the group version).
 */
export async function getResourceList(
  kube: KubeClient,
  gv: { group: string; version: string },
  opts: { timeoutMs?: number } = {},
): Promise<APIResourceList> {
  const res = await kube.request('GET', groupVersionPath(gv), { timeoutMs: opts.timeoutMs });
  return parseBodyAs(APIResourceList, res.body, { kind: 'APIResourceList', name: groupVersionPath(gv) });
}

/** The group's discovery document (its versions), or undefined when the server does not answer it with 200. */
export async function findApiGroup(kube: KubeClient, group: string): Promise<APIGroup | undefined> {
  const res = await kube.raw('GET', `/apis/${group}`);
  if (res.status !== 200) return undefined;
  return parseBodyAs(APIGroup, res.body, { kind: 'APIGroup', name: group });
}
