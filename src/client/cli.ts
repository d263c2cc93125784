/**
 * The client's part of the `svm` command line: its commands (each a thin layer
 * over the programmatic API), the program they hang on, and how a run reports
 * an error. The `svm` command itself is composed in cli/svm.ts, which adds the
 * worker's command and the dev plane's: the client imports neither.
 *
 * Each command is registered by name, the term `svm --help` lists it with and
 * its one-line description (written here and nowhere else: loadCommand gives
 * it to the command); its module is loaded only when a run names the command,
 * so that `svm version` or `svm status --help` load neither the Temporal
 * client nor the Kubernetes one.
 */
import { Command, Help } from 'commander';
import { errorLine } from '../config/cli-options';
import { exitCodeOf } from './exit-codes';

/** A top-level command, listed without being loaded; load() builds it (requiring its module) when a run names it. */
export interface CommandEntry {
  name: string;
  /** What follows the name in `svm --help`'s list (commander's subcommand term: `[options] [resource]`), '' for nothing. */
  term: string;
  description: string;
  load(): Command;
}

/** The command an entry registers, built, with the entry's description. */
export function loadCommand(entry: CommandEntry): Command {
  return entry.load().description(entry.description);
}

// Typed lazy requires: a command's module (and whatever it imports) is loaded when the command is built, not before.
/* eslint-disable @typescript-eslint/no-require-imports */
const migrateModule = () => require('./cli-migrate') as typeof import('./cli-migrate');
const setupModule = () => require('./cli-setup') as typeof import('./cli-setup');
const planModule = () => require('./cli-plan') as typeof import('./cli-plan');
const grantModule = () => require('./cli-grant') as typeof import('./cli-grant');
const versionModule = () => require('./cli-version') as typeof import('./cli-version');
const fleetModule = () => require('./cli-fleet') as typeof import('./cli-fleet');
const pruneModule = () => require('./cli-prune') as typeof import('./cli-prune');
/* eslint-enable @typescript-eslint/no-require-imports */

/** The client's commands by name, for the composition root to order among the others. */
export const clientCommandEntries = {
  migrate: {
    name: 'migrate',
    term: '[options] [resources...]',
    description:
      'migrate every stored object of a resource to its current storage version; several resources, or all of them (--all), run as one durable workflow',
    load: () => migrateModule().migrateCommands().migrate,
  },
  status: {
    name: 'status',
    term: '[options] [resource]',
    description: 'show migrations (one resource, or all)',
    load: () => migrateModule().migrateCommands().status,
  },
  abort: {
    name: 'abort',
    term: '[options] <resource>',
    description: 'abort the running migration of a resource',
    load: () => migrateModule().migrateCommands().abort,
  },
  pause: {
    name: 'pause',
    term: '[options] <resource>',
    description: 'pause a migration: the chunk in flight stops within about a second, and resume goes on where it stopped',
    load: () => migrateModule().migrateCommands().pause,
  },
  resume: {
    name: 'resume',
    term: '[options] <resource>',
    description: 'resume a paused migration',
    load: () => migrateModule().migrateCommands().resume,
  },
  trigger: {
    name: 'trigger',
    term: '',
    description: 'the periodic trigger: StorageState objects and automatic migrations',
    load: () => migrateModule().migrateCommands().trigger,
  },
  setup: {
    name: 'setup',
    term: '',
    description: "register svm's search attributes on the Temporal namespace (idempotent)",
    load: () => setupModule().setupCommands().setup,
  },
  crds: {
    name: 'crds',
    term: '',
    description: 'the migration.k8s.io CustomResourceDefinitions',
    load: () => setupModule().setupCommands().crds,
  },
  plan: {
    name: 'plan',
    term: '[options]',
    description: 'what must be migrated before the next upgrade step can go on (read-only; exit 0 nothing, 1 needed, 2 blocked, 3 error)',
    load: () => planModule().planCommand(),
  },
  prune: {
    name: 'prune',
    term: '[options] [crds...]',
    description:
      "prune CRDs' status.storedVersions to their storage version with your identity, on the checked record of a whole pass (for SVM_PRUNE=operator; exit 0 pruned, 1 refused, 2 error)",
    load: () => pruneModule().pruneCommand(),
  },
  grant: {
    name: 'grant',
    term: '[options] <resource>',
    description:
      'print the ClusterRole and binding that let the worker migrate one resource its default rights leave out (custom resources, admission and RBAC objects); read-only',
    load: () => grantModule().grantCommand(),
  },
  'managed-fields': {
    name: 'managed-fields',
    term: '[options] <resource>',
    description:
      'bring the managedFields entries a resource holds at an API version about to be removed to its storage version, so server-side apply keeps working once it is gone (off unless turned on: deploy/managed-fields.yaml)',
    load: () => setupModule().setupCommands().managedFields,
  },
  fleet: {
    name: 'fleet',
    term: '',
    description:
      'campaigns across the clusters one Temporal namespace serves: migrate (a canary, then waves), status, pause, resume, abort; clusters lists the registered ones',
    load: () => fleetModule().fleetCommand(),
  },
  version: {
    name: 'version',
    term: '[options]',
    description: "print svm's version and git revision, the workflow contract version and the Temporal SDK version",
    load: () => versionModule().versionCommand(),
  },
} satisfies Record<string, CommandEntry>;

