/**
 * What the StorageVersionMigration bridge (src/worker/bridge.ts) does with an object, decided from what it
 * observed: a pure function, one branch per row of this table, unit-tested row by row (test/unit-bridge-decision).
 * The bridge observes, asks decide(), and acts.
 *
 *   state / situation                              action
 *   ---------------------------------------------  ------------------------------------------------
 *   finished (our terminal phase, or upstream's     none: it is never run again
 *     Succeeded=True / Failed=True, no phase)
 *   standard API, not annotated, another            leaveToOtherController: it wrote first, so it is
 *     controller wrote its status (the built-in's       its; svm steps back and says so (log, metric, an
 *     first write is status.resourceVersion, then       Event on the object): never two controllers
 *     Running=True)
 *   standard API, new, nobody else wrote it, the    waitForOtherController: taken at creation +
 *     built-in acted lately (BUILT_IN_QUIET_MS),      OWN_TAKE_AFTER_MS unless another controller writes
 *     created less than OWN_TAKE_AFTER_MS ago          it first (an Event says when); looked at again then
 *   ... created OWN_TAKE_AFTER_MS ago or more, or   attach (below): nobody took it in the time a running
 *     the built-in not seen lately                    built-in takes to act on a new object
 *   new, spec.continueToken set                     end: Failed, reason ContinueTokenRefused
 *   new                                             attach (signalWithStart), then annotate; a resource
 *                                                     not migratable is refused there: Failed, reason
 *                                                     InvalidResource
 *   upstreamRunning (Running=True, no phase:        attach, taken over: a whole pass, spec.continueToken
 *     left by kube-storage-version-migrator)          ignored, said in the message
 *   annotated: its workflow not looked at yet       lookAtWorkflow
 *   annotated, its workflow does not exist          end: Failed, WorkflowNotFound (svm wrote its status
 *                                                     before) or WorkflowAnnotationRefused (never)
 *   annotated, its workflow running and listing it  none
 *   annotated, its workflow running, one of more    copyProgress: the workflow's progress copied here
 *     objects than it lists (MAX_MIGRATION_OBJECTS)
 *   annotated, its workflow running without it,     end: Failed, WorkflowClosed: an earlier run listed it
 *     svm wrote its status before
 *   annotated, its workflow running without it,     recheckLater: the workflow's own objects are created
 *     never written, for less than the grace          annotated and listed a moment later
 *   ... for the grace or longer                     end: Failed, WorkflowAnnotationRefused (its creator
 *                                                     set the annotation)
 *   annotated, its workflow closed, the object      none: the workflow's last write landed meanwhile
 *     finished or gone when read again
 *   annotated, its workflow closed with a result    end: the result (its phase, message and progress)
 *     that lists it (or it follows)
 *   ... a result that does not list it              end: Failed, WorkflowClosed (svm wrote its status
 *                                                     before) or WorkflowAnnotationRefused (never)
 *   annotated, its workflow closed without a        end: Failed, the reason the workflow closed
 *     result (terminated, timed out, cancelled,       (WorkflowTerminated, ...)
 *     failed)
 *   deleted, attached to a running workflow          abort, only if the workflow lists it and no other
 *                                                     object it lists still exists (Bridge.deleted)
 */
import { migrationWorkflowId } from '../api/resource';
import { WORKFLOW_ID_ANNOTATION } from '../kube/migrations';
import type { ObjectView } from '../kube/migration-objects';
import { MAX_MIGRATION_OBJECTS, type MigrationProgress, type MigrationResult } from '../contract/definitions';
import { migrationStatus, type StatusFacts } from '../contract/migration-status';
import { placedId } from '../contract/placement';
import {
  ABORTED,
  CONTINUE_TOKEN_REFUSED,
  FAILED,
  WORKFLOW_ANNOTATION_REFUSED,
  WORKFLOW_CANCELLED,
  WORKFLOW_CLOSED,
  WORKFLOW_COMPLETED,
  WORKFLOW_FAILED,
  WORKFLOW_NOT_FOUND,
  WORKFLOW_TERMINATED,
  WORKFLOW_TIMED_OUT,
} from '../contract/reasons';
import { CONTINUE_TOKEN_REFUSED_MESSAGE } from '../api/migration';
import type { StorageVersionMigrationStatus } from '../api/migration';

/** What the bridge saw of an attached object's workflow. */
export type WorkflowSeen =
  | { state: 'missing' }
  /** Running (a continued-as-new chain included): its progress, and how long this object has gone unlisted by it. */
  | { state: 'running'; progress: MigrationProgress; unlistedForMs: number; graceMs: number }
  /**
   * Closed with Temporal status `status`; the object read again after that: finished (or gone), or not, and then
   * the workflow's result, or why it closed without one (`cause`).
   */
  | { state: 'closed'; status: string; objectFinished: true }
  | { state: 'closed'; status: string; objectFinished: false; result: MigrationResult }
  | { state: 'closed'; status: string; objectFinished: false; cause: string };

