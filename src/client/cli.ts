/** The `svm` command line. Every command is a thin layer over the programmatic API. */
import { Command } from 'commander';
import { devCommand } from './cli-dev';
import { migrateCommands } from './cli-migrate';
import { planCommand } from './cli-plan';

export function buildProgram(): Command {
  const program = new Command('svm')
    .description('Kubernetes storage version migration as durable Temporal workflows')
    .showHelpAfterError()
    .configureOutput({ outputError: (s, write) => write(s) });
  for (const c of migrateCommands()) program.addCommand(c);
  program.addCommand(planCommand());
  program.addCommand(devCommand());
  return program;
}

export async function main(argv: string[] = process.argv): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err: unknown) {
    process.stderr.write(`svm: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}

if (require.main === module) void main();