/** The client's commands by name, every one built (which loads their modules). */
export function clientCommands(): Record<keyof typeof clientCommandEntries, Command> {
  const entries = Object.entries(clientCommandEntries) as Array<[keyof typeof clientCommandEntries, CommandEntry]>;
  return Object.fromEntries(entries.map(([k, e]) => [k, loadCommand(e)])) as Record<keyof typeof clientCommandEntries, Command>;
}

/**
 * The top-level command a run names: the first word of argv that is not an
 * option (`svm status --help`), or the one after `help` (`svm help status`);
 * undefined for none (`svm`, `svm --help`). The program has no option that
 * takes a value, so the first such word is the command.
 */
export function commandNamed(argv: string[]): string | undefined {
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  return words[0] === 'help' && words.length > 1 ? words[1] : words[0];
}

/** A command that stands in for an entry in the list of `svm --help`: its name, term and description, nothing loaded. */
class ListedCommand extends Command {
  constructor(readonly entry: CommandEntry) {
    super(entry.name);
    this.description(entry.description);
  }
}

/**
 * The `svm` program holding the given commands, in that order. An entry is
 * built when argv names it (see commandNamed); the others are only listed.
 * Without argv every entry is built.
 */
export function svmProgram(commands: Array<Command | CommandEntry>, argv?: string[]): Command {
  const named = argv && commandNamed(argv);
  const program = new Command('svm')
    .description('Kubernetes storage version migration as durable Temporal workflows')
    .option('-V, --version', "svm's version, revision, workflow contract and Temporal SDK (as svm version prints them)")
    .showHelpAfterError()
    .configureOutput({ outputError: (s, write) => write(s) })
    .configureHelp({
      subcommandTerm: (c) =>
        c instanceof ListedCommand ? [c.name(), c.entry.term].filter(Boolean).join(' ') : new Help().subcommandTerm(c),
    })
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
  for (const c of commands) {
    if (c instanceof Command) program.addCommand(c);
    else program.addCommand(!argv || c.name === named ? loadCommand(c) : new ListedCommand(c));
  }
  throwInsteadOfExit(program);
  return program;
}

/**
 * A bad flag or argument makes commander print its `error: ...` line and end the process with 1; here it throws
 * instead, so that runProgram gives it the usage code (src/client/exit-codes.ts). A command that handles its own
 * (svm plan, prune and managed-fields, whose codes are verdicts) keeps its handler.
 */
function throwInsteadOfExit(cmd: Command): void {
  if (!(cmd as unknown as { _exitCallback?: unknown })._exitCallback)
    cmd.exitOverride((err) => {
      saidByCommander.add(err);
      throw err;
    });
  for (const sub of cmd.commands) throwInsteadOfExit(sub);
}

/** The errors commander ended a parse with, having printed them (an InvalidArgumentError an action throws is not). */
const saidByCommander = new WeakSet<Error>();

/** `svm --version` (or -V), as most command-line tools take it, is `svm version`: the arguments to run. */
export function versionAlias(argv: string[]): string[] {
  const first = argv[2];
  return argv.length === 3 && (first === '--version' || first === '-V') ? [argv[0]!, argv[1]!, 'version'] : argv;
}

/**
 * Runs the program: an error ends as `error: <message>` on stderr (errorLine), with the exit code of its class
 * (exitCodeOf: 64 usage, 69 unreachable, 77 refused, 1 otherwise; docs/cli.md#exit-codes).
 */
export async function runProgram(program: Command, argv: string[] = process.argv): Promise<void> {
  // `svm status | head`: the reader has gone, so stop quietly, as other command-line tools do, instead of a stack
  // trace of the write that found the pipe closed.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(0);
  });
  try {
    await program.parseAsync(argv);
  } catch (err: unknown) {
    // commander has already said what was wrong with the flags (or printed the help asked for).
    if (!(err instanceof Error && saidByCommander.has(err))) process.stderr.write(errorLine(err));
    process.exitCode = exitCodeOf(err);
  }
}
