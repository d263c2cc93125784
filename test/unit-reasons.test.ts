/**
 * Unit tests of src/contract/reasons.ts: every condition reason and failure type svm names is a wire string
 * that users match on (kubectl wait, alerts, `temporal workflow list`) and recorded histories carry, so its
 * value never changes. Each is pinned here, and each value is one name's only.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as reasons from '../src/contract/reasons';
import { WRONG_CLUSTER } from '../src/api/cluster';
import { FENCE_NOT_IN_FORCE, RESOURCE_GONE } from '../src/activities/migrate-chunk';
import { LEFT_TO_BUILT_IN_REASON } from '../src/worker/bridge';
import { CLUSTER_NOT_SERVED_HERE } from '../src/worker/pool-dispatch';
import { UNATTENDED_REASON } from '../src/worker/unattended';

const WIRE: Record<string, string> = {
  FAILED: 'Failed',
  ABORTED: 'Aborted',
  COMPLETED: 'Completed',
  CONTINUE_TOKEN_REFUSED: 'ContinueTokenRefused',
  INVALID_RESOURCE: 'InvalidResource',
  WORKFLOW_ANNOTATION_REFUSED: 'WorkflowAnnotationRefused',
  WORKFLOW_NOT_FOUND: 'WorkflowNotFound',
  WORKFLOW_CLOSED: 'WorkflowClosed',
  WORKFLOW_TERMINATED: 'WorkflowTerminated',
  WORKFLOW_TIMED_OUT: 'WorkflowTimedOut',
  WORKFLOW_CANCELLED: 'WorkflowCancelled',
  WORKFLOW_FAILED: 'WorkflowFailed',
  WORKFLOW_COMPLETED: 'WorkflowCompleted',
  MIGRATION_FAILED: 'MigrationFailed',
  INVALID_INPUT: 'InvalidInput',
  INVALID_ARGUMENT: 'InvalidArgument',
  NOT_ENABLED: 'NotEnabled',
  AGREEMENT_CHANGED: 'AgreementChanged',
  NO_LONGER_SERVED: 'NoLongerServed',
  RESOURCE_GONE: 'ResourceGone',
  FENCE_NOT_IN_FORCE: 'FenceNotInForce',
  CONVERSION_WEBHOOK_FAILED: 'ConversionWebhookFailed',
  STANDARD_API_NOT_SERVED: 'StandardApiNotServed',
  WRONG_CLUSTER: 'WrongCluster',
  CLUSTER_NOT_SERVED_HERE: 'ClusterNotServedHere',
  CLUSTER_LET_GO: 'ClusterLetGo',
  LEFT_TO_BUILT_IN: 'LeftToBuiltIn',
  WAITING_FOR_BUILT_IN: 'WaitingForBuiltIn',
  NO_CONTROLLER_ACTING: 'NoControllerActing',
};

const BUILT_IN: Record<string, string> = {
  running: 'MigrationRunning',
  completed: 'MigrationCompleted',
  succeeded: 'StorageVersionMigrationSucceeded',
  failed: 'StorageVersionMigrationFailed',
};

void test('reasons: every reason and failure type keeps its wire string', () => {
  const strings = Object.fromEntries(Object.entries(reasons).filter(([, v]) => typeof v === 'string'));
  assert.deepEqual(strings, WIRE);
  assert.deepEqual({ ...reasons.BUILT_IN_REASONS }, BUILT_IN);
});

void test('reasons: no two names share a string', () => {
  const values = [...Object.values(WIRE), ...Object.values(BUILT_IN)];
  assert.equal(new Set(values).size, values.length);
});

void test('reasons: the names other modules export are the same ones', () => {
  assert.equal(reasons.WRONG_CLUSTER, WRONG_CLUSTER);
  assert.equal(reasons.RESOURCE_GONE, RESOURCE_GONE);
  assert.equal(reasons.FENCE_NOT_IN_FORCE, FENCE_NOT_IN_FORCE);
  assert.equal(reasons.NO_CONTROLLER_ACTING, UNATTENDED_REASON);
  // Re-exported by the modules that use them (src/worker/bridge.ts, pool-dispatch.ts): the same names.
  assert.equal(reasons.LEFT_TO_BUILT_IN, LEFT_TO_BUILT_IN_REASON);
  assert.equal(reasons.CLUSTER_NOT_SERVED_HERE, CLUSTER_NOT_SERVED_HERE);
});

void test('reasons: a chunk Kubernetes error is typed by its kind, and programming errors by their JavaScript names', () => {
  assert.equal(reasons.kubeFailureType('throttled'), 'Kubethrottled');
  assert.equal(reasons.kubeFailureType('forbidden'), 'Kubeforbidden');
  assert.deepEqual(reasons.PROGRAMMING_ERRORS, ['TypeError', 'ReferenceError', 'SyntaxError', 'ZodError']);
});
