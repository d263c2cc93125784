/**
 * Where the worker gets its workflow code: the bundle built ahead of time by
 * `npm run build:workflows` (scripts/bundle-workflows.ts, run in the image's
 * build stage) when it is there and not older than the code it was built
 * from, else a bundle built in this process as before (webpack, a few seconds
 * of CPU and a hundred-odd MB at start-up).
 *
 * "The code it was built from" is every file the workflows import, followed
 * from src/workflows/index.ts through relative imports: the workflows also
 * bundle ../api and parts of ../activities. Where src/ is absent (an image
 * that ships only dist/), the prebuilt bundle is the only code there is.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import type { WorkflowBundle, WorkflowBundleOption } from '@temporalio/worker';

export const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} };

/** The repository (or image) root: the nearest directory above this file with a package.json. */
export function projectRoot(from = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const prebuiltBundlePath = (root = projectRoot()) => path.join(root, 'dist', 'workflow-bundle.js');
/** The bundle's full source map, kept beside it (the bundle itself carries an empty one: see splitSourceMap). */
export const prebuiltMapPath = (root = projectRoot()) => `${prebuiltBundlePath(root)}.map`;
export const workflowsSource = (root = projectRoot()) => path.join(root, 'src', 'workflows', 'index.ts');

/**
 * Modules (under src/) every workflow of a worker shares: loaded once, when the
 * worker's reusable V8 context starts (the SDK's preloadModules), instead of
 * once per workflow run. workflows/preload brings zod: without it each run,
 * continue-as-new included, evaluated zod again (~3 MiB of classes, ~50 ms
 * in a fresh process), garbage in the workflow thread's heap until a major GC
 * (bench:migrate with 20 continue-as-new: the worker's RSS rose 16 MiB before
 * one). The SDK deep-freezes what a preloaded module reaches; a module here
 * must hold no state of a workflow and change nothing after loading
 * (unit-workflow-bundle checks what it can).
 */
export const SHARED_WORKFLOW_MODULES = ['workflows/preload'] as const;

/**
 * Modules (under src/) whose `interceptors` every workflow runs with: the cluster header on each activity a
 * workflow of a named cluster schedules (workflows/cluster-context.ts). Imported by the workflows too, so its
 * changes make the prebuilt bundle stale like theirs.
 */
export const WORKFLOW_INTERCEPTOR_MODULES = ['workflows/cluster-context'] as const;

/** bundleWorkflowCode's options for the workflows at workflowsPath (src/workflows or dist/src/workflows): the same everywhere a bundle is built. */
export function bundleOptions(workflowsPath: string): {
  workflowsPath: string;
  preloadModules: string[];
  workflowInterceptorModules: string[];
  logger: typeof quiet;
} {
  const src = path.resolve(path.dirname(workflowsPath), '..');
  return {
    workflowsPath,
    preloadModules: SHARED_WORKFLOW_MODULES.map((m) => path.join(src, m)),
    workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES.map((m) => path.join(src, m)),
    logger: quiet,
  };
}

function resolveTs(base: string): string | undefined {
  for (const p of [`${base}.ts`, path.join(base, 'index.ts'), base]) if (existsSync(p) && statSync(p).isFile()) return p;
  return undefined;
}

/** Every source file reachable from entry through relative imports (type-only ones included: cheap, and safe). */
export function workflowSources(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [entry];
  while (todo.length) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from|import|require\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const dep = resolveTs(path.resolve(path.dirname(file), m[1]!));
      if (dep) todo.push(dep);
    }
  }
  return [...seen].sort();
}

/** Why the prebuilt bundle cannot be used, or undefined when it can. */
export function prebuiltBundleProblem(root = projectRoot()): string | undefined {
  const bundle = prebuiltBundlePath(root);
  if (!existsSync(bundle)) return `${path.relative(root, bundle)} does not exist`;
  const entry = workflowsSource(root);
  if (!existsSync(entry)) return undefined; // no sources to be stale against
  const built = statSync(bundle).mtimeMs;
  // The SDK's workflow runtime is bundled too: a changed lockfile may mean a changed SDK.
  const lock = path.join(root, 'package-lock.json');
  const preloaded = [...SHARED_WORKFLOW_MODULES, ...WORKFLOW_INTERCEPTOR_MODULES].flatMap((m) =>
    workflowSources(path.join(root, 'src', `${m}.ts`)),
  );
  const inputs = [...new Set([...workflowSources(entry), ...preloaded]), ...(existsSync(lock) ? [lock] : [])];
  const newer = inputs.filter((f) => statSync(f).mtimeMs > built);
  return newer.length
    ? `${path.relative(root, newer[0]!)}${newer.length > 1 ? ` and ${newer.length - 1} more` : ''} changed since it was built`
    : undefined;
}

