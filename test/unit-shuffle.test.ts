/**
 * scripts/shuffle.mjs, the order of SVM_TEST_SHUFFLE=<seed>|random (scripts/test.sh): every seed it prints gives the
 * same order again (issue 63: seed 1 was taken as `random`, so SVM_TEST_SHUFFLE=1 could never be replayed), the
 * order of a seed is the same on every machine, and anything but a seed or `random` is refused.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'node:test';

const script = path.join(__dirname, '..', 'scripts', 'shuffle.mjs');
const items = ['a', 'b', 'c', 'd', 'e', 'f', 'g h'];

function shuffle(seed: string): { code: number | null; order: string[]; said: string } {
  const r = spawnSync(process.execPath, [script, seed, ...items], { encoding: 'utf8' });
  return { code: r.status, order: r.stdout.split('\n').filter(Boolean), said: r.stderr };
}

void test('every seed replays: seed 1 included, the seed `random` drew, the smallest and the largest', () => {
  const drawn = shuffle('random');
  assert.equal(drawn.code, 0, drawn.said);
  const printed = /seed (\d+) \(SVM_TEST_SHUFFLE=\1 gives it again\)/.exec(drawn.said)?.[1];
  assert.ok(printed, drawn.said);
  for (const seed of ['1', '0', '42', '4294967295', printed]) {
    const first = shuffle(seed);
    assert.equal(first.code, 0, first.said);
    assert.match(first.said, new RegExp(`seed ${seed} \\(SVM_TEST_SHUFFLE=${seed} gives it again\\)`));
    assert.deepEqual([...first.order].sort(), [...items].sort(), `seed ${seed}: the same items, each once (one with a space kept whole)`);
    assert.deepEqual(shuffle(seed).order, first.order, `seed ${seed} gives the same order again`);
  }
  assert.deepEqual(shuffle(printed).order, drawn.order, 'the seed `random` printed gives its order again');
});

void test("a seed's order is the same on every machine (mulberry32, pinned), and different seeds give different orders", () => {
  assert.deepEqual(shuffle('1').order, ['b', 'f', 'g h', 'd', 'c', 'a', 'e']);
  assert.deepEqual(shuffle('42').order, ['d', 'b', 'a', 'f', 'g h', 'c', 'e']);
  assert.notDeepEqual(shuffle('1').order, shuffle('2').order);
});

void test('anything but a whole number below 2^32 or `random` is refused (exit 2), naming what was given', () => {
  for (const bad of ['', '-1', '1.5', '1e3', '0x10', '4294967296', 'yes']) {
    const r = shuffle(bad);
    assert.equal(r.code, 2, `'${bad}': ${r.said}`);
    assert.match(r.said, new RegExp(`must be a whole number below 2\\^32 \\(a seed\\) or 'random', not '${bad.replace(/\./g, '\\.')}'`));
    assert.deepEqual(r.order, []);
  }
});
