/**
 * The workflow bundle is written in ASCII (src/worker/workflow-bundle.ts,
 * asciiOnly): the same program, at one byte per character in V8.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import * as vm from 'node:vm';
import { zodReady } from '../src/workflows/preload';
import { asciiOnly, bundleOptions, SHARED_WORKFLOW_MODULES, splitSourceMap, withSourceMap } from '../src/worker/workflow-bundle';

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

void test('the modules every workflow shares (preloaded once, then frozen by the SDK) hold no state: no module-level let/var or collection; they import only each other, zod and the SDK', () => {
  const src = path.join(__dirname, '..', 'src');
  const shared = new Set<string>(SHARED_WORKFLOW_MODULES);
  for (const m of SHARED_WORKFLOW_MODULES) {
    const text = readFileSync(path.join(src, `${m}.ts`), 'utf8');
    assert.doesNotMatch(text, /^(?:export )?(?:let|var) /m, `${m}: a module-level let or var would be shared by every workflow`);
    assert.doesNotMatch(text, /^(?:export )?const \w+(?:: [^=]+)? = new (?:Map|Set|WeakMap|Array)\b/m, `${m}: a module-level collection`);
    for (const [, kind, spec] of text.matchAll(/^(?:import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gm)) {
      if (kind) continue; // erased at compile time
      if (spec!.startsWith('.')) {
        const target = path.relative(src, path.resolve(path.dirname(path.join(src, m)), spec!));
        assert.ok(shared.has(target), `${m} imports ${target} at run time, which is not shared`);
      } else assert.match(spec!, /^(zod|@temporalio\/common|@temporalio\/workflow)$/, `${m} imports ${spec}`);
    }
  }
  assert.equal(zodReady, true, "preload's throwaway schema parsed, passed and failed as meant");
  assert.deepEqual(
    bundleOptions(path.join(src, 'workflows', 'index.ts')).preloadModules,
    SHARED_WORKFLOW_MODULES.map((m) => path.join(src, m)),
  );
});

void test('the prebuilt workflow bundle loads the shared modules before any workflow (its preloadModules)', () => {
  const bundle = readFileSync(path.join(__dirname, '..', 'dist', 'workflow-bundle.js'), 'utf8');
  const preload = /exports\.preloadModules = function preloadModules\(\) \{([^}]*)\}/.exec(bundle);
  assert.ok(preload, 'the bundle has a preloadModules function');
  for (const m of SHARED_WORKFLOW_MODULES) assert.ok(preload[1]!.includes(`"./src/${m}.ts"`), `${m} is preloaded`);
});
