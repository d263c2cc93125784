/**
 * recordPlane (test/helpers/plane.ts): what a test file writes to the ledger scripts/test.sh gives it
 * (SVM_TEST_PLANE_LEDGER), from which scripts/test.sh takes down the planes the file left (down_planes): each plane of
 * the file's own once, by its absolute directory; never the run's shared planes; nothing outside scripts/test.sh.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { recordPlane } from './helpers/plane';

const scratch = mkdtempSync(path.join(tmpdir(), 'svm-unit-record-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

function withEnv(env: Record<string, string | undefined>, fn: () => void): void {
  const before = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  try {
    for (const [k, v] of Object.entries(env))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    fn();
  } finally {
    for (const [k, v] of Object.entries(before))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
}

const entries = (ledger: string) => (existsSync(ledger) ? readdirSync(ledger).map((e) => readFileSync(path.join(ledger, e), 'utf8')) : []);

void test("a file's own planes are recorded once each, by absolute directory; the shared planes never", () => {
  const ledger = path.join(scratch, 'planes', 'test-x');
  const shared = path.join(scratch, 'shared');
  const server = path.join(scratch, 'server');
  withEnv({ SVM_TEST_PLANE_LEDGER: ledger, SVM_DEV_DIR: shared, SVM_SERVER_DEV_DIR: server }, () => {
    recordPlane(shared);
    recordPlane(`${server}/`);
    assert.deepEqual(entries(ledger), [], 'the shared planes are the run’s');
    const own = path.join(scratch, 'own-a');
    recordPlane(own);
    recordPlane(path.relative(process.cwd(), own)); // the same plane, named relatively
    recordPlane(path.join(scratch, 'own-b'));
  });
  assert.deepEqual(entries(ledger).sort(), [`${path.join(scratch, 'own-a')}\n`, `${path.join(scratch, 'own-b')}\n`]);
});

void test('without a ledger (a file run outside scripts/test.sh) nothing is written', () => {
  withEnv({ SVM_TEST_PLANE_LEDGER: undefined }, () => recordPlane(path.join(scratch, 'own-c')));
  assert.equal(existsSync(path.join(scratch, 'own-c')), false);
});
