import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Placement } from '../contract/placement';
import type { KubeClient } from '../kube/client';
import type { RateLimiter } from '../kube/rate-limit';
import { startClusterBudget, type ClusterBudget } from './budget';
import type { WorkerSettings } from './config';
import { startLeaderElection } from './leader';
import type { MigratorMetrics } from './metrics';
import { leaderSingletons } from './services';

/**
 * A replica's part in its cluster: its share of the load budget (a membership Lease, when the budget is limited) and
 * the leader election that runs the singletons (the bridge, the agreement watcher) on one replica. Leases in the
 * worker's API: joined once, left when the worker stops.
 */
export class ClusterMembership {
  private shared?: ClusterBudget;
  private leader?: ReturnType<typeof startLeaderElection>;
  private singletons: Array<{ stop(): void }> = [];
  private left = false;

  constructor(
    private readonly o: {
      settings: WorkerSettings;
      kube: KubeClient;
      client: Client;
      placement: Placement;
      identity: string;
      holder: string;
      instance: string;
      fixedQps: number;
      budget: RateLimiter;
      log: Logger;
      metrics?: MigratorMetrics;
    },
  ) {}

  join(): void {
    const { settings, kube, log, metrics } = this.o;
    if (this.left) return;
    const namespace = settings.kubeNamespace;
    if (this.o.fixedQps > 0)
      this.shared = startClusterBudget({
        kube,
        namespace,
        identity: this.o.identity,
        instance: this.o.instance,
        qps: this.o.fixedQps,
        limiter: this.o.budget,
        log,
        metrics,
      });
    if (!settings.bridge && !settings.watchAgreement) return;
    metrics?.leader.set(0);
    this.leader = startLeaderElection({
      kube,
      namespace,
      identity: this.o.holder,
      log,
      onStartedLeading: () => {
        metrics?.leader.set(1);
        this.singletons = leaderSingletons({ settings, kube, client: this.o.client, placement: this.o.placement, log, metrics });
      },
      onStoppedLeading: () => {
        metrics?.leader.set(0);
        for (const s of this.singletons) s.stop();
        this.singletons = [];
      },
    });
  }

  /** The worker has stopped (no chunk runs): hands the singletons over, then gives back its share. */
  async leave(): Promise<void> {
    this.left = true;
    const log = this.o.log;
    await this.leader?.stop().catch((err: unknown) => log.warn({ err: String(err) }, 'leader election did not stop cleanly'));
    await this.shared?.stop().catch((err: unknown) => log.warn({ err: String(err) }, 'budget membership did not stop cleanly'));
  }
}
