/**
 * The client's part of the `svm` command line: its commands (each a thin layer
 * over the programmatic API), the program they hang on, and how a run reports
 * an error. The `svm` command itself is composed in cli/svm.ts, which adds the
 * worker's command and the dev plane's: the client imports neither.
 */
import { Command } from 'commander';
import { grantCommand } from './cli-grant';
import { migrateCommands } from './cli-migrate';
import { planCommand } from './cli-plan';
import { versionCommand } from './cli-version';

/** The client's commands by name, for the composition root to order among the others. */
export function clientCommands() {
  return { ...migrateCommands(), plan: planCommand(), grant: grantCommand(), version: versionCommand() };
}

/** The `svm` program holding the given commands, in that order. */
export function svmProgram(commands: Command[]): Command {
  const program = new Command('svm')
    .description('Kubernetes storage version migration as durable Temporal workflows')
    .showHelpAfterError()
    .configureOutput({ outputError: (s, write) => write(s) })
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  svm dev up && source .svm-dev/env     # a local control plane',
        '  svm migrate secrets --wait            # migrate one resource, with progress',
        '  svm status                            # every migration',
        '  svm <command> --help                  # each command with its own example',
        '',
      ].join('\n'),
    );
  for (const c of commands) program.addCommand(c);
  return program;
}

/** Runs the program: an error ends as `svm: <message>` on stderr and exit code 1. */
export async function runProgram(program: Command, argv: string[] = process.argv): Promise<void> {
  try {
    await program.parseAsync(argv);
  } catch (err: unknown) {
    process.stderr.write(`svm: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
