/**
 * Unit tests of src/dev/preflight.ts: what `npm test` says it needs, what it
 * installs as root and why a run without root stops, on fake machines. Pure:
 * nothing is run or installed.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { checkRequirements, goAtLeast, renderPreflight, testRequirements, type Machine } from '../src/dev/preflight';

/** A machine with everything but `absent` (commands by name, files by path, 'root', 'apt-get'); goVersion null: no Go. */
function machine(absent: string[], goVersion: string | null = '1.26.8'): Machine {
  return {
    root: !absent.includes('root'),
    aptGet: !absent.includes('apt-get'),
    goVersion: goVersion ?? undefined,
    command: (name) => (absent.includes(name) ? undefined : `/usr/bin/${name}`),
    fileExists: (p) => !absent.includes(p),
  };
}

const postgres = testRequirements().find((r) => r.name === 'PostgreSQL 15')!;
const postgresFile = 'file' in postgres.look ? postgres.look.file : '';

void test('everything there: nothing to install, nothing missing, one line per requirement with its reason', () => {
  const p = checkRequirements(testRequirements(), machine([]));
  assert.deepEqual(p.install, []);
  assert.deepEqual(p.missing, []);
  const text = renderPreflight(p);
  for (const name of ['root', 'Go >= 1.26', 'haproxy', 'openssl', 'ip', 'unshare', 'PostgreSQL 15', 'chromium', 'promtool', 'prometheus'])
    assert.match(text, new RegExp(`^  ${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} +\\S.*: \\S`, 'm'), name);
  assert.match(text, /nothing to install/);
});

void test('as root with apt-get: the missing Debian packages are named once and installed in one go', () => {
  const p = checkRequirements(testRequirements(), machine(['haproxy', 'promtool', '/usr/bin/chromium', postgresFile]));
  assert.deepEqual(p.install, ['haproxy', 'postgresql-15', 'chromium', 'prometheus']);
  assert.deepEqual(p.missing, []);
  const text = renderPreflight(p);
  assert.match(text, /haproxy +missing: installing Debian's haproxy: the load balancer/);
  assert.match(text, /Installing with apt-get now \(as root\): haproxy postgresql-15 chromium prometheus/);
  assert.doesNotMatch(text, /cannot start/);
});

void test('without root: the run stops, listing root and every missing package with why and how', () => {
  const p = checkRequirements(testRequirements(), machine(['root', '/usr/bin/chromium', 'promtool']));
  assert.deepEqual(p.install, [], 'nothing is installed without root');
  assert.deepEqual(
    p.missing.map((m) => m.req.name),
    ['root', 'chromium', 'promtool'],
  );
  assert.match(p.missing[1]!.fix, /apt-get install -y --no-install-recommends chromium prometheus/);
  const text = renderPreflight(p);
  assert.match(text, /^ {2}root +MISSING: the cluster-shaped plane/m);
  assert.match(text, /npm test cannot start here/);
  assert.match(text, /^ {2}- root: run npm test as root/m);
  assert.match(text, /^ {2}- promtool: as root: apt-get install/m);
});

void test('root without apt-get, or a Go too old: named as missing, never guessed at', () => {
  const noApt = checkRequirements(testRequirements(), machine(['apt-get', 'haproxy']));
  assert.deepEqual(noApt.install, []);
  assert.deepEqual(
    noApt.missing.map((m) => [m.req.name, m.fix]),
    [['haproxy', "install Debian's haproxy (no apt-get here)"]],
  );
  const oldGo = checkRequirements(testRequirements(), machine([], '1.19.8'));
  assert.deepEqual(
    oldGo.missing.map((m) => m.req.name),
    ['Go >= 1.26'],
  );
  assert.equal(checkRequirements(testRequirements(), machine([], null)).missing[0]?.req.name, 'Go >= 1.26');
  assert.ok(goAtLeast('1.26.0', '1.26') && goAtLeast('1.27rc1', '1.26') && goAtLeast('2.0', '1.26'));
  assert.ok(!goAtLeast('1.25.9', '1.26') && !goAtLeast('1.3', '1.26'));
});
