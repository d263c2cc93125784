// `npm run build:fast` (and `npm ci`, as the prepare script): the compiled code bin/svm.js runs. Every
// TypeScript file of src/ and cli/ transpiled on its own by esbuild (no type check, no bundle) into the layout
// tsc's outDir gives (dist/cli/svm.js, dist/src/...), CommonJS, in a second or so; the JSON files they import
// copied beside them as tsc does. `npm run build` (tsc: type check and declarations) writes the same files.
//
// dist/cli/svm.js gets the time the transpile started as its mtime: bin/svm.js runs the sources through tsx
// instead when a source file is newer, so an edit never runs stale code.
//
//   --sourcemap   write .js.map files too (node --enable-source-maps uses them)
//   --out DIR     write DIR/dist/... instead of dist/ here (a tree of compiled code: src/dev/cli-start.ts)
//   --kube        also build dist/kube-client-node-<version>.js when it is missing (`npm run build:kube`)
//
// Then dist/cli/svm-client.js and its code cache (scripts/bundle-cli.mjs): what bin/svm.js runs for a client
// command's action.
//
// Never fails an install it cannot help: without src/ (the image's `npm ci`, before the sources are copied)
// or without esbuild (`npm ci --omit=dev`) it says so and exits 0; bin/svm.js then runs the sources through tsx.
/* global process, console, performance */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const say = (s) => console.log(`transpile: ${s}`);

/** Every .ts file under dir (declarations aside). */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

async function main() {
  const dirs = ['src', 'cli'].map((d) => path.join(root, d));
  if (!dirs.every((d) => existsSync(d))) {
    say('no src/ and cli/ here yet: nothing to transpile');
    return;
  }
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    say('esbuild is not installed (devDependencies omitted?): dist/ not built; bin/svm.js runs the sources through tsx');
    return;
  }
  const started = new Date();
  const t0 = performance.now();
  const files = dirs.flatMap(sources);
  const tree = args.includes('--out') ? path.resolve(args[args.indexOf('--out') + 1] ?? '') : root;
  const dist = path.join(tree, 'dist');
  const result = await esbuild.build({
    entryPoints: files,
    outdir: dist,
    outbase: root,
    bundle: false,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    sourcemap: args.includes('--sourcemap') ? 'linked' : false,
    tsconfig: path.join(root, 'tsconfig.json'),
    logLevel: 'warning',
  });
  if (result.errors.length > 0) throw new Error(`esbuild: ${result.errors.length} error(s)`);
  // JSON the sources import (`import versions from '../../tools/versions.json'`), at the place tsc puts it.
  const json = new Set();
  for (const f of files)
    for (const m of readFileSync(f, 'utf8').matchAll(/from\s+'(\.{1,2}\/[^']+\.json)'/g)) json.add(path.resolve(path.dirname(f), m[1]));
  for (const j of json) {
    const out = path.join(dist, path.relative(root, j));
    mkdirSync(path.dirname(out), { recursive: true });
    copyFileSync(j, out);
  }
  const entry = path.join(dist, 'cli', 'svm.js');
  utimesSync(entry, started, started);
  say(`${files.length} files into dist/ in ${((performance.now() - t0) / 1000).toFixed(1)}s`);

  if (args.includes('--kube')) await kubeBundle(dist);
  // The client commands' bundle and its code cache (scripts/bundle-cli.mjs), after the KubeConfig bundle it loads.
  try {
    const { bundleCli } = await import('./bundle-cli.mjs');
    const t1 = performance.now();
    await bundleCli({ esbuild, tree, at: started });
    say(`dist/cli/svm-client.js and its code cache in ${((performance.now() - t1) / 1000).toFixed(1)}s`);
  } catch (err) {
    // bin/svm.js runs dist/cli/svm.js without it: slower to start, not wrong.
    say(`dist/cli/svm-client.js was not built (${err instanceof Error ? err.message : String(err)})`);
  }
}

async function kubeBundle(dist) {
  const require = createRequire(import.meta.url);
  const version = require('@kubernetes/client-node/package.json').version;
  const bundle = path.join(dist, `kube-client-node-${version}.js`);
  if (existsSync(bundle)) return;
  try {
    const { buildKubeConfigBundle } = require(path.join(dist, 'src', 'kube', 'kubeconfig-bundle.js'));
    say(`${path.relative(root, await buildKubeConfigBundle(bundle))} built`);
  } catch (err) {
    // src/kube/kubeconfig.ts loads the package itself without it: slower, not wrong.
    say(`the bundle of @kubernetes/client-node was not built (${err instanceof Error ? err.message : String(err)})`);
  }
}

main().catch((err) => {
  console.error(`transpile: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
