/**
 * rewriteManagedFields: brings the managedFields entries of one resource that name an API version about to be
 * removed to another version of it, so that server-side apply keeps working once that version is gone (the drop
 * check's managedFields reason). Startable from any SDK or the Temporal CLI (contract/v1/managed-fields-input,
 * managed-fields-result), and by `svm managed-fields`. Off unless the worker runs with the identity it writes as
 * (src/activities/managed-fields.ts). The workflow checks its input first (refused before anything is read, type
 * InvalidInput); one activity does the work.
 */
import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { enterCluster } from './cluster-context';
import { explainInput } from '../contract/definitions';
import { ManagedFieldsInputSchema, type ManagedFieldsInput, type ManagedFieldsResult } from '../contract/drop';
import { INVALID_INPUT, NOT_ENABLED } from '../contract/reasons';

const { rewriteManagedFields: rewrite } = proxyActivities<Activities>({
  // Every object's metadata is listed, and each object naming the version patched: heartbeats say it lives.
  startToCloseTimeout: '6 hours',
  heartbeatTimeout: '2 minutes',
  retry: { initialInterval: '2s', maximumInterval: '1 minute', maximumAttempts: 5, nonRetryableErrorTypes: [INVALID_INPUT, NOT_ENABLED] },
});

export async function rewriteManagedFields(input: ManagedFieldsInput): Promise<ManagedFieldsResult> {
  const parsed = ManagedFieldsInputSchema.safeParse(input);
  if (!parsed.success) throw ApplicationFailure.create({ type: INVALID_INPUT, message: explainInput(parsed.error), nonRetryable: true });
  const here = await enterCluster(parsed.data.cluster);
  return rewrite(here.input(parsed.data));
}
