/**
 * Loopback ports we bind ourselves: a drawn one (freePort) is only a candidate, and the bind decides. A port found
 * free and bound later (seconds later, by another process) can be taken in between; so whatever starts on a drawn
 * port does it through startOnFreePort, which draws again when the bind finds the port taken. The SDK's Prometheus
 * endpoint uses it (src/worker/worker.ts), and the dev plane for each server it starts (src/dev/ports.ts).
 */
import { readFileSync } from 'node:fs';
import * as net from 'node:net';

/** Where the ports are drawn from: below the kernel's ephemeral range, which starts at 32768 by default. */
const LOWEST = 20_000;
const BELOW = 32_000;

/** The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), 32768 where it cannot be read. */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether a listener on port can be made now (a filter for the draw, never a promise: see startOnFreePort). */
export function canListen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/** Ports handed out by freePort in this process: never drawn twice for two servers of ours. */
const handedOut = new Set<number>();

/**
 * A port on 127.0.0.1 that nothing listens on now, below the kernel's ephemeral range (and below 32768, which
 * temporal-server's PostgreSQL schema needs: its cluster_membership.rpc_port is a SMALLINT). A port of that range
 * (what listen(0) gives) is also what every outgoing connection draws from; below it, only an explicit bind can
 * take it. Still a candidate only: something else may bind it before its user does (startOnFreePort draws again
 * then). `taken`: ports already handed out to the caller, never given twice (nor one handed out in this process).
 */
export async function freePort(taken: Set<number> = new Set()): Promise<number> {
  if (handedOut.size > 4000) handedOut.clear();
  const hand = (port: number) => {
    taken.add(port);
    handedOut.add(port);
    return port;
  };
  const below = Math.min(BELOW, ephemeralStart());
  if (below - LOWEST >= 1000) {
    for (let i = 0; i < 200; i++) {
      const port = LOWEST + Math.floor(Math.random() * (below - LOWEST));
      if (taken.has(port) || handedOut.has(port) || !(await canListen(port))) continue;
      return hand(port);
    }
  }
  // An ephemeral range reaching down here, or every port tried in use: one the kernel picks.
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(hand(port)));
    });
  });
}

/**
 * Whether an error or a log says a bind failed on an address in use. Each server names the errno, not the bind:
 * Node "EADDRINUSE: address already in use", Go (etcd, kube-apiserver, temporal-server) "bind: address already in
 * use", Rust (the SDK's core) "Address already in use (os error 98)", haproxy "cannot bind socket (Address already
 * in use)", PostgreSQL "could not bind IPv4 address ...: Address already in use"; musl's strerror "Address in use".
 * A bare "cannot bind" is no such failure (Kubernetes' RBAC "cannot bind resource", for one).
 */
export function addressInUse(text: string): boolean {
  return /address already in use|EADDRINUSE|address in use/i.test(text);
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export interface OnFreePortOptions {
  /** How many ports the start takes (default 1). */
  count?: number;
  /** The ports of the first try (drawn earlier and recorded); drawn when absent. */
  first?: number[];
  /** Draws one port not in taken (default freePort; the plane's temporal-server uses smallintPort). */
  draw?: (taken: Set<number>) => Promise<number>;
  /** How many starts at most (default 5). */
  attempts?: number;
  /** Whether a failed start lost its ports to another process (default: its error says so, addressInUse). */
  lostPorts?: (error: unknown, ports: number[]) => boolean | Promise<boolean>;
  /** Runs after each start that lost its ports, before a start on fresh ones or the final error (the plane stops what is left of it). */
  beforeRetry?: () => Promise<void>;
  log?: (line: string) => void;
}

/**
 * Starts `what` on drawn ports, and again on fresh ones when a start finds one of them taken: the bind is the
 * arbiter, not a probe. tryStart(ports) must resolve only once `what` holds its ports (bound them itself), and fail
 * otherwise; a failure that is not a lost port is thrown at once. After `attempts` starts that all lost a port, it
 * fails naming `what` and every port tried.
 */
export async function startOnFreePort<T>(
  what: string,
  tryStart: (ports: number[]) => Promise<T>,
  opts: OnFreePortOptions = {},
): Promise<T> {
  const count = opts.first?.length ?? opts.count ?? 1;
  const attempts = opts.attempts ?? 5;
  const draw = opts.draw ?? freePort;
  const lostPorts = opts.lostPorts ?? ((e: unknown) => addressInUse(message(e)));
  const taken = new Set<number>(opts.first ?? []);
  const drawAll = async () => {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) ports.push(await draw(taken));
    for (const p of ports) taken.add(p);
    return ports;
  };
  const tried: number[][] = [];
  let ports = opts.first && opts.first.every((p) => p > 0) ? opts.first : await drawAll();
  for (let attempt = 1; ; attempt++) {
    tried.push(ports);
    try {
      return await tryStart(ports);
    } catch (e) {
      if (!(await lostPorts(e, ports))) throw e;
      const triedText = tried.map((t) => t.join('+')).join(', ');
      await opts.beforeRetry?.(); // what is left of the failed start stopped, whether another follows or not
      if (attempt >= attempts)
        throw new Error(
          `cannot start ${what}: another process took its port at each of ${attempt} tries (ports tried: ${triedText}); the last failure: ${message(e)}`,
        );
      ports = await drawAll();
      opts.log?.(`${what}: ${tried.at(-1)!.join('+')} taken by another process meanwhile (address in use); trying ${ports.join('+')}`);
    }
  }
}