/**
 * Own mode, the built-in seen acting lately: how long svm leaves a new standard object to whichever controller
 * writes it first, from its creation. A running built-in writes status.resourceVersion within seconds of a
 * creation and acts within about a minute (pkg/controller/storageversionmigrator of v1.37.2 retries a resource
 * its discovery or garbage-collector cache does not know yet for one minute after the object's creation, and
 * fails it then): an object nobody wrote in two minutes has no other controller. The default of the worker's
 * SVM_OWN_TAKE_AFTER_SECONDS (BridgeSituation.ownTakeAfterMs).
 */
export const OWN_TAKE_AFTER_MS = 2 * 60_000;

/** How a take-after delay reads in an Event: whole minutes as minutes ("2 minutes", the default), else seconds. */
export function takeAfterText(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${ms / 1000} seconds`;
}

export interface BridgeSituation {
  object: Pick<
    ObjectView,
    'state' | 'workflowId' | 'statusFromWorkflow' | 'continueToken' | 'ref' | 'resource' | 'otherWriters' | 'createdAt'
  >;
  /** The time of the look (ms since the epoch): an object's age is measured against it. */
  now: number;
  /** The API the bridge serves: standard objects another controller runs are left to it. */
  api: 'sigs' | 'standard';
  /** The cluster the bridge's worker serves, if named (the workflow IDs carry it). */
  cluster?: string;
  /** Own mode: another controller (the built-in) acted on a standard object lately (BUILT_IN_QUIET_MS). */
  builtInActing: boolean;
  /** Own mode: how long from its creation a new object is left to another controller; OWN_TAKE_AFTER_MS when not given. */
  ownTakeAfterMs?: number;
  /** The attached object's workflow, once looked at. */
  workflow?: WorkflowSeen;
}

export type BridgeAction =
  | { act: 'none' }
  | { act: 'leaveToOtherController' }
  /** Own mode: left to any controller that writes it before takeAt (ms since the epoch), looked at again after afterMs. */
  | { act: 'waitForOtherController'; takeAt: number; afterMs: number }
  | { act: 'attach'; takeover: boolean }
  | { act: 'lookAtWorkflow'; workflowId: string }
  | { act: 'recheckLater'; afterMs: number }
  /** One of more objects than the workflow lists: its progress written here. */
  | { act: 'copyProgress'; status: StorageVersionMigrationStatus; reason?: string }
  /** A terminal status written now: a refusal, or a repair of a closed workflow's. `log` says why, for the worker's log. */
  | { act: 'end'; facts: Omit<StatusFacts, 'endedAt'>; reason: string; log: string };

/** The reason given for a closed workflow's status, per Temporal status. */
const CLOSED: Record<string, { verb: string; reason: string }> = {
  TERMINATED: { verb: 'was terminated', reason: WORKFLOW_TERMINATED },
  TIMED_OUT: { verb: 'timed out', reason: WORKFLOW_TIMED_OUT },
  CANCELLED: { verb: 'was cancelled', reason: WORKFLOW_CANCELLED },
  FAILED: { verb: 'failed', reason: WORKFLOW_FAILED },
  COMPLETED: { verb: 'completed', reason: WORKFLOW_COMPLETED },
};

/** How often an unlisted object is looked at again within its grace. */
const RECHECK_MS = 3000;

const failed = (message: string, reason: string, log: string = message): BridgeAction => ({
  act: 'end',
  facts: { phase: 'Failed', message },
  reason,
  log,
});

/** The action for one object, from what was observed of it (the table above). */
export function decide(s: BridgeSituation): BridgeAction {
  const { object } = s;
  if (object.state === 'finished') return { act: 'none' };
  const workflowId = object.workflowId;
  if (workflowId) {
    if (!s.workflow) return { act: 'lookAtWorkflow', workflowId };
    return decideAttached(s, workflowId, s.workflow);
  }
  if (s.api === 'standard') {
    if (object.state === 'upstreamRunning' || object.otherWriters.length > 0) return { act: 'leaveToOtherController' };
    if (s.builtInActing && object.createdAt !== undefined) {
      const takeAt = object.createdAt + (s.ownTakeAfterMs ?? OWN_TAKE_AFTER_MS);
      if (s.now < takeAt) return { act: 'waitForOtherController', takeAt, afterMs: takeAt - s.now };
    }
  }
  if (object.state === 'new' && object.continueToken !== undefined)
    return failed(CONTINUE_TOKEN_REFUSED_MESSAGE, CONTINUE_TOKEN_REFUSED, 'StorageVersionMigration refused: spec.continueToken is set');
  return { act: 'attach', takeover: object.state === 'upstreamRunning' };
}

function decideAttached(s: BridgeSituation, workflowId: string, workflow: WorkflowSeen): BridgeAction {
  const { object } = s;
  switch (workflow.state) {
    case 'missing': {
      const message = object.statusFromWorkflow
        ? `its migration workflow ${workflowId} no longer exists in Temporal (past the namespace's retention, or the Temporal server lost it) and never recorded a result here`
        : `the annotation ${WORKFLOW_ID_ANNOTATION} names a workflow that does not exist (${workflowId}); only svm sets it: create the StorageVersionMigration without it`;
      return failed(message, object.statusFromWorkflow ? WORKFLOW_NOT_FOUND : WORKFLOW_ANNOTATION_REFUSED);
    }
    case 'running':
      return decideRunning(s, workflowId, workflow);
    case 'closed':
      return decideClosed(s, workflowId, workflow);
  }
}

