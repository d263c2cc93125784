/**
 * A named cluster's worker and its registration in Temporal (docs/fleet.md). Before it serves anything, and at every
 * report (SVM_CLUSTER_REPORT_SECONDS), the worker confirms its identity (src/client/identity.ts): the uid of
 * kube-system as its API answers against the uid pinned to its name, and that no other name holds that uid; then
 * it reports the cluster (a signal-with-start of `svm-cluster/<name>`: kube-system's uid, each API server's
 * Kubernetes version, svm's version and the time).
 *
 * While its identity is in conflict (its API is another cluster than the one pinned to its name) the worker serves
 * nothing: every task fails at once (src/worker/cluster-check.ts), naming the cluster, both uids and the API it
 * reached; it says so in its log, on svm_cluster_identity_conflict, and in its registration. It asks again every
 * RECHECK_MS while tasks come, so that an operator's `svm fleet pin` is taken within seconds.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { ApiServerSource } from '../kube/apiservers';
import type { ClusterReport } from '../contract/fleet';
import { confirmIdentity, type Confirmation } from '../kube/cluster-identity';
import type { MigratorMetrics } from './metrics';

/** The report of the cluster as its API servers answer now: each one's /version at its own address. */
export async function clusterReport(opts: {
  name: string;
  uid: () => Promise<string>;
  apiservers: ApiServerSource;
  svmVersion: string;
  /** The task queue this worker serves the cluster on (its own, or its pool's): the registration tells start paths. */
  queue?: string;
  now?: () => number;
}): Promise<ClusterReport> {
  const found = await opts.apiservers.find();
  const servers = found.endpoints.length > 0 ? found.endpoints : [{ id: found.via.server, kube: found.via }];
  const versions = await Promise.all(
    servers.map(async (s) => {
      const v = await s.kube.getJson<{ gitVersion?: string }>('/version').catch(() => undefined);
      return { server: s.id, version: v?.gitVersion ?? 'unknown' };
    }),
  );
  return {
    name: opts.name,
    uid: await opts.uid(),
    servers: versions.sort((a, b) => (a.server < b.server ? -1 : a.server > b.server ? 1 : 0)),
    svmVersion: opts.svmVersion,
    ...(opts.queue ? { queue: opts.queue } : {}),
    seenAt: new Date((opts.now ?? Date.now)()).toISOString(),
  };
}

/** How often a worker in conflict asks again, when tasks come (an operator's pin is taken that soon). */
export const RECHECK_MS = 10_000;

/** A named cluster's identity as its worker confirmed it last: what every task is checked against. */
export class ClusterIdentity {
  private known?: { confirmation: Confirmation; at: number };
  private inFlight?: Promise<Confirmation>;
  private markConfirmed!: () => void;
  /** Resolves once the identity is first confirmed (the API is the cluster pinned to the name). */
  readonly confirmed = new Promise<void>((resolve) => (this.markConfirmed = resolve));

  constructor(
    private readonly o: {
      name: string;
      /** Where the worker's API is: its kubeconfig and server, as messages name it. */
      where: string;
      report: () => Promise<ClusterReport>;
      confirm: (report: ClusterReport, quiet: boolean) => Promise<Confirmation>;
      /** kube-system's uid as the API answers now (cached briefly: src/kube/cluster-uid.ts). */
      apiUid: () => Promise<string>;
      log: Logger;
      metrics?: MigratorMetrics;
      now?: () => number;
    },
  ) {}

  /** From a worker's settings, its client and its API. */
  static of(o: {
    client: Client;
    fleetQueue: string;
    name: string;
    where: string;
    uid: () => Promise<string>;
    apiservers: ApiServerSource;
    svmVersion: string;
    queue?: string;
    log: Logger;
    metrics?: MigratorMetrics;
  }): ClusterIdentity {
    return new ClusterIdentity({
      name: o.name,
      where: o.where,
      report: () => clusterReport(o),
      confirm: (r, quiet) => confirmIdentity(o.client, o.fleetQueue, r, o.where, { quiet }),
      apiUid: o.uid,
      log: o.log,
      metrics: o.metrics,
    });
  }

  /** The uid pinned to the worker's name, once confirmed as its API's (undefined while in conflict). */
  get pinned(): string | undefined {
    const c = this.known?.confirmation;
    return c && !('conflict' in c) ? c.pinned : undefined;
  }

  /** Confirms (again) and reports; one at a time. quiet: a conflict already known is not reported again. */
  confirm(quiet = false): Promise<Confirmation> {
    this.inFlight ??= this.confirmNow(quiet).finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async confirmNow(quiet: boolean): Promise<Confirmation> {
    const c = await this.o.confirm(await this.o.report(), quiet);
    const was = this.known?.confirmation;
    this.known = { confirmation: c, at: (this.o.now ?? Date.now)() };
    this.o.metrics?.identityConflict.set('conflict' in c ? 1 : 0);
    if (!('conflict' in c)) this.markConfirmed();
    if ('conflict' in c && (!was || !('conflict' in was) || was.conflict !== c.conflict))
      this.o.log.error(
        { cluster: this.o.name, api: this.o.where },
        `identity conflict: ${c.conflict}; this worker serves nothing until it is resolved`,
      );
    else if (!('conflict' in c) && (!was || 'conflict' in was))
      this.o.log.info(
        { cluster: this.o.name, uid: c.pinned, api: this.o.where },
        'cluster identity confirmed: the API is the cluster pinned to this name',
      );
    return c;
  }

  /** Why no task may run on this worker now, or undefined. Throws (a retryable failure) when it cannot be confirmed. */
  async refusal(): Promise<string | undefined> {
    const now = (this.o.now ?? Date.now)();
    const k = this.known;
    const c = !k || ('conflict' in k.confirmation && now - k.at >= RECHECK_MS) ? await this.confirm(k !== undefined) : k.confirmation;
    if ('conflict' in c)
      return `${c.conflict}; nothing was done: this worker serves nothing while cluster "${this.o.name}"'s identity is in conflict`;
    const uid = await this.o.apiUid();
    if (uid === c.pinned) return undefined;
    return `the API this worker reaches (${this.o.where}) answers kube-system uid ${uid}, but cluster "${this.o.name}" is pinned to ${c.pinned}: nothing was done (check the worker's kubeconfig and the address it leads to)`;
  }
}

/** How soon a report that failed is tried again (within the period): a cluster whose API or Temporal was away at start. */
export const REPORT_RETRY_SECONDS = 30;

/**
 * Confirms and reports every intervalSeconds (0: only the first, at start); a failed one is logged and tried again
 * within REPORT_RETRY_SECONDS (or the period, when shorter).
 */
export function startRegistration(
  identity: ClusterIdentity,
  intervalSeconds: number,
  log: Logger,
): { stop(): void; reported: Promise<void> } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const report = async (): Promise<boolean> => {
    try {
      await identity.confirm();
      return true;
    } catch (err) {
      log.warn({ err: String(err) }, 'could not confirm and report the cluster to its registration; tried again soon');
      return false;
    }
  };
  const loop = async () => {
    const ok = await report();
    const next = ok ? intervalSeconds : Math.min(intervalSeconds, REPORT_RETRY_SECONDS);
    if (!stopped && intervalSeconds > 0) timer = setTimeout(() => void loop(), next * 1000);
  };
  const reported = loop();
  return {
    reported,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
