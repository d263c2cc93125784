/**
 * The suite's own rule (issue 48): every wait of a test has a bound that names what it waited for. A migration's end
 * is awaited through migrationResult (test/helpers/waits.ts), never through a handle's unbounded wait().
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

void test("no test file awaits a migration's end unbounded: h.wait() is migrationResult(h)", () => {
  const dir = __dirname;
  const found: string[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.test.ts') && f !== path.basename(__filename))) {
    readFileSync(path.join(dir, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/\.wait\(\)/.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
  }
  assert.deepEqual(found, [], 'use migrationResult(h) from test/helpers/waits.ts');
});
