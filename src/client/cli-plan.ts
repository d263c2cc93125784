/** `svm plan`: what must be migrated before the next upgrade step can go on (read-only). */
import { Command, Option, type CommanderError } from 'commander';
import type { KubeClient } from '../kube/client';
import { kubeconfigOption, parseIntArg } from '../config/cli-options';
import { DEFAULT_PLAN_QPS, PLAN_ERROR_EXIT_CODE, planTable } from './plan-report';

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

Examples:
  svm plan                      # a table
  svm plan -o json | jq .items  # for machines
  svm plan --qps 20             # estimates at 20 updates/s
`;

export function planCommand(): Command {
  return (
    new Command('plan')
      .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
      .option(
        '--qps <n>',
        "updates per second the estimates assume (the worker's SVM_QPS default; 0: no estimates)",
        parseIntArg('--qps', 0, 100_000),
        DEFAULT_PLAN_QPS,
      )
      .addOption(kubeconfigOption())
      .addHelpText('after', PLAN_HELP)
      .allowExcessArguments(false)
      // A bad flag is an error (3), never "migrations needed" (1): a pipeline gating on the code must not misread it.
      .exitOverride((err: CommanderError) => {
        process.exit(err.exitCode === 0 ? 0 : PLAN_ERROR_EXIT_CODE);
      })
      .action(async (o: { output: 'text' | 'json'; qps: number; kubeconfig?: string }) => {
        let kube: KubeClient | undefined;
        try {
          // Loaded here, not with the command: `svm plan --help` needs neither the Kubernetes client nor the planner.
          /* eslint-disable @typescript-eslint/no-require-imports */
          const { KubeClient } = require('../kube/client') as typeof import('../kube/client');
          const { makePlan } = require('./plan') as typeof import('./plan');
          /* eslint-enable @typescript-eslint/no-require-imports */
          kube = KubeClient.fromKubeconfig(o.kubeconfig);
          const plan = await makePlan(kube, { qps: o.qps });
          process.stdout.write(o.output === 'json' ? JSON.stringify(plan, null, 2) + '\n' : planTable(plan));
          process.exitCode = plan.exitCode;
        } catch (err) {
          process.stderr.write(`svm plan: ${err instanceof Error ? err.message : String(err)}\n`);
          process.exitCode = PLAN_ERROR_EXIT_CODE;
        } finally {
          kube?.close();
        }
      })
  );
}
