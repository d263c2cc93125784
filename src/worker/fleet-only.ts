/**
 * The fleet's worker on its own (`svm worker --fleet-only`, SVM_FLEET_ONLY=true; docs/fleet.md "Trust domains"):
 * the fleet task queue of TEMPORAL_NAMESPACE only (campaigns and their members, registrations there), with a
 * client per trust domain when SVM_FLEET_DOMAINS names them. It serves no cluster: no kubeconfig, no Kubernetes
 * client, no cluster's task queue, no registration of its own. With domains it is the fleet namespace's worker
 * (the domains' workers run in theirs); without, it serves the campaigns of a single namespace whose cluster workers
 * run with SVM_FLEET_WORKER=false.
 */
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { fleetTaskQueue } from '../api/cluster';
import { FLEET_DOMAINS_ENV, FleetDomains } from '../config/fleet-domains';
import { explainTemporalConnectError, temporalConnectionOptions } from '../config/temporal';
import type { WorkerSettings } from './config';
import { createLogger, installRuntime } from './logging';
import { FLEET_CACHED_WORKFLOWS } from './pool';
import { fleetWorker } from './worker';

export const FLEET_ONLY_ENV = 'SVM_FLEET_ONLY';

/** Why the settings cannot make a fleet-only worker (a cluster or a pool named with it), or undefined. */
export function fleetOnlyRefusal(settings: Pick<WorkerSettings, 'temporal' | 'kubeconfigDir' | 'kubeconfigSecrets'>): string | undefined {
  const named = [
    settings.temporal.cluster ? `a cluster (SVM_CLUSTER=${settings.temporal.cluster})` : '',
    settings.kubeconfigDir ? 'a pool (SVM_KUBECONFIG_DIR)' : '',
    settings.kubeconfigSecrets ? 'a pool (SVM_KUBECONFIG_SECRETS)' : '',
  ].filter(Boolean);
  return named.length > 0
    ? `--fleet-only serves no cluster, but ${named.join(' and ')} is named: run that cluster's worker apart (its own process, SVM_FLEET_WORKER=false beside it)`
    : undefined;
}

/** The fleet-only worker: connected and created (a malformed SVM_FLEET_DOMAINS is refused here); run() until SIGTERM. */
export async function createFleetOnlyWorker(settings: WorkerSettings, log: Logger = createLogger()): Promise<{ run(): Promise<void> }> {
  const refusal = fleetOnlyRefusal(settings);
  if (refusal) throw new Error(refusal);
  const t = settings.temporal;
  if (!t.address) throw new Error('TEMPORAL_ADDRESS is not set');
  const target = { ...t, address: t.address };
  // The domains file checked before anything is connected (fleetWorker reads it again, to hold its clients).
  FleetDomains.fromEnv(process.env, t);
  await installRuntime(log);
  const connection = await NativeConnection.connect(temporalConnectionOptions(target)).catch(async (e: unknown) => {
    throw await explainTemporalConnectError(e, target);
  });
  try {
    // The cache holds a campaign's whole window, as a pool's fleet worker's does.
    const worker = await fleetWorker(
      connection,
      { ...settings, maxCachedWorkflows: Math.max(settings.maxCachedWorkflows, FLEET_CACHED_WORKFLOWS) },
      new Client({ connection, namespace: t.namespace }),
    );
    return {
      async run() {
        log.info(
          { namespace: t.namespace, taskQueue: fleetTaskQueue(t.taskQueue), domains: process.env[FLEET_DOMAINS_ENV] ?? null },
          'fleet-only worker: serving the fleet task queue (campaigns, registrations), no cluster',
        );
        try {
          await worker.run();
        } finally {
          await connection.close();
        }
      },
    };
  } catch (err) {
    await connection.close().catch(() => undefined);
    throw err;
  }
}
