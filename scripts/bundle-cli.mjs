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
// types at the method's first call (lazyServiceMethods), and builds a message, enum or service type when it is
// first looked up instead of all ~600 at every start (lazyProtoTypes, lazyPatchedRoot; the descriptors name
// every type they refer to absolutely, as protobufjs itself resolves it here: absoluteTypeNames): `svm status`
// builds 57 of them. The worker runs the packages themselves.
/* global process, console */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const requireHere = createRequire(import.meta.url);

/** A module as @temporalio/proto resolves it (its protobufjs, which the transforms below are for). */
function fromProto(spec) {
  return requireHere.resolve(spec, { paths: [path.dirname(requireHere.resolve('@temporalio/proto'))] });
}

/**
 * source with each [from, to] of edits replaced, every `from` found exactly once; otherwise the file is not the one
 * this build knows, and the bundle's build fails (bin/svm.js then runs the modules of dist/).
 */
function editText(source, edits, what) {
  for (const [from, to] of edits) {
    if (source.split(from).length !== 2) throw new Error(`${what} is not the one this build knows`);
    source = source.replace(from, to);
  }
  return source;
}

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
  // google.protobuf first: extensions elsewhere (temporal.api.protometa's) extend its option messages, and a root
  // that does not hold it yet when they are added searches everywhere below itself for them (lazyProtoTypes).
  if (!json.google) throw new Error('@temporalio/proto: no google namespace in the descriptors');
  const ordered = { google: json.google, ...json };
  absoluteTypeNames(ordered);
  deferPackageDescriptors(ordered);
  return source.slice(0, start + '.addJSON('.length) + JSON.stringify(ordered) + source.slice(end + 1);
}

/**
 * Each package's messages, enums and services as one JSON string with their names beside it
 * (`__svmLazy: { names, json }` in the package's nested): a start makes a few strings instead of the objects of
 * every descriptor, and lazyProtoTypes parses a package's string when one of its types is first built.
 */
function deferPackageDescriptors(nested) {
  for (const node of Object.values(nested)) {
    if (!node.nested || node.fields !== undefined || node.values !== undefined || node.methods !== undefined) continue;
    const lazy = {};
    for (const [name, child] of Object.entries(node.nested))
      if (child.fields !== undefined || child.values !== undefined || child.methods !== undefined) {
        lazy[name] = child;
        delete node.nested[name];
      }
    deferPackageDescriptors(node.nested);
    if (Object.keys(lazy).length > 0) node.nested.__svmLazy = { names: Object.keys(lazy), json: JSON.stringify(lazy) };
  }
}

/** protobuf's scalar types: a field of one of these names refers to no message or enum. */
const SCALARS = new Set(
  'double float int32 int64 uint32 uint64 sint32 sint64 fixed32 fixed64 sfixed32 sfixed64 bool string bytes'.split(' '),
);

/**
 * Rewrites every message and enum a field or a method names (`temporal.api.common.v1.Payloads`, relative to where
 * it is declared) as the absolute name protobufjs resolves it to (`.temporal.api.common.v1.Payloads`). protobufjs
 * looks a relative name up by searching every namespace below each enclosing one, which would build every
 * package's types (lazyProtoTypes); an absolute name goes down its own path only. The absolute names are not
 * guessed: they are the fullName of what protobufjs itself resolves each reference to, on a root built from the
 * same descriptors here, at build time.
 */
function absoluteTypeNames(json) {
  const protobuf = requireHere(fromProto('protobufjs/light'));
  const reference = new protobuf.Root().addJSON(json);
  const at = (path) => path.reduce((o, part) => o?.get(part), reference);
  const rewrite = (nested, scope) => {
    for (const [name, node] of Object.entries(nested ?? {})) {
      const here = [...scope, name];
      if (node.extend !== undefined) {
        // An extension field: the message it extends (and its own type) are looked up from its namespace too.
        const extended = at(scope).lookup(node.extend);
        if (!extended) throw new Error(`@temporalio/proto: ${here.join('.')} extends ${node.extend}, which does not resolve`);
        node.extend = extended.fullName;
        if (!SCALARS.has(node.type)) {
          const f = at(here);
          f.resolve();
          node.type = f.resolvedType.fullName;
        }
        continue;
      }
      for (const [fieldName, field] of Object.entries(node.fields ?? {})) {
        if (SCALARS.has(field.type)) continue;
        const f = at(here).fields[fieldName];
        f.resolve();
        if (!f.resolvedType) throw new Error(`@temporalio/proto: ${here.join('.')}.${fieldName}: ${field.type} does not resolve`);
        field.type = f.resolvedType.fullName;
      }
      for (const [methodName, method] of Object.entries(node.methods ?? {})) {
        const m = at(here).methods[methodName];
        m.resolve();
        method.requestType = m.resolvedRequestType.fullName;
        method.responseType = m.resolvedResponseType.fullName;
      }
      rewrite(node.nested, here);
    }
  };
  rewrite(json, []);
}

/**
 * protobufjs's namespace.js building a package's messages, enums and services when one is first asked for by
 * name (get, and so lookup) instead of all of them with the root: a client command uses a few dozen of the
 * ~600 message types (WorkflowService's package alone declares 268), and building them all was most of its
 * start after node's own. A namespace keeps the descriptors it has not built in _svmPending; a search that must
 * look everywhere below a namespace (a relative name not found on its path: absoluteTypeNames makes that rare)
 * builds what is pending there first, and nestedArray, which such searches and the root's bookkeeping use,
 * lists only what is built (what is built later is added as usual: the root's bookkeeping sees it then).
 */
