/**
 * `svm setup|crds|managed-fields`: what an operator runs once, on a Temporal namespace (its search attributes), on a
 * cluster (svm's CRDs), or before an API version leaves one (the managedFields entries naming it). Loaded only when a
 * run names one of them (./cli.ts); what an action needs is required when it runs.
 */
import { Command } from 'commander';
import {
  clusterOption,
  contextOption,
  errorLine,
  kubeconfigOption,
  outputOption,
  withExamples,
  type OutputFormat,
} from '../config/cli-options';
import type { KubeClient } from '../kube/client';
import { withMigrator, type Target } from './cli-migrate';
import { formatted } from './table';

// Typed lazy requires (see above).
/* eslint-disable @typescript-eslint/no-require-imports */
const crdManifests = () => require('../api/crds') as typeof import('../api/crds');
const kubeClient = () => require('../kube/client') as typeof import('../kube/client');
const definitions = () => require('../contract/definitions') as typeof import('../contract/definitions');
/* eslint-enable @typescript-eslint/no-require-imports */

/** These commands by name (./cli.ts registers them). */
export function setupCommands() {
  return { setup: setupCommand(), crds: crdsCommand(), managedFields: managedFieldsCommand() };
}

// ------------------------------------------------------------ svm setup

function setupCommand(): Command {
  return withExamples(new Command('setup'), ['TEMPORAL_ADDRESS=temporal:7233 TEMPORAL_NAMESPACE=default svm setup']).action(
    registerOnNamespace,
  );
}

/** Registers svm's search attributes on the namespace of the Temporal settings, saying which were added and which were there. */
async function registerOnNamespace(): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { connectTemporal } = require('./connect') as typeof import('./connect');
  const { registerSearchAttributes } = require('./setup') as typeof import('./setup');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const { connection, settings: t } = await connectTemporal();
  try {
    const r = await registerSearchAttributes(connection, t.namespace);
    if (r.added.length > 0) process.stdout.write(`registered on namespace ${t.namespace}: ${r.added.join(', ')}\n`);
    if (r.present.length > 0) process.stdout.write(`already present on namespace ${t.namespace}: ${r.present.join(', ')}\n`);
  } finally {
    await connection.close();
  }
}

// ------------------------------------------------------------ svm crds print|install

function crdsCommand(): Command {
  const crds = withExamples(new Command('crds'), ['svm crds install', 'svm crds print > crds.yaml']);
  crds
    .command('print')
    .description('print the CRD manifests')
    .addHelpText('after', '\nExample:\n  svm crds print | kubectl apply -f -\n')
    .action(() => {
      process.stdout.write(crdManifests().migrationCrdsYaml());
    });
  crds
    .command('install')
    .description('create or update the CRDs in the cluster')
    .addHelpText('after', '\nExample:\n  svm crds install --kubeconfig ~/.kube/config\n')
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .addOption(clusterOption())
    .action(async (o: Target) => {
      const kube = kubeClient().KubeClient.fromKubeconfig(o.kubeconfig, { context: o.context });
      try {
        await installCrds(kube);
      } finally {
        kube.close();
      }
      process.stderr.write('installed storageversionmigrations.migration.k8s.io and storagestates.migration.k8s.io\n');
    });
  return crds;
}

/** Server-side applies the CRDs and waits until they are established. */
export async function installCrds(kube: KubeClient): Promise<void> {
  const { migrationCrds } = crdManifests();
  for (const crd of migrationCrds()) {
    await kube.request('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`, {
      body: JSON.stringify(crd),
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: 'svm', force: 'true' },
    });
  }
  for (const crd of migrationCrds()) {
    for (let i = 0; ; i++) {
      const c = await kube.getJson<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
      );
      if (c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True')) break;
      if (i > 100) throw new Error(`CRD ${crd.metadata.name} was not established after 10s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

// ------------------------------------------------------------ svm managed-fields

interface ManagedFieldsFlags {
  from: string;
  to?: string;
  output: OutputFormat;
  kubeconfig?: string;
  context?: string;
}

function managedFieldsCommand(): Command {
  return (
    withExamples(new Command('managed-fields'), [
      'svm managed-fields widgets.example.com --from example.com/v1          # before v1 leaves the CRD',
      'svm managed-fields mutatingadmissionpolicies --from admissionregistration.k8s.io/v1beta1 -o json',
    ])
      .argument('<resource>', 'the resource, as for svm migrate')
      .requiredOption('--from <group/version>', 'the API version whose managedFields entries are rewritten')
      .option('--to <version>', "the version they name instead (default: a CRD's storage version, or the group's preferred version)")
      .addOption(outputOption(['text', 'json', 'yaml']))
      .addOption(kubeconfigOption())
      .addOption(contextOption())
      .addOption(clusterOption())
      .allowExcessArguments(false)
      // A bad or missing flag is a refusal (2), never "some remain" (1).
      .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
      .addHelpText(
        'after',
        `
Server-side apply fails on an object whose managedFields name an API version
that is no longer served. This rewrites each such entry's apiVersion to a
served version (the same fields, owned by the same managers), through the
worker, as an identity of its own that may change nothing else (its fence:
deploy/managed-fields.yaml). Off by default: turn it on with that file (or
the chart's managedFields.rewrite=true), and grant that identity each
resource with \`svm grant <resource> --managed-fields | kubectl apply -f -\`.
No object's content is read or written. \`svm plan --drop\` says which
resources need it.

Exit codes: 0 no entry names the version any more; 1 some still do (changed
while the rewrite ran: run it again); 2 refused (not turned on or granted,
bad input) or an error.
`,
      )
      .action(async (resource: string, o: ManagedFieldsFlags) => {
        try {
          await rewriteManagedFields(resource, o);
        } catch (err) {
          process.stderr.write(errorLine(rootReason(err)));
          process.exitCode = 2;
        }
      })
  );
}

/** Refuses bad input before anything is started, then runs the rewrite and reports it; exit 0 when no entry names --from any more, else 1. */
async function rewriteManagedFields(resource: string, o: ManagedFieldsFlags): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { ManagedFieldsInputSchema } = require('../contract/drop') as typeof import('../contract/drop');
  const input = ManagedFieldsInputSchema.safeParse({ resource, from: o.from, ...(o.to ? { to: o.to } : {}) });
  if (!input.success) throw new Error(definitions().explainInput(input.error));
  const r = await withMigrator(o, (m) => m.rewriteManagedFields(input.data));
  process.stdout.write(
    formatted(o.output, r, {
      names: () => [r.resource],
      text: () =>
        `${r.resource}: ${r.entries} managedFields entries of ${r.rewritten} objects rewritten from ${r.from} to ${r.to}; ${r.objects} objects listed, ${r.changedMeanwhile} changed meanwhile, ${r.gone} gone; ${r.remaining} still name ${r.from}\n`,
    }),
  );
  process.exitCode = r.remaining === 0 ? 0 : 1;
}

/** The message at the root of err's causes: the workflow's failure wraps the activity's, which wraps the reason. */
function rootReason(err: unknown): string {
  let root: unknown = err;
  while (root instanceof Error && root.cause instanceof Error) root = root.cause;
  return root instanceof Error ? root.message : String(root);
}
