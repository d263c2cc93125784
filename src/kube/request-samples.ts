/**
 * The worker's samples of every API server's request counters (apiserver_request_total, by group, version and
 * resource), taken every period and kept for a day (SVM_REQUEST_SAMPLE_SECONDS): the drop check run by the worker
 * (checkVersionDrop) counts each server's requests at a version since its oldest sample, so a client that calls once
 * a night is seen where the worker ran all day, not only one that called in the check's own window.
 *
 * Held in this process only, and nothing of any object: per server, a number per group/version/resource. A worker
 * restarted starts again, and a server whose counters went back (it restarted) starts again at that sample: the
 * window each server's count covers is stated with it. Compact: the names are kept once, each sample is an array of
 * numbers (about 2 KiB a server).
 */
import type { ApiServerSource } from './apiservers';
import { METRICS_PATH, sampleOf } from './apiserver-metrics';
import type { KubeClient } from './client';
import { KubeError } from './errors';

export const DAY_MS = 24 * 3600 * 1000;

/** One server's counters at one time. */
export interface CountersSample {
  at: number;
  /** Requests served since the server started, of one group/version/resource; undefined when it counted none then. */
  requests(gvr: { group: string; version: string; resource: string }): number;
}

const keyOf = (group: string, version: string, resource: string) => `${group}/${version}/${resource}`;

const METRIC = 'apiserver_request_total';

/** Adds one /metrics line to the totals, if it is a sample of apiserver_request_total. */
function addLine(totals: Map<string, number>, line: string): void {
  const s = sampleOf(line, METRIC);
  if (!s) return;
  const { group, version, resource } = s.labels;
  if (version === undefined || resource === undefined) return;
  const k = keyOf(group ?? '', version, resource);
  totals.set(k, (totals.get(k) ?? 0) + s.value);
}

/** apiserver_request_total summed by group, version and resource (every verb, code, scope and subresource together). */
export function requestTotals(text: string): Map<string, number> {
  const totals = new Map<string, number>();
  for (const line of text.split('\n')) addLine(totals, line);
  return totals;
}

/** One server's totals, read from its /metrics line by line (the text, megabytes, is never held whole). */
export async function readRequestTotals(server: KubeClient): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  await server.eachLine(METRICS_PATH, { timeoutMs: 20_000, accept: 'text/plain' }, (line) => addLine(totals, line));
  return totals;
}

interface Stored {
  at: number;
  values: Float64Array;
}

/** Samples of each server's counters, by its id (address:port), kept for keepMs. */
export class RequestSamples {
  /** Each group/version/resource's place in a sample's values, shared by all. */
  private readonly index = new Map<string, number>();
  private readonly byServer = new Map<string, Stored[]>();

  constructor(private readonly keepMs = DAY_MS) {}

  /** Adds one server's reading; counters lower than its last sample's (a restart) start its samples again. */
  add(server: string, at: number, totals: Map<string, number>): void {
    for (const k of totals.keys()) if (!this.index.has(k)) this.index.set(k, this.index.size);
    const values = new Float64Array(this.index.size);
    for (const [k, v] of totals) values[this.index.get(k)!] = v;
    let list = this.byServer.get(server) ?? [];
    const last = list[list.length - 1];
    if (last && last.values.some((v, i) => (values[i] ?? 0) < v)) list = [];
    list.push({ at, values });
    // Kept: every sample within keepMs of this one.
    this.byServer.set(
      server,
      list.filter((s) => s.at >= at - this.keepMs),
    );
  }

  /** The oldest sample of the server taken at or before `notAfter`; undefined when there is none. */
  oldest(server: string, notAfter: number): CountersSample | undefined {
    const s = this.byServer.get(server)?.[0];
    if (!s || s.at > notAfter) return undefined;
    return {
      at: s.at,
      requests: ({ group, version, resource }) => {
        const i = this.index.get(keyOf(group, version, resource));
        return i === undefined ? 0 : (s.values[i] ?? 0);
      },
    };
  }

  /** Forget servers no longer found. */
  keepOnly(servers: Set<string>): void {
    for (const id of [...this.byServer.keys()]) if (!servers.has(id)) this.byServer.delete(id);
  }
}

/**
 * Samples every API server's /metrics now and every periodMs after (a timer that does not hold the process open). A
 * server that does not answer is skipped that time; stop() ends it.
 */
export function startRequestSampler(
  source: ApiServerSource,
  opts: { periodMs: number; keepMs?: number; now?: () => number; onError?: (server: string, err: unknown) => void },
): { samples: RequestSamples; stop(): void } {
  const store = new RequestSamples(opts.keepMs);
  const now = opts.now ?? Date.now;
  let running: Promise<void> | undefined;
  const sampleAll = async () => {
    const found = await source.find();
    store.keepOnly(new Set(found.endpoints.map((e) => e.id)));
    await Promise.all(
      found.endpoints.map(async (e) => {
        try {
          store.add(e.id, now(), await readRequestTotals(e.kube));
        } catch (err) {
          opts.onError?.(e.id, err);
        }
      }),
    );
  };
  const tick = () => {
    running ??= sampleAll()
      .catch((err: unknown) => opts.onError?.('(finding the API servers)', err))
      .finally(() => (running = undefined));
  };
  tick();
  const timer = setInterval(tick, opts.periodMs);
  timer.unref();
  return { samples: store, stop: () => clearInterval(timer) };
}

/** The worker's sampler by its setting (SVM_REQUEST_SAMPLE_SECONDS; 0: none), saying once why a server cannot be read. */
export function workerRequestSampler(
  source: ApiServerSource,
  periodSeconds: number,
  log: { info(obj: object, msg: string): void },
): { samples?: RequestSamples; stop(): void } {
  if (periodSeconds <= 0) return { stop: () => undefined };
  const told = new Set<string>();
  return startRequestSampler(source, {
    periodMs: periodSeconds * 1000,
    onError: (server, err) => {
      const why = err instanceof KubeError && err.kind === 'forbidden' ? 'forbidden (get on the non-resource URL /metrics)' : String(err);
      if (told.has(`${server} ${why}`)) return;
      told.add(`${server} ${why}`);
      log.info({ server, err: why }, "request counters not sampled: the drop check's requests window stays its own");
    },
  });
}
