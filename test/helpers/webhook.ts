/**
 * A real validating admission webhook for tests: an HTTPS server that denies
 * updates by name, or by any rule over the AdmissionReview's request (the
 * object included), with a message of its choosing. It listens where the API
 * servers can reach it: the plane's bridge address in the cluster shape (each
 * server has a network namespace of its own, where 127.0.0.1 is itself),
 * 127.0.0.1 in the loopback shape.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestCrd } from './crd';
import { eventually } from './waits';
import { uniq, type TestPlane } from './plane';

export interface DenyingWebhook {
  url: string;
  caBundle: string;
  denied: number;
  close(): Promise<void>;
}

/** The part of an AdmissionReview request a test webhook decides on. */
export interface AdmissionRequest {
  uid: string;
  name: string;
  namespace?: string;
  operation: string;
  object?: Record<string, unknown>;
}

/** A denial: the Status the webhook answers with (the API server passes code, reason, message and details on). */
export interface Denial {
  code?: number;
  message: string;
  reason?: string;
  details?: Record<string, unknown>;
}

/** The address of this host the plane's API servers reach. */
export const webhookHost = (plane: TestPlane): string => plane.state.network?.gateway ?? '127.0.0.1';

/** A self-signed serving certificate (and its key) for host, an IP address. */
function selfSignedCert(host: string): { key: Buffer; cert: Buffer } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svm-webhook-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        `/CN=${host}`,
        '-addext',
        `subjectAltName=IP:${host}`,
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(path.join(dir, 'key.pem')), cert: readFileSync(path.join(dir, 'cert.pem')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function startDenyingWebhook(host: string, deny: (name: string) => boolean, message: string): Promise<DenyingWebhook>;
export async function startDenyingWebhook(host: string, decide: (request: AdmissionRequest) => Denial | undefined): Promise<DenyingWebhook>;
export async function startDenyingWebhook(
  host: string,
  rule: ((name: string) => boolean) | ((request: AdmissionRequest) => Denial | undefined),
  message?: string,
): Promise<DenyingWebhook> {
  const decide: (request: AdmissionRequest) => Denial | undefined =
    message !== undefined
      ? (r) => ((rule as (name: string) => boolean)(r.name) ? { code: 403, message } : undefined)
      : (rule as (request: AdmissionRequest) => Denial | undefined);
  const { key, cert } = selfSignedCert(host);
  const state = { denied: 0 };
  const server = https.createServer({ key, cert }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: AdmissionRequest };
      const denial = decide(review.request);
      if (denial) state.denied++;
      res.setHeader('Content-Type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: { uid: review.request.uid, allowed: !denial, ...(denial ? { status: { code: 403, ...denial } } : {}) },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://${host}:${port}/validate`,
    caBundle: cert.toString('base64'),
    get denied() {
      return state.denied;
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections(); // the API servers keep connections alive for ~90s otherwise
      }),
  };
}

export interface ConversionWebhook {
  url: string;
  caBundle: string;
  /** Objects converted so far. */
  converted: number;
  close(): Promise<void>;
}

/**
 * A real CRD conversion webhook for the test CRD (its versions differ only in apiVersion): answers every
 * ConversionReview with the objects under the desired apiVersion. Closed, the API servers can no longer
 * read an object stored in the other version.
 */
export async function startConversionWebhook(host: string): Promise<ConversionWebhook> {
  const { key, cert } = selfSignedCert(host);
  const state = { converted: 0 };
  const server = https.createServer({ key, cert }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: { uid: string; desiredAPIVersion: string; objects: Array<Record<string, unknown>> } };
      const convertedObjects = review.request.objects.map((o) => ({ ...o, apiVersion: review.request.desiredAPIVersion }));
      state.converted += convertedObjects.length;
      res.setHeader('Content-Type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'ConversionReview',
          response: { uid: review.request.uid, convertedObjects, result: { status: 'Success' } },
        }),
      );
    });
  });
  // Every TCP connection, TLS handshakes included: closeAllConnections() knows only those that got to HTTP, and
  // close() would wait for the others.
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (sock: import('node:net').Socket) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://${host}:${port}/convert`,
    caBundle: cert.toString('base64'),
    get converted() {
      return state.converted;
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        for (const sock of sockets) sock.destroy();
      }),
  };
}

const WEBHOOK_CONFIGS = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';

/**
 * Registers one validating webhook (failurePolicy Fail) served by hook, then
 * waits until every API server calls it: probePath's object, PUT back as it
 * is through each server, must be answered as enforced() says. On failure
 * the configuration and the hook are removed again. Returns their removal.
 */
