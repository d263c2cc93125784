// `npm run pack:client`: the package of the typed client and the contract alone, for upgrade tooling that starts
// and follows migrations and runs no worker (docs/upgrade-tooling.md, "Two packages"):
//   node packages/client/pack.mjs [--pack-destination DIR]
// writes temporal-storage-version-migrator-client-<version>.tgz into DIR (default: the current directory).
//
//   1. scripts/prepack.mjs: dist/ built afresh with the declarations of the two entry points, as `npm pack` of the
//      CLI package builds it;
//   2. dist/client.js and dist/contract.js: src/client/index.ts and src/contract/index.ts, each bundled by esbuild
//      with what this package does not install: @temporalio/client with @grpc/grpc-js (whose @grpc/proto-loader
//      brings protobufjs 7 and its postinstall script), and @kubernetes/client-node as the KubeConfig bundle
//      dist/kube-client-node-<version>.js (src/kube/kubeconfig-bundle.ts; the package itself is ~68 MiB, most of
//      it the generated API the bundle leaves out). Every other module they import is a dependency in
//      packages/client/package.json: installed once, and shared with a Temporal SDK the tool installs itself;
//   3. staged in dist/client-package/ (that manifest without its `private`, which keeps `npm publish packages/client`
//      from publishing a package without code; the bundles; the declarations of dist/src; contract/v1) and packed
//      there by npm.
//
// Fails, so that nothing is packed, when packages/client/package.json does not fit what is bundled (manifestProblems).
/* global process, console */
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(path.dirname(here));
const require = createRequire(path.join(root, 'package.json'));
const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** The package.json of an installed dependency of this project. */
const installed = (name) => readJson(require.resolve(`${name}/package.json`));

/** The bundled Temporal client's dependencies that stay in it: the gRPC stack and its protobufjs 7. */
const BUNDLED_WITH_TEMPORAL_CLIENT = ['@grpc/grpc-js'];

/**
 * What is wrong with the client package's manifest, given this project's and the installed @temporalio/client's:
 * its version is not the project's; a Temporal package is not at the bundled client's version (the SDK's packages
 * are released together, and the client pins common and proto exactly); another dependency's range is neither the
 * project's nor the one @temporalio/client asks for; or a dependency of @temporalio/client's is not one (the bundle
 * would hold a second copy of it).
 */
function manifestProblems(manifest, project, temporalClient) {
  const problems = manifest.version === project.version ? [] : [`version ${manifest.version}, the project's is ${project.version}`];
  for (const [name, range] of Object.entries(manifest.dependencies)) {
    const wanted = name.startsWith('@temporalio/')
      ? temporalClient.version
      : (project.dependencies[name] ?? temporalClient.dependencies[name]);
    if (range !== wanted) problems.push(`${name} ${range}, not ${wanted ?? 'a dependency of the project or of @temporalio/client'}`);
  }
  for (const name of Object.keys(temporalClient.dependencies))
    if (!BUNDLED_WITH_TEMPORAL_CLIENT.includes(name) && !(name in manifest.dependencies))
      problems.push(`no ${name}, a dependency of @temporalio/client`);
  return problems;
}

/**
 * Modules that a bundled package requires in a try block, and does without: node-fetch's `encoding` (Watch's
 * fetch, in the KubeConfig bundle).
 */
const OPTIONAL_REQUIRES = ['encoding'];

/** Whether an import the bundle leaves to node is a builtin or one of the package's dependencies (or a file in one). */
function providedAtRunTime(spec, dependencies) {
  if (spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0]) || OPTIONAL_REQUIRES.includes(spec)) return true;
  const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
  return dependencies.includes(name);
}

