// dist/cli/svm-client.js and its V8 code cache: what bin/svm.js runs for a client command's action (`svm status`,
// `svm migrate ...`: every command but worker, dev and version, and never for --help). Built by
// scripts/transpile.mjs (`npm ci`, `npm run build:fast`) and by `npm run build` (the image), or alone:
//   node scripts/bundle-cli.mjs [--out TREE]
//
// Why: such a command loads the Temporal client, zod and the project's client layer, ~370 module files. Read
// one by one and compiled at every start, they took most of `svm status`'s 1.2 s (docs/benchmarks.md, "svm
// start"). Here they are one CommonJS file (esbuild: cli/svm.ts with what it imports; the worker and the dev
// plane stay outside it, loaded from dist/src when named), and the file's compiled code is saved beside it
// (svm-client.js.cache, V8's code cache, made by running the bundle's warm() in a node of this version): a
// start deserializes it instead of compiling. A node whose V8 differs rejects the cache and compiles, as
// without it.
//
// SVM_BUNDLE_PLAIN=1 leaves the bundle unminified (names in a CPU profile).
//
// The bundle's copy of @temporalio/proto leaves out two namespaces of the descriptors a client never uses:
// coresdk (the worker's bridge to the Rust core) and temporal.api.cloud (Temporal Cloud's operations API): a
// third of the JSON that every start turns into protobufjs types. And its protobufjs resolves a service method's
// types at the method's first call (lazyServiceMethods). The worker runs the packages themselves.
/* global process, console */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** Namespaces of the descriptors the client never uses (see above), as paths in the JSON. */
const UNUSED_PROTO_NAMESPACES = [['coresdk'], ['temporal', 'api', 'cloud']];

/** @temporalio/proto's json-module.js without UNUSED_PROTO_NAMESPACES. */
function prunedProtoModule(source) {
  const start = source.indexOf('.addJSON(');
  const end = source.lastIndexOf('})');
  if (start < 0 || end < start) throw new Error('@temporalio/proto: json-module.js is not shaped as expected (no .addJSON({...}))');
  const json = (0, eval)(`(${source.slice(start + '.addJSON('.length, end + 1)})`);
  for (const at of UNUSED_PROTO_NAMESPACES) {
    let ns = json;
    for (const part of at.slice(0, -1)) ns = ns?.[part]?.nested;
    if (!ns || !(at.at(-1) in ns)) throw new Error(`@temporalio/proto: no namespace ${at.join('.')} to leave out`);
    delete ns[at.at(-1)];
  }
  return source.slice(0, start + '.addJSON('.length) + JSON.stringify(json) + source.slice(end + 1);
}

/**
 * protobufjs's service.js with Service#create resolving a method's request and response types at its first call
 * instead of all of them at once: the Temporal client creates the WorkflowService (over a hundred methods) at
 * every connection, and a command calls a handful. The text replaced is checked: another protobufjs fails the
 * build of the bundle (bin/svm.js then runs the modules of dist/).
 */
function lazyServiceMethods(source) {
  const eager = `        var methodName = util.lcFirst((method = this._methodsArray[i]).resolve().name).replace(/[^$\\w_]/g, "");
        rpcService[methodName] = (function(method, requestType, responseType) {
            return function rpcMethod(request, callback) {
                return rpc.Service.prototype.rpcCall.call(this, method, requestType, responseType, request, callback);
            };
        })(method, method.resolvedRequestType.ctor, method.resolvedResponseType.ctor);`;
  const lazy = `        var methodName = util.lcFirst((method = this._methodsArray[i]).name).replace(/[^$\\w_]/g, "");
        rpcService[methodName] = (function(method) {
            return function rpcMethod(request, callback) {
                method.resolve();
                return rpc.Service.prototype.rpcCall.call(this, method, method.resolvedRequestType.ctor, method.resolvedResponseType.ctor, request, callback);
            };
        })(method);`;
  if (!source.includes(eager)) throw new Error('protobufjs: Service#create is not the one this build knows (src/service.js)');
  return source.replace(eager, lazy);
}

/**
 * Writes <tree>/dist/cli/svm-client.js and .cache (tree: this checkout, or the --out tree of transpile.mjs),
 * both with mtime `at` (bin/svm.js runs the bundle only when it is not older than dist/cli/svm.js).
 */
export async function bundleCli({ esbuild, tree = root, at = new Date() }) {
  const out = path.join(tree, 'dist', 'cli', 'svm-client.js');
  const cache = `${out}.cache`;
  rmSync(cache, { force: true });
  const result = await esbuild.build({
    entryPoints: [path.join(root, 'cli', 'svm.ts')],
    outfile: out,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    minify: process.env.SVM_BUNDLE_PLAIN !== '1',
    legalComments: 'none',
    tsconfig: path.join(root, 'tsconfig.json'),
    logLevel: 'warning',
    // Loaded from node_modules at run time: the worker's SDK (never by a client command), the Kubernetes
    // client (src/kube/kubeconfig.ts loads its own bundle by path), esbuild and tsx (build tools), and the
    // package.json `svm version` reads the SDK's version from.
    external: ['@temporalio/worker', '@kubernetes/client-node', 'esbuild', 'tsx', '@temporalio/client/package.json'],
    plugins: [
      {
        name: 'svm-client',
        setup(build) {
          // The worker and the dev plane: required from dist/src beside the bundle when a run names them.
          build.onResolve({ filter: /^\.\.\/src\/(worker|dev)\// }, (a) => ({ path: a.path, external: true }));
          build.onLoad({ filter: /@temporalio[\\/]proto[\\/]protos[\\/]json-module\.js$/ }, (a) => ({
            contents: prunedProtoModule(readFileSync(a.path, 'utf8')),
            loader: 'js',
          }));
          build.onLoad({ filter: /[\\/]protobufjs[\\/]src[\\/]service\.js$/ }, (a) => ({
            contents: lazyServiceMethods(readFileSync(a.path, 'utf8')),
            loader: 'js',
          }));
        },
      },
    ],
  });
  if (result.warnings.length > 0) throw new Error(`esbuild warned: ${result.warnings.map((w) => w.text).join('; ')}`);
  // The code cache: made by the node that runs the bundle (bin/svm.js with SVM_WRITE_CODE_CACHE=1).
  const made = spawnSync(process.execPath, [path.join(tree, 'bin', 'svm.js')], {
    env: { ...process.env, SVM_WRITE_CODE_CACHE: '1', SVM_FROM_SOURCE: '' },
    encoding: 'utf8',
  });
  if (made.status !== 0) throw new Error(`the code cache was not written: ${made.stderr || made.stdout}`);
  for (const f of [out, cache]) utimesSync(f, at, at);
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const tree = args.includes('--out') ? path.resolve(args[args.indexOf('--out') + 1] ?? '') : root;
  const esbuild = await import('esbuild');
  // After `npm run build` (tsc) dist/cli/svm.js is new: the bundle gets the later of now and its time.
  let at = Date.now();
  try {
    at = Math.max(at, statSync(path.join(tree, 'dist', 'cli', 'svm.js')).mtimeMs);
  } catch {
    // no dist/cli/svm.js: bin/svm.js runs the sources whatever is here
  }
  const out = await bundleCli({ esbuild, tree, at: new Date(at) });
  console.log(`bundle-cli: ${path.relative(process.cwd(), out)} and its code cache`);
}
