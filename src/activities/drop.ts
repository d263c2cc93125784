/**
 * The drop check as an activity (checkVersionDrop's one step): the same check
 * as `svm plan --drop` (src/kube/drop-check.ts), with the worker's identity,
 * its way of finding the API servers, and its Temporal client for the
 * migration workflows. A read; it returns the report (resource names,
 * counts, server addresses: no object data). A malformed group version or a
 * group nobody serves is refused (non-retryable, type InvalidInput).
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { DropCheckInput, DropReport } from '../contract/drop';
import type { ApiServerSource } from '../kube/apiservers';
import type { KubeClient } from '../kube/client';
import { checkDrop, DropInputError, migrationRecords } from '../kube/drop-check';
import type { RequestSamples } from '../kube/request-samples';
import { INVALID_INPUT } from '../contract/reasons';
import { Placement } from '../contract/placement';

export function createDropActivities(deps: {
  kube: KubeClient;
  apiservers?: ApiServerSource;
  temporal?: { client: Client };
  /** The worker's samples of the API servers' request counters (SVM_REQUEST_SAMPLE_SECONDS), where it takes them. */
  requestSamples?: RequestSamples;
}) {
  return {
    async checkVersionDrop(input: DropCheckInput): Promise<DropReport> {
      try {
        return await checkDrop(deps.kube, input.groupVersion, {
          requestsWindowSeconds: input.requestsWindowSeconds,
          apiservers: deps.apiservers,
          // Each record checked (src/kube/migration-record.ts) against this workflow's placement: the task queue it
          // runs on (its cluster's, where its migrations run) and its cluster with the pinned uid it entered with.
          migrationOf: deps.temporal
            ? migrationRecords(deps.temporal.client, Placement.running(Context.current().info.taskQueue, input.cluster))
            : undefined,
          requestSamples: deps.requestSamples,
          cluster: input.cluster?.name,
          heartbeat: (what) => Context.current().heartbeat(what),
        });
      } catch (err) {
        if (err instanceof DropInputError)
          throw ApplicationFailure.create({ type: INVALID_INPUT, message: err.message, nonRetryable: true });
        throw err;
      }
    },
  };
}
