/**
 * The migration workflow's logic without Kubernetes: the real Temporal dev
 * server (the binary `npm run tools` builds) runs migrateResource, and its
 * activities are test doubles that record what the workflow asked for. Each
 * scenario takes seconds. What is asserted is the workflow's behaviour: which
 * phases it reports, when it starts a pass over, what it refuses.
 */
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { Context, CancelledFailure } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { WithStartWorkflowOperation, WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { Agreement } from '../src/activities';
import type { ChunkInput, ChunkResult } from '../src/activities/migrate-chunk';
import { zeroCounters } from '../src/api/counters';
import type { StorageVersionMigrationStatus } from '../src/api/migration';
import { migrationWorkflowId, type ResourceRef } from '../src/api/resource';
import { recordHistories, recording } from './helpers/histories';
import { workflowTestEnv } from './helpers/workflow-env';
import {
  abortSignal,
  abortUpdate,
  agreementChangedSignal,
  attachMigrationObjectSignal,
  migrateResource,
  pauseSignal,
  pauseUpdate,
  resumeUpdate,
  progressQuery,
  resolutionUpdate,
  resumeSignal,
  type MigrateResourceInput,
  type MigrationResult,
} from '../src/workflows/migrate-resource';
import { eventually, workflowResult } from './helpers/migrate';

const REF: ResourceRef = {
  group: 'example.com',
  resource: 'widgets',
  version: 'v2',
  kind: 'Widget',
  namespaced: true,
  storageVersionHash: 'h2',
  custom: true,
};
// History grows fast in these tests: Temporal suggests continue-as-new early, so every scenario crosses runs.
const SUGGEST_CAN_AT = 60;

const wf = workflowTestEnv(SUGGEST_CAN_AT);

const agreed = (token: string, version = 'v2'): Agreement =>
  ({
    agreed: true,
    encodingVersion: `${version}`,
    token,
    source: 'discovery',
    servers: [],
    verified: true,
    checked: '2 of 2 API servers by their discovery',
  }) as Agreement;
const disagree = (token: string): Agreement =>
  ({
    agreed: false,
    token,
    source: 'discovery',
    reason: 'API servers serve different storageVersionHashes: a=h1, b=h2',
    servers: [],
    verified: true,
    checked: '2 of 2 API servers',
  }) as unknown as Agreement;

/** Test doubles for the activities, with a record of every call. */
class Doubles {
  agreement: () => Agreement = () => agreed('t1');
  /** Objects per chunk and the number of chunks in a whole pass. */
  perChunk = 10;
  chunksPerPass = 3;
  chunk?: (input: ChunkInput) => Promise<ChunkResult>;
  recordMigrated: () => Promise<void> = async () => undefined;
  /** The resource resolved again by name (a version no longer served while waiting). */
  resolve: (name: string) => ResourceRef = () => REF;
  readonly resolved: string[] = [];
  readonly chunks: ChunkInput[] = [];
  readonly statuses: StorageVersionMigrationStatus[] = [];
  readonly recorded: Agreement[] = [];

  result(input: ChunkInput): ChunkResult {
    const index = input.continueToken ? Number(input.continueToken.slice(1)) : 0;
    const next = index + 1 < this.chunksPerPass ? `c${index + 1}` : undefined;
    return {
      counters: { ...zeroCounters(), migrated: this.perChunk, rewritten: this.perChunk, chunks: 1 },
      failures: [],
      continueToken: next,
      listed: this.perChunk,
    };
  }

  activities() {
    return {
      migrateChunk: async (input: ChunkInput): Promise<ChunkResult> => {
        this.chunks.push(input);
        return this.chunk ? this.chunk(input) : this.result(input);
      },
      agreement: async (_ref: ResourceRef): Promise<Agreement> => this.agreement(),
      recordMigrated: async (_ref: ResourceRef, a: Agreement) => {
        await this.recordMigrated();
        this.recorded.push(a);
        return {};
      },
      resolveMigrationResource: async (input: { resource: string }): Promise<ResourceRef> => {
        this.resolved.push(input.resource);
        return this.resolve(input.resource);
      },
      ensureMigrationObject: async () => 'widgets-svm',
      reportStatus: async (_names: string[], status: StorageVersionMigrationStatus) => void this.statuses.push(status),
    };
  }

  get phases(): string[] {
    return this.statuses.map((s) => s.phase ?? '?');
  }
}

/** A chunk that runs until cancelled, heartbeating, then reports its partial counters as the real one does. */
const blockingChunk =
  (started: { n: number }, partial: ChunkResult = { counters: { ...zeroCounters(), migrated: 3 }, failures: [], listed: 3 }) =>
  async (): Promise<ChunkResult> => {
    started.n++;
    const ctx = Context.current();
    for (let i = 0; ; i++) {
      ctx.heartbeat(i);
      try {
        await ctx.sleep(100);
      } catch (err) {
        if (err instanceof CancelledFailure) throw new CancelledFailure('chunk cancelled', [partial]);
        throw err;
      }
    }
  };

/** Doubles whose first chunk runs until cancelled, under an agreement token the scenario moves (`moving.token`). */
function movingAgreement(d: Doubles): { started: { n: number }; moving: { token: string } } {
  const started = { n: 0 };
  const moving = { token: 't1' };
  d.agreement = () => agreed(moving.token);
  d.chunk = async (input) => (started.n === 0 ? blockingChunk(started)() : d.result(input));
  return { started, moving };
}

let seq = 0;
async function run<T>(
  d: Doubles,
  fn: (start: (input?: Partial<MigrateResourceInput>) => ReturnType<typeof startWorkflow>) => Promise<T>,
): Promise<T> {
  const taskQueue = `wf-${Date.now()}-${seq++}`;
  const worker = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue,
    workflowBundle: wf.bundle,
    activities: d.activities(),
    maxHeartbeatThrottleInterval: '200 milliseconds',
  });
  const started: Array<{ workflowId: string; runId: string }> = [];
  const start = async (input: Partial<MigrateResourceInput> = {}) => {
    const h = await startWorkflow(taskQueue, input);
    started.push({ workflowId: h.workflowId, runId: h.firstExecutionRunId });
    return h;
  };
  try {
    return await worker.runUntil(fn(start));
  } finally {
    if (recording()) for (const w of started) recordHistories(wf.env.address, 'wf', currentTest ?? 'scenario', w.workflowId, w.runId);
  }
}

