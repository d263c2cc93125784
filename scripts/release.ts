/**
 * `npm run release`: everything a release publishes, built from this checkout with one version, into one
 * directory (release/<version>/, git-ignored), ready to push and upload as it is:
 *
 *   svm-image-<version>.oci.tar   the container image (the Dockerfile as it is, built by podman as
 *                                 test/test-image builds it: src/dev/image.ts), with its OCI labels, as an OCI
 *                                 archive; its manifest digest is printed and written to image-digest
 *   svm-<version>.tgz             the Helm chart (helm package), whose default image is that build:
 *                                 image.repository, image.tag <version>, image.digest the manifest digest
 *   temporal-storage-version-migrator-<version>.tgz          the CLI's npm package (npm pack)
 *   temporal-storage-version-migrator-client-<version>.tgz   the typed client's (packages/client/pack.mjs)
 *   SHA256SUMS                    sha256 of each, as sha256sum writes them (sha256sum -c SHA256SUMS checks)
 *
 *   npm run release -- [--version X] [--repository REGISTRY/NAME] [--source URL] [--out DIR] [--no-image] [--allow-dirty]
 *
 * The version is package.json's, or --version X: then X is written into package.json, package-lock.json and
 * packages/client/package.json for the build and they are put back after (commit a version bump to release it for
 * real). The tree must be clean (--allow-dirty: the labels' revision is the commit all the same). --no-image:
 * no image, and the chart's default image is <repository>:<version> without a digest.
 *
 * Publishing is then: `skopeo copy --preserve-digests oci-archive:svm-image-<v>.oci.tar docker://<repository>:<v>`
 * (keeps the digest the chart names), `helm push svm-<v>.tgz oci://<registry>/charts`, `npm publish` of each tarball.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ImageStore, runIn } from '../src/dev/image';

const root = path.join(__dirname, '..');
const HELM = process.env.HELM ?? path.join(os.homedir(), '.cache', 'svm-tools', 'bin', 'helm-v4.3.1');
const SEMVER = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
const REPOSITORY = /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+$/;

interface ReleaseArgs {
  version?: string;
  repository?: string;
  source?: string;
  out?: string;
  image: boolean;
  allowDirty: boolean;
}

/** The flags; an unknown one or a missing value is refused before anything is built. */
export function parseReleaseArgs(argv: string[]): ReleaseArgs {
  const a: ReleaseArgs = { image: true, allowDirty: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === '--version') a.version = value();
    else if (flag === '--repository') a.repository = value();
    else if (flag === '--source') a.source = value();
    else if (flag === '--out') a.out = value();
    else if (flag === '--no-image') a.image = false;
    else if (flag === '--allow-dirty') a.allowDirty = true;
    else throw new Error(`unknown flag ${flag} (--version, --repository, --source, --out, --no-image, --allow-dirty)`);
  }
  if (a.version !== undefined && !SEMVER.test(a.version))
    throw new Error(`--version ${a.version} is not a semantic version (1.2.3, 1.2.3-rc.1)`);
  if (a.repository !== undefined && !REPOSITORY.test(a.repository))
    throw new Error(`--repository ${a.repository} is not an image repository (registry.example.com/team/svm), without tag or digest`);
  return a;
}

const readJson = <T>(file: string) => JSON.parse(fs.readFileSync(file, 'utf8')) as T;
const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
const say = (s: string) => process.stderr.write(`release: ${s}\n`);

