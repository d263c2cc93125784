/**
 * The trigger's decisions over several periods, without Kubernetes: the real
 * Temporal dev server (the binary `npm run tools` builds) runs
 * storageVersionTrigger, and its two activities are test doubles. A small
 * world stands in for the cluster: what each API server's discovery says,
 * the StorageState objects (with resourceVersions, so a stale write
 * conflicts), and how the migrations stand. A script changes that world
 * before given periods; every decision the workflow applies is recorded.
 * What is asserted is what the workflow decided to apply, period by period
 * (design-docs/001 and its HA extension), not how long it took.
 */
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Observation } from '../src/activities/trigger';
import { recordHistories, recording } from './helpers/histories';
import { workflowTestEnv } from './helpers/workflow-env';
import { pollNowSignal, storageVersionTrigger, type TriggerInput } from '../src/workflows/trigger';
import {
  UNKNOWN,
  type MigrationStatus,
  type RecordedPass,
  type ReporterEntry,
  type StateSnapshot,
  type TriggerAction,
} from '../src/contract/trigger';
import { eventually } from './helpers/migrate';

// A period's history is about eighteen events: Temporal suggests continue-as-new after every second period,
// so every scenario crosses runs and the trigger's memory (agreement since when, backoff) must travel with them.
const SUGGEST_CAN_AT = 25;
const W = 'widgets.example.com';
const G = 'gadgets.example.com';

const wf = workflowTestEnv(SUGGEST_CAN_AT);

interface State {
  rv: number;
  persisted: string[];
  current?: string;
  lastHeartbeatTime?: string;
  reporters: ReporterEntry[];
}

/** One period the workflow applied: the observation number, the run it happened in, what it decided. */
interface Period {
  n: number;
  runId: string;
  actions: TriggerAction[];
}

/** The cluster as the trigger's activities see it, and the record of what the workflow applied. */
class World {
  /** name -> reporterID -> the storageVersionHash that API server serves. */
  discovery: Record<string, Record<string, string>> = {};
  states: Record<string, State> = {};
  migrations: Record<string, MigrationStatus> = {};
  /** name -> the hash a Succeeded migration's result records (the record in Temporal). */
  recorded: Record<string, string> = {};
  /** Changes the world before observation n (the first is 0). */
  script: (n: number) => void = () => undefined;
  /** Observations that fail (as if their retries ran out), and periods whose apply fails. */
  readonly failObserve = new Set<number>();
  readonly failApply = new Set<number>();

  /** When observation n was read (Observation.at); unset: the observation carries no time, as in older histories. */
  clock?: (n: number) => number;
  observations = 0;
  readonly periods: Period[] = [];
  readonly failed: Array<{ n: number; stage: 'observe' | 'apply'; actions?: TriggerAction[] }> = [];

  state(name: string, persisted: string[], current: string | undefined, heartbeatMs: number, reporters: Record<string, string>): void {
    const at = new Date(heartbeatMs).toISOString();
    this.states[name] = {
      rv: 1,
      persisted,
      current,
      lastHeartbeatTime: at,
      reporters: Object.entries(reporters).map(([reporterID, h]) => ({ reporterID, currentStorageVersionHash: h, lastHeartbeatTime: at })),
    };
  }

  /** A pass of an earlier migration on record in Temporal (its Succeeded result names the hash). */
  migrated(name: string, hash: string): void {
    this.migrations[name] = 'succeeded';
    this.recorded[name] = hash;
  }

  /** A migration ends; a successful one refines persisted to [current] as refineStorageState does. */
  finish(name: string, status: 'succeeded' | 'failed'): void {
    this.migrations[name] = status;
    const st = this.states[name];
    if (status === 'succeeded' && st?.current) {
      this.states[name] = { ...st, rv: st.rv + 1, persisted: [st.current] };
      this.recorded[name] = st.current;
    }
  }

