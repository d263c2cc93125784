/**
 * The kinds of workflow svm starts, one function each: what a start needs besides where it runs (its type, its ID
 * as a single-cluster install names it, its input, its description). A Placement (./placement.ts) turns one into
 * the options of a start (`here.start(spec)`) or of a child (`here.child(spec)`): every start site goes through
 * both, so a workflow's ID, task queue, search attributes and input's cluster are derived in one place.
 * Side-effect free: clients, activities and workflows may import it.
 */
import { groupResourceString, type ResourceRef } from '../api/resource';
import { MIGRATE_ALL_WORKFLOW_ID, TRIGGER_WORKFLOW_ID, type MigrationOptions } from './definitions';
import {
  DROP_CHECK_WORKFLOW_TYPE,
  dropCheckWorkflowId,
  MANAGED_FIELDS_WORKFLOW_TYPE,
  managedFieldsWorkflowId,
  type ManagedFieldsInput,
} from './drop';
import { Placement, type StartSpec } from './placement';
import { MigrationGroup, MigrationMigrated, MigrationPhase, MigrationResource } from './search-attributes';
import type { TriggerInput } from './trigger';

/** The migration of one resource (migrateResource; delegateToBuiltIn where the built-in migrates: the same ID). */
export function migrationStart<I extends { resource: ResourceRef }>(input: I, type = 'migrateResource'): StartSpec<I> {
  const ref = input.resource;
  const name = groupResourceString(ref);
  return {
    type,
    id: `migrate/${name}`,
    input,
    attributes: [
      { key: MigrationResource, value: name },
      { key: MigrationGroup, value: ref.group || 'core' },
      { key: MigrationPhase, value: 'Pending' },
      { key: MigrationMigrated, value: 0 },
    ],
    summary: `Storage version migration of ${name}`,
    details: `Rewrites every stored ${ref.kind} (${name}, through ${ref.group ? ref.group + '/' : ''}${ref.version}) with a no-op update so the API servers re-encode it in their current storage version, in one whole pass from the beginning of the list.`,
  };
}

/** The initializer: every chosen resource, `parallelism` at a time (migrateAll). */
export function migrateAllStart(
  input: { resources: ResourceRef[]; parallelism: number; options?: Partial<MigrationOptions> },
  chosen: boolean,
): StartSpec<typeof input> {
  const n = input.resources.length;
  return {
    type: 'migrateAll',
    id: MIGRATE_ALL_WORKFLOW_ID,
    input,
    summary: `Storage version migration of ${chosen ? `${n} chosen resources` : `every resource (${n})`}`,
    details: `Migrates ${input.resources.map((r) => groupResourceString(r)).join(', ')}, ${input.parallelism} at a time, each as its own child migration.`,
  };
}

/** The periodic trigger (storageVersionTrigger): one per cluster. */
export function triggerStart(input: TriggerInput): StartSpec<TriggerInput> {
  return {
    type: 'storageVersionTrigger',
    id: TRIGGER_WORKFLOW_ID,
    input,
    summary: 'Storage version trigger',
    details: `Polls every API server's discovery every ${input.periodSeconds}s, keeps StorageState objects, and starts migrations when a storageVersionHash changes.`,
  };
}

/** The managedFields rewrite of a resource at a version about to be removed (rewriteManagedFields). */
export function managedFieldsStart(input: ManagedFieldsInput): StartSpec<ManagedFieldsInput> {
  return {
    type: MANAGED_FIELDS_WORKFLOW_TYPE,
    id: managedFieldsWorkflowId(input.resource, input.from),
    input,
    summary: `managedFields of ${input.resource}: ${input.from} -> ${input.to ?? 'its storage version'}`,
  };
}

/** The drop check of a group version, as the worker makes it (checkVersionDrop): one per version and window. */
export function dropCheckStart<I extends { groupVersion: string; requestsWindowSeconds?: number }>(input: I): StartSpec<I> {
  return {
    type: DROP_CHECK_WORKFLOW_TYPE,
    id: `${dropCheckWorkflowId(input.groupVersion)}/window-${input.requestsWindowSeconds ?? 'default'}`,
    input,
    summary: `Drop check of ${input.groupVersion}`,
  };
}

/**
 * The options of a migration's start for a Temporal client of one's own (the contract's, docs/upgrade-tooling.md):
 * workflow ID, ID conflict policy (starting again joins the running migration), search attributes and summary, on
 * `taskQueue` as given. With a cluster named, taskQueue must be that cluster's (clusterTaskQueue) and the input must
 * name the cluster too (`cluster: {name}`): the workflow refuses an ID that is not its resource's in its cluster.
 */
export function startOptions(ref: ResourceRef, taskQueue: string, cluster?: string) {
  const { args: _input, ...options } = Placement.of(taskQueue, cluster).start(migrationStart({ resource: ref }));
  return { ...options, taskQueue };
}
