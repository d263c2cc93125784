/** `svm grant`: the narrow grant that lets the worker migrate one resource its default rights leave out. */
import { Command, Option } from 'commander';
import { contextOption, kubeconfigOption, warningLine, withExamples } from '../config/cli-options';
import { resolveResource } from '../kube/resolve';
import { servedByAggregatedApi } from '../kube/fence-probe';
import { DEFAULT_SERVICE_ACCOUNT, grantManifests, managedFieldsGrantManifests, MANAGED_FIELDS_SERVICE_ACCOUNT, needsGrant } from './grant';

export function grantCommand(): Command {
  const cmd = new Command('grant')
    .argument('<resource>', 'the resource, as for svm migrate (widgets.example.com, mutatingadmissionpolicies)')
    .addOption(
      new Option(
        '--service-account <namespace/name>',
        `the worker's ServiceAccount (with --managed-fields: ${MANAGED_FIELDS_SERVICE_ACCOUNT})`,
      ),
    )
    .option(
      '--managed-fields',
      'instead: patch on the resource for the managedFields rewrite (svm managed-fields; deploy/managed-fields.yaml)',
    )
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .allowExcessArguments(false)
    .action(async (resource: string, o: { serviceAccount?: string; managedFields?: boolean; kubeconfig?: string; context?: string }) => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { KubeClient } = require('../kube/client') as typeof import('../kube/client');
      const kube = KubeClient.fromKubeconfig(o.kubeconfig, { context: o.context });
      try {
        const ref = await resolveResource(kube, resource);
        if (o.managedFields) {
          process.stdout.write(managedFieldsGrantManifests(ref, o.serviceAccount ?? MANAGED_FIELDS_SERVICE_ACCOUNT));
          return;
        }
        if (!needsGrant(ref))
          process.stderr.write(warningLine(`${resource} is in the worker's default rights (deploy/rbac.yaml); printed anyway`));
        const aggregated = await servedByAggregatedApi(kube, ref);
        if (aggregated === undefined)
          process.stderr.write(
            warningLine(
              `whether an aggregated API serves ${resource} could not be read (get apiservices): if one does, no fence sees its requests`,
            ),
          );
        process.stdout.write(grantManifests({ ...ref, aggregated: aggregated === true }, o.serviceAccount ?? DEFAULT_SERVICE_ACCOUNT));
      } finally {
        kube.close();
      }
    });
  return withExamples(cmd, [
    'svm grant widgets.example.com | kubectl apply -f -',
    'svm grant mutatingadmissionpolicies | kubectl apply -f -   # then delete it once migrated',
    'svm grant widgets.example.com --managed-fields | kubectl apply -f -   # for svm managed-fields',
  ]);
}
