/** `svm prune`: a CRD's status.storedVersions pruned by the operator's identity, on the checked record of a whole pass. */
import { Command, Option, type CommanderError } from 'commander';
import type { KubeClient } from '../kube/client';
import type { PruneOutcome } from '../kube/prune';
import { clusterOption, errorLine, kubeconfigOption } from '../config/cli-options';
import { tableLines } from './table';

/** Any error: a bad flag, no Temporal, an API that cannot be reached. */
export const PRUNE_ERROR_EXIT_CODE = 2;

export const PRUNE_HELP = `
Prunes each CRD's status.storedVersions to its storage version, as the
worker does after a whole pass unless it runs with SVM_PRUNE=operator (then
its token holds no right on CRD status, and this command, with your
kubeconfig, or the pre-upgrade Job, makes that write). storedVersions is the
API server's own guard against removing a version objects may still be
stored in: a CRD is pruned only on the record of a whole pass in Temporal
(TEMPORAL_ADDRESS, TEMPORAL_TASK_QUEUE: the workers'), checked as the drop
check checks it (a migration of that resource, on the workers' queue, in
this cluster, with a migration's result; Succeeded, verified on every API
server, under an agreement that still holds now, to the version stored
now). Each CRD refused is printed with why.

Exit codes:
  0  every CRD asked was pruned, or had nothing to prune
  1  one or more refused (see the reasons)
  2  error: nothing was judged (no TEMPORAL_ADDRESS, a bad flag, the API
     or Temporal cannot be reached)

Examples:
  svm prune widgets.example.com        # one CRD
  svm prune --all                      # every CRD whose storedVersions names more than its storage version
  svm prune --all -o json
`;

interface PruneFlags {
  all?: boolean;
  output: 'text' | 'json';
  kubeconfig?: string;
  cluster?: string;
}

export function pruneCommand(): Command {
  return new Command('prune')
    .argument('[crds...]', 'CRDs by name (<plural>.<group>)')
    .option('--all', 'every CRD whose status.storedVersions names more than its storage version')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addOption(kubeconfigOption())
    .addOption(clusterOption())
    .addHelpText('after', PRUNE_HELP)
    .exitOverride((err: CommanderError) => process.exit(err.exitCode === 0 ? 0 : PRUNE_ERROR_EXIT_CODE))
    .action(async (crds: string[], o: PruneFlags) => {
      if (Boolean(o.all) === crds.length > 0) {
        process.stderr.write(errorLine(o.all ? 'name CRDs or --all, not both' : 'name the CRDs to prune, or --all'));
        process.exitCode = PRUNE_ERROR_EXIT_CODE;
        return;
      }
      if (!process.env.TEMPORAL_ADDRESS) {
        process.stderr.write(errorLine('a prune rests on the record of a whole pass in Temporal: set TEMPORAL_ADDRESS'));
        process.exitCode = PRUNE_ERROR_EXIT_CODE;
        return;
      }
      let kube: KubeClient | undefined;
      let close: (() => Promise<void>) | undefined;
      try {
        const run = await pruneRun(o, crds);
        kube = run.kube;
        close = run.close;
        const outcomes = await run.prune();
        process.stdout.write(o.output === 'json' ? JSON.stringify({ crds: outcomes }, null, 2) + '\n' : pruneTable(outcomes));
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        process.exitCode = (require('../kube/prune') as typeof import('../kube/prune')).pruneExitCode(outcomes);
      } catch (err) {
        process.stderr.write(errorLine(err));
        process.exitCode = PRUNE_ERROR_EXIT_CODE;
      } finally {
        kube?.close();
        await close?.();
      }
    });
}

/** The clients a prune needs (loaded here: `svm prune --help` needs none), and the prune itself. */
async function pruneRun(o: PruneFlags, crds: string[]) {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { KubeClient } = require('../kube/client') as typeof import('../kube/client');
  const { pruneCrds } = require('../kube/prune') as typeof import('../kube/prune');
  const { migrationRecords } = require('../kube/migration-record') as typeof import('../kube/migration-record');
  const { judgedPlacement } = require('../kube/cluster-identity') as typeof import('../kube/cluster-identity');
  const { kubernetesEndpoints } = require('../kube/apiservers') as typeof import('../kube/apiservers');
  const { readAgreement } = require('../kube/server-agreements') as typeof import('../kube/server-agreements');
  const { resolveResource } = require('../kube/resolve') as typeof import('../kube/resolve');
  const { connectCommand } = require('./connect') as typeof import('./connect');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const kube = KubeClient.fromKubeconfig(o.kubeconfig);
  // Connected and its namespace checked (a credential refused or a namespace missing said in a sentence), as `svm plan`.
  const {
    client,
    here: placement,
    close,
  } = await connectCommand(o.cluster).catch((e: unknown) => {
    kube.close();
    throw e;
  });
  const apiservers = kubernetesEndpoints(kube);
  return {
    kube,
    close: async () => {
      apiservers.close();
      await close();
    },
    prune: async (): Promise<PruneOutcome[]> => {
      // The records counted are those of the workers' queue and this cluster (its pinned uid), for the cluster the
      // kubeconfig reaches: another cluster's record never prunes this one's CRD.
      const here = await judgedPlacement(client, kube, placement);
      return pruneCrds(kube, o.all ? 'all' : crds, {
        migrationOf: migrationRecords(client, here),
        cluster: here.name,
        agreementOf: async (crd) => readAgreement(kube, apiservers, await resolveResource(kube, crd.metadata.name)),
      });
    },
  };
}

/** One line per CRD: what was done, storedVersions before and after, and why. */
export function pruneTable(outcomes: PruneOutcome[]): string {
  if (outcomes.length === 0) return 'no CRD names more than its storage version in status.storedVersions: nothing to prune\n';
  const rows = outcomes.map((o) => [
    o.crd,
    o.action,
    `[${o.storedVersions.join(', ')}]${o.now ? ` -> [${o.now.join(', ')}]` : ''}`,
    o.reason,
  ]);
  return tableLines(['CRD', 'ACTION', 'STORED VERSIONS', 'WHY'], rows).join('\n') + '\n';
}
