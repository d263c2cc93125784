/**
 * `svm migrate|status|abort|pause|resume|trigger`: the CLI over the programmatic API (`setup`, `crds` and
 * `managed-fields` are ./cli-setup.ts, on what this file's commands share: withMigrator).
 * Their descriptions are registered in ./cli.ts. What an action needs beyond
 * parsing its flags (the Temporal client, the Kubernetes client, zod schemas,
 * yaml, the progress bar) is required in the action, so that `svm status
 * --help` loads none of it and `svm status` only what talking to Temporal
 * needs.
 *
 * The file reads top to bottom: the commands by name, then each command (its
 * flags and help, then its action), then what several of them share.
 */
import { age, formatted, interruption, rowsTable, tableLines, watchPrinter, watchRows, type RowForm } from './table';
import { Command } from 'commander';
import { UsageError } from './exit-codes';
import type { SingleBar } from 'cli-progress';
import {
  clusterOption,
  contextOption,
  kubeconfigOption,
  outputOption,
  parseIntArg,
  watchOption,
  withExamples,
  type OutputFormat,
} from '../config/cli-options';
import { DEFAULT_MIGRATE_ALL_PARALLELISM, defaultMigrationOptions as defaults } from '../contract/defaults';
import { isTerminalPhase } from '../api/phases';
import type { MigrateAllRow, MigrationOptions, MigrationProgress, MigrationResult, MigrationSummary, Migrator } from './index';
import type { KubeClient } from '../kube/client';

// Typed lazy requires (see above).
/* eslint-disable @typescript-eslint/no-require-imports */
const client = () => require('./index') as typeof import('./index');
const temporalConfig = () => require('../config/temporal') as typeof import('../config/temporal');
const resourceName = () => require('../api/resource') as typeof import('../api/resource');
const standardMigration = () => require('../api/standard-migration') as typeof import('../api/standard-migration');
const setupModule = () => require('./cli-setup') as typeof import('./cli-setup');
const definitions = () => require('../contract/definitions') as typeof import('../contract/definitions');
/* eslint-enable @typescript-eslint/no-require-imports */

/** The client's commands by name; the `svm` program (cli/svm.ts) puts them in order among the others, with their descriptions (./cli.ts). */
export function migrateCommands() {
  return {
    migrate: migrateCommand(),
    status: statusCommand(),
    abort: signalCommand('abort'),
    pause: signalCommand('pause'),
    resume: signalCommand('resume'),
    trigger: triggerCommand(),
  };
}

// ------------------------------------------------------------ svm migrate

interface MigrateFlags {
  all?: boolean;
  parallel?: number;
  wait?: boolean;
  chunkSize?: number;
  concurrency?: number;
  qps?: number;
  kubeconfig?: string;
  context?: string;
}

// The defaults in --help are the workflow's, not commander defaults: an unset flag leaves the option to the workflow (and
// a joined migration its own).
function migrateCommand(): Command {
  return withExamples(new Command('migrate'), [
    'svm migrate secrets --wait                      # one resource, with a progress bar',
    'svm migrate widgets.example.com --qps 50        # at most 50 updates/s for this one',
    'svm migrate deployments.apps configmaps --parallel 2',
    'svm migrate --all --parallel 4                  # every migratable resource, then a summary',
  ])
    .argument('[resources...]', 'resource[.group], e.g. secrets, deployments.apps, widgets.example.com')
    .option('--all', 'migrate every migratable resource, then print a summary (waits)')
    .option(
      '--parallel <n>',
      `with --all or several resources: migrations at once (default: ${DEFAULT_MIGRATE_ALL_PARALLELISM})`,
      parseIntArg('--parallel', 1, 64),
    )
    .option('--wait', 'wait for the end, showing progress')
    .option('--chunk-size <n>', `objects per list page (default: ${defaults.chunkSize})`, parseIntArg('--chunk-size', 1, 10_000))
    .option(
      '--concurrency <n>',
      `no-op updates in flight per chunk, at most (default: ${defaults.concurrency}; the worker's adaptive concurrency may keep fewer)`,
      parseIntArg('--concurrency', 1, 256),
    )
    .option(
      '--qps <n>',
      `ceiling of updates per second for this migration (default: ${defaults.qps}: the worker's budget only)`,
      parseIntArg('--qps', 0, 100_000),
    )
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .addOption(clusterOption())
    .action(async (resources: string[], o: MigrateFlags) => {
      if (o.all && resources.length > 0) throw new UsageError('give resources or --all, not both');
      if (!o.all && resources.length === 0) throw new UsageError('missing resource (or --all)');
      refuseNames(resources);
      if (o.all || resources.length > 1) {
        await withMigrator(o, (m) => migrateSeveral(m, o.all ? undefined : resources, o));
        return;
      }
      await withMigrator(o, (m) => migrateOne(m, resources[0]!, o));
    });
}

