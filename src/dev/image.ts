/**
 * The project's container image built from its Dockerfile as it is, by podman, in a store of its own: for the
 * image's test (test/test-image.test.ts) and for `npm run bench:cli -- --image` (svm's start inside the image).
 *
 * No registry image can be pulled here, so the base the Dockerfile names (FROM node:20-bookworm-slim) is made
 * first, from Debian packages (scripts/image-base.sh: mmdebstrap of bookworm, this machine's Node.js 20 and npm
 * in /usr/local, the user `node` uid 1000, as the official image has them), and imported under that exact name;
 * the build then runs with pulls off. Everything lives in a podman store in a directory of the caller's (removed
 * by dispose()): nothing of another podman user is touched. Only the base's root filesystem may be kept between
 * runs, when the caller names a directory for it (the image's test: the tools' cache), under a key of what makes it
 * (scripts/image-base.sh, this machine's Node.js and npm, the mirror) and for a week at most (Debian's security
 * updates): a release builds its base afresh.
 *
 * The build's `npm ci` reaches the registry the host's npm uses, with the host's npm settings that make that
 * possible (registry, CA file, proxies) in a global npmrc mounted for the build only, and the host's npm cache
 * mounted as an overlay (what the build adds to it is thrown away): packages the host's `npm ci` already
 * fetched are not fetched again. Build mounts are not part of any layer.
 *
 * This machine's podman needs two settings passed everywhere: runc (Debian's crun 1.8 refuses the hybrid
 * cgroup layout here), and open-file and process limits within the machine's own (podman's defaults are
 * higher, and raising a limit needs a capability the caller does not have): PODMAN_LIMITS.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { packageRoot } from '../config/build-info';

const execFileP = promisify(execFile);
export const IMAGE_BASE = 'docker.io/library/node:20-bookworm-slim';
export const PODMAN_LIMITS = ['--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096'];

/** The same environment as this process's, minus what would point npm or node into this checkout. */
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(NODE_OPTIONS|NODE_TEST_CONTEXT|npm_)/i.test(k)));

/** Runs file in the checkout with a clean environment; a failure says the command and the end of its output. */
export async function runIn(file: string, args: string[], timeout = 60_000): Promise<string> {
  try {
    return (await execFileP(file, args, { cwd: packageRoot(), env: cleanEnv(), maxBuffer: 256 * 1024 * 1024, timeout })).stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    const tail = (s = '') => s.split('\n').slice(-40).join('\n');
    throw new Error(`${file} ${args.join(' ')}: ${e.message}\n${tail(e.stdout)}\n${tail(e.stderr)}`);
  }
}

/** A kept base is made again after this long: the mirror's security updates reach the test's image weekly. */
const BASE_KEPT_MS = 7 * 24 * 3600_000;

/**
 * Where the base made from what makes it now is kept in dir: a key of scripts/image-base.sh, this machine's node
 * (its version and path) and npm, and the mirror. Older keys in dir are removed by the caller once a new one is made.
 */
export async function keptBasePath(dir: string): Promise<string> {
  const root = packageRoot();
  const npm = (await runIn('npm', ['--version'])).trim();
  const key = createHash('sha256')
    .update(fs.readFileSync(path.join(root, 'scripts', 'image-base.sh')))
    .update(`\0${process.version}\0${fs.realpathSync(process.execPath)}\0${npm}\0${process.env.MIRROR ?? ''}`)
    .digest('hex')
    .slice(0, 16);
  return path.join(dir, `node-base-${key}.tar`);
}

/** The host npm's settings that let it reach its registry, as an npmrc, and the mounts they need. */
async function hostNpmrc(): Promise<{ npmrc: string; mounts: string[] }> {
  const get = async (key: string) => (await runIn('npm', ['config', 'get', key])).trim();
  const lines = [`registry=${await get('registry')}`];
  const mounts: string[] = [];
  for (const key of ['proxy', 'https-proxy', 'noproxy', 'strict-ssl']) {
    const v = await get(key);
    if (v && v !== 'null' && v !== 'undefined' && !(key === 'strict-ssl' && v === 'true')) lines.push(`${key}=${v}`);
  }
  const cafile = await get('cafile');
  if (cafile && cafile !== 'null' && cafile !== 'undefined') {
    lines.push('cafile=/etc/svm-build-npm-ca.crt');
    mounts.push('-v', `${cafile}:/etc/svm-build-npm-ca.crt:ro`);
  }
  const cache = await get('cache');
  if (fs.existsSync(cache)) mounts.push('-v', `${cache}:/root/.npm:O`);
  return { npmrc: `${lines.join('\n')}\n`, mounts };
}

