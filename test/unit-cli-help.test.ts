/**
 * First contact: every `svm` command and subcommand shows an example in its
 * --help, and `svm version` says what runs. Runs the real `node bin/svm.js`
 * (no servers); the commands are enumerated from the composed program, so a
 * new command without an example fails here.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import { buildProgram } from '../cli/svm';
import { CONTRACT_VERSION } from '../src/contract/definitions';
import { DEFAULT_MIGRATE_ALL_PARALLELISM, defaultMigrationOptions } from '../src/contract/defaults';
import { DEFAULT_PLAN_QPS } from '../src/contract/plan';

const root = path.join(__dirname, '..');
const bin = path.join(root, 'bin', 'svm.js');

function svm(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { cwd: root, env, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Every command path: [], ['migrate'], ['trigger'], ['trigger', 'start'], ... */
function commandPaths(cmd: Command, prefix: string[] = []): string[][] {
  return [prefix, ...cmd.commands.flatMap((c) => commandPaths(c, [...prefix, c.name()]))];
}

/** Runs fn over items, at most n at once (the machine is shared). */
async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let item = queue.shift(); item; item = queue.shift()) await fn(item);
    }),
  );
}

void test('every command and subcommand has an example in its --help', { timeout: 300_000 }, async () => {
  const paths = commandPaths(buildProgram());
  assert.ok(paths.length >= 20, `only ${paths.length} commands found`);
  const missing: string[] = [];
  await pool(paths, 3, async (p) => {
    const r = await svm([...p, '--help']);
    const name = ['svm', ...p].join(' ');
    assert.equal(r.code, 0, `${name} --help exited ${r.code}: ${r.stderr}`);
    assert.match(r.stdout, /^Usage: /m, `${name} --help`);
    // An "Example:" or "Examples:" section with at least one indented `svm ...` (or VAR=... svm ...) line.
    const section = /^Examples?:\n((?: {2}.*\n?)+)/m.exec(r.stdout);
    if (!section || !/\bsvm /.test(section[1]!)) missing.push(name);
  });
  assert.deepEqual(missing, [], `no example in --help of: ${missing.join(', ')}`);
});

void test('svm version: svm version and revision, the contract version, the Temporal SDK version', async () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const sdk = JSON.parse(fs.readFileSync(require.resolve('@temporalio/client/package.json'), 'utf8')) as { version: string };
  const r = await svm(['version']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^svm ${pkg.version.replace(/\./g, '\\.')} \\(revision ([0-9a-f]{7,}|unknown)\\)$`, 'm'));
  assert.match(r.stdout, new RegExp(`^workflow contract v${CONTRACT_VERSION}$`, 'm'));
  assert.match(r.stdout, new RegExp(`^Temporal TypeScript SDK ${sdk.version.replace(/\./g, '\\.')}$`, 'm'));

  const stamped = await svm(['version', '-o', 'json'], { ...process.env, SVM_GIT_REVISION: 'abc1234' });
  assert.equal(stamped.code, 0, stamped.stderr);
  assert.deepEqual(JSON.parse(stamped.stdout), {
    svm: pkg.version,
    revision: 'abc1234',
    contract: CONTRACT_VERSION,
    temporalSdk: sdk.version,
  });
});

void test('--help shows the real defaults: svm migrate the workflow options and parallelism, svm plan the rate it assumes (not the worker budget, auto)', async () => {
  // commander pads and wraps descriptions at 80 columns: compare with the whitespace collapsed.
  const flat = (s: string) => s.replace(/\s+/g, ' ');
  const migrate = await svm(['migrate', '--help']);
  assert.equal(migrate.code, 0, migrate.stderr);
  const help = flat(migrate.stdout);
  assert.match(help, new RegExp(`--chunk-size <n> objects per list page \\(default: ${defaultMigrationOptions.chunkSize}\\)`));
  assert.match(help, new RegExp(`--concurrency <n> .*?\\(default: ${defaultMigrationOptions.concurrency}[;)]`));
  assert.match(help, new RegExp(`--qps <n> .*?\\(default: ${defaultMigrationOptions.qps}: the worker's budget only\\)`));
  assert.match(help, new RegExp(`--parallel <n> .*?\\(default: ${DEFAULT_MIGRATE_ALL_PARALLELISM}\\)`));
  const plan = await svm(['plan', '--help']);
  assert.equal(plan.code, 0, plan.stderr);
  const planHelp = flat(plan.stdout);
  assert.match(planHelp, new RegExp(`--qps <n> [^]*?\\(default: ${DEFAULT_PLAN_QPS}\\)`));
  assert.doesNotMatch(planHelp, /SVM_QPS default/, "the plan's rate is not the worker's default budget");
  assert.match(planHelp, /SVM_QPS=auto/);
});