let currentTest: string | undefined;
beforeEach((t) => void (currentTest = t.name));

/**
 * Under the resource's own ID, as every caller must (the workflow refuses any other): scenarios run one after
 * another, each on its own task queue, and a start ends what an earlier scenario left running.
 */
function startWorkflow(taskQueue: string, input: Partial<MigrateResourceInput>) {
  return wf.env.client.workflow.start(migrateResource, {
    taskQueue,
    workflowId: migrationWorkflowId(REF),
    workflowIdConflictPolicy: 'TERMINATE_EXISTING',
    args: [{ resource: REF, options: { agreementPollSeconds: 1, heartbeatTimeoutSeconds: 5 }, ...input } as MigrateResourceInput],
  });
}

async function failure(p: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await p;
  } catch (err) {
    if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) return err.cause;
    throw err;
  }
  assert.fail('the workflow should have failed');
}

void test('a whole pass under one agreement: Succeeded, the success recorded once, the message says what was checked', async () => {
  const d = new Doubles();
  const result: MigrationResult = await run(d, async (start) => workflowResult(await start()));
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.counters.migrated, 30);
  assert.deepEqual(
    d.chunks.map((c) => c.continueToken),
    [undefined, 'c1', 'c2'],
    'the pass starts at the beginning of the list',
  );
  assert.equal(d.recorded.length, 1);
  assert.equal(d.recorded[0]!.token, 't1');
  assert.match(result.message ?? '', /in one whole pass; the API servers agreed from start to end: 2 of 2 API servers/);
  assert.equal(d.statuses.at(-1)!.phase, 'Succeeded');
});

