/**
 * KubeConfig and Watch of @kubernetes/client-node, the only parts of it this
 * project uses, and where they are loaded from.
 *
 * The package is ES modules only, and its KubeConfig module imports the
 * whole generated API (dist/gen: ~940 modules, 21 MB of source that V8 keeps
 * in the heap for as long as the process lives) for makeApiClient alone.
 * Loaded from the package that costs ~55 MiB of RSS; loaded from a bundle of
 * just these two classes (the same code, with what they import, built by
 * esbuild: src/kube/kubeconfig-bundle.ts, run in the image's build stage)
 * far less: 219 KB of minified ASCII source, without the generated models
 * (~5 MiB less V8 heap in an idle worker than the 1.45 MB bundle that still
 * held them). The bundle is used when it was built from the installed version
 * of the package (its file name carries the version); otherwise, as under
 * tsx in a checkout, the package itself.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import type * as k8s from '@kubernetes/client-node';

export type { Cluster, User } from '@kubernetes/client-node';
export type KubeConfig = k8s.KubeConfig;
export type Watch = k8s.Watch;

interface KubeConfigModule {
  KubeConfig: typeof k8s.KubeConfig;
  Watch: typeof k8s.Watch;
}

/** The installed @kubernetes/client-node's version (its package.json: a few bytes, not the package). */
export function kubeClientNodeVersion(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('@kubernetes/client-node/package.json') as { version: string }).version;
}

/** The repository (or image) root: the nearest directory above this file with a package.json. */
function projectRoot(from = __dirname): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** Where the bundle of KubeConfig and Watch for the installed version goes: dist/kube-client-node-<version>.js. */
export function kubeConfigBundlePath(root = projectRoot(), version = kubeClientNodeVersion()): string | undefined {
  return root && path.join(root, 'dist', `kube-client-node-${version}.js`);
}

function load(): KubeConfigModule {
  const bundle = process.env.SVM_KUBE_BUNDLE === 'off' ? undefined : kubeConfigBundlePath();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (bundle && existsSync(bundle)) return require(bundle) as KubeConfigModule;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('@kubernetes/client-node') as KubeConfigModule;
}

const loaded = load();
export const KubeConfig: typeof k8s.KubeConfig = loaded.KubeConfig;
export const Watch: typeof k8s.Watch = loaded.Watch;
