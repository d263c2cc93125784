/**
 * The two packages as their users install them: `npm pack` of a copy of this checkout (what git sees: tracked
 * and new files, nothing ignored; the prepack script compiles dist/ with the declarations) makes the CLI package,
 * and `npm run pack:client` there (packages/client/pack.mjs) the client package, the typed client and the contract
 * alone. Each tarball is installed into an empty project of its own. In the upgrade tool's, the client package
 * installs without a native module or an install script and in under 60 MiB, and the README's upgrade-tooling
 * program, compiled by tsc in strict mode against the installed declarations, migrates a resource on the shared
 * plane through it. etcd judges the migration. In the other, the CLI package's `svm version` runs.
 *
 * An install holds the tarball and its declared dependencies only: `npm ci --offline` of a lockfile made
 * from this project's package-lock.json (the tarball's dependencies and theirs, at the versions the project
 * is tested with), so every package comes from the npm cache that `npm ci` filled; when one is not cached,
 * `npm ci --prefer-offline` fetches it from the registry `npm ci` uses. No NODE_PATH, no link into this
 * checkout's node_modules: a module a package needs and does not declare is missing there. (The
 * TypeScript compiler and @types/node the programs are compiled with are this checkout's: the tooling of
 * whoever writes the program, not the package's.)
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { builtinModules } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { etcdPrefix } from '../src/dev/etcd-truth';
import { beforeMigration, judgeMigration, verdictProblems } from '../src/dev/migration-judge';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';

const execFileP = promisify(execFile);
const run = (file: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv; timeout?: number }) =>
  execFileP(file, args, { maxBuffer: 64 * 1024 * 1024, timeout: 600_000, ...opts });
const root = path.join(__dirname, '..');
const NAME = 'temporal-storage-version-migrator';
const CLIENT_NAME = 'temporal-storage-version-migrator-client';
/** The client package's limit on its install (node_modules as `du` counts it). */
const CLIENT_INSTALL_LIMIT_MIB = 60;

interface PackageJson {
  name: string;
  version: string;
  license?: string;
  engines?: Record<string, string>;
  bin?: Record<string, string>;
  exports?: Record<string, string | { types: string; default: string }>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts?: Record<string, string>;
  private?: boolean;
}
interface LockEntry {
  dev?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const readJson = <T>(file: string) => JSON.parse(fs.readFileSync(file, 'utf8')) as T;

/**
 * The environment of npm and of the program: this one without what would reach into this checkout or this
 * process (NODE_OPTIONS, NODE_PATH, the test runner's context, npm's variables of the `npm test` it runs in,
 * a Temporal or Kubernetes connection from the caller's shell), keeping npm's cache and registry.
 */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const drop = (k: string) =>
    /^(NODE_OPTIONS|NODE_PATH|NODE_TEST_CONTEXT|INIT_CWD|KUBECONFIG)$/.test(k) ||
    /^TEMPORAL_/.test(k) ||
    (/^npm_/i.test(k) && !/^npm_config_(cache|registry|userconfig)$/i.test(k));
  return { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !drop(k))), ...extra };
}

/**
 * A scratch project's lockfile: the tarball, and every package its declared dependencies reach in this
 * project's package-lock.json, at the same place (either package's dependencies are among this project's, so
 * its lockfile's layout fits). A dependency the lockfile does not have, or has only as a dev dependency,
 * fails here.
 */
function consumerLock(project: string, pkg: PackageJson, tarball: string): object {
  const lock = readJson<{ packages: Record<string, LockEntry> }>(path.join(root, 'package-lock.json'));
  const spec = `file:${path.basename(tarball)}`;
  const self = `node_modules/${pkg.name}`;
  const packages: Record<string, unknown> = {
    '': { name: project, version: '1.0.0', dependencies: { [pkg.name]: spec } },
    [self]: {
      version: pkg.version,
      resolved: spec,
      integrity: `sha512-${createHash('sha512').update(fs.readFileSync(tarball)).digest('base64')}`,
      license: pkg.license,
      dependencies: pkg.dependencies,
      bin: pkg.bin,
      engines: pkg.engines,
    },
  };
  /** Where node finds `name` from a package at `from`: its own node_modules, then each one above. */
  const locate = (from: string, name: string): string | undefined => {
    for (let at = from; ;) {
      const p = `${at ? `${at}/` : ''}node_modules/${name}`;
      if (lock.packages[p]) return p;
      if (!at) return undefined;
      const i = at.lastIndexOf('/node_modules/');
      at = i < 0 ? '' : at.slice(0, i);
    }
  };
  const todo: Array<{ from: string; deps: Record<string, string>; optional: Set<string> }> = [
    { from: '', deps: pkg.dependencies ?? {}, optional: new Set() },
  ];
  for (let t = todo.pop(); t; t = todo.pop()) {
    for (const name of Object.keys(t.deps)) {
      const at = locate(t.from, name);
      if (!at) {
        if (t.optional.has(name)) continue;
        throw new Error(`${name}, needed by ${t.from || pkg.name}, is not in package-lock.json`);
      }
      if (packages[at]) continue;
      const e = lock.packages[at]!;
      if (e.dev) throw new Error(`${at}, needed by ${t.from || pkg.name}, is a dev dependency in package-lock.json`);
      packages[at] = e;
      const optionalPeers = Object.entries(e.peerDependenciesMeta ?? {}).filter(([, m]) => m.optional);
      todo.push({
        from: at,
        deps: { ...e.dependencies, ...e.optionalDependencies, ...e.peerDependencies },
        optional: new Set([...Object.keys(e.optionalDependencies ?? {}), ...optionalPeers.map(([n]) => n)]),
      });
    }
  }
  return { name: project, version: '1.0.0', lockfileVersion: 3, requires: true, packages };
}

