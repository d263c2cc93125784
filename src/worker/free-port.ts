/** A free loopback port to listen on (the SDK's Prometheus endpoint; the dev plane uses it too, from src/dev/ports.ts). */
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

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A port on 127.0.0.1 that nothing listens on, below the kernel's ephemeral range (and below 32768, which
 * temporal-server's PostgreSQL schema needs: its cluster_membership.rpc_port is a SMALLINT). A port of that range
 * (what listen(0) gives) is also what every outgoing connection draws from, so one found free and bound seconds
 * later, as a plane's servers start one after another, can be taken meanwhile (it happened once); below it, only
 * an explicit bind can take it. `taken`: ports already handed out to the caller, never given twice.
 */
export async function freePort(taken: Set<number> = new Set()): Promise<number> {
  const below = Math.min(BELOW, ephemeralStart());
  if (below - LOWEST >= 1000) {
    for (let i = 0; i < 200; i++) {
      const port = LOWEST + Math.floor(Math.random() * (below - LOWEST));
      if (taken.has(port) || !(await canListen(port))) continue;
      taken.add(port);
      return port;
    }
  }
  // An ephemeral range reaching down here, or every port tried in use: one the kernel picks.
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => {
        taken.add(port);
        resolve(port);
      });
    });
  });
}
