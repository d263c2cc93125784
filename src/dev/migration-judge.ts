/**
 * The judge of one finished migration, from etcd and from the workflow's own
 * history (never from what the migrator says of itself), for the durability
 * tests and the benchmarks:
 *
 *   nothing lost           every key stored before is still there, holds the
 *                          target version, its content (spec) and uid are
 *                          unchanged, and it was written after the migration
 *                          began (its etcd modRevision is later);
 *   recorded once          across every run of the workflow (walked back
 *                          through continue-as-new), recordMigrated completed
 *                          exactly once, and visibility holds exactly one
 *                          Completed execution of the workflow ID;
 *   a whole pass           the chunks of the recorded pass (from the last
 *                          chunk that listed from the beginning) each go on
 *                          from the continue token the one before returned,
 *                          the last returns none, and their counters account
 *                          for every object exactly once.
 *
 * Reads content only to compare it here; nothing of it leaves this process.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { ChunkInput, ChunkResult } from '../activities/migrate-chunk';
import { readStoredObjects, type StoredObject } from './etcd-truth';

export interface BeforeMigration {
  prefix: string;
  /** key -> the stored object before the migration */
  objects: Map<string, StoredObject>;
  /** etcd's highest modRevision among them: the migration's writes come later. */
  revision: number;
}

/** etcd before the migration: call after the objects exist, before the migration starts. */
export async function beforeMigration(etcd: string, prefix: string): Promise<BeforeMigration> {
  const stored = await readStoredObjects(etcd, prefix);
  return {
    prefix,
    objects: new Map(stored.map((o) => [o.key, o])),
    revision: stored.reduce((m, o) => Math.max(m, o.modRevision), 0),
  };
}

export interface Verdict {
  keysBefore: number;
  keysAfter: number;
  /** Keys stored before and gone now (at most 10 named). */
  missing: string[];
  /** apiVersion -> keys holding it, after. */
  byApiVersion: Record<string, number>;
  /** Keys whose spec or uid differs from before (at most 10 named). */
  changed: string[];
  /** Keys not written since the migration began (at most 10 named). */
  notRewritten: string[];
  /** recordMigrated activities completed, over every run. */
  recordedSuccesses: number;
  /** Executions of the workflow ID visibility lists as Completed. */
  completedExecutions: number;
  runs: number;
  pass: {
    chunks: number;
    /** The first chunk of the pass listed from the beginning of the resource. */
    fromStart: boolean;
    /** Every chunk went on from the token the chunk before returned. */
    chained: boolean;
    /** The last chunk returned no continue token: the list was complete. */
    ended: boolean;
    /** migrated + conflicts + notFound + failed over the pass's chunks. */
    accounted: number;
  };
  /** Every chunk of every run (and every pass). */
  chunksAllRuns: number;
  historyEvents: number;
}

const first10 = (xs: string[]) => xs.slice(0, 10);

interface RunEvents {
  chunks: Array<{ input: ChunkInput; result: ChunkResult }>;
  recorded: number;
  events: number;
}

/** The chunks and recordMigrated completions of one run, in order. */
function readRun(events: temporal.api.history.v1.IHistoryEvent[]): RunEvents {
  const scheduled = new Map<string, { type: string; input?: ChunkInput }>();
  const out: RunEvents = { chunks: [], recorded: 0, events: events.length };
  for (const e of events) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s) {
      const type = s.activityType?.name ?? '';
      scheduled.set(String(e.eventId), {
        type,
        ...(type === 'migrateChunk' ? { input: defaultPayloadConverter.fromPayload<ChunkInput>(s.input!.payloads![0]!) } : {}),
      });
    }
    const done = e.activityTaskCompletedEventAttributes;
    const what = done && scheduled.get(String(done.scheduledEventId));
    if (!what) continue;
    if (what.type === 'recordMigrated') out.recorded++;
    if (what.type === 'migrateChunk')
      out.chunks.push({ input: what.input!, result: defaultPayloadConverter.fromPayload<ChunkResult>(done.result!.payloads![0]!) });
  }
  return out;
}