/** The README's upgrade-tooling program: the ```ts block that opens with `// upgrade.ts`. */
function readmeProgram(): string {
  const m = /^```ts\n(\/\/ upgrade\.ts[\s\S]*?)^```$/m.exec(fs.readFileSync(path.join(root, 'README.md'), 'utf8'));
  assert.ok(m, 'README.md has the ```ts block of upgrade.ts');
  return m[1]!;
}

/** A second program: the `./contract` entry of package `name` and a JSON Schema, as a TypeScript tool reads them. */
const contractProgram = (name: string) => `import { createRequire } from 'node:module';
import { CONTRACT_VERSION, progressQuery, startOptions, type MigrationProgress } from '${name}/contract';
const require = createRequire(import.meta.url);
const schema = require('${name}/contract/v1/start-input.schema.json') as { 'x-contract-version': string };
const ref = { group: 'example.com', resource: 'gizmos', version: 'v1', kind: 'Gizmo', namespaced: true, storageVersionHash: '', custom: true };
const phase: MigrationProgress['phase'] = 'Succeeded';
console.log(JSON.stringify({ contract: CONTRACT_VERSION, schema: schema['x-contract-version'], query: progressQuery.name, workflowId: startOptions(ref, 'q').workflowId, phase }));
`;

/** Every file under dir (symbolic links as themselves). */
function filesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

/**
 * The packages that the JavaScript under dirs of an installed package requires, each with the first file that
 * does: node's own modules aside, and a module required in a try block (node-fetch's optional `encoding`, in
 * the client package's KubeConfig bundle), which the code does without.
 */
