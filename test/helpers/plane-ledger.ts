/**
 * A shared plane as a file found it, and the means to leave it so (issue 48: a file alone and a file late in the
 * suite must test the same thing, and the suite must pass with its files in any order).
 *
 * markPlane reads, when a file opens the plane: every object's uid (metadata only, every listable and deletable
 * resource of every group), the API servers' flags and release, whether the StorageVersion API is on and
 * kube-controller-manager runs, the running workflows and Temporal's namespaces. leavePlaneAsFound, when the file
 * closes it, puts back what the file changed: the workflows it left running are terminated, the Temporal namespaces
 * it registered are deleted (their workflows with them), the servers get their flags back, the
 * CustomResourceDefinitions it made go (their objects with them), then every other object it made, and the
 * namespaces it made are emptied and finalized (the plane runs no namespace controller); etcd drops the old
 * revisions. Objects the API servers make themselves (identity leases, automanaged APIServices, bootstrap APF and
 * RBAC objects) and events are left alone.
 *
 * Note: what a file changed in an object that was there before it (a label, a spec) is not put back; the files
 * change only objects they create.
 */
import type { Client } from '@temporalio/client';
import { compactEtcd } from '../../src/dev/etcd-truth';
import { readState, restartApiserver, setStorageVersionApi, stopControllerManager, isRunning, type PlaneState } from '../../src/dev/plane';
import { kubeVersions } from '../../src/dev/tools';
import { METADATA_ONLY_LIST_ACCEPT, type DiscoveredResource, type KubeClient } from '../../src/kube/client';

interface Listed {
  uid: string;
  name: string;
  namespace?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  finalizers: string[];
}

interface Kind {
  group: string;
  version: string;
  resource: string;
  namespaced: boolean;
  deleteCollection: boolean;
}

export interface PlaneMark {
  uids: Set<string>;
  namespaces: Set<string>;
  apiservers: Array<{ extraArgs: string[]; version?: string; running: boolean }>;
  storageVersionApi: boolean;
  controllerManager: boolean;
  workflows: Set<string>;
  /** Temporal's namespaces (the file's client's server), deleted ones left out. */
  temporalNamespaces: Set<string>;
}

const base = (k: Pick<Kind, 'group' | 'version'>) => (k.group ? `/apis/${k.group}/${k.version}` : `/api/${k.version}`);
const collectionPath = (k: Kind, namespace?: string) =>
  `${base(k)}${namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ''}/${k.resource}`;