  activities() {
    return {
      observeStorage: async (known?: Record<string, string>): Promise<Observation> => {
        const n = this.observations++;
        this.script(n);
        if (this.failObserve.has(n)) {
          this.failed.push({ n, stage: 'observe' });
          throw ApplicationFailure.nonRetryable('no API server answered discovery', 'Unreachable');
        }
        const reporters = [...new Set(Object.values(this.discovery).flatMap((h) => Object.keys(h)))].sort();
        const states: Record<string, StateSnapshot> = {};
        for (const [name, st] of Object.entries(this.states)) {
          states[name] = {
            resourceVersion: String(st.rv),
            persisted: [...st.persisted],
            current: st.current,
            lastHeartbeatTime: st.lastHeartbeatTime,
            reporters: st.reporters.map((e) => ({ ...e })),
          };
        }
        // As the real activity: migrations are looked up only where the state is not settled, or (given what the
        // trigger knows is on record) settled at a hash it does not know on record.
        const migrations: Record<string, MigrationStatus> = {};
        const recorded: Record<string, RecordedPass> = {};
        for (const name of Object.keys(this.discovery)) {
          const st = states[name];
          if (st && st.persisted.length === 1 && st.persisted[0] === st.current && (!known || known[name] === st.current)) continue;
          migrations[name] = this.migrations[name] ?? 'none';
          const hash = this.recorded[name];
          if (migrations[name] === 'succeeded' && hash) recorded[name] = { hash };
        }
        return {
          observed: Object.entries(this.discovery)
            .map(([name, hashes]) => ({
              name,
              group: name.slice(name.indexOf('.') + 1),
              resource: name.slice(0, name.indexOf('.')),
              hashes: { ...hashes },
            }))
            .sort((a, b) => a.name.localeCompare(b.name)),
          states,
          migrations,
          ...(known ? { recorded } : {}),
          discoveryConsistent: Object.values(this.discovery).every((h) => new Set(Object.values(h)).size === 1),
          reporters,
          checked: `${reporters.length} of ${reporters.length} API servers (test double)`,
          ...(this.clock ? { at: this.clock(n) } : {}),
        };
      },
      applyTriggerActions: async (
        actions: TriggerAction[],
      ): Promise<{ written: number; started: string[]; stopped: string[]; conflicts: string[] }> => {
        const n = this.observations - 1;
        if (this.failApply.has(n)) {
          this.failed.push({ n, stage: 'apply', actions });
          throw ApplicationFailure.nonRetryable('StorageStates could not be written: HTTP 503', 'KubeError');
        }
        this.periods.push({ n, runId: Context.current().info.workflowExecution?.runId ?? '?', actions });
        const result = { written: 0, started: [] as string[], stopped: [] as string[], conflicts: [] as string[] };
        for (const a of actions) {
          if (a.stopMigration) {
            if (this.migrations[a.name] === 'running') this.migrations[a.name] = 'aborted';
            result.stopped.push(a.name);
          }
          const st = this.states[a.name];
          if (st && !a.write.create && String(st.rv) !== a.write.resourceVersion) {
            result.conflicts.push(a.name);
            continue;
          }
          this.states[a.name] = {
            rv: (st?.rv ?? 0) + 1,
            persisted: a.write.persisted,
            current: a.write.current,
            lastHeartbeatTime: a.write.lastHeartbeatTime,
            reporters: a.write.reporters,
          };
          result.written++;
          if (a.startMigration) {
            this.migrations[a.name] = 'running';
            result.started.push(a.name);
          }
        }
        return result;
      },
    };
  }

  /** What period n decided for a resource. */
  action(n: number, name: string): TriggerAction {
    const p = this.periods.find((x) => x.n === n);
    assert.ok(p, `period ${n} was not applied (applied: ${this.periods.map((x) => x.n).join(', ')})`);
    const a = p.actions.find((x) => x.name === name);
    assert.ok(a, `period ${n} decided nothing for ${name}`);
    return a;
  }

  /** The periods that started a migration of name. */
  starts(name: string): number[] {
    return this.periods.filter((p) => p.actions.some((a) => a.name === name && a.startMigration)).map((p) => p.n);
  }

  async applied(n: number): Promise<void> {
    await eventually(`period ${n} to be applied`, async () => this.periods.some((p) => p.n >= n), 30_000);
  }
}