/** A podman store in work (a directory of the caller's) and the image built into it. */
export class ImageStore {
  readonly podmanArgs: string[];
  /** Seconds each step of build() took: base rootfs, base import, build. */
  readonly seconds: Record<string, number> = {};

  constructor(readonly work: string) {
    this.podmanArgs = [
      '--root',
      path.join(work, 'storage'),
      '--runroot',
      path.join(work, 'run'),
      '--storage-driver',
      'overlay',
      '--runtime',
      'runc',
    ];
  }

  /** Fails with what to do when a program the build needs is missing (npm test installs them as root). */
  static async preflight(): Promise<void> {
    for (const cmd of ['podman', 'mmdebstrap', 'runc'])
      await runIn('sh', ['-c', `command -v ${cmd}`]).catch(() => {
        throw new Error(`${cmd} is missing: npm test installs it as root (scripts/preflight.ts, from Debian)`);
      });
  }

  podman(args: string[], timeout?: number): Promise<string> {
    return runIn('podman', [...this.podmanArgs, ...args], timeout);
  }

  private async timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    const v = await fn();
    this.seconds[what] = (Date.now() - t0) / 1000;
    return v;
  }

  /**
   * The base from Debian, then the Dockerfile of the checkout as it is, tagged tag, with revision as SVM_GIT_REVISION
   * and any further build arguments (the release's: its OCI labels, scripts/release.ts).
   */
  async build(tag: string, revision: string, buildArgs: Record<string, string> = {}, opts: { keepBaseIn?: string } = {}): Promise<void> {
    const root = packageRoot();
    const tar = await this.timed('base rootfs', () => this.baseRootfs(opts.keepBaseIn));
    await this.timed('base import', () => this.podman(['import', '--change', 'CMD ["node"]', tar, IMAGE_BASE], 300_000));
    if (!opts.keepBaseIn) fs.rmSync(tar);
    const { npmrc, mounts } = await hostNpmrc();
    fs.writeFileSync(path.join(this.work, 'npmrc'), npmrc);
    await this.timed('build', () =>
      this.podman(
        [
          'build',
          '--pull=never',
          '--network',
          'host',
          ...PODMAN_LIMITS,
          '-v',
          `${path.join(this.work, 'npmrc')}:/usr/local/etc/npmrc:ro`,
          ...mounts,
          '--build-arg',
          `SVM_GIT_REVISION=${revision}`,
          ...Object.entries(buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]),
          '-f',
          'Dockerfile',
          '-t',
          tag,
          root,
        ],
        1_500_000,
      ),
    );
  }

  /** Whether build() took its base from the kept ones (keepBaseIn) rather than making it. */
  baseKept = false;

  /**
   * The base's root filesystem as a tarball: made by scripts/image-base.sh in the store, or, with keepBaseIn, the one
   * kept there under the key of what makes it when it is younger than a week (else made there, by a rename once
   * whole, and the other keys removed).
   */
  private async baseRootfs(keepBaseIn?: string): Promise<string> {
    const make = (out: string) => runIn('bash', [path.join(packageRoot(), 'scripts', 'image-base.sh'), out], 900_000);
    if (!keepBaseIn) {
      const tar = path.join(this.work, 'base.tar');
      await make(tar);
      return tar;
    }
    const kept = await keptBasePath(keepBaseIn);
    const age = fs.existsSync(kept) ? Date.now() - fs.statSync(kept).mtimeMs : Infinity;
    if (age < BASE_KEPT_MS) {
      this.baseKept = true;
      return kept;
    }
    fs.mkdirSync(keepBaseIn, { recursive: true });
    const partial = `${kept}.${process.pid}.partial`;
    await make(partial);
    fs.renameSync(partial, kept);
    for (const f of fs.readdirSync(keepBaseIn))
      if (f.startsWith('node-base-') && path.join(keepBaseIn, f) !== kept) fs.rmSync(path.join(keepBaseIn, f), { force: true });
    return kept;
  }

  /** Removes the store's containers and images, then the directory. */
  async dispose(): Promise<void> {
    await this.podman(['rm', '--all', '--force'], 120_000).catch(() => undefined);
    await this.podman(['rmi', '--all', '--force'], 120_000).catch(() => undefined);
    fs.rmSync(this.work, { recursive: true, force: true });
  }
}