async function registerWebhook(
  plane: TestPlane,
  hook: { url: string; caBundle: string; close(): Promise<void> },
  webhook: { configPrefix: string; name: string; rules: unknown[]; namespace?: string; timeoutSeconds: number },
  probe: { path: string; enforced: (status: number) => boolean; before?: () => Promise<void> },
): Promise<() => Promise<void>> {
  const configName = uniq(webhook.configPrefix);
  const remove = async () => {
    await plane.kube.raw('DELETE', `${WEBHOOK_CONFIGS}/${configName}`);
    await hook.close();
  };
  try {
    await plane.kube.request('POST', WEBHOOK_CONFIGS, {
      body: JSON.stringify({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingWebhookConfiguration',
        metadata: { name: configName },
        webhooks: [
          {
            name: webhook.name,
            clientConfig: { url: hook.url, caBundle: hook.caBundle },
            rules: webhook.rules,
            ...(webhook.namespace ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': webhook.namespace } } } : {}),
            admissionReviewVersions: ['v1'],
            sideEffects: 'None',
            failurePolicy: 'Fail',
            timeoutSeconds: webhook.timeoutSeconds,
          },
        ],
      }),
    });
    await probe.before?.();
    for (let i = 0; i < plane.state.apiservers.length; i++) {
      const k = plane.kubeOf(i);
      let answered = 'no PUT answered yet';
      await eventually(
        `the webhook ${webhook.name} on API server ${i}`,
        async () => {
          const obj = await k.getJson<Record<string, unknown>>(probe.path);
          const res = await k.raw('PUT', probe.path, { body: JSON.stringify(obj) });
          answered = `the probe's PUT answered HTTP ${res.status}`; // not its body: the probe may be a Secret
          return probe.enforced(res.status);
        },
        60_000,
        () => answered,
      );
    }
    return remove;
  } catch (err) {
    await remove().catch(() => undefined);
    throw err;
  }
}

/**
 * Registers a validating webhook that refuses updates of the CRD's deny-*
 * objects in namespace ns, and waits until every API server enforces it
 * (a deny-000000 object must exist). Returns its removal.
 */
export async function denyUpdatesOf(
  plane: TestPlane,
  crd: TestCrd,
  ns: string,
): Promise<(() => Promise<void>) & { readonly denied: number }> {
  const hook = await startDenyingWebhook(
    webhookHost(plane),
    (name) => name.startsWith('deny-'),
    'objects named deny-* are frozen by policy',
  );
  const remove = await registerWebhook(
    plane,
    hook,
    {
      configPrefix: 'svm-deny',
      name: 'deny.svm.test',
      rules: [{ operations: ['UPDATE'], apiGroups: [crd.group], apiVersions: ['*'], resources: [crd.plural] }],
      timeoutSeconds: 5,
    },
    { path: `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}/deny-000000`, enforced: (status) => status === 403 || status === 400 },
  );
  // The removal, which also tells how many updates the webhook has denied so far (its own probes included).
  return Object.defineProperty(remove, 'denied', { get: () => hook.denied }) as typeof remove & { readonly denied: number };
}

/**
 * The worst webhook for rule 4: it refuses updates of the Secrets of namespace
 * ns that `deny` picks, and its denial ECHOES the Secret's decoded values —
 * in its message, its reason and its details (a webhook writes the whole
 * Status the API server returns). Waits until every API server enforces it on
 * the Secret named probe (which deny must pick). Returns the webhook and its
 * removal.
 */
export async function denySecretsEchoingValues(
  plane: TestPlane,
  ns: string,
  probe: string,
  deny: (name: string) => boolean,
  webhookName = 'echo.svm.test',
): Promise<{ hook: DenyingWebhook; remove: () => Promise<void> }> {
  const hook = await startDenyingWebhook(webhookHost(plane), (r) => {
    if (r.operation !== 'UPDATE' || !deny(r.name)) return undefined;
    const data = (r.object?.data ?? {}) as Record<string, string>;
    const values = Object.entries(data).map(([k, v]) => `${k}=${Buffer.from(v, 'base64').toString('utf8')}`);
    const encoded = Object.values(data).join(',');
    return {
      code: 403,
      message: `refusing ${r.name}: its values are ${values.join(' ')} (base64 ${encoded})`,
      reason: values.join(' ') || 'Forbidden',
      details: {
        name: values.join(' '),
        kind: encoded,
        causes: Object.keys(data).map((k) => ({
          field: `data.${Buffer.from(data[k]!, 'base64').toString('utf8')}`,
          reason: 'FieldValueInvalid',
          message: values.join(' '),
        })),
      },
    };
  });
  const remove = await registerWebhook(
    plane,
    hook,
    {
      configPrefix: 'svm-echo',
      name: webhookName,
      rules: [{ operations: ['UPDATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['secrets'] }],
      namespace: ns,
      timeoutSeconds: 5,
    },
    { path: `/api/v1/namespaces/${ns}/secrets/${probe}`, enforced: (status) => status === 403 },
  );
  return { hook, remove };
}

/** What a flaky webhook does with one admission: answer it, answer too late, or fail with HTTP 500. */
export type FlakyAnswer = 'allow' | 'timeout' | 'error';

export interface FlakyWebhook {
  url: string;
  caBundle: string;
  /**
   * Admissions (distinct AdmissionReview uids) and how each was answered; calls
   * counts every call, the API server's own retries of an admission included.
   */
  readonly stats: { admissions: number; calls: number; allowed: number; timedOut: number; errors: number };
  close(): Promise<void>;
}

/**
 * A validating webhook that allows everything, but not always in time:
 * decide() picks per admission whether it answers, sleeps lateMs before
 * answering (past the configuration's timeoutSeconds, so the API server gives
 * up), or answers HTTP 500 with no AdmissionReview at all. The answer is
 * decided once per admission: the API server retries a call that got a 5xx
 * (same uid), and gets the same answer.
 */
export async function startFlakyWebhook(
  host: string,
  decide: (request: AdmissionRequest) => FlakyAnswer,
  lateMs: number,
): Promise<FlakyWebhook> {
  const { key, cert } = selfSignedCert(host);
  const stats = { admissions: 0, calls: 0, allowed: 0, timedOut: 0, errors: 0 };
  const answers = new Map<string, FlakyAnswer>();
  const timers = new Set<NodeJS.Timeout>();
  const server = https.createServer({ key, cert }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: AdmissionRequest };
      stats.calls++;
      let answer = answers.get(review.request.uid);
      if (answer === undefined) {
        answer = decide(review.request);
        answers.set(review.request.uid, answer);
        stats.admissions++;
        if (answer === 'error') stats.errors++;
        else if (answer === 'timeout') stats.timedOut++;
        else stats.allowed++;
      }
      const allow = () => {
        res.setHeader('Content-Type', 'application/json');
        res.end(
          JSON.stringify({
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: { uid: review.request.uid, allowed: true },
          }),
        );
      };
      if (answer === 'error') {
        res.statusCode = 500;
        res.end('flaky webhook: internal error');
      } else if (answer === 'timeout') {
        const t = setTimeout(() => {
          timers.delete(t);
          if (!res.destroyed) allow();
        }, lateMs);
        timers.add(t);
      } else {
        allow();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://${host}:${port}/validate`,
    caBundle: cert.toString('base64'),
    stats,
    close: () =>
      new Promise<void>((r) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/**
 * Registers a flaky validating webhook (failurePolicy Fail, timeoutSeconds 1)
 * on UPDATEs of the CRD's objects in namespace ns only: a `rate` share of
 * them, half answered too late (the API server times out) and half with HTTP
 * 500, so the API server refuses those updates with its own errors. Waits
 * until every API server calls it (a probe object whose updates always fail,
 * deleted again before this returns). Returns the webhook and its removal.
 */
export async function flakyUpdatesOf(
  plane: TestPlane,
  crd: TestCrd,
  ns: string,
  rate: number,
): Promise<{ hook: FlakyWebhook; remove: () => Promise<void> }> {
  const probe = 'probe-flaky';
  const hook = await startFlakyWebhook(
    webhookHost(plane),
    (r) => {
      if (r.operation !== 'UPDATE') return 'allow';
      if (r.name === probe) return 'error';
      const x = Math.random();
      return x < rate / 2 ? 'timeout' : x < rate ? 'error' : 'allow';
    },
    2500,
  );
  const collection = `/apis/${crd.group}/v2/namespaces/${ns}/${crd.plural}`;
  const remove = await registerWebhook(
    plane,
    hook,
    {
      configPrefix: 'svm-flaky',
      name: 'flaky.svm.test',
      rules: [{ operations: ['UPDATE'], apiGroups: [crd.group], apiVersions: ['*'], resources: [crd.plural] }],
      namespace: ns,
      timeoutSeconds: 1,
    },
    {
      path: `${collection}/${probe}`,
      enforced: (status) => status >= 500,
      before: async () => {
        await plane.kube.request('POST', collection, {
          body: JSON.stringify({ apiVersion: `${crd.group}/v2`, kind: crd.kind, metadata: { name: probe }, spec: { probe: true } }),
        });
      },
    },
  );
  try {
    await plane.kube.request('DELETE', `${collection}/${probe}`);
  } catch (err) {
    await remove().catch(() => undefined);
    throw err;
  }
  return { hook, remove };
}
