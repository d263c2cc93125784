/**
 * What one API server says about the requests it served: its own /metrics
 * (Prometheus text), read with the caller's credentials. Reading it needs
 * `get` on the non-resource URL /metrics; a 403 is a KubeError 'forbidden'
 * for the caller to report, never a guess.
 *
 * Only three families are read, each by group, version and resource:
 *   apiserver_request_total              every request served since the server started (a counter);
 *   apiserver_longrunning_requests       requests open now (watches), a gauge;
 *   apiserver_requested_deprecated_apis  1 for a deprecated API requested since the server started.
 */
import type { KubeClient } from './client';

export const METRICS_PATH = '/metrics';

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** The samples of one metric in a Prometheus text exposition. */
export function samples(text: string, metric: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const s = sampleOf(line, metric);
    if (s) out.push(s);
  }
  return out;
}

/** One line's sample of the metric; undefined for any other line. */
export function sampleOf(line: string, metric: string): Sample | undefined {
  if (!line.startsWith(metric)) return undefined;
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
  if (!m || m[1] !== metric) return undefined;
  const labels: Record<string, string> = {};
  for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
  return { labels, value: Number(m[3]) };
}

/** What one server counted for one group version resource (every verb, code and subresource together). */
export interface RequestCounts {
  /** apiserver_request_total: requests served since the server started. */
  requests: number;
  /** apiserver_longrunning_requests: requests open now (watches). */
  open: number;
  /** apiserver_requested_deprecated_apis: the release the API is removed in, when it was requested as a deprecated API. */
  deprecatedRemovedRelease?: string;
}

/** The counts of one group version resource in a /metrics text. */
export function requestCounts(text: string, gvr: { group: string; version: string; resource: string }): RequestCounts {
  const mine = (s: Sample) => s.labels.group === gvr.group && s.labels.version === gvr.version && s.labels.resource === gvr.resource;
  const sum = (metric: string) =>
    samples(text, metric)
      .filter(mine)
      .reduce((n, s) => n + s.value, 0);
  const deprecated = samples(text, 'apiserver_requested_deprecated_apis').find((s) => mine(s) && s.value > 0);
  return {
    requests: sum('apiserver_request_total'),
    open: sum('apiserver_longrunning_requests'),
    ...(deprecated ? { deprecatedRemovedRelease: deprecated.labels.removed_release ?? '' } : {}),
  };
}

/** One server's /metrics text (throws a classified KubeError: 'forbidden' when the identity may not read it). */
export async function readMetrics(kube: KubeClient, timeoutMs = 20_000): Promise<string> {
  return (await kube.request('GET', METRICS_PATH, { timeoutMs, accept: 'text/plain' })).body;
}
