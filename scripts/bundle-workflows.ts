/**
 * `npm run build:workflows`: bundles the workflow code once, ahead of time,
 * into dist/workflow-bundle.js, which the worker loads instead of running
 * webpack at start-up (src/worker/workflow-bundle.ts), with an empty inline
 * source map; the full map goes to dist/workflow-bundle.js.map (the worker
 * reads it only with SVM_WORKFLOW_SOURCE_MAP=full). Skips the work when
 * the bundle is already newer than every file it is built from, unless
 * --force.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  asciiOnly,
  bundleOptions,
  prebuiltBundlePath,
  prebuiltBundleProblem,
  prebuiltMapPath,
  projectRoot,
  splitSourceMap,
  workflowsSource,
} from '../src/worker/workflow-bundle';

async function main(): Promise<void> {
  const root = projectRoot(__dirname);
  const out = prebuiltBundlePath(root);
  const problem = prebuiltBundleProblem(root);
  if (problem === undefined && !process.argv.includes('--force')) {
    process.stdout.write(`${path.relative(root, out)} is up to date\n`);
    return;
  }
  const t0 = performance.now();
  // Loaded only when there is work to do: @temporalio/worker takes seconds to load.
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { code, map } = splitSourceMap(asciiOnly((await bundleWorkflowCode(bundleOptions(workflowsSource(root)))).code));
  mkdirSync(path.dirname(out), { recursive: true });
  if (map !== undefined) writeFileSync(prebuiltMapPath(root), map);
  writeFileSync(out, code);
  process.stdout.write(
    `${path.relative(root, out)}: ${(code.length / 1024).toFixed(0)} KiB in ${((performance.now() - t0) / 1000).toFixed(1)}s${problem ? ` (${problem})` : ''}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bundling the workflows failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