function requiredPackages(installed: string, dirs: string[]): Map<string, string> {
  const builtins = new Set(builtinModules);
  const required = new Map<string, string>();
  for (const f of dirs.flatMap((d) => filesUnder(path.join(installed, d))).filter((f) => f.endsWith('.js'))) {
    const text = fs.readFileSync(f, 'utf8');
    for (const m of text.matchAll(/\b(?:require|import)\(\s*["']([^"'./][^"']*)["']\s*\)/g)) {
      const spec = m[1]!;
      if (spec.startsWith('node:') || builtins.has(spec.split('/')[0]!)) continue;
      if (/\btry\s*\{\s*(?:[\w$.]+\s*=\s*)?$/.test(text.slice(Math.max(0, m.index - 40), m.index))) continue;
      const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
      if (!required.has(name)) required.set(name, path.relative(installed, f));
    }
  }
  return required;
}

/** A tarball and the paths in it, without its package/ prefix. */
interface Packed {
  file: string;
  paths: string[];
  manifest: PackageJson;
}

async function readPacked(file: string): Promise<Packed> {
  const { stdout: entries } = await run('tar', ['-tzf', file], { cwd: work });
  const { stdout: manifest } = await run('tar', ['-xzOf', file, 'package/package.json'], { cwd: work });
  const paths = entries
    .split('\n')
    .filter(Boolean)
    .map((p) => p.replace(/^package\//, ''));
  return { file, paths, manifest: JSON.parse(manifest) as PackageJson };
}

/**
 * The checkout as git sees it (the working tree, uncommitted changes included) in dir, with this checkout's
 * node_modules: what a fresh clone is after `npm ci`, and this checkout's dist/ untouched by the packing.
 */
async function copyCheckout(dir: string): Promise<string> {
  const { stdout: listed } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root });
  for (const f of listed.split('\0').filter(Boolean)) {
    if (!fs.existsSync(path.join(root, f))) continue; // deleted, not yet committed
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(path.join(root, f), path.join(dir, f));
  }
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

/**
 * A project of its own in work/ with the tarball installed (`npm ci` of consumerLock) and programs (file name:
 * TypeScript) compiled into out/ by tsc in strict mode against the installed declarations.
 */
async function installAndCompile(name: string, pkg: Packed, programs: Record<string, string>): Promise<string> {
  const dir = path.join(work, name);
  fs.mkdirSync(dir);
  const tarball = path.join(dir, path.basename(pkg.file));
  fs.copyFileSync(pkg.file, tarball);
  const dependencies = { [pkg.manifest.name]: `file:${path.basename(tarball)}` };
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name, version: '1.0.0', private: true, type: 'module', dependencies }, null, 2),
  );
  fs.writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(consumerLock(name, pkg.manifest, tarball), null, 2));
  const t0 = Date.now();
  const ci = (cache: string) => run('npm', ['ci', cache, '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, env: cleanEnv() });
  await ci('--offline').catch(async (err: { stderr?: string }) => {
    if (!/ENOTCACHED/.test(err.stderr ?? '')) throw err;
    process.stderr.write('  a dependency is not in the npm cache: npm ci --prefer-offline\n');
    await ci('--prefer-offline');
  });
  const t1 = Date.now();
  for (const [file, text] of Object.entries(programs)) fs.writeFileSync(path.join(dir, file), text);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        outDir: 'out',
        types: ['node'],
        typeRoots: [path.join(root, 'node_modules', '@types')],
        // Some dependencies' own declarations want packages they do not declare (@types/ms, source-map, ws; the
        // client package's, the worker's and the Temporal client's): not these packages' to check.
        skipLibCheck: true,
      },
      files: Object.keys(programs),
    }),
  );
  await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', dir], { cwd: dir, env: cleanEnv() });
  process.stderr.write(`  ${name}: npm ci ${((t1 - t0) / 1000).toFixed(1)}s, tsc ${((Date.now() - t1) / 1000).toFixed(1)}s\n`);
  return dir;
}

/** What an install holds: its packages, those with an install script, its native modules, and its size as `du` counts it. */
function installFigures(project: string): { packages: string[]; installScripts: string[]; nativeModules: string[]; mib: number } {
  const modules = path.join(project, 'node_modules');
  const packages = Object.keys(readJson<{ packages: Record<string, unknown> }>(path.join(modules, '.package-lock.json')).packages);
  const installScripts = packages.filter((p) => {
    const scripts = readJson<PackageJson>(path.join(project, p, 'package.json')).scripts ?? {};
    return ['preinstall', 'install', 'postinstall'].some((s) => s in scripts) || fs.existsSync(path.join(project, p, 'binding.gyp'));
  });
  const files = filesUnder(modules);
  const bytes = files.reduce((sum, f) => sum + fs.lstatSync(f).blocks * 512, 0);
  return { packages, installScripts, nativeModules: files.filter((f) => f.endsWith('.node')), mib: bytes / 2 ** 20 };
}

let plane: TestPlane;
let work: string;
/** The CLI package (`npm pack`) and the client package (`npm run pack:client`). */
let cliPackage: Packed;
let clientPackage: Packed;
/** The upgrade tool's project: the client package installed, the README's program and the contract's compiled into out/. */
let tool: string;
/** A project with the CLI package installed, and the contract's program compiled into out/. */
let cliUser: string;

before(async () => {
  plane = await testPlane();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pack-'));
  const copy = await copyCheckout(path.join(work, 'checkout'));
  const { version } = readJson<PackageJson>(path.join(copy, 'package.json'));
  const t0 = Date.now();
  await run('npm', ['pack', '--pack-destination', work, '--loglevel=error'], { cwd: copy, env: cleanEnv() });
  const t1 = Date.now();
  await run('npm', ['run', '--silent', 'pack:client', '--', '--pack-destination', work], { cwd: copy, env: cleanEnv() });
  const t2 = Date.now();
  cliPackage = await readPacked(path.join(work, `${NAME}-${version}.tgz`));
  clientPackage = await readPacked(path.join(work, `${CLIENT_NAME}-${version}.tgz`));
  const size = (p: Packed) => `${p.paths.length} files, ${(fs.statSync(p.file).size / 1024).toFixed(0)} KiB`;
  process.stderr.write(
    `  npm pack ${((t1 - t0) / 1000).toFixed(1)}s (${size(cliPackage)}), npm run pack:client ${((t2 - t1) / 1000).toFixed(1)}s (${size(clientPackage)})\n`,
  );
  tool = await installAndCompile('upgrade-tool', clientPackage, {
    'upgrade.ts': readmeProgram(),
    'contract.ts': contractProgram(CLIENT_NAME),
  });
  cliUser = await installAndCompile('cli-user', cliPackage, { 'contract.ts': contractProgram(NAME) });
});

