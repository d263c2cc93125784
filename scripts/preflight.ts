/**
 * The first step of `npm test` (scripts/test.sh): says once what the suite
 * needs from the machine, installs the missing Debian packages as root (one
 * apt-get), and otherwise stops at once with what is missing and why
 * (src/dev/preflight.ts). Exits 1 when the suite cannot run here.
 */
import { spawnSync } from 'node:child_process';
import { checkRequirements, probeMachine, renderPreflight, testRequirements } from '../src/dev/preflight';

function main(): number {
  const first = checkRequirements(testRequirements(), probeMachine());
  process.stdout.write(renderPreflight(first));
  if (first.missing.length > 0) return 1;
  if (first.install.length === 0) return 0;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [
    ['update', '-q'],
    ['install', '-y', '-q', '--no-install-recommends', ...first.install],
  ]) {
    const r = spawnSync('apt-get', args, { env, encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) {
      process.stderr.write(`${r.stdout}${r.stderr}apt-get ${args.join(' ')} failed (output above)\n`);
      return 1;
    }
  }
  const after = checkRequirements(testRequirements(), probeMachine());
  const still = after.checks.filter((c) => c.found === undefined);
  if (still.length > 0) {
    process.stderr.write(`installed ${first.install.join(' ')}, but still missing: ${still.map((c) => c.req.name).join(', ')}\n`);
    return 1;
  }
  process.stdout.write(`installed ${first.install.join(' ')}\n`);
  return 0;
}

process.exitCode = main();
