/**
 * What lives beside a worker's Temporal worker (src/worker/worker.ts): the singletons only the leader runs, and a
 * Worker Deployment version's promotion and its watch of the Current version.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client';
import type { Placement } from '../contract/placement';
import { standardApi } from '../kube/migration-objects';
import { startAgreementWatcher } from './agreement-watcher';
import { startBridge } from './bridge';
import type { WorkerSettings } from './config';
import type { MigratorMetrics } from './metrics';
import { startUnattendedWatch } from './unattended';
import { promoteWhenNewest, watchCurrentVersion, type workerDeploymentOptions } from './versioning';

/** What only the leader runs: the bridge(s) of StorageVersionMigration objects, the agreement watcher, the unattended look. */
export function leaderSingletons(o: {
  settings: WorkerSettings;
  kube: KubeClient;
  client: Client;
  placement: Placement;
  log: Logger;
  metrics: MigratorMetrics | undefined;
}): Array<{ stop(): void }> {
  const { settings, kube, client, placement, log, metrics } = o;
  const out: Array<{ stop(): void }> = [];
  if (settings.bridge) out.push(startBridge({ kube, client, placement, log }));
  if (settings.bridge && settings.standardMigrations === 'own')
    out.push(
      startBridge({
        kube,
        client,
        placement,
        log,
        api: standardApi(kube),
        ownTakeAfterMs: settings.ownTakeAfterSeconds * 1000,
        onSharedObject: () => metrics?.sharedObjects.inc(),
        onLeftToBuiltIn: () => metrics?.leftToBuiltIn.inc(),
      }),
    );
  if (settings.watchAgreement) out.push(startAgreementWatcher({ kube, client, log, placement }));
  // Deferring standard objects to a built-in that may not run: say so when nobody acts on one.
  if (settings.bridge && settings.standardMigrations !== 'own') out.push(startUnattendedWatch({ kube, log, metrics }));
  return out;
}

/**
 * A version of a Worker Deployment: without a Worker Controller (SVM_PROMOTE_VERSION) the newest version makes
 * itself Current once it polls; its own version and the deployment's Current one go on /metrics
 * (SvmCurrentVersionWithoutWorker compares them).
 */
export function startVersioning(opts: {
  client: Client;
  deployment: NonNullable<ReturnType<typeof workerDeploymentOptions>>;
  settings: WorkerSettings;
  holder: string;
  log: Logger;
  metrics: MigratorMetrics | undefined;
}): { stop(): Promise<void> } {
  const { client, deployment, settings, log, metrics } = opts;
  const stopping = new AbortController();
  const promotion = settings.versioning.promote
    ? promoteWhenNewest({ client, version: deployment.version, identity: opts.holder, log, signal: stopping.signal }).catch(
        (err: unknown) => void log.warn({ err: String(err) }, 'could not make this worker version Current'),
      )
    : undefined;
  const version = { temporal_namespace: settings.temporal.namespace, deployment_name: deployment.version.deploymentName };
  metrics?.versionInfo.set({ ...version, build_id: deployment.version.buildId }, 1);
  const watching = metrics
    ? watchCurrentVersion({
        client,
        deploymentName: deployment.version.deploymentName,
        intervalMs: settings.versioning.checkSeconds * 1000,
        log,
        signal: stopping.signal,
        report(current) {
          metrics.currentVersion.reset();
          if (current) metrics.currentVersion.set({ ...version, build_id: current }, 1);
        },
      })
    : undefined;
  return {
    async stop() {
      stopping.abort();
      await promotion;
      await watching;
    },
  };
}
