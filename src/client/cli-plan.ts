/** `svm plan`: what must be migrated before the next upgrade step can go on (read-only). */
import { setTimeout as sleep } from 'node:timers/promises';
import { Command, type CommanderError } from 'commander';
import type { KubeClient } from '../kube/client';
import type { Client } from '@temporalio/client';
import type { Placement } from '../contract/placement';
import type { DropReport } from '../contract/drop';
import type { DropCheckOptions } from '../kube/drop-check';
import {
  clusterOption,
  contextOption,
  errorLine,
  kubeconfigOption,
  outputOption,
  parseIntArg,
  warningLine,
  watchOption,
  type OutputFormat,
} from '../config/cli-options';
import { formatted, interruption } from './table';
import { DEFAULT_PLAN_QPS, PLAN_ERROR_EXIT_CODE, planTable } from './plan-report';

/** How often --watch makes the plan (or the drop check) again. */
export const PLAN_WATCH_SECONDS = 10;

export const PLAN_HELP = `
Lists every resource that must be migrated before an upgrade step that drops
an old version can go on:
  - CRDs whose status.storedVersions hold more than their storage version;
  - StorageStates (kept by \`svm trigger\`) with more than one persisted hash,
    "Unknown", or another hash than the one served now;
  - resources whose API servers disagree on the storage version (each server
    asked at its own address, as the worker does): these block.
Each with an object count (one list with limit=1) and the time at --qps.
Read-only: nothing is written and no migration is started. Needs only
Kubernetes (KUBECONFIG or --kubeconfig), not Temporal.

Exit codes:
  0  nothing to migrate
  1  migrations needed, and all of them can run now
  2  something blocks (API servers disagree, a resource is not served)
  3  error: the plan could not be made (e.g. the API cannot be reached,
     a bad flag)

With --drop <group>/<version>: can that version be removed now (from a CRD's
versions, or by the next Kubernetes release)? For every resource served at
it, a verdict (ready, not yet, unknown) and each reason: the storage version
the API servers agree on, a whole pass on record (StorageState, or a CRD's
storedVersions; the migration workflow when TEMPORAL_ADDRESS is set), the
CRD's storedVersions, objects whose managedFields name the version (a
metadata-only list), requests at the version on each API server during
--requests-window (its /metrics; a client that calls less often is not seen;
unknown where that may not be read, or an aggregated API serves the
version), and a CRD's conversion webhook (probed by metadata-only lists at
its other served versions). A version nothing serves is checked no less:
with no resource to check it is unknown, and a note says what the group
serves. Read-only as well. With --on-worker the worker makes the check (the
checkVersionDrop workflow, through TEMPORAL_ADDRESS and TEMPORAL_TASK_QUEUE),
with its identity and its samples of each server's request counters, which
reach up to a day back (SVM_REQUEST_SAMPLE_SECONDS). Exit codes with --drop:
  0  ready: the version can be removed
  1  not yet (see the reasons)
  2  unknown (something could not be checked, or nothing to check), or an
     error

With --watch the plan (or the check) is made again every ${PLAN_WATCH_SECONDS} seconds and
printed each time it changes, until interrupted; the exit code is then the
last one's. -o json prints each on one line.

Examples:
  svm plan                      # a table
  svm plan -o json | jq .items  # for machines (-o yaml too)
  svm migrate $(svm plan -o name)   # migrate what the plan lists
  svm plan --watch              # again every ${PLAN_WATCH_SECONDS}s while migrations run
  svm plan --qps 20             # estimates at 20 updates/s
  svm plan --drop example.com/v1                     # can v1 be removed from the CRD?
  svm plan --drop admissionregistration.k8s.io/v1beta1 -o json --requests-window 60
  svm plan --drop batch/v1beta1 --on-worker          # counted over the worker's day of samples
`;

/** The flags of `svm plan`. */
interface PlanFlags {
  output: OutputFormat;
  watch?: boolean;
  qps: number;
  kubeconfig?: string;
  context?: string;
  drop?: string;
  requestsWindow?: number;
  onWorker?: boolean;
  cluster?: string;
}