let inProcess: Promise<WorkflowBundle> | undefined;

/**
 * The bundle with every character outside ASCII written as a \uXXXX escape
 * (the same code: they sit in comments, strings and regular expressions,
 * where the escape means the same). V8 keeps a source that is all Latin-1 at
 * one byte per character and any other at two: a handful of dashes in
 * comments doubled the ~3 MB bundle in the worker's memory.
 */
export function asciiOnly(code: string): string {
  return code.replace(/[\u0080-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const INLINE_MAP = '\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,';
/** A valid source map that maps nothing. */
// With a `file`: the SDK resolves a bundle given as code (not a path) to the file its map names.
const EMPTY_MAP = Buffer.from(JSON.stringify({ version: 3, file: 'workflow-bundle.js', sources: [], names: [], mappings: '' })).toString(
  'base64',
);

/**
 * The bundle with an empty inline source map instead of its own, and its own
 * map (JSON). The SDK requires an inline map and parses it in every workflow
 * thread: the bundle's ~2 MB map cost the worker about 23 MiB of RSS
 * (measured 2026-11-26: an idle worker with svm's bundle 144 MiB, with the
 * empty map 121 MiB). Without it a workflow's stack trace names places in
 * the bundle (not minified: its functions keep their names) instead of the
 * TypeScript sources; SVM_WORKFLOW_SOURCE_MAP=full puts the map back.
 */
export function splitSourceMap(code: string): { code: string; map: string | undefined } {
  const at = code.lastIndexOf(INLINE_MAP);
  if (at < 0) return { code, map: undefined };
  const map = Buffer.from(code.slice(at + INLINE_MAP.length).trim(), 'base64').toString('utf8');
  return { code: `${code.slice(0, at)}${INLINE_MAP}${EMPTY_MAP}\n`, map };
}

/** The bundle's code with map (JSON) as its inline source map. */
export function withSourceMap(code: string, map: string): string {
  const at = code.lastIndexOf(INLINE_MAP);
  return `${at < 0 ? code : code.slice(0, at)}${INLINE_MAP}${Buffer.from(map).toString('base64')}\n`;
}

/**
 * The Worker.create `workflowBundle` option: `{ codePath }` of the prebuilt
 * bundle, or a bundle built now (once per process), with an empty source
 * map unless SVM_WORKFLOW_SOURCE_MAP=full (splitSourceMap).
 * SVM_WORKFLOW_BUNDLE=build forces an in-process build.
 */
export async function workflowBundleOption(): Promise<WorkflowBundleOption> {
  const root = projectRoot();
  const fullMap = process.env.SVM_WORKFLOW_SOURCE_MAP === 'full';
  if (process.env.SVM_WORKFLOW_BUNDLE !== 'build' && prebuiltBundleProblem(root) === undefined) {
    const codePath = prebuiltBundlePath(root);
    if (!fullMap) return { codePath };
    const mapPath = prebuiltMapPath(root);
    if (!existsSync(mapPath))
      throw new Error(`SVM_WORKFLOW_SOURCE_MAP=full: ${mapPath} does not exist (npm run build:workflows -- --force)`);
    return { code: withSourceMap(readFileSync(codePath, 'utf8'), readFileSync(mapPath, 'utf8')) };
  }
  // As before: the workflows next to this module (TypeScript under tsx, compiled JavaScript under dist/).
  inProcess ??= import('@temporalio/worker').then(async ({ bundleWorkflowCode }) => {
    const bundle = await bundleWorkflowCode(bundleOptions(require.resolve('../workflows')));
    const code = asciiOnly(bundle.code);
    return { ...bundle, code: fullMap ? code : splitSourceMap(code).code };
  });
  return inProcess;
}
