/**
 * The package as upgrade tooling installs it: `npm pack` of a copy of this checkout (what git sees: tracked
 * and new files, nothing ignored; the prepack script compiles dist/ with the declarations), the tarball
 * installed into an empty project, and there the README's upgrade-tooling program, compiled by tsc in
 * strict mode against the installed declarations, migrates a resource on the shared plane through the
 * package's client. etcd judges the migration.
 *
 * The install holds the tarball and its declared dependencies only: `npm ci --offline` of a lockfile made
 * from this project's package-lock.json (the tarball's dependencies and theirs, at the versions the project
 * is tested with), so every package comes from the npm cache that `npm ci` filled; when one is not cached,
 * `npm ci --prefer-offline` fetches it from the registry `npm ci` uses. No NODE_PATH, no link into this
 * checkout's node_modules: a module the package needs and does not declare is missing there. (The
 * TypeScript compiler and @types/node the program is compiled with are this checkout's: the tooling of
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

interface PackageJson {
  name: string;
  version: string;
  license?: string;
  engines?: Record<string, string>;
  bin?: Record<string, string>;
  exports?: Record<string, string | { types: string; default: string }>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
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
 * The scratch project's lockfile: the tarball, and every package its declared dependencies reach in this
 * project's package-lock.json, at the same place (the package's own dependencies are this project's, so
 * its lockfile's layout fits). A dependency the lockfile does not have, or has only as a dev dependency,
 * fails here.
 */
function consumerLock(pkg: PackageJson, tarball: string): object {
  const lock = readJson<{ packages: Record<string, LockEntry> }>(path.join(root, 'package-lock.json'));
  const spec = `file:${path.basename(tarball)}`;
  const self = `node_modules/${pkg.name}`;
  const packages: Record<string, unknown> = {
    '': { name: 'upgrade-tool', version: '1.0.0', dependencies: { [pkg.name]: spec } },
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
  return { name: 'upgrade-tool', version: '1.0.0', lockfileVersion: 3, requires: true, packages };
}

/** The README's upgrade-tooling program: the ```ts block that opens with `// upgrade.ts`. */
function readmeProgram(): string {
  const m = /^```ts\n(\/\/ upgrade\.ts[\s\S]*?)^```$/m.exec(fs.readFileSync(path.join(root, 'README.md'), 'utf8'));
  assert.ok(m, 'README.md has the ```ts block of upgrade.ts');
  return m[1]!;
}

/** A second program: the `./contract` entry and a JSON Schema, as a TypeScript tool reads them. */
const CONTRACT_PROGRAM = `import { createRequire } from 'node:module';
import { CONTRACT_VERSION, progressQuery, startOptions, type MigrationProgress } from '${NAME}/contract';
const require = createRequire(import.meta.url);
const schema = require('${NAME}/contract/v1/start-input.schema.json') as { 'x-contract-version': string };
const ref = { group: 'example.com', resource: 'gizmos', version: 'v1', kind: 'Gizmo', namespaced: true, storageVersionHash: '', custom: true };
const phase: MigrationProgress['phase'] = 'Succeeded';
console.log(JSON.stringify({ contract: CONTRACT_VERSION, schema: schema['x-contract-version'], query: progressQuery.name, workflowId: startOptions(ref, 'q').workflowId, phase }));
`;

let plane: TestPlane;
let work: string;
let tarball: string;
/** Paths in the tarball, without its package/ prefix. */
let packed: string[];
/** The upgrade tool's project: the tarball installed, and the two programs compiled into out/. */
let tool: string;

before(async () => {
  plane = await testPlane();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-pack-'));

  // The checkout as git sees it (the working tree, uncommitted changes included), built with this checkout's
  // node_modules: what `npm pack` makes of a fresh clone after `npm ci`, and this checkout's dist/ untouched.
  const copy = path.join(work, 'checkout');
  const { stdout: listed } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root });
  for (const f of listed.split('\0').filter(Boolean)) {
    if (!fs.existsSync(path.join(root, f))) continue; // deleted, not yet committed
    fs.mkdirSync(path.dirname(path.join(copy, f)), { recursive: true });
    fs.copyFileSync(path.join(root, f), path.join(copy, f));
  }
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'));
  const pkg = readJson<PackageJson>(path.join(copy, 'package.json'));
  const t0 = Date.now();
  await run('npm', ['pack', '--pack-destination', work, '--loglevel=error'], { cwd: copy, env: cleanEnv() });
  tarball = path.join(work, `${pkg.name}-${pkg.version}.tgz`);
  const { stdout: entries } = await run('tar', ['-tzf', tarball], { cwd: work });
  packed = entries
    .split('\n')
    .filter(Boolean)
    .map((p) => p.replace(/^package\//, ''));
  const t1 = Date.now();

  tool = path.join(work, 'upgrade-tool');
  fs.mkdirSync(tool);
  fs.copyFileSync(tarball, path.join(tool, path.basename(tarball)));
  const spec = `file:${path.basename(tarball)}`;
  fs.writeFileSync(
    path.join(tool, 'package.json'),
    JSON.stringify({ name: 'upgrade-tool', version: '1.0.0', private: true, type: 'module', dependencies: { [pkg.name]: spec } }, null, 2),
  );
  fs.writeFileSync(
    path.join(tool, 'package-lock.json'),
    JSON.stringify(consumerLock(pkg, path.join(tool, path.basename(tarball))), null, 2),
  );
  const ci = (cache: string) => run('npm', ['ci', cache, '--no-audit', '--no-fund', '--loglevel=error'], { cwd: tool, env: cleanEnv() });
  await ci('--offline').catch(async (err: { stderr?: string }) => {
    if (!/ENOTCACHED/.test(err.stderr ?? '')) throw err;
    process.stderr.write('  a dependency is not in the npm cache: npm ci --prefer-offline\n');
    await ci('--prefer-offline');
  });
  const t2 = Date.now();

  fs.writeFileSync(path.join(tool, 'upgrade.ts'), readmeProgram());
  fs.writeFileSync(path.join(tool, 'contract.ts'), CONTRACT_PROGRAM);
  fs.writeFileSync(
    path.join(tool, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        outDir: 'out',
        types: ['node'],
        typeRoots: [path.join(root, 'node_modules', '@types')],
        // Some dependencies' own declarations want @types packages they do not declare (ms, ws): not this package's to check.
        skipLibCheck: true,
      },
      files: ['upgrade.ts', 'contract.ts'],
    }),
  );
  await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', tool], { cwd: tool, env: cleanEnv() });
  const t3 = Date.now();
  process.stderr.write(
    `  npm pack ${((t1 - t0) / 1000).toFixed(1)}s (${packed.length} files, ${(fs.statSync(tarball).size / 1024).toFixed(0)} KiB), ` +
      `npm ci ${((t2 - t1) / 1000).toFixed(1)}s, tsc ${((t3 - t2) / 1000).toFixed(1)}s\n`,
  );
});

