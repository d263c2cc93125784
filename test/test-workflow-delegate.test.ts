/**
 * delegateToBuiltIn's logic without Kubernetes: the real Temporal dev server
 * runs the workflow, and its activities are test doubles standing for the API
 * servers' agreement and the built-in migrator's conditions. Asserted: no
 * standard object before agreement, success recorded only when agreement held
 * from creation to the built-in's success, another object after a break or a
 * Failed, an end after maxPasses, and an end when no controller acts at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { Agreement } from '../src/activities';
import type { BuiltInView } from '../src/activities/built-in';
import type { ResourceRef } from '../src/api/resource';
import { delegateToBuiltIn } from '../src/workflows/delegate-to-built-in';
import { workflowTestEnv } from './helpers/workflow-env';

const REF: ResourceRef = {
  group: 'example.com',
  resource: 'widgets',
  version: 'v2',
  kind: 'Widget',
  namespaced: true,
  storageVersionHash: 'h2',
  custom: true,
};
const wf = workflowTestEnv(200);

const agreed = (token: string): Agreement =>
  ({ agreed: true, encodingVersion: 'v2', token, verified: true, checked: '2 of 2 API servers by their discovery' }) as Agreement;
const disagree = (token: string): Agreement =>
  ({ agreed: false, token, reason: 'apiserver-b encodes v1, apiserver-a v2', checked: '2 of 2' }) as Agreement;

/** Runs the workflow against scripted answers; returns its result or failure and what was asked of the doubles. */
async function scenario(script: {
  agreements: Agreement[];
  builtIn: (name: string, look: number) => BuiltInView;
  maxPasses?: number;
  noActionSeconds?: number;
}) {
  const created: string[] = [];
  const recorded: string[] = [];
  const looks = new Map<string, number>();
  let a = 0;
  const activities = {
    async agreement() {
      return { ...script.agreements[Math.min(a++, script.agreements.length - 1)]!, at: Date.now() };
    },
    async createBuiltInMigration(_ref: ResourceRef, name: string) {
      created.push(name);
      return name;
    },
    async builtInMigrationState(name: string) {
      const n = (looks.get(name) ?? 0) + 1;
      looks.set(name, n);
      return script.builtIn(name, n);
    },
    async recordAgreedHash(_ref: ResourceRef, agreement: Agreement) {
      recorded.push(agreement.token);
    },
  };
  const taskQueue = `delegate-${Math.random().toString(36).slice(2)}`;
  const worker = await Worker.create({ connection: wf.env.nativeConnection, taskQueue, workflowBundle: wf.bundle, activities });
  const outcome = await worker.runUntil(
    wf.env.client.workflow
      .execute(delegateToBuiltIn, {
        taskQueue,
        workflowId: `migrate/widgets.example.com-${taskQueue}`,
        args: [{ resource: REF, pollSeconds: 1, maxPasses: script.maxPasses, noActionSeconds: script.noActionSeconds }],
      })
      .then((r) => ({ ok: true as const, r }))
      .catch((err: unknown) => ({ ok: false as const, err })),
  );
  return { outcome, created, recorded };
}

void test('no standard object until the servers agree; success recorded when agreement held until the built-in succeeded', async () => {
  const { outcome, created, recorded } = await scenario({
    agreements: [disagree('d1'), disagree('d1'), agreed('t1')],
    builtIn: (_name, look) => (look < 3 ? { state: 'running', message: 'The migration is running' } : { state: 'succeeded' }),
  });
  assert.ok(outcome.ok, String(!outcome.ok && outcome.err));
  assert.equal(outcome.r.phase, 'Succeeded');
  assert.equal(created.length, 1);
  assert.deepEqual(recorded, ['t1']);
  assert.deepEqual(outcome.r.migrationObjects, [`storagemigration.k8s.io/${created[0]}`]);
  assert.match(outcome.r.message ?? '', /agreed on v2 from its creation to its success/);
});

void test('agreement that broke while the built-in ran (even if it came back) means another object: a new whole pass', async () => {
  const { outcome, created, recorded } = await scenario({
    // Agreed at creation, broken at the next look, agreed again (the same token) after: still not a pass that counts.
    agreements: [agreed('t1'), disagree('d2'), agreed('t1'), agreed('t1'), agreed('t1'), agreed('t1'), agreed('t1')],
    builtIn: (_name, look) => (look < 2 ? { state: 'running' } : { state: 'succeeded' }),
  });
  assert.ok(outcome.ok, String(!outcome.ok && outcome.err));
  assert.equal(outcome.r.phase, 'Succeeded');
  assert.equal(created.length, 2, 'a second object after the broken pass');
  assert.equal(recorded.length, 1);
});

void test('a Failed built-in migration is retried with a new object, and after maxPasses the workflow fails saying why', async () => {
  const { outcome, created, recorded } = await scenario({
    agreements: [agreed('t1')],
    builtIn: () => ({ state: 'failed', message: 'migration encountered unhandled error: boom' }),
    maxPasses: 2,
  });
  assert.ok(!outcome.ok);
  assert.ok(outcome.err instanceof WorkflowFailedError);
  assert.match(String((outcome.err.cause as Error).message), /2 built-in migrations .* did not give a success/);
  assert.equal(created.length, 2);
  assert.deepEqual(recorded, []);
});

void test('no controller acts on the object (no built-in runs): after noActionSeconds the workflow fails saying so, not waiting for ever', async () => {
  const started = Date.now();
  const { outcome, created, recorded } = await scenario({
    agreements: [agreed('t1')],
    builtIn: () => ({ state: 'pending' }),
    noActionSeconds: 30,
  });
  assert.ok(!outcome.ok, 'the workflow ended Failed');
  assert.ok(outcome.err instanceof WorkflowFailedError);
  assert.match(
    String((outcome.err.cause as Error).message),
    /no controller has acted on StorageVersionMigration .* 30s after svm created it: the built-in migrator does not seem to run/,
  );
  assert.equal(created.length, 1, 'one object, not a new one per look');
  assert.deepEqual(recorded, []);
  assert.ok(Date.now() - started >= 30_000, 'not before the bound');
});
