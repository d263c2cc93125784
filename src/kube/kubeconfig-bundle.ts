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

/**
 * Two imports of the package's tree that this project never uses, replaced in the bundle:
 * - config.js imports createConfiguration and ServerConfiguration from the generated API (dist/gen/index.js, which
 *   re-exports its ~720 models) for makeApiClient alone: that import gets a module that refuses makeApiClient.
 * - node-fetch (Watch's) imports whatwg-url, with tr46's Unicode table (half the bundle's text, and a large array
 *   in the heap), as the URL class of a node without one (`Url.URL || whatwgUrl.URL`): it gets node's URL.
 * If either importer ever asks for another name, esbuild refuses the bundle (no such export) and the worker
 * loads the package.
 */
function withoutUnusedImports(dist: string): import('esbuild').Plugin {
  const config = path.join(dist, 'dist', 'config.js');
  const stubs: Record<string, string> = {
    'generated-api': [
      `const refuse = () => { throw new Error('makeApiClient is not in svm\\'s bundle of @kubernetes/client-node (KubeConfig and Watch only)'); };`,
      'export class ServerConfiguration { constructor() { refuse(); } }',
      'export function createConfiguration() { refuse(); }',
    ].join('\n'),
    'whatwg-url': 'export const URL = globalThis.URL;',
  };
  return {
    name: 'without-unused-imports',
    setup(build) {
      build.onResolve({ filter: /^\.\/gen\/index\.js$/ }, (args) =>
        args.importer === config ? { path: 'generated-api', namespace: 'svm-stub' } : undefined,
      );
      build.onResolve({ filter: /^whatwg-url$/ }, (args) =>
        /[\\/]node-fetch[\\/]/.test(args.importer) ? { path: 'whatwg-url', namespace: 'svm-stub' } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: 'svm-stub' }, (args) => ({ contents: stubs[args.path], loader: 'js' }));
    },
  };
}

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
      // Minified, with no comment left (legal ones included: the package's licence stays in node_modules): V8 holds
      // a module's source for as long as the process lives, and any character past Latin-1 (a comment's "§" or
      // "—") makes it hold all of it at two bytes a character.
      minify: true,
      legalComments: 'none',
      plugins: [withoutUnusedImports(dist)],
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
