/**
 * svm's own version and git revision: what `svm version` prints and what the
 * worker's default Worker Deployment build ID is made of. Below the client and
 * the worker, so both read it.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** svm's package, and the typed client's package (packages/client) whose bundle holds this module too. */
const PACKAGE_NAMES = new Set(['temporal-storage-version-migrator', 'temporal-storage-version-migrator-client']);

/**
 * The directory holding svm's package.json: up from this file (src/config, dist/src/config once compiled, or
 * the client package's dist/ where this module is bundled).
 */
export function packageRoot(from: string = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const p = path.join(dir, 'package.json');
    if (fs.existsSync(p) && PACKAGE_NAMES.has((JSON.parse(fs.readFileSync(p, 'utf8')) as { name?: string }).name ?? '')) return dir;
    if (path.dirname(dir) === dir) throw new Error("svm's package.json not found");
  }
}

/**
 * The git revision: stamped by a build (SVM_GIT_REVISION), else asked of git
 * when svm runs from a checkout (root holds .git), else what the image build
 * wrote to dist/revision (the Dockerfile: its SVM_GIT_REVISION build argument,
 * or without one a digest of the code it built, so that two different images
 * never share a revision, nor the worker's default build ID), else "unknown".
 * The installed package (node_modules/temporal-storage-version-migrator) is no
 * checkout: git would answer the revision of the project that installed it.
 */
export function gitRevision(root: string, env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVM_GIT_REVISION) return env.SVM_GIT_REVISION;
  if (!fs.existsSync(path.join(root, '.git'))) return stampedRevision(root) ?? 'unknown';
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 })
      .toString()
      .trim();
  } catch {
    return stampedRevision(root) ?? 'unknown';
  }
}

/** The revision an image build wrote to dist/revision (one line), if any. */
export function stampedRevision(root: string): string | undefined {
  try {
    const line = fs.readFileSync(path.join(root, 'dist', 'revision'), 'utf8').trim();
    return /^\S{1,64}$/.test(line) ? line : undefined;
  } catch {
    return undefined;
  }
}

/** svm's version (package.json) and revision. */
export function svmBuild(env: NodeJS.ProcessEnv = process.env): { version: string; revision: string } {
  const root = packageRoot();
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  return { version: pkg.version, revision: gitRevision(root, env) };
}
