/**
 * Beside the worker: watches what agreement is made of, and when it changes,
 * signals the running migration(s) concerned so they re-check agreement at
 * once (stopping a chunk in flight if agreement broke or moved). A migration
 * that is not running ignores it. After a restart the watches resume from a
 * fresh list; a change missed meanwhile is still caught, because every
 * migration compares its agreement token before recording success.
 *
 * - StorageVersion objects (only where that alpha API is served: it is off by
 *   default, and then it is not watched at all; served-ness is probed again
 *   every few minutes) -> the migration of that resource;
 * - CRDs -> the migration of that custom resource;
 * - API servers joining, leaving or restarting (an identity lease in
 *   kube-system created, deleted or taken by a new process, or the ready
 *   addresses of the `kubernetes` EndpointSlice changing) -> every running
 *   migration of its own cluster (the visibility query is narrowed to the
 *   worker's placement: its cluster, or a single-cluster install's queue),
 *   since each one's agreement counts and asks the servers. Lease
 *   renewals (every few seconds) are not changes.
 *
 * A watch that keeps failing logs once, then once every few minutes, not once
 * a second.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from 'pino';
import { groupResourceOfCrd } from '../api/custom-resource-definition';
import { EndpointSlice } from '../api/endpoint-slice';
import { nameOf as objectName } from '../api/object-meta';
import { groupResourceOfStorageVersion, IDENTITY_LABEL, IdentityLease } from '../api/storage-version';
import { migrationWorkflowId } from '../api/resource';
import { endpointAddresses, endpointId, ENDPOINTSLICE_SELECTOR, ENDPOINTSLICES_PATH } from '../kube/apiservers';
import type { KubeClient } from '../kube/client';
import { CRDS_PATH } from '../kube/crds';
import { KubeError } from '../kube/errors';
import { IDENTITY_LEASES_PATH } from '../kube/leases';
import { STORAGE_VERSIONS_PATH, storageVersionApiServed } from '../kube/storage-versions';
import { watchForever } from '../kube/watch';
import { agreementChangedSignal } from '../contract/definitions';
import type { Placement } from '../contract/placement';

/** How often a StorageVersion API that is not served is looked for again. */
const PROBE_INTERVAL_MS = 5 * 60_000;
/** A failing watch logs again at most this often. */
const LOG_INTERVAL_MS = 5 * 60_000;

export interface WatcherOptions {
  kube: KubeClient;
  client: Client;
  log: Logger;
  probeIntervalMs?: number;
  /** Where the worker's migrations run (its cluster, or a single-cluster install's queue): the migrations signalled are its. */
  placement: Placement;
}

/** Logs a repeated failure once, then at most once per interval with how many were held back. */
function quietWarn(log: Logger, what: string, intervalMs = LOG_INTERVAL_MS): (err: unknown) => void {
  let last = 0;
  let held = 0;
  return (err) => {
    const now = Date.now();
    if (now - last < intervalMs) {
      held++;
      return;
    }
    log.warn({ err: String(err), ...(held > 0 ? { repeated: held } : {}) }, `${what} failed; re-listing`);
    last = now;
    held = 0;
  };
}

export function startAgreementWatcher(opts: WatcherOptions): { stop(): void } {
  // One watch per source of agreement, stopped in the order started.
  const watches = [new StorageVersionWatch(opts), watchCrds(opts), new IdentityLeaseWatch(opts), new EndpointSliceWatch(opts)];
  return {
    stop() {
      for (const w of watches) w.stop();
    },
  };
}

function nameOf(obj: unknown): string {
  return objectName(obj) ?? '';
}

/** Tells one migration to re-check agreement; a migration that is not running is not found, and that is fine. */
async function signal(opts: Pick<WatcherOptions, 'client' | 'log'>, workflowId: string, why: string): Promise<void> {
  try {
    await opts.client.workflow.getHandle(workflowId).signal(agreementChangedSignal, why);
    opts.log.info({ workflowId, why }, 'signalled a migration to re-check agreement');
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) opts.log.warn({ workflowId, err: String(err) }, 'could not signal the migration');
  }
}

