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
 */
export interface AdaptiveConcurrencyOptions {
  /** The limit at start. */
  initial: number;
  /** The limit never goes above this. */
  max: number;
  backoffRatio?: number;
  growRatio?: number;
  /** Told every new limit (metrics, logs). */
  onChange?: (limit: number) => void;
}

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

  constructor(opts: AdaptiveConcurrencyOptions) {
    this.max = Math.max(1, Math.floor(opts.max));
    this.current = Math.min(this.max, Math.max(1, Math.floor(opts.initial)));
    this.backoffRatio = opts.backoffRatio ?? 2;
    this.growRatio = opts.growRatio ?? 1.3;
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
    if (seconds !== undefined && Number.isFinite(seconds) && seconds >= 0) this.sample(seconds, this.classes[sizeClass(bytes)]!);
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
    const before = this.current;
    if (ratio >= this.backoffRatio) this.current = Math.max(1, Math.floor(this.current * 0.75));
    else if (ratio <= this.growRatio && reached) this.current = Math.min(this.max, this.current + 1);
    if (this.current !== before) {
      this.onChange?.(this.current);
      this.admit();
    }
  }
}
