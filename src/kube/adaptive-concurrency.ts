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
 * say nothing about load). The window's median over the baseline (the
 * lowest window median of the last BASELINE_WINDOWS windows, so it follows
 * a server that got slower for good, e.g. bigger objects) decides:
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

export class AdaptiveConcurrency {
  private current: number;
  private inFlight = 0;
  /** Whether the limit was reached during the current window. */
  private reached = false;
  private readonly waiting: Array<() => void> = [];
  private samples: number[] = [];
  private readonly medians: number[] = [];
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

  /** The baseline latency (seconds) the ratio is taken against; undefined before the first window. */
  get baseline(): number | undefined {
    return this.medians.length ? Math.min(...this.medians) : undefined;
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
   * says nothing about its load (429, error, cancel).
   */
  release(seconds?: number): void {
    this.inFlight--;
    if (seconds !== undefined && Number.isFinite(seconds) && seconds >= 0) this.sample(seconds);
    this.admit();
  }

  private admit(): void {
    while (this.inFlight < this.current && this.waiting.length > 0) {
      this.inFlight++;
      this.waiting.shift()!();
    }
  }

  private sample(seconds: number): void {
    this.samples.push(seconds);
    if (this.samples.length < Math.max(10, 2 * this.current)) return;
    const sorted = this.samples.sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    this.samples = [];
    const reached = this.reached;
    this.reached = this.inFlight >= this.current;
    const baseline = this.baseline;
    this.medians.push(median);
    if (this.medians.length > BASELINE_WINDOWS) this.medians.shift();
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
