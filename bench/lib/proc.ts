/** CPU time of processes from /proc (Linux), for the benches. */
import { readdirSync, readFileSync } from 'node:fs';
import type { PlaneState } from '../../src/dev/plane';

/** USER_HZ: /proc's clock ticks per second on Linux. */
export const TICK = 100;

export interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime, in ticks */
  self: number;
  /** cutime + cstime: children it has waited for, in ticks */
  children: number;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
    return { pid, ppid: Number(f[1]), self: Number(f[11]) + Number(f[12]), children: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

/** The process and every descendant alive now. */
export function tree(root: number): ProcStat[] {
  const live: ProcStat[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const s = procStat(Number(d));
    if (s) live.push(s);
  }
  const out = live.filter((p) => p.pid === root);
  for (let i = 0; i < out.length; i++) for (const p of live) if (p.ppid === out[i]!.pid) out.push(p);
  return out;
}

/**
 * CPU seconds a process tree has used so far: every live process's own (all its threads), plus what the root
 * has reaped (exited children, e.g. PostgreSQL backends). 0 when the root is gone.
 */
export function treeCpuSeconds(root: number | undefined): number {
  if (!root) return 0;
  const t = tree(root);
  return (t.reduce((n, p) => n + p.self, 0) + (t.find((p) => p.pid === root)?.children ?? 0)) / TICK;
}

/** CPU seconds so far of the plane's parts, and of the whole machine (every CPU's busy time, from /proc/stat). */
export interface PlaneCpu {
  apiservers: number;
  etcd: number;
  temporal: number;
  machine: number;
}

/** Busy CPU seconds of the whole machine so far: every CPU's time but idle and iowait. */
export function machineBusySeconds(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f.reduce((a, b) => a + b, 0) - (f[3] ?? 0) - (f[4] ?? 0)) / TICK;
}

/** The plane's CPU so far, from its state (src/dev/plane.ts): its API servers together, its etcd, its Temporal server. */
export function planeCpu(state: Pick<PlaneState, 'apiservers' | 'etcd' | 'temporal'> | undefined): PlaneCpu {
  return {
    apiservers: (state?.apiservers ?? []).reduce((n, a) => n + treeCpuSeconds(a.pid), 0),
    etcd: treeCpuSeconds(state?.etcd.pid),
    temporal: treeCpuSeconds(state?.temporal.pid),
    machine: machineBusySeconds(),
  };
}

/** CPU seconds per 1000 objects between two readings, each part to two decimals. */
export function planeCpuPer1000(a: PlaneCpu, b: PlaneCpu, objects: number): PlaneCpu {
  const per = (k: keyof PlaneCpu) => Number((((b[k] - a[k]) / objects) * 1000).toFixed(2));
  return { apiservers: per('apiservers'), etcd: per('etcd'), temporal: per('temporal'), machine: per('machine') };
}