/**
 * The visibility query of the running migrations the watcher signals: its own cluster's only (its placement's
 * MigrationCluster, or a single-cluster install's task queue), when one Temporal namespace serves several. Another
 * cluster's API servers are not this cluster's: a server of this one restarting says nothing of another's agreement.
 */
export function runningMigrationsQuery(placement: Placement): string {
  return placement.query(`WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running'`);
}

/** Every running migration of the watcher's cluster: the set of its API servers is part of every agreement. */
export async function signalAll(opts: Pick<WatcherOptions, 'client' | 'log' | 'placement'>, why: string): Promise<void> {
  try {
    for await (const w of opts.client.workflow.list({ query: runningMigrationsQuery(opts.placement) })) {
      await signal(opts, w.workflowId, why);
    }
  } catch (err) {
    opts.log.warn({ err: String(err), why }, 'could not list running migrations to signal');
  }
}

/** StorageVersions, only while the API is served: probed, watched while served, probed again once switched off. */
class StorageVersionWatch {
  private watch: { stop(): void } | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  /** Whether "not served" was said since the API was last served (it is said once). */
  private reportedOff = false;
  private stopped = false;

  constructor(private readonly opts: WatcherOptions) {
    void this.probe();
  }

  stop(): void {
    this.stopped = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.watch?.stop();
  }

  private async probe(): Promise<void> {
    this.probeTimer = undefined;
    if (this.stopped) return;
    const api = await storageVersionApiServed(this.opts.kube);
    if (this.stopped) return;
    if (api.served) {
      this.startWatch();
      return;
    }
    if (!this.reportedOff) {
      this.opts.log.info(
        { status: api.status },
        'the StorageVersion API is not served (alpha, off by default): not watching StorageVersions; agreement is read from each API server’s discovery, re-checked on CRD, identity lease and EndpointSlice changes',
      );
      this.reportedOff = true;
    }
    this.schedule();
  }

  private schedule(): void {
    if (!this.stopped && !this.probeTimer)
      this.probeTimer = setTimeout(() => void this.probe(), this.opts.probeIntervalMs ?? PROBE_INTERVAL_MS);
  }

  private startWatch(): void {
    const { kube, log, placement } = this.opts;
    log.info('the StorageVersion API is served: watching StorageVersions');
    this.reportedOff = false;
    const warn = quietWarn(log, 'StorageVersion watch');
    this.watch = watchForever(kube, STORAGE_VERSIONS_PATH, {
      onList: () => undefined,
      onEvent: (type, obj) => {
        const name = nameOf(obj);
        if (name.includes('.'))
          void signal(
            this.opts,
            placement.id(migrationWorkflowId(groupResourceOfStorageVersion(name))),
            `StorageVersion ${name} ${type.toLowerCase()}`,
          );
      },
      onError: (err) => {
        // Switched off (404): back to probing, quietly.
        if (!notServed(err)) return warn(err);
        this.watch?.stop();
        this.watch = undefined;
        this.schedule();
      },
    });
  }
}

function notServed(err: unknown): boolean {
  return (err instanceof KubeError && err.kind === 'notFound') || (err as { statusCode?: number } | undefined)?.statusCode === 404;
}

/** CRDs -> the migration of that custom resource. */
function watchCrds(opts: WatcherOptions): { stop(): void } {
  const warn = quietWarn(opts.log, 'CRD watch');
  return watchForever(opts.kube, CRDS_PATH, {
    onList: () => undefined,
    onEvent: (type, obj) => {
      const name = nameOf(obj); // <plural>.<group>: exactly the resource's kubectl name
      const gr = groupResourceOfCrd(name);
      if (gr) void signal(opts, opts.placement.id(migrationWorkflowId(gr)), `CustomResourceDefinition ${name} ${type.toLowerCase()}`);
    },
    onError: warn,
  });
}

function holderOf(obj: unknown): string {
  const lease = IdentityLease.safeParse(obj);
  return (lease.success && lease.data.spec.holderIdentity) || '';
}

type WatchEvent = 'ADDED' | 'MODIFIED' | 'DELETED';

