/**
 * A cluster's registration (docs/fleet.md): one workflow per named cluster, `svm-cluster/<name>` on the fleet task
 * queue, that its workers signal on start and every SVM_CLUSTER_REPORT_SECONDS. It keeps the latest report where
 * the Temporal UI and any SDK can read it without a worker: search attributes (MigrationCluster,
 * MigrationKubeVersions, MigrationLastSeen: a campaign's `where` filters on them) and its memo (uid, servers, svm's
 * version), and answers the clusterReport query. It continues as new every REPORTS_PER_RUN reports.
 *
 * The uid is pinned: the one the run was started with (its input and memo: the first worker's, once its uid claim
 * was granted, src/client/identity.ts), or, in a run started before pins (no uid in its input), its first report's.
 * A report with another uid, or one its worker marks as a conflict, changes nothing of the cluster: it is kept as
 * the open conflict (memo `conflict`, the UI's details), which start paths refuse on, until an operator's
 * `svm fleet pin` starts a new run. A uid's claim (clusterUidClaim, `svm-cluster-uid/<uid>`) holds the other
 * direction: the name a uid is pinned to.
 */
import {
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  clusterReportQuery,
  clusterSeenSignal,
  ClusterReportSchema,
  kubeVersionsOf,
  type ClusterReport,
  type ClusterUidClaimInput,
  type IdentityConflict,
} from '../contract/fleet';
import { MigrationCluster, MigrationKubeVersions, MigrationLastSeen } from '../contract/search-attributes';

const REPORTS_PER_RUN = 500;

export interface RegistrationInput {
  name: string;
  /** The pinned uid (absent in runs started before pins: the first report's is taken). */
  uid?: string;
  /** The latest report of the pinned cluster, carried into the next run. */
  report?: ClusterReport;
  /** The open conflict, carried into the next run. */
  conflict?: IdentityConflict;
}

/** What a registration holds: the pin, the pinned cluster's latest report, the open conflict. */
export interface RegistrationState {
  uid?: string;
  report?: ClusterReport;
  conflict?: IdentityConflict;
}

/**
 * A report applied to a registration (pure): a report of the pinned uid (or the first, where none is pinned) is
 * the cluster's latest; one its worker marks as a conflict, or with another uid, is the open conflict and changes
 * nothing else.
 */
export function applyReport(state: RegistrationState, r: ClusterReport): RegistrationState {
  if (r.conflict === undefined && (state.uid === undefined || r.uid === state.uid)) return { ...state, uid: r.uid, report: r };
  const message =
    r.conflict ??
    `a worker of cluster "${r.name}" reported kube-system uid ${r.uid}, but the cluster is pinned to ${state.uid}: its API is another cluster`;
  return { ...state, conflict: { uid: r.uid, message, seenAt: r.seenAt } };
}

function details(name: string, s: RegistrationState): string {
  const r = s.report;
  return [
    `**cluster ${name}**: kube-system uid ${s.uid ?? '(not pinned yet)'}${r ? `; svm ${r.svmVersion}; last seen ${r.seenAt}` : ''}`,
    ...(r?.servers.map((x) => `- ${x.server}: ${x.version}`) ?? []),
    ...(s.conflict ? ['', `**identity conflict** (${s.conflict.seenAt}): ${s.conflict.message}`] : []),
  ].join('\n');
}

export async function clusterRegistration(input: RegistrationInput): Promise<void> {
  let state: RegistrationState = {
    uid: input.uid ?? (workflowInfo().memo?.uid as string | undefined) ?? input.report?.uid,
    ...(input.report ? { report: input.report } : {}),
    ...(input.conflict ? { conflict: input.conflict } : {}),
  };
  let fresh = input.report !== undefined || input.conflict !== undefined;
  let reports = 0;
  setHandler(clusterReportQuery, () => state.report);
  setHandler(clusterSeenSignal, (r) => {
    // A report of another cluster, or not a report, is not this cluster's: ignored.
    const parsed = ClusterReportSchema.safeParse(r);
    if (!parsed.success || parsed.data.name !== input.name) return;
    state = applyReport(state, parsed.data);
    fresh = true;
    reports++;
  });
  upsertSearchAttributes([{ key: MigrationCluster, value: input.name }]);
  for (;;) {
    await condition(() => fresh);
    fresh = false;
    const r = state.report;
    // The same two commands for every report (a conflict's included), as before pins: recorded histories replay.
    upsertSearchAttributes([
      { key: MigrationKubeVersions, value: r ? kubeVersionsOf(r) : [] },
      ...(r ? [{ key: MigrationLastSeen, value: new Date(r.seenAt) }] : []),
    ]);
    const memo = {
      ...(state.uid ? { uid: state.uid } : {}),
      ...(r ? { servers: r.servers, svmVersion: r.svmVersion, seenAt: r.seenAt } : {}),
      ...(state.conflict ? { conflict: state.conflict } : {}),
      // Where the cluster is served (a pool's queue, or its own): start paths place its workflows there.
      ...(r?.queue ? { queue: r.queue } : {}),
    };
    upsertMemo(memo);
    setCurrentDetails(details(input.name, state));
    if (reports >= REPORTS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      // The memo goes with it: the pin is read from it (describe) before the next run's first task.
      return makeContinueAsNewFunc<typeof clusterRegistration>({ memo })({
        name: input.name,
        ...(state.uid ? { uid: state.uid } : {}),
        ...(state.report ? { report: state.report } : {}),
        ...(state.conflict ? { conflict: state.conflict } : {}),
      });
    }
  }
}

/**
 * A uid's claim: `svm-cluster-uid/<uid>`, started by the first worker that confirms the uid under a name (its memo
 * and input name it), and by `svm fleet pin`. It does nothing and ends only when an operator's pin or forget
 * terminates it: its existence is the pin's other direction.
 */
export async function clusterUidClaim(input: ClusterUidClaimInput): Promise<void> {
  setCurrentDetails(`kube-system uid **${input.uid}** is pinned to cluster **${input.name}**`);
  await condition(() => false);
}
