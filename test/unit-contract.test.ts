/**
 * The published workflow contract (contract/v<N>/*.schema.json) is exactly
 * what the code checks with: regenerated here and compared file by file. A
 * change to an input, signal, update, query or result that is not
 * regenerated (npm run gen:contract) fails; one that breaks callers needs a
 * new CONTRACT_VERSION (and keeps the old files).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { contractDir, contractFile, render } from '../scripts/gen-contract';
import { contractSchemas, StartInputSchema } from '../src/contract/json-schema';
import { CONTRACT_VERSION } from '../src/contract/definitions';

void test('every contract schema file matches the code', () => {
  const schemas = contractSchemas();
  for (const [name, schema] of Object.entries(schemas)) {
    assert.ok(existsSync(contractFile(name)), `contract/v${CONTRACT_VERSION}/${name}.schema.json is missing: run npm run gen:contract`);
    assert.deepEqual(
      JSON.parse(readFileSync(contractFile(name), 'utf8')),
      JSON.parse(render(schema)),
      `${name} drifted: run npm run gen:contract`,
    );
  }
  const files = readdirSync(contractDir).filter((f) => f.endsWith('.schema.json'));
  assert.deepEqual(
    files.sort(),
    Object.keys(schemas)
      .map((n) => `${n}.schema.json`)
      .sort(),
    'no schema file without its code',
  );
});

void test('the minimal starts are valid input; a bad option and an unknown field are not', () => {
  for (const ok of [
    { resource: 'gizmos.example.com' },
    { resource: 'secrets' },
    { group: 'example.com', resource: 'gizmos', options: { qps: 20 } },
  ]) {
    assert.ok(StartInputSchema.safeParse(ok).success, JSON.stringify(ok));
  }
  assert.ok(!StartInputSchema.safeParse({ resource: 'secrets', options: { chunkSize: 0 } }).success);
  assert.ok(!StartInputSchema.safeParse({ resource: 'secrets', continueToken: 'x' }).success);
  assert.ok(!StartInputSchema.safeParse({}).success);
});
