/**
 * A worker as the image runs it, for the benches: the project compiled with
 * tsc into a temporary tree, with the prebuilt workflow bundle and the
 * KubeConfig bundle, not run through tsx (which alone adds ~60 MiB to the
 * worker's RSS).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/** Compiles the checkout at root into a temporary tree; returns its bin/svm.js. */
export function compiledWorkerTree(root: string, log: (s: string) => void): { bin: string; dispose(): void } {
  const tree = mkdtempSync(path.join(tmpdir(), 'svm-bench-worker-'));
  log(`compiling the worker of ${root} into ${tree} (as the image runs it; not measured)`);
  try {
    execFileSync(
      process.execPath,
      [
        require.resolve('typescript/bin/tsc'),
        '-p',
        path.join(root, 'tsconfig.json'),
        '--outDir',
        path.join(tree, 'dist'),
        '--declaration',
        'false',
        '--sourceMap',
        'false',
      ],
      { stdio: 'ignore' },
    );
  } catch (err) {
    // tsc emits despite type errors (someone's work in progress elsewhere in the tree); only a missing entry point is fatal.
    if (!existsSync(path.join(tree, 'dist', 'cli', 'svm.js'))) throw err;
  }
  const workflows = path.join(root, 'dist', 'workflow-bundle.js');
  if (!existsSync(workflows)) throw new Error(`${workflows} is missing: run npm run build:workflows in ${root} first`);
  cpSync(workflows, path.join(tree, 'dist', 'workflow-bundle.js'));
  cpSync(path.join(root, 'bin'), path.join(tree, 'bin'), { recursive: true });
  cpSync(path.join(root, 'package.json'), path.join(tree, 'package.json'));
  symlinkSync(path.join(root, 'node_modules'), path.join(tree, 'node_modules'));
  // As the image's build stage: KubeConfig and Watch without client-node's generated API (src/kube/kubeconfig.ts).
  const kubeBundle = path.join(tree, 'dist', 'src', 'kube', 'kubeconfig-bundle.js');
  if (existsSync(kubeBundle)) execFileSync(process.execPath, [kubeBundle], { cwd: tree, stdio: 'ignore' });
  return { bin: path.join(tree, 'bin', 'svm.js'), dispose: () => rmSync(tree, { recursive: true, force: true }) };
}
