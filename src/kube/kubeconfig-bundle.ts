/**
 * Builds dist/kube-client-node-<version>.js: KubeConfig and Watch of the
 * installed @kubernetes/client-node with what they import, bundled by esbuild
 * into one CommonJS file without the generated API that the package's
 * KubeConfig module imports for makeApiClient only (see src/kube/kubeconfig.ts:
 * the worker loads ~30 MiB less). Run at build time, after `npm run build`:
 *   node dist/src/kube/kubeconfig-bundle.js      (the image's build stage)
 *   npx tsx src/kube/kubeconfig-bundle.ts        (a checkout)
 * Not imported at run time: esbuild (tsx's bundler) is needed only here.
 */
import { mkdirSync, renameSync } from 'node:fs';
import * as path from 'node:path';
import { kubeConfigBundlePath } from './kubeconfig';

export async function buildKubeConfigBundle(out = kubeConfigBundlePath()): Promise<string> {
  if (!out) throw new Error('no package.json above this file: nowhere to write the bundle');
  const dist = path.dirname(require.resolve('@kubernetes/client-node/package.json'));
  const esbuild = await import('esbuild');
  mkdirSync(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  await esbuild
    .build({
      stdin: {
        contents: [
          `export { KubeConfig } from ${JSON.stringify(path.join(dist, 'dist', 'config.js'))};`,
          `export { Watch } from ${JSON.stringify(path.join(dist, 'dist', 'watch.js'))};`,
        ].join('\n'),
        resolveDir: dist,
        sourcefile: 'kube-client-node.js',
        loader: 'js',
      },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      outfile: tmp,
      logLevel: 'warning',
      // Any warning (a dynamic import it could not follow, import.meta in CommonJS) could change behaviour: refused below.
    })
    .then((r) => {
      if (r.warnings.length) throw new Error(`esbuild warned: ${r.warnings.map((w) => w.text).join('; ')}`);
    });
  renameSync(tmp, out);
  return out;
}

if (require.main === module) {
  buildKubeConfigBundle().then(
    (out) => process.stdout.write(`${path.relative(process.cwd(), out)}\n`),
    (err: unknown) => {
      process.stderr.write(`kube-client-node bundle failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
