/**
 * A cluster's registration (docs/fleet.md): one workflow per named cluster, `svm-cluster/<name>` on the fleet task
 * queue, that its workers signal on start and every SVM_CLUSTER_REPORT_SECONDS. It keeps the latest report where
 * the Temporal UI and any SDK can read it without a worker: search attributes (MigrationCluster,
 * MigrationKubeVersions, MigrationLastSeen: a campaign's `where` filters on them) and its memo (uid, servers, svm's
 * version), and answers the clusterReport query. It continues as new every REPORTS_PER_RUN reports.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { clusterReportQuery, clusterSeenSignal, ClusterReportSchema, kubeVersionsOf, type ClusterReport } from '../contract/fleet';
import { MigrationCluster, MigrationKubeVersions, MigrationLastSeen } from '../contract/search-attributes';

const REPORTS_PER_RUN = 500;

export async function clusterRegistration(input: { name: string; report?: ClusterReport }): Promise<void> {
  let report = input.report;
  let fresh = report !== undefined;
  let reports = 0;
  setHandler(clusterReportQuery, () => report);
  setHandler(clusterSeenSignal, (r) => {
    // A report of another cluster, or not a report, is not this cluster's: ignored.
    const parsed = ClusterReportSchema.safeParse(r);
    if (!parsed.success || parsed.data.name !== input.name) return;
    report = parsed.data;
    fresh = true;
    reports++;
  });
  upsertSearchAttributes([{ key: MigrationCluster, value: input.name }]);
  for (;;) {
    await condition(() => fresh);
    fresh = false;
    const r = report!;
    upsertSearchAttributes([
      { key: MigrationKubeVersions, value: kubeVersionsOf(r) },
      { key: MigrationLastSeen, value: new Date(r.seenAt) },
    ]);
    upsertMemo({ uid: r.uid, servers: r.servers, svmVersion: r.svmVersion, seenAt: r.seenAt });
    setCurrentDetails(
      [
        `**cluster ${r.name}**: kube-system uid ${r.uid}; svm ${r.svmVersion}; last seen ${r.seenAt}`,
        ...r.servers.map((s) => `- ${s.server}: ${s.version}`),
      ].join('\n'),
    );
    if (reports >= REPORTS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof clusterRegistration>({ name: input.name, report: report! });
    }
  }
}
