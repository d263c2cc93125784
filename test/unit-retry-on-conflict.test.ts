/**
 * The kube layer's retry helpers (src/kube/retry.ts): retryOnConflict reads again and writes again after a 409,
 * a bounded number of times, and lets every other error through at once; isTransientError is the client's own
 * rule (isRetryable); retryBounded stops at its bound and before its deadline. The StorageState refinement runs
 * on a fake API server that answers its first write 409, to show the second write carries what was read again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyResponse, classifyTransportError, KubeError } from '../src/kube/errors';
import { isConflict, isTransientError, retryBounded, retryOnConflict } from '../src/kube/retry';
import { refineStorageState } from '../src/kube/storage-states';
import { fakeApi } from './helpers/fake-api';

const conflict = () => classifyResponse(409, JSON.stringify({ kind: 'Status', reason: 'Conflict', code: 409 }));

void test('retryOnConflict: a 409 reads again and writes again; the attempt after it succeeds', async () => {
  let reads = 0;
  const writes: number[] = [];
  const result = await retryOnConflict(5, async (attempt) => {
    const resourceVersion = ++reads; // what this attempt read
    writes.push(resourceVersion);
    if (attempt === 1) throw conflict();
    return `written on ${resourceVersion}`;
  });
  assert.equal(result, 'written on 2');
  assert.deepEqual(writes, [1, 2], 'each write carries what its own attempt read');
});

void test('retryOnConflict: gives up after its bound, throwing the last conflict', async () => {
  let attempts = 0;
  await assert.rejects(
    retryOnConflict(5, async () => {
      attempts++;
      throw conflict();
    }),
    (err: unknown) => isConflict(err),
  );
  assert.equal(attempts, 5);
});

void test('retryOnConflict: any other error passes through at once, transient ones too', async () => {
  for (const err of [
    classifyResponse(404, '{"kind":"Status","reason":"NotFound","code":404}'),
    classifyResponse(503, '{"kind":"Status","reason":"ServiceUnavailable","code":503}'),
    new Error('not a KubeError'),
  ]) {
    let attempts = 0;
    await assert.rejects(
      retryOnConflict(5, async () => {
        attempts++;
        throw err;
      }),
      (thrown: unknown) => thrown === err,
    );
    assert.equal(attempts, 1, err.message);
  }
});

void test('isTransientError: network errors, 429, 5xx and timeouts, as the client decides; not a conflict, a refusal or a non-KubeError', () => {
  const transient = [
    classifyResponse(429, '{"kind":"Status","code":429}', '1'),
    classifyResponse(500, '{"kind":"Status","code":500}'),
    classifyResponse(503, '{"kind":"Status","code":503}'),
    classifyResponse(504, '{"kind":"Status","code":504}'),
    classifyTransportError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })),
    classifyTransportError(Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' })),
  ];
  for (const err of transient) assert.equal(isTransientError(err), true, err.message);
  const lasting = [
    conflict(),
    classifyResponse(404, '{"kind":"Status","code":404}'),
    classifyResponse(403, '{"kind":"Status","code":403}'),
    classifyResponse(422, '{"kind":"Status","code":422}'),
    new KubeError('other', 'other'),
    new Error('ECONNRESET'),
    undefined,
  ];
  for (const err of lasting) assert.equal(isTransientError(err), false, String(err));
});

void test('retryBounded: retries what retryIf accepts, stepMs times the attempt apart, at most attempts times, never past until', async () => {
  const unavailable = classifyResponse(503, '{"kind":"Status","code":503}');
  let attempts = 0;
  await assert.rejects(
    retryBounded({ attempts: 3, stepMs: 1 }, async () => {
      attempts++;
      throw unavailable;
    }),
    (err: unknown) => err === unavailable,
  );
  assert.equal(attempts, 3, 'transient errors by default, up to the bound');

  attempts = 0;
  assert.equal(
    await retryBounded({ attempts: 3, stepMs: 1, retryIf: (err) => err instanceof Error }, async (n) => {
      attempts++;
      if (n < 3) throw new Error('again');
      return 'done';
    }),
    'done',
  );
  assert.equal(attempts, 3);

  attempts = 0;
  await assert.rejects(
    retryBounded({ attempts: 10, stepMs: 60_000, until: Date.now() + 1_000 }, async () => {
      attempts++;
      throw unavailable;
    }),
  );
  assert.equal(attempts, 1, 'a wait that would end past until is not made');
});

void test('refineStorageState: a conflict on its write reads the StorageState again and writes on the resourceVersion read', async () => {
  let version = 7;
  const writes: Array<{ precondition: string | undefined }> = [];
  const api = await fakeApi((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            apiVersion: 'migration.k8s.io/v1alpha1',
            kind: 'StorageState',
            metadata: { name: 'widgets.svm.test', resourceVersion: String(version) },
            spec: { resource: { group: 'svm.test', resource: 'widgets' } },
            status: { currentStorageVersionHash: 'abc', persistedStorageVersionHashes: ['Unknown'] },
          }),
        );
        return;
      }
      const precondition = (JSON.parse(body) as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
      writes.push({ precondition });
      if (writes.length === 1) {
        version++; // the trigger's heartbeat wrote in between
        res.writeHead(409, { 'content-type': 'application/json' }).end('{"kind":"Status","reason":"Conflict","code":409}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  try {
    assert.equal(await refineStorageState(api.kube, 'widgets.svm.test', 'abc'), true);
    assert.deepEqual(writes, [{ precondition: '7' }, { precondition: '8' }]);
  } finally {
    await api.close();
  }
});
