/**
 * A cluster's identity in Temporal (docs/fleet.md, "A cluster's identity"): the uid of its kube-system namespace,
 * pinned to its name at its first registration, and only moved by an operator's explicit act.
 *
 * Two workflows hold a pin, one per direction, so that neither a name nor a uid can be taken twice:
 *   - `svm-cluster/<name>` (clusterRegistration): its memo's `uid`, set by the start that created it;
 *   - `svm-cluster-uid/<uid>` (clusterUidClaim): its memo's `name`.
 * Both are read with describe (no worker needed). A worker confirms its identity (confirmIdentity) before it serves
 * anything and at every report: its API's uid against its name's pin, then the uid's claim; an unpinned name is
 * pinned then. A start path reads the pin (pinOf) and refuses while a conflict is open. `svm fleet pin` moves a
 * name to a new uid; `svm fleet forget` lets a decommissioned cluster's name and uid go.
 *
 * Note: the Temporal side of what cluster-uid.ts reads from the API; here, below the worker, the activities and the
 * client that all use it, as drop-storage.ts's records are.
 */
import { TypedSearchAttributes } from '@temporalio/common';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  CLUSTER_REGISTRATION_WORKFLOW_TYPE,
  CLUSTER_UID_CLAIM_WORKFLOW_TYPE,
  clusterRegistrationId,
  clusterSeenSignal,
  clusterUidClaimId,
  kubeVersionsOf,
  type ClusterReport,
  type IdentityConflict,
  type RegistrationMemo,
} from '../contract/fleet';
import { MigrationCluster, MigrationKubeVersions, MigrationLastSeen } from '../contract/search-attributes';
import type { Placement } from '../contract/placement';
import type { KubeClient } from './client';
import { clusterUidReader } from './cluster-uid';

/** A name's pin as its registration holds it; undefined when the name is not registered. */
export interface Pin {
  /** The pinned uid (absent only while no report of the cluster itself has been made). */
  uid?: string;
  /** The open conflict: a worker of this name reached another cluster. */
  conflict?: IdentityConflict;
  /** The registration's memo, whole. */
  memo: RegistrationMemo;
  /** The registration's run. */
  runId: string;
  /** The task queue that serves the cluster, as its workers reported it (a pool's); undefined: the cluster's own. */
  queue?: string;
}

