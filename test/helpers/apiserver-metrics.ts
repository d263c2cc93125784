/**
 * The API servers' own metrics (GET /metrics on each server, as the plane's
 * admin): what the servers did, counted by them, not by the worker.
 */
import type { TestPlane } from './plane';

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** The samples of one metric in a Prometheus text exposition. */
export function samples(text: string, metric: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(metric)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m || m[1] !== metric) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

/** Every API server's samples of metric whose labels include `where`, one array per server. */
export async function apiserverSamples(plane: TestPlane, metric: string, where: Record<string, string> = {}): Promise<Sample[][]> {
  return Promise.all(
    plane.state.apiservers.map(async (_, i) => {
      const text = (await plane.kubeOf(i).request('GET', '/metrics')).body;
      return samples(text, metric).filter((s) => Object.entries(where).every(([k, v]) => s.labels[k] === v));
    }),
  );
}

/** The sum of a counter's samples (labels including `where`) over every API server. */
export async function apiserverSum(plane: TestPlane, metric: string, where: Record<string, string> = {}): Promise<number> {
  return (await apiserverSamples(plane, metric, where)).flat().reduce((a, s) => a + s.value, 0);
}
