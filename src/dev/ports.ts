/**
 * Loopback ports of the plane's servers: drawn (src/worker/free-port.ts), then bound by the server itself, which
 * decides: a server whose start finds a drawn port taken is started again on fresh ones (startServerOnPorts).
 * Whether a server listens is read from /proc (the process's own sockets), never inferred from a port answering.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import { addressInUse, canListen, freePort, startOnFreePort } from '../worker/free-port';
import { assertPortFree, isRunning, stopProcess, waitFor, type ProcessRecord } from './processes';

export { addressInUse, canListen, freePort, startOnFreePort } from '../worker/free-port';

export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => {
      c.end();
      resolve(true);
    });
    c.on('error', () => resolve(false));
  });
}

/**
 * The TCP ports the process listens on (its own sockets: /proc/PID/fd, matched by inode against the listening
 * sockets of its network namespace in /proc/PID/net/tcp and tcp6). Empty when the process is gone or unreadable.
 */
export function listeningPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]!);
      } catch {
        /* closed meanwhile */
      }
    }
  } catch {
    return new Set();
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A') continue; // 0A: LISTEN
      if (inodes.has(f[9]!)) ports.add(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

/** Whether the process listens on every one of ports itself (a port answering may be another process's). */
export function holdsPorts(pid: number, ports: number[]): boolean {
  const held = listeningPorts(pid);
  return ports.every((p) => held.has(p));
}

/** Of ports, those something listens on now (on 127.0.0.1). */
export async function portsInUse(ports: number[]): Promise<number[]> {
  const out: number[] = [];
  for (const p of ports) if (!(await canListen(p))) out.push(p);
  return out;
}

/**
 * Waits until the process listens on every one of ports itself and then until ready() holds; fails at once when
 * it exits, and after timeoutMs (waitFor, quoting its log).
 */
export function waitServing(
  what: string,
  rec: ProcessRecord,
  ports: number[],
  ready: () => Promise<boolean> = () => Promise.resolve(true),
  timeoutMs = 90_000,
): Promise<void> {
  return waitFor(what, rec, async () => holdsPorts(rec.pid, ports) && (await ready()), timeoutMs);
}

/**
 * What an error says of the latest start only: a log quoted in it is cut at its last start line (startProcess's
 * "=== DATE starting ..."), so an earlier run's "address already in use" in the same log does not count.
 */
export function latestStart(text: string): string {
  const i = text.lastIndexOf('\n=== ');
  return i < 0 ? text : text.slice(0, text.indexOf('\n') + 1) + text.slice(i);
}

/**
 * Waits (10 s at most: a zombie nobody reaps) until no thread of the process is left but, at most, its zombie,
 * which holds no files. isRunning turns false when the main thread lets go of its memory, before its other threads
 * close its sockets.
 */
async function threadsGone(pid: number): Promise<void> {
  const gone = () => {
    try {
      if (fs.readdirSync(`/proc/${pid}/task`).length > 1) return false;
      return /^State:\s+[ZX]/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    } catch {
      return true; // reaped
    }
  };
  const deadline = Date.now() + 10_000;
  while (pid > 0 && !gone() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/**
 * Starts one of the plane's servers (rec: its process record, whose pid tryStart sets) on its ports, as its record
 * has them: drawn (rec.portsDrawn: drawn for it and not yet bound by it) or fixed. Once it has bound drawn ports
 * they are fixed (portsDrawn is cleared here; the caller saves the record): a restart comes back on them
 * (kubeconfigs, env files and clients name them), and one held by another process is refused. Fixed ports
 * are refused with assertPortFree's message when something holds one (an orphan of an interrupted run), and started
 * on once. Drawn ports go through startOnFreePort: a start that fails because one was taken (the log says the
 * address is in use, or the server exited early and another process now holds one of them) is started again on
 * freshly drawn ports, what is left of it stopped first. tryStart must resolve only once the server holds its
 * ports (holdsPorts), so no other process's server can pass for it.
 */
export async function startServerOnPorts<T>(
  what: string,
  rec: ProcessRecord,
  ports: number[],
  tryStart: (ports: number[]) => Promise<T>,
  opts: {
    draw?: (taken: Set<number>) => Promise<number>;
    attempts?: number;
    /** What each port is for, in assertPortFree's message (e.g. 'history'). */
    names?: string[];
    log?: (line: string) => void;
  } = {},
): Promise<T> {
  if (rec.portsDrawn !== true) {
    for (const [i, p] of ports.entries()) await assertPortFree(p, opts.names?.[i] ? `${what} (${opts.names[i]})` : what);
    return tryStart(ports);
  }
  const started = await startOnFreePort(what, tryStart, {
    first: ports,
    draw: opts.draw ?? freePort,
    attempts: opts.attempts,
    log: opts.log,
    lostPorts: async (e, tried) => {
      if (addressInUse(latestStart(e instanceof Error ? e.message : String(e)))) return true;
      if (isRunning(rec)) return false; // up but not serving: its own failure, its ports its own
      // Exited: a port in use now is another process's only once none of its threads is left to hold it (they
      // may still, after isRunning turns false: a server that bound its ports and failed for another reason).
      await threadsGone(rec.pid);
      return (await portsInUse(tried)).length > 0;
    },
    beforeRetry: () => stopProcess(rec, 0),
  });
  delete rec.portsDrawn; // bound: fixed from now on
  return started;
}