/** The chart's image repository default (values.yaml's image.repository). */
function chartRepository(values: string): string {
  const m = /^image:\n(?:[ \t]*#.*\n|[ \t]+\w+:.*\n)*?[ \t]+repository:[ \t]*(\S+)/m.exec(values);
  if (!m) throw new Error('charts/svm/values.yaml: no image.repository');
  return m[1]!;
}

/** values.yaml with the image block's repository, tag and digest set (comments kept). */
export function withImage(values: string, image: { repository: string; tag: string; digest: string }): string {
  const start = values.search(/^image:\n/m);
  if (start < 0) throw new Error('values.yaml: no image block');
  const end = values.slice(start + 7).search(/^\S/m);
  const block = values.slice(start, end < 0 ? undefined : start + 7 + end);
  let next = block;
  for (const [key, v] of Object.entries(image)) {
    const re = new RegExp(`^([ \\t]+${key}:)[ \\t]*.*$`, 'm');
    if (!re.test(next)) throw new Error(`values.yaml: no image.${key}`);
    next = next.replace(re, `$1 ${JSON.stringify(v)}`);
  }
  return values.replace(block, next);
}

/** Chart.yaml with version and appVersion set. */
export function withChartVersion(chart: string, version: string): string {
  if (!/^version:/m.test(chart) || !/^appVersion:/m.test(chart)) throw new Error('Chart.yaml: no version or appVersion');
  return chart.replace(/^version:.*$/m, `version: ${version}`).replace(/^appVersion:.*$/m, `appVersion: "${version}"`);
}

/** Sets the version in the files npm packs from, for the build; returns what puts them back. */
function stampVersion(version: string): () => void {
  const files = ['package.json', 'package-lock.json', 'packages/client/package.json'].map((f) => path.join(root, f));
  const saved = files.map((f) => fs.readFileSync(f, 'utf8'));
  for (const f of files) {
    const j = readJson<{ version: string; packages?: Record<string, { version?: string }> }>(f);
    j.version = version;
    if (j.packages?.['']) j.packages[''].version = version;
    fs.writeFileSync(f, JSON.stringify(j, null, 2) + '\n');
  }
  return () => files.forEach((f, i) => fs.writeFileSync(f, saved[i]!));
}

const sha256 = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/** The manifest digest in an OCI archive (its index.json's one manifest). */
function ociArchiveDigest(archive: string): string {
  const index = JSON.parse(execFileSync('tar', ['-xOf', archive, 'index.json'], { encoding: 'utf8' })) as {
    manifests: Array<{ digest: string }>;
  };
  if (index.manifests.length !== 1) throw new Error(`${archive}: ${index.manifests.length} manifests in index.json, not 1`);
  return index.manifests[0]!.digest;
}

async function release(a: ReleaseArgs): Promise<void> {
  const pkg = readJson<{ version: string; license: string }>(path.join(root, 'package.json'));
  const version = a.version ?? pkg.version;
  const dirty = git('status', '--porcelain', '--untracked-files=no');
  if (dirty && !a.allowDirty) throw new Error(`the tree has uncommitted changes (release from a commit, or --allow-dirty):\n${dirty}`);
  const commit = git('rev-parse', 'HEAD');
  const short = git('rev-parse', '--short', 'HEAD');
  const values = fs.readFileSync(path.join(root, 'charts', 'svm', 'values.yaml'), 'utf8');
  const repository = a.repository ?? chartRepository(values);
  const source =
    a.source ??
    process.env.SVM_SOURCE_URL ??
    (() => {
      try {
        return git('remote', 'get-url', 'origin');
      } catch {
        return undefined;
      }
    })();
  if (!source)
    throw new Error('no source URL for the image label org.opencontainers.image.source: give --source URL (or a git remote origin)');
  if (!fs.existsSync(HELM)) throw new Error(`no helm at ${HELM} (npm run tools builds it; HELM=/path/to/helm)`);
  const out = path.resolve(a.out ?? path.join(root, 'release', version));
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const created = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  say(`svm ${version} from ${short}${dirty ? ' (with uncommitted changes)' : ''} into ${path.relative(process.cwd(), out) || '.'}`);

  const restore = version === pkg.version ? () => undefined : stampVersion(version);
  const t0 = Date.now();
  const seconds: Record<string, number> = {};
  const timed = async <T>(what: string, fn: () => Promise<T> | T): Promise<T> => {
    const t = Date.now();
    const v = await fn();
    seconds[what] = (Date.now() - t) / 1000;
    return v;
  };
  let digest = '';
  try {
    // The npm packages: the CLI's (prepack builds dist/), then the client's (it builds dist/ again, the same way).
    await timed('npm packages', () => {
      execFileSync('npm', ['pack', '--pack-destination', out, '--loglevel=error'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
      execFileSync(process.execPath, [path.join(root, 'packages', 'client', 'pack.mjs'), '--pack-destination', out], {
        cwd: root,
        stdio: ['ignore', 'ignore', 'inherit'],
      });
    });

    if (a.image) {
      await ImageStore.preflight();
      const store = new ImageStore(fs.mkdtempSync(path.join(os.tmpdir(), 'svm-release-image-')));
      try {
        const tag = `${repository}:${version}`;
        await timed('image', () =>
          store.build(tag, short, { SVM_VERSION: version, SVM_GIT_COMMIT: commit, SVM_SOURCE: source, SVM_CREATED: created }),
        );
        const archive = path.join(out, `svm-image-${version}.oci.tar`);
        await timed('image archive', () => store.podman(['save', '--format', 'oci-archive', '-o', archive, tag], 600_000));
        digest = ociArchiveDigest(archive);
        const labels = JSON.parse(await store.podman(['image', 'inspect', '--format', '{{json .Labels}}', tag])) as Record<string, string>;
        for (const [k, v] of Object.entries(labels)
          .filter(([k]) => k.startsWith('org.opencontainers.image.'))
          .sort())
          say(`  label ${k}=${v}`);
        fs.writeFileSync(path.join(out, 'image-digest'), `${repository}@${digest}\n`);
        say(`image ${tag}, digest ${digest} (${seconds.image!.toFixed(0)} s)`);
      } finally {
        await store.dispose();
      }
    }
  } finally {
    restore();
  }

  // The chart: version and appVersion the release's, its default image this build.
  await timed('chart', async () => {
    const staged = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-release-chart-'));
    try {
      const chart = path.join(staged, 'svm');
      fs.cpSync(path.join(root, 'charts', 'svm'), chart, { recursive: true });
      fs.writeFileSync(path.join(chart, 'Chart.yaml'), withChartVersion(fs.readFileSync(path.join(chart, 'Chart.yaml'), 'utf8'), version));
      fs.writeFileSync(path.join(chart, 'values.yaml'), withImage(values, { repository, tag: version, digest }));
      await runIn(HELM, ['lint', chart]);
      await runIn(HELM, ['package', chart, '--destination', out]);
      const rendered = await runIn(HELM, ['template', 'svm', path.join(out, `svm-${version}.tgz`)]);
      const image = digest ? `${repository}@${digest}` : `${repository}:${version}`;
      if (!rendered.includes(`image: ${image}`) && !rendered.includes(`image: "${image}"`))
        throw new Error(`the packaged chart does not render the image ${image}`);
    } finally {
      fs.rmSync(staged, { recursive: true, force: true });
    }
  });

  const files = fs
    .readdirSync(out)
    .filter((f) => f !== 'SHA256SUMS')
    .sort();
  fs.writeFileSync(path.join(out, 'SHA256SUMS'), files.map((f) => `${sha256(path.join(out, f))}  ${f}\n`).join(''));
  for (const f of [...files, 'SHA256SUMS'])
    say(`  ${f.padEnd(58)} ${(fs.statSync(path.join(out, f)).size / 1024 / 1024).toFixed(1).padStart(7)} MiB`);
  say(
    `done in ${((Date.now() - t0) / 1000).toFixed(0)} s (${Object.entries(seconds)
      .map(([k, v]) => `${k} ${v.toFixed(0)} s`)
      .join(', ')})`,
  );
  process.stdout.write(`${out}\n`);
}

if (require.main === module) {
  let args: ReleaseArgs;
  try {
    args = parseReleaseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exit(2);
  }
  release(args).catch((err: unknown) => {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