/** Bundles entry (a source file) into out with everything but the dependencies; returns the packages it holds. */
async function bundle(esbuild, entry, out, dependencies, kubeBundle) {
  const result = await esbuild.build({
    entryPoints: [path.join(root, entry)],
    outfile: out,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    tsconfig: path.join(root, 'tsconfig.json'),
    external: dependencies,
    metafile: true,
    logLevel: 'warning',
    plugins: [
      {
        name: 'kubeconfig-bundle',
        setup(build) {
          // src/kube/kubeconfig.ts's require of the package: the KubeConfig bundle, as the worker loads it.
          build.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: kubeBundle }));
        },
      },
    ],
  });
  if (result.warnings.length > 0) throw new Error(`esbuild warned: ${result.warnings.map((w) => w.text).join('; ')}`);
  const left = Object.values(result.metafile.outputs).flatMap((o) => o.imports.filter((i) => i.external).map((i) => i.path));
  const missing = [...new Set(left)].filter((spec) => !providedAtRunTime(spec, dependencies));
  if (missing.length > 0) throw new Error(`${entry}: the bundle requires ${missing.join(', ')}, which the package does not install`);
  const packages = Object.keys(result.metafile.inputs).flatMap((f) => /.*node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1] ?? []);
  return new Set(packages);
}

/** dist/ here, built as for `npm pack` (scripts/prepack.mjs), and the KubeConfig bundle of the installed version. */
function buildDist() {
  execFileSync(process.execPath, [path.join(root, 'scripts', 'prepack.mjs')], { cwd: root, stdio: 'inherit' });
  const kubeBundle = path.join(root, 'dist', `kube-client-node-${installed('@kubernetes/client-node').version}.js`);
  if (!existsSync(kubeBundle))
    throw new Error(`no ${path.relative(root, kubeBundle)}: scripts/transpile.mjs did not build the KubeConfig bundle`);
  return kubeBundle;
}

/** Every .d.ts file under dir, as paths relative to it. */
function declarations(dir, under = '') {
  return readdirSync(path.join(dir, under), { withFileTypes: true }).flatMap((e) => {
    const p = path.join(under, e.name);
    if (e.isDirectory()) return declarations(dir, p);
    return e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** dist/client-package/: the manifest, the README, the two bundles, the declarations and the JSON Schemas. */
async function stage(manifest, kubeBundle) {
  const out = path.join(root, 'dist', 'client-package');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(path.join(out, 'dist'), { recursive: true });
  const published = { ...manifest };
  delete published.private;
  writeFileSync(path.join(out, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
  copyFileSync(path.join(here, 'README.md'), path.join(out, 'README.md'));
  const esbuild = await import(require.resolve('esbuild'));
  const dependencies = Object.keys(manifest.dependencies);
  const bundled = new Set();
  for (const [entry, file] of [
    ['src/client/index.ts', 'client.js'],
    ['src/contract/index.ts', 'contract.js'],
  ])
    for (const p of await bundle(esbuild, entry, path.join(out, 'dist', file), dependencies, kubeBundle)) bundled.add(p);
  const dts = path.join(root, 'dist', 'src');
  for (const f of declarations(dts)) cpSync(path.join(dts, f), path.join(out, 'dist', 'src', f));
  cpSync(path.join(root, 'contract', 'v1'), path.join(out, 'contract', 'v1'), { recursive: true });
  console.log(`pack-client: bundled ${[...bundled].sort().join(', ')}`);
  return out;
}

async function main() {
  const args = process.argv.slice(2);
  const destination = path.resolve(args.includes('--pack-destination') ? (args[args.indexOf('--pack-destination') + 1] ?? '') : '.');
  const manifest = readJson(path.join(here, 'package.json'));
  const problems = manifestProblems(manifest, readJson(path.join(root, 'package.json')), installed('@temporalio/client'));
  if (problems.length > 0) throw new Error(`packages/client/package.json: ${problems.join('; ')}`);
  const kubeBundle = buildDist();
  const staged = await stage(manifest, kubeBundle);
  execFileSync('npm', ['pack', staged, '--pack-destination', destination, '--loglevel=error'], { stdio: 'inherit' });
}

main().catch((err) => {
  console.error(`pack-client: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
