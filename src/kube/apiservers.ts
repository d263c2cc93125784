/**
 * Every API server, found the way a Pod can find them: the
 * worker has one address for the API (in a cluster, the `kubernetes`
 * Service, load-balanced), so it asks that address for
 *
 * - the `kubernetes` EndpointSlice(s) in `default`: the ready address and
 *   `https` port of each API server (kube-apiserver keeps them there with
 *   --endpoint-reconciler-type=lease, the default);
 * - the identity leases in kube-system (apiserver.kubernetes.io/identity=
 *   kube-apiserver): how many API servers are alive, whether or not their
 *   addresses are listed (a managed cluster lists one virtual IP).
 *
 * Each address gets a KubeClient with the worker's own credentials (the same
 * kubeconfig user), the kubeconfig's CA, and TLS server name
 * kubernetes.default.svc, which every kube-apiserver serving certificate
 * names: the credentials go only to a server the cluster CA vouches for, and
 * TLS verification is never skipped, even if the kubeconfig skips it for its
 * own address.
 */
import { isIPv6 } from 'node:net';
import { KubeConfig, type Cluster } from './kubeconfig';
import { EndpointSlice } from '../api/endpoint-slice';
import { liveIdentities, liveProcesses } from './agreement';
import { KubeClient } from './client';
import { isRetryable, KubeError } from './errors';
import { IDENTITY_LEASES_PATH, listIdentityLeases } from './leases';
import { parseListAs } from './typed';
import { compareStrings } from '../api/order';

export { IDENTITY_LEASES_PATH };
export const ENDPOINTSLICES_PATH = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';
export const ENDPOINTSLICE_SELECTOR = 'kubernetes.io/service-name=kubernetes';
/** The name every kube-apiserver serving certificate holds (the `kubernetes` Service's DNS name). */
export const APISERVER_TLS_NAME = 'kubernetes.default.svc';

export interface ApiServer {
  /** address:port ([address]:port for IPv6): how messages and reporters name it. */
  id: string;
  kube: KubeClient;
}

export interface ApiServers {
  /** The worker's own API address (its kubeconfig; load-balanced in a cluster). */
  via: KubeClient;
  /** One per ready address of the `kubernetes` EndpointSlice. */
  endpoints: ApiServer[];
  /** Why there are no addresses to ask, when there are none. */
  endpointsNote?: string;
  /** Names of the live identity leases; undefined when they could not be read. */
  identities?: string[];
  /** The live server processes (`<lease>=<holderIdentity>`): a restart of any server changes them. */
  processes?: string[];
  identitiesNote?: string;
}

/** Where the activities learn which API servers exist. Injectable: tests pass their own. */
export interface ApiServerSource {
  find(): Promise<ApiServers>;
  close(): void;
}

/** The parts of an EndpointSlice that say where servers are (a parsed EndpointSlice, or a test's literal). */
export type EndpointSliceAddresses = Pick<EndpointSlice, 'addressType' | 'endpoints' | 'ports'>;

/** The `kubernetes` Service's EndpointSlices in `default`. */
export async function listKubernetesEndpointSlices(kube: KubeClient): Promise<EndpointSlice[]> {
  const res = await kube.request('GET', ENDPOINTSLICES_PATH, { query: { labelSelector: ENDPOINTSLICE_SELECTOR } });
  return parseListAs(EndpointSlice, res.body, 'EndpointSlice');
}

/**
 * The ready addresses and https port of the `kubernetes` EndpointSlices. A
 * dual-stack cluster may publish one slice per family: one family is used
 * (IPv4 first), so no server is counted twice.
 */
export function endpointAddresses(slices: EndpointSliceAddresses[]): Array<{ address: string; port: number }> {
  const byFamily = new Map<string, Map<string, { address: string; port: number }>>();
  for (const s of slices) {
    const family = s.addressType ?? 'IPv4';
    if (family !== 'IPv4' && family !== 'IPv6') continue; // FQDN: not how kube-apiserver publishes itself
    const port = s.ports?.find((p) => p.name === 'https')?.port ?? (s.ports?.length === 1 ? s.ports[0]!.port : undefined);
    if (!port) continue;
    const found = byFamily.get(family) ?? new Map<string, { address: string; port: number }>();
    for (const e of s.endpoints ?? []) {
      // EndpointSlice API: a nil ready condition means ready; a terminating endpoint is not ready.
      if (e.conditions?.ready === false || e.conditions?.terminating === true) continue;
      const address = e.addresses?.[0];
      if (address) found.set(`${address}:${port}`, { address, port });
    }
    byFamily.set(family, found);
  }
  const pick = byFamily.get('IPv4')?.size ? byFamily.get('IPv4')! : (byFamily.get('IPv6') ?? new Map());
  return [...pick.values()].sort((a, b) => (a.address === b.address ? a.port - b.port : compareStrings(a.address, b.address)));
}

