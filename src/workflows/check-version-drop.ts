/**
 * checkVersionDrop: can an API version be removed now? The drop check of
 * `svm plan --drop` as a workflow, startable from any SDK or the Temporal CLI
 * (contract/v1/drop-check-input, drop-check-result): its result is the
 * report, shown in the Temporal UI. One activity does the reading; the
 * workflow checks its input first (refused before anything is read, type
 * InvalidInput). Deterministic: the one activity is all it does.
 */
import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { enterCluster } from './cluster-context';
import { explainInput } from '../contract/definitions';
import { DropCheckInputSchema, type DropCheckInput, type DropReport } from '../contract/drop';
import { INVALID_INPUT } from '../contract/reasons';

const { checkVersionDrop: check } = proxyActivities<Activities>({
  // Every object's metadata is listed and the request counters are watched for a window: heartbeats say it lives.
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '2 minutes',
  retry: { initialInterval: '2s', maximumInterval: '1 minute', maximumAttempts: 5, nonRetryableErrorTypes: [INVALID_INPUT] },
});

export async function checkVersionDrop(input: DropCheckInput): Promise<DropReport> {
  const parsed = DropCheckInputSchema.safeParse(input);
  if (!parsed.success) throw ApplicationFailure.create({ type: INVALID_INPUT, message: explainInput(parsed.error), nonRetryable: true });
  const here = await enterCluster(parsed.data.cluster);
  return check(here.input(parsed.data));
}
