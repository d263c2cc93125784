/**
 * The drop check's requests check: each API server's request counters at the version, read at both ends of the
 * window; Unknown where an aggregated API serves the version, or where discovery does not list the resource at it.
 */
import { combineVerdicts, spanText, unseenClients, type DropCheck, type DropServerRequests } from '../contract/drop';
import type { ApiServers } from './apiservers';
import { readMetrics, requestCounts } from './apiserver-metrics';
import {
  plural,
  why,
  type Aggregation,
  type DropCheckOptions,
  type DropTarget,
  type GroupReading,
  type ResourceFindings,
} from './drop-shared';
import { KubeError } from './errors';
import { sleep } from './rate-limit';
import type { CountersSample } from './request-samples';

const SINCE = (n: number) => `${n} since the server started`;

export interface MetricsReading {
  id: string;
  text?: string;
  error?: string;
}

/** The readings of the window, and where the worker's samples reach further back (checkVersionDrop), its oldest of each server. */
export interface WindowReadings {
  first: MetricsReading[];
  last: MetricsReading[];
  /** When the last reading was taken (ms). */
  lastAt?: number;
  /** A server's oldest sample taken before the window: its count starts there. */
  sampled?: (server: string) => CountersSample | undefined;
}

export async function readEach(found: ApiServers): Promise<MetricsReading[]> {
  return Promise.all(
    found.endpoints.map(async (e): Promise<MetricsReading> => {
      try {
        return { id: e.id, text: await readMetrics(e.kube) };
      } catch (err) {
        const forbidden = err instanceof KubeError && err.kind === 'forbidden';
        return {
          id: e.id,
          error: forbidden
            ? 'may not read /metrics (it needs get on the non-resource URL /metrics; docs/usage.md)'
            : `could not read /metrics: ${why(err)}`,
        };
      }
    }),
  );
}

/** One server's request figures, unknown for the reason given. */
const unknownRequests = (server: string, reason: string): DropServerRequests => ({
  server,
  verdict: 'Unknown',
  requestsInWindow: null,
  requestsSinceStart: null,
  open: null,
  reason,
});

/** One server's request figures for one resource at the version (pure). */
export function serverRequests(
  id: string,
  gvr: { group: string; version: string; resource: string },
  first: MetricsReading | undefined,
  last: MetricsReading,
  windowSeconds: number,
  sampled?: { sample: CountersSample; lastAt: number },
): DropServerRequests {
  const unknown = (reason: string) => unknownRequests(id, reason);
  if (last.text === undefined) return unknown(last.error ?? 'no answer');
  const end = requestCounts(last.text, gvr);
  const deprecated = end.deprecatedRemovedRelease !== undefined ? { deprecatedRemovedRelease: end.deprecatedRemovedRelease } : {};
  if (windowSeconds === 0) {
    return {
      server: id,
      verdict: end.requests > 0 || end.open > 0 ? 'NotYet' : 'Ready',
      requestsInWindow: null,
      requestsSinceStart: end.requests,
      open: end.open,
      ...deprecated,
    };
  }
  // The worker's oldest sample of this server, when it reaches further back than the window's first reading.
  const start = sampled ? sampled.sample.requests(gvr) : first?.text !== undefined ? requestCounts(first.text, gvr).requests : undefined;
  if (start === undefined) return unknown(first?.error ?? 'not read at the start of the window');
  const inWindow = end.requests - start;
  if (inWindow < 0) return unknown('its counters went back during the window (the server restarted)');
  return {
    server: id,
    verdict: inWindow > 0 || end.open > 0 ? 'NotYet' : 'Ready',
    requestsInWindow: inWindow,
    requestsSinceStart: end.requests,
    open: end.open,
    ...(sampled ? { windowSeconds: Math.round((sampled.lastAt - sampled.sample.at) / 1000) } : {}),
    ...deprecated,
  };
}

/** The requests check over every server (pure). */
export function requestsCheck(
  gv: string,
  servers: DropServerRequests[],
  windowSeconds: number,
  found: Pick<ApiServers, 'endpoints' | 'endpointsNote' | 'identities' | 'identitiesNote'>,
): DropCheck {
  if (servers.length === 0)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason: `the API servers could not be asked one by one (${found.endpointsNote ?? 'no address'}): a request at ${gv} to any of them would go unseen`,
    };
  const span = (s: DropServerRequests) =>
    s.windowSeconds !== undefined
      ? `in ${spanText(s.windowSeconds)} (since the worker's oldest sample of it)`
      : windowSeconds > 0
        ? `in ${windowSeconds}s`
        : 'since it started';
  // The shortest window of any server: what the verdict can say for all of them.
  const shortest = windowSeconds > 0 ? Math.min(...servers.map((s) => s.windowSeconds ?? windowSeconds)) : 0;
  const described = servers.map((s) => {
    if (s.verdict === 'Unknown') return `${s.server}: ${s.reason}`;
    const parts = [
      windowSeconds > 0 ? `${plural(s.requestsInWindow!, 'request')} ${span(s)}` : `${plural(s.requestsSinceStart!, 'request')} ${span(s)}`,
      ...(s.open! > 0 ? [`${s.open} open now (watches)`] : []),
      ...(windowSeconds > 0 ? [SINCE(s.requestsSinceStart!)] : []),
      ...(s.deprecatedRemovedRelease !== undefined
        ? [`requested as a deprecated API${s.deprecatedRemovedRelease ? ` removed in ${s.deprecatedRemovedRelease}` : ''}`]
        : []),
    ];
    return `${s.server}: ${parts.join(', ')}`;
  });
  let verdict = combineVerdicts(servers.map((s) => s.verdict));
  const notes: string[] = [];
  if (found.identities && found.identities.length > servers.length) {
    if (verdict === 'Ready') verdict = 'Unknown';
    notes.push(`${plural(found.identities.length, 'identity lease')} but ${plural(servers.length, 'address', 'addresses')} to ask`);
  } else if (!found.identities) {
    if (verdict === 'Ready') verdict = 'Unknown';
    notes.push(`how many API servers exist is unknown (${found.identitiesNote ?? 'identity leases not read'})`);
  }
  const lead =
    verdict === 'NotYet'
      ? `clients still use ${gv}`
      : verdict === 'Ready'
        ? `no client used ${gv} ${windowSeconds > 0 ? `in the last ${spanText(shortest)}` : 'since the servers started'}`
        : `requests at ${gv} could not be counted on every API server`;
  const unseen = verdict === 'Ready' ? [unseenClients(shortest, shortest > windowSeconds)] : [];
  return { check: 'requests', verdict, reason: `${lead}: ${[...described, ...notes, ...unseen].join('; ')}` };
}

