/**
 * Why a StorageVersionMigration ended: the reason its Failed condition gives (kubectl wait
 * --for=condition=Failed, then .status.conditions[].reason), one constant per reason, as the
 * built-in keeps its own (pkg/controller/storageversionmigrator: migrationFailedStatusReason, ...).
 * On the standard API the built-in's reasons stay on its conditions and these go in svm's Progress
 * condition (src/api/standard-migration.ts).
 */

/** The migration failed (objects whose update was refused, or an error it could not go on from). The default. */
export const FAILED = 'Failed';
/** The migration was aborted (svm abort, the last StorageVersionMigration attached to it deleted, the workflow cancelled). */
export const ABORTED = 'Aborted';

// The bridge's refusals of a new object.

/**
 * spec.continueToken is set: svm never resumes from a given token. Note: defined beside the CRD schema whose
 * description names it (src/api/migration.ts): importing it from here brings that module's zod schemas along.
 */
export { CONTINUE_TOKEN_REFUSED } from '../api/migration';
/** The resource its spec names is not one svm can migrate (not served, not listable and patchable). */
export const INVALID_RESOURCE = 'InvalidResource';
/** Its creator set the workflow-id annotation, which only svm sets. */
export const WORKFLOW_ANNOTATION_REFUSED = 'WorkflowAnnotationRefused';

// The bridge's repairs: the workflow closed without writing a terminal status here.

/** Its workflow no longer exists in Temporal (past the namespace's retention). */
export const WORKFLOW_NOT_FOUND = 'WorkflowNotFound';
/** An earlier run listed it and closed without a result; the run going now (or the last) does not list it. */
export const WORKFLOW_CLOSED = 'WorkflowClosed';
/** Its workflow closed without recording a result here: the reason per Temporal status (an unknown one: WORKFLOW_CLOSED). */
export const WORKFLOW_TERMINATED = 'WorkflowTerminated';
export const WORKFLOW_TIMED_OUT = 'WorkflowTimedOut';
export const WORKFLOW_CANCELLED = 'WorkflowCancelled';
export const WORKFLOW_FAILED = 'WorkflowFailed';
export const WORKFLOW_COMPLETED = 'WorkflowCompleted';