void test('waiting for agreement continues-as-new and can last; once agreed, one whole pass', async () => {
  const d = new Doubles();
  let polls = 0;
  d.agreement = () => (++polls < 14 ? disagree('t0') : agreed('t1'));
  const result = await run(d, async (start) => {
    const h = await start();
    const waiting = await eventually('WaitingForAgreement', async () => {
      const p = await h.query(progressQuery);
      return p.phase === 'WaitingForAgreement' && p;
    });
    assert.match(waiting.message ?? '', /waiting for agreement: API servers serve different storageVersionHashes/);
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded');
  assert.ok(result.runs > 1, `waiting should have continued as new (runs ${result.runs})`);
  assert.equal(d.phases[0], 'WaitingForAgreement');
  assert.equal(d.chunks.length, 3);
});

void test('an agreement svm cannot verify per server is accepted once it held, timed by when each answer was read (recorded in history), not by the workflow clock', async () => {
  const d = new Doubles();
  let polls = 0;
  const base = Date.UTC(2026, 0, 1);
  // Each answer read "10 s" after the last, while the workflow polls every second: by the readings it has held 30 s
  // at the 4th answer; by the workflow clock it would take ~30 polls.
  d.agreement = () => ({ ...agreed('t1'), verified: false, checked: '1 of 2 API servers (one address)', at: base + polls++ * 10_000 });
  const result = await run(d, async (start) =>
    workflowResult(await start({ options: { agreementPollSeconds: 1, heartbeatTimeoutSeconds: 5, unverifiedAgreementSeconds: 30 } })),
  );
  assert.equal(result.phase, 'Succeeded');
  assert.equal(polls, 4 + 1, 'accepted at the 4th answer (held 30 s by the readings), then read once more to record the success');
  assert.equal(d.statuses[0]?.phase, 'WaitingForAgreement');
  assert.match(d.statuses[0]?.message ?? '', /accepted once this has held for 30s/);
});

void test('agreement lost mid-chunk: the chunk stops, the pass starts over from the beginning under the new agreement', async () => {
  const d = new Doubles();
  const { started, moving } = movingAgreement(d);
  const result = await run(d, async (start) => {
    const h = await start();
    await eventually('the chunk to start', async () => started.n > 0);
    moving.token = 't2'; // the storage version was republished
    await h.signal(agreementChangedSignal, 'StorageVersion widgets modified');
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.restarts, 1);
  assert.equal(result.counters.migrated, 30, 'counters of the abandoned pass are dropped');
  assert.deepEqual(
    d.chunks.map((c) => c.continueToken),
    [undefined, undefined, 'c1', 'c2'],
  );
  assert.equal(d.recorded[0]!.token, 't2');
});

void test('the first steps at once: the object is created while agreement is read, the Running status written while the first chunk runs, statuses in order', async () => {
  const d = new Doubles();
  const events: string[] = [];
  // Each step is held until the step that must run beside it has started: run one after the other, as before the
  // start-steps-at-once patch, each would wait out its 5 s and say so.
  const heldUntil = (what: string, gate: Promise<void>) =>
    Promise.race([gate, new Promise<void>((r) => setTimeout(r, 5000)).then(() => void events.push(`${what} waited 5 s`))]);
  let agreementRead!: () => void;
  const agreementStarted = new Promise<void>((r) => (agreementRead = r));
  let chunkRan!: () => void;
  const chunkStarted = new Promise<void>((r) => (chunkRan = r));
  const names: string[][] = [];
  const base = Doubles.prototype.activities.call(d);
  const result = await run(
    Object.assign(d, {
      activities: () => ({
        ...base,
        ensureMigrationObject: async () => {
          await heldUntil('the object', agreementStarted);
          events.push('object created');
          return 'widgets-svm';
        },
        agreement: async (ref: ResourceRef) => {
          agreementRead();
          events.push('agreement read');
          return base.agreement(ref);
        },
        migrateChunk: async (input: ChunkInput) => {
          chunkRan();
          return base.migrateChunk(input);
        },
        reportStatus: async (objects: string[], status: StorageVersionMigrationStatus) => {
          if (status.phase === 'Running') await heldUntil('the Running status', chunkStarted);
          names.push(objects);
          d.statuses.push(status);
        },
      }),
    }),
    async (start) => workflowResult(await start()),
  );
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.deepEqual(
    events.filter((e) => e.endsWith('waited 5 s')),
    [],
    'each step ran beside the other',
  );
  assert.deepEqual(d.phases, ['Running', 'Succeeded'], 'the Running status is written before the final one');
  assert.deepEqual(names, [['widgets-svm'], ['widgets-svm']], 'every status goes to the object created at the start');
});

void test('agreement moved between the last chunk and the verdict: no success recorded for the old one, a new pass', async () => {
  const d = new Doubles();
  let reads = 0;
  d.agreement = () => (++reads <= 1 ? agreed('t1') : agreed('t2'));
  const result = await run(d, async (start) => workflowResult(await start()));
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.restarts, 1);
  assert.deepEqual(
    d.recorded.map((a) => a.token),
    ['t2'],
  );
});

void test('an abort that arrives after the last chunk, while the verdict re-checks agreement, is honoured: Aborted, nothing recorded', async () => {
  const d = new Doubles();
  const held = heldVerdict(d);
  const result = await run(d, async (start) => {
    const h = await start();
    await held.reached;
    // The signal is in history before the re-check's answer: the workflow sees the abort first.
    await h.signal(abortSignal, { reason: 'rollback' });
    held.release();
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Aborted', result.message);
  assert.match(result.message ?? '', /rollback/);
  assert.equal(d.chunks.length, d.chunksPerPass, 'the whole pass ran before the abort');
  assert.deepEqual(d.recorded, [], 'no success recorded');
});

void test('the version waited on stops being served: the resource is resolved again and migrated through the version served now', async () => {
  const d = new Doubles();
  let reads = 0;
  // v2 is gone while the migration waits (a CRD version no longer served); the API servers serve v3.
  d.agreement = () =>
    ++reads === 1
      ? ({ ...disagree('t0'), reason: 'widgets.example.com is not served with a storageVersionHash', notServed: true } as Agreement)
      : agreed('t1', 'v3');
  d.resolve = () => ({ ...REF, version: 'v3', storageVersionHash: 'h3' });
  const result = await run(d, async (start) => workflowResult(await start()));
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.deepEqual(d.resolved, ['widgets.example.com']);
  assert.deepEqual([...new Set(d.chunks.map((c) => c.resource.version))], ['v3'], 'every chunk lists through the version served now');
  assert.ok(
    d.statuses.some((st) => /no longer served at v2; it is migrated through v3 now/.test(st.message ?? '')),
    'the status says so',
  );
});

void test('the version waited on stops being served and the resource is gone: Failed at once with the reason, no pass', async () => {
  const d = new Doubles();
  d.agreement = () => ({ ...disagree('t0'), reason: 'not served', notServed: true }) as Agreement;
  d.resolve = () => {
    throw ApplicationFailure.create({
      type: 'InvalidResource',
      message: 'the API servers serve no resource "widgets" in group "example.com"',
      nonRetryable: true,
    });
  };
  const result = await failure(run(d, async (start) => workflowResult(await start())));
  assert.match(result.message, /no longer served at v2 and cannot be resolved again: the API servers serve no resource "widgets"/);
  assert.equal(d.chunks.length, 0);
  assert.deepEqual(d.recorded, []);
});

void test('a re-check that cannot read agreement does not wedge the workflow: the pass starts over and ends', async () => {
  const d = new Doubles();
  const started = { n: 0 };
  let broken = false;
  d.agreement = () => {
    if (broken) {
      broken = false;
      throw ApplicationFailure.nonRetryable('API servers unreachable', 'Unreachable');
    }
    return agreed('t1');
  };
  d.chunk = async (input) => (started.n === 0 ? blockingChunk(started)() : d.result(input));
  const result = await run(d, async (start) => {
    const h = await start();
    await eventually('the chunk to start', async () => started.n > 0);
    broken = true;
    await h.signal(agreementChangedSignal);
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.restarts, 1);
});

void test('abort mid-chunk: Aborted with the partial counters, written to the StorageVersionMigration', async () => {
  const d = new Doubles();
  const started = { n: 0 };
  d.chunk = blockingChunk(started);
  const result = await run(d, async (start) => {
    const h = await start();
    await eventually('the chunk to start', async () => started.n > 0);
    await h.signal(abortSignal, 'operator said so');
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Aborted');
  assert.equal(result.message, 'aborted: operator said so');
  assert.equal(result.counters.migrated, 3);
  assert.equal(d.statuses.at(-1)!.phase, 'Aborted');
  assert.equal(d.recorded.length, 0);
});

/** A gate an activity double waits at: reached once the activity is there, passed once released. */
interface Gate {
  reached: Promise<void>;
  release: () => void;
}
function gate(): Gate & { arrive: () => void; passed: Promise<void> } {
  let release!: () => void;
  let arrive!: () => void;
  const passed = new Promise<void>((r) => (release = r));
  const reached = new Promise<void>((r) => (arrive = r));
  return { reached, release, arrive, passed };
}

/**
 * Doubles whose agreement reads wait at a gate each, by read number: the second read is the verdict's re-check as the
 * last chunk finishes (the default), the third the one after a resume.
 */
function heldVerdict(d: Doubles, at: number[] = [2]): Gate & { at: (read: number) => Gate; reads: () => number } {
  let reads = 0;
  const gates = new Map(at.map((n) => [n, gate()]));
  const agreementActivity = Doubles.prototype.activities.call(d).agreement;
  Object.assign(d, {
    activities: () => ({
      ...Doubles.prototype.activities.call(d),
      agreement: async (ref: ResourceRef) => {
        const g = gates.get(++reads);
        if (g) {
          g.arrive();
          await g.passed;
        }
        return agreementActivity(ref);
      },
    }),
  });
  const first = gates.get(at[0]!)!;
  return { reached: first.reached, release: first.release, at: (n) => gates.get(n)!, reads: () => reads };
}

void test('a pause acknowledged as the last chunk finishes holds the verdict: nothing recorded until resume, agreement read again after it', async () => {
  const d = new Doubles();
  const held = heldVerdict(d);
  const result = await run(d, async (start) => {
    const h = await start();
    await held.reached;
    const ack = await h.executeUpdate(pauseUpdate, { args: [{}] });
    assert.equal(ack.paused, true);
    held.release();
    const paused = await eventually('Paused at the verdict', async () => {
      const p = await h.query(progressQuery);
      return p.phase === 'Paused' && p;
    });
    assert.equal(paused.counters.chunks, d.chunksPerPass, 'the whole pass ran');
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(d.recorded, [], 'nothing recorded while paused');
    assert.equal(held.reads(), 2, 'no agreement read while paused');
    const resumed = await h.executeUpdate(resumeUpdate, { args: [{}] });
    assert.equal(resumed.paused, false, 'the resume is acknowledged: the migration has not ended');
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.equal(d.recorded.length, 1, 'the success recorded once, after the resume');
  assert.equal(held.reads(), 3, 'agreement read again after the resume');
  assert.deepEqual(d.phases.slice(-3), ['Paused', 'Running', 'Succeeded'], 'the status said Paused, then Running, then Succeeded');
});

void test('a pause held at the verdict, then an abort: Aborted, nothing recorded', async () => {
  const d = new Doubles();
  const held = heldVerdict(d);
  const result = await run(d, async (start) => {
    const h = await start();
    await held.reached;
    await h.executeUpdate(pauseUpdate, { args: [{}] });
    held.release();
    await eventually('Paused at the verdict', async () => (await h.query(progressQuery)).phase === 'Paused');
    await h.signal(abortSignal, { reason: 'rollback' });
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Aborted', result.message);
  assert.match(result.message ?? '', /rollback/);
  assert.deepEqual(d.recorded, [], 'no success recorded');
});

void test('an abort acknowledged while the agreement is read again after a resume is honoured: Aborted, nothing recorded', async () => {
  const d = new Doubles();
  const held = heldVerdict(d, [2, 3]);
  const result = await run(d, async (start) => {
    const h = await start();
    await held.reached;
    await h.executeUpdate(pauseUpdate, { args: [{}] });
    held.release();
    await eventually('Paused at the verdict', async () => (await h.query(progressQuery)).phase === 'Paused');
    await h.executeUpdate(resumeUpdate, { args: [{}] });
    await held.at(3).reached;
    const ack = await h.executeUpdate(abortUpdate, { args: [{ reason: 'rollback' }] });
    assert.equal(ack.abortRequested, 'rollback');
    held.at(3).release();
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Aborted', result.message);
  assert.deepEqual(d.recorded, [], 'an acknowledged abort is never followed by a success');
});

void test('a pause or an abort while the success is being recorded is refused, saying so: an acknowledgement is never followed by a success', async () => {
  const d = new Doubles();
  let release!: () => void;
  const recording = new Promise<void>((r) => (release = r));
  let atRecord!: () => void;
  const reached = new Promise<void>((r) => (atRecord = r));
  d.recordMigrated = async () => {
    atRecord();
    await recording;
  };
  const result = await run(d, async (start) => {
    const h = await start();
    await reached;
    for (const [update, args] of [
      [pauseUpdate, [{}]],
      [abortUpdate, [{ reason: 'rollback' }]],
    ] as const) {
      const refused = await updateFailure(h.executeUpdate(update as typeof pauseUpdate, { args: args as never }));
      assert.match(refused.message, /has migrated every object and is recording its success/);
    }
    release();
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.equal(d.recorded.length, 1);
});

void test('pause holds between chunks, resume goes on', async () => {
  const d = new Doubles();
  d.chunksPerPass = 4;
  const result = await run(d, async (start) => {
    const h = await start();
    await h.signal(pauseSignal);
    const paused = await eventually('Paused', async () => {
      const p = await h.query(progressQuery);
      return p.phase === 'Paused' && p;
    });
    const before = paused.counters.chunks;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await h.query(progressQuery)).counters.chunks, before, 'no chunk while paused');
    await h.signal(resumeSignal);
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded');
  assert.ok(d.phases.includes('Paused'));
});

void test('a pause holds across runs: agreement moving while paused starts the pass over in a new run, which stays paused until resumed', async () => {
  const d = new Doubles();
  const { started, moving } = movingAgreement(d);
  const result = await run(d, async (start) => {
    const h = await start();
    await eventually('the first chunk', async () => started.n > 0);
    const ack = await h.executeUpdate(pauseUpdate, { args: [{}] });
    assert.equal(ack.paused, true);
    const firstRun = (await h.describe()).runId;
    moving.token = 't2'; // the storage version was republished while paused
    await h.signal(agreementChangedSignal, 'StorageVersion widgets modified');
    const paused = await eventually('a new run, paused', async () => {
      const d2 = await h.describe();
      if (d2.runId === firstRun) return false;
      const p = await h.query(progressQuery);
      return p.phase === 'Paused' && p;
    });
    assert.equal(paused.restarts, 1, 'started over');
    const chunks = d.chunks.length;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(d.chunks.length, chunks, 'no chunk while paused, in the new run either');
    await assert.rejects(
      h.executeUpdate(pauseUpdate, { args: [{}] }),
      (err) => err instanceof WorkflowUpdateFailedError && /paused already/.test(String((err.cause as Error | undefined)?.message)),
      'the new run knows it is paused',
    );
    await h.executeUpdate(resumeUpdate, { args: [{}] });
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.restarts, 1);
  assert.equal(d.recorded[0]!.token, 't2', 'recorded under the agreement of the pass after the resume');
});

void test('pause stops the chunk in flight; resume lists the same page again, skipping what it finished, and counts each object once', async () => {
  const d = new Doubles();
  d.chunksPerPass = 3;
  const stoppedAt = { afterKey: 'ns/w-003', doneAfter: ['ns/w-005'] };
  const started = { n: 0 };
  const block = blockingChunk(started, {
    counters: { ...zeroCounters(), migrated: 4, rewritten: 4, chunks: 1 },
    failures: [],
    listed: 10,
    resume: stoppedAt,
  });
  d.chunk = async (input) => {
    // The first page leaves 20 objects after it; the second is stopped after 4 of its 10.
    if (input.continueToken === undefined) return { ...d.result(input), remainingItemCount: 20 };
    if (started.n === 0) return block();
    const r = d.result(input);
    // The page is 10 objects; 4 of them were done before the pause.
    return input.resume ? { ...r, counters: { ...r.counters, migrated: 6, rewritten: 6 } } : r;
  };
  const result = await run(d, async (start) => {
    const h = await start();
    await eventually('the second chunk running', async () => started.n === 1);
    await h.signal(pauseSignal);
    const paused = await eventually('Paused', async () => {
      const p = await h.query(progressQuery);
      return p.phase === 'Paused' && p;
    });
    assert.equal(paused.counters.migrated, 14, 'what the stopped chunk did counts while paused');
    assert.equal(paused.counters.chunks, 1, 'a stopped chunk is not a chunk done');
    assert.equal(paused.remainingEstimate, 16, 'what the stopped chunk did is not remaining any more');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(d.chunks.length, 2, 'nothing runs while paused');
    await h.signal(resumeSignal);
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded');
  assert.deepEqual(
    d.chunks.map((c) => [c.continueToken, c.resume]),
    [
      [undefined, undefined],
      ['c1', undefined],
      ['c1', stoppedAt],
      ['c2', undefined],
    ],
    'the stopped page again, from where it stopped; the next page from its start',
  );
  assert.equal(result.counters.migrated, 30, 'every object once');
  assert.equal(result.counters.chunks, 3);
});

void test('an activity that exhausts its retries outside a chunk: Failed with the reason, written to the StorageVersionMigration', async () => {
  const d = new Doubles();
  d.recordMigrated = async () => {
    throw ApplicationFailure.nonRetryable('CRD status could not be written', 'Forbidden');
  };
  const f = await run(d, async (start) => failure(workflowResult(await start())));
  assert.equal(f.type, 'MigrationFailed');
  assert.match(f.message, /migration of widgets\.example\.com stopped: CRD status could not be written/);
  const last = d.statuses.at(-1)!;
  assert.equal(last.phase, 'Failed');
  assert.match(last.message ?? '', /CRD status could not be written/);
});

void test('a task no worker starts in time is scheduled again with twice the wait: the migration goes on once a worker runs activities', async () => {
  const d = new Doubles();
  const taskQueue = `wf-${Date.now()}-${seq++}`;
  const connection = wf.env.nativeConnection;
  // Workflow tasks only: no worker starts an activity task (a lost task looks the same from the workflow's side).
  const workflows = await Worker.create({ connection, taskQueue, workflowBundle: wf.bundle });
  const h = await startWorkflow(taskQueue, {
    options: { agreementPollSeconds: 1, heartbeatTimeoutSeconds: 5, taskStartTimeoutSeconds: 5 },
  });
  type Event = Awaited<ReturnType<typeof h.fetchHistory>>['events'] extends (infer E)[] | null | undefined ? E : never;
  const events = async (): Promise<Event[]> => (await h.fetchHistory()).events ?? [];
  const neverStarted = (e: Event) => e.activityTaskTimedOutEventAttributes?.failure?.timeoutFailureInfo?.timeoutType === 2; // SCHEDULE_TO_START
  try {
    const result = await workflows.runUntil(async () => {
      await eventually('the first task to time out unstarted', async () => (await events()).some(neverStarted), 30_000);
      const activities = await Worker.create({ connection, taskQueue, activities: d.activities() });
      return activities.runUntil(workflowResult(h));
    });
    assert.equal(result.phase, 'Succeeded', result.message);
    assert.equal(result.counters.migrated, 30);
    assert.equal(d.recorded.length, 1);
    const history = await events();
    const timedOut = history.filter(neverStarted);
    assert.ok(timedOut.length >= 1);
    const byId = new Map(history.map((e) => [String(e.eventId), e]));
    const first = byId.get(
      String(timedOut[0]!.activityTaskTimedOutEventAttributes!.scheduledEventId),
    )!.activityTaskScheduledEventAttributes!;
    // The same activity scheduled again (a new task), its wait doubled.
    const again = history
      .map((e) => e.activityTaskScheduledEventAttributes)
      .filter((a) => a?.activityType?.name === first.activityType?.name)
      .map((a) => Number(a!.scheduleToStartTimeout?.seconds));
    assert.deepEqual(again.slice(0, 2), [5, 10], `${first.activityType?.name} waits ${again.join(', ')} s`);
    assert.ok(
      history.some((e) => e.activityTaskStartedEventAttributes),
      'a task started once a worker ran activities',
    );
  } finally {
    if (recording()) recordHistories(wf.env.address, 'wf', currentTest ?? 'scenario', h.workflowId, h.firstExecutionRunId);
  }
});

void test('a failing chunk ends Failed with the reason in the status', async () => {
  const d = new Doubles();
  d.chunk = async () => {
    throw ApplicationFailure.nonRetryable('HTTP 500 InternalError', 'KubeError');
  };
  const f = await run(d, async (start) => failure(workflowResult(await start())));
  assert.equal(f.type, 'MigrationFailed');
  assert.equal(d.statuses.at(-1)!.phase, 'Failed');
  assert.match(d.statuses.at(-1)!.message ?? '', /HTTP 500 InternalError/);
});

void test('the resource not served any more (404 on the resource itself) starts the pass over', async () => {
  const d = new Doubles();
  let gone = true;
  d.chunk = async (input) => {
    if (gone && input.continueToken === 'c1') {
      gone = false;
      throw ApplicationFailure.nonRetryable('widgets.example.com v2: HTTP 404 NotFound (the resource is not served)', 'ResourceGone');
    }
    return d.result(input);
  };
  const result = await run(d, async (start) => workflowResult(await start()));
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.restarts, 1);
  assert.equal(result.counters.notFound, 0);
  assert.equal(result.counters.migrated, 30);
});

void test('cancelling the workflow ends it Aborted, and the status says so', async () => {
  const d = new Doubles();
  const started = { n: 0 };
  d.chunk = blockingChunk(started);
  const result = await run(d, async (start) => {
    const h = await start();
    await eventually('the chunk to start', async () => started.n > 0);
    await h.cancel();
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Aborted');
  assert.equal(d.statuses.at(-1)!.phase, 'Aborted');
});

void test('a continue token from outside is refused before anything is written', async () => {
  const d = new Doubles();
  const f = await run(d, async (start) =>
    failure(workflowResult(await start({ continueToken: 'abc', migrationObjects: ['typed-by-hand'] } as Partial<MigrateResourceInput>))),
  );
  assert.equal(f.type, 'InvalidInput');
  assert.match(f.message, /continueToken is not accepted: a migration succeeds only after a whole pass/);
  assert.equal(d.chunks.length, 0);
  assert.deepEqual(d.phases, ['Failed'], 'the waiting kubectl user learns why');
});

void test('carried state from a caller (a forged mid-pass token) is refused', async () => {
  const d = new Doubles();
  const carried = {
    continueToken: 'c2',
    counters: zeroCounters(),
    failures: [],
    agreement: agreed('t1'),
    startedAt: 0,
    runs: 1,
    restarts: 0,
  };
  const f = await run(d, async (start) => failure(workflowResult(await start({ carried } as Partial<MigrateResourceInput>))));
  assert.equal(f.type, 'InvalidInput');
  assert.match(f.message, /carried state is accepted only from an earlier run of this same workflow/);
  assert.equal(d.chunks.length, 0);
});

void test('bad options are refused, naming them', async () => {
  const d = new Doubles();
  const f = await run(d, async (start) => failure(workflowResult(await start({ options: { chunkSize: 0, concurrency: 1.5 } }))));
  assert.equal(f.type, 'InvalidInput');
  assert.match(f.message, /options\.chunkSize: chunkSize must be a whole number between 1 and 10000/);
  assert.match(f.message, /options\.concurrency: concurrency must be a whole number between 1 and 256/);
  assert.equal(d.chunks.length, 0);
});

/** Runs fn with a worker of d's doubles on a fresh task queue (for scenarios that start the workflow themselves). */
async function withDoubles<T>(d: Doubles, fn: (taskQueue: string) => Promise<T>): Promise<T> {
  const taskQueue = `wf-${Date.now()}-${seq++}`;
  const worker = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue,
    workflowBundle: wf.bundle,
    activities: d.activities(),
  });
  return worker.runUntil(fn(taskQueue));
}

/** The ApplicationFailure an update was answered with (its handler's, or its validator's). */
async function updateFailure(p: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await p;
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) return err.cause;
    throw err;
  }
  assert.fail('the update should have failed');
}

void test('Update-with-Start of an invalid input: the resolution update answers InvalidInput naming the field, the workflow fails the same, nothing is called', async () => {
  const d = new Doubles();
  await withDoubles(d, async (taskQueue) => {
    // Not joining what an earlier scenario left running under the resource's ID.
    await wf.env.client.workflow
      .getHandle(migrationWorkflowId(REF))
      .terminate('an earlier scenario')
      .catch(() => undefined);
    const start = new WithStartWorkflowOperation(migrateResource, {
      taskQueue,
      workflowId: migrationWorkflowId(REF),
      workflowIdConflictPolicy: 'USE_EXISTING',
      args: [{ resource: REF, options: { chunkSize: 0 } }],
    });
    const answer = await updateFailure(
      wf.env.client.workflow.executeUpdateWithStart(resolutionUpdate, { args: [{}], startWorkflowOperation: start }),
    );
    assert.equal(answer.type, 'InvalidInput');
    assert.match(answer.message, /options\.chunkSize: chunkSize must be a whole number between 1 and 10000/);
    const f = await failure(workflowResult(await start.workflowHandle()));
    assert.equal(f.type, 'InvalidInput');
    assert.equal(f.message, answer.message);
  });
  assert.equal(d.chunks.length + d.resolved.length + d.statuses.length, 0, 'no activity ran');
});

void test("a full reference under an ID that is not its resource's is refused (InvalidInput) before anything is written, its objects' status included", async () => {
  const d = new Doubles();
  await withDoubles(d, async (taskQueue) => {
    // Refused in its first workflow task: only an Update-with-Start is sure to get the answer (an update sent after
    // the start may find the workflow closed already).
    const start = new WithStartWorkflowOperation(migrateResource, {
      taskQueue,
      workflowId: `migrate/widgets.example.com-${seq++}`,
      workflowIdConflictPolicy: 'USE_EXISTING',
      args: [{ resource: REF, migrationObjects: ['someone-elses'] }],
    });
    const answer = await updateFailure(
      wf.env.client.workflow.executeUpdateWithStart(resolutionUpdate, { args: [{}], startWorkflowOperation: start }),
    );
    assert.equal(answer.type, 'InvalidInput');
    const f = await failure(workflowResult(await start.workflowHandle()));
    assert.equal(f.type, 'InvalidInput');
    assert.match(
      f.message,
      /the workflow ID must be migrate\/widgets\.example\.com \(one migration per resource, joined by every caller\), not migrate\/widgets\.example\.com-\d+/,
    );
    assert.equal(f.message, answer.message);
  });
  assert.equal(d.chunks.length + d.resolved.length + d.statuses.length, 0, 'no activity ran');
});

void test('the minimal start under another ID is refused the same way (InvalidInput), after resolving only', async () => {
  const d = new Doubles();
  await withDoubles(d, async (taskQueue) => {
    const h = await wf.env.client.workflow.start(migrateResource, {
      taskQueue,
      workflowId: `migrate/gadgets-${seq++}`,
      args: [{ resource: 'widgets.example.com' }],
    });
    const answer = await updateFailure(h.executeUpdate(resolutionUpdate, { args: [{}] }));
    assert.equal(answer.type, 'InvalidInput');
    assert.match(answer.message, /the workflow ID must be migrate\/widgets\.example\.com/);
    assert.equal((await failure(workflowResult(h))).type, 'InvalidInput');
  });
  assert.deepEqual(d.resolved, ['widgets.example.com']);
  assert.equal(d.chunks.length + d.statuses.length, 0);
});

void test("signal arguments that are not the contract's are logged and ignored; update arguments are rejected and never enter history", async () => {
  const d = new Doubles();
  const started = { n: 0 };
  d.chunk = blockingChunk(started);
  const { result, history } = await run(d, async (start) => {
    const h = await start();
    await eventually('the chunk to start', async () => started.n > 0);
    await h.signal(pauseSignal, 'now' as never);
    await h.signal(abortSignal, { reason: 5 } as never);
    await h.signal(attachMigrationObjectSignal, { name: '' });
    for (const [update, arg, field] of [
      [pauseUpdate, 'now', /invalid argument to pauseMigration: argument: .*expected object/],
      [abortUpdate, { reason: ['x'] }, /invalid argument to abortMigration: reason: .*expected string/],
      [resolutionUpdate, 7, /invalid argument to resolution: argument/],
    ] as const) {
      const refused = await updateFailure(h.executeUpdate(update as typeof pauseUpdate, { args: [arg as never] }));
      assert.equal(refused.type, 'InvalidArgument');
      assert.match(refused.message, field);
    }
    const p = await h.query(progressQuery);
    assert.equal(p.phase, 'Running', 'the invalid pause and abort changed nothing');
    assert.deepEqual(p.migrationObjects, ['widgets-svm'], 'no empty name attached');
    await h.executeUpdate(abortUpdate, { args: [{ reason: 'a valid one' }] });
    return { result: await workflowResult(h), history: await h.fetchHistory() };
  });
  assert.equal(result.phase, 'Aborted');
  assert.equal(result.message, 'aborted: a valid one');
  const accepted = (history.events ?? []).filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length;
  assert.equal(accepted, 1, 'only the valid update entered history');
});

void test('pages are bounded by bytes: a first page listed with content holds at most its content limit (10), later ones fit pageBytes for the size just seen', async () => {
  const d = new Doubles();
  d.chunksPerPass = 5;
  const MiB = 1024 * 1024;
  // Objects of 1 MiB in the first three pages, 1 KiB after: pages of 16 at 16 MiB, then the chunk size again.
  const sizes = [MiB, MiB, MiB, 1024, 1024];
  d.chunk = async (input) => {
    const index = input.continueToken ? Number(input.continueToken.slice(1)) : 0;
    // As the chunk does where the server refuses the empty patch: listed with content, a first page cut to its content limit.
    const listed = Math.min(input.options.chunkSize, input.options.contentLimit ?? Infinity);
    return { ...d.result(input), listed, listedBytes: listed * sizes[index]!, rewrite: 'put' as const };
  };
  const result = await run(d, async (start) => workflowResult(await start({ options: { chunkSize: 1000, pageBytes: 16 * MiB } })));
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.deepEqual(
    d.chunks.map((c) => [c.options.chunkSize, c.options.contentLimit]),
    [
      [1000, 10],
      [16, undefined],
      [16, undefined],
      [16, undefined],
      [1000, undefined],
    ],
  );
});

void test('metadata-only pages (the empty patch) hold the chunk size from the first page on', async () => {
  const d = new Doubles();
  d.chunksPerPass = 3;
  const result = await run(d, async (start) => workflowResult(await start({ options: { chunkSize: 1000 } })));
  assert.equal(result.phase, 'Succeeded', result.message);
  assert.deepEqual(
    d.chunks.map((c) => [c.options.chunkSize, c.options.contentLimit]),
    [
      [1000, 10],
      [1000, undefined],
      [1000, undefined],
    ],
  );
});

/**
 * A migration of chunkSize 1000 whose first chunk is stopped by a pause with `partial`, then resumed: the result, what
 * each chunk was asked (token, limit, content limit, rewrite, resume) and the doubles. Later chunks answer `later`.
 */
async function pauseFirstPage(partial: ChunkResult, later: (d: Doubles, input: ChunkInput) => ChunkResult) {
  const d = new Doubles();
  d.chunksPerPass = 2;
  const started = { n: 0 };
  const block = blockingChunk(started, partial);
  d.chunk = async (input) => (started.n === 0 ? block() : later(d, input));
  const result = await run(d, async (start) => {
    const h = await start({ options: { chunkSize: 1000 } });
    await eventually('the first chunk running', async () => started.n === 1);
    await h.signal(pauseSignal);
    await eventually('Paused', async () => (await h.query(progressQuery)).phase === 'Paused');
    await h.signal(resumeSignal);
    return workflowResult(h);
  });
  assert.equal(result.phase, 'Succeeded', result.message);
  const asked = d.chunks.map((c) => [c.continueToken, c.options.chunkSize, c.options.contentLimit, c.rewrite, c.resume]);
  return { result, asked, d };
}

void test('a first page the chunk listed with content (cut to 10) and a pause stopped: resumed as it was listed, by PUT, 10 objects', async () => {
  const stoppedAt = { afterKey: 'ns/w-003' };
  const partial: ChunkResult = {
    counters: { ...zeroCounters(), migrated: 4, rewritten: 4, chunks: 1 },
    failures: [],
    listed: 10,
    listedBytes: 10 * 900 * 1024,
    resume: stoppedAt,
    rewrite: 'put',
    contentLimited: true,
  };
  const { result, asked, d } = await pauseFirstPage(partial, (d, input) => {
    const r = d.result(input);
    return input.resume ? { ...r, counters: { ...r.counters, migrated: 6, rewritten: 6 }, rewrite: 'put' } : { ...r, rewrite: 'put' };
  });
  assert.deepEqual(
    asked,
    [
      [undefined, 1000, 10, undefined, undefined],
      [undefined, 10, undefined, 'put', stoppedAt],
      ['c1', 1000, undefined, 'put', undefined],
    ],
    'the stopped page again as it was listed (10 objects with content), after what it finished',
  );
  assert.equal(result.counters.migrated, 20, 'every object once');
  assert.ok(
    d.statuses.some((st) => /rewritten by PUT/.test(st.message ?? '')),
    'the status said the objects are rewritten by PUT',
  );
});

void test('a first page listed whole with content (the patch refused after some objects) and a pause stopped: resumed whole, never cut', async () => {
  const stoppedAt = { afterKey: 'ns/w-030' };
  const partial: ChunkResult = {
    counters: { ...zeroCounters(), migrated: 31, rewritten: 31, chunks: 1 },
    failures: [],
    listed: 40,
    resume: stoppedAt,
    rewrite: 'put',
  };
  const { asked } = await pauseFirstPage(partial, (d, input) => d.result(input));
  // Cut to 10 on resume, the page would leave w-010..w-030, finished, to the next chunk: listed and counted again.
  assert.deepEqual(asked, [
    [undefined, 1000, 10, undefined, undefined],
    [undefined, 1000, 10, undefined, stoppedAt],
    ['c1', 1000, undefined, undefined, undefined],
  ]);
});

void test('progress search attributes are written on phase changes, not after every chunk; the last ones are true', async () => {
  const d = new Doubles();
  d.chunksPerPass = 12;
  const { handle, result } = await run(d, async (start) => {
    const h = await start();
    return { handle: h, result: await workflowResult(h) };
  });
  assert.equal(result.phase, 'Succeeded');
  assert.equal(result.counters.migrated, 120);
  let upserts = 0;
  let runs = 0;
  // This scenario's runs only: earlier scenarios ran under the same ID.
  const { taskQueue } = await handle.describe();
  for await (const w of wf.env.client.workflow.list({ query: `WorkflowId = "${handle.workflowId}" AND TaskQueue = "${taskQueue}"` })) {
    runs++;
    const history = await wf.env.client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    // The SDK writes TemporalChangeVersion once per patch per run: those are not progress writes.
    upserts += (history.events ?? []).filter((e) => {
      const fields = Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {});
      return fields.some((f) => f.startsWith('Migration'));
    }).length;
  }
  assert.equal(runs, result.runs);
  assert.ok(upserts > 0, 'no progress search attributes were written');
  // Per run: the run's first progress; resource/group once, Succeeded once; and progress every 10 chunks.
  assert.ok(upserts <= runs + 2 + 1, `${upserts} progress search attribute writes over ${runs} runs and 12 chunks`);
  const described = await handle.describe();
  assert.deepEqual(described.searchAttributes.MigrationMigrated, [120]);
  assert.deepEqual(described.searchAttributes.MigrationPhase, ['Succeeded']);
});
