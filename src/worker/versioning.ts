/**
 * Worker Versioning: the worker as one version of a Temporal Worker
 * Deployment (docs/deploy.md, "Upgrading svm").
 *
 * Off unless TEMPORAL_DEPLOYMENT_NAME is set: an unversioned worker behaves
 * as before on any server. On, the worker polls as version
 * <deployment name>.<build ID>; the build ID is TEMPORAL_WORKER_BUILD_ID
 * (the Temporal Worker Controller sets both variables) or svm's own
 * `<version>-<revision>` (what `svm version` prints). Every workflow type is
 * AUTO_UPGRADE (the worker's default behaviour): a migration moves to the
 * Current Version at its next workflow task, so its code changes go behind
 * patched() and the replay fixtures guard them.
 *
 * With SVM_PROMOTE_VERSION=true (the shipped manifests: a plain Deployment,
 * no controller), a worker makes its own version Current once its pollers
 * are seen, if it is the newest version of the deployment (or none is
 * Current): a rolling update's new ReplicaSet takes over, a restarted pod of
 * an older ReplicaSet does not take it back.
 *
 * Every versioned worker reports on /metrics its own version and the
 * deployment's Current Version as it last read it from Temporal (every
 * SVM_VERSION_CHECK_SECONDS): a Current Version that no scraped worker runs
 * (a rollback left the removed version Current) is the alert
 * SvmCurrentVersionWithoutWorker (docs/operations.md).
 */
import type { Client } from '@temporalio/client';
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { settingBool } from '../config/settings';

export const VersioningSettings = z.object({
  /** TEMPORAL_DEPLOYMENT_NAME: the Worker Deployment; unset, the worker is unversioned. */
  deploymentName: z
    .string()
    .regex(/^[^.\s]{1,255}$/, 'must be 1-255 characters without "." or spaces ("." separates it from the build ID)')
    .optional(),
  /** TEMPORAL_WORKER_BUILD_ID: this build; unset, svm's `<version>-<revision>`. */
  buildId: z
    .string()
    .regex(/^\S{1,255}$/, 'must be 1-255 characters without spaces')
    .optional(),
  /** SVM_PROMOTE_VERSION: make this version Current when it is the deployment's newest (no Worker Controller). */
  promote: settingBool.default(false),
  /** SVM_VERSION_CHECK_SECONDS: how often the worker reads the deployment's Current Version for /metrics. */
  checkSeconds: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(3600, 'must be at most 3600')
    .default(30),
});
export type VersioningSettings = z.infer<typeof VersioningSettings>;

export const versioningSettingSources: Record<string, string> = {
  'versioning.deploymentName': 'TEMPORAL_DEPLOYMENT_NAME',
  'versioning.buildId': 'TEMPORAL_WORKER_BUILD_ID',
  'versioning.promote': 'SVM_PROMOTE_VERSION',
  'versioning.checkSeconds': 'SVM_VERSION_CHECK_SECONDS',
};

export function versioningFromEnv(env: NodeJS.ProcessEnv) {
  return {
    deploymentName: env.TEMPORAL_DEPLOYMENT_NAME || undefined,
    buildId: env.TEMPORAL_WORKER_BUILD_ID || undefined,
    promote: env.SVM_PROMOTE_VERSION || undefined,
    checkSeconds: env.SVM_VERSION_CHECK_SECONDS || undefined,
  };
}

/** The default build ID: svm's version and git revision, as `svm version` prints them. */
export function defaultBuildId(build: { version: string; revision: string }): string {
  return `${build.version}-${build.revision}`;
}

/**
 * The Worker Deployment of a trust domain's workers (docs/fleet.md): a single-cluster install's (no domain, or a
 * cluster with no name: a worker passes its placement's name as it is) is TEMPORAL_DEPLOYMENT_NAME as given; a named
 * cluster's own workers (SVM_CLUSTER) add `-cluster-<name>`, a pool's `-pool-<pool>`. Each domain's new build then
 * becomes Current on its own, without taking routing for the others.
 */
export type DeploymentDomain = { cluster: string | undefined } | { pool: string };

export function deploymentNameOf(name: string, domain?: DeploymentDomain): string {
  if (domain && 'pool' in domain) return `${name}-pool-${domain.pool}`;
  return domain?.cluster === undefined ? name : `${name}-cluster-${domain.cluster}`;
}

/** Worker.create's workerDeploymentOptions, or undefined for an unversioned worker. */
export function workerDeploymentOptions(
  v: VersioningSettings,
  build: () => { version: string; revision: string },
  domain?: DeploymentDomain,
): WorkerDeploymentOptions | undefined {
  if (!v.deploymentName) return undefined;
  return {
    version: { deploymentName: deploymentNameOf(v.deploymentName, domain), buildId: v.buildId ?? defaultBuildId(build()) },
    useWorkerVersioning: true,
    // Every workflow type, through the worker's default, not setWorkflowOptions in workflow code: a behaviour set there
    // is sent by unversioned workers too, and the server refuses their workflow tasks ("versioning behavior cannot be
    // specified without deployment options being set with versioned mode", seen on the dev server of CLI 1.5.1).
    defaultVersioningBehavior: 'AUTO_UPGRADE',
  };
}