export function planCommand(): Command {
  return (
    new Command('plan')
      .addOption(outputOption(['text', 'json', 'yaml', 'name']))
      .addOption(
        watchOption(`make the plan (or the check) again every ${PLAN_WATCH_SECONDS}s and print it when it changes, until interrupted`),
      )
      .option(
        '--qps <n>',
        "updates per second the estimates assume (0: no estimates); not the worker's budget, whose default (SVM_QPS=auto) has no fixed rate",
        parseIntArg('--qps', 0, 100_000),
        DEFAULT_PLAN_QPS,
      )
      .addOption(kubeconfigOption())
      .addOption(contextOption())
      .addOption(clusterOption())
      .option(
        '--drop <group/version>',
        'instead of the plan: can this API version be removed now? (exit 0 ready, 1 not yet, 2 unknown or error)',
      )
      .option(
        '--on-worker',
        'with --drop: run the check on the worker (the checkVersionDrop workflow; TEMPORAL_ADDRESS): its samples of the request counters reach a day back',
      )
      .option(
        '--requests-window <seconds>',
        "with --drop: how long each API server's request counters are watched (0: any request since the server started counts)",
        parseIntArg('--requests-window', 0, 3600),
      )
      .addHelpText('after', PLAN_HELP)
      .allowExcessArguments(false)
      // A bad flag is an error (3), never "migrations needed" (1): a pipeline gating on the code must not misread it.
      .exitOverride((err: CommanderError) => {
        const drop = process.argv.some((a) => a === '--drop' || a.startsWith('--drop='));
        process.exit(err.exitCode === 0 ? 0 : drop ? DROP_ERROR_EXIT_CODE : PLAN_ERROR_EXIT_CODE);
      })
      .action(async (o: PlanFlags) => {
        if (o.watch && o.output === 'name') {
          process.stderr.write(errorLine('--watch prints the whole plan each time: give -o text, json or yaml, not name'));
          process.exitCode = o.drop !== undefined ? DROP_ERROR_EXIT_CODE : PLAN_ERROR_EXIT_CODE;
          return;
        }
        if (o.drop !== undefined) return dropAction({ ...o, drop: o.drop });
        if (o.requestsWindow !== undefined || o.onWorker) {
          process.stderr.write(errorLine(`${o.onWorker ? '--on-worker' : '--requests-window'} goes with --drop`));
          process.exitCode = PLAN_ERROR_EXIT_CODE;
          return;
        }
        let kube: KubeClient | undefined;
        let closeTemporal: (() => Promise<void>) | undefined;
        try {
          // Loaded here, not with the command: `svm plan --help` needs neither the Kubernetes client nor the planner.
          /* eslint-disable @typescript-eslint/no-require-imports */
          const { KubeClient } = require('../kube/client') as typeof import('../kube/client');
          const { makePlan } = require('../kube/plan') as typeof import('../kube/plan');
          /* eslint-enable @typescript-eslint/no-require-imports */
          const k = (kube = KubeClient.fromKubeconfig(o.kubeconfig, { context: o.context }));
          const records = await readRecords(k, o.cluster);
          closeTemporal = records.close;
          await repeated(o, {
            make: () => makePlan(k, { qps: o.qps, migrationOf: records.migrationOf, cluster: records.cluster }),
            text: planTable,
            names: (plan) => plan.items.map((i) => i.resource),
          });
        } catch (err) {
          process.stderr.write(errorLine(err));
          process.exitCode = PLAN_ERROR_EXIT_CODE;
        } finally {
          kube?.close();
          await closeTemporal?.();
        }
      })
  );
}

/** The exit code of `svm plan --drop` when the check could not be made (the same as Unknown: a gate must not pass). */
export const DROP_ERROR_EXIT_CODE = 2;

/**
 * Makes the plan (or the check) and prints it in the format asked, its exit code the command's; with --watch again
 * every PLAN_WATCH_SECONDS, printed when it changed (json on one line), until interrupted.
 */
async function repeated<R extends { exitCode: number }>(
  o: { output: OutputFormat; watch?: boolean },
  r: { make: () => Promise<R>; text: (report: R) => string; names: (report: R) => string[] },
): Promise<void> {
  const print = (report: R, oneLine: boolean) =>
    process.stdout.write(
      oneLine && o.output === 'json'
        ? JSON.stringify(report) + '\n'
        : formatted(o.output, report, { text: () => r.text(report), names: () => r.names(report) }),
    );
  if (!o.watch) {
    const report = await r.make();
    print(report, false);
    process.exitCode = report.exitCode;
    return;
  }
  const signal = interruption();
  let last: string | undefined;
  while (!signal.aborted) {
    const report = await r.make();
    // A drop check's time (at) changes every time: what it found is what counts.
    const key = JSON.stringify({ ...report, at: undefined });
    if (key !== last) {
      if (last !== undefined && o.output !== 'json') process.stdout.write(o.output === 'yaml' ? '---\n' : '\n');
      print(report, true);
      last = key;
    }
    process.exitCode = report.exitCode;
    await sleep(PLAN_WATCH_SECONDS * 1000, undefined, { signal }).catch(() => undefined);
  }
}