/** Every server's /metrics once windowEnd has passed: waits for it, heartbeating every 5 s with the seconds left. */
export async function readAfterWindow(
  found: ApiServers,
  windowEnd: number,
  now: () => number,
  opts: Pick<DropCheckOptions, 'sleep' | 'heartbeat'>,
): Promise<MetricsReading[]> {
  const heartbeat = opts.heartbeat ?? (() => undefined);
  for (let left = windowEnd - now(); left > 0; left -= 5000) {
    heartbeat(`watching request counters: ${Math.ceil(left / 1000)}s left`);
    await (opts.sleep ?? sleep)(Math.min(left, 5000));
  }
  return readEach(found);
}

/**
 * The requests check of one resource and each server's figures: counted from the two readings, unless an
 * aggregated API serves the version (kube-apiserver does not count what it proxies) or discovery does not list the
 * resource at it.
 */
export function requestsFinding(
  f: ResourceFindings,
  { groupVersion, group, version, windowSeconds }: DropTarget,
  { found, aggregation }: Pick<GroupReading, 'found' | 'aggregation'>,
  readings: WindowReadings,
): { requests: DropServerRequests[]; check: DropCheck } {
  // Note: an aggregated API whose discovery does not answer serves the version all the same.
  const proxied = proxiedRequestsCheck(groupVersion, f.servedAt ? aggregation : { service: aggregation.service });
  if (proxied)
    return {
      requests: readings.last.map((r) =>
        unknownRequests(r.id, 'kube-apiserver does not count the requests it proxies to an aggregated API'),
      ),
      check: proxied,
    };
  const gvr = { group, version, resource: f.name };
  const requests = readings.last.map((last) => {
    const sample = windowSeconds > 0 ? readings.sampled?.(last.id) : undefined;
    return serverRequests(
      last.id,
      gvr,
      readings.first.find((r) => r.id === last.id),
      last,
      windowSeconds,
      sample && readings.lastAt !== undefined ? { sample, lastAt: readings.lastAt } : undefined,
    );
  });
  const counted = requestsCheck(groupVersion, requests, windowSeconds, found);
  return { requests, check: f.servedAt ? counted : unservedRequestsCheck(groupVersion, f, counted) };
}

/**
 * The requests check of a group version an aggregated API serves, or may serve (its APIService unread): Unknown,
 * since kube-apiserver counts none of the requests it proxies; undefined where kube-apiserver serves it itself (pure).
 */
function proxiedRequestsCheck(gv: string, a: Aggregation): DropCheck | undefined {
  const why = 'kube-apiserver does not count the requests it proxies to an aggregated API, so its /metrics cannot show who still uses';
  if (a.service)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason: `${gv} is served by the aggregated API ${a.service}: ${why} it (the aggregated API's own metrics or logs can)`,
    };
  if (a.unreadable)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason: `whether an aggregated API serves ${gv} is unknown (${a.unreadable}): ${why} such a version`,
    };
  return undefined;
}

/**
 * The requests check of a resource discovery does not list at the version (a built-in resource stored there before an
 * upgrade, a CRD version with served: false, a storage version no longer served): no client can use it there. Unknown
 * where a built-in resource neither served nor stored at the version is served at a version other than its storage
 * version: the version asked may misspell that one, whose clients were not counted. A check the counters made NotYet
 * or Unknown is kept (pure).
 */
function unservedRequestsCheck(
  gv: string,
  f: Pick<ResourceFindings, 'key' | 'crd' | 'storageVersion' | 'servedVersions'>,
  counted: DropCheck,
): DropCheck {
  if (counted.verdict !== 'Ready') return counted;
  const group = gv.slice(0, gv.indexOf('/'));
  const served = f.servedVersions.map((v) => `${group}/${v}`);
  const lead = `discovery does not list ${f.key} at ${gv}`;
  if (f.crd) return { ...counted, reason: `${lead} (its CRD does not serve it): no client can use it there` };
  if (f.storageVersion === gv)
    return { ...counted, reason: `${lead}, its storage version (it is served at ${served.join(', ')}): no client can use it there` };
  const others = served.filter((v) => v !== f.storageVersion);
  const storage = f.storageVersion ? `its storage version ${f.storageVersion}` : 'its storage version, which is unknown';
  if (others.length > 0)
    return {
      check: 'requests',
      verdict: 'Unknown',
      reason:
        `${lead} but at ${others.join(', ')}, not ${storage}: if ${gv} misspells one of those, its clients were not ` +
        'counted (check that version instead)',
    };
  return {
    ...counted,
    reason: `${lead}, only at ${served.join(', ') || 'no version'} (${storage}): no client can use ${gv} for it`,
  };
}
