/**
 * Locates the real servers built by scripts/tools.sh (etcd, kube-apiserver,
 * kube-controller-manager, the Temporal CLI), building what is missing.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { packageRoot } from '../config/build-info';
import versions from '../../tools/versions.json';

export interface ToolPaths {
  etcd: string;
  etcdctl: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubectl: string;
  /** The previous Kubernetes release's servers (the rolling-upgrade test starts on them). */
  kubeApiserverPrevious: string;
  kubeControllerManagerPrevious: string;
  temporal: string;
}

/** The Kubernetes releases the plane can run: the default (newest) and the one before. */
export const kubeVersions = (): { current: string; previous: string } => ({
  current: versions.kubernetes,
  previous: versions.kubernetesPrevious,
});

/** kube-apiserver and kube-controller-manager of one release built by scripts/tools.sh. */
export function kubeBinaries(version: string): { kubeApiserver: string; kubeControllerManager: string } {
  const { current, previous } = kubeVersions();
  if (version !== current && version !== previous) {
    throw new Error(`Kubernetes ${version} is not built here: the plane runs ${current} (default) or ${previous} (tools/versions.json)`);
  }
  const bin = path.join(toolsDir(), 'bin');
  return {
    kubeApiserver: path.join(bin, `kube-apiserver-${version}`),
    kubeControllerManager: path.join(bin, `kube-controller-manager-${version}`),
  };
}

/** The checkout (packageRoot: from src/dev or, compiled, dist/src/dev alike). */
const repoRoot = packageRoot();

export function toolsDir(): string {
  const cache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return process.env.SVM_TOOLS_DIR || path.join(cache, 'svm-tools');
}

export function expectedToolPaths(): ToolPaths {
  const bin = path.join(toolsDir(), 'bin');
  return {
    etcd: path.join(bin, `etcd-${versions.etcd}`),
    etcdctl: path.join(bin, `etcdctl-${versions.etcd}`),
    kubeApiserver: path.join(bin, `kube-apiserver-${versions.kubernetes}`),
    kubeControllerManager: path.join(bin, `kube-controller-manager-${versions.kubernetes}`),
    kubectl: path.join(bin, `kubectl-${versions.kubernetes}`),
    kubeApiserverPrevious: path.join(bin, `kube-apiserver-${versions.kubernetesPrevious}`),
    kubeControllerManagerPrevious: path.join(bin, `kube-controller-manager-${versions.kubernetesPrevious}`),
    temporal: path.join(bin, `temporal-${versions.temporal}`),
  };
}

/**
 * What scripts/tools.sh builds, by the name it takes: each server the plane starts, and the clients its env
 * file names (etcdctl, kubectl). `-previous`: the release before (kubeVersions().previous).
 */
export type ToolName =
  | 'etcd'
  | 'etcdctl'
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kubectl'
  | 'kube-apiserver-previous'
  | 'kube-controller-manager-previous'
  | 'kubectl-previous'
  | 'temporal-cli';

/** The cached binary of each name. */
export function toolPath(name: ToolName): string {
  const bin = path.join(toolsDir(), 'bin');
  const previous = name.endsWith('-previous');
  const base = previous ? name.slice(0, -'-previous'.length) : name;
  if (base === 'etcd' || base === 'etcdctl') return path.join(bin, `${base}-${versions.etcd}`);
  if (base === 'temporal-cli') return path.join(bin, `temporal-${versions.temporal}`);
  return path.join(bin, `${base}-${previous ? versions.kubernetesPrevious : versions.kubernetes}`);
}

/** The name scripts/tools.sh knows a Kubernetes binary of one release by (the release must be one of kubeVersions()). */
export function kubeToolName(binary: 'kube-apiserver' | 'kube-controller-manager' | 'kubectl', version: string): ToolName {
  kubeBinaries(version); // refuses a release that is not one of the two
  return version === kubeVersions().current ? binary : `${binary}-previous`;
}

/** Those of `names` that are not built yet. */
export function missingTools(names: readonly ToolName[], exists: (p: string) => boolean = existsSync): ToolName[] {
  return [...new Set(names)].filter((n) => !exists(toolPath(n)));
}

/**
 * Builds, with scripts/tools.sh, those of `names` that are missing (nothing else: the demo's first run builds
 * etcd, one kube-apiserver and the Temporal CLI, not every server the project knows), and returns every path.
 * The script's progress goes to stderr; its lock makes a second caller wait for the first one's build.
 */
export function ensureTools(names: readonly ToolName[], log: (line: string) => void = (l) => process.stderr.write(l + '\n')): ToolPaths {
  const missing = missingTools(names);
  if (missing.length > 0) {
    log(`building ${missing.map((m) => path.basename(toolPath(m))).join(', ')} from source (once; later runs reuse ${toolsDir()})`);
    execFileSync('bash', [path.join(repoRoot, 'scripts', 'tools.sh'), ...missing], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return expectedToolPaths();
}

export const toolVersions = versions;
