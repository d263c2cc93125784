// `npm pack` and `npm publish` (the prepack script): what the package ships under dist/, built afresh.
//
//   1. dist/src and dist/cli removed, so that nothing compiled from a source since deleted is packed;
//   2. the JavaScript: scripts/transpile.mjs --kube (esbuild, every file of src/ and cli/, CommonJS, the code
//      bin/svm.js runs after `npm ci`; and dist/kube-client-node-<version>.js when it is missing);
//   3. the declarations of what the package exports (`.`: src/client/index.ts, `./contract`:
//      src/contract/index.ts) and of every module their types reach: tsc -p tsconfig.pack.json (a type check
//      of those files too).
//
// npm then runs the prepare script (the same transpile, a second or so) and packs package.json's "files".
// Fails, so that nothing is packed, when a step fails or an entry point's .js or .d.ts is missing.
/* global process, console */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const run = (file, args) => execFileSync(process.execPath, [file, ...args], { cwd: root, stdio: 'inherit' });

for (const d of ['src', 'cli']) rmSync(path.join(root, 'dist', d), { recursive: true, force: true });
run(path.join(root, 'scripts', 'transpile.mjs'), ['--kube']);
run(require.resolve('typescript/bin/tsc'), ['-p', path.join(root, 'tsconfig.pack.json')]);

const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const entries = Object.values(pkg.exports).flatMap((e) => (typeof e === 'string' ? [] : [e.types, e.default]));
const missing = [...entries, pkg.bin.svm, 'dist/cli/svm.js'].filter((f) => !f.includes('*') && !existsSync(path.join(root, f)));
if (missing.length > 0) {
  console.error(`prepack: missing after the build: ${missing.join(', ')}`);
  process.exit(1);
}
console.log(`prepack: ${entries.length / 2} entry points compiled with their declarations`);
