/**
 * Unit tests of the kube layer's retry policy (src/kube/client.ts
 * retryDelayMs) as svm's client and the tests' own client
 * (test/helpers/plane.ts TEST_RETRY) apply it, against fake API servers on
 * 127.0.0.1 that cut connections: one that closes the first connection
 * before TLS is up (what haproxy does while it still routes to a server just
 * removed), one that hangs up on the first request after reading it.
 */
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ensureCa, ensureServingCert } from '../src/dev/tls';
import { KubeClient, retryDelayMs, SVM_RETRY, type RetryPolicy } from '../src/kube/client';
import { KubeError } from '../src/kube/errors';
import { createObjects, ensureNamespace, testCrd } from '../src/dev/test-crd';
import { TEST_RETRY } from './helpers/plane';

interface Fake {
  url: string;
  caFile?: string;
  /** TCP connections accepted, and requests that reached the handler. */
  connections: number;
  requests: string[];
  client(retry: Readonly<RetryPolicy>): KubeClient;
  close(): Promise<void>;
}

/** One CA and serving certificate for 127.0.0.1 (the plane's own openssl code), made once, removed at the end. */
let pki: { dir: string; caFile: string; cert: string; key: string } | undefined;
function servingPki(): NonNullable<typeof pki> {
  if (!pki) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-kube-retry-'));
    const ca = ensureCa(path.join(dir, 'ca'));
    pki = { dir, caFile: ca.cert, ...ensureServingCert(ca, path.join(dir, 'server'), ['127.0.0.1']) };
  }
  return pki;
}
after(() => {
  if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
});

const ok: http.RequestListener = (req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"kind":"Status","status":"Success"}');
  });
};

/**
 * An API server whose first `cut` TCP connections are closed as they arrive (before the TLS handshake with
 * `tls`, before the request without), or, with `hangUpRequests`, whose first such requests are read and then
 * answered by closing the connection.
 */
