/** `svm setup` registers the search attributes on a namespace that lacks them, and is idempotent. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { msToTs } from '@temporalio/common/lib/time';
import { searchAttributeDefinitions } from '../src/contract/search-attributes';
import { eventually } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

const run = promisify(execFile);
let plane: TestPlane;
before(async () => {
  plane = await testPlane();
});
after(async () => plane?.close());

void test('svm setup registers the missing search attributes and says what it did; a second run finds them present', async () => {
  const namespace = uniq('setup');
  await plane.temporal.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  await eventually(
    'the namespace',
    async () => (await plane.temporal.connection.workflowService.describeNamespace({ namespace })).namespaceInfo?.name === namespace,
  );
  const svm = () =>
    run(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'setup'], {
      env: { ...process.env, TEMPORAL_ADDRESS: plane.temporal.address, TEMPORAL_NAMESPACE: namespace },
    });
  const before = await plane.temporal.connection.operatorService.listSearchAttributes({ namespace });
  assert.ok(!Object.keys(before.customAttributes ?? {}).includes('MigrationPhase'));

  const first = await svm();
  assert.match(
    first.stdout,
    new RegExp(
      `registered on namespace ${namespace}: MigrationResource \\(Keyword\\), MigrationGroup \\(Keyword\\), MigrationPhase \\(Keyword\\), MigrationMigrated \\(Int\\)`,
    ),
  );
  const after = await plane.temporal.connection.operatorService.listSearchAttributes({ namespace });
  for (const sa of searchAttributeDefinitions) assert.ok(Object.keys(after.customAttributes ?? {}).includes(sa.name), `${sa.name} missing`);

  const second = await svm();
  assert.doesNotMatch(second.stdout, /registered/);
  assert.match(second.stdout, /already present on namespace .*: MigrationResource, MigrationGroup, MigrationPhase, MigrationMigrated/);
});