/** The migration options the flags give (each unset one: the workflow's default). */
const migrationOptions = (o: MigrateFlags): Partial<MigrationOptions> => ({
  chunkSize: o.chunkSize,
  concurrency: o.concurrency,
  qps: o.qps,
});

/** `--all` (resources undefined) or several resources: one durable workflow, a line per resource as it ends, then a summary (exit 1 unless all succeeded). */
async function migrateSeveral(m: Migrator, resources: string[] | undefined, o: MigrateFlags): Promise<void> {
  const rows = await m.migrateAll({
    parallelism: o.parallel,
    ...(resources ? { resources } : {}),
    options: migrationOptions(o),
    onStart: (st) =>
      process.stderr.write(
        st.joined
          ? `joined the migration of several resources already running (workflow ${st.workflowId}); following it\n`
          : `migrating ${st.resources} resources as workflow ${st.workflowId}; it goes on if this command stops (run it again to follow it)\n`,
      ),
    onDone: (r) =>
      process.stderr.write(
        `${r.result.padEnd(9)} ${r.resource} (${r.objects} objects, ${(r.durationMs / 1000).toFixed(1)}s${r.joined ? ', joined the migration already running' : ''})\n`,
      ),
  });
  process.stdout.write(summaryTable(rows));
  const bad = rows.filter((r) => r.result !== 'Succeeded');
  if (bad.length === 0) return;
  for (const r of bad) process.stdout.write(`${r.resource}: ${r.message ?? r.result}\n`);
  process.exitCode = 1;
}

/** One resource: starts (or joins) its migration; with --wait, shows its progress and its result (exit 1 unless Succeeded). */
async function migrateOne(m: Migrator, resource: string, o: MigrateFlags): Promise<void> {
  const h = await m.start(resource, migrationOptions(o));
  process.stderr.write(`migration of ${resource} is workflow ${h.workflowId}\n`);
  if (!o.wait) return;
  const display = progressDisplay();
  const result = await h.wait(display.show);
  display.stop();
  printResult(result);
  if (result.phase !== 'Succeeded') process.exitCode = 1;
}

/** What `--wait` shows of each progress: a bar on a terminal, a line per look elsewhere (a pipe, CI). */
function progressDisplay(): { show(p: MigrationProgress): void; stop(): void } {
  const tty = process.stderr.isTTY && !process.env.CI;
  let bar: SingleBar | undefined;
  return {
    show: (p) => {
      if (!tty) {
        // The final phase is the result's own line (printResult): not said twice where both streams are one log.
        if (!isTerminalPhase(p.phase)) process.stderr.write(line(p) + '\n');
        return;
      }
      bar ??= progressBar(p.resource);
      showOnBar(bar, p);
    },
    stop: () => bar?.stop(),
  };
}

function progressBar(resource: string): SingleBar {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { SingleBar, Presets } = require('cli-progress') as typeof import('cli-progress');
  return new SingleBar({ format: `${resource} [{bar}] {value}/{total} {phase} {rate}/s`, stream: process.stderr }, Presets.shades_classic);
}

/**
 * The objects handled so far against a total that is a guess: the remaining estimate where there is one, else as
 * many again while a continue token says more pages follow.
 */
function showOnBar(bar: SingleBar, p: MigrationProgress): void {
  const done = definitions().objectsHandled(p.counters);
  const total = done + (p.remainingEstimate ?? (p.continueTokenPresent ? done : 0));
  const payload = { phase: p.phase, rate: p.objectsPerSecond };
  if (!bar.isActive) bar.start(Math.max(total, 1), done, payload);
  bar.setTotal(Math.max(total, done, 1));
  bar.update(done, payload);
}

function printResult(r: MigrationResult): void {
  process.stdout.write(line(r) + '\n');
  if (r.message) process.stdout.write(r.message + '\n');
  process.stdout.write(objectsLine(r));
  for (const f of r.failures) process.stdout.write(`  failed: ${f.namespace ? f.namespace + '/' : ''}${f.name}: ${f.reason}\n`);
}

export function summaryTable(rows: MigrateAllRow[]): string {
  const header = ['RESOURCE', 'OBJECTS', 'RESULT', 'DURATION'];
  const cells = rows.map((r) => [r.resource, String(r.objects), r.result, `${(r.durationMs / 1000).toFixed(1)}s`]);
  const total = rows.reduce((n, r) => n + r.objects, 0);
  const ok = rows.filter((r) => r.result === 'Succeeded').length;
  return (
    tableLines(header, cells).join('\n') + '\n' + `${rows.length} resources, ${total} objects, ${ok} succeeded, ${rows.length - ok} not\n`
  );
}