let seq = 0;
async function run(w: World, input: TriggerInput, fn: (h: WorkflowHandle<typeof storageVersionTrigger>) => Promise<void>): Promise<void> {
  const taskQueue = `trig-${Date.now()}-${seq++}`;
  const worker = await Worker.create({
    connection: wf.env.nativeConnection,
    taskQueue,
    workflowBundle: wf.bundle,
    activities: w.activities(),
  });
  const h = await wf.env.client.workflow.start(storageVersionTrigger, {
    taskQueue,
    workflowId: `svm-trigger-test-${Date.now()}-${seq++}`,
    // Periods of 1 s would make the default bound (3 periods) 3 s, within reach of a slow CI machine's
    // scheduling; scenarios that test the bound set their own.
    args: [{ stalenessSeconds: 60, ...input }],
  });
  try {
    await worker.runUntil(async () => {
      try {
        await fn(h);
        assert.equal((await h.describe()).status.name, 'RUNNING', 'the trigger runs until it is stopped');
      } finally {
        await h.terminate('scenario over');
      }
    });
  } finally {
    if (recording()) recordHistories(wf.env.address, 'trig', currentTest ?? 'scenario', h.workflowId, h.firstExecutionRunId);
  }
}

let currentTest: string | undefined;
beforeEach((t) => void (currentTest = t.name));

