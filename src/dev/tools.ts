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

/** Returns the tool paths, running scripts/tools.sh first when any is missing. */
export function ensureTools(log: (line: string) => void = (l) => process.stderr.write(l + '\n')): ToolPaths {
  const paths = expectedToolPaths();
  const missing = Object.values(paths).filter((p) => !existsSync(p));
  if (missing.length > 0) {
    log(`building missing servers (${missing.map((m) => path.basename(m)).join(', ')}); the first build takes a while`);
    execFileSync('bash', [path.join(repoRoot, 'scripts', 'tools.sh')], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return paths;
}

export const toolVersions = versions;
