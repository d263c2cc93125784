/**
 * What `npm test` needs on the machine before it starts, said once: root, Go,
 * Debian's haproxy, openssl, iproute2, util-linux, PostgreSQL 15, chromium,
 * Prometheus (promtool, and its server for test-metrics), podman, runc and
 * mmdebstrap (test-image). As root, the Debian packages that are
 * missing are installed with apt-get, in one go, after saying so; without
 * root the run stops at once with what is missing and why each is needed.
 *
 * `checkRequirements` is pure (a unit test gives it a fake machine);
 * `probeMachine` looks at the real one; scripts/preflight.ts runs both.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { commandPath } from './network';
import { PG_BIN } from './temporal-server';

export interface Requirement {
  /** How the list names it. */
  name: string;
  /** Why the suite needs it. */
  why: string;
  /** What is looked for: a command on PATH (or in the sbin directories), or an absolute path. */
  look: { command: string } | { file: string } | { root: true } | { go: string };
  /** The Debian package that provides it (installed with apt-get as root); none for root and Go. */
  debianPackage?: string;
  /** How to get it when no package can: shown with the missing item. */
  howTo?: string;
}

/** The minimum Go (scripts/tools-lib.sh refuses an older one: Kubernetes v1.37 says `go 1.26.0`). */
export const MIN_GO = '1.26';

/** Everything `npm test` needs from the machine, in the order the block lists it. */
export function testRequirements(): Requirement[] {
  return [
    {
      name: 'root',
      why: 'the cluster-shaped plane (network namespaces, a bridge, a host name per API server), PostgreSQL run as its own user, installing what is missing',
      look: { root: true },
      howTo: 'run npm test as root (e.g. in a CI container or a VM); svm dev up and npm run demo do not need it',
    },
    {
      name: `Go >= ${MIN_GO}`,
      why: 'building etcd, Kubernetes, Temporal, Helm and the Go example from their Go modules (scripts/tools.sh)',
      look: { go: MIN_GO },
      howTo: `install Go >= ${MIN_GO} from go.dev/dl (Debian's golang is older) with access to the Go module proxy`,
    },
    {
      name: 'haproxy',
      why: 'the load balancer in front of the API servers (the one address the worker sees)',
      look: { command: 'haproxy' },
      debianPackage: 'haproxy',
    },
    { name: 'openssl', why: "the plane's CA and its servers' certificates", look: { command: 'openssl' }, debianPackage: 'openssl' },
    { name: 'ip', why: "the plane's network namespaces, veth pairs and bridge", look: { command: 'ip' }, debianPackage: 'iproute2' },
    {
      name: 'unshare',
      why: 'a host name, so an identity, of its own for each API server',
      look: { command: 'unshare' },
      debianPackage: 'util-linux',
    },
    {
      name: 'PostgreSQL 15',
      why: 'temporal-server on PostgreSQL, as users deploy it (test-temporal-server*; a private cluster, not the system service)',
      look: { file: path.join(PG_BIN, 'postgres') },
      debianPackage: 'postgresql-15',
    },
    {
      name: 'chromium',
      why: "the Temporal Web UI test (Debian's browser; none is downloaded)",
      look: { file: '/usr/bin/chromium' },
      debianPackage: 'chromium',
    },
    {
      name: 'promtool',
      why: "checking the shipped alert rules and dashboard queries (Debian's prometheus)",
      look: { command: 'promtool' },
      debianPackage: 'prometheus',
    },
    {
      name: 'prometheus',
      why: 'scraping workers as the chart wires them, the alerts evaluated live (test-metrics)',
      look: { command: 'prometheus' },
      debianPackage: 'prometheus',
    },
    {
      name: 'podman',
      why: 'building the Dockerfile and running the worker from the image (test-image)',
      look: { command: 'podman' },
      debianPackage: 'podman',
    },
    {
      name: 'runc',
      why: "the OCI runtime test-image gives podman (Debian's crun refuses a hybrid cgroup layout)",
      look: { command: 'runc' },
      debianPackage: 'runc',
    },
    {
      name: 'mmdebstrap',
      why: "the image's base made from Debian packages (no registry image can be pulled)",
      look: { command: 'mmdebstrap' },
      debianPackage: 'mmdebstrap',
    },
  ];
}

