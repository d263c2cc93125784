/** `svm worker`: the worker process's command, registered on the `svm` program by cli/svm.ts. */
import { Command } from 'commander';
import { clusterOption, contextOption, kubeconfigOption } from '../config/cli-options';
import { loadWorkerSettings } from './config';
import { poolSource } from './cluster-pool';
import { createClusterPool } from './pool';
import { createLogger, createMigratorWorker } from './worker';
import { createFleetOnlyWorker, FLEET_ONLY_ENV } from './fleet-only';

/** A Temporal dev server that lives and dies with the worker (the embedded default when TEMPORAL_ADDRESS is unset). */
export interface LocalTemporalServer {
  address: string;
  uiUrl: string;
  dbFile: string;
  stop(): Promise<void>;
}

export interface WorkerCommandDeps {
  /**
   * Starts a local Temporal dev server when no TEMPORAL_ADDRESS is set. Given
   * by the composition root (src/dev/local-temporal.ts): the worker does not
   * import the dev tooling. Without it, TEMPORAL_ADDRESS is required.
   */
  startLocalTemporal?: (log: (line: string) => void) => Promise<LocalTemporalServer>;
}

interface WorkerFlags {
  qps?: string;
  maxConcurrentChunks?: string;
  bridge?: boolean;
  kubeconfig?: string;
  context?: string;
  kubeconfigDir?: string;
  kubeconfigSecrets?: string;
  cluster?: string;
  fleetOnly?: boolean;
}

export function workerCommand(deps: WorkerCommandDeps = {}): Command {
  return new Command('worker')
    .description('run the migration worker (and the StorageVersionMigration bridge)')
    .option(
      '--qps <n>',
      'the load budget (SVM_QPS): auto (follows the API servers), a fixed number of updates per second, or 0 for none (default: auto)',
    )
    .option('--max-concurrent-chunks <n>', 'chunks run at once (SVM_MAX_CONCURRENT_CHUNKS; default: 4)')
    .option('--no-bridge', 'do not watch StorageVersionMigration objects')
    .addOption(kubeconfigOption())
    .addOption(contextOption())
    .addOption(clusterOption())
    .option('--kubeconfig-dir <dir>', 'serve a pool of clusters: a kubeconfig file per cluster, named by it (SVM_KUBECONFIG_DIR)')
    .option(
      '--kubeconfig-secrets <namespace>',
      'serve a pool of clusters: the Cluster API kubeconfig Secrets of this namespace, read through --kubeconfig (SVM_KUBECONFIG_SECRETS)',
    )
    .option(
      '--fleet-only',
      `serve only the fleet task queue of TEMPORAL_NAMESPACE: campaigns, with the trust domains' clients of SVM_FLEET_DOMAINS; no cluster (${FLEET_ONLY_ENV}=true)`,
    )
    .addHelpText(
      'after',
      [
        '',
        'Examples:',
        '  TEMPORAL_ADDRESS=temporal:7233 svm worker --qps 100   # JSON log lines on stdout (a container)',
        '  svm worker                                            # no TEMPORAL_ADDRESS: a local Temporal dev server too',
        '  svm worker --kubeconfig-dir /etc/svm/clusters         # one process serving a pool of clusters (docs/fleet.md)',
        "  SVM_FLEET_DOMAINS=/etc/svm/domains.json svm worker --fleet-only   # the fleet namespace's worker (trust domains)",
        '',
      ].join('\n'),
    )
    .action(async (o: WorkerFlags) => {
      const settings = loadWorkerSettings(process.env, {
        qps: o.qps,
        maxConcurrentChunks: o.maxConcurrentChunks,
        bridge: o.bridge === false ? false : undefined,
        kubeconfig: o.kubeconfig,
        kubeContext: o.context,
        cluster: o.cluster,
        kubeconfigDir: o.kubeconfigDir,
        kubeconfigSecrets: o.kubeconfigSecrets,
      });
      let local: LocalTemporalServer | undefined;
      if (!settings.temporal.address) {
        if (!deps.startLocalTemporal) throw new Error('TEMPORAL_ADDRESS is not set (host:port of the Temporal frontend)');
        // The embedded default: no TEMPORAL_ADDRESS, a local dev server that lives and dies with the worker.
        local = await deps.startLocalTemporal((l) => process.stderr.write(l + '\n'));
        settings.temporal.address = local.address;
        process.stderr.write(
          `no TEMPORAL_ADDRESS: started a local Temporal dev server at ${local.address} (UI ${local.uiUrl}, data ${local.dbFile}); clients use TEMPORAL_ADDRESS=${local.address}\n`,
        );
      }
      try {
        if (o.fleetOnly || process.env[FLEET_ONLY_ENV] === 'true') await (await createFleetOnlyWorker(settings)).run();
        else if (settings.kubeconfigDir || settings.kubeconfigSecrets) {
          const log = createLogger();
          const source = poolSource(settings, log);
          let pool;
          try {
            pool = await createClusterPool(settings, source, log);
          } catch (err) {
            source.cleanup();
            throw err;
          }
          await pool.run(); // cleans up its source when it ends
        } else await (await createMigratorWorker(settings)).run();
      } catch (err) {
        // A worker that ends on an error ends its process, once the error is said (runProgram writes it): the SDK's
        // runtime can hold the process open after a refused start (a namespace its credential may not use).
        setTimeout(() => process.exit(1), 1000);
        throw err;
      } finally {
        await local?.stop();
      }
    });
}
