/**
 * Unit tests of the kube client's request loop against a local HTTP server
 * that answers what an API server under API Priority and Fairness answers:
 * 429 with Retry-After before the real answer. Every "find, or undefined"
 * read goes through the same loop as a plain read, so a throttled lookup is
 * asked again instead of failing a command (CI saw `svm migrate` fail on one
 * 429 while resolving a custom resource).
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import type { KubeClient } from '../src/kube/client';
import { fakeApi } from './helpers/fake-api';
import { KubeError } from '../src/kube/errors';
import { findMigrationObject } from '../src/kube/migrations';
import { throttled, watchForever } from '../src/kube/watch';

/** A server answering 429 (Retry-After 0) `throttle` times per path, then `answer`. */
async function withServer(
  throttle: number,
  answer: (req: http.IncomingMessage) => { status: number; body: unknown },
  fn: (kube: KubeClient, seen: string[]) => Promise<void>,
): Promise<void> {
  const seen: string[] = [];
  const count = new Map<string, number>();
  const { kube, close } = await fakeApi((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const n = (count.get(req.url ?? '') ?? 0) + 1;
    count.set(req.url ?? '', n);
    if (n <= throttle) {
      res.writeHead(429, { 'Retry-After': '0', 'Content-Type': 'text/plain' });
      res.end('Too many requests, please try again later.');
      return;
    }
    const a = answer(req);
    res.writeHead(a.status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(a.body));
  });
  try {
    await fn(kube, seen);
  } finally {
    await close();
  }
}

const notFound = { status: 404, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 } };

void test('isCustomResource: a throttled lookup is asked again, and a 404 after it means not a custom resource', async () => {
  await withServer(
    3,
    () => notFound,
    async (kube, seen) => {
      assert.equal(await kube.isCustomResource('widgets.example.com', 'gadgets'), false);
      assert.equal(seen.length, 4, seen.join('\n'));
    },
  );
  await withServer(
    2,
    () => ({ status: 200, body: { kind: 'CustomResourceDefinition' } }),
    async (kube, seen) => {
      assert.equal(await kube.isCustomResource('example.com', 'gadgets'), true);
      assert.equal(seen.length, 3, seen.join('\n'));
    },
  );
});

void test('a find that is throttled past the bound fails as throttled, never as "not there"', async () => {
  await withServer(
    1000,
    () => notFound,
    async (kube, seen) => {
      await assert.rejects(
        () => findMigrationObject(kube, 'm'),
        (e: unknown) => e instanceof KubeError && e.kind === 'throttled',
      );
      assert.equal(seen.length, 10, 'bounded: ten tries');
    },
  );
});

void test('allow: a listed status is handed back, others still throw classified', async () => {
  await withServer(
    0,
    (req) => (req.url?.startsWith('/gone') ? notFound : { status: 403, body: { kind: 'Status', reason: 'Forbidden', code: 403 } }),
    async (kube) => {
      assert.equal((await kube.request('GET', '/gone', { allow: [404] })).status, 404);
      await assert.rejects(
        () => kube.request('GET', '/secret', { allow: [404] }),
        (e: unknown) => e instanceof KubeError && e.kind === 'forbidden',
      );
    },
  );
});

void test('a watch refused with 429 (API Priority and Fairness) is watched again, not reported as an error', async () => {
  let watches = 0;
  const errors: unknown[] = [];
  const { kube, close } = await fakeApi((req, res) => {
    if (!/[?&]watch=true/.test(req.url ?? '')) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ metadata: { resourceVersion: '7' }, items: [] }));
      return;
    }
    if (++watches === 1) {
      res.writeHead(429, { 'Retry-After': '1', 'Content-Type': 'text/plain' });
      res.end('Too many requests, please try again later.');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } }) + '\n');
  });
  let watch: { stop(): void } | undefined;
  try {
    const seen = await new Promise<unknown>((resolve) => {
      watch = watchForever(kube, '/api/v1/configmaps', {
        onList: () => undefined,
        onEvent: (_type, obj) => resolve(obj),
        onError: (err) => errors.push(err),
      });
    });
    assert.deepEqual(seen, { metadata: { name: 'a' } });
    assert.equal(watches, 2, 'watched again after the 429');
    assert.deepEqual(errors, []);
    assert.ok(throttled(Object.assign(new Error('Too Many Requests'), { statusCode: 429 })));
    assert.ok(throttled(new KubeError('throttled', 'Too Many Requests', 429)));
    assert.ok(!throttled(Object.assign(new Error('Forbidden'), { statusCode: 403 })));
  } finally {
    watch?.stop();
    await close();
  }
});
