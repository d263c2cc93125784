/**
 * The client bundle's @temporalio/proto (dist/cli/svm-client.js, scripts/bundle-cli.mjs) builds its types on
 * first use, from descriptors whose type names were made absolute at build time: it must mean exactly what the
 * package means. Checked here against the package itself, service by service and byte by byte.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import type * as protobuf from 'protobufjs';

const root = path.join(__dirname, '..');
type Tree = Record<string, unknown>;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const bundle = require(path.join(root, 'dist', 'cli', 'svm-client.js')) as { bundledProto(): Tree };
const lazy = bundle.bundledProto();
// eslint-disable-next-line @typescript-eslint/no-require-imports
const eager = require('@temporalio/proto') as Tree;

function at(tree: Tree, name: string): unknown {
  return name.split('.').reduce<unknown>((o, part) => (o as Tree)[part], tree);
}

void test("the bundle builds a package's types only when one is read", () => {
  const history = at(lazy, 'temporal.api.history.v1') as Tree;
  assert.equal(typeof Object.getOwnPropertyDescriptor(history, 'HistoryEvent')?.get, 'function', 'not built yet');
  const built = history.HistoryEvent as protobuf.Type;
  assert.equal(built.fullName, '.temporal.api.history.v1.HistoryEvent');
  assert.equal(Object.getOwnPropertyDescriptor(history, 'HistoryEvent')?.value, built, 'built once, then kept');
});

void test('every method of the services a client uses: the same request and response types as the package', () => {
  const services = [
    'temporal.api.workflowservice.v1.WorkflowService',
    'temporal.api.operatorservice.v1.OperatorService',
    'temporal.api.testservice.v1.TestService',
    'grpc.health.v1.Health',
  ];
  let methods = 0;
  for (const name of services) {
    const mine = at(lazy, name) as protobuf.Service;
    const theirs = at(eager, name) as protobuf.Service;
    assert.deepEqual(Object.keys(mine.methods).sort(), Object.keys(theirs.methods).sort(), name);
    for (const [m, method] of Object.entries(mine.methods)) {
      const other = theirs.methods[m]!;
      method.resolve();
      other.resolve();
      assert.equal(method.resolvedRequestType!.fullName, other.resolvedRequestType!.fullName, `${name}.${m}`);
      assert.equal(method.resolvedResponseType!.fullName, other.resolvedResponseType!.fullName, `${name}.${m}`);
      methods++;
    }
  }
  assert.ok(methods > 100, `${methods} methods compared`);
});

void test('a request with nested messages, enums, maps and a Duration: the same bytes, and read back the same', () => {
  const request = {
    namespace: 'default',
    workflowId: 'migrate/widgets.example.com',
    workflowType: { name: 'migrateResource' },
    taskQueue: { name: 'svm', kind: 1 },
    input: { payloads: [{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{"resource":"widgets"}') }] },
    workflowExecutionTimeout: { seconds: 3600 },
    workflowIdReusePolicy: 2,
    retryPolicy: { initialInterval: { seconds: 1, nanos: 500 }, maximumAttempts: 3, nonRetryableErrorTypes: ['Fatal'] },
    memo: { fields: { note: { data: Buffer.from('"x"') } } },
    searchAttributes: { indexedFields: { SvmResource: { data: Buffer.from('"widgets"') } } },
    header: { fields: { trace: { data: Buffer.from('1') } } },
  };
  const name = 'temporal.api.workflowservice.v1.StartWorkflowExecutionRequest';
  const mine = at(lazy, name) as protobuf.Type;
  const theirs = at(eager, name) as protobuf.Type;
  const bytes = mine.encode(mine.fromObject(request)).finish();
  assert.deepEqual(Buffer.from(bytes), Buffer.from(theirs.encode(theirs.fromObject(request)).finish()));
  const options = { longs: String, enums: String, bytes: String, defaults: false };
  assert.deepEqual(mine.toObject(mine.decode(bytes), options), theirs.toObject(theirs.decode(bytes), options));
  const status = at(lazy, 'temporal.api.enums.v1.WorkflowExecutionStatus') as Record<string, number>;
  // Compared by entries: the two copies of protobufjs make the values object with different prototypes.
  assert.deepEqual({ ...status }, { ...(at(eager, 'temporal.api.enums.v1.WorkflowExecutionStatus') as Record<string, number>) });
  assert.equal(status.WORKFLOW_EXECUTION_STATUS_RUNNING, 1);
});
