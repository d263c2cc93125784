/**
 * One cluster's part of a campaign (src/workflows/campaign.ts): a child workflow on the cluster's task queue, run by
 * that cluster's worker, in the cluster the campaign names (checked by every activity, src/worker/cluster-check.ts).
 * It resolves what it is asked to migrate, migrates it (migrateAll, each resource's migration joined where one
 * runs already), then, where asked, checks drop readiness of a group/version (checkVersionDrop). Its result is
 * counts, names and reasons only.
 */
import { executeChild, proxyActivities, workflowInfo, ParentClosePolicy } from '@temporalio/workflow';
import type { ResourceRef } from '../api/resource';
import { WRONG_CLUSTER } from '../api/cluster';
import type { CampaignStepInput, CampaignStepResult } from '../contract/fleet';
import type { DropReport } from '../contract/drop';
import { enterCluster } from './cluster-context';
import { migrateAll } from './migrate-all';
import { checkVersionDrop } from './check-version-drop';

interface StepActivities {
  campaignResources(
    migrate: 'all' | 'plan' | string[],
  ): Promise<{ resources: ResourceRef[]; refused: Array<{ resource: string; reason: string }> }>;
}

export async function clusterCampaignStep(input: CampaignStepInput): Promise<CampaignStepResult> {
  const here = await enterCluster(input.cluster);
  const cluster = here.cluster!;
  const { campaignResources } = proxyActivities<StepActivities>({
    startToCloseTimeout: '5 minutes',
    retry: { maximumAttempts: 10, maximumInterval: '1 minute', nonRetryableErrorTypes: [WRONG_CLUSTER] },
  });
  const { resources, refused } = await campaignResources(input.migrate);
  const failures = [...refused];
  let succeeded = 0;
  let objects = 0;
  const id = workflowInfo().workflowId;
  if (resources.length > 0) {
    const rows = await executeChild(migrateAll, {
      workflowId: `${id}/migrate-all`,
      args: [here.input({ resources, parallelism: input.parallelism })],
      staticSummary: `Campaign step in cluster ${cluster.name}: ${resources.length} resources`,
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    });
    for (const r of rows) {
      objects += r.objects;
      if (r.result === 'Succeeded') succeeded++;
      else failures.push({ resource: r.resource, reason: `${r.result}${r.message ? `: ${r.message}` : ''}` });
    }
  }
  let drop: CampaignStepResult['drop'];
  if (input.dropCheck) {
    const report: DropReport = await executeChild(checkVersionDrop, {
      workflowId: `${id}/drop-check`,
      args: [
        here.input({
          groupVersion: input.dropCheck,
          ...(input.dropCheckWindowSeconds !== undefined ? { requestsWindowSeconds: input.dropCheckWindowSeconds } : {}),
        }),
      ],
      staticSummary: `Campaign step in cluster ${cluster.name}: may ${input.dropCheck} be dropped?`,
    });
    drop = { groupVersion: input.dropCheck, verdict: report.verdict, exitCode: report.exitCode };
  }
  return {
    ...(cluster.uid ? { clusterUid: cluster.uid } : {}),
    resources: { asked: resources.length + refused.length, succeeded },
    objects,
    failures,
    ...(drop ? { drop } : {}),
  };
}