function decideRunning(s: BridgeSituation, workflowId: string, w: Extract<WorkflowSeen, { state: 'running' }>): BridgeAction {
  const { object } = s;
  const { progress } = w;
  if (progress.migrationObjects.includes(object.ref)) return { act: 'none' };
  if (follows(object, workflowId, s.cluster)) {
    const reason = progress.phase === 'Failed' ? FAILED : progress.phase === 'Aborted' ? ABORTED : undefined;
    const status = migrationStatus({ phase: progress.phase, message: followerMessage(progress), workflowId, progress });
    return { act: 'copyProgress', status, ...(reason ? { reason } : {}) };
  }
  if (object.statusFromWorkflow === workflowId) {
    // Its workflow wrote here before, so it listed it: that run closed without a result, and the one going now is another.
    const message = `an earlier run of the migration workflow ${workflowId} ended without recording a result here; the run going now does not include this object`;
    return failed(message, WORKFLOW_CLOSED, `repairing the status of a StorageVersionMigration: ${message}`);
  }
  // The workflow's own objects are created annotated and listed a moment later: give it time.
  if (w.unlistedForMs < w.graceMs) return { act: 'recheckLater', afterMs: Math.min(w.graceMs, RECHECK_MS) };
  return failed(
    `refused: the annotation ${WORKFLOW_ID_ANNOTATION} was set by this object's creator (the workflow ${workflowId} does not list it); only svm sets it. Create the StorageVersionMigration without the annotation`,
    WORKFLOW_ANNOTATION_REFUSED,
    'StorageVersionMigration refused: workflow-id annotation set by its creator',
  );
}

/** Its workflow closed: its last act is to write a terminal status; where it did not land, write it. */
function decideClosed(s: BridgeSituation, workflowId: string, w: Extract<WorkflowSeen, { state: 'closed' }>): BridgeAction {
  if (w.objectFinished) return { act: 'none' };
  const { object } = s;
  const closed = CLOSED[w.status] ?? { verb: `closed (${w.status})`, reason: WORKFLOW_CLOSED };
  const repairing = (message: string) => `repairing the status of a StorageVersionMigration: ${message}`;
  if ('cause' in w) {
    const message = `the migration workflow ${workflowId} ${closed.verb} (${w.cause}) without recording a result`;
    return failed(message, closed.reason, repairing(message));
  }
  const result = w.result;
  if (!result.migrationObjects.includes(object.ref) && !follows(object, workflowId, s.cluster)) {
    const message = object.statusFromWorkflow
      ? `an earlier run of the migration workflow ${workflowId} ended without recording a result here; its latest run (${result.phase}) did not include this object`
      : `refused: the annotation ${WORKFLOW_ID_ANNOTATION} was set by this object's creator (the workflow ${workflowId} completed without it); only svm sets it. Create the StorageVersionMigration without the annotation`;
    return failed(message, object.statusFromWorkflow ? WORKFLOW_CLOSED : WORKFLOW_ANNOTATION_REFUSED, repairing(message));
  }
  // The workflow finished but its last status write did not land here: write its result.
  const message = result.message ?? `the migration ${result.phase === 'Succeeded' ? 'succeeded' : 'ended ' + result.phase}`;
  return {
    act: 'end',
    facts: { phase: result.phase, message, workflowId, progress: result },
    reason: result.phase === 'Aborted' ? ABORTED : FAILED,
    log: repairing(message),
  };
}

/**
 * An object the workflow does not list but whose annotation names the workflow of its own resource (the ID
 * follows from the group and resource its spec names, exactly as the bridge accepts them): one of more objects
 * than the workflow lists. Whoever set the annotation, it asks for the status of that resource's migration.
 */
function follows(obj: BridgeSituation['object'], workflowId: string, cluster: string | undefined): boolean {
  return placedId(migrationWorkflowId({ group: obj.resource.group ?? '', resource: obj.resource.resource }), cluster) === workflowId;
}

function followerMessage(p: MigrationProgress): string {
  const note = `status copied by svm's bridge: the migration workflow mirrors its status into its first ${MAX_MIGRATION_OBJECTS} StorageVersionMigrations`;
  return p.message ? `${p.message} (${note})` : note;
}
