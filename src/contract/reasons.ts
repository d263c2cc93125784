/**
 * Every reason and failure type svm names, one constant each, as the built-in keeps its own
 * (pkg/controller/storageversionmigrator: migrationFailedStatusReason, ...). The strings are wire names: users
 * match on them (kubectl wait, alerts, `temporal workflow list`) and recorded histories carry them, so a
 * value never changes (test/unit-reasons pins each).
 *
 * Condition reasons: why a StorageVersionMigration ended, the reason its Failed condition gives (kubectl wait
 * --for=condition=Failed, then .status.conditions[].reason). On the standard API the built-in's reasons stay
 * on its conditions and these go in svm's Progress condition (src/api/standard-migration.ts).
 *
 * Failure types: the type of the ApplicationFailure a workflow or an activity fails with, which callers match
 * (nonRetryableErrorTypes, the client's MigrationFailed) and histories record.
 *
 * Those src/api names itself are defined there (the bottom layer: it imports nothing above) and listed here.
 * Free of zod: workflows import this module.
 */

/** The migration failed (objects whose update was refused, or an error it could not go on from). The default. */
export const FAILED = 'Failed';
/** The migration was aborted (svm abort, the last StorageVersionMigration attached to it deleted, the workflow cancelled). */
export const ABORTED = 'Aborted';

// The bridge's refusals of a new object.

/**
 * spec.continueToken is set: svm never resumes from a given token (src/api/conditions.ts: the CRD's description
 * names it). INVALID_RESOURCE: the resource its spec names is not one svm can migrate (not served, not listable
 * and patchable); a failure type too (below).
 */
export { CONTINUE_TOKEN_REFUSED, INVALID_RESOURCE } from '../api/conditions';
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

// ------------------------------------------------------------ failure types

/**
 * A migration that ended Failed (objects whose update was refused, or an error it could not go on from): its details
 * hold the progress. Also the reason of a CRD's StorageMigrating condition when its migration failed (src/kube/crds.ts:
 * defined in src/api/conditions.ts, below the contract).
 */
export { MIGRATION_FAILED } from '../api/conditions';
/** A workflow's or an activity's input is not the contract's (or names what cannot be done): never retried. */
export const INVALID_INPUT = 'InvalidInput';
/** An update's argument is not the contract's: its validator refuses it (it never enters history). */
export const INVALID_ARGUMENT = 'InvalidArgument';
/** What a task asks for is off on this worker (the managedFields rewrite, a worker without a Temporal client). */
export const NOT_ENABLED = 'NotEnabled';
/** The agreement a step was taken under moved before its record was written: the migration starts over. */
export const AGREEMENT_CHANGED = 'AgreementChanged';
/** The version a migration waits on is not served any more and the resource cannot be resolved again: it ends with the reason. */
export const NO_LONGER_SERVED = 'NoLongerServed';
/** A chunk whose resource is not served (any more): the workflow starts the pass over. */
export const RESOURCE_GONE = 'ResourceGone';
/** A chunk whose writes the fence it requires (SVM_REQUIRE_FENCE, SVM_REQUIRE_STATIC_FENCE) would not guard. */
export const FENCE_NOT_IN_FORCE = 'FenceNotInForce';
/** The API servers could not convert the resource's objects for CONVERSION_FAILURE_BOUND_MS (a conversion webhook down). */
export const CONVERSION_WEBHOOK_FAILED = 'ConversionWebhookFailed';
/** The deferring mode's workflow, where the API servers do not serve storagemigration.k8s.io: no built-in to defer to. */
export const STANDARD_API_NOT_SERVED = 'StandardApiNotServed';
/** A task refused because it belongs to another cluster, or the worker's identity is in conflict (src/api/cluster.ts). */
export { WRONG_CLUSTER } from '../api/cluster';

/** A chunk's other Kubernetes errors, by their kind (src/kube/errors.ts): Kubethrottled, Kubeforbidden, ... (a 404 is RESOURCE_GONE). */
export const kubeFailureType = (kind: string): string => `Kube${kind}`;

/** Bugs, not weather: retrying them only delays the failure (nonRetryableErrorTypes of every activity). JavaScript's names. */
export const PROGRAMMING_ERRORS = ['TypeError', 'ReferenceError', 'SyntaxError', 'ZodError'];
