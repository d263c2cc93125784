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
 * This is the one place a reason's or failure type's string is written: every other module, src/api's included,
 * imports the name. So this module imports nothing (src/api may import it, below the rest of the contract: the
 * one exception to src/api's rule, eslint.config.mjs). Free of zod: workflows import this module.
 */

/** The migration failed (objects whose update was refused, or an error it could not go on from). The default. */
export const FAILED = 'Failed';
/** The migration was aborted (svm abort, the last StorageVersionMigration attached to it deleted, the workflow cancelled). */
export const ABORTED = 'Aborted';

/**
 * The reason of a migration.k8s.io/v1alpha1 object's Running condition once it ended, whatever the end (as
 * kube-storage-version-migrator gives it; src/api/conditions.ts). While it runs, the reason is its phase.
 */
export const COMPLETED = 'Completed';

/**
 * The built-in controller's reasons (pkg/controller/storageversionmigrator, v1.37), which svm writes on a standard
 * StorageVersionMigration's Running, Succeeded and Failed conditions as the built-in does (src/api/standard-migration.ts).
 */
export const BUILT_IN_REASONS = {
  running: 'MigrationRunning',
  completed: 'MigrationCompleted',
  succeeded: 'StorageVersionMigrationSucceeded',
  failed: 'StorageVersionMigrationFailed',
} as const;

// The bridge's refusals of a new object.

/** spec.continueToken is set: svm never resumes from a given token (the CRD's description names it, src/api/migration.ts). */
export const CONTINUE_TOKEN_REFUSED = 'ContinueTokenRefused';
/**
 * The resource its spec names is not one svm can migrate (not served, not listable and patchable): a Failed
 * condition's reason, and a failure type (the minimal start's resolution).
 */
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

// The Events svm records on a standard StorageVersionMigration it leaves alone (their reason).

/** SVM_STANDARD_MIGRATIONS=own with the built-in acting lately: svm leaves the new object to it (src/worker/bridge.ts). */
export const LEFT_TO_BUILT_IN = 'LeftToBuiltIn';
/** Own mode: a new standard object nobody wrote, taken two minutes after its creation unless another controller writes first. */
export const WAITING_FOR_BUILT_IN = 'WaitingForBuiltIn';
/** A standard object no controller acts on, in the deferring mode (src/worker/unattended.ts). */
export const NO_CONTROLLER_ACTING = 'NoControllerActing';

// ------------------------------------------------------------ failure types

/**
 * A migration that ended Failed (objects whose update was refused, or an error it could not go on from): its details
 * hold the progress. Also the reason of a CRD's StorageMigrating condition when its migration failed (src/kube/crds.ts).
 */
export const MIGRATION_FAILED = 'MigrationFailed';
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
/** A task refused because it belongs to another cluster, or the worker's identity is in conflict (src/worker/cluster-check.ts). */
export const WRONG_CLUSTER = 'WrongCluster';
/**
 * A pool's task for a cluster the pool does not serve (yet, or any more): retried, so that a cluster the pool takes
 * up meanwhile runs it (src/worker/pool-dispatch.ts).
 */
export const CLUSTER_NOT_SERVED_HERE = 'ClusterNotServedHere';
/** A pool's task for a cluster the pool let go (removed from its source) and that did not come back: never retried. */
export const CLUSTER_LET_GO = 'ClusterLetGo';

/** A chunk's other Kubernetes errors, by their kind (src/kube/errors.ts): Kubethrottled, Kubeforbidden, ... (a 404 is RESOURCE_GONE). */
export const kubeFailureType = (kind: string): string => `Kube${kind}`;

/** Bugs, not weather: retrying them only delays the failure (nonRetryableErrorTypes of every activity). JavaScript's names. */
export const PROGRAMMING_ERRORS = ['TypeError', 'ReferenceError', 'SyntaxError', 'ZodError'];