async function describeRunning(client: Client, workflowId: string) {
  try {
    const d = await client.workflow.getHandle(workflowId).describe();
    return d.status.name === 'RUNNING' ? d : undefined;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}

/** The pin of cluster `name`, read from its running registration; undefined when none runs. */
export async function pinOf(client: Client, name: string): Promise<Pin | undefined> {
  const d = await describeRunning(client, clusterRegistrationId(name));
  if (!d) return undefined;
  const memo = (d.memo ?? {}) as RegistrationMemo;
  return {
    ...(memo.uid ? { uid: memo.uid } : {}),
    ...(memo.conflict ? { conflict: memo.conflict } : {}),
    ...(memo.queue ? { queue: memo.queue } : {}),
    memo,
    runId: d.runId,
  };
}

/**
 * A placement with the uid pinned to its cluster (its registration's; none while the cluster is not registered, and
 * its workflows then read it from their worker, which confirms it first), on the task queue its registration names
 * (a pool's; the cluster's own while it names none or is not registered). An unnamed placement is returned as it is.
 * Refused while the cluster's identity is in conflict: `refused` says what the caller does not do then.
 */
export async function pinnedPlacement(client: Client, placement: Placement, refused: string): Promise<Placement> {
  if (!placement.name) return placement;
  const pin = await pinOf(client, placement.name);
  if (pin?.conflict)
    throw new Error(
      `cluster "${placement.name}"'s identity is in conflict: ${pin.conflict.message} (reported ${pin.conflict.seenAt}). ${refused}. Fix the worker that reported it, then confirm the cluster's identity: svm fleet pin ${placement.name} --uid <its kube-system uid>`,
    );
  return placement.withUid(pin?.uid).withQueue(pin?.queue);
}

/**
 * The placement a verdict on what `kube` reaches is judged in: pinned (pinnedPlacement), and refused when the
 * kubeconfig reaches another cluster than the uid pinned to the name: a named cluster's records count only against
 * its pinned uid, and only for that cluster. Nothing is judged on a refusal.
 */
export async function judgedPlacement(
  client: Client,
  kube: Pick<KubeClient, 'getJson' | 'server'>,
  placement: Placement,
): Promise<Placement> {
  const here = await pinnedPlacement(client, placement, 'No verdict is given for it');
  if (!here.uid) return here;
  const reached = await clusterUidReader(kube)();
  if (reached !== here.uid)
    throw new Error(
      `the kubeconfig reaches kube-system uid ${reached} (${kube.server}), but cluster "${here.name}" is pinned to ${here.uid}: another cluster; nothing was judged`,
    );
  return here;
}

/** The name uid is pinned to, from its running claim; undefined when none claims it. */
export async function claimOf(client: Client, uid: string): Promise<string | undefined> {
  const d = await describeRunning(client, clusterUidClaimId(uid));
  return (d?.memo as { name?: string } | undefined)?.name;
}

/** Claims uid for name: the name it is pinned to now (name itself when granted), and whether this call made the claim. */
async function claimUid(client: Client, fleetQueue: string, uid: string, name: string): Promise<{ name: string; made: boolean }> {
  try {
    await client.workflow.start(CLUSTER_UID_CLAIM_WORKFLOW_TYPE, {
      workflowId: clusterUidClaimId(uid),
      taskQueue: fleetQueue,
      args: [{ uid, name }],
      memo: { name },
      staticSummary: `kube-system uid ${uid} is cluster ${name}`,
    });
    return { name, made: true };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const holder = await claimOf(client, uid);
    // Ended between the start and the describe (an operator's pin): asked again next time.
    if (holder === undefined) throw new Error(`the claim of kube-system uid ${uid} ended while it was read: try again`, { cause: err });
    return { name: holder, made: false };
  }
}

async function release(client: Client, uid: string, reason: string): Promise<void> {
  await client.workflow
    .getHandle(clusterUidClaimId(uid))
    .terminate(reason)
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
}

/**
 * A name's registration started (where none runs) with pin `uid`, the pinned cluster's latest `report` and the open
 * `conflict`, all in its memo from the start; `signal`, when given, is sent to it (started or not).
 */
async function startRegistration(
  client: Client,
  fleetQueue: string,
  name: string,
  held: { uid?: string; report?: ClusterReport; conflict?: IdentityConflict },
  signal?: ClusterReport,
): Promise<void> {
  const { uid, report, conflict } = held;
  const memo: RegistrationMemo = {
    ...(uid ? { uid } : {}),
    ...(report ? { servers: report.servers, svmVersion: report.svmVersion, seenAt: report.seenAt } : {}),
    ...(conflict ? { conflict } : {}),
    ...(report?.queue ? { queue: report.queue } : {}),
  };
  const options = {
    workflowId: clusterRegistrationId(name),
    taskQueue: fleetQueue,
    args: [{ name, ...held }] as [unknown],
    memo: memo as Record<string, unknown>,
    typedSearchAttributes: new TypedSearchAttributes([
      { key: MigrationCluster, value: name },
      ...(report
        ? [
            { key: MigrationKubeVersions, value: kubeVersionsOf(report) },
            { key: MigrationLastSeen, value: new Date(report.seenAt) },
          ]
        : []),
    ]),
    staticSummary: `Cluster ${name}`,
  };
  if (signal)
    await client.workflow.signalWithStart(CLUSTER_REGISTRATION_WORKFLOW_TYPE, {
      ...options,
      signal: clusterSeenSignal,
      signalArgs: [signal],
    });
  else await client.workflow.start(CLUSTER_REGISTRATION_WORKFLOW_TYPE, options);
}

/** Ends the unpinned run `was` (by its run ID) and starts one pinning held.uid; another's start first is no error. */
async function replaceUnpinned(
  client: Client,
  fleetQueue: string,
  name: string,
  was: Pin,
  held: { uid: string; report: ClusterReport },
): Promise<void> {
  await client.workflow
    .getHandle(clusterRegistrationId(name), was.runId)
    .terminate(`pinned to kube-system uid ${held.uid} by its first confirmed worker`)
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
  await startRegistration(client, fleetQueue, name, { ...held, ...(was.conflict ? { conflict: was.conflict } : {}) }).catch(
    (err: unknown) => {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    },
  );
}

/** How old a registration's last report may be before an unchanged one is sent again (its MigrationLastSeen). */
export const REPORT_HEARTBEAT_MS = 3_600_000;

/**
 * Whether a report says nothing the registration does not hold already: the same uid, API servers and versions,
 * svm version, task queue, no open conflict, and its last report younger than REPORT_HEARTBEAT_MS.
 */
export function reportUnchanged(memo: RegistrationMemo, report: ClusterReport): boolean {
  if (memo.uid !== report.uid || memo.conflict !== undefined || memo.svmVersion !== report.svmVersion || !memo.seenAt) return false;
  if ((memo.queue ?? undefined) !== (report.queue ?? undefined)) return false;
  if (JSON.stringify(memo.servers ?? []) !== JSON.stringify(report.servers)) return false;
  const age = Date.parse(report.seenAt) - Date.parse(memo.seenAt);
  return age >= 0 && age < REPORT_HEARTBEAT_MS;
}

/** A worker's confirmation: the uid its name is pinned to (its API's), or why it must serve nothing. */
export type Confirmation = { pinned: string } | { conflict: string; pinned?: string };

/**
 * Confirms that the API a worker of cluster `report.name` reaches (`where`: its kubeconfig and server) is that
 * cluster, and reports it (a signal-with-start of its registration). In order:
 *   1. the name's pin: another uid is a conflict (the worker's API is another cluster, or the cluster was recreated);
 *   2. the uid's claim: made where none exists; held by another name, a conflict (the worker's kubeconfig leads to
 *      that cluster), caught even when this name was never registered;
 *   3. the registration, started with the pin where none runs (or where the one running pins nothing: replaced),
 *      signalled with the report;
 *   4. the pin read back: another uid (a worker of this name with another uid started it first) is a conflict, and a
 *      claim step 2 made is given back.
 * A conflict is reported too (the registration keeps it, without pinning anything) unless `quiet` (asked again while one
 * is known: only its end is news). A report the pinned registration holds already (reportUnchanged) ends at step 1:
 * nothing is sent.
 */
export async function confirmIdentity(
  client: Client,
  fleetQueue: string,
  report: ClusterReport,
  where: string,
  opts: { quiet?: boolean } = {},
): Promise<Confirmation> {
  const { name, uid } = report;
  const conflict = async (message: string, pinned: string | undefined): Promise<Confirmation> => {
    // Reported: the registration keeps it as its open conflict (and one started by it pins nothing).
    if (!opts.quiet) {
      const open = { uid, message, seenAt: report.seenAt };
      await startRegistration(client, fleetQueue, name, { conflict: open }, { ...report, conflict: message });
    }
    return { conflict: message, ...(pinned ? { pinned } : {}) };
  };
  const before = await pinOf(client, name);
  // Nothing changed since the registration's last report, and it is fresh: confirmed by that read alone, nothing sent
  // (a fleet's idle registrations cost Temporal no action between heartbeats).
  if (before?.uid === uid && reportUnchanged(before.memo, report)) return { pinned: uid };
  if (before?.uid && before.uid !== uid)
    return conflict(
      `cluster "${name}" is pinned to kube-system uid ${before.uid}, but the API this worker reaches (${where}) answers ${uid}: another cluster (check the worker's kubeconfig), or ${name} recreated (then: svm fleet pin ${name} --uid ${uid})`,
      before.uid,
    );
  const claim = await claimUid(client, fleetQueue, uid, name);
  if (claim.name !== name)
    return conflict(
      `the API this worker of cluster "${name}" reaches (${where}) is cluster "${claim.name}": its kube-system uid ${uid} is pinned to "${claim.name}" (check the worker's kubeconfig)`,
      before?.uid,
    );
  // A registration that pins nothing (started by a conflict's report) is replaced by one that pins this uid, its
  // conflict kept: that run is ended by its run ID, so that of two workers racing, one replaces it and the other
  // finds the new run's pin (compare-and-swap), never a pin the registration decides later.
  if (before && !before.uid) await replaceUnpinned(client, fleetQueue, name, before, { uid, report });
  await startRegistration(client, fleetQueue, name, { uid, report }, report);
  const after = await pinOf(client, name);
  if (after?.uid && after.uid !== uid) {
    if (claim.made) await release(client, uid, `cluster ${name} was pinned to ${after.uid} first`);
    return conflict(
      `cluster "${name}" is pinned to kube-system uid ${after.uid}, but the API this worker reaches (${where}) answers ${uid}: another cluster (check the worker's kubeconfig)`,
      after.uid,
    );
  }
  return { pinned: uid };
}

/** What `svm fleet pin` replaced. */
export interface Repin {
  name: string;
  uid: string;
  /** The uid it was pinned to; undefined when it was not pinned. */
  was?: string;
  /** The conflict it cleared. */
  cleared?: IdentityConflict;
  /** The last report of the cluster it was pinned to. */
  lastSeen?: string;
}

/**
 * The operator's act: pins cluster `name` to `uid` (a cluster recreated under the same name, or a conflict
 * resolved), clearing an open conflict. Refused when uid is pinned to another name (forget that one first). The
 * registration's run ends (terminated, saying what replaced it) and a new one starts with the new pin; the old
 * uid's claim is given back.
 */
export async function repin(client: Client, fleetQueue: string, name: string, uid: string, by: string): Promise<Repin> {
  const holder = await claimOf(client, uid);
  if (holder !== undefined && holder !== name)
    throw new Error(
      `kube-system uid ${uid} is pinned to cluster "${holder}": one uid is one cluster. If ${holder} is gone, svm fleet forget ${holder} first`,
    );
  const pin = await pinOf(client, name);
  const was = pin?.uid;
  const same = was === uid;
  if (pin)
    await client.workflow
      .getHandle(clusterRegistrationId(name))
      .terminate(`pinned by ${by}: kube-system uid ${was ?? '(none)'} -> ${uid}`)
      .catch((err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      });
  const m = pin?.memo;
  const report =
    same && m?.servers && m.svmVersion && m.seenAt
      ? { name, uid, servers: m.servers, svmVersion: m.svmVersion, seenAt: m.seenAt, ...(m.queue ? { queue: m.queue } : {}) }
      : undefined;
  await startRegistration(client, fleetQueue, name, { uid, ...(report ? { report } : {}) });
  if (holder === undefined) await claimUid(client, fleetQueue, uid, name);
  if (was && !same && (await claimOf(client, was)) === name) await release(client, was, `cluster ${name} pinned to ${uid} by ${by}`);
  return {
    name,
    uid,
    ...(was ? { was } : {}),
    ...(pin?.conflict ? { cleared: pin.conflict } : {}),
    ...(pin?.memo.seenAt ? { lastSeen: pin.memo.seenAt } : {}),
  };
}

/** The operator's act for a decommissioned cluster: its registration and its uid's claim end. What it held, or undefined. */
export async function forget(client: Client, name: string, by: string): Promise<Pin | undefined> {
  const pin = await pinOf(client, name);
  if (!pin) return undefined;
  await client.workflow
    .getHandle(clusterRegistrationId(name))
    .terminate(`forgotten by ${by}`)
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
  if (pin.uid && (await claimOf(client, pin.uid)) === name) await release(client, pin.uid, `cluster ${name} forgotten by ${by}`);
  return pin;
}
