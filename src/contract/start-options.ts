/**
 * How a migration workflow is started: one place, shared by the API, the CLI,
 * the bridge and the trigger. Side-effect free (no workflow code): clients
 * and activities may import it.
 */
import { TypedSearchAttributes } from '@temporalio/common';
import { groupResourceString, migrationWorkflowId, type ResourceRef } from '../api/resource';
import { inClusterText } from '../api/cluster';
import { MigrationCluster, MigrationGroup, MigrationMigrated, MigrationPhase, MigrationResource } from './search-attributes';

/**
 * The options of a migration's start. With a cluster named, taskQueue must be that cluster's
 * (clusterTaskQueue) and the input must name the cluster too (`cluster: {name}`): the workflow refuses an ID that
 * is not its resource's in its cluster.
 */
export function startOptions(ref: ResourceRef, taskQueue: string, cluster?: string) {
  const name = groupResourceString(ref);
  return {
    taskQueue,
    workflowId: migrationWorkflowId(ref, cluster),
    // Starting again joins the running migration of the same resource.
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
    typedSearchAttributes: new TypedSearchAttributes([
      { key: MigrationResource, value: name },
      { key: MigrationGroup, value: ref.group || 'core' },
      { key: MigrationPhase, value: 'Pending' },
      { key: MigrationMigrated, value: 0 },
      ...(cluster ? [{ key: MigrationCluster, value: cluster }] : []),
    ]),
    staticSummary: `Storage version migration of ${name}${inClusterText(cluster)}`,
    staticDetails: `Rewrites every stored ${ref.kind} (${name}, through ${ref.group ? ref.group + '/' : ''}${ref.version}) with a no-op update so the API servers re-encode it in their current storage version, in one whole pass from the beginning of the list.`,
  };
}
