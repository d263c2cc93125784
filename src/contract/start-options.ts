/**
 * How a migration workflow is started: one place, shared by the API, the CLI,
 * the bridge and the trigger. Side-effect free (no workflow code): clients
 * and activities may import it.
 */
import { TypedSearchAttributes } from '@temporalio/common';
import { groupResourceString, migrationWorkflowId, type ResourceRef } from '../api/resource';
import { MigrationGroup, MigrationMigrated, MigrationPhase, MigrationResource } from './search-attributes';

export function startOptions(ref: ResourceRef, taskQueue: string) {
  const name = groupResourceString(ref);
  return {
    taskQueue,
    workflowId: migrationWorkflowId(ref),
    // Starting again joins the running migration of the same resource.
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
    typedSearchAttributes: new TypedSearchAttributes([
      { key: MigrationResource, value: name },
      { key: MigrationGroup, value: ref.group || 'core' },
      { key: MigrationPhase, value: 'Pending' },
      { key: MigrationMigrated, value: 0 },
    ]),
    staticSummary: `Storage version migration of ${name}`,
    staticDetails: `Rewrites every stored ${ref.kind} (${name}, through ${ref.group ? ref.group + '/' : ''}${ref.version}) with a no-op update so the API servers re-encode it in their current storage version, in one whole pass from the beginning of the list.`,
  };
}