const objectPath = (k: Kind, o: Pick<Listed, 'name' | 'namespace'>) => `${collectionPath(k, o.namespace)}/${encodeURIComponent(o.name)}`;
const CRDS: Pick<Kind, 'group' | 'resource'> = { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' };
const isCrds = (k: Kind) => k.group === CRDS.group && k.resource === CRDS.resource;
const isNamespaces = (k: Kind) => k.group === '' && k.resource === 'namespaces';

/** Every resource a file's objects can be of, once each (its group's preferred version): listable, deletable, no event. */
async function kinds(kube: KubeClient): Promise<Kind[]> {
  const seen = new Set<string>();
  const out: Kind[] = [];
  for (const r of (await kube.discover()).filter((r) => r.preferred)) {
    const verbs = (r as DiscoveredResource & { verbs?: string[] }).verbs ?? [];
    if (r.name.includes('/') || !verbs.includes('list') || !verbs.includes('delete') || r.name === 'events') continue;
    const key = `${r.name}.${r.group}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({
      group: r.group,
      version: r.version,
      resource: r.name,
      namespaced: r.namespaced,
      deleteCollection: verbs.includes('deletecollection'),
    });
  }
  return out;
}

/** Every object of one resource, metadata only, page by page. */
async function listAll(kube: KubeClient, k: Kind): Promise<Listed[]> {
  const out: Listed[] = [];
  let token: string | undefined;
  do {
    const res = await kube.request('GET', collectionPath(k), {
      accept: METADATA_ONLY_LIST_ACCEPT,
      query: { limit: 500, continue: token },
      timeoutMs: 60_000,
      allow: [404, 405, 406],
    });
    if (res.status !== 200) return out; // gone meanwhile (a CRD deleted), or not listable as metadata
    const page = JSON.parse(res.body) as {
      metadata?: { continue?: string };
      items?: Array<{
        metadata: {
          uid: string;
          name: string;
          namespace?: string;
          labels?: Record<string, string>;
          annotations?: Record<string, string>;
          finalizers?: string[];
        };
      }>;
    };
    for (const { metadata: m } of page.items ?? [])
      out.push({
        uid: m.uid,
        name: m.name,
        namespace: m.namespace,
        labels: m.labels ?? {},
        annotations: m.annotations ?? {},
        finalizers: m.finalizers ?? [],
      });
    token = page.metadata?.continue || undefined;
  } while (token);
  return out;
}

/** Objects the API servers make and keep themselves: never a file's to remove. */
function serversOwn(k: Kind, o: Listed): boolean {
  return (
    'apiserver.kubernetes.io/identity' in o.labels ||
    'kube-aggregator.kubernetes.io/automanaged' in o.labels ||
    o.labels['kubernetes.io/bootstrapping'] === 'rbac-defaults' ||
    o.annotations['apf.kubernetes.io/autoupdate-spec'] === 'true' ||
    (k.group === 'internal.apiserver.k8s.io' && k.resource === 'storageversions')
  );
}

async function runningWorkflows(client: Client): Promise<Set<string>> {
  const ids = new Set<string>();
  for await (const w of client.workflow.list({ query: `ExecutionStatus = 'Running'` })) ids.add(w.workflowId);
  return ids;
}

/** NAMESPACE_STATE_DELETED (temporal.api.enums.v1.NamespaceState): a namespace being deleted, not one to delete again. */
const NAMESPACE_DELETED = 3;

async function temporalNamespaces(client: Client): Promise<Set<string>> {
  const names = new Set<string>();
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listNamespaces({ pageSize: 100, nextPageToken });
    for (const n of page.namespaces ?? [])
      if (n.namespaceInfo?.name && Number(n.namespaceInfo.state) !== NAMESPACE_DELETED) names.add(n.namespaceInfo.name);
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return names;
}

async function objectsByKind(kube: KubeClient): Promise<Array<{ kind: Kind; objects: Listed[] }>> {
  const all = await kinds(kube);
  return Promise.all(all.map(async (kind) => ({ kind, objects: await listAll(kube, kind) })));
}

export async function markPlane(dir: string, kube: KubeClient, temporal: Client): Promise<PlaneMark> {
  const state = readState(dir)!;
  const byKind = await objectsByKind(kube);
  return {
    uids: new Set(byKind.flatMap((k) => k.objects.map((o) => o.uid))),
    namespaces: new Set(byKind.filter((k) => isNamespaces(k.kind)).flatMap((k) => k.objects.map((o) => o.name))),
    apiservers: state.apiservers.map((a) => ({ extraArgs: [...a.extraArgs], version: a.version, running: isRunning(a) })),
    storageVersionApi: state.storageVersionApi,
    controllerManager: isRunning(state.controllerManager),
    workflows: await runningWorkflows(temporal),
    temporalNamespaces: await temporalNamespaces(temporal),
  };
}

/** At most `width` of fn at once over items. */
async function eachAtMost<T>(items: T[], width: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

const IMMEDIATELY = JSON.stringify({ apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0, propagationPolicy: 'Background' });

/** The servers as marked: flags and release, the StorageVersion API, no kube-controller-manager the file started. */
async function serversAsMarked(dir: string, mark: PlaneMark, done: string[]): Promise<void> {
  const quiet = () => undefined;
  const state: PlaneState = readState(dir)!;
  if (state.storageVersionApi !== mark.storageVersionApi) {
    await setStorageVersionApi(dir, mark.storageVersionApi, quiet);
    done.push(`StorageVersion API ${mark.storageVersionApi ? 'on' : 'off'} again`);
  }
  for (const [i, was] of mark.apiservers.entries()) {
    const a = readState(dir)!.apiservers[i];
    if (!a || !was.running) continue;
    const release = (v?: string) => v ?? readState(dir)!.kubeVersion ?? kubeVersions().current;
    const version = release(was.version);
    const same = release(a.version) === version && JSON.stringify(a.extraArgs) === JSON.stringify(was.extraArgs);
    if (same && isRunning(a)) continue;
    await restartApiserver(dir, i, was.extraArgs, quiet, { version });
    done.push(`API server ${i} back to ${was.extraArgs.join(' ') || 'its default flags'}${was.version ? ` at ${was.version}` : ''}`);
  }
  if (!mark.controllerManager && isRunning(readState(dir)!.controllerManager)) {
    await stopControllerManager(dir);
    done.push('kube-controller-manager stopped');
  }
}

/** A request whose failure is kept (its path and error) instead of ending the rest of the clean-up. */
function keeping(failed: string[], kube: KubeClient) {
  return async (method: string, path: string, opts: Parameters<KubeClient['request']>[2]): Promise<void> => {
    try {
      const res = await kube.raw(method, path, opts);
      if (res.status >= 300 && !opts?.allow?.includes(res.status))
        failed.push(`${method} ${path}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
    } catch (err) {
      failed.push(`${method} ${path}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    }
  };
}

/** Those of `crds` still there (by uid). */
async function stillThere(kube: KubeClient, crdKind: Kind, crds: Listed[]): Promise<Listed[]> {
  const left = new Set((await listAll(kube, crdKind)).map((o) => o.uid));
  return crds.filter((o) => left.has(o.uid));
}

/** A CRD still being deleted is nudged this often (see waitGone). */
const NUDGE_EVERY_MS = 10_000;

/**
 * Until none of `crds` is there, at most `ms`. Those still there are nudged every NUDGE_EVERY_MS (an annotation
 * changed), which hands each API server's CRD finalizer the CRD again. Its passes can stop short: on API servers
 * just restarted (the ledger puts their flags back just before), a pass fails with "storage is (re)initializing",
 * and the next one's status write conflicts with the other server's and ends, waiting for a change other than the
 * Terminating condition, which none makes until the informers' resync, minutes later (seen on v1.37.2: the svm
 * CRD held 4 minutes, gone 2 s after a nudge).
 */
async function waitGone(kube: KubeClient, crdKind: Kind, crds: Listed[], ms: number): Promise<Listed[]> {
  const end = Date.now() + ms;
  let nudge = Date.now() + NUDGE_EVERY_MS;
  let left = await stillThere(kube, crdKind, crds);
  while (left.length > 0 && Date.now() < end) {
    if (Date.now() >= nudge) {
      nudge = Date.now() + NUDGE_EVERY_MS;
      const body = JSON.stringify({ metadata: { annotations: { 'svm.test/ledger-nudge': String(Date.now()) } } });
      // (a nudge that fails is only a nudge not given)
      for (const o of left)
        await kube
          .request('PATCH', objectPath(crdKind, o), { body, contentType: 'application/merge-patch+json', allow: [404, 409, 422] })
          .catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 500));
    left = await stillThere(kube, crdKind, crds);
  }
  return left;
}

/** A CustomResourceDefinition as its deletion stands: finalizers, Terminating condition, objects left. */
async function deletionState(kube: KubeClient, crdKind: Kind, o: Listed): Promise<{ text: string; objects: number; finalizers: string[] }> {
  const res = await kube.request('GET', objectPath(crdKind, o), { allow: [404] });
  if (res.status === 404) return { text: `${o.name}: gone`, objects: 0, finalizers: [] };
  const crd = JSON.parse(res.body) as {
    metadata: { finalizers?: string[]; deletionTimestamp?: string };
    spec: { group: string; names: { plural: string }; versions: Array<{ name: string; storage?: boolean }> };
    status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
  };
  const version = crd.spec.versions.find((v) => v.storage)?.name;
  const objects = version
    ? (await listAll(kube, { group: crd.spec.group, version, resource: crd.spec.names.plural, namespaced: false, deleteCollection: false }))
        .length
    : 0;
  const term = crd.status?.conditions?.find((c) => c.type === 'Terminating');
  const text =
    `${o.name}: deletionTimestamp ${crd.metadata.deletionTimestamp ?? 'none'}, finalizers [${(crd.metadata.finalizers ?? []).join(', ')}], ` +
    `Terminating ${term ? `${term.status} ${term.reason ?? ''}: ${term.message ?? ''}` : 'not set'}, ${objects} objects left`;
  return { text, objects, finalizers: crd.metadata.finalizers ?? [] };
}

const CLEANUP_FINALIZER = 'customresourcecleanup.apiextensions.k8s.io';

/** How long the file's CRDs are waited for (ms): until their state is printed, then after the finalizer's removal. */
export interface CrdWaits {
  gone: number;
  then: number;
}

/**
 * The file's CustomResourceDefinitions gone: the API servers' finalizer deletes their objects, then them. Where it
 * has not within two minutes, what it stands at is printed, and a CRD whose objects are all gone loses its clean-up
 * finalizer here (what the API server's controller would do next); a CRD still there a minute later is a failure
 * naming its state.
 */
async function crdsGone(kube: KubeClient, crdKind: Kind, crds: Listed[], failed: string[], waits: CrdWaits): Promise<void> {
  let left = await waitGone(kube, crdKind, crds, waits.gone);
  if (left.length === 0) return;
  for (const o of left) {
    const state = await deletionState(kube, crdKind, o);
    console.error(`plane ledger: CustomResourceDefinition not gone after ${waits.gone / 1000} s: ${state.text}`);
    if (state.objects === 0 && state.finalizers.includes(CLEANUP_FINALIZER))
      await keeping(failed, kube)('PATCH', objectPath(crdKind, o), {
        body: JSON.stringify({ metadata: { finalizers: state.finalizers.filter((f) => f !== CLEANUP_FINALIZER) } }),
        contentType: 'application/merge-patch+json',
        allow: [404, 409],
      });
  }
  left = await waitGone(kube, crdKind, left, waits.then);
  const all = (waits.gone + waits.then) / 1000;
  for (const o of left) failed.push(`CustomResourceDefinition not gone after ${all} s: ${(await deletionState(kube, crdKind, o)).text}`);
}

/** The file's objects removed: CRDs first (their objects go with them), then the rest; its namespaces emptied and finalized. */
async function objectsAsMarked(kube: KubeClient, mark: PlaneMark, done: string[], waits: CrdWaits): Promise<void> {
  const failed: string[] = [];
  const send = keeping(failed, kube);
  const fresh = (objects: Listed[], k: Kind) => objects.filter((o) => !mark.uids.has(o.uid) && !serversOwn(k, o));
  const crdKind = (await kinds(kube)).find(isCrds);
  if (crdKind) {
    const crds = fresh(await listAll(kube, crdKind), crdKind);
    await eachAtMost(crds, 4, (o) => send('DELETE', objectPath(crdKind, o), { allow: [404] }));
    const t0 = Date.now();
    await crdsGone(kube, crdKind, crds, failed, waits);
    if (crds.length > 0) done.push(`${crds.length} CustomResourceDefinitions (gone in ${Math.round((Date.now() - t0) / 1000)} s)`);
  }
  const byKind = await objectsByKind(kube);
  const newNamespaces = new Set(byKind.filter((k) => isNamespaces(k.kind)).flatMap((k) => fresh(k.objects, k.kind).map((o) => o.name)));
  let objects = 0;
  for (const { kind, objects: listed } of byKind) {
    if (isNamespaces(kind) || isCrds(kind)) continue;
    const mine = fresh(listed, kind);
    // In a namespace of the file's own: one deletecollection per namespace, where the resource has it.
    const single = mine.filter((o) => !(kind.deleteCollection && o.namespace && newNamespaces.has(o.namespace)));
    const collections = [...new Set(mine.filter((o) => !single.includes(o)).map((o) => o.namespace!))];
    objects += mine.length;
    await eachAtMost(collections, 4, (ns) => send('DELETE', collectionPath(kind, ns), { body: IMMEDIATELY, allow: [404, 405] }));
    await eachAtMost(single, 8, (o) => send('DELETE', objectPath(kind, o), { body: IMMEDIATELY, allow: [404, 405] }));
    // What a finalizer holds (no controller of the file's is left to remove it) goes too.
    const held = fresh(await listAll(kube, kind), kind).filter((o) => o.finalizers.length > 0);
    await eachAtMost(held, 8, (o) =>
      send('PATCH', objectPath(kind, o), {
        body: JSON.stringify({ metadata: { finalizers: null } }),
        contentType: 'application/merge-patch+json',
        allow: [404, 409, 422],
      }),
    );
  }
  if (objects > 0) done.push(`${objects} objects`);
  // The namespaces: deleted, then finalized here (the plane runs no namespace controller; their objects are gone).
  for (const ns of newNamespaces) {
    await kube.request('DELETE', `/api/v1/namespaces/${encodeURIComponent(ns)}`, { allow: [404, 409] });
    const res = await kube.request('GET', `/api/v1/namespaces/${encodeURIComponent(ns)}`, { allow: [404] });
    if (res.status === 404) continue;
    const nsObj = JSON.parse(res.body) as { spec?: { finalizers?: string[] } };
    nsObj.spec = { ...nsObj.spec, finalizers: [] };
    await kube.request('PUT', `/api/v1/namespaces/${encodeURIComponent(ns)}/finalize`, { body: JSON.stringify(nsObj), allow: [404, 409] });
  }
  if (newNamespaces.size > 0) done.push(`${newNamespaces.size} namespaces`);
  if (failed.length > 0) throw new Error(`the plane could not be put back as the file found it:\n  ${failed.join('\n  ')}`);
}

/**
 * Puts back what the file changed since `mark` (see the file's comment); says what it did, one item each ([] when
 * the file left the plane as it found it).
 */
export async function leavePlaneAsFound(
  plane: { dir: string; kube: KubeClient; etcd: string; temporal: { client: Client } },
  mark: PlaneMark,
  crdWaits: CrdWaits = { gone: 120_000, then: 60_000 },
): Promise<string[]> {
  const done: string[] = [];
  const left = [...(await runningWorkflows(plane.temporal.client))].filter((id) => !mark.workflows.has(id));
  for (const id of left)
    await plane.temporal.client.workflow
      .getHandle(id)
      .terminate('the test file that started it has ended')
      .catch(() => undefined);
  if (left.length > 0) done.push(`${left.length} running workflows terminated`);
  // Temporal deletes a namespace in the background (its workflows, then the namespace): asked here, not awaited.
  const namespaces = [...(await temporalNamespaces(plane.temporal.client))].filter((n) => !mark.temporalNamespaces.has(n));
  for (const namespace of namespaces) await plane.temporal.client.connection.operatorService.deleteNamespace({ namespace });
  if (namespaces.length > 0) done.push(`${namespaces.length} Temporal namespaces deleted (${namespaces.join(', ')})`);
  await serversAsMarked(plane.dir, mark, done);
  await objectsAsMarked(plane.kube, mark, done, crdWaits);
  if (done.length > 0) await compactEtcd(plane.etcd).catch(() => undefined);
  return done;
}
