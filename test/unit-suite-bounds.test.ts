/**
 * The suite's own rule (issue 48): every wait of a test has a bound that names what it waited for. A migration's end
 * is awaited through migrationResult (test/helpers/waits.ts), never through a handle's unbounded wait(); a workflow's
 * result through workflowResult, never through a handle's unbounded result() (issue 63).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { eventually } from './helpers/waits';

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

/**
 * A workflow's `.result()` waits as long as the workflow runs: unbounded. Known exceptions, each a line of a file
 * another engineer owns (by its text, not its number), with why it is bounded all the same. An exception whose line is
 * gone fails too, so that the list only shrinks.
 */
const UNBOUNDED_RESULT_EXCEPTIONS: Record<string, string> = {
  // Inside eventually(..., 240_000), and only once describe() says COMPLETED: bounded, but not by workflowResult.
  'test-upgrade.test.ts': 'return (await h.result()) as { phase: string; message?: string };',
};

void test("no test file or helper awaits a workflow's result unbounded: h.result() is workflowResult(h)", () => {
  const found: string[] = [];
  const excepted = new Set<string>();
  const files = [
    ...readdirSync(__dirname)
      .filter((f) => f.endsWith('.test.ts') && f !== path.basename(__filename))
      .map((f) => path.join(__dirname, f)),
    // The helpers too, but waits.ts, where workflowResult bounds the one .result() of the suite.
    ...readdirSync(path.join(__dirname, 'helpers'))
      .filter((f) => f.endsWith('.ts') && f !== 'waits.ts')
      .map((f) => path.join(__dirname, 'helpers', f)),
  ];
  for (const file of files) {
    const name = path.relative(__dirname, file);
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (!/\.result\(\)/.test(line)) return;
        if (UNBOUNDED_RESULT_EXCEPTIONS[name] === line.trim()) excepted.add(name);
        else found.push(`${name}:${i + 1}: ${line.trim()}`);
      });
  }
  assert.deepEqual(found, [], 'use workflowResult(h, timeoutMs) from test/helpers/waits.ts');
  assert.deepEqual(
    Object.keys(UNBOUNDED_RESULT_EXCEPTIONS).filter((f) => !excepted.has(f)),
    [],
    'an exception whose line is gone: remove it from UNBOUNDED_RESULT_EXCEPTIONS',
  );
});

/**
 * Files that start a plane with src/dev/plane's own up(), each another engineer's: each opens it with testPlane({ dir })
 * right after, which records it, so only a file ended while that first up() runs leaves it unrecorded.
 */
const UNRECORDED_UP_EXCEPTIONS = ['test-conformance.test.ts', 'test-upgrade.test.ts'];

void test("no test file starts a plane unrecorded: up() is test/helpers/plane.ts's, which scripts/test.sh's ledger sees", () => {
  const found = readdirSync(__dirname)
    .filter((f) => f.endsWith('.test.ts') && f !== path.basename(__filename))
    .filter((f) => /import\s*\{[^}]*\bup\b[^}]*\}\s*from\s*'\.\.\/src\/dev\/plane'/.test(readFileSync(path.join(__dirname, f), 'utf8')));
  assert.deepEqual(
    found.filter((f) => !UNRECORDED_UP_EXCEPTIONS.includes(f)),
    [],
    "import up from './helpers/plane' (it records the plane, recordPlane)",
  );
  assert.deepEqual(
    UNRECORDED_UP_EXCEPTIONS.filter((f) => !found.includes(f)),
    [],
    'an exception that no longer imports src/dev/plane up: remove it from UNRECORDED_UP_EXCEPTIONS',
  );
});

void test('eventually: past its bound it names what it waited for and what the last check saw; a check still running at the bound keeps what the one before saw', async () => {
  let n = 0;
  await assert.rejects(
    eventually(
      'the answer',
      async () => {
        n++;
        if (n === 1) throw new Error('403 Forbidden: lasting');
        if (n === 2) return false;
        return new Promise<false>(() => undefined); // the third never answers
      },
      1_000,
    ),
    /^Error: timed out after 1\.0 s waiting for the answer: the last check was still running at the bound \(the one before answered false\)$/,
  );
  await assert.rejects(
    eventually(
      'a server',
      async () => {
        throw new Error('connect ECONNREFUSED 127.0.0.1:1');
      },
      500,
      () => 'its /readyz: refused',
    ),
    /^Error: timed out after 0\.5 s waiting for a server: the last check threw: connect ECONNREFUSED 127\.0\.0\.1:1; now: its \/readyz: refused$/,
  );
});
