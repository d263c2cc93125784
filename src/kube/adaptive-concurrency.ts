/**
 * How many no-op updates one worker keeps in flight at once, adapted to how
 * fast the API servers answer: the migrator's second line of load safety,
 * after the QPS budget (which holds whatever the servers' state). A budget
 * cannot tell a cluster that has room from one that is struggling; latency
 * can. When the API servers slow down (their CPU is busy, etcd is slow,
 * other clients compete), the migrator's own updates take longer, and it
 * takes fewer at once, so other clients keep their latency; when answers
 * come back as fast as the baseline, it takes more again, up to the
 * migration's own concurrency.
 *
 * The rule (additive increase, multiplicative decrease on a latency ratio):
 * updates are sampled in windows of max(10, 2 x limit) answers the server
 * processed (successes and conflicts: 429s pause the budget instead, errors
 * say nothing about load), by object size class (under 4 KiB, 16 KiB, 64 KiB,
 * 256 KiB, 1 MiB, more: a 1 MB Helm release Secret takes longer than a 1 KB
 * one on an idle server, and a mix of both must not read as load). A
 * window's median over its class's baseline (the lowest window median of the
 * class's last BASELINE_WINDOWS windows, so it follows a server that got
 * slower for good) decides:
 *   - at or above `backoffRatio` (2): the limit falls to 3/4 (at least 1);
 *   - at or below `growRatio` (1.3): the limit grows by one (up to max),
 *     if it was reached during the window (a limit nobody uses is not raised);
 *   - between: it holds.
 * That rule ('ratio') serves under a fixed budget, which is the first line there: it keeps the migrator's
 * own queue at the servers near empty.
 *
 * With no fixed budget (SVM_QPS=auto, the default) this limit is what follows the API servers, and the
 * 'queue' rule seeks the point where more in flight stops buying throughput (as TCP Vegas does): a window's
 * median over the baseline tells how many of the limit's updates were waiting at the servers rather than
 * being served, queued = limit x (1 - baseline / median). Their queue wait (API Priority and Fairness
 * queues included) is in that latency.
 *   - at or above `overloadRatio` (10: the servers answer ten times slower than their best): the limit halves;
 *   - more than QUEUE_HIGH (4) updates waiting: the limit falls by one;
 *   - fewer than QUEUE_LOW (2) waiting: the limit grows by one (up to max), if it was reached during the window;
 *   - between: it holds.
 * So while the servers keep up, the limit grows to the migrations' own concurrency; once they are busy, a
 * few of the migrator's updates wait at a time, never a growing queue that other clients stand behind.
 * A baseline read only under the migrator's own load would creep up with it (and the queue would look
 * empty), so every PROBE_EVERY windows the limit drops to one for a window (after the updates in flight
 * then have answered) and goes back: that window's median is the servers' answer time without our queue.
 *
 * In both rules a 429 (the servers' rate limit, or API Priority and Fairness rejecting a request: the
 * plainest "too much") halves the limit at once, at most once a second (throttled()).
 */
export interface AdaptiveConcurrencyOptions {
  /** The limit at start. */
  initial: number;
  /** The limit never goes above this. */
  max: number;
  backoffRatio?: number;
  growRatio?: number;
  /** 'ratio' (default): under a fixed budget. 'queue': the budget itself, with no fixed rate (above). */
  rule?: 'ratio' | 'queue';
  /** 'queue' rule: a window median this many times the baseline halves the limit. */
  overloadRatio?: number;
  /** Told every new limit (metrics, logs). */
  onChange?: (limit: number) => void;
}

/** The 'queue' rule: grow while fewer than QUEUE_LOW updates wait at the servers, shrink above QUEUE_HIGH. */
export const QUEUE_LOW = 2;
export const QUEUE_HIGH = 4;
/** The 'queue' rule measures its baseline at a limit of one every this many windows. */
export const PROBE_EVERY = 50;
/** A 429 halves the limit at most this often. */
const THROTTLE_EVERY_MS = 1000;

const BASELINE_WINDOWS = 60;
const SIZE_CLASSES = 6;

/** Size class of an object of `bytes`: 0 under 4 KiB, then one per factor of 4, the last from 1 MiB. */
export function sizeClass(bytes: number | undefined): number {
  if (bytes === undefined || !(bytes >= 4096)) return 0;
  return Math.min(SIZE_CLASSES - 1, Math.floor(Math.log2(bytes / 1024) / 2));
}

interface ClassStats {
  samples: number[];
  /** Medians of the last BASELINE_WINDOWS windows. */
  medians: number[];
}

