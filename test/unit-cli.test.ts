/**
 * The `svm` program is composed in cli/svm.ts from the client's, the worker's
 * and the dev plane's commands: every command is there, in the order `svm
 * --help` has always shown, and the client's own commands need neither the
 * worker nor src/dev. Commands are registered by name, term and description
 * and built only when a run names them; the list `svm --help` shows is the
 * same either way.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { Command, Help } from 'commander';
import { clientCommands, commandNamed, svmProgram, versionAlias, type CommandEntry } from '../src/client/cli';
import { buildProgram, commandEntries } from '../cli/svm';
import { workerCommand } from '../src/worker/cli-worker';

void test('svm: every command, in the order of svm --help', () => {
  assert.deepEqual(
    buildProgram().commands.map((c) => c.name()),
    [
      'migrate',
      'status',
      'abort',
      'pause',
      'resume',
      'worker',
      'trigger',
      'setup',
      'crds',
      'plan',
      'prune',
      'managed-fields',
      'grant',
      'fleet',
      'dev',
      'version',
    ],
  );
});

void test('the client contributes its commands only: no worker, no dev plane', () => {
  const names = Object.values(clientCommands()).map((c) => c.name());
  assert.ok(!names.includes('worker') && !names.includes('dev'), names.join(' '));
});

void test('svm worker without TEMPORAL_ADDRESS and without a local Temporal server to start asks for the address', async () => {
  const saved = process.env.TEMPORAL_ADDRESS;
  delete process.env.TEMPORAL_ADDRESS;
  try {
    await assert.rejects(workerCommand({}).parseAsync(['node', 'worker']), /TEMPORAL_ADDRESS is not set/);
  } finally {
    if (saved !== undefined) process.env.TEMPORAL_ADDRESS = saved;
  }
});

void test('each command is registered with the term and the description its built command has', () => {
  for (const entry of commandEntries) {
    const built = entry.load();
    assert.equal(built.name(), entry.name);
    assert.equal(new Help().subcommandTerm(built), [entry.name, entry.term].filter(Boolean).join(' '), `${entry.name}: term`);
    // The registry is the one place of a description; a module that still writes its own must agree with it.
    const own = built.description();
    assert.ok(own === '' || own === entry.description, `${entry.name}: its module says "${own}", the registry "${entry.description}"`);
  }
});

void test('svm --help lists the commands alike, whether they are built or only registered', () => {
  const help = (p: Command) => {
    let out = '';
    p.configureOutput({ writeOut: (s) => (out += s), getOutHelpWidth: () => 80 });
    p.outputHelp();
    return out;
  };
  const listed = help(svmProgram(commandEntries, ['node', 'svm', '--help']));
  assert.equal(listed, help(buildProgram()));
  for (const e of commandEntries) assert.ok(listed.includes(`  ${[e.name, e.term].filter(Boolean).join(' ')} `), e.name);
});

void test('the command a run names: the first word that is not an option, or the one after help', () => {
  const named = (...args: string[]) => commandNamed(['node', 'svm', ...args]);
  assert.equal(named(), undefined);
  assert.equal(named('--help'), undefined);
  assert.equal(named('status'), 'status');
  assert.equal(named('status', '--help'), 'status');
  assert.equal(named('-h', 'migrate'), 'migrate');
  assert.equal(named('migrate', '--qps', '5', 'secrets'), 'migrate');
  assert.equal(named('help', 'worker'), 'worker');
  assert.equal(named('help'), 'help');
  assert.equal(named('trigger', 'start', '--period', '60'), 'trigger');
});

void test('svm --version and -V are svm version; anything more is left to the parser', () => {
  assert.deepEqual(versionAlias(['node', 'svm', '--version']), ['node', 'svm', 'version']);
  assert.deepEqual(versionAlias(['node', 'svm', '-V']), ['node', 'svm', 'version']);
  assert.deepEqual(versionAlias(['node', 'svm', 'migrate', '--version']), ['node', 'svm', 'migrate', '--version']);
  assert.deepEqual(versionAlias(['node', 'svm', '--version', 'x']), ['node', 'svm', '--version', 'x']);
});

void test('a run builds only the command it names; svm --help builds none', async () => {
  const built: string[] = [];
  let ran = '';
  const entry = (name: string): CommandEntry => ({
    name,
    term: '',
    description: `the ${name} command`,
    load: () => {
      built.push(name);
      return new Command(name)
        .exitOverride()
        .configureOutput({ writeOut: () => {} })
        .action(() => void (ran = name));
    },
  });
  const entries = ['one', 'two', 'three'].map(entry);
  const run = async (...args: string[]) => {
    built.length = 0;
    const argv = ['node', 'svm', ...args];
    await svmProgram(entries, argv)
      .exitOverride()
      .configureOutput({ writeOut: () => {} })
      .parseAsync(argv)
      .catch(() => undefined);
  };
  await run('two');
  assert.deepEqual(built, ['two']);
  assert.equal(ran, 'two');
  await run('help', 'three');
  assert.deepEqual(built, ['three']);
  await run('--help');
  assert.deepEqual(built, []);
  await run();
  assert.deepEqual(built, []);
});

void test('a reader that goes away (`svm ... | head`) ends the command quietly with 0, not with a stack trace', async () => {
  const { spawn } = await import('node:child_process');
  const path = await import('node:path');
  // The pipe is closed before the command writes: its first write finds EPIPE, as `svm status | head -1` does.
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'svm.js'), 'crds', 'print'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  assert.doesNotMatch(stderr, /EPIPE|Unhandled 'error' event/);
  assert.equal(code, 0, stderr);
});

void test('one error prefix: a bad flag (commander), a refused input and a failed command all end with `error: <message>`, as kubectl', async () => {
  const { execFile } = await import('node:child_process');
  const path = await import('node:path');
  const bin = path.join(__dirname, '..', 'bin', 'svm.js');
  const run = (args: string[]) =>
    new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [bin, ...args], { env: { ...process.env, KUBECONFIG: '/nonexistent/kubeconfig' } }, (err, _out, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr }),
      ),
    );
  for (const args of [
    ['migrate', 'secrets', '--chunk-size', 'x'], // commander's own
    ['migrate'], // refused by the command (runProgram)
    ['plan', '--requests-window', '5'], // svm plan's own refusal
    ['plan'], // svm plan's failure (no kubeconfig)
    ['managed-fields', 'secrets', '--from', 'v1'], // svm managed-fields' failure
  ]) {
    const r = await run(args);
    assert.notEqual(r.code, 0, `svm ${args.join(' ')}`);
    assert.match(r.stderr, /^error: \S/, `svm ${args.join(' ')}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /^svm( [a-z-]+)?: /m, `svm ${args.join(' ')}: ${r.stderr}`);
  }
});

void test('no command writes another prefix than error: or warning: (src/client, src/config, src/worker, src/dev, cli)', async () => {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const root = path.join(__dirname, '..');
  const files = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      return e.isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
    });
  const found: string[] = [];
  for (const f of ['src/client', 'src/config', 'src/worker', 'src/dev', 'cli'].flatMap((d) => files(path.join(root, d))))
    for (const [i, line] of fs.readFileSync(f, 'utf8').split('\n').entries())
      if (/stderr\.write\(\s*[`'"]svm( [a-z-]+)?: /.test(line)) found.push(`${path.relative(root, f)}:${i + 1}: ${line.trim()}`);
  assert.deepEqual(found, []);
});
