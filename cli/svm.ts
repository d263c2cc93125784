/**
 * The `svm` command: the composition root, outside src so that nothing in src
 * imports src/dev. The client, the worker and the dev plane each contribute
 * their commands; this module, and only this one, puts them together, so that
 * the layers themselves keep their arrows (the client imports neither the
 * worker nor src/dev; the worker does not import src/dev).
 * What one layer's command needs from another is passed in here: `svm worker`
 * is given the dev tooling's local Temporal server for its embedded default.
 *
 * Every command is registered by name, term and one-line description (the
 * client's in src/client/cli.ts, the worker's and the dev plane's below), and
 * its module is loaded only when the run names it (`svm worker`, `svm help
 * worker`, `svm worker --help`): `svm version` does not load the Temporal
 * worker and its native module, nor `svm status` the Kubernetes client.
 * bin/svm.js runs this (compiled into dist/ by `npm ci` / `npm run build:fast`).
 */
import type { Command } from 'commander';
import { clientCommandEntries as c, clientCommands, runProgram, svmProgram, versionAlias, type CommandEntry } from '../src/client/cli';

/* eslint-disable @typescript-eslint/no-require-imports */
const worker: CommandEntry = {
  name: 'worker',
  term: '[options]',
  description: 'run the migration worker (and the StorageVersionMigration bridge)',
  load: () => {
    const { workerCommand } = require('../src/worker/cli-worker') as typeof import('../src/worker/cli-worker');
    const { startLocalTemporal } = require('../src/dev/local-temporal') as typeof import('../src/dev/local-temporal');
    return workerCommand({ startLocalTemporal });
  },
};

const dev: CommandEntry = {
  name: 'dev',
  term: '',
  description:
    'a local control plane shaped like a cluster: etcd, HA kube-apiservers each in its own network namespace behind haproxy, and the Temporal dev server',
  load: () => (require('../src/dev/cli-dev') as typeof import('../src/dev/cli-dev')).devCommand(),
};
/* eslint-enable @typescript-eslint/no-require-imports */

/** Every top-level command, in the order of `svm --help`. */
export const commandEntries: CommandEntry[] = [
  c.migrate,
  c.status,
  c.abort,
  c.pause,
  c.resume,
  worker,
  c.trigger,
  c.setup,
  c.crds,
  c.plan,
  c.prune,
  c['managed-fields'],
  c.grant,
  c.fleet,
  dev,
  c.version,
];

/** The program with every command built (loads every command's module: for tests and tools, not for a run). */
export function buildProgram(): Command {
  return svmProgram(commandEntries);
}

/**
 * Loads what the client commands load, running none of them: every client command built, and the modules their
 * actions require. bin/svm.js calls it to save the code cache of dist/cli/svm-client.js (scripts/bundle-cli.mjs).
 */
export function warm(): void {
  clientCommands();
  /* eslint-disable @typescript-eslint/no-require-imports */
  require('../src/client/index');
  require('../src/client/setup');
  require('../src/config/temporal');
  require('../src/kube/client');
  require('../src/api/crds');
  require('../src/api/standard-migration');
  require('../src/contract/drop');
  require('../src/contract/definitions');
  require('cli-progress');
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/**
 * The @temporalio/proto this file was built with: in dist/cli/svm-client.js, the bundle's copy, whose types are
 * built on first use (scripts/bundle-cli.mjs); test/unit-client-bundle-proto.test.ts checks it against the package.
 */
export function bundledProto(): unknown {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('@temporalio/proto');
}

export function main(argv: string[] = process.argv): Promise<void> {
  const args = versionAlias(argv);
  return runProgram(svmProgram(commandEntries, args), args);
}

if (require.main === module) void main();