export class AdaptiveConcurrency {
  private current: number;
  private inFlight = 0;
  /** Whether the limit was reached during the current window. */
  private reached = false;
  private readonly waiting: Array<() => void> = [];
  private readonly classes: ClassStats[] = Array.from({ length: SIZE_CLASSES }, () => ({ samples: [], medians: [] }));
  private readonly max: number;
  private readonly backoffRatio: number;
  private readonly growRatio: number;
  private readonly onChange: ((limit: number) => void) | undefined;
  private readonly rule: 'ratio' | 'queue';
  private readonly overloadRatio: number;
  private lastThrottle = -Infinity;
  /** 'queue' rule: windows since the last probe; during a probe, the limit to go back to. */
  private windows = 0;
  private probing: number | undefined;
  /** Answers still to ignore: those of updates sent before the probe began. */
  private probeSkip = 0;

  constructor(opts: AdaptiveConcurrencyOptions) {
    this.max = Math.max(1, Math.floor(opts.max));
    this.current = Math.min(this.max, Math.max(1, Math.floor(opts.initial)));
    this.backoffRatio = opts.backoffRatio ?? 2;
    this.growRatio = opts.growRatio ?? 1.3;
    this.rule = opts.rule ?? 'ratio';
    this.overloadRatio = opts.overloadRatio ?? 10;
    this.onChange = opts.onChange;
    this.onChange?.(this.current);
  }

  /** Updates allowed in flight now. */
  get limit(): number {
    return this.current;
  }

  /** The baseline latency (seconds) of objects of `bytes` (default: small ones); undefined before their first window. */
  baseline(bytes?: number): number | undefined {
    const { medians } = this.classes[sizeClass(bytes)]!;
    return medians.length ? Math.min(...medians) : undefined;
  }

  /** Waits for a slot. Every acquire must be followed by exactly one release. */
  async acquire(): Promise<void> {
    if (this.inFlight < this.current) {
      this.inFlight++;
      if (this.inFlight >= this.current) this.reached = true;
      return;
    }
    this.reached = true;
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /**
   * Frees a slot. seconds: how long the server took to answer, when it
   * processed the update (success or conflict); undefined when the answer
   * says nothing about its load (429, error, cancel). bytes: the object's size.
   */
  release(seconds?: number, bytes?: number): void {
    this.inFlight--;
    if (this.probeSkip > 0)
      this.probeSkip--; // sent before the probe began: not an answer at a limit of one
    else if (seconds !== undefined && Number.isFinite(seconds) && seconds >= 0) this.sample(seconds, this.classes[sizeClass(bytes)]!);
    this.admit();
  }

  /**
   * A 429 (rate limit or API Priority and Fairness rejection): the limit halves at once, at most once every
   * THROTTLE_EVERY_MS (one burst of rejections is one signal). now: a monotonic clock, in ms.
   */
  throttled(now: number = performance.now()): void {
    if (now - this.lastThrottle < THROTTLE_EVERY_MS) return;
    this.lastThrottle = now;
    if (this.probing !== undefined) this.probing = Math.max(1, Math.floor(this.probing / 2));
    else this.set(Math.max(1, Math.floor(this.current / 2)));
  }

  private set(limit: number): void {
    if (limit === this.current) return;
    this.current = limit;
    this.onChange?.(limit);
    this.admit();
  }

  private admit(): void {
    while (this.inFlight < this.current && this.waiting.length > 0) {
      this.inFlight++;
      this.waiting.shift()!();
    }
  }

  private sample(seconds: number, c: ClassStats): void {
    c.samples.push(seconds);
    if (c.samples.length < Math.max(10, 2 * this.current)) return;
    const sorted = c.samples.sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    c.samples = [];
    const reached = this.reached;
    this.reached = this.inFlight >= this.current;
    const baseline = c.medians.length ? Math.min(...c.medians) : undefined;
    c.medians.push(median);
    if (c.medians.length > BASELINE_WINDOWS) c.medians.shift();
    if (baseline === undefined || baseline <= 0) return;
    const ratio = median / baseline;
    const now = this.current;
    if (this.rule === 'queue') {
      if (this.probing !== undefined) {
        // The probe's window is the baseline's sample (pushed above): back to where the limit was.
        const back = this.probing;
        this.probing = undefined;
        this.set(back);
        return;
      }
      const queued = now * (1 - baseline / median);
      if (ratio >= this.overloadRatio) this.set(Math.max(1, Math.floor(now / 2)));
      else if (queued > QUEUE_HIGH) this.set(Math.max(1, now - 1));
      else if (queued < QUEUE_LOW && reached) this.set(Math.min(this.max, now + 1));
      if (++this.windows % PROBE_EVERY === 0 && this.current > 1) {
        this.probing = this.current;
        for (const k of this.classes) k.samples = [];
        this.probeSkip = this.inFlight;
        this.set(1);
      }
      return;
    }
    if (ratio >= this.backoffRatio) this.set(Math.max(1, Math.floor(now * 0.75)));
    else if (ratio <= this.growRatio && reached) this.set(Math.min(this.max, now + 1));
  }
}
