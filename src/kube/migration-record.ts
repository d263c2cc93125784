/**
 * The one check a migration's record passes before it counts (DESIGN.md rule 16, docs/security.md "What a verdict
 * rests on"). Anyone holding the Temporal namespace's credentials can start a workflow at `migrate/<resource>`, on
 * any task queue, with any input, and complete it with any result; so a run at a migration's ID counts only when:
 *
 *   type      it is a migration (migrateResource, or delegateToBuiltIn);
 *   queue     it ran on the task queue svm's workers of the cluster poll (the placement's: a single-cluster install's
 *             base queue, a named cluster's `<base>/cluster/<name>`, or whatever queue the placement names);
 *   input     its start input names the resource, and the cluster (its name, and its uid where the input carries
 *             one) the placement names, or no cluster in a single-cluster install;
 *   result    its result parses as a migration's (contract/record-schema.ts);
 *   record    a Succeeded result's pass record names the resource (where it names one: records made before it was
 *             kept do not) and, in a named cluster, the uid pinned to it (a record naming none does not count there,
 *             issue 58's rule; a single-cluster install's records count without one, as they always did).
 *
 * Each refusal says why. Within one namespace this refuses what was started elsewhere, not what a poller of the
 * real queue answers: only separate namespaces (trust domains) can refuse that.
 *
 * Used by every reader of records: the drop check (src/kube/drop-check.ts, its activity), the trigger
 * (src/activities/trigger.ts), `svm plan` and the typed client's plan (src/kube/plan.ts), migrateAll's join
 * (src/activities/follow-migration.ts) and, through migrateAll and checkVersionDrop, a campaign's step.
 */
import type { Client } from '@temporalio/client';
import { decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow';
import { groupResourceString, type GroupResource } from '../api/resource';
import type { Placement } from '../contract/placement';
import { MigrationVerdictSchema, type MigrationVerdict } from '../contract/record-schema';
import type { MigrationRecord } from './drop-shared';

/** The workflow types whose result is a migration's verdict, at a migration's ID (migrationStart). */
export const MIGRATION_WORKFLOW_TYPES: readonly string[] = ['migrateResource', 'delegateToBuiltIn'];

/**
 * What a record must be to count: the resource it is about, and where svm's workers of its cluster run (the
 * placement: its task queue, its cluster's name and the uid pinned to it once known, or none in a single-cluster
 * install).
 */
export interface RecordExpectation {
  resource: GroupResource;
  placement: Placement;
}

/** The expectation of a placement (the client's, the worker's, a workflow's) for one resource. */
export function expectationOf(placement: Placement, resource: GroupResource): RecordExpectation {
  return { resource, placement };
}

/** A run at a migration's ID, as Temporal describes it: what the check reads. */
export interface MigrationRun {
  workflowId: string;
  type: string;
  taskQueue: string;
  /** The run's start input (its first argument); undefined when it had none. */
  input: unknown;
  /** A completed run's result; undefined for any other run. */
  result?: unknown;
}

export type CheckedRecord = { counts: true; verdict: MigrationVerdict } | { counts: false; why: string };

/**
 * The check: whether a completed run's result counts as the record of the expected resource's migration in the
 * expected cluster, and if not, why. Pure.
 */
export function checkRecord(run: MigrationRun, expect: RecordExpectation): CheckedRecord {
  const refused = (why: string): CheckedRecord => ({
    counts: false,
    why: `its last run (${run.workflowId}) ${why}: not svm's record of ${groupResourceString(expect.resource)}${expect.placement.inText}, so it does not count`,
  });
  const notStarted = startRefusal(run, expect);
  if (notStarted) return refused(notStarted);
  const parsed = MigrationVerdictSchema.safeParse(run.result);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return refused(
      `ended with a result that is not a migration's (${issue ? `${issue.path.join('.') || 'result'}: ${issue.message}` : 'unreadable'})`,
    );
  }
  const verdict = parsed.data;
  const record = verdict.phase === 'Succeeded' ? verdict.record : undefined;
  if (record?.resource !== undefined && record.resource !== groupResourceString(expect.resource))
    return refused(`recorded a pass of ${record.resource}`);
  // The uid last: a verdict made against another uid is named as such (the pass record's, else the start input's).
  const uid = expect.placement.uid;
  if (record && uid !== undefined && record.clusterUid !== uid)
    return {
      counts: false,
      why: record.clusterUid
        ? `its last whole pass (${run.workflowId}) was made against kube-system uid ${record.clusterUid}, but the cluster is pinned to ${uid}: another cluster's verdict does not count`
        : `its last whole pass (${run.workflowId}) names no cluster uid (made before svm recorded one), so it cannot be shown to be this cluster's (pinned to ${uid}): migrate once more to record one`,
    };
  const started = (run.input as { cluster?: { uid?: unknown } }).cluster?.uid;
  if (uid !== undefined && started !== undefined && started !== uid)
    return {
      counts: false,
      why: `its last run (${run.workflowId}) was started against kube-system uid ${String(started)}, but the cluster is pinned to ${uid}: another cluster's verdict does not count`,
    };
  return { counts: true, verdict };
}

/**
 * Why a run, running or ended, was not started as svm's migration of the expected resource here (its type, its
 * task queue, its start input), or undefined when it was. Pure.
 */
export function startRefusal(run: MigrationRun, expect: RecordExpectation): string | undefined {
  if (!MIGRATION_WORKFLOW_TYPES.includes(run.type)) return `is a ${run.type} workflow, not a migration`;
  const taskQueue = expect.placement.taskQueue;
  if (run.taskQueue !== taskQueue)
    return `ran on task queue ${run.taskQueue}, not ${taskQueue} (the one svm's workers of this cluster poll)`;
  return inputRefusal(run.input, expect);
}

