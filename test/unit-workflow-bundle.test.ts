/**
 * The workflow bundle is written in ASCII (src/worker/workflow-bundle.ts,
 * asciiOnly): the same program, at one byte per character in V8.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vm from 'node:vm';
import { asciiOnly, splitSourceMap, withSourceMap } from '../src/worker/workflow-bundle';

void test('asciiOnly escapes every other character and the code means the same: strings, templates, regular expressions, comments, names', () => {
  const code = [
    '// a comment — with a dash → and an arrow',
    'const café = "naïve — ✖ 😀";',
    'const t = `x × ${café.length} …`;',
    'const r = /[—–]+/u.test("a—b") && /😀/u.test("😀") && /ø/.test("ø");',
    '/* ø */ [café, t, r, "😀".length, [..."😀"].length]',
  ].join('\n');
  const escaped = asciiOnly(code);
  assert.doesNotMatch(escaped, /[\u0080-\uffff]/, 'nothing outside ASCII is left');
  assert.notEqual(escaped, code);
  // Arrays made in another context have its prototype: compare their items.
  const run = (c: string) => Array.from(vm.runInNewContext(c) as unknown[]);
  assert.deepEqual(run(escaped), run(code));
  assert.deepEqual(run(escaped), ['naïve — ✖ 😀', 'x × 12 …', true, 2, 1]);
  assert.equal(asciiOnly('plain'), 'plain');
});

void test('splitSourceMap leaves an empty valid map in the bundle and hands back its own; withSourceMap puts it back', () => {
  const map = JSON.stringify({ version: 3, sources: ['a.ts'], sourcesContent: ['const a: number = 1;'], names: [], mappings: 'AAAA' });
  const code = `const a = 1;\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(map).toString('base64')}\n`;
  const split = splitSourceMap(code);
  assert.equal(split.map, map);
  assert.ok(split.code.startsWith('const a = 1;\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,'));
  const inline = split.code.trim().split('base64,')[1]!;
  assert.deepEqual(JSON.parse(Buffer.from(inline, 'base64').toString('utf8')), {
    version: 3,
    file: 'workflow-bundle.js',
    sources: [],
    names: [],
    mappings: '',
  });
  assert.ok(split.code.length < code.length);
  assert.equal(withSourceMap(split.code, split.map!), code);
  assert.deepEqual(splitSourceMap('no map here'), { code: 'no map here', map: undefined });
});