async function dropAction(o: {
  output: OutputFormat;
  watch?: boolean;
  kubeconfig?: string;
  context?: string;
  drop: string;
  requestsWindow?: number;
  onWorker?: boolean;
  cluster?: string;
}): Promise<void> {
  let kube: KubeClient | undefined;
  let closeTemporal: (() => Promise<void>) | undefined;
  try {
    /* eslint-disable @typescript-eslint/no-require-imports */
    const { groupVersionRefusal } = require('../contract/drop') as typeof import('../contract/drop');
    // Refused before anything is read.
    const refusal = groupVersionRefusal(o.drop);
    if (refusal) throw new Error(`--drop: ${refusal}`);
    const { KubeClient } = require('../kube/client') as typeof import('../kube/client');
    const { checkDrop } = require('../kube/drop-check') as typeof import('../kube/drop-check');
    const { dropTable } = require('./drop-report') as typeof import('./drop-report');
    /* eslint-enable @typescript-eslint/no-require-imports */
    let make: () => Promise<DropReport>;
    if (o.onWorker) {
      make = () => dropCheckOnWorker(o.drop, o.requestsWindow, o.cluster);
    } else {
      const k = (kube = KubeClient.fromKubeconfig(o.kubeconfig, { context: o.context }));
      const records = await readRecords(k, o.cluster);
      closeTemporal = records.close;
      make = () =>
        checkDrop(k, o.drop, {
          requestsWindowSeconds: o.requestsWindow,
          migrationOf: records.migrationOf,
          cluster: records.cluster,
        });
    }
    await repeated(o, { make, text: dropTable, names: (report) => report.resources.map((x) => x.resource) });
  } catch (err) {
    process.stderr.write(errorLine(err));
    process.exitCode = DROP_ERROR_EXIT_CODE;
  } finally {
    kube?.close();
    await closeTemporal?.();
  }
}

/** Temporal, connected and its namespace checked, and the placement of the cluster the command works on (./connect.ts). */
function connectTemporal(cluster: string | undefined): Promise<{ client: Client; here: Placement; close: () => Promise<void> }> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('./connect') as typeof import('./connect')).connectCommand(cluster);
}

/** The placement with the uid pinned to its cluster; refused while the cluster's identity is in conflict. */
function pinned(client: Client, here: Placement): Promise<Placement> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { pinnedPlacement } = require('../kube/cluster-identity') as typeof import('../kube/cluster-identity');
  return pinnedPlacement(client, here, 'No verdict is given for it');
}

/**
 * The check as the worker makes it (`--on-worker`): the checkVersionDrop workflow on TEMPORAL_TASK_QUEUE, with the
 * worker's identity and its samples of the request counters; a check of the same version and window already running
 * is joined.
 */
async function dropCheckOnWorker(
  groupVersion: string,
  requestsWindowSeconds: number | undefined,
  cluster: string | undefined,
): Promise<DropReport> {
  if (!process.env.TEMPORAL_ADDRESS) throw new Error('--on-worker needs TEMPORAL_ADDRESS (the worker is reached through Temporal)');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { dropCheckStart } = require('../contract/start-options') as typeof import('../contract/start-options');
  const temporal = await connectTemporal(cluster);
  try {
    // A running check of the same version and window is joined; another window is a check of its own.
    const spec = dropCheckStart({ groupVersion, ...(requestsWindowSeconds === undefined ? {} : { requestsWindowSeconds }) });
    return await temporal.client.workflow.execute<(i: typeof spec.input) => Promise<DropReport>>(
      spec.type,
      (await pinned(temporal.client, temporal.here)).start(spec),
    );
  } catch (err) {
    // A refused input or a failed check: its own message, not the SDK's "Workflow execution failed".
    const cause = (err as { cause?: unknown }).cause;
    throw cause instanceof Error ? new Error(`the worker's check failed: ${cause.message}`) : err;
  } finally {
    await temporal.close();
  }
}

/**
 * The migration workflows in Temporal, where TEMPORAL_ADDRESS is set: the records a plan and a drop check rest on.
 * Without it, or when Temporal cannot be reached (said on stderr), both stand on Kubernetes alone and say so. A named
 * cluster's (--cluster) records count only when made against the uid pinned to it, and the kubeconfig must reach
 * that cluster: another cluster's objects are never judged on this one's records. Either refusal throws.
 */
async function readRecords(
  kube: KubeClient,
  cluster: string | undefined,
): Promise<{ migrationOf?: DropCheckOptions['migrationOf']; cluster?: string; close?: () => Promise<void> }> {
  if (!process.env.TEMPORAL_ADDRESS) return {};
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { migrationRecords } = require('../kube/drop-storage') as typeof import('../kube/drop-storage');
  const { judgedPlacement } = require('../kube/cluster-identity') as typeof import('../kube/cluster-identity');
  /* eslint-enable @typescript-eslint/no-require-imports */
  let temporal: Awaited<ReturnType<typeof connectTemporal>>;
  try {
    temporal = await connectTemporal(cluster);
  } catch (err) {
    process.stderr.write(warningLine(`migration workflows not read: ${err instanceof Error ? err.message : String(err)}`));
    return {};
  }
  try {
    const here = await judgedPlacement(temporal.client, kube, temporal.here);
    return { migrationOf: migrationRecords(temporal.client, here), cluster: here.name, close: temporal.close };
  } catch (err) {
    await temporal.close();
    throw err;
  }
}