/**
 * A run holding a migration's ID that svm did not start as that migration (anyone with the namespace's
 * credentials can start one, on a queue nobody polls, so that whatever joins it waits forever): terminated,
 * saying why, so that the real migration can start. Returns what was terminated and why, or undefined when the
 * ID is free, ended, or held by svm's own run.
 */
export async function evictForeignRun(client: Client, workflowId: string, expect: RecordExpectation): Promise<string | undefined> {
  const found = await readMigrationRun(client, workflowId);
  if (!found || found.status !== 'RUNNING') return undefined;
  const why = startRefusal(found.run, expect);
  if (!why) return undefined;
  const said = `a run at ${workflowId} that ${why} held the ID of svm's migration of ${groupResourceString(expect.resource)}`;
  await client.workflow
    .getHandle(workflowId)
    .terminate(`svm: ${said}`)
    .catch((err: unknown) => {
      // Ended meanwhile: nothing left to terminate.
      if (!(err instanceof Error && err.name === 'WorkflowNotFoundError')) throw err;
    });
  return `${said}: terminated`;
}

/** Why the start input is not the expected migration's, or undefined when it is. */
function inputRefusal(input: unknown, expect: RecordExpectation): string | undefined {
  if (typeof input !== 'object' || input === null) return 'was started without a migration input';
  const i = input as { resource?: unknown; group?: unknown; cluster?: unknown };
  const named = inputResource(i);
  if (named === undefined) return 'was started with an input that names no resource';
  const want = expect.resource;
  // A plural name alone (the minimal start, resolved by the workflow) names no group: its plural must match.
  const same =
    named.group === undefined ? named.resource === want.resource : named.group === want.group && named.resource === want.resource;
  if (!same)
    return `was started for ${named.group === undefined ? named.resource : groupResourceString({ group: named.group, resource: named.resource })}`;
  // Its cluster's name as the placement names it (none in a single-cluster install); its uid is compared last
  // (checkRecord), so that another uid's verdict is named as such.
  return expect.placement.inputRefusal(i.cluster);
}

/** The resource a migration's input names: a resolved reference, `plural.group`, or a plural with `group` beside it. */
function inputResource(i: { resource?: unknown; group?: unknown }): { group?: string; resource: string } | undefined {
  const r = i.resource;
  if (typeof r === 'object' && r !== null) {
    const ref = r as { group?: unknown; resource?: unknown };
    return typeof ref.group === 'string' && typeof ref.resource === 'string' ? { group: ref.group, resource: ref.resource } : undefined;
  }
  if (typeof r !== 'string' || r === '') return undefined;
  if (typeof i.group === 'string') return { group: i.group, resource: r };
  const dot = r.indexOf('.');
  return dot < 0 ? { resource: r } : { group: r.slice(dot + 1), resource: r.slice(0, dot) };
}

/**
 * The last run at a migration's ID, as Temporal describes it (its type, task queue, start input and, when it
 * completed, result), or undefined when there is none. The input is the first event of that run's history (one
 * event read, whatever the history's length).
 */
export async function readMigrationRun(
  client: Client,
  workflowId: string,
): Promise<{ run: MigrationRun; status: string; closeTime?: string } | undefined> {
  const handle = client.workflow.getHandle(workflowId);
  let d: Awaited<ReturnType<typeof handle.describe>>;
  try {
    d = await handle.describe();
  } catch (err) {
    if (err instanceof Error && err.name === 'WorkflowNotFoundError') return undefined;
    throw err;
  }
  const status = d.status.name;
  const first = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId, runId: d.runId },
    maximumPageSize: 1,
  });
  const payloads = first.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads;
  const input = payloads?.length ? await decodeFromPayloadsAtIndex<unknown>(client.options.loadedDataConverter, 0, payloads) : undefined;
  const result = status === 'COMPLETED' ? await client.workflow.getHandle(workflowId, d.runId).result() : undefined;
  return {
    run: { workflowId, type: d.type, taskQueue: d.taskQueue, input, ...(status === 'COMPLETED' ? { result } : {}) },
    status,
    ...(d.closeTime ? { closeTime: d.closeTime.toISOString() } : {}),
  };
}

/**
 * MigrationRecords from a Temporal client the caller holds (the worker's, or the CLI's with TEMPORAL_ADDRESS), for
 * the placement's cluster: each resource's migration workflow at the placement's ID, its last run checked
 * (checkRecord) against the placement's task queue and cluster. A record that does not count keeps its phase and
 * says why (`refused`); its pass record is dropped.
 */
export function migrationRecords(client: Client, placement: Placement): (resource: GroupResource) => Promise<MigrationRecord | undefined> {
  return async (resource) => {
    const workflowId = placement.id(`migrate/${groupResourceString(resource)}`);
    const found = await readMigrationRun(client, workflowId);
    if (!found) return undefined;
    const { run, status, closeTime } = found;
    const base = { workflowId, status, ...(closeTime ? { closeTime } : {}) };
    if (status !== 'COMPLETED') return base;
    const checked = checkRecord(run, expectationOf(placement, resource));
    if (!checked.counts) {
      const phase = (run.result as { phase?: unknown } | undefined)?.phase;
      return { ...base, ...(typeof phase === 'string' ? { phase } : {}), refused: checked.why };
    }
    const { phase, record } = checked.verdict;
    return { ...base, phase, ...(phase === 'Succeeded' && record ? { record } : {}) };
  };
}
