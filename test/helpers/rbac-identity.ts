/**
 * Running as the migrator's ServiceAccount: apply the manifests of deploy/
 * with server-side apply, mint a token with the TokenRequest API, write a
 * kubeconfig for it, and run a worker (and a Migrator client) with it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type pino from 'pino';
import YAML from 'yaml';
import { Migrator } from '../../src/client';
import { kubeconfigYaml } from '../../src/dev/plane';
import type { DiscoveredResource, KubeClient } from '../../src/kube/client';
import type { WorkerSettings } from '../../src/worker/config';
import { createLogger, createMigratorWorker, type MigratorWorker } from '../../src/worker/worker';
import { uniq, type TestPlane } from './plane';

export const DEPLOY_DIR = path.resolve(__dirname, '..', '..', 'deploy');

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** Every object of a multi-document YAML file of deploy/. */
export function readManifests(file: string): Manifest[] {
  const text = fs.readFileSync(path.resolve(DEPLOY_DIR, file), 'utf8');
  return YAML.parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
      return d.toJS() as Manifest | null;
    })
    .filter((o): o is Manifest => o !== null && typeof o === 'object');
}

/** The REST path of an object, from discovery (kind -> resource, namespaced or not). */
function objectUrl(obj: Manifest, discovered: DiscoveredResource[]): string {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
  const r = discovered.find((d) => d.group === group && d.version === version && d.kind === obj.kind && !d.name.includes('/'));
  if (!r) throw new Error(`the API servers do not serve ${obj.kind} in ${obj.apiVersion}`);
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  const ns = r.namespaced ? `/namespaces/${obj.metadata.namespace ?? 'default'}` : '';
  return `${base}${ns}/${r.name}/${encodeURIComponent(obj.metadata.name)}`;
}

/** Server-side applies each object (fieldManager svm-test, force) in order. */
export async function serverSideApply(kube: KubeClient, objects: Manifest[]): Promise<void> {
  const discovered = await kube.discover();
  for (const obj of objects) {
    await kube.request('PATCH', objectUrl(obj, discovered), {
      body: JSON.stringify(obj),
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: 'svm-test', force: 'true' },
    });
  }
}

/** Deletes each object (gone already is fine), in reverse order. */
export async function deleteManifests(kube: KubeClient, objects: Manifest[]): Promise<void> {
  const discovered = await kube.discover();
  for (const obj of [...objects].reverse()) await kube.request('DELETE', objectUrl(obj, discovered), { allow: [404] });
}

/** A bound token of a ServiceAccount (TokenRequest API). */
export async function serviceAccountToken(kube: KubeClient, namespace: string, name: string, expirationSeconds = 3600): Promise<string> {
  const res = await kube.request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds } }),
  });
  const tr = JSON.parse(res.body) as { status?: { token?: string } };
  if (!tr.status?.token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
  return tr.status.token;
}

/** Writes a kubeconfig for server with token (trusting planeDir's CA; default: the suite's plane); returns its path. */
export function writeTokenKubeconfig(server: string, token: string, name: string, planeDir?: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-rbac-'));
  const file = path.join(dir, 'kubeconfig');
  const ca = planeDir === undefined ? undefined : fs.readFileSync(path.join(planeDir, 'pki', 'ca.crt'));
  fs.writeFileSync(file, kubeconfigYaml(server, token, name, ca), { mode: 0o600 });
  return file;
}

/** Removes a kubeconfig written by writeTokenKubeconfig (it holds a token). */
export function removeTokenKubeconfig(file: string | undefined): void {
  if (file) fs.rmSync(path.dirname(file), { recursive: true, force: true });
}

/** Who the API server says the client is (SelfSubjectReview). */
export async function whoAmI(kube: KubeClient): Promise<{ username: string; groups: string[] }> {
  const res = await kube.request('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
  });
  const r = JSON.parse(res.body) as { status: { userInfo: { username: string; groups?: string[] } } };
  return { username: r.status.userInfo.username, groups: r.status.userInfo.groups ?? [] };
}

/** Whether the client may do something (SelfSubjectAccessReview). */
export async function canI(
  kube: KubeClient,
  attrs: { verb: string; group?: string; resource: string; subresource?: string; namespace?: string; name?: string },
): Promise<boolean> {
  const res = await kube.request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    body: JSON.stringify({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { group: attrs.group ?? '', ...attrs } },
    }),
  });
  return (JSON.parse(res.body) as { status: { allowed: boolean } }).status.allowed;
}

/**
 * withWorker (helpers/migrate.ts) with every Kubernetes call of the worker
 * (activities and bridge) and of the Migrator client made through the given
 * kubeconfig, i.e. as the identity it holds.
 */
export async function withWorkerAs<T>(
  plane: TestPlane,
  kubeconfig: string,
  fn: (m: Migrator, w: MigratorWorker, taskQueue: string) => Promise<T>,
  opts: { settings?: Partial<WorkerSettings>; logTo?: pino.DestinationStream } = {},
): Promise<T> {
  const taskQueue = uniq('tq-rbac');
  const w = await createMigratorWorker({ ...plane.workerSettings(taskQueue, opts.settings), kubeconfig }, createLogger(opts.logTo));
  const m = await Migrator.connect({ temporal: { ...plane.temporal.settings, taskQueue }, kubeconfig });
  try {
    return await w.runUntil(() => fn(m, w, taskQueue));
  } finally {
    await m.close();
  }
}
