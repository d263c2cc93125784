/**
 * The tests' waits. Each is bounded, and the error it gives up with names what it waited for and the last state it
 * saw: what the last check answered or threw, a migration's phase and progress. What a file waits on is kept while it
 * waits, so that a file ended from outside (scripts/test.sh sends its test process SIGTERM past the file's bound) says
 * what it was waiting on, since when and in what state, and how each server of its planes answers then.
 */
import type { WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import type { MigrationHandle } from '../../src/client';
import { progressQuery, type MigrationProgress, type MigrationResult } from '../../src/contract/definitions';
import { MigrationMigrated, MigrationPhase } from '../../src/contract/search-attributes';
import { withTimeout } from '../../src/kube/timeout';

/** How long a state is asked for (a query, a description, a server's /readyz) before it is said not to answer. */
export const ANSWER_WITHIN_MS = 5_000;

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const firstLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);

/** What withTimeout rejects with at a bound: not an error of the work itself. */
class StillRunning extends Error {}

/** `what: <the state>`, or `what:` and why it could not be had (it threw, or gave no answer within ANSWER_WITHIN_MS). */
export async function askState(what: string, state: () => string | Promise<string>): Promise<string> {
  try {
    return `${what}: ${await withTimeout(Promise.resolve().then(state), ANSWER_WITHIN_MS, () => new StillRunning())}`;
  } catch (err) {
    return `${what}: ${err instanceof StillRunning ? `no answer within ${seconds(ANSWER_WITHIN_MS)}` : firstLine(err)}`;
  }
}

interface Wait {
  what: string;
  since: number;
  state: () => string | Promise<string>;
}
/** What the file waits on right now. */
const waits = new Set<Wait>();

async function waitingOn<T>(what: string, state: Wait['state'], fn: () => Promise<T>): Promise<T> {
  const w: Wait = { what, since: Date.now(), state };
  waits.add(w);
  try {
    return await fn();
  } finally {
    waits.delete(w);
  }
}

/**
 * Polls check() every 200 ms until it answers something truthy, for timeoutMs at most, a check still running then
 * included. A check that throws is the state of the moment, not the end of the wait. Past the bound the error names
 * what was awaited and what the last check answered or threw, and, given `state`, what it describes then.
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
  state?: () => string | Promise<string>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no check had answered';
  /** The last check's answer, and what `state` describes at the moment. */
  const seen = async () => (state ? `${last}; ${await askState('now', state)}` : last);
  return waitingOn(what, seen, async () => {
    for (;;) {
      try {
        const v = await withTimeout(check(), Math.max(1, deadline - Date.now()), () => new StillRunning());
        if (v) return v;
        last = `the last check answered ${JSON.stringify(v) ?? 'undefined'}`;
      } catch (err) {
        // A check still running at the bound is mostly one that started just before it: what the one before saw stays.
        last =
          err instanceof StillRunning
            ? `the last check was still running at the bound (${last.replace(/^the last check/, 'the one before')})`
            : `the last check threw: ${firstLine(err)}`;
      }
      if (Date.now() >= deadline) throw new Error(`timed out after ${seconds(timeoutMs)} waiting for ${what}: ${await seen()}`);
      await sleep(200);
    }
  });
}

/** `work`, for timeoutMs at most: past it, an error naming what was awaited and what `state` describes then. */
export async function bounded<T>(what: string, work: Promise<T>, timeoutMs: number, state: () => string | Promise<string>): Promise<T> {
  return waitingOn(what, state, async () => {
    try {
      return await withTimeout(work, timeoutMs, () => new StillRunning());
    } catch (err) {
      if (!(err instanceof StillRunning)) throw err;
      throw new Error(`timed out after ${seconds(timeoutMs)} waiting for ${what}; ${await askState('now', state)}`);
    }
  });
}

/** A migration's end (h.wait(): a Failed one resolves), for timeoutMs at most: past it, an error with its phase and progress. */
export function migrationResult(h: MigrationHandle, timeoutMs = 600_000): Promise<MigrationResult> {
  return bounded(`the migration ${h.workflowId} to end`, h.wait(), timeoutMs, () => workflowState(h.workflow));
}

