/**
 * Unit tests of the kube client's request loop against a local HTTP server
 * that answers what an API server under API Priority and Fairness answers:
 * 429 with Retry-After before the real answer. Every "find, or undefined"
 * read goes through the same loop as a plain read, so a throttled lookup is
 * asked again instead of failing a command (CI saw `svm migrate` fail on one
 * 429 while resolving a custom resource). And what each request of a
 * migrated resource asks for (its Accept, as sent): metadata only on every
 * path but the PUT, and no fallback that asks for content.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { outcomeOf, refusesPatch } from '../src/activities/chunk/rewrite-one';
import type { ResourceRef } from '../src/api/resource';
import { countObjects } from '../src/kube/plan';
import { METADATA_ONLY_ACCEPT, METADATA_ONLY_LIST_ACCEPT, type DiscoveredResource, type KubeClient } from '../src/kube/client';
import { fakeApi } from './helpers/fake-api';
import { KubeError } from '../src/kube/errors';
import { findMigrationObject } from '../src/kube/migrations';
import { deleteLease } from '../src/kube/leases';
import { latestResourceVersion, NO_NAMESPACE } from '../src/kube/standard-migrations';
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

const secrets: ResourceRef = {
  group: '',
  version: 'v1',
  resource: 'secrets',
  kind: 'Secret',
  namespaced: true,
  storageVersionHash: '',
  custom: false,
};
const discovered: DiscoveredResource = {
  name: 'secrets',
  namespaced: true,
  kind: 'Secret',
  verbs: ['list', 'patch'],
  group: '',
  version: 'v1',
  preferred: true,
};
const listed = { namespace: 'ns', name: 's', resourceVersion: '7' };
/** What must never reach the worker but where it asked for content. */
const VALUE = 'c2VjcmV0LXZhbHVl';

/** The parts of an Accept header that ask for an object or list whole (no `as=PartialObjectMetadata...`). */
const contentParts = (accept: string) => accept.split(',').filter((part) => !/;as=PartialObjectMetadata(List)?(;|$)/.test(part));

/**
 * An API server of one Secret that negotiates the reply as k8s.io/apiserver does: the first part of the Accept it
 * can answer, else 406 (`metadata`: whether it can answer with metadata only). Records each request's Accept.
 */