export async function judgeMigration(opts: {
  etcd: string;
  client: Client;
  workflowId: string;
  before: BeforeMigration;
  /** The apiVersion every key must hold after, e.g. `example.com/v2`. */
  targetApiVersion: string;
}): Promise<Verdict> {
  const { before } = opts;
  const after = await readStoredObjects(opts.etcd, before.prefix);
  const afterByKey = new Map(after.map((o) => [o.key, o]));
  const byApiVersion: Record<string, number> = {};
  for (const o of after) byApiVersion[o.object.apiVersion ?? '<none>'] = (byApiVersion[o.object.apiVersion ?? '<none>'] ?? 0) + 1;
  const missing: string[] = [];
  const changed: string[] = [];
  const notRewritten: string[] = [];
  const uid = (o: StoredObject) => (o.object.metadata as { uid?: string } | undefined)?.uid;
  for (const [key, was] of before.objects) {
    const now = afterByKey.get(key);
    if (!now) {
      missing.push(key);
      continue;
    }
    if (JSON.stringify(now.object.spec) !== JSON.stringify(was.object.spec) || uid(now) !== uid(was)) changed.push(key);
    if (now.modRevision <= before.revision) notRewritten.push(key);
  }

  // Every run, newest first, walked back through continue-as-new.
  const runs: RunEvents[] = [];
  const described = await opts.client.workflow.getHandle(opts.workflowId).describe();
  for (let runId: string | undefined = described.runId; runId;) {
    const history: { events?: temporal.api.history.v1.IHistoryEvent[] | null } = await opts.client.workflow
      .getHandle(opts.workflowId, runId)
      .fetchHistory();
    const events: temporal.api.history.v1.IHistoryEvent[] = history.events ?? [];
    runs.unshift(readRun(events));
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  const chunks = runs.flatMap((r) => r.chunks);
  let start = -1;
  chunks.forEach((c, i) => {
    if (!c.input.continueToken) start = i;
  });
  const pass = start < 0 ? [] : chunks.slice(start);
  let chained = pass.length > 0;
  for (let i = 1; i < pass.length; i++) if (pass[i]!.input.continueToken !== pass[i - 1]!.result.continueToken) chained = false;
  const accounted = pass.reduce(
    (n, c) => n + c.result.counters.migrated + c.result.counters.conflicts + c.result.counters.notFound + c.result.counters.failed,
    0,
  );

  // Visibility trails the close by a moment: wait (bounded) until it lists the execution.
  let completedExecutions = 0;
  for (const deadline = Date.now() + 30_000; ;) {
    completedExecutions = 0;
    for await (const _ of opts.client.workflow.list({ query: `WorkflowId = '${opts.workflowId}' AND ExecutionStatus = 'Completed'` }))
      completedExecutions++;
    if (completedExecutions > 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }

  return {
    keysBefore: before.objects.size,
    keysAfter: after.length,
    missing: first10(missing),
    byApiVersion,
    changed: first10(changed),
    notRewritten: first10(notRewritten),
    recordedSuccesses: runs.reduce((n, r) => n + r.recorded, 0),
    completedExecutions,
    runs: runs.length,
    pass: {
      chunks: pass.length,
      fromStart: pass.length > 0 && !pass[0]!.input.continueToken,
      chained,
      ended: pass.length > 0 && pass.at(-1)!.result.continueToken === undefined,
      accounted,
    },
    chunksAllRuns: chunks.length,
    historyEvents: runs.reduce((n, r) => n + r.events, 0),
  };
}

/** What a sound verdict is, for a migration of `count` objects to `targetApiVersion`: the differences, empty when sound. */
export function verdictProblems(v: Verdict, count: number, targetApiVersion: string): string[] {
  const p: string[] = [];
  if (v.keysBefore !== count) p.push(`${v.keysBefore} keys before, expected ${count}`);
  if (v.keysAfter !== count || v.missing.length > 0) p.push(`lost: ${v.keysAfter} keys after of ${count}; missing ${v.missing.join(', ')}`);
  if (JSON.stringify(v.byApiVersion) !== JSON.stringify({ [targetApiVersion]: count }))
    p.push(`etcd holds ${JSON.stringify(v.byApiVersion)}, not every key at ${targetApiVersion}`);
  if (v.changed.length > 0) p.push(`content or uid changed: ${v.changed.join(', ')}`);
  if (v.notRewritten.length > 0) p.push(`not written by the migration: ${v.notRewritten.join(', ')}`);
  if (v.recordedSuccesses !== 1) p.push(`the success was recorded ${v.recordedSuccesses} times`);
  if (v.completedExecutions !== 1) p.push(`visibility lists ${v.completedExecutions} Completed executions`);
  if (!v.pass.fromStart || !v.pass.chained || !v.pass.ended) p.push(`the recorded pass is not whole: ${JSON.stringify(v.pass)}`);
  if (v.pass.accounted !== count) p.push(`the recorded pass accounts for ${v.pass.accounted} objects, not ${count}`);
  return p;
}