function lazyProtoTypes(source) {
  const edits = [
    [
      `        for (var names = Object.keys(nestedJson), i = 0, nested; i < names.length; ++i) {
            nested = nestedJson[names[i]];
            ns.add(`,
      `        for (var names = Object.keys(nestedJson), i = 0, nested; i < names.length; ++i) {
            nested = nestedJson[names[i]];
            if (names[i] === "__svmLazy") {
                if (!ns.nested) ns.nested = {};
                ns._svmJson = nested.json;
                for (var k = 0; k < nested.names.length; ++k)
                    (ns._svmPending || (ns._svmPending = Object.create(null)))[nested.names[k]] = [null, depth + 1];
                continue;
            }
            if (!(ns instanceof Type) && (nested.fields !== undefined || nested.values !== undefined || nested.methods !== undefined)) {
                if (!ns.nested) ns.nested = {};
                (ns._svmPending || (ns._svmPending = Object.create(null)))[names[i]] = [nested, depth + 1];
                continue;
            }
            ns.add(`,
    ],
    [
      `Namespace.prototype.get = function get(name) {
    return this.nested`,
      `function svmBuild(ns, name) {
    if (ns._svmJson) {
        var parsed = JSON.parse(ns._svmJson);
        ns._svmJson = null;
        for (var key in ns._svmPending)
            if (ns._svmPending[key][0] === null) ns._svmPending[key][0] = parsed[key];
    }
    var pending = ns._svmPending[name];
    delete ns._svmPending[name];
    var nested = pending[0];
    ns.add((nested.fields !== undefined ? Type.fromJSON : nested.values !== undefined ? Enum.fromJSON : Service.fromJSON)(name, nested, pending[1]));
}
function svmBuildAll(ns) {
    if (ns._svmPending)
        for (var name in ns._svmPending)
            svmBuild(ns, name);
}
Namespace.prototype.get = function get(name) {
    if (this._svmPending && Object.prototype.hasOwnProperty.call(this._svmPending, name))
        svmBuild(this, name);
    return this.nested`,
    ],
    [
      `Namespace.prototype.getEnum = function getEnum(name) {
    if (this.nested`,
      `Namespace.prototype.getEnum = function getEnum(name) {
    this.get(name);
    if (this.nested`,
    ],
    [
      `    } else {
        for (var i = 0; i < this.nestedArray.length; ++i)`,
      `    } else {
        svmBuildAll(this);
        for (var i = 0; i < this.nestedArray.length; ++i)`,
    ],
  ];
  return editText(source, edits, 'protobufjs: src/namespace.js');
}

/**
 * @temporalio/proto's patch-protobuf-root.js (the module's exported tree of namespaces as plain properties)
 * giving a package's types that lazyProtoTypes has not built yet as properties that build them on first read.
 */
function lazyPatchedRoot(source) {
  const edits = [
    [
      `        if (key === 'root')
            continue;`,
      `        if (key === 'root' || key === '_svmPending' || key === '_svmJson')
            continue;`,
    ],
    [
      `    return newRoot;
}
function isType(value) {`,
      `    if (root._svmPending)
        for (const name in root._svmPending)
            Object.defineProperty(newRoot, name, {
                configurable: true,
                enumerable: true,
                get() {
                    const built = root.get(name);
                    const value = root[name] !== undefined ? root[name] : isType(built) ? built : undefined;
                    Object.defineProperty(newRoot, name, { value, writable: true, enumerable: true, configurable: true });
                    return value;
                },
                set(value) {
                    Object.defineProperty(newRoot, name, { value, writable: true, enumerable: true, configurable: true });
                },
            });
    return newRoot;
}
function isType(value) {`,
    ],
  ];
  return editText(source, edits, '@temporalio/proto: lib/patch-protobuf-root.js');
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
  return editText(source, [[eager, lazy]], 'protobufjs: src/service.js (Service#create)');
}

/**
 * Writes <tree>/dist/cli/svm-client.js and .cache (tree: this checkout, or the --out tree of transpile.mjs),
 * both with mtime `at` (bin/svm.js runs the bundle only when it is not older than dist/cli/svm.js).
 */
export async function bundleCli({ esbuild, tree = root, at = new Date() }) {
  // lazyProtoTypes is for @temporalio/proto's protobufjs only.
  const protoNamespaceModule = fromProto('protobufjs/src/namespace.js');
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
          // Only the protobufjs of @temporalio/proto: another copy in the bundle (@grpc/proto-loader's) walks
          // nestedArray to find every type of what it loads, and must keep building them all.
          build.onLoad({ filter: /[\\/]protobufjs[\\/]src[\\/]namespace\.js$/ }, (a) =>
            a.path === protoNamespaceModule ? { contents: lazyProtoTypes(readFileSync(a.path, 'utf8')), loader: 'js' } : undefined,
          );
          build.onLoad({ filter: /@temporalio[\\/]proto[\\/]lib[\\/]patch-protobuf-root\.js$/ }, (a) => ({
            contents: lazyPatchedRoot(readFileSync(a.path, 'utf8')),
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
