/**
 * The project's container image built from its Dockerfile as it is, by podman, in a store of its own: for the
 * image's test (test/test-image.test.ts) and for `npm run bench:cli -- --image` (svm's start inside the image).
 *
 * No registry image can be pulled here, so the base the Dockerfile names (FROM node:20-bookworm-slim) is made
 * first, from Debian packages (scripts/image-base.sh: mmdebstrap of bookworm, this machine's Node.js 20 and npm
 * in /usr/local, the user `node` uid 1000, as the official image has them), and imported under that exact name;
 * the build then runs with pulls off. Everything lives in a podman store in a directory of the caller's (removed
 * by dispose()): nothing of another podman user is touched. When the caller names a directory to keep things in
 * (keepIn: the image's test, the tools' cache), two things are kept there between runs: the base's root filesystem,
 * under a key of what makes it (scripts/image-base.sh, this machine's Node.js and npm, the mirror) and for a week at
 * most (Debian's security updates), and a podman store with the layers of the last build (podman's own layer cache:
 * a step is reused only when its instruction, its files and every step before it are unchanged, so a changed
 * package-lock.json or Dockerfile makes that step and the ones after it again, and a new base makes them all). The
 * kept store holds one generation (what the last build made is tagged; everything else is pruned after each build)
 * and one run at a time (an flock on its directory, held by a child process that ends with this one). A release
 * (scripts/release.ts) and the bench keep nothing: a store of their own, built from scratch.
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
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
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
  return (await runBoth(file, args, timeout)).stdout;
}

/** runIn, with what the command wrote to stderr too. */
async function runBoth(file: string, args: string[], timeout = 60_000): Promise<{ stdout: string; stderr: string }> {
  try {
    return await execFileP(file, args, { cwd: packageRoot(), env: cleanEnv(), maxBuffer: 256 * 1024 * 1024, timeout });
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

/** One step of a build: the Dockerfile's instruction as podman printed it, and whether its layer was reused. */
export interface BuildStep {
  step: string;
  reused: boolean;
}

/** The build's steps that make a layer, from podman build's output ("[1/2] STEP 3/22: RUN ...", then "--> Using cache <id>" when reused). */
export function buildSteps(output: string): BuildStep[] {
  const steps: BuildStep[] = [];
  for (const line of output.split('\n')) {
    const m = /STEP \d+\/\d+: (.*)$/.exec(line);
    if (m) {
      // A FROM makes no layer: it names the image the next steps build on.
      if (!/^FROM /i.test(m[1]!.trim())) steps.push({ step: m[1]!.trim(), reused: false });
    } else if (/^--> Using cache /.test(line.trim()) && steps.length) steps[steps.length - 1]!.reused = true;
  }
  return steps;
}

/** The tag that keeps the build stage's last layer (and so its chain, npm ci's among them) from the prune. */
const KEPT_BUILD_STAGE = 'localhost/svm-kept-build-stage:latest';

/**
 * A podman store and the image built into it: in work (a directory of the caller's), or, with keepIn, in
 * keepIn/store, kept between runs (one generation, one run at a time) with the base in keepIn.
 */
export class ImageStore {
  readonly podmanArgs: string[];
  /** Seconds each step of build() took: base rootfs, base import, build. */
  readonly seconds: Record<string, number> = {};
  /** The Dockerfile's steps the last build() ran, each reused from the kept store or made. */
  steps: BuildStep[] = [];
  /** Whether build() took its base image from the kept store rather than importing it. */
  baseImportKept = false;
  /** What build() found of the kept store: absent, whole, or unreadable (then removed and made again). */
  storeFound: 'none' | 'kept' | 'unreadable' = 'none';
  private readonly storeDir: string;
  private lock?: ChildProcessWithoutNullStreams;

  constructor(
    readonly work: string,
    readonly opts: { keepIn?: string } = {},
  ) {
    this.storeDir = opts.keepIn ? path.join(opts.keepIn, 'store') : work;
    this.podmanArgs = [
      '--root',
      path.join(this.storeDir, 'storage'),
      '--runroot',
      path.join(this.storeDir, 'run'),
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
   * and any further build arguments (the release's: its OCI labels, scripts/release.ts). With keepIn, the kept
   * store's lock is taken first (and held until dispose()), the base is imported only when it is not the one the
   * store already has, the build stage is built and tagged on its own first (its layers are then reused by the whole
   * build), and afterwards every image not of this build is pruned.
   */
  async build(tag: string, revision: string, buildArgs: Record<string, string> = {}): Promise<void> {
    const keepIn = this.opts.keepIn;
    if (keepIn) await this.timed('lock', () => this.takeLock(keepIn));
    const root = packageRoot();
    const tar = await this.timed('base rootfs', () => this.baseRootfs(keepIn));
    await this.timed('base import', () => this.importBase(tar));
    if (!keepIn) fs.rmSync(tar);
    const { npmrc, mounts } = await hostNpmrc();
    fs.writeFileSync(path.join(this.work, 'npmrc'), npmrc);
    const args = (target: string[], t: string) => [
      'build',
      '--pull=never',
      '--layers',
      '--network',
      'host',
      ...PODMAN_LIMITS,
      '-v',
      `${path.join(this.work, 'npmrc')}:/usr/local/etc/npmrc:ro`,
      ...mounts,
      '--build-arg',
      `SVM_GIT_REVISION=${revision}`,
      ...Object.entries(buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]),
      ...target,
      '-f',
      'Dockerfile',
      '-t',
      t,
      root,
    ];
    const out = (r: { stdout: string; stderr: string }) => `${r.stdout}\n${r.stderr}`;
    await this.timed('build', async () => {
      // The build stage tagged first: without a tag its chain would be pruned as soon as the image is built.
      const stage = keepIn ? buildSteps(out(await this.podmanBoth(args(['--target', 'build'], KEPT_BUILD_STAGE), 1_500_000))) : [];
      const all = buildSteps(out(await this.podmanBoth(args([], tag), 1_500_000)));
      // A build-stage step counts as reused only when the first build reused it too.
      this.steps = all.map((s, i) => (i < stage.length ? { step: s.step, reused: s.reused && stage[i]!.reused } : s));
    });
    if (keepIn) await this.timed('prune', () => this.prune());
  }

  /** How the last build() went, in one line: seconds, what was kept, which steps were made and which reused. */
  buildReport(): string {
    const sec = (k: string) => `${(this.seconds[k] ?? 0).toFixed(0)}s`;
    const short = (s: string) => (s.length > 48 ? `${s.slice(0, 45)}...` : s);
    const made = this.steps.filter((s) => !s.reused).map((s) => short(s.step));
    const reused = this.steps.filter((s) => s.reused).map((s) => short(s.step));
    return (
      `base rootfs ${sec('base rootfs')}${this.baseKept ? ' (kept)' : ' (made)'}, ` +
      `import ${sec('base import')}${this.baseImportKept ? ' (kept in the store)' : ''}, ` +
      `build ${sec('build')}: ${made.length} steps made${made.length ? ` [${made.join('; ')}]` : ''}, ` +
      `${reused.length} reused${reused.length ? ` [${reused.join('; ')}]` : ''}` +
      (this.opts.keepIn ? `; store ${this.storeFound}, lock ${sec('lock')}, prune ${sec('prune')}` : '')
    );
  }

  private async podmanBoth(args: string[], timeout?: number): Promise<{ stdout: string; stderr: string }> {
    return runBoth('podman', [...this.podmanArgs, ...args], timeout);
  }

  /**
   * The kept store's lock: flock on keepIn/store.lock, held by a child that waits on its stdin, so that it is let go
   * when dispose() closes that stdin or this process ends in any way. A run that finds it held waits (30 min at most).
   */
  private async takeLock(keepIn: string): Promise<void> {
    fs.mkdirSync(keepIn, { recursive: true });
    const child = spawn('flock', ['-x', '-w', '1800', path.join(keepIn, 'store.lock'), 'sh', '-c', 'echo locked; exec cat >/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      let said = '';
      child.stdout.on('data', (d: Buffer) => {
        said += d.toString();
        if (said.includes('locked')) resolve();
      });
      child.stderr.on('data', (d: Buffer) => (said += d.toString()));
      child.on('error', reject);
      child.on('exit', (code) => reject(new Error(`the kept image store's lock (${keepIn}/store.lock) not taken: exit ${code} ${said}`)));
    });
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void }).unref?.();
    this.lock = child;
    // A store that podman cannot read (a run killed mid-write, another podman) is removed and made again.
    if (!fs.existsSync(path.join(this.storeDir, 'storage'))) return;
    try {
      await this.podman(['image', 'ls', '-q'], 120_000);
      this.storeFound = 'kept';
    } catch {
      this.storeFound = 'unreadable';
      fs.rmSync(this.storeDir, { recursive: true, force: true });
    }
  }

  /**
   * The base image under IMAGE_BASE: imported from tar, or, in a kept store that imported this very tar (its name,
   * which is its key, and its time) and still has the image, that one (a new import would be a new image, and every
   * layer above it would be made again).
   */
  private async importBase(tar: string): Promise<void> {
    const marker = path.join(this.storeDir, 'base-imported');
    const mark = `${path.basename(tar)} ${fs.statSync(tar).mtimeMs}`;
    if (this.opts.keepIn && fs.existsSync(marker) && fs.readFileSync(marker, 'utf8') === mark) {
      const present = await this.podman(['image', 'exists', IMAGE_BASE]).then(
        () => true,
        () => false,
      );
      if (present) {
        this.baseImportKept = true;
        return;
      }
    }
    fs.rmSync(marker, { force: true });
    await this.podman(['import', '--change', 'CMD ["node"]', tar, IMAGE_BASE], 300_000);
    if (this.opts.keepIn) fs.writeFileSync(marker, mark);
  }

  /**
   * The kept store down to one generation: the images this build tagged (the image, the build stage, the base) and
   * the layers under them. An image no longer tagged (the last run's, a base replaced) has no name and, once the ones
   * above it are gone, no child: podman's prune removes such images, so it runs until it removes nothing.
   */
  private async prune(): Promise<void> {
    for (let i = 0; i < 50; i++) if (!(await this.podman(['image', 'prune', '--force'], 300_000)).trim()) return;
  }

  /** Every image in the store, the intermediate layers' too. */
  async imageCount(): Promise<number> {
    return (await this.podman(['images', '--all', '--quiet', '--no-trunc'])).split('\n').filter((l) => l.trim()).length;
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

  /**
   * Removes the store's containers, then its images (a kept store keeps this build's, for the next run), then the
   * work directory; lets the kept store's lock go.
   */
  async dispose(): Promise<void> {
    await this.podman(['rm', '--all', '--force'], 120_000).catch(() => undefined);
    if (!this.opts.keepIn) await this.podman(['rmi', '--all', '--force'], 120_000).catch(() => undefined);
    fs.rmSync(this.work, { recursive: true, force: true });
    this.lock?.stdin.end();
    this.lock = undefined;
  }
}
