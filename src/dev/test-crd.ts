/**
 * A test CRD with two versions (v1, v2; no conversion webhook, so objects
 * differ only in apiVersion) whose storage version a test switches, and bulk
 * object creation through the real API server. Here in src/dev (the top of
 * the stack) so that the tests (test/helpers/crd.ts), the benchmarks and the
 * demo share it without the benchmarks importing the tests.
 */
import type { KubeClient } from '../kube/client';
import { kubernetesEndpoints } from '../kube/apiservers';
import { KubeError } from '../kube/errors';

export interface TestCrd {
  group: string;
  plural: string;
  kind: string;
  name: string;
}

export function testCrd(group: string, plural = 'widgets', kind = 'Widget'): TestCrd {
  return { group, plural, kind, name: `${plural}.${group}` };
}

const crdUrl = (c: TestCrd) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${c.name}`;

const versionSchema = {
  openAPIV3Schema: {
    type: 'object',
    properties: {
      spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      data: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    },
  },
};

/**
 * Creates (or updates) the CRD with the given storage version and waits until
 * it is established and the storage version is served (both versions are
 * served unless opts.served says otherwise; the storage version must be):
 * every served version answers a list.
 */
export async function applyCrd(
  kube: KubeClient,
  c: TestCrd,
  storage: 'v1' | 'v2',
  /** everyServer false: wait only through `kube` (an API server is down on purpose). */
  opts: {
    namespaced?: boolean;
    served?: Array<'v1' | 'v2'>;
    /** The versions the CRD names at all (default both): a version left out is removed from the CRD. */
    versions?: Array<'v1' | 'v2'>;
    everyServer?: boolean;
    /** Converted by this webhook (strategy Webhook) instead of None. */
    conversion?: { url: string; caBundle: string };
  } = {},
): Promise<void> {
  const versions = opts.versions ?? ['v1', 'v2'];
  const served = opts.served ?? versions;
  const body = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: c.name },
    spec: {
      group: c.group,
      scope: opts.namespaced === false ? 'Cluster' : 'Namespaced',
      names: { plural: c.plural, singular: c.kind.toLowerCase(), kind: c.kind, listKind: `${c.kind}List` },
      versions: versions.map((v) => ({
        name: v,
        served: served.includes(v),
        storage: v === storage,
        schema: versionSchema,
      })),
      conversion: opts.conversion
        ? {
            strategy: 'Webhook',
            webhook: { clientConfig: { url: opts.conversion.url, caBundle: opts.conversion.caBundle }, conversionReviewVersions: ['v1'] },
          }
        : { strategy: 'None' },
    },
  };
  await kube.request('PATCH', crdUrl(c), {
    body: JSON.stringify(body),
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: 'svm-test', force: 'true' },
  });
  // Wait until the CRD is established and every served version answers, on every API server asked at its own
  // address (through the load balancer a kept-alive connection stays with one server: the next request, on another
  // connection, may reach a server that does not serve it yet). A server that cannot be reached (restarted by another
  // test on the shared plane) counts as not ready yet: it serves the CRD once it is back, or leaves the list of
  // servers when its endpoint lease expires.
  const servers = kubernetesEndpoints(kube);
  const status = async (k: KubeClient, v: string): Promise<number | string> => {
    try {
      return (await k.raw('GET', `/apis/${c.group}/${v}/${c.plural}`, { query: { limit: 1 } })).status;
    } catch (err) {
      if (err instanceof KubeError && err.kind === 'network') return err.message;
      throw err;
    }
  };
  try {
    let last: Array<number | string> = [];
    for (let i = 0; ; i++) {
      const crd = await kube.getJson<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(crdUrl(c));
      const established = crd.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True');
      if (established) {
        const clients = [kube, ...(opts.everyServer === false ? [] : (await servers.find()).endpoints.map((e) => e.kube))];
        last = await Promise.all(clients.flatMap((k) => served.map((v) => status(k, v))));
        if (last.every((code) => code === 200)) return;
      }
      if (i > 600) {
        throw new Error(
          `CRD ${c.name} not ready on every API server after 60s (${established ? `answers: ${last.join(', ')}` : 'not established'})`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    servers.close();
  }
}

export async function deleteCrd(kube: KubeClient, c: TestCrd): Promise<void> {
  await kube.raw('DELETE', crdUrl(c));
}

/**
 * POSTs a create (through request(): the client's own retries first). A connection lost after the request was sent
 * (an API server restarted by another test on the shared plane) is sent again, up to three times; the create may
 * have been applied, so a 409 after such a retry counts as created, as does any status `accept` takes.
 */
async function create(kube: KubeClient, path: string, body: unknown, accept: (status: number) => boolean = () => false): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await kube.request('POST', path, { body: JSON.stringify(body) });
      return;
    } catch (err) {
      if (!(err instanceof KubeError)) throw err;
      if (attempt < 3 && err.kind === 'network') {
        await new Promise((r) => setTimeout(r, 500 * attempt));
        continue;
      }
      if (err.status !== undefined && (accept(err.status) || (err.status === 409 && attempt > 1))) return;
      throw err;
    }
  }
}

/** Creates the namespace unless it exists. */
export async function ensureNamespace(kube: KubeClient, ns: string): Promise<void> {
  await create(
    kube,
    '/api/v1/namespaces',
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    (status) => status === 409,
  ).catch((err: unknown) => {
    throw new Error(`creating namespace ${ns}: ${err instanceof Error ? err.message : String(err)}`);
  });
}

/** Runs fn over 0..count-1 with limited parallelism. */
export async function parallel(count: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      for (let i = next++; i < count; i = next++) await fn(i);
    }),
  );
}

/** Creates count objects of the CRD through version v (spread over namespaces ns). */
export async function createObjects(
  kube: KubeClient,
  c: TestCrd,
  version: 'v1' | 'v2',
  count: number,
  opts: { namespace: string; prefix?: string; payload?: (i: number) => unknown; onProgress?: (created: number) => void },
): Promise<void> {
  await ensureNamespace(kube, opts.namespace);
  let created = 0;
  await parallel(count, 16, async (i) => {
    const name = `${opts.prefix ?? 'w'}-${String(i).padStart(6, '0')}`;
    const body = {
      apiVersion: `${c.group}/${version}`,
      kind: c.kind,
      metadata: { name, namespace: opts.namespace },
      spec: opts.payload ? opts.payload(i) : { index: i, note: `object ${i}` },
    };
    await create(kube, `/apis/${c.group}/${version}/namespaces/${opts.namespace}/${c.plural}`, body);
    opts.onProgress?.(++created);
  });
}
