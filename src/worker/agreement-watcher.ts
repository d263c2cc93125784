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
 *   migration, since each one's agreement counts and asks the servers. Lease
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

/** How often a StorageVersion API that is not served is looked for again. */
const PROBE_INTERVAL_MS = 5 * 60_000;
/** A failing watch logs again at most this often. */
const LOG_INTERVAL_MS = 5 * 60_000;

export interface WatcherOptions {
  kube: KubeClient;
  client: Client;
  log: Logger;
  probeIntervalMs?: number;
  /** The cluster the worker serves, when one Temporal namespace serves several: the migrations signalled are its. */
  cluster?: string;
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
  const { log, kube } = opts;
  let stopped = false;
  const signal = async (workflowId: string, why: string) => {
    try {
      await opts.client.workflow.getHandle(workflowId).signal(agreementChangedSignal, why);
      log.info({ workflowId, why }, 'signalled a migration to re-check agreement');
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) log.warn({ workflowId, err: String(err) }, 'could not signal the migration');
    }
  };
  /** Every running migration: the set of API servers is part of every agreement. */
  const signalAll = async (why: string) => {
    try {
      for await (const w of opts.client.workflow.list({ query: `WorkflowType = 'migrateResource' AND ExecutionStatus = 'Running'` })) {
        await signal(w.workflowId, why);
      }
    } catch (err) {
      log.warn({ err: String(err), why }, 'could not list running migrations to signal');
    }
  };
  const nameOf = (obj: unknown) => objectName(obj) ?? '';

  // -- StorageVersions, only while the API is served
  let storageVersions: { stop(): void } | undefined;
  let probeTimer: NodeJS.Timeout | undefined;
  let reportedOff = false;
  const probe = async () => {
    probeTimer = undefined;
    if (stopped) return;
    const api = await storageVersionApiServed(kube);
    if (stopped) return;
    if (api.served) {
      log.info('the StorageVersion API is served: watching StorageVersions');
      reportedOff = false;
      const warn = quietWarn(log, 'StorageVersion watch');
      storageVersions = watchForever(kube, STORAGE_VERSIONS_PATH, {
        onList: () => undefined,
        onEvent: (type, obj) => {
          const name = nameOf(obj);
          if (name.includes('.'))
            void signal(
              migrationWorkflowId(groupResourceOfStorageVersion(name), opts.cluster),
              `StorageVersion ${name} ${type.toLowerCase()}`,
            );
        },
        onError: (err) => {
          // Switched off (404): back to probing, quietly.
          const notServed =
            (err instanceof KubeError && err.kind === 'notFound') || (err as { statusCode?: number } | undefined)?.statusCode === 404;
          if (notServed) {
            storageVersions?.stop();
            storageVersions = undefined;
            schedule();
            return;
          }
          warn(err);
        },
      });
      return;
    }
    if (!reportedOff) {
      log.info(
        { status: api.status },
        'the StorageVersion API is not served (alpha, off by default): not watching StorageVersions; agreement is read from each API server’s discovery, re-checked on CRD, identity lease and EndpointSlice changes',
      );
      reportedOff = true;
    }
    schedule();
  };
  const schedule = () => {
    if (!stopped && !probeTimer) probeTimer = setTimeout(() => void probe(), opts.probeIntervalMs ?? PROBE_INTERVAL_MS);
  };
  void probe();

  // -- CRDs
  const crdWarn = quietWarn(log, 'CRD watch');
  const crds = watchForever(kube, CRDS_PATH, {
    onList: () => undefined,
    onEvent: (type, obj) => {
      const name = nameOf(obj); // <plural>.<group>: exactly the resource's kubectl name
      const gr = groupResourceOfCrd(name);
      if (gr) void signal(migrationWorkflowId(gr, opts.cluster), `CustomResourceDefinition ${name} ${type.toLowerCase()}`);
    },
    onError: crdWarn,
  });

  // -- API servers joining, leaving or restarting: identity leases. A lease is
  // created when a server starts, deleted when it shuts down gracefully, and its
  // holderIdentity (<name>_<uuid>) changes when it restarts (e.g. with other
  // flags, a rolling upgrade step). Renewals change neither.
  let holders: Map<string, string> | undefined;
  const holderOf = (obj: unknown) => {
    const lease = IdentityLease.safeParse(obj);
    return (lease.success && lease.data.spec.holderIdentity) || '';
  };
  const leaseChange = (why: string) => void signalAll(why);
  const leaseWarn = quietWarn(log, 'identity lease watch');
  const leases = watchForever(
    kube,
    IDENTITY_LEASES_PATH,
    {
      onList: (items) => {
        const now = new Map(items.map((i) => [nameOf(i), holderOf(i)]));
        const before = holders;
        holders = now;
        if (before && (before.size !== now.size || [...now].some(([n, h]) => before.get(n) !== h)))
          leaseChange(`API server identity leases changed: ${[...now.keys()].sort().join(', ')}`);
      },
      onEvent: (type, obj) => {
        const name = nameOf(obj);
        const holder = holderOf(obj);
        const was = holders?.get(name);
        if (type === 'DELETED') {
          holders?.delete(name);
          leaseChange(`API server identity lease ${name} deleted (the server shut down)`);
          return;
        }
        holders?.set(name, holder);
        if (was === undefined) leaseChange(`API server identity lease ${name} created (a server started)`);
        else if (was !== holder) leaseChange(`API server ${name} restarted (identity lease holder ${holder})`);
      },
      onError: leaseWarn,
    },
    { labelSelector: IDENTITY_LABEL },
  );

  // -- ... and the ready addresses of the `kubernetes` EndpointSlice
  const slices = new Map<string, EndpointSlice>();
  const setSlice = (obj: unknown) => {
    const slice = EndpointSlice.safeParse(obj);
    if (slice.success) slices.set(slice.data.metadata.name, slice.data);
  };
  let addresses: string | undefined;
  const addressesNow = () =>
    endpointAddresses([...slices.values()])
      .map((a) => endpointId(a.address, a.port))
      .join(', ');
  const addressesMaybeChanged = () => {
    const now = addressesNow();
    if (addresses !== undefined && now !== addresses)
      void signalAll(`the kubernetes EndpointSlice now lists [${now}] (was [${addresses}])`);
    addresses = now;
  };
  const sliceWarn = quietWarn(log, 'kubernetes EndpointSlice watch');
  const endpointSlices = watchForever(
    kube,
    ENDPOINTSLICES_PATH,
    {
      onList: (items) => {
        slices.clear();
        for (const i of items) setSlice(i);
        addressesMaybeChanged();
      },
      onEvent: (type, obj) => {
        if (type === 'DELETED') slices.delete(nameOf(obj));
        else setSlice(obj);
        addressesMaybeChanged();
      },
      onError: sliceWarn,
    },
    { labelSelector: ENDPOINTSLICE_SELECTOR },
  );

  return {
    stop() {
      stopped = true;
      if (probeTimer) clearTimeout(probeTimer);
      storageVersions?.stop();
      crds.stop();
      leases.stop();
      endpointSlices.stop();
    },
  };
}
