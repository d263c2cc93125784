/**
 * An unrelated client: what another tenant of the cluster feels while a
 * migration runs. A steady loop on ~200 ConfigMaps of its own namespace: GET
 * one, LIST 50 (limit=50), PUT one back with a changed value, then a short
 * pause; every request's latency is recorded with the phase it ran in
 * ("idle" before the migration, "migration" during it), so the p99 of both
 * phases comes from one run on one plane.
 */
import type { KubeClient } from '../../src/kube/client';
import { ensureNamespace, parallel } from '../../src/dev/test-crd';

export interface PhaseLatencies {
  requests: number;
  errors: number;
  p50ms: number;
  p99ms: number;
  byVerb: Record<string, { requests: number; p99ms: number }>;
}

const q = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! : NaN);
const ms = (s: number) => Number((s * 1000).toFixed(2));

export class UnrelatedClient {
  phase = 'idle';
  private readonly samples = new Map<string, Array<{ verb: string; seconds: number; ok: boolean }>>();
  private stopped = false;
  private loop?: Promise<void>;

  constructor(
    private readonly kube: KubeClient,
    private readonly namespace: string,
    private readonly objects = 200,
    private readonly pauseMs = 20,
  ) {}

  async prepare(): Promise<void> {
    await ensureNamespace(this.kube, this.namespace);
    await parallel(this.objects, 8, async (i) => {
      const res = await this.kube.raw('POST', `/api/v1/namespaces/${this.namespace}/configmaps`, {
        body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}` }, data: { n: '0' } }),
      });
      if (res.status >= 300 && res.status !== 409) throw new Error(`creating cm-${i}: ${res.status} ${res.body}`);
    });
  }

  private async timed(verb: string, fn: () => Promise<{ status: number; body: string }>) {
    const t = performance.now();
    let ok = false;
    let body = '';
    try {
      const res = await fn();
      ok = res.status < 300;
      body = res.body;
    } catch {
      ok = false;
    }
    const list = this.samples.get(this.phase) ?? [];
    this.samples.set(this.phase, list);
    list.push({ verb, seconds: (performance.now() - t) / 1000, ok });
    return ok ? body : undefined;
  }

  start(): void {
    const base = `/api/v1/namespaces/${this.namespace}/configmaps`;
    this.loop = (async () => {
      for (let n = 0; !this.stopped; n++) {
        const name = `cm-${n % this.objects}`;
        const got = await this.timed('GET', () => this.kube.raw('GET', `${base}/${name}`));
        await this.timed('LIST', () => this.kube.raw('GET', base, { query: { limit: 50 } }));
        if (got) {
          const cm = JSON.parse(got) as { data?: Record<string, string> };
          cm.data = { n: String(n) };
          await this.timed('PUT', () => this.kube.raw('PUT', `${base}/${name}`, { body: JSON.stringify(cm) }));
        }
        await new Promise((r) => setTimeout(r, this.pauseMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  report(phase: string): PhaseLatencies {
    const all = this.samples.get(phase) ?? [];
    const sorted = (xs: typeof all) => xs.map((x) => x.seconds).sort((a, b) => a - b);
    const byVerb: PhaseLatencies['byVerb'] = {};
    for (const verb of ['GET', 'LIST', 'PUT']) {
      const of = all.filter((x) => x.verb === verb);
      byVerb[verb] = { requests: of.length, p99ms: ms(q(sorted(of), 0.99)) };
    }
    const s = sorted(all);
    return { requests: all.length, errors: all.filter((x) => !x.ok).length, p50ms: ms(q(s, 0.5)), p99ms: ms(q(s, 0.99)), byVerb };
  }
}

/**
 * A plain writer: another client that changes Secrets of its own namespace
 * at a steady rate, with no lists and no Temporal. The bench measures the
 * unrelated client while it runs at the migration's budget, beside the
 * migration: what any writer at that rate costs the other clients, against
 * what the migrator costs at the same rate. It writes Secrets, not the
 * unrelated client's ConfigMaps, because the migration too writes a resource
 * the unrelated client does not read: a consistent LIST served from the
 * watch cache waits until the cache of its own resource has caught up with
 * etcd's revision, which writes to that same resource keep moving and writes
 * to other resources do not.
 */
export class PacedWriter {
  writes = 0;
  errors = 0;

  constructor(
    private readonly kube: KubeClient,
    private readonly namespace: string,
    private readonly objects = 200,
  ) {}

  private body(name: string, n: number): string {
    return JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: { n: String(n) } });
  }

  async prepare(): Promise<void> {
    await ensureNamespace(this.kube, this.namespace);
    await parallel(this.objects, 8, async (i) => {
      const res = await this.kube.raw('POST', `/api/v1/namespaces/${this.namespace}/secrets`, { body: this.body(`w-${i}`, 0) });
      if (res.status >= 300 && res.status !== 409) throw new Error(`creating w-${i}: ${res.status} ${res.body}`);
    });
  }

  /** Writes at `qps` with at most `concurrency` in flight for `seconds` (each write: a changed value, no GET first). */
  async run(qps: number, concurrency: number, seconds: number): Promise<void> {
    const base = `/api/v1/namespaces/${this.namespace}/secrets`;
    const start = performance.now();
    const end = start + seconds * 1000;
    let next = 0;
    await parallel(concurrency, concurrency, async () => {
      for (;;) {
        const n = next++;
        const due = start + (n * 1000) / qps;
        if (due >= end) return;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const name = `w-${n % this.objects}`;
        // No resourceVersion: an unconditional update.
        const res = await this.kube.raw('PUT', `${base}/${name}`, { body: this.body(name, n) }).catch(() => undefined);
        if (res && res.status < 300) this.writes++;
        else this.errors++;
      }
    });
  }
}