after(async () => {
  await plane?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

void test('the tarball: the compiled client and contract with their declarations, the JSON Schemas, the svm command; no sources, tests or benchmarks', () => {
  const pkg = readJson<PackageJson>(path.join(root, 'package.json'));
  const wanted = [
    'package.json',
    'README.md',
    'bin/svm.js',
    'dist/cli/svm.js',
    ...Object.values(pkg.exports!).flatMap((e) => (typeof e === 'string' ? [] : [e.types, e.default].map((f) => f.replace(/^\.\//, '')))),
    ...fs.readdirSync(path.join(root, 'contract', 'v1')).map((f) => `contract/v1/${f}`),
  ];
  assert.deepEqual(
    wanted.filter((f) => !packed.includes(f)),
    [],
  );
  const stray = packed.filter(
    (f) =>
      /^(src|cli|test|bench|scripts|examples|deploy|charts|docs|tools)\//.test(f) ||
      /^dist\/(test|bench|scripts)\//.test(f) ||
      f.endsWith('.map') ||
      (f.endsWith('.ts') && !f.endsWith('.d.ts')),
  );
  assert.deepEqual(stray, []);
});

void test('installed, the package needs nothing but its declared dependencies: every module its code requires is one, and `svm version` runs', async () => {
  const installed = path.join(tool, 'node_modules', NAME);
  const pkg = readJson<PackageJson>(path.join(installed, 'package.json'));
  const declared = new Set(Object.keys(pkg.dependencies ?? {}));
  const builtins = new Set(builtinModules);
  const files = (dir: string): string[] =>
    fs
      .readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  const required = new Map<string, string>();
  for (const f of ['dist/src', 'dist/cli', 'bin'].flatMap((d) => files(path.join(installed, d))).filter((f) => f.endsWith('.js'))) {
    for (const m of fs.readFileSync(f, 'utf8').matchAll(/\b(?:require|import)\(\s*["']([^"'./][^"']*)["']\s*\)/g)) {
      const spec = m[1]!;
      if (spec.startsWith('node:') || builtins.has(spec.split('/')[0]!)) continue;
      const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
      if (!required.has(name)) required.set(name, path.relative(installed, f));
    }
  }
  assert.ok(required.has('@temporalio/client') && required.has('zod'), `the scan found the requires: ${[...required.keys()].join(', ')}`);
  assert.deepEqual(
    [...required].filter(([name]) => !declared.has(name)).map(([name, file]) => `${name} (${file})`),
    [],
  );
  // The install holds no tooling of this checkout's: what ran there ran on the declared dependencies alone.
  const dev = Object.keys(readJson<PackageJson>(path.join(root, 'package.json')).devDependencies ?? {});
  for (const d of ['typescript', '@temporalio/testing', 'eslint', 'playwright-core']) {
    assert.ok(dev.includes(d), `${d} is a dev dependency here`);
    assert.equal(fs.existsSync(path.join(tool, 'node_modules', d)), false, `${d} is not installed in the upgrade tool's project`);
  }

  const { stdout } = await run(path.join(tool, 'node_modules', '.bin', 'svm'), ['version', '-o', 'json'], { cwd: tool, env: cleanEnv() });
  const v = JSON.parse(stdout) as { svm: string; revision: string; contract: string };
  assert.deepEqual({ svm: v.svm, revision: v.revision, contract: v.contract }, { svm: pkg.version, revision: 'unknown', contract: '1' });

  const { stdout: contract } = await run(process.execPath, [path.join(tool, 'out', 'contract.js')], { cwd: tool, env: cleanEnv() });
  assert.deepEqual(JSON.parse(contract), {
    contract: '1',
    schema: '1',
    query: 'progress',
    workflowId: 'migrate/gizmos.example.com',
    phase: 'Succeeded',
  });
});

void test("the README's program, compiled in strict mode against the installed package, migrates a resource on the plane; etcd holds every object re-encoded, unchanged", async () => {
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