after(async () => {
  await plane?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** The files of a tarball that no package ships: sources, tests, benchmarks, source maps. */
const strays = (paths: string[]) =>
  paths.filter(
    (f) =>
      /^(src|cli|test|bench|scripts|examples|deploy|charts|docs|tools|packages)\//.test(f) ||
      /^dist\/(test|bench|scripts)\//.test(f) ||
      f.endsWith('.map') ||
      (f.endsWith('.ts') && !f.endsWith('.d.ts')),
  );

/** The files of a package's exports (its entry points' code and declarations) and of contract/v1. */
function exportedFiles(pkg: PackageJson): string[] {
  return [
    ...Object.values(pkg.exports!).flatMap((e) => (typeof e === 'string' ? [] : [e.types, e.default].map((f) => f.replace(/^\.\//, '')))),
    ...fs.readdirSync(path.join(root, 'contract', 'v1')).map((f) => `contract/v1/${f}`),
  ];
}

/** The contract's program run in a project: what it prints, parsed. */
async function runContractProgram(project: string): Promise<unknown> {
  const { stdout } = await run(process.execPath, [path.join(project, 'out', 'contract.js')], { cwd: project, env: cleanEnv() });
  return JSON.parse(stdout);
}
const CONTRACT_PRINTED = { contract: '1', schema: '1', query: 'progress', workflowId: 'migrate/gizmos.example.com', phase: 'Succeeded' };

void test("the CLI package's tarball: the compiled client and contract with their declarations, the JSON Schemas, the svm command; no sources, tests or benchmarks", () => {
  const wanted = [
    'package.json',
    'README.md',
    'bin/svm.js',
    'dist/cli/svm.js',
    ...exportedFiles(readJson<PackageJson>(path.join(root, 'package.json'))),
  ];
  assert.deepEqual(
    wanted.filter((f) => !cliPackage.paths.includes(f)),
    [],
  );
  assert.deepEqual(strays(cliPackage.paths), []);
});

void test("the client package's tarball: its two bundles with the declarations and the JSON Schemas; no svm command, no compiled modules of dist/src, no sources", () => {
  const pkg = clientPackage.manifest;
  assert.equal(pkg.name, CLIENT_NAME);
  assert.equal(pkg.version, readJson<PackageJson>(path.join(root, 'package.json')).version);
  assert.deepEqual(
    (['bin', 'scripts', 'private'] as const).filter((k) => pkg[k] !== undefined),
    [],
  );
  assert.deepEqual(
    ['package.json', 'README.md', ...exportedFiles(pkg)].filter((f) => !clientPackage.paths.includes(f)),
    [],
  );
  const code = clientPackage.paths.filter((f) => f.endsWith('.js'));
  assert.deepEqual(code.sort(), ['dist/client.js', 'dist/contract.js']);
  assert.deepEqual(strays(clientPackage.paths), []);
});

void test('installed, the CLI package needs nothing but its declared dependencies: every module its code requires is one, and `svm version` runs', async () => {
  const installed = path.join(cliUser, 'node_modules', NAME);
  const pkg = readJson<PackageJson>(path.join(installed, 'package.json'));
  const declared = new Set(Object.keys(pkg.dependencies ?? {}));
  const required = requiredPackages(installed, ['dist/src', 'dist/cli', 'bin']);
  assert.ok(required.has('@temporalio/client') && required.has('zod'), `the scan found the requires: ${[...required.keys()].join(', ')}`);
  assert.deepEqual(
    [...required].filter(([name]) => !declared.has(name)).map(([name, file]) => `${name} (${file})`),
    [],
  );
  // The install holds no tooling of this checkout's: what ran there ran on the declared dependencies alone.
  const dev = Object.keys(readJson<PackageJson>(path.join(root, 'package.json')).devDependencies ?? {});
  // tsx (and with it esbuild's native binary) included: the installed svm runs its compiled code, never the sources.
  for (const d of ['typescript', '@temporalio/testing', 'eslint', 'playwright-core', 'tsx', 'esbuild']) {
    assert.ok(dev.includes(d), `${d} is a dev dependency here`);
    assert.equal(fs.existsSync(path.join(cliUser, 'node_modules', d)), false, `${d} is not installed in the project`);
  }

  const { stdout } = await run(path.join(cliUser, 'node_modules', '.bin', 'svm'), ['version', '-o', 'json'], {
    cwd: cliUser,
    env: cleanEnv(),
  });
  const v = JSON.parse(stdout) as { svm: string; revision: string; contract: string };
  assert.deepEqual({ svm: v.svm, revision: v.revision, contract: v.contract }, { svm: pkg.version, revision: 'unknown', contract: '1' });
  // `svm --help` and a client command, as npx runs them: the compiled code; a client command from the client bundle
  // (npm writes the package's files in no set order, so their times must not decide).
  const help = await run(path.join(cliUser, 'node_modules', '.bin', 'svm'), ['--help'], {
    cwd: cliUser,
    env: cleanEnv({ SVM_START_REPORT: '1' }),
  });
  assert.match(help.stdout, /^Usage: svm /);
  assert.equal(help.stderr, 'svm start: dist/cli/svm.js\n');
  const status = await run(path.join(cliUser, 'node_modules', '.bin', 'svm'), ['status', '-o', 'xml'], {
    cwd: cliUser,
    env: cleanEnv({ SVM_START_REPORT: '1' }),
  }).catch((err: { stderr: string }) => err);
  assert.match(status.stderr, /^svm start: dist\/cli\/svm-client\.js, code cache (used|not used)\n/);
  assert.deepEqual(await runContractProgram(cliUser), CONTRACT_PRINTED);
});

void test(`installed alone, the client package brings no native module, no install script, under ${CLIENT_INSTALL_LIMIT_MIB} MiB, and needs nothing but its declared dependencies`, async () => {
  const installed = path.join(tool, 'node_modules', CLIENT_NAME);
  const declared = new Set(Object.keys(clientPackage.manifest.dependencies ?? {}));
  const required = requiredPackages(installed, ['dist']);
  assert.ok(required.has('@temporalio/common') && required.has('zod'), `the scan found the requires: ${[...required.keys()].join(', ')}`);
  assert.deepEqual(
    [...required].filter(([name]) => !declared.has(name)).map(([name, file]) => `${name} (${file})`),
    [],
  );
  const figures = installFigures(tool);
  process.stderr.write(`  the client package's install: ${figures.packages.length} packages, ${figures.mib.toFixed(1)} MiB\n`);
  assert.deepEqual(figures.nativeModules, []);
  assert.deepEqual(figures.installScripts, []);
  assert.ok(figures.mib < CLIENT_INSTALL_LIMIT_MIB, `node_modules: ${figures.mib.toFixed(1)} MiB`);
  // Not installed: the worker's packages, and those the bundles hold.
  for (const name of [
    '@temporalio/worker',
    '@temporalio/core-bridge',
    'tsx',
    'pino',
    '@temporalio/client',
    '@grpc/grpc-js',
    '@kubernetes/client-node',
  ])
    assert.equal(fs.existsSync(path.join(tool, 'node_modules', name)), false, `${name} is not installed`);
  assert.deepEqual(await runContractProgram(tool), CONTRACT_PRINTED);
});

void test("the README's program, compiled in strict mode against the installed client package, migrates a resource on the plane; etcd holds every object re-encoded, unchanged", async () => {
  const crd = testCrd(`${uniq('pk')}.svm.test`);
  const count = 60;
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', count, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const before = await beforeMigration(plane.etcd, etcdPrefix({ group: crd.group, resource: crd.plural, custom: true }));
  const stdout = await withWorker(plane, async (_m, taskQueue) => {
    const env = cleanEnv({
      ...Object.fromEntries(Object.entries(plane.env).filter(([k]) => /^TEMPORAL_(ADDRESS|NAMESPACE|TLS)/.test(k))),
      TEMPORAL_TASK_QUEUE: taskQueue,
      KUBECONFIG: plane.env.KUBECONFIG!,
    });
    return (await run(process.execPath, [path.join(tool, 'out', 'upgrade.js'), crd.name], { cwd: tool, env, timeout: 300_000 })).stdout;
  });
  console.log(stdout.trim().split('\n').slice(-2).join('\n'));
  assert.match(stdout, new RegExp(`^${crd.name.replace(/\./g, '\\.')}: Succeeded, ${count} migrated$`, 'm'));
  const target = `${crd.group}/v2`;
  const v = await judgeMigration({
    etcd: plane.etcd,
    client: plane.temporal.client,
    workflowId: `migrate/${crd.name}`,
    before,
    targetApiVersion: target,
  });
  assert.deepEqual(verdictProblems(v, count, target), []);
});
