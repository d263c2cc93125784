/**
 * The `svm` program is composed in cli/svm.ts from the client's, the worker's
 * and the dev plane's commands: every command is there, in the order `svm
 * --help` has always shown, and the client's own commands need neither the
 * worker nor src/dev.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { clientCommands } from '../src/client/cli';
import { buildProgram } from '../cli/svm';
import { workerCommand } from '../src/worker/cli-worker';

void test('svm: every command, in the order of svm --help', () => {
  assert.deepEqual(
    buildProgram().commands.map((c) => c.name()),
    ['migrate', 'status', 'abort', 'pause', 'resume', 'worker', 'trigger', 'setup', 'crds', 'plan', 'grant', 'dev', 'version'],
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
