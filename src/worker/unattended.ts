/**
 * Beside the worker in the deferring mode (SVM_STANDARD_MIGRATIONS=defer, the
 * default; and off): svm leaves storagemigration.k8s.io objects to
 * kube-controller-manager's built-in migrator. Where no built-in runs (turned
 * off, or a control plane without kube-controller-manager), such an object
 * gets no status at all and nothing is migrated: nobody says so. This looks
 * at them every periodSeconds and, for each one no controller has written a
 * status to within afterSeconds of its creation, says so once: a Warning
 * Event about the object (in the default namespace, where Events about cluster-scoped
 * objects live: `kubectl describe` finds it), a
 * log line, and the gauge svm_standard_migrations_unattended. It writes
 * nothing to the object itself: that is the built-in's (or, in own mode,
 * svm's bridge's).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { STANDARD_GROUP, type StandardMigration } from '../api/standard-migration';
import type { KubeClient } from '../kube/client';
import { listStandardMigrations, standardVersion } from '../kube/standard-migrations';
import { NO_CONTROLLER_ACTING } from '../contract/reasons';
import type { MigratorMetrics } from './metrics';

export const UNATTENDED_REASON = NO_CONTROLLER_ACTING;

export interface UnattendedOptions {
  kube: KubeClient;
  log: Logger;
  metrics?: MigratorMetrics;
  /** Where the Events go: default (the only namespace the API server takes an Event about a cluster-scoped object in, with `default`'s alias ""); tests use another. */
  namespace?: string;
  /** No status this long after creation: unattended. Default 120 s. */
  afterSeconds?: number;
  /** Default 30 s. */
  periodSeconds?: number;
}

/** The objects no controller has acted on within afterMs of their creation (pure). */
export function unattended(items: StandardMigration[], now: number, afterMs: number): StandardMigration[] {
  return items.filter((o) => {
    if ((o.status?.conditions ?? []).length > 0) return false;
    const created = Date.parse(o.metadata.creationTimestamp ?? '');
    return Number.isFinite(created) && now - created >= afterMs;
  });
}

export function unattendedMessage(o: StandardMigration, afterSeconds: number): string {
  const r = o.spec.resource;
  return (
    `no controller has acted on StorageVersionMigration ${o.metadata.name} (${r.resource}${r.group ? `.${r.group}` : ''}) ` +
    `${afterSeconds}s after its creation: svm leaves ${STANDARD_GROUP} objects to kube-controller-manager's built-in ` +
    `migrator (SVM_STANDARD_MIGRATIONS=defer), which does not seem to run. Start it (--controllers=...,storage-version-migrator-controller), ` +
    `or let svm migrate them (SVM_STANDARD_MIGRATIONS=own), or use svm's API (migration.k8s.io/v1alpha1, svm migrate)`
  );
}

/** An Event about a standard StorageVersionMigration (`kubectl describe` shows it), in namespace (default: cluster-scoped). */
export async function postEvent(
  kube: KubeClient,
  namespace: string,
  o: { metadata: { name: string; uid?: string } },
  message: string,
  reason = UNATTENDED_REASON,
): Promise<void> {
  const version = (await standardVersion(kube)) ?? 'v1';
  const now = new Date().toISOString();
  const body = {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${o.metadata.name}.${randomBytes(8).toString('hex')}`.slice(0, 253), namespace },
    involvedObject: {
      apiVersion: `${STANDARD_GROUP}/${version}`,
      kind: 'StorageVersionMigration',
      name: o.metadata.name,
      ...(o.metadata.uid ? { uid: o.metadata.uid } : {}),
    },
    reason,
    message,
    type: 'Warning',
    source: { component: 'svm' },
    reportingComponent: 'svm',
    reportingInstance: 'svm',
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
  await kube.request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body: JSON.stringify(body) });
}

/** One look: returns the names of the objects unattended now. Says so once per object (by uid). */
export async function lookForUnattended(opts: UnattendedOptions, said: Set<string>): Promise<string[]> {
  if (!(await standardVersion(opts.kube))) {
    opts.metrics?.unattended.set(0);
    return [];
  }
  const afterSeconds = opts.afterSeconds ?? 120;
  const { items } = await listStandardMigrations(opts.kube);
  const found = unattended(items, Date.now(), afterSeconds * 1000);
  opts.metrics?.unattended.set(found.length);
  const keys = new Set(found.map((o) => o.metadata.uid ?? o.metadata.name));
  for (const key of [...said]) if (!keys.has(key)) said.delete(key); // acted on since, or deleted: forget it
  for (const o of found) {
    const key = o.metadata.uid ?? o.metadata.name;
    if (said.has(key)) continue;
    const message = unattendedMessage(o, afterSeconds);
    opts.log.warn({ name: o.metadata.name, reason: UNATTENDED_REASON }, message);
    try {
      await postEvent(opts.kube, opts.namespace ?? 'default', o, message);
    } catch (err) {
      opts.log.warn({ name: o.metadata.name, err: err instanceof Error ? err.message : String(err) }, 'could not record the Event');
    }
    said.add(key);
  }
  return found.map((o) => o.metadata.name);
}

export function startUnattendedWatch(opts: UnattendedOptions): { stop(): void } {
  const said = new Set<string>();
  let busy = false;
  const tick = () => {
    if (busy) return;
    busy = true;
    lookForUnattended(opts, said)
      .catch((err: unknown) =>
        opts.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'could not look at StorageVersionMigration objects'),
      )
      .finally(() => (busy = false));
  };
  const timer = setInterval(tick, (opts.periodSeconds ?? 30) * 1000);
  timer.unref();
  tick();
  return { stop: () => clearInterval(timer) };
}
