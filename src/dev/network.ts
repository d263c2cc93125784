/**
 * The plane's own network, in the cluster shape: one Linux bridge per plane in
 * the root namespace (198.18.K.1/24) and, per API server, a network namespace
 * joined to it by a veth pair (198.18.K.(10+i)/24 inside, default route via
 * the bridge). 198.18.0.0/15 is the benchmarking range: not loopback, not
 * link-local, not private, so Kubernetes accepts these addresses in the
 * `kubernetes` Service's EndpointSlice, and nothing else on the machine uses
 * them.
 *
 * K is chosen so that two planes on one machine (the test suite and a
 * developer's) never share a bridge: the first K whose bridge does not exist
 * and whose /24 no interface holds, claimed by creating the bridge (which fails
 * if another plane created it first). Every name is derived from K and fits
 * IFNAMSIZ (15): bridge svmKbr, host ends svmKhI; the namespace end is eth0
 * inside namespace svmK-apiserver-I.
 *
 * Needs root and iproute2's `ip`.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface PlaneNetwork {
  k: number;
  bridge: string;
  /** The bridge's address: etcd listens here, and it is each namespace's default route. */
  gateway: string;
}

export interface ServerNetwork {
  netns: string;
  hostVeth: string;
  address: string;
}

/** A command's absolute path (also looking in the sbin directories a non-root PATH may lack), or undefined. */
export function commandPath(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

function ipBin(): string {
  const p = commandPath('ip');
  if (!p) throw new Error("the cluster-shaped plane needs iproute2's `ip` (apt-get install iproute2)");
  return p;
}

function ip(args: string[], opts: { allowFail?: boolean } = {}): { ok: boolean; out: string; err: string } {
  const r = spawnSync(ipBin(), args, { encoding: 'utf8' });
  const ok = r.status === 0;
  const err = (r.stderr || r.error?.message || '').trim();
  if (!ok && !opts.allowFail) throw new Error(`ip ${args.join(' ')} failed: ${err}`);
  return { ok, out: r.stdout ?? '', err };
}

export const bridgeName = (k: number) => `svm${k}br`;
export const hostVethName = (k: number, i: number) => `svm${k}h${i}`;
export const netnsName = (k: number, i: number) => `svm${k}-apiserver-${i}`;
export const gatewayAddress = (k: number) => `198.18.${k}.1`;
export const serverAddress = (k: number, i: number) => `198.18.${k}.${10 + i}`;

export function serverNetwork(net: PlaneNetwork, i: number): ServerNetwork {
  return { netns: netnsName(net.k, i), hostVeth: hostVethName(net.k, i), address: serverAddress(net.k, i) };
}

export const linkExists = (name: string): boolean => ip(['link', 'show', 'dev', name], { allowFail: true }).ok;
export const netnsExists = (name: string): boolean => fs.existsSync(`/run/netns/${name}`);

/** The /24s of 198.18.0.0/16 that some interface of the root namespace already holds. */
function usedKs(): Set<number> {
  const out = ip(['-o', '-4', 'addr', 'show']).out;
  return new Set([...out.matchAll(/inet 198\.18\.(\d+)\./g)].map((m) => Number(m[1])));
}

/** Claims a K for a new plane by creating its bridge, and gives the bridge its address. */
export function allocateNetwork(): PlaneNetwork {
  const used = usedKs();
  for (let k = 1; k < 255; k++) {
    if (used.has(k) || linkExists(bridgeName(k))) continue;
    if (!ip(['link', 'add', bridgeName(k), 'type', 'bridge'], { allowFail: true }).ok) continue; // another plane won it
    const net = { k, bridge: bridgeName(k), gateway: gatewayAddress(k) };
    ensureBridge(net);
    return net;
  }
  throw new Error('no free 198.18.K.0/24 for a plane bridge (K 1..254 are all in use): take other planes down (svm dev down --dir ...)');
}

/** Creates the bridge if it is missing and makes sure it holds its address and is up. */
export function ensureBridge(net: PlaneNetwork): void {
  if (!linkExists(net.bridge)) ip(['link', 'add', net.bridge, 'type', 'bridge']);
  const addrs = ip(['-o', '-4', 'addr', 'show', 'dev', net.bridge]).out;
  if (!addrs.includes(`inet ${net.gateway}/24`)) ip(['addr', 'add', `${net.gateway}/24`, 'dev', net.bridge]);
  ip(['link', 'set', net.bridge, 'up']);
}

function serverNetworkIntact(net: PlaneNetwork, s: ServerNetwork): boolean {
  if (!netnsExists(s.netns) || !linkExists(s.hostVeth)) return false;
  const host = ip(['-o', 'link', 'show', 'dev', s.hostVeth], { allowFail: true }).out;
  if (!host.includes(`master ${net.bridge}`)) return false;
  const inside = ip(['-n', s.netns, '-o', '-4', 'addr', 'show', 'dev', 'eth0'], { allowFail: true }).out;
  const route = ip(['-n', s.netns, 'route', 'show', 'default'], { allowFail: true }).out;
  return inside.includes(`inet ${s.address}/24`) && route.includes(`via ${net.gateway}`);
}

/**
 * Makes server i's namespace, veth pair, addresses and route. An intact one is
 * kept as it is (a restarted server comes back in the same namespace); a
 * half-made one is removed and made again.
 */
export function ensureServerNetwork(net: PlaneNetwork, i: number): ServerNetwork {
  ensureBridge(net);
  const s = serverNetwork(net, i);
  if (serverNetworkIntact(net, s)) {
    ip(['link', 'set', s.hostVeth, 'up']);
    ip(['-n', s.netns, 'link', 'set', 'lo', 'up']);
    ip(['-n', s.netns, 'link', 'set', 'eth0', 'up']);
    return s;
  }
  removeServerNetwork(s);
  ip(['netns', 'add', s.netns]);
  ip(['link', 'add', s.hostVeth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', s.netns]);
  ip(['link', 'set', s.hostVeth, 'master', net.bridge]);
  ip(['link', 'set', s.hostVeth, 'up']);
  ip(['-n', s.netns, 'link', 'set', 'lo', 'up']);
  ip(['-n', s.netns, 'addr', 'add', `${s.address}/24`, 'dev', 'eth0']);
  ip(['-n', s.netns, 'link', 'set', 'eth0', 'up']);
  ip(['-n', s.netns, 'route', 'add', 'default', 'via', net.gateway]);
  return s;
}

function removeServerNetwork(s: { netns: string; hostVeth: string }): void {
  if (linkExists(s.hostVeth)) ip(['link', 'del', s.hostVeth], { allowFail: true });
  if (netnsExists(s.netns)) ip(['netns', 'del', s.netns]);
}

/** Removes every namespace, veth and the bridge of plane K, whatever state they are in. Returns what it removed. */
export function removeNetwork(net: PlaneNetwork): string[] {
  const removed: string[] = [];
  const prefix = `svm${net.k}-apiserver-`;
  const namespaces = fs.existsSync('/run/netns') ? fs.readdirSync('/run/netns').filter((n) => n.startsWith(prefix)) : [];
  for (const ns of namespaces) {
    const i = Number(ns.slice(prefix.length));
    const veth = hostVethName(net.k, i);
    removeServerNetwork({ netns: ns, hostVeth: veth });
    removed.push(`netns ${ns}`);
  }
  // Host ends whose namespace is already gone (a half-made plane).
  const links = ip(['-o', 'link', 'show'], { allowFail: true }).out;
  for (const m of links.matchAll(new RegExp(`^\\d+: (svm${net.k}h\\d+)[@:]`, 'gm'))) {
    ip(['link', 'del', m[1]!], { allowFail: true });
    removed.push(`veth ${m[1]}`);
  }
  if (linkExists(net.bridge)) {
    ip(['link', 'del', net.bridge]);
    removed.push(`bridge ${net.bridge}`);
  }
  return removed;
}
