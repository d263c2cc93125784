/**
 * Unit tests of src/worker/agreement-watcher.ts: when an API server joins, leaves or restarts, the watcher signals
 * the running migrations of its own cluster only (its placement's visibility query), never another cluster's that
 * shares the Temporal namespace. A fake client stands for Temporal: it answers the query as a visibility store would
 * for the workflows it holds, and records what was signalled.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import pino from 'pino';
import { runningMigrationsQuery, signalAll } from '../src/worker/agreement-watcher';

interface Held {
  workflowId: string;
  type: string;
  running: boolean;
  cluster?: string;
}

/** Answers only the query forms the watcher sends (type, status and, when narrowed, the cluster), as visibility would. */
function fakeClient(held: Held[]) {
  const queries: string[] = [];
  const signalled: string[] = [];
  const matches = (q: string, w: Held) => {
    const cluster = /MigrationCluster = '([^']+)'/.exec(q)?.[1];
    const type = /WorkflowType = '([^']+)'/.exec(q)?.[1];
    return w.running && w.type === type && (cluster === undefined || w.cluster === cluster);
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
  { workflowId: 'migrate/east/configmaps', type: 'migrateResource', running: true, cluster: 'east' },
  { workflowId: 'migrate/east/secrets', type: 'migrateResource', running: false, cluster: 'east' },
  { workflowId: 'migrate/west/configmaps', type: 'migrateResource', running: true, cluster: 'west' },
  { workflowId: 'migrate/west/widgets.example.com', type: 'migrateResource', running: true, cluster: 'west' },
  { workflowId: 'svm-trigger/east', type: 'storageTrigger', running: true, cluster: 'east' },
];

void test("a named cluster's watcher signals its own cluster's running migrations, none of another cluster's", async () => {
  const { client, queries, signalled } = fakeClient(held);
  await signalAll({ client, log: pino({ level: 'silent' }), cluster: 'east' }, 'an API server restarted');
  assert.deepEqual(queries, [`WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running' AND MigrationCluster = 'east'`]);
  assert.deepEqual(signalled, ['migrate/east/configmaps']);
  const west = fakeClient(held);
  await signalAll({ client: west.client, log: pino({ level: 'silent' }), cluster: 'west' }, 'an API server restarted');
  assert.deepEqual(west.signalled, ['migrate/west/configmaps', 'migrate/west/widgets.example.com']);
});

void test('a single-cluster install (no name) keeps its query: every running migration of its namespace', async () => {
  assert.equal(runningMigrationsQuery(undefined), `WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running'`);
  const { client, signalled } = fakeClient(held.filter((w) => w.cluster !== 'west').map((w) => ({ ...w, cluster: undefined })));
  await signalAll({ client, log: pino({ level: 'silent' }) }, 'an API server restarted');
  assert.deepEqual(signalled, ['migrate/east/configmaps']);
});