/**
 * A workflow's result (h.result(): a failed workflow rejects with its WorkflowFailedError, as before), for timeoutMs
 * at most: past it, an error with the workflow's state (workflowState). Every `.result()` of the tests goes through
 * this (test/unit-suite-bounds.test.ts).
 */
export function workflowResult<H extends WorkflowHandle>(h: H, timeoutMs = 600_000): Promise<Awaited<ReturnType<H['result']>>> {
  return bounded(`the workflow ${h.workflowId} to end`, h.result() as Promise<Awaited<ReturnType<H['result']>>>, timeoutMs, () =>
    workflowState(h),
  );
}

/**
 * What a workflow shows of itself: its execution as the server describes it without a worker (status, the phase and
 * count of its search attributes, each pending activity with its attempt and last failure), and for a migration its
 * progress query (phase, counters, message) when a worker answers it.
 */
export async function workflowState(handle: WorkflowHandle): Promise<string> {
  let type: string | undefined;
  const described = await askState('described', async () => {
    const d = await handle.describe();
    type = d.type;
    return descriptionText(d);
  });
  if (type !== 'migrateResource') return described;
  return `${described}; ${await askState('progress query', async () => progressText(await handle.query(progressQuery)))}`;
}

function descriptionText(d: WorkflowExecutionDescription): string {
  const phase = d.typedSearchAttributes.get(MigrationPhase);
  const migrated = d.typedSearchAttributes.get(MigrationMigrated);
  const activities = (d.raw.pendingActivities ?? []).map(
    (a) =>
      `${a.activityType?.name} attempt ${a.attempt}${a.lastFailure?.message ? ` (last failure: ${firstLine(a.lastFailure.message)})` : ''}`,
  );
  return [
    `${d.type} ${d.status.name}, ${d.historyLength} events`,
    ...(phase ? [`phase ${phase}`] : []),
    ...(migrated !== undefined ? [`${migrated} migrated`] : []),
    ...(activities.length ? [`pending: ${activities.join('; ')}`] : []),
  ].join(', ');
}

function progressText(p: MigrationProgress): string {
  const c = p.counters;
  return (
    `phase ${p.phase}, migrated ${c.migrated} (rewritten ${c.rewritten}), conflicts ${c.conflicts}, not found ${c.notFound}, ` +
    `failed ${c.failed}, chunks ${c.chunks}, run ${p.runs}, started over ${p.restarts}x${p.message ? `: ${firstLine(p.message)}` : ''}`
  );
}

type Report = () => Promise<string[]>;
/** What else a file ended from outside says: each plane's servers and workflows (test/helpers/plane.ts). */
const reports = new Set<Report>();

/** Adds `report` to what a file ended from outside says; returns its removal. */
export function reportWhenEnded(report: Report): () => void {
  reports.add(report);
  return () => void reports.delete(report);
}

/** The whole report is over within this, and the process exits: scripts/test.sh kills what is left 30 s after its SIGTERM. */
const REPORT_WITHIN_MS = 20_000;

async function endedFromOutside(): Promise<never> {
  const say = (line: string) => process.stderr.write(`[ended by SIGTERM] ${line}\n`);
  const now = Date.now();
  const pending = [...waits];
  // At once, before anything is asked: what stands if nothing more can be had.
  say(pending.length ? 'waiting on:' : 'waiting on nothing a helper bounds (test/helpers/waits.ts)');
  for (const w of pending) say(`  ${w.what}, for ${seconds(now - w.since)}`);
  const lines = Promise.all([
    ...pending.map((w) => askState(`  ${w.what}`, w.state).then((l) => [l])),
    ...[...reports].map((r) => r().catch((err: unknown) => [`a report failed: ${firstLine(err)}`])),
  ]);
  try {
    for (const l of (await withTimeout(lines, REPORT_WITHIN_MS, () => new StillRunning())).flat()) say(l);
  } catch {
    say(`(the rest gave no answer within ${seconds(REPORT_WITHIN_MS)})`);
  }
  process.exit(143);
}

// Note: SIGTERM is how scripts/test.sh ends a file past its bound. Without this listener an in-process Temporal
// worker's Runtime (which listens for it) would only shut its workers down, and the file would go on waiting.
let ending = false;
process.on('SIGTERM', () => {
  if (ending) return;
  ending = true;
  void endedFromOutside();
});
