/** `svm version`: svm's version and revision, the workflow contract's version and the Temporal SDK's. */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Command, Option } from 'commander';
import { CONTRACT_VERSION } from '../contract/definitions';
import { withExamples } from '../config/cli-options';

export interface VersionInfo {
  svm: string;
  revision: string;
  contract: string;
  temporalSdk: string;
}

/** The directory holding svm's package.json: up from this file (src/client, or dist/src/client once compiled). */
function packageRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const p = path.join(dir, 'package.json');
    if (fs.existsSync(p) && (JSON.parse(fs.readFileSync(p, 'utf8')) as { name?: string }).name === 'temporal-storage-version-migrator')
      return dir;
    if (path.dirname(dir) === dir) throw new Error("svm's package.json not found");
  }
}

/**
 * The git revision: stamped by a build (SVM_GIT_REVISION, e.g. `docker build
 * --build-arg SVM_GIT_REVISION=$(git rev-parse --short HEAD)`), else asked of
 * git when svm runs from a checkout, else "unknown".
 */
export function gitRevision(root: string, env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVM_GIT_REVISION) return env.SVM_GIT_REVISION;
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 })
      .toString()
      .trim();
  } catch {
    return 'unknown';
  }
}

export function versionInfo(): VersionInfo {
  const root = packageRoot();
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const sdk = JSON.parse(fs.readFileSync(require.resolve('@temporalio/client/package.json'), 'utf8')) as { version: string };
  return { svm: pkg.version, revision: gitRevision(root), contract: CONTRACT_VERSION, temporalSdk: sdk.version };
}

export function versionCommand(): Command {
  const cmd = new Command('version')
    .description("print svm's version and git revision, the workflow contract version and the Temporal SDK version")
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action((o: { output: string }) => {
      const v = versionInfo();
      process.stdout.write(
        o.output === 'json'
          ? JSON.stringify(v, null, 2) + '\n'
          : `svm ${v.svm} (revision ${v.revision})\nworkflow contract v${v.contract}\nTemporal TypeScript SDK ${v.temporalSdk}\n`,
      );
    });
  return withExamples(cmd, ['svm version', 'svm version -o json   # for tools']);
}