// ------------------------------------------------------------ svm status

interface StatusFlags extends Target {
  output: OutputFormat;
  watch?: boolean;
}

function statusCommand(): Command {
  return withExamples(new Command('status'), [
    'svm status                     # every migration: RESOURCE PHASE MIGRATED RATE AGE',
    'svm status widgets.example.com -o wide',
    'svm status -o json             # for tools (-o yaml, -o name: one resource a line)',
    'svm status -w                  # then a line for each migration that changes, until Ctrl-C',
  ])
    .argument('[resource]')
    .addOption(outputOption(['text', 'wide', 'json', 'yaml', 'name']))
    .addOption(watchOption('after the table, a line for each migration whose phase or count changes, until interrupted'))
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .addOption(clusterOption())
    .action(async (resource: string | undefined, o: StatusFlags) => {
      if (resource !== undefined) refuseNames([resource]);
      await withMigrator(o, async (m) => {
        const form = statusForm(Date.now, resource);
        if (o.watch) {
          await watchRows({
            fetch: () => m.status(resource),
            id: (s) => s.workflowId,
            state: statusState,
            emit: watchPrinter(o.output, form, (text) => process.stdout.write(text)),
            intervalMs: 2000,
            signal: interruption(),
          });
          return;
        }
        const list = await m.status(resource);
        process.stdout.write(formatted(o.output, list, { text: (wide) => rowsTable(form, list, wide), names: () => list.map(form.name) }));
      });
    });
}

/** What --watch prints a row again for: the phase and the counts (not the workflow closing after its phase said Succeeded). */
export const statusState = (s: MigrationSummary): string => JSON.stringify([phaseOf(s), s.progress?.counters]);

/** A migration's phase: its own (Running, Succeeded, ...), else its workflow's status as a word (Terminated, TimedOut). */
const phaseOf = (s: MigrationSummary): string =>
  s.phase ?? s.status.toLowerCase().replace(/(^|_)([a-z])/g, (_m, _u: string, c: string) => c.toUpperCase());

/**
 * `svm status` as a table, like kubectl's: RESOURCE PHASE MIGRATED RATE AGE (the age of the pass, from its start);
 * -o wide adds the objects that failed, the Worker Deployment Version that runs it (docs/deploy.md, "Upgrading svm")
 * and the workflow. -o name prints the resource, as svm status/pause/abort take it.
 */
export function statusForm(now: () => number, resource?: string): RowForm<MigrationSummary> {
  return {
    header: (wide) => ['RESOURCE', 'PHASE', 'MIGRATED', 'RATE', 'AGE', ...(wide ? ['FAILED', 'WORKER VERSION', 'WORKFLOW'] : [])],
    right: [2, 3],
    cells: (s, wide) => {
      const p = s.progress;
      const v = s.deploymentVersion;
      return [
        s.resource,
        phaseOf(s),
        p ? String(p.counters.migrated) : '-',
        p ? `${p.objectsPerSecond}/s` : '-',
        p ? age(now() - p.startedAt) : '-',
        ...(wide
          ? [
              p ? String(p.counters.failed) : '-',
              v ? `${v.deploymentName}.${v.buildId}${v.behavior ? ` (${v.behavior})` : ''}` : '-',
              s.workflowId,
            ]
          : []),
      ];
    },
    name: (s) => s.resource,
    empty: resource ? `no migration of ${resource}` : 'no migrations',
  };
}

// ------------------------------------------------------------ svm abort|pause|resume

type SteerName = 'abort' | 'pause' | 'resume';

function signalCommand(name: SteerName): Command {
  const cmd = withExamples(
    new Command(name).argument('<resource>').addOption(kubeconfigOption()).addOption(contextOption()).addOption(clusterOption()),
    [name === 'abort' ? `svm abort widgets.example.com --reason "rollback of the upgrade"` : `svm ${name} widgets.example.com`],
  );
  if (name === 'abort') cmd.option('--reason <text>', 'why (recorded in the status)');
  cmd.option(
    '--answer-within <seconds>',
    'how long to wait for the migration to acknowledge it; without an answer (no worker running it) it is sent as a signal, taken once a worker runs the migration',
    parseIntArg('--answer-within', 1, 3600),
    30,
  );
  return cmd.action(async (resource: string, o: { kubeconfig?: string; context?: string; reason?: string; answerWithin: number }) => {
    refuseNames([resource]);
    await withMigrator(o, (m) => steer(m, name, resource, o));
  });
}