async function withNegotiatingServer(
  metadata: boolean,
  fn: (kube: KubeClient, seen: Array<{ request: string; accept: string }>) => Promise<void>,
) {
  const seen: Array<{ request: string; accept: string }> = [];
  const { kube, close } = await fakeApi((req, res) => {
    const accept = req.headers.accept ?? '';
    seen.push({ request: `${req.method} ${req.url}`, accept });
    const list = req.method === 'GET';
    const asMetadata = metadata && accept.split(',').some((part) => part.includes(';as=PartialObjectMetadata'));
    const status = asMetadata || contentParts(accept).length > 0 ? 200 : 406;
    const meta = { name: 's', namespace: 'ns', resourceVersion: req.method === 'GET' ? '7' : '8' };
    const object = asMetadata
      ? { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: meta }
      : { kind: 'Secret', apiVersion: 'v1', metadata: meta, data: { value: VALUE } };
    const body =
      status === 406
        ? { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotAcceptable', code: 406 }
        : list
          ? {
              kind: asMetadata ? 'PartialObjectMetadataList' : 'SecretList',
              apiVersion: asMetadata ? 'meta.k8s.io/v1' : 'v1',
              metadata: { resourceVersion: '42' },
              items: [object],
            }
          : object;
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  try {
    await fn(kube, seen);
  } finally {
    await close();
  }
}

void test('metadata only, as sent: the list page, the re-encode and its reply, the count, the resourceVersion of the resource', async () => {
  await withNegotiatingServer(true, async (kube, seen) => {
    const items: unknown[] = [];
    await kube.listEach(secrets, { limit: 500 }, (o) => void items.push(o));
    assert.deepEqual(items, [listed]);
    assert.equal(await kube.reencode(secrets, listed), '8');
    assert.deepEqual(await countObjects(kube, discovered), { objects: 1 });
    assert.equal(await latestResourceVersion(kube, secrets), '42');
    assert.deepEqual(seen, [
      { request: 'GET /api/v1/secrets?limit=500', accept: METADATA_ONLY_LIST_ACCEPT },
      { request: 'PATCH /api/v1/namespaces/ns/secrets/s?fieldManager=svm', accept: METADATA_ONLY_ACCEPT },
      { request: 'GET /api/v1/secrets?limit=1', accept: METADATA_ONLY_LIST_ACCEPT },
      { request: `GET /api/v1/namespaces/${encodeURIComponent(NO_NAMESPACE)}/secrets?limit=1`, accept: METADATA_ONLY_LIST_ACCEPT },
    ]);
    assert.deepEqual(
      seen.flatMap((s) => contentParts(s.accept)),
      [],
      'no request asks for content',
    );
  });
});

void test('a server that cannot answer with metadata only refuses each request (406), and none asks again for content: the patch is refused as the PUT fallback expects', async () => {
  await withNegotiatingServer(false, async (kube, seen) => {
    const refused = (on: 'patch' | 'list') => (e: unknown) => e instanceof KubeError && e.status === 406 && refusesPatch(e, on);
    await assert.rejects(
      kube.listEach(secrets, { limit: 500 }, () => undefined),
      refused('list'),
    );
    const error = await kube.reencode(secrets, listed).then(
      () => assert.fail('the re-encode was answered'),
      (e: unknown) => e,
    );
    assert.ok(refused('patch')(error), String(error));
    assert.equal(
      outcomeOf({ error: error as KubeError, seconds: 0 }, listed, secrets, 'patch', { attempt: 1, throttled: 0 }).kind,
      'patchRefused',
    );
    assert.deepEqual(await countObjects(kube, discovered), { objects: null, note: 'the server refuses a metadata-only list' });
    assert.equal(await latestResourceVersion(kube, secrets), undefined);
    assert.equal(seen.length, 4, `one request per path, none asked again: ${seen.map((s) => s.request).join(', ')}`);
    assert.deepEqual(
      seen.flatMap((s) => contentParts(s.accept)),
      [],
      'no request asks for content',
    );
  });
});

void test('the PUT fallback is the one path that asks for content: its list whole, its reply metadata only where the server can', async () => {
  for (const metadata of [true, false])
    await withNegotiatingServer(metadata, async (kube, seen) => {
      const items: Array<{ raw?: string }> = [];
      await kube.listEach(secrets, { limit: 500, content: true }, (o) => void items.push(o));
      assert.match(items[0]?.raw ?? '', new RegExp(VALUE), 'listed with content');
      assert.equal(await kube.putAsListed(secrets, { ...listed, raw: items[0]!.raw }), '8');
      assert.deepEqual(
        seen.map((s) => [s.request, contentParts(s.accept)]),
        [
          ['GET /api/v1/secrets?limit=500', ['application/json']],
          ['PUT /api/v1/namespaces/ns/secrets/s?fieldManager=svm', ['application/json']],
        ],
      );
      assert.ok(seen[1]!.accept.startsWith(METADATA_ONLY_ACCEPT), 'the reply asked as metadata first');
    });
});

void test('a re-encode whose reply is the object (a server that ignored the Accept) is refused, without quoting it', async () => {
  const { kube, close } = await fakeApi((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Secret', apiVersion: 'v1', metadata: { name: 's', resourceVersion: '8' }, data: { value: VALUE } }));
  });
  try {
    await assert.rejects(
      kube.reencode(secrets, listed),
      (e: unknown) =>
        e instanceof KubeError &&
        /the server answered Secret where metadata only was asked for/.test(e.message) &&
        !e.message.includes(VALUE),
    );
  } finally {
    await close();
  }
});

void test("a DELETE's body reaches the server framed: deleteLease's precondition is read, and the next request on the connection is whole", async () => {
  const bodies: string[] = [];
  const api = await fakeApi((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      bodies.push(`${req.method} ${req.url} ${body}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', status: 'Success' }));
    });
  });
  try {
    assert.equal(await deleteLease(api.kube, 'svm-system', 'svm-leader', '42'), true);
    // The same kept-alive connection: before the fix, the DELETE's unframed body was read as the start of this one.
    assert.equal((await api.kube.raw('GET', '/api/v1/namespaces/svm-system')).status, 200);
    assert.deepEqual(bodies, [
      'DELETE /apis/coordination.k8s.io/v1/namespaces/svm-system/leases/svm-leader {"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"resourceVersion":"42"}}',
      'GET /api/v1/namespaces/svm-system ',
    ]);
  } finally {
    await api.close();
  }
});
