/**
 * How a worker process is tuned and its load held, from its settings: V8's heap (SVM_SEMI_SPACE_MIB,
 * SVM_V8_OPTIMIZE_FOR_SIZE, SVM_HEAP_GROWING_PERCENT, set before any worker is made), the activity polls it keeps
 * open, and its load controls (the fixed rate, its share of the budget, adaptive concurrency, the memory budget).
 * Moved as they were from worker.ts, which re-exports them.
 */
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { AdaptiveConcurrency } from '../kube/adaptive-concurrency';
import { MemoryBudget } from '../kube/memory-budget';
import { RateLimiter } from '../kube/rate-limit';
import { MAX_MIGRATION_CONCURRENCY } from '../contract/definitions';
import type { WorkerSettings } from './config';
import type { MigratorMetrics } from './metrics';

/**
 * Keeps V8's young generation small (SVM_SEMI_SPACE_MIB): new isolates (the
 * workflow thread, created by Worker.create) get semi-spaces of at most mib,
 * and this isolate's stop growing (a flag read whenever V8 grows them). Worth
 * ~30-60 MiB of RSS under load; see docs/benchmarks.md.
 */
export function limitYoungGeneration(mib: number): void {
  if (!(mib > 0)) return;
  v8.setFlagsFromString(`--max-semi-space-size=${mib}`);
  v8.setFlagsFromString('--semi-space-growth-factor=1');
}

/**
 * V8's --optimize-for-size (SVM_V8_OPTIMIZE_FOR_SIZE), read whenever V8 sets the next full collection's limit: that
 * limit is at least what is live plus a step of 8 MB, 2 MB with the flag (V8's heap controller, conservative mode);
 * with ~31 MB live the step decides, not SVM_HEAP_GROWING_PERCENT. On before limitHeapGrowth's collection, so the
 * limit it sets already follows it; process-wide, so the workflow thread's isolate gets it too.
 */
export function optimizeForSize(on: boolean): void {
  if (on) v8.setFlagsFromString('--optimize-for-size');
}

/**
 * Keeps the old generation near what is live (SVM_HEAP_GROWING_PERCENT): V8
 * collects again once it has grown by percent over what survived the last
 * full collection, instead of by its own factor (up to 4x on a small heap
 * that allocates fast). V8 reads the flag when it sets the next limit, at a
 * full collection: the one during the start set a limit of about 4x what was
 * live then (~55 MB of heap), which a migration's garbage fills before any
 * other full collection; so one full collection now, under the new factor.
 * 0 leaves V8's factor.
 */
export function limitHeapGrowth(percent: number): void {
  if (!(percent > 0)) return;
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  // gc() from a context made while --expose-gc is on; off again before anything else (the workflow sandbox) is made.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  v8.setFlagsFromString('--no-expose-gc');
  gc();
}

/** Activity task polls the worker keeps open (see Worker.create below): two, and always a slot left free. */
export function activityPolls(slots: number): number {
  return Math.max(1, Math.min(2, slots - 1));
}

/** The worker's memory budget, reported on /metrics. */
export function memoryBudget(bytes: number, metrics: MigratorMetrics | undefined): MemoryBudget {
  metrics?.memoryBudget.set(bytes);
  metrics?.memoryHeld.set(0);
  metrics?.memoryWaiting.set(0);
  return new MemoryBudget(bytes, {
    changed(held, waiting) {
      metrics?.memoryHeld.set(held);
      metrics?.memoryWaiting.set(waiting);
    },
    waited(seconds) {
      metrics?.memoryWaits.inc();
      metrics?.memoryWaitSeconds.inc(seconds);
    },
  });
}

/** The process's V8 settings (SVM_SEMI_SPACE_MIB, SVM_V8_OPTIMIZE_FOR_SIZE, SVM_HEAP_GROWING_PERCENT), before any worker is made. */
export function tuneV8(settings: WorkerSettings): void {
  limitYoungGeneration(settings.semiSpaceMiB);
  optimizeForSize(settings.v8OptimizeForSize);
  limitHeapGrowth(settings.heapGrowingPercent);
}

/** The worker's load controls from its settings: the fixed rate (0 under auto), its budget, adaptive concurrency and memory budget. */
export function loadControls(settings: WorkerSettings, metrics: MigratorMetrics | undefined, shared: { memory?: MemoryBudget } = {}) {
  // SVM_QPS=auto (the default): no fixed rate; the adaptive concurrency below follows the API servers.
  const fixedQps = settings.qps === 'auto' ? 0 : settings.qps;
  // This replica's part of the cluster-wide budget: held shut until the membership loop grants a share. Unlimited
  // under auto, where it still carries the pause a 429's Retry-After asks for.
  const budget = new RateLimiter(fixedQps);
  // Updates in flight across this worker, adapted to the API servers' latency: starts at one, so the baseline is
  // the servers' answer time without the migrator's own load, and grows while answers stay near it (under auto:
  // while few of its updates wait at the servers); never above what maxConcurrentChunks chunks of the largest
  // concurrency could run without it. Always on under auto (loadWorkerSettings refuses auto without it).
  const concurrency = settings.adaptiveConcurrency
    ? new AdaptiveConcurrency({
        initial: 1,
        max: settings.maxConcurrentChunks * MAX_MIGRATION_CONCURRENCY,
        rule: settings.qps === 'auto' ? 'queue' : 'ratio',
        onChange: (limit) => metrics?.concurrencyLimit.set(limit),
      })
    : undefined;
  // Bytes of listed objects every chunk of every migration in this process holds together (0: none).
  // In a pool, the process's one budget, shared by its clusters (it bounds the process's memory, not a cluster's load).
  const memory = shared.memory ?? (settings.memoryBudgetBytes > 0 ? memoryBudget(settings.memoryBudgetBytes, metrics) : undefined);
  return { fixedQps, budget, concurrency, memory };
}