/** An update, not a signal: the migration acknowledges it, or refuses it with its reason (exit 1). */
async function steer(
  m: Migrator,
  name: 'abort' | 'pause' | 'resume',
  resource: string,
  o: { reason?: string; answerWithin: number },
): Promise<void> {
  const h = await m.handle(resource);
  const r = await h.steer(name, { reason: o.reason, answerWithinSeconds: o.answerWithin });
  const what = name === 'abort' ? `abort (${r?.abortRequested ?? o.reason ?? 'aborted by request'})` : name;
  process.stderr.write(
    r
      ? `${h.workflowId}: ${what} acknowledged at ${r.counters.migrated} objects migrated (phase ${r.phase})\n`
      : `${h.workflowId}: no worker answered within ${o.answerWithin}s; ${what} sent as a signal instead, taken once a worker runs the migration\n`,
  );
}

// ------------------------------------------------------------ svm trigger start|stop

function triggerCommand(): Command {
  const trigger = withExamples(new Command('trigger'), ['svm trigger start --period 300', 'svm trigger stop']);
  trigger
    .command('start')
    .addHelpText('after', '\nExample:\n  svm trigger start --period 300 --staleness 1800   # discovery every 5 minutes\n')
    .description('start it (joins the running one)')
    .option('--period <seconds>', 'how often discovery is read', parseIntArg('--period', 1, 86_400), 600)
    .option(
      '--staleness <seconds>',
      'a StorageState not refreshed for this long is reset to Unknown (default: 3 periods)',
      parseIntArg('--staleness', 1, 10 * 86_400),
    )
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .addOption(clusterOption())
    .action(async (o: { period: number; staleness?: number; kubeconfig?: string; context?: string }) => {
      await withMigrator(o, async (m) => {
        const h = await m.startTrigger({ periodSeconds: o.period, stalenessSeconds: o.staleness });
        process.stderr.write(`trigger running as workflow ${h.workflowId}, every ${o.period}s\n`);
      });
    });
  trigger
    .command('stop')
    .description('stop it')
    .addHelpText('after', '\nExample:\n  svm trigger stop   # explicit `svm migrate` and StorageVersionMigration objects still work\n')
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .addOption(clusterOption())
    .action(async (o: Target) => {
      await withMigrator(o, (m) => m.stopTrigger());
      process.stderr.write('trigger stopped\n');
    });
  return trigger;
}

// ------------------------------------------------------------ shared by the commands

/** Server-side applies svm's CRDs and waits until they are established (./cli-setup.ts; tests and benches import it from here). */
export function installCrds(kube: KubeClient): Promise<void> {
  return setupModule().installCrds(kube);
}

/** Names that cannot name a resource (empty, a subresource, stray characters): refused before anything is reached. */
function refuseNames(resources: string[]): void {
  for (const r of resources) {
    const refusal = resourceName().resourceNameRefusal(r);
    if (refusal) throw new UsageError(refusal);
  }
}

/** What every command that reaches Temporal takes: the kubeconfig (--kubeconfig) and the cluster (--cluster). */
export interface Target {
  kubeconfig?: string;
  context?: string;
  cluster?: string;
}

export async function withMigrator<T>(target: Target, fn: (m: Migrator) => Promise<T>): Promise<T> {
  const t = temporalConfig().loadTemporalSettings(process.env);
  if (!t.address)
    throw new UsageError(
      'TEMPORAL_ADDRESS is not set (host:port of the Temporal frontend), nor an address in the Temporal profile; `svm dev up` prints one',
    );
  const m = await client().Migrator.connect({
    temporal: { ...t, address: t.address },
    kubeconfig: target.kubeconfig,
    context: target.context,
    cluster: target.cluster,
  });
  try {
    return await fn(m);
  } finally {
    await m.close();
  }
}

/** One line of a migration's progress: its phase, counters, estimate and rate. */
function line(p: MigrationProgress): string {
  const c = p.counters;
  return `${p.resource}: ${p.phase} migrated=${c.migrated} rewritten=${c.rewritten} conflicts=${c.conflicts} notFound=${c.notFound} failed=${c.failed} chunks=${c.chunks}${p.remainingEstimate !== undefined ? ` remaining~${p.remainingEstimate}` : ''} rate=${p.objectsPerSecond}/s`;
}

/** The StorageVersionMigration objects that mirror a migration, named with their group (both APIs may be installed). */
function objectsLine(p: MigrationProgress): string {
  return p.migrationObjects.length ? `  kubectl get ${p.migrationObjects.map(standardMigration().kubectlName).join(' ')}\n` : '';
}