/** What the machine answers: a fake one in the unit test. */
export interface Machine {
  root: boolean;
  aptGet: boolean;
  /** `go env GOVERSION` without the `go` prefix, or undefined when there is no go command. */
  goVersion?: string;
  /** Where a command is, or undefined. */
  command(name: string): string | undefined;
  fileExists(p: string): boolean;
}

export interface Check {
  req: Requirement;
  /** Where it was found (a path, "yes", a version), or undefined when missing. */
  found?: string;
}

export interface Preflight {
  checks: Check[];
  /** Debian packages to install with apt-get (root with apt-get only). */
  install: string[];
  /** Missing and not installable here: the run must stop. */
  missing: Array<{ req: Requirement; fix: string }>;
}

/** Whether `version` (1.26.8, 1.27rc1) is at least `min` (1.26). */
export function goAtLeast(version: string, min: string): boolean {
  const a = version.split(/[.a-z]/).map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < b.length; i++) {
    const x = a[i] ?? 0;
    if (Number.isNaN(x)) return false;
    if (x !== b[i]) return x > b[i]!;
  }
  return true;
}

export function checkRequirements(reqs: Requirement[], m: Machine): Preflight {
  const checks: Check[] = reqs.map((req) => {
    const l = req.look;
    if ('root' in l) return { req, found: m.root ? 'yes' : undefined };
    if ('go' in l) return { req, found: m.goVersion && goAtLeast(m.goVersion, l.go) ? `go${m.goVersion}` : undefined };
    if ('command' in l) return { req, found: m.command(l.command) };
    return { req, found: m.fileExists(l.file) ? l.file : undefined };
  });
  const absent = checks.filter((c) => c.found === undefined);
  const packages = absent.flatMap((c) => (c.req.debianPackage ? [c.req.debianPackage] : []));
  const canInstall = m.root && m.aptGet;
  const install = canInstall ? packages : [];
  const missing = absent
    .filter((c) => !canInstall || !c.req.debianPackage)
    .map(({ req }) => {
      let fix: string;
      if (!req.debianPackage) fix = req.howTo ?? 'install it';
      else if (!m.aptGet) fix = `install Debian's ${req.debianPackage} (no apt-get here)`;
      else fix = `as root: apt-get install -y --no-install-recommends ${packages.join(' ')} (npm test as root installs them itself)`;
      return { req, fix };
    });
  return { checks, install, missing };
}

/** The one block npm test prints before it starts: each requirement, where it is (or what happens), and why. */
export function renderPreflight(p: Preflight): string {
  const width = Math.max(...p.checks.map((c) => c.req.name.length));
  const lines = ['npm test needs, on this machine (scripts/preflight.ts):'];
  for (const c of p.checks) {
    const pkg = c.req.debianPackage;
    const state = c.found ?? (pkg && p.install.includes(pkg) ? `missing: installing Debian's ${pkg}` : 'MISSING');
    lines.push(`  ${c.req.name.padEnd(width)}  ${state}: ${c.req.why}`);
  }
  if (p.missing.length > 0) {
    lines.push(`npm test cannot start here; what is missing, and how to get it:`);
    for (const x of p.missing) lines.push(`  - ${x.req.name}: ${x.fix}`);
  } else if (p.install.length > 0) lines.push(`Installing with apt-get now (as root): ${p.install.join(' ')}`);
  else lines.push('All there; nothing to install.');
  return lines.join('\n') + '\n';
}

/** The real machine. */
export function probeMachine(): Machine {
  let goVersion: string | undefined;
  try {
    goVersion = execFileSync('go', ['env', 'GOVERSION'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .trim()
      .replace(/^go/, '');
  } catch {
    goVersion = undefined;
  }
  return {
    root: process.getuid?.() === 0,
    aptGet: commandPath('apt-get') !== undefined,
    goVersion,
    command: commandPath,
    fileExists: (p) => fs.existsSync(p),
  };
}