/** pollNow until the next period is applied. Signals are sent only before it is, so none can start a period after it. */
async function step(h: WorkflowHandle, w: World): Promise<void> {
  const target = w.periods.length + 1;
  const deadline = Date.now() + 20_000;
  // One signal: signals are durable, and one sent during a period brings the next (a second would bring another).
  await h.signal(pollNowSignal);
  while (w.periods.length < target) {
    if (Date.now() > deadline) throw new Error(`pollNow did not bring period ${target}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ms = (iso: string | undefined) => Date.parse(iso ?? 'invalid');

void test('a new resource: created as Unknown with the current hash, migrated only after a stable period, then settled', async () => {
  const w = new World();
  w.discovery[W] = { a: 'h1', b: 'h1' };
  w.script = (n) => {
    if (n === 3 && w.migrations[W] === 'running') w.finish(W, 'succeeded');
  };
  await run(w, { periodSeconds: 1 }, () => w.applied(4));

  const first = w.action(0, W);
  assert.equal(first.write.create, true);
  assert.deepEqual(first.write.persisted, [UNKNOWN]);
  assert.equal(first.write.current, 'h1');
  assert.deepEqual(
    first.write.reporters.map((r) => `${r.reporterID}=${r.currentStorageVersionHash}`),
    ['a=h1', 'b=h1'],
  );
  assert.equal(first.startMigration, undefined, 'not before the hashes agreed for a period');

  const second = w.action(1, W);
  assert.equal(second.write.create, false);
  assert.equal(second.startMigration, true);
  assert.ok(
    ms(second.write.lastHeartbeatTime) - ms(first.write.lastHeartbeatTime) >= 1000,
    'the start comes a whole period after agreement was first seen',
  );

  assert.equal(w.action(2, W).startMigration, undefined, 'no second migration while one runs');
  for (const n of [3, 4]) {
    const a = w.action(n, W);
    assert.deepEqual(a.write.persisted, ['h1'], `period ${n}: the success refined persisted and the trigger keeps it`);
    assert.equal(a.startMigration, undefined);
    assert.equal(a.stopMigration, undefined);
  }
  assert.deepEqual(w.starts(W), [1]);
  assert.deepEqual(w.failed, []);
});

void test('the storage version hash changes: the running migration is stopped and the new hash appended; pollNow observes at once but is not a period', async () => {
  const w = new World();
  const now = Date.now();
  w.discovery[W] = { a: 'h1', b: 'h1' };
  w.state(W, ['h0', 'h1'], 'h1', now, { a: 'h1', b: 'h1' });
  w.migrations[W] = 'running'; // migrating h0 -> h1
  // An hour's period: every period after the first is brought by pollNow.
  await run(w, { periodSeconds: 3600 }, async (h) => {
    await w.applied(0);
    w.discovery[W] = { a: 'h2', b: 'h2' };
    await step(h, w);
    await step(h, w);
  });
  assert.deepEqual(
    w.periods.map((p) => p.n),
    [0, 1, 2],
    'one period per pollNow, none by the timer',
  );

  const before = w.action(0, W);
  assert.equal(before.stopMigration, undefined);
  assert.equal(before.startMigration, undefined, 'a migration runs already');
  assert.deepEqual(before.write.persisted, ['h0', 'h1']);

  const changed = w.action(1, W);
  assert.match(changed.stopMigration ?? '', /the storage version hash of widgets\.example\.com changed from h1 to h2/);
  assert.equal(changed.write.current, 'h2');
  assert.deepEqual(changed.write.persisted, ['h0', 'h1', 'h2'], 'objects may now be written in h2');
  assert.equal(changed.startMigration, undefined, 'h2 has not been agreed for a period');
  assert.equal(w.migrations[W], 'aborted');

  const after = w.action(2, W);
  assert.equal(after.stopMigration, undefined, 'stopped once');
  assert.equal(after.startMigration, undefined, 'a pollNow moments later is not a period of agreement');
  assert.deepEqual(after.write.persisted, ['h0', 'h1', 'h2']);
});

void test('API servers diverge during a rolling upgrade: nothing starts while they differ, a migration starts once they agreed for a period', async () => {
  // design-docs/001, "Case walkthrough": three API servers upgraded v1 -> v2 one by one, one rolled back mid-migration and upgraded again.
  const w = new World();
  w.discovery[W] = { a: 'v1', b: 'v1', c: 'v1' };
  w.state(W, ['v1'], 'v1', Date.now(), { a: 'v1', b: 'v1', c: 'v1' });
  w.migrated(W, 'v1');
  const servers: Record<number, Record<string, string>> = {
    1: { a: 'v2', b: 'v1', c: 'v1' },
    2: { a: 'v2', b: 'v2', c: 'v1' },
    3: { a: 'v2', b: 'v2', c: 'v2' },
    5: { a: 'v2', b: 'v2', c: 'v1' }, // c rolled back while the migration runs
    6: { a: 'v2', b: 'v2', c: 'v2' },
  };
  w.script = (n) => {
    if (servers[n]) w.discovery[W] = servers[n];
    if (n === 9 && w.migrations[W] === 'running') w.finish(W, 'succeeded');
  };
  // The state was written moments ago by this trigger's predecessor: well within the staleness bound, however slowly the worker starts.
  await run(w, { periodSeconds: 1, stalenessSeconds: 60 }, () => w.applied(9));

  assert.equal(w.action(0, W).note, undefined, 'settled: only the heartbeat moves');
  for (const n of [1, 2]) {
    const a = w.action(n, W);
    assert.deepEqual(a.write.persisted, ['v1', 'v2'], `period ${n}: v2 may be written by the upgraded server`);
    assert.equal(a.write.current, 'v1', `period ${n}: current stays until they agree`);
    assert.equal(a.write.discoveryConsistent, false);
    assert.match(a.note ?? '', /hashes diverge/);
    assert.equal(a.startMigration, undefined);
  }
  const agreed = w.action(3, W);
  assert.equal(agreed.write.current, 'v2');
  assert.equal(agreed.startMigration, undefined, 'agreement just formed');
  assert.equal(w.action(4, W).startMigration, true, 'agreed for a period');
  const runOf = (n: number) => w.periods.find((p) => p.n === n)!.runId;
  assert.notEqual(runOf(3), runOf(4), 'agreement first seen in one run, counted in the next: the consensus crossed continue-as-new');

  const rolledBack = w.action(5, W);
  assert.match(
    rolledBack.stopMigration ?? '',
    /the API servers serve different storage version hashes for widgets\.example\.com: a=v2, b=v2, c=v1/,
  );
  assert.equal(rolledBack.startMigration, undefined);
  assert.deepEqual(rolledBack.write.persisted, ['v1', 'v2']);
  assert.equal(w.action(6, W).startMigration, undefined, 'agreement formed again just now');
  assert.equal(w.action(7, W).startMigration, true);
  const done = w.action(9, W);
  assert.deepEqual(done.write.persisted, ['v2']);

  assert.deepEqual(w.starts(W), [4, 7]);
  for (const p of w.periods) {
    const a = p.actions.find((x) => x.name === W)!;
    const distinct = new Set(a.write.reporters.map((r) => r.currentStorageVersionHash));
    if (distinct.size > 1) assert.equal(a.startMigration, undefined, `period ${p.n}: started while the servers differ`);
  }
});

void test('a failing period is survived: an observation or an apply that fails is decided again next period', async () => {
  const w = new World();
  w.discovery[W] = { a: 'h1' };
  w.failObserve.add(1);
  w.failApply.add(2);
  await run(w, { periodSeconds: 1 }, () => w.applied(4));

  assert.deepEqual(
    w.failed.map((f) => `${f.n}:${f.stage}`),
    ['1:observe', '2:apply'],
  );
  assert.deepEqual(
    w.periods.map((p) => p.n),
    [0, 3, 4],
    'the periods after the failures went on',
  );
  assert.equal(w.action(0, W).write.create, true);
  const lost = w.failed.find((f) => f.stage === 'apply')!.actions!.find((a) => a.name === W)!;
  assert.equal(lost.startMigration, true, 'period 2 decided to start; its apply failed');
  const again = w.action(3, W);
  assert.equal(again.startMigration, true, 'the lost start is decided again');
  assert.equal(again.write.create, false);
  assert.deepEqual(w.starts(W), [3]);
  assert.equal(w.migrations[W], 'running');
});

void test('the trigger away past its staleness bound: persisted is reset to Unknown once, a migration follows; a recent heartbeat is trusted', async () => {
  const w = new World();
  const now = Date.now();
  w.discovery[W] = { a: 'h1' };
  w.discovery[G] = { a: 'h1' };
  w.state(W, ['h1'], 'h1', now - 300_000, { a: 'h1' }); // a trigger wrote this five minutes ago, then went away
  w.state(G, ['h1'], 'h1', now - 1_000, { a: 'h1' });
  w.migrated(W, 'h1');
  w.migrated(G, 'h1');
  w.script = (n) => {
    if (n === 3 && w.migrations[W] === 'running') w.finish(W, 'succeeded');
  };
  await run(w, { periodSeconds: 1, stalenessSeconds: 60 }, () => w.applied(3));

  const reset = w.action(0, W);
  assert.deepEqual(reset.write.persisted, [UNKNOWN]);
  assert.match(reset.note ?? '', /the trigger was away past the staleness bound/);
  assert.equal(reset.startMigration, undefined, 'agreement first seen in this period');
  const started = w.action(1, W);
  assert.equal(started.startMigration, true);
  assert.doesNotMatch(started.note ?? '', /staleness/, 'its own heartbeats are not stale');
  assert.deepEqual(w.action(3, W).write.persisted, ['h1']);

  for (const p of w.periods) {
    const g = p.actions.find((a) => a.name === G)!;
    assert.deepEqual(g.write.persisted, ['h1'], `period ${p.n}: a heartbeat within the bound is trusted`);
    assert.equal(g.startMigration, undefined);
  }
  assert.deepEqual(w.starts(W), [1]);
});

void test('the trigger decides by when each observation was read (recorded in history), not by the workflow clock', async () => {
  const w = new World();
  const now = Date.now();
  w.discovery[W] = { a: 'h1' };
  w.state(W, ['h1'], 'h1', now - 1_000, { a: 'h1' }); // fresh by the workflow clock...
  const later = now + 600_000;
  w.clock = (n) => later + n * 1000; // ...but every observation was read ten minutes later
  await run(w, { periodSeconds: 1, stalenessSeconds: 60 }, () => w.applied(2));

  const reset = w.action(0, W);
  assert.deepEqual(reset.write.persisted, [UNKNOWN], 'by the reading, the heartbeat is ten minutes old');
  assert.match(reset.note ?? '', /the trigger was away past the staleness bound/);
  assert.equal(reset.write.lastHeartbeatTime, new Date(later).toISOString(), 'the heartbeat written is the reading');
  assert.equal(w.action(1, W).write.lastHeartbeatTime, new Date(later + 1000).toISOString());
});

void test('a trigger that runs but observes nothing for longer than its staleness bound was away: persisted reset to Unknown, a migration follows', async () => {
  const w = new World();
  w.discovery[W] = { a: 'h1' };
  // Settled: migrated to h1 moments before the first observation (however slowly the worker starts).
  w.script = (n) => n === 0 && w.state(W, ['h1'], 'h1', Date.now(), { a: 'h1' });
  for (let n = 1; n <= 6; n++) w.failObserve.add(n); // blind for 6+ periods: API servers away
  await run(w, { periodSeconds: 1, stalenessSeconds: 4 }, () => w.applied(2));

  const [first, back] = w.periods;
  assert.equal(first!.n, 0);
  assert.deepEqual(first!.actions.find((a) => a.name === W)!.write.persisted, ['h1'], 'a fresh heartbeat is trusted');
  const reset = back!.actions.find((a) => a.name === W)!;
  assert.ok(back!.n >= 7, `the period after the blind ones (${back!.n})`);
  assert.deepEqual(reset.write.persisted, [UNKNOWN]);
  assert.match(reset.note ?? '', /observed nothing for longer than the staleness bound/);
  assert.equal(reset.startMigration, true, 'agreement held since before: the migration starts at once');
  assert.deepEqual(w.starts(W), [back!.n]);
});

void test('continue-as-new carries the memory: a failing migration backs off 2 then 4 periods across runs', async () => {
  const w = new World();
  w.discovery[W] = { a: 'h1' };
  // Every migration started fails before the next period.
  w.script = () => {
    if (w.migrations[W] === 'running') w.finish(W, 'failed');
  };
  const retries = () => [
    ...new Set(w.periods.map((p) => /retried after (\S+)/.exec(p.actions[0]?.note ?? '')?.[1]).filter((x) => x !== undefined)),
  ];
  let workflowId = '';
  await run(w, { periodSeconds: 1, maxBackoffSeconds: 60 }, async (h) => {
    workflowId = h.workflowId;
    await eventually('two failures backed off', async () => retries().length >= 2, 30_000);
  });

  // Each failure: the first period that saw it, and the wait it decided.
  const failures = retries().map((notBefore) => {
    const p = w.periods.find((x) => x.actions[0]!.note?.includes(notBefore))!;
    return { n: p.n, runId: p.runId, wait: ms(notBefore) - ms(p.actions[0]!.write.lastHeartbeatTime) };
  });
  assert.deepEqual(
    failures.map((f) => f.wait),
    [2000, 4000],
    'the second wait doubles: the failure count survived',
  );
  assert.notEqual(failures[0]!.runId, failures[1]!.runId, 'the two failures were decided in different runs');
  const [s1, s2] = w.starts(W);
  assert.ok(
    s1 !== undefined && s2 !== undefined && s1 < failures[0]!.n && failures[0]!.n < s2 && s2 < failures[1]!.n,
    `starts ${w.starts(W).join(', ')}`,
  );
  for (const p of w.periods.filter((x) => x.n > failures[0]!.n && x.n < s2))
    assert.equal(p.actions[0]!.startMigration, undefined, `period ${p.n} started during the backoff`);

  // What the runs handed on: the input of the run that decided the second failure.
  const history = await wf.env.client.workflow.getHandle(workflowId, failures[1]!.runId).fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  assert.ok(payload);
  const carried = defaultPayloadConverter.fromPayload<TriggerInput>(payload);
  assert.equal(carried.memory?.consensus[W]?.hash, 'h1', 'agreement and since when');
  assert.ok(
    carried.memory?.since !== undefined && carried.memory.since <= ms(w.action(0, W).write.lastHeartbeatTime),
    'since: the first period of the first run',
  );
  assert.equal(carried.memory?.backoff[W]?.failures, 1);
  assert.equal(new Set(w.periods.map((p) => p.runId)).size > 1, true);
});

void test('a StorageState settled at the current hash with no pass on record (forged by the worker token, or older than the record): migrated once, then settled by its record', async () => {
  const w = new World();
  w.discovery[W] = { a: 'h1', b: 'h1' };
  w.state(W, ['h1'], 'h1', Date.now(), { a: 'h1', b: 'h1' });
  w.script = (n) => {
    if (n === 3 && w.migrations[W] === 'running') w.finish(W, 'succeeded');
  };
  await run(w, { periodSeconds: 1 }, () => w.applied(5));
  const first = w.action(0, W);
  assert.equal(first.mirrorWithoutRecord, true);
  assert.match(first.note ?? '', /no whole pass at h1 is on record in Temporal: the mirror alone does not count/);
  assert.deepEqual(first.write.persisted, ['h1'], 'the mirror is left as it is');
  assert.deepEqual(w.starts(W), [1], 'one migration, a stable period after the hashes were first seen');
  for (const n of [4, 5]) {
    const a = w.action(n, W);
    assert.equal(a.mirrorWithoutRecord, undefined, `period ${n}: the pass is on record`);
    assert.equal(a.startMigration, undefined);
  }
});
