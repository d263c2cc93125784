/**
 * The patch ledger (docs/development.md, "The patch ledger"): every patch the workflow code asks
 * (`patched(...)` or `deprecatePatch(...)` in src/workflows) has its row there, and the ledger lists no patch
 * the code no longer asks. At the 0.2.0 boundary every patch was folded, so the table is empty; a future patch
 * comes with its row (what its new path does, the release it goes in). No servers.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.join(__dirname, '..');

/** Every .ts file under a folder. */
function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/** The patch IDs a source asks: a string literal, or a constant of the same file holding one. */
export function patchesAsked(src: string, file = 'source'): string[] {
  const code = src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
  const constants = new Map([...code.matchAll(/const (\w+) = '([^']+)';/g)].map((m) => [m[1], m[2]]));
  const ids: string[] = [];
  for (const m of code.matchAll(/\b(?:patched|deprecatePatch)\(\s*([^)]*)\)/g)) {
    const arg = m[1]!.trim();
    const id = /^'([^']+)'$/.exec(arg)?.[1] ?? constants.get(arg);
    assert.ok(id, `${file}: ${m[0]} names a patch this test cannot read (use a string literal or a constant of the file)`);
    ids.push(id);
  }
  return ids;
}

/** The patch IDs of the ledger's table (rows that begin with an ID in backquotes). */
export function ledgerIds(development: string): string[] {
  const section = development.split('\n### The patch ledger')[1]?.split('\n### ')[0];
  assert.ok(section !== undefined, 'docs/development.md has no section "### The patch ledger"');
  return [...section.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
}

void test('the reader of patches finds a literal, a constant and deprecatePatch, and not one in a comment', () => {
  const src = [
    "const X = 'by-a-constant';",
    "if (patched('by-a-literal')) go();",
    'if (patched(X)) go();',
    "deprecatePatch('being-removed');",
    "// patched('in-a-comment')",
    "/* deprecatePatch('in-a-block') */",
  ].join('\n');
  assert.deepEqual(patchesAsked(src), ['by-a-literal', 'by-a-constant', 'being-removed']);
  assert.throws(() => patchesAsked('patched(someCall())'), /cannot read/);
});

void test("docs/development.md's patch ledger lists every patch src/workflows asks, and no other", () => {
  const asked = new Set<string>();
  for (const f of sources(path.join(root, 'src', 'workflows')))
    for (const id of patchesAsked(fs.readFileSync(f, 'utf8'), path.relative(root, f))) asked.add(id);
  const listed = ledgerIds(fs.readFileSync(path.join(root, 'docs', 'development.md'), 'utf8'));
  assert.deepEqual(
    [...asked].filter((id) => !listed.includes(id)),
    [],
    'patches asked with no row in the ledger',
  );
  assert.deepEqual(
    listed.filter((id) => !asked.has(id)),
    [],
    'ledger rows of patches no workflow asks any more (a folded patch moves to the list of those folded)',
  );
});