/** A list of objects followed by a watch (again after each end): what it lists and each change, to a subclass. */
abstract class ListAndWatch {
  private readonly watch: { stop(): void };

  constructor(
    protected readonly opts: WatcherOptions,
    what: { path: string; labelSelector: string; name: string },
  ) {
    const handlers = {
      onList: (items: unknown[]) => this.listed(items),
      onEvent: (type: WatchEvent, obj: unknown) => this.changed(type, obj),
      onError: quietWarn(opts.log, what.name),
    };
    this.watch = watchForever(opts.kube, what.path, handlers, { labelSelector: what.labelSelector });
  }

  stop(): void {
    this.watch.stop();
  }

  /** A full list (the first, or after a watch ended). */
  protected abstract listed(items: unknown[]): void;
  protected abstract changed(type: WatchEvent, obj: unknown): void;
}

/**
 * API servers joining, leaving or restarting: identity leases. A lease is created when a server starts, deleted
 * when it shuts down gracefully, and its holderIdentity (<name>_<uuid>) changes when it restarts (e.g. with other
 * flags, a rolling upgrade step). Renewals change neither.
 */
class IdentityLeaseWatch extends ListAndWatch {
  /** Each identity lease's holder, by lease name (undefined until the first list). */
  private holders: Map<string, string> | undefined;

  constructor(opts: WatcherOptions) {
    super(opts, { path: IDENTITY_LEASES_PATH, labelSelector: IDENTITY_LABEL, name: 'identity lease watch' });
  }

  /** A change since the last list is a change. */
  protected listed(items: unknown[]): void {
    const now = new Map(items.map((i) => [nameOf(i), holderOf(i)]));
    const before = this.holders;
    this.holders = now;
    if (before && (before.size !== now.size || [...now].some(([n, h]) => before.get(n) !== h)))
      this.leaseChange(`API server identity leases changed: ${[...now.keys()].sort().join(', ')}`);
  }

  protected changed(type: WatchEvent, obj: unknown): void {
    const name = nameOf(obj);
    const holder = holderOf(obj);
    const was = this.holders?.get(name);
    if (type === 'DELETED') {
      this.holders?.delete(name);
      this.leaseChange(`API server identity lease ${name} deleted (the server shut down)`);
      return;
    }
    this.holders?.set(name, holder);
    if (was === undefined) this.leaseChange(`API server identity lease ${name} created (a server started)`);
    else if (was !== holder) this.leaseChange(`API server ${name} restarted (identity lease holder ${holder})`);
  }

  private leaseChange(why: string): void {
    void signalAll(this.opts, why);
  }
}

/** ... and the ready addresses of the `kubernetes` EndpointSlice. */
class EndpointSliceWatch extends ListAndWatch {
  private readonly slices = new Map<string, EndpointSlice>();
  /** The ready addresses as last seen (undefined until the first list). */
  private addresses: string | undefined;

  constructor(opts: WatcherOptions) {
    super(opts, { path: ENDPOINTSLICES_PATH, labelSelector: ENDPOINTSLICE_SELECTOR, name: 'kubernetes EndpointSlice watch' });
  }

  protected listed(items: unknown[]): void {
    this.slices.clear();
    for (const i of items) this.set(i);
    this.addressesMaybeChanged();
  }

  protected changed(type: WatchEvent, obj: unknown): void {
    if (type === 'DELETED') this.slices.delete(nameOf(obj));
    else this.set(obj);
    this.addressesMaybeChanged();
  }

  private set(obj: unknown): void {
    const slice = EndpointSlice.safeParse(obj);
    if (slice.success) this.slices.set(slice.data.metadata.name, slice.data);
  }

  private addressesMaybeChanged(): void {
    const now = endpointAddresses([...this.slices.values()])
      .map((a) => endpointId(a.address, a.port))
      .join(', ');
    if (this.addresses !== undefined && now !== this.addresses)
      void signalAll(this.opts, `the kubernetes EndpointSlice now lists [${now}] (was [${this.addresses}])`);
    this.addresses = now;
  }
}