/** What a describeWorkerDeployment tells the promotion rule. */
export interface DeploymentView {
  current?: string;
  /** Each version's build ID and when the server first saw it (ms). */
  versions: Array<{ buildId: string; createdAt: number }>;
}

/**
 * Whether buildId should be made Current: 'yes'; 'current' (it is already);
 * 'wait' (the server has not seen its pollers yet); 'older' (a newer version
 * exists: a restarted pod of an older ReplicaSet must not take the deployment
 * back; a rollback is `temporal worker deployment set-current-version`).
 */
export function promotionDecision(view: DeploymentView, buildId: string): 'yes' | 'current' | 'wait' | 'older' {
  if (view.current === buildId) return 'current';
  const mine = view.versions.find((v) => v.buildId === buildId);
  if (!mine) return 'wait';
  const newer = view.versions.some((v) => v.buildId !== buildId && v.createdAt > mine.createdAt);
  return newer ? 'older' : 'yes';
}

const millis = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  t ? Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : 0;

/** The deployment as the promotion rule sees it; undefined while the server does not know it yet. */
export async function describeDeployment(
  client: Client,
  deploymentName: string,
): Promise<{ view: DeploymentView; conflictToken: Uint8Array } | undefined> {
  try {
    const d = await client.workflowService.describeWorkerDeployment({ namespace: client.options.namespace, deploymentName });
    const info = d.workerDeploymentInfo;
    return {
      conflictToken: d.conflictToken,
      view: {
        current: info?.routingConfig?.currentDeploymentVersion?.buildId || undefined,
        versions: (info?.versionSummaries ?? []).map((s) => ({
          buildId: s.deploymentVersion?.buildId ?? '',
          createdAt: millis(s.createTime),
        })),
      },
    };
  } catch (err) {
    if ((err as { code?: number }).code === 5) return undefined; // NOT_FOUND: no poller of it seen yet
    throw err;
  }
}

/**
 * Waits ms, or less when signal aborts. Its abort listener goes with the wait (a listener added per wait and kept
 * grew without bound on a worker's signal: one a second with a one-second check).
 */
const pause = (ms: number, signal: AbortSignal) => delay(ms, undefined, { signal }).catch(() => undefined);

/**
 * Makes this worker's version Current when the rule says so, retrying until
 * its pollers are seen or it is not the newest; stops when signal aborts.
 */
export async function promoteWhenNewest(opts: {
  client: Client;
  version: { deploymentName: string; buildId: string };
  identity: string;
  log: Logger;
  signal: AbortSignal;
  intervalMs?: number;
}): Promise<'current' | 'older' | 'stopped'> {
  const { client, version, log, signal } = opts;
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      const d = await describeDeployment(client, version.deploymentName);
      const decision = d ? promotionDecision(d.view, version.buildId) : 'wait';
      if (decision === 'current') {
        log.info({ ...version }, 'this worker version is the Current Version of its deployment');
        return 'current';
      }
      if (decision === 'older') {
        log.warn(
          { ...version, current: d?.view.current },
          'a newer version of this deployment exists: not taking it back (a rollback is `temporal worker deployment set-current-version`)',
        );
        return 'older';
      }
      if (decision === 'yes') {
        await client.workflowService.setWorkerDeploymentCurrentVersion({
          namespace: client.options.namespace,
          deploymentName: version.deploymentName,
          buildId: version.buildId,
          conflictToken: d!.conflictToken,
          identity: opts.identity,
        });
        log.info({ ...version, was: d!.view.current ?? null }, 'made this worker version the Current Version of its deployment');
        return 'current';
      }
    } catch (err) {
      // Pollers not registered yet on every task queue, a conflicting change, the server away: try again.
      if (attempt % 5 === 4) log.info({ err: String(err), ...version }, 'could not make this version Current yet; trying again');
    }
    await pause(opts.intervalMs ?? 1000, signal);
  }
  return 'stopped';
}

/**
 * Reads the deployment's Current Version every intervalMs until signal aborts and hands it to report (undefined:
 * none is Current). A failed read keeps what was last reported: a Temporal outage is not a version change.
 */
export async function watchCurrentVersion(opts: {
  client: Client;
  deploymentName: string;
  intervalMs: number;
  report: (currentBuildId: string | undefined) => void;
  log: Logger;
  signal: AbortSignal;
}): Promise<void> {
  const { signal } = opts;
  let failures = 0;
  while (!signal.aborted) {
    try {
      const d = await describeDeployment(opts.client, opts.deploymentName);
      if (!signal.aborted) opts.report(d?.view.current);
      failures = 0;
    } catch (err) {
      if (failures++ % 10 === 0)
        opts.log.info({ err: String(err), deploymentName: opts.deploymentName }, "could not read the deployment's Current Version");
    }
    await pause(opts.intervalMs, signal);
  }
}
