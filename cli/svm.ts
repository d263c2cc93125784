/**
 * The `svm` command: the composition root, outside src so that nothing in src
 * imports src/dev. The client, the worker and the dev plane each contribute
 * their commands; this module, and only this one, puts them together, so that
 * the layers themselves keep their arrows (the client imports neither the
 * worker nor src/dev; the worker does not import src/dev).
 * What one layer's command needs from another is passed in here: `svm worker`
 * is given the dev tooling's local Temporal server for its embedded default.
 * bin/svm.js runs this (compiled when `npm run build` produced it).
 */
import type { Command } from 'commander';
import { clientCommands, runProgram, svmProgram } from '../src/client/cli';
import { devCommand } from '../src/dev/cli-dev';
import { startLocalTemporal } from '../src/dev/local-temporal';
import { workerCommand } from '../src/worker/cli-worker';

export function buildProgram(): Command {
  const c = clientCommands();
  return svmProgram([
    c.migrate,
    c.status,
    c.abort,
    c.pause,
    c.resume,
    workerCommand({ startLocalTemporal }),
    c.trigger,
    c.setup,
    c.crds,
    c.plan,
    c.grant,
    devCommand(),
    c.version,
  ]);
}

export function main(argv: string[] = process.argv): Promise<void> {
  return runProgram(buildProgram(), argv);
}

if (require.main === module) void main();