async function fake(opts: { tls: boolean; cut?: number; hangUpRequests?: number; handler?: http.RequestListener }): Promise<Fake> {
  const state = { connections: 0, requests: [] as string[] };
  let hangUps = opts.hangUpRequests ?? 0;
  const handler: http.RequestListener = (req, res) => {
    state.requests.push(req.method!);
    if (hangUps > 0) {
      hangUps--;
      req.resume();
      req.on('end', () => req.socket.destroy());
      return;
    }
    (opts.handler ?? ok)(req, res);
  };
  let server: http.Server;
  if (opts.tls) {
    const p = servingPki();
    server = https.createServer({ cert: fs.readFileSync(p.cert), key: fs.readFileSync(p.key) }, handler);
    server.caFile = p.caFile;
  } else server = http.createServer(handler);
  let cut = opts.cut ?? 0;
  const front = net.createServer((socket) => {
    state.connections++;
    if (cut > 0) {
      cut--;
      socket.destroy();
      return;
    }
    server.emit('connection', socket);
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  const port = (front.address() as net.AddressInfo).port;
  const url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const clients: KubeClient[] = [];
  return {
    url,
    get connections() {
      return state.connections;
    },
    requests: state.requests,
    client(retry) {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [opts.tls ? { name: 'c', server: url, caFile: server.caFile } : { name: 'c', server: url, skipTLSVerify: true }],
        users: [{ name: 'u', token: 'test' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      const k = new KubeClient(kc, { retry });
      clients.push(k);
      return k;
    },
    async close() {
      for (const k of clients) k.close();
      server.closeAllConnections();
      await new Promise((r) => front.close(r));
    },
  };
}

declare module 'node:http' {
  interface Server {
    caFile?: string;
  }
}

const NO_RETRY: RetryPolicy = { unsentAttempts: 1, throttledReadAttempts: 1, transientReadAttempts: 1, retryRaw: true };

void test('a connection closed before TLS is up: the error the tests met, sent again whatever the verb, by svm and by the tests', async () => {
  const f = await fake({ tls: true, cut: 1 });
  try {
    const err = await f
      .client(NO_RETRY)
      .request('GET', '/api')
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof KubeError && err.kind === 'network', String(err));
    assert.match(err.message, /^ECONNRESET: Client network socket disconnected before secure TLS connection was established/);
    assert.deepEqual(f.requests, [], 'the cut connection carried no request');

    const svm = await fake({ tls: true, cut: 1 });
    try {
      assert.equal((await svm.client(SVM_RETRY).request('POST', '/api/v1/namespaces', { body: '{}' })).status, 200);
      assert.equal(svm.connections, 2);
      assert.deepEqual(svm.requests, ['POST']);
    } finally {
      await svm.close();
    }
    for (const method of ['GET', 'POST', 'DELETE']) {
      const t = await fake({ tls: true, cut: 2 });
      try {
        const res = await t.client(TEST_RETRY).raw(method, '/api/v1/namespaces/x', { body: method === 'POST' ? '{}' : undefined });
        assert.equal(res.status, 200, method);
        assert.equal(t.connections, 3, `${method}: two cut connections, then one that carried it`);
        assert.deepEqual(t.requests, [method], `${method} reached the server once`);
      } finally {
        await t.close();
      }
    }
  } finally {
    await f.close();
  }
});

void test('a hang-up after the request was read: the tests send a read again, never a write; svm leaves both to its caller', async () => {
  const reads = await fake({ tls: false, hangUpRequests: 1 });
  try {
    assert.equal((await reads.client(TEST_RETRY).request('GET', '/api')).status, 200);
    assert.deepEqual(reads.requests, ['GET', 'GET']);
  } finally {
    await reads.close();
  }
  const writes = await fake({ tls: false, hangUpRequests: 1 });
  try {
    await assert.rejects(writes.client(TEST_RETRY).request('POST', '/api/v1/namespaces', { body: '{}' }), (e: unknown) => {
      assert.ok(e instanceof KubeError && e.kind === 'network', String(e));
      return true;
    });
    assert.deepEqual(writes.requests, ['POST'], 'a write that may have been applied is not sent again');
  } finally {
    await writes.close();
  }
  const svm = await fake({ tls: false, hangUpRequests: 1 });
  try {
    await assert.rejects(svm.client(SVM_RETRY).request('GET', '/api'), /socket hang up|ECONNRESET/);
    assert.deepEqual(svm.requests, ['GET']);
  } finally {
    await svm.close();
  }
});

void test('5xx and 429 on a read: retried by the tests as svm retries 429; a write answered 503 is not sent again', async () => {
  let n = 0;
  const f = await fake({
    tls: false,
    handler: (req, res) => {
      req.resume();
      n++;
      const code = n === 1 ? 503 : n === 2 ? 429 : 200;
      res.writeHead(code, { 'Content-Type': 'application/json', ...(code === 429 ? { 'Retry-After': '0' } : {}) });
      res.end(code === 200 ? '{}' : JSON.stringify({ kind: 'Status', code }));
    },
  });
  try {
    assert.equal((await f.client(TEST_RETRY).request('GET', '/api')).status, 200);
    assert.deepEqual(f.requests, ['GET', 'GET', 'GET']);
    n = 0;
    await assert.rejects(f.client(TEST_RETRY).request('POST', '/api/v1/namespaces', { body: '{}' }), (e: unknown) => {
      assert.ok(e instanceof KubeError && e.kind === 'unavailable', String(e));
      return true;
    });
    assert.deepEqual(f.requests.slice(3), ['POST']);
  } finally {
    await f.close();
  }
});

void test('retryDelayMs: bounded by the policy, 250 ms times the attempt, Retry-After for 429 (at most 10 s)', () => {
  const unsent = new KubeError('network', 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443');
  const reset = new KubeError('network', 'ECONNRESET: socket hang up');
  const throttled = new KubeError('throttled', 'TooManyRequests', 429, 30);
  const unavailable = new KubeError('unavailable', 'ServiceUnavailable', 503);
  const conflict = new KubeError('conflict', 'Conflict', 409);
  assert.deepEqual(
    [1, 2, 3, 4].map((a) => retryDelayMs(SVM_RETRY, 'PATCH', a, unsent)),
    [250, 500, 750, undefined],
  );
  assert.equal(retryDelayMs(SVM_RETRY, 'GET', 1, reset), undefined, "svm's activities retry a read that may have been sent");
  assert.equal(retryDelayMs(SVM_RETRY, 'GET', 1, throttled), 10_000);
  assert.equal(retryDelayMs(TEST_RETRY, 'GET', 5, reset), 1250);
  assert.equal(retryDelayMs(TEST_RETRY, 'GET', 6, unavailable), undefined);
  assert.equal(retryDelayMs(TEST_RETRY, 'POST', 1, reset), undefined);
  assert.equal(retryDelayMs(TEST_RETRY, 'POST', 1, unavailable), undefined);
  assert.equal(retryDelayMs(TEST_RETRY, 'GET', 1, conflict), undefined);
  assert.equal(retryDelayMs(TEST_RETRY, 'DELETE', 9, unsent), 2250);
});

/** What kube-apiserver's storage version precondition filter answers a write while it has not yet published its StorageVersions. */
const PENDING_503 = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: 'wait for storage version registration to complete for resource: namespaces, last seen error: <nil>',
  reason: 'ServiceUnavailable',
  code: 503,
});

/** What its WithWaitGroup filter answers once it is shutting down (with Retry-After: 1). */
const SHUTTING_DOWN_503 = JSON.stringify({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  message: 'apiserver is shutting down',
  reason: 'ServiceUnavailable',
  code: 503,
});

void test('a write refused in front of every handler (storage versions not yet published, shutting down) is sent again, by svm and by the tests, raw() too; any other 503 on a write is not', async () => {
  let pending = 2;
  let other = 0;
  const f = await fake({
    tls: false,
    handler: (req, res) => {
      req.resume();
      req.on('end', () => {
        if (pending > 0 || other > 0) {
          res.writeHead(503, { 'Content-Type': 'application/json' });
          res.end(
            pending > 0
              ? pending % 2 === 0
                ? PENDING_503
                : SHUTTING_DOWN_503
              : JSON.stringify({ kind: 'Status', status: 'Failure', message: 'etcdserver: leader changed', code: 503 }),
          );
          if (pending > 0) pending--;
          else other--;
          return;
        }
        res.writeHead(201, { 'Content-Type': 'application/json' });
        res.end('{}');
      });
    },
  });
  try {
    assert.equal((await f.client(SVM_RETRY).request('POST', '/api/v1/namespaces', { body: '{}' })).status, 201);
    assert.deepEqual(f.requests, ['POST', 'POST', 'POST'], 'svm: two refusals (one of each), then the write');
    pending = 2;
    assert.equal((await f.client(TEST_RETRY).raw('POST', '/api/v1/namespaces', { body: '{}' })).status, 201);
    assert.deepEqual(f.requests.slice(3), ['POST', 'POST', 'POST'], 'the tests: raw() sends it again too');
    pending = 5;
    const last = await f
      .client(SVM_RETRY)
      .request('PATCH', '/api/v1/namespaces/x', { body: '{}' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(last instanceof KubeError && last.kind === 'unavailable' && last.info.notHandled === 'storageVersionsPending', String(last));
    assert.match(last.message, /^HTTP 503 ServiceUnavailable: the API server has not yet published its storage versions/);
    assert.equal(f.requests.length, 6 + 4, "svm's policy: four attempts, then its caller's retry decides");
    pending = 0;
    other = 1;
    const res = await f.client(TEST_RETRY).raw('POST', '/api/v1/namespaces', { body: '{}' });
    assert.equal(res.status, 503, 'another 503 on a write may have been applied: returned, not sent again');
    assert.equal(f.requests.length, 11);
  } finally {
    await f.close();
  }
});

void test('ensureNamespace: a create whose connection was lost after it was sent is sent again; the 409 of one that had been applied counts as created', async () => {
  // The first create is read and its connection closed: it was applied, so the one sent again meets AlreadyExists.
  const f = await fake({
    tls: false,
    hangUpRequests: 1,
    handler: (req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(409, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', reason: 'AlreadyExists', code: 409 }));
      });
    },
  });
  try {
    await ensureNamespace(f.client(TEST_RETRY), 'ns-a');
    assert.deepEqual(f.requests, ['POST', 'POST']);
  } finally {
    await f.close();
  }
});

void test('createObjects: an object whose create lost its connection after it was applied is sent again and counts once created', async () => {
  const seen = new Set<string>();
  let hangUps = 1;
  const f = await fake({
    tls: false,
    handler: (req, res) => {
      req.resume();
      req.on('end', () => {
        const again = seen.has(req.url!);
        seen.add(req.url!);
        if (req.url!.includes('/widgets') && hangUps > 0) {
          hangUps--;
          req.socket.destroy(); // applied (seen), then the connection went
          return;
        }
        // Each answer closes its connection: the hang-up is then on a fresh one (not the idle-close race the
        // client itself sends again), as when an API server goes away mid-request.
        res.writeHead(again ? 409 : 201, { 'Content-Type': 'application/json', Connection: 'close' });
        res.end(again ? JSON.stringify({ kind: 'Status', reason: 'AlreadyExists', code: 409 }) : '{}');
      });
    },
  });
  try {
    const crd = testCrd('retry.svm.example', 'widgets', 'Widget');
    await createObjects(f.client(TEST_RETRY), crd, 'v1', 1, { namespace: 'ns-b' });
    assert.deepEqual(f.requests, ['POST', 'POST', 'POST'], 'the namespace, the object, the object again');
    // A 409 on a first attempt is an object that was there before: still refused.
    await assert.rejects(createObjects(f.client(TEST_RETRY), crd, 'v1', 1, { namespace: 'ns-b' }), (e: unknown) => {
      assert.ok(e instanceof KubeError && e.kind === 'conflict', String(e));
      return true;
    });
  } finally {
    await f.close();
  }
});
