/**
 * The API servers' own count of the migrator's writes: apiserver_request_total
 * scraped from every server each second, and the busiest window of it. Tests
 * hold the load budget to this count, not to the worker's own.
 */
import type { TestPlane } from './plane';

/** The rewrites (the empty PATCH, or a PUT where a server refuses it) of these resources as counted by one API server (apiserver_request_total, every code). */
export function countPuts(metrics: string, crds: Array<{ group: string; plural: string }>): number {
  let n = 0;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    if (!(line.includes('verb="PATCH"') || line.includes('verb="PUT"')) || !line.includes('subresource=""')) continue;
    if (!crds.some((c) => line.includes(`resource="${c.plural}"`) && line.includes(`group="${c.group}"`))) continue;
    n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

export interface PutSample {
  /** When the scrape was sent and when its last answer came (ms): each server read its count somewhere in between. */
  t0: number;
  t1: number;
  /** Its midpoint. */
  t: number;
  puts: number;
}

/** Samples the PUTs of these resources, summed over every API server, each second until stop(). */
export function putSampler(plane: TestPlane, crds: Array<{ group: string; plural: string }>) {
  return metricsSampler(plane, (bodies, t0, t1): PutSample => ({
    t0,
    t1,
    t: (t0 + t1) / 2,
    puts: bodies.reduce((sum, b) => sum + countPuts(b, crds), 0),
  }));
}

/**
 * Every API server's /metrics read each second until stop(), each reading made into a sample by make (given the
 * bodies and when the scrape was sent and when its last answer came).
 */
export function metricsSampler<T>(plane: TestPlane, make: (bodies: string[], t0: number, t1: number) => T) {
  const servers = plane.apiserverUrls.map((_, i) => plane.kubeOf(i));
  const samples: T[] = [];
  const sample = async () => {
    const t0 = Date.now();
    const bodies = await Promise.all(servers.map(async (s) => (await s.request('GET', '/metrics', { timeoutMs: 5000 })).body));
    samples.push(make(bodies, t0, Date.now()));
  };
  let scraping = true;
  const scraper = (async () => {
    while (scraping) {
      const t0 = Date.now();
      // A missed sample only widens the windows around it.
      await sample().catch(() => undefined);
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (Date.now() - t0))));
    }
  })();
  return {
    samples,
    sample,
    async stop() {
      scraping = false;
      await scraper;
    },
  };
}

/**
 * The busiest window of at least 5 s between from and to (each sample to the first one 5 s later). Its length is the
 * longest the two reads can be apart (from the first scrape's start to the second's end): on a loaded machine a
 * scrape can take a second, and a window taken between midpoints would then be up to that much too short.
 */
export function busiestWindow(samples: PutSample[], from: number, to: number) {
  let w = { rate: 0, from: 0, seconds: 0, puts: 0 };
  for (let i = 0; i < samples.length; i++) {
    if (samples[i]!.t < from) continue;
    const j = samples.findIndex((s, k) => k > i && s.t - samples[i]!.t >= 5000);
    if (j < 0 || samples[j]!.t > to) break;
    const seconds = (samples[j]!.t1 - samples[i]!.t0) / 1000;
    const puts = samples[j]!.puts - samples[i]!.puts;
    if (puts / seconds > w.rate) w = { rate: puts / seconds, from: (samples[i]!.t - samples[0]!.t) / 1000, seconds, puts };
  }
  return w;
}

/**
 * The most rewrites the API servers can count in a window of `seconds` under a budget of qps (src/worker/budget.ts):
 * the tokens of the window, each bucket's burst (0.2 s of its share, rounded up: at most one token more per bucket),
 * and the requests whose tokens were taken before the window, still in flight at its start: a server counts a
 * request when it completes, so those may all complete inside it.
 */
export function budgetCeiling(qps: number, seconds: number, opts: { buckets: number; inFlight: number }): number {
  return Math.floor(qps * (seconds + 0.2)) + opts.buckets + opts.inFlight;
}