export const endpointId = (address: string, port: number) => `${isIPv6(address) ? `[${address}]` : address}:${port}`;

/**
 * A KubeConfig for one API server address: the base config's current user
 * and CA, server https://ADDR:PORT, TLS server name kubernetes.default.svc,
 * verification on.
 */
export function endpointKubeConfig(base: KubeConfig, address: string, port: number): KubeConfig {
  const cluster = base.getCurrentCluster();
  const user = base.getCurrentUser();
  if (!cluster || !user) throw new Error('the kubeconfig has no current cluster and user');
  const endpointCluster: Cluster = {
    ...cluster,
    name: `apiserver-${endpointId(address, port)}`,
    server: `https://${endpointId(address, port)}`,
    tlsServerName: APISERVER_TLS_NAME,
    skipTLSVerify: false,
  };
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [endpointCluster],
    users: [user],
    contexts: [{ name: endpointCluster.name, cluster: endpointCluster.name, user: user.name }],
    currentContext: endpointCluster.name,
  });
  return kc;
}

const why = (err: unknown) =>
  err instanceof KubeError && err.kind === 'forbidden' ? 'forbidden' : err instanceof Error ? err.message : String(err);

/** The API servers behind `via`, from the `kubernetes` EndpointSlice and the identity leases; one cached client per address. */
export function kubernetesEndpoints(via: KubeClient, opts: { now?: () => number; maxSockets?: number } = {}): ApiServerSource {
  const clients = new Map<string, KubeClient>();
  const now = opts.now ?? Date.now;
  return {
    async find(): Promise<ApiServers> {
      const [slices, leases] = await Promise.allSettled([listKubernetesEndpointSlices(via), listIdentityLeases(via)]);
      // A transient failure (reset, timeout, 5xx, 429) is thrown for the caller's retry: read as "no addresses" it
      // would look like a managed cluster, an unverified agreement, and restart a whole pass. Only a lasting answer
      // (forbidden: RBAC withholds them; not served) degrades to what can be seen through the one address.
      for (const r of [slices, leases])
        if (r.status === 'rejected' && r.reason instanceof KubeError && isRetryable(r.reason.kind)) throw r.reason as Error;
      const out: ApiServers = { via, endpoints: [] };
      if (slices.status === 'fulfilled') {
        const addrs = endpointAddresses(slices.value);
        const ids = new Set<string>();
        for (const { address, port } of addrs) {
          const id = endpointId(address, port);
          ids.add(id);
          let k = clients.get(id);
          if (!k)
            clients.set(id, (k = new KubeClient(endpointKubeConfig(via.kubeConfig, address, port), { maxSockets: opts.maxSockets ?? 4 })));
          out.endpoints.push({ id, kube: k });
        }
        // Addresses no longer listed: their connections go.
        for (const [id, k] of clients) {
          if (!ids.has(id)) {
            k.close();
            clients.delete(id);
          }
        }
        if (addrs.length === 0) out.endpointsNote = 'the kubernetes EndpointSlice lists no ready address';
      } else {
        out.endpointsNote = `could not list the kubernetes EndpointSlice: ${why(slices.reason)}`;
      }
      if (leases.status === 'fulfilled') {
        out.identities = [...liveIdentities(leases.value, now())].sort();
        out.processes = liveProcesses(leases.value, now());
      } else {
        out.identitiesNote = `could not list identity leases: ${why(leases.reason)}`;
      }
      return out;
    },
    close() {
      for (const k of clients.values()) k.close();
      clients.clear();
    },
  };
}

/** A fixed set of API servers (tests, or a worker told exactly whom to ask). */
export function fixedApiServers(via: KubeClient, endpoints: ApiServer[], identities?: string[]): ApiServerSource {
  return {
    find: () => Promise.resolve({ via, endpoints, identities }),
    close: () => undefined,
  };
}
