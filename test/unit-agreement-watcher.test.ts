/**
 * Unit tests of src/worker/agreement-watcher.ts: when an API server joins, leaves or restarts, the watcher signals
 * the running migrations of its own cluster only (its placement's visibility query), never another cluster's that
 * shares the Temporal namespace; a single-cluster install's, those that name no cluster, not the named clusters'. A
 * fake client stands for Temporal: it answers the query as a visibility store would
 * for the workflows it holds, and records what was signalled.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import pino from 'pino';
import { Placement } from '../src/contract/placement';
import { runningMigrationsQuery, signalAll } from '../src/worker/agreement-watcher';

interface Held {
  workflowId: string;
  type: string;
  running: boolean;
  taskQueue: string;
  cluster?: string;
}

/** Answers only the query forms the watcher sends (type, status and the cluster, or no cluster), as visibility would. */
function fakeClient(held: Held[]) {
  const queries: string[] = [];
  const signalled: string[] = [];
  const matches = (q: string, w: Held) => {
    const cluster = /MigrationCluster = '([^']+)'/.exec(q)?.[1];
    const unnamed = /MigrationCluster IS NULL/.test(q);
    const type = /WorkflowType = '([^']+)'/.exec(q)?.[1];
    return w.running && w.type === type && (cluster === undefined || w.cluster === cluster) && (!unnamed || w.cluster === undefined);
  };
  const client = {
    workflow: {
      list: ({ query }: { query: string }) => {
        queries.push(query);
        const found = held.filter((w) => matches(query, w));
        return (async function* () {
          for (const w of found) yield { workflowId: w.workflowId };
        })();
      },
      getHandle: (id: string) => ({
        signal: async () => {
          signalled.push(id);
        },
      }),
    },
  } as unknown as Client;
  return { client, queries, signalled };
}

const held: Held[] = [
  { workflowId: 'migrate/east/configmaps', type: 'migrateResource', running: true, taskQueue: 'svm/cluster/east', cluster: 'east' },
  { workflowId: 'migrate/east/secrets', type: 'migrateResource', running: false, taskQueue: 'svm/cluster/east', cluster: 'east' },
  { workflowId: 'migrate/west/configmaps', type: 'migrateResource', running: true, taskQueue: 'svm/cluster/west', cluster: 'west' },
  {
    workflowId: 'migrate/west/widgets.example.com',
    type: 'migrateResource',
    running: true,
    taskQueue: 'svm/cluster/west',
    cluster: 'west',
  },
  { workflowId: 'svm-trigger/east', type: 'storageTrigger', running: true, taskQueue: 'svm/cluster/east', cluster: 'east' },
];
const log = pino({ level: 'silent' });

void test("a named cluster's watcher signals its own cluster's running migrations, none of another cluster's", async () => {
  const { client, queries, signalled } = fakeClient(held);
  await signalAll({ client, log, placement: Placement.of('svm', 'east') }, 'an API server restarted');
  assert.deepEqual(queries, [`WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running' AND MigrationCluster = 'east'`]);
  assert.deepEqual(signalled, ['migrate/east/configmaps']);
  const west = fakeClient(held);
  await signalAll({ client: west.client, log, placement: Placement.of('svm', 'west') }, 'an API server restarted');
  assert.deepEqual(west.signalled, ['migrate/west/configmaps', 'migrate/west/widgets.example.com']);
});

void test("a single-cluster install (no name) signals its running migrations, those that name no cluster: all of its own, none of a named cluster's", async () => {
  assert.equal(
    runningMigrationsQuery(Placement.of('svm')),
    `WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running' AND MigrationCluster IS NULL`,
  );
  // Its own migrations never carried MigrationCluster (those started before the query was narrowed neither, on
  // whatever queue); each of the named clusters' sharing the namespace carries its name.
  const own: Held[] = [
    { workflowId: 'migrate/configmaps', type: 'migrateResource', running: true, taskQueue: 'tq-custom' },
    { workflowId: 'migrate/widgets.example.com', type: 'migrateResource', running: true, taskQueue: 'svm' },
    { workflowId: 'migrate/secrets', type: 'migrateResource', running: false, taskQueue: 'svm' },
    { workflowId: 'svm-trigger', type: 'storageTrigger', running: true, taskQueue: 'svm' },
  ];
  const { client, signalled } = fakeClient([...own, ...held]);
  await signalAll({ client, log, placement: Placement.of('svm') }, 'an API server restarted');
  assert.deepEqual(signalled, ['migrate/configmaps', 'migrate/widgets.example.com']);
});
