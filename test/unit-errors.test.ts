/**
 * Unit tests of src/kube/errors.ts: how every Kubernetes response and
 * transport error is classified, and which kinds are retried or recorded
 * per object. Pure: no cluster, no network.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { isObjectNotFound } from '../src/activities/migrate-chunk';
import { KubeClient, neverSent } from '../src/kube/client';
import { errorLine } from '../src/config/cli-options';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ResourceRef } from '../src/api/resource';
import {
  classifyResponse,
  classifyTransportError,
  isPerObjectFailure,
  isRetryable,
  KubeError,
  type KubeErrorKind,
} from '../src/kube/errors';

/** A metav1.Status body as the API server sends it. */
function statusBody(code: number, reason: string, message: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code, ...extra });
}

const ALL_KINDS: KubeErrorKind[] = [
  'conflict',
  'notFound',
  'gone',
  'throttled',
  'unavailable',
  'timeout',
  'network',
  'unauthorized',
  'forbidden',
  'invalid',
  'badRequest',
  'webhookDenied',
  'methodNotAllowed',
  'other',
];

// --- status code mapping ------------------------------------------------------------

void test('classifyResponse: every status code maps to its kind', () => {
  const cases: Array<[number, string, KubeErrorKind]> = [
    [400, 'BadRequest', 'badRequest'],
    [401, 'Unauthorized', 'unauthorized'],
    [403, 'Forbidden', 'forbidden'],
    [404, 'NotFound', 'notFound'],
    [405, 'MethodNotAllowed', 'methodNotAllowed'],
    [409, 'Conflict', 'conflict'],
    [410, 'Expired', 'gone'],
    [422, 'Invalid', 'invalid'],
    [429, 'TooManyRequests', 'throttled'],
    [500, 'InternalError', 'unavailable'],
    [501, 'NotImplemented', 'unavailable'],
    [502, 'BadGateway', 'unavailable'],
    [503, 'ServiceUnavailable', 'unavailable'],
    [504, 'Timeout', 'timeout'],
    [599, '', 'unavailable'],
    [300, '', 'other'],
    [302, '', 'other'],
    [402, '', 'other'],
    [406, 'NotAcceptable', 'other'],
    [408, '', 'other'],
    [411, '', 'other'],
    [413, 'RequestEntityTooLarge', 'other'],
    [415, 'UnsupportedMediaType', 'other'],
  ];
  for (const [status, reason, kind] of cases) {
    const e = classifyResponse(status, statusBody(status, reason, `message for ${status}`));
    assert.ok(e instanceof KubeError, `${status} gives a KubeError`);
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'KubeError');
    assert.equal(e.kind, kind, `HTTP ${status}`);
    assert.equal(e.status, status, `HTTP ${status} keeps its status`);
    assert.ok(e.message.startsWith(`HTTP ${status}`), `HTTP ${status} leads the message: ${e.message}`);
    assert.ok(!e.message.includes('message for'), `HTTP ${status} never quotes the Status message: ${e.message}`);
  }
});

void test('classifyResponse: 504 is timeout even without a reason, 500 with reason Timeout is timeout', () => {
  assert.equal(classifyResponse(504, '').kind, 'timeout');
  const t = classifyResponse(500, statusBody(500, 'Timeout', 'the server was unable to return a response in the time allotted'));
  assert.equal(t.kind, 'timeout');
  assert.equal(t.status, 500);
  assert.equal(classifyResponse(503, statusBody(503, 'Timeout', 'x')).kind, 'timeout');
  // Other 500 reasons stay unavailable.
  assert.equal(classifyResponse(500, statusBody(500, 'InternalError', 'etcdserver: leader changed')).kind, 'unavailable');
  assert.equal(classifyResponse(500, statusBody(500, 'ServerTimeout', 'x')).kind, 'unavailable');
});

void test('classifyResponse: 503 is unavailable and retryable', () => {
  const e = classifyResponse(503, statusBody(503, 'ServiceUnavailable', 'the server is currently unable to handle the request'));
  assert.equal(e.kind, 'unavailable');
  assert.equal(isRetryable(e.kind), true);
  assert.equal(isPerObjectFailure(e.kind), false);
  assert.equal(e.retryAfterSeconds, undefined);
  const withRetry = classifyResponse(503, '', '3');
  assert.equal(withRetry.kind, 'unavailable');
  assert.equal(withRetry.retryAfterSeconds, 3);
  assert.equal(classifyResponse(504, '', '4').retryAfterSeconds, 4);
});

// --- 410 continue token -----------------------------------------------------------------

void test('classifyResponse: a 410 whose Status has metadata.continue gives continueToken', () => {
  const token = 'eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzLCJzdGFydCI6ImEvYiJ9';
  const e = classifyResponse(
    410,
    statusBody(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.', {
      metadata: { continue: token },
    }),
  );
  assert.equal(e.kind, 'gone');
  assert.equal(e.status, 410);
  assert.equal(e.continueToken, token);
  assert.equal(e.message, 'HTTP 410 Expired');
});

void test('classifyResponse: a 410 without (or with an empty) continue token has none', () => {
  assert.equal(classifyResponse(410, statusBody(410, 'Expired', 'too old')).continueToken, undefined);
  assert.equal(classifyResponse(410, statusBody(410, 'Expired', 'too old', { metadata: { continue: '' } })).continueToken, undefined);
  assert.equal(classifyResponse(410, 'not json').continueToken, undefined);
  assert.equal(classifyResponse(410, 'not json').kind, 'gone');
});

void test('classifyResponse: only a 410 carries the continue token', () => {
  const body = statusBody(500, 'InternalError', 'x', { metadata: { continue: 'tok' } });
  assert.equal(classifyResponse(500, body).continueToken, undefined);
  assert.equal(classifyResponse(409, body).continueToken, undefined);
});

// --- 429 Retry-After ----------------------------------------------------------------------

void test('classifyResponse: 429 with Retry-After: 7 gives 7 seconds', () => {
  const e = classifyResponse(429, statusBody(429, 'TooManyRequests', 'too many requests, please try again later'), '7');
  assert.equal(e.kind, 'throttled');
  assert.equal(e.retryAfterSeconds, 7);
  assert.equal(isRetryable(e.kind), true);
});

void test('classifyResponse: 429 without Retry-After gives 1 second', () => {
  assert.equal(classifyResponse(429, statusBody(429, 'TooManyRequests', 'slow down')).retryAfterSeconds, 1);
  assert.equal(classifyResponse(429, '', undefined).retryAfterSeconds, 1);
  assert.equal(classifyResponse(429, '', '').retryAfterSeconds, 1);
});

void test('classifyResponse: Retry-After given as an array of header values uses the first', () => {
  assert.equal(classifyResponse(429, '', ['7', '9']).retryAfterSeconds, 7);
  assert.equal(classifyResponse(429, '', []).retryAfterSeconds, 1);
});

void test('classifyResponse: a non-numeric Retry-After (HTTP date, negative, fraction) falls back to 1 second for 429', () => {
  assert.equal(classifyResponse(429, '', 'Wed, 21 Oct 2015 07:28:00 GMT').retryAfterSeconds, 1);
  assert.equal(classifyResponse(429, '', '-5').retryAfterSeconds, 1);
  assert.equal(classifyResponse(429, '', '1.5').retryAfterSeconds, 1);
  assert.equal(classifyResponse(429, '', '0').retryAfterSeconds, 0);
  assert.equal(classifyResponse(429, '', '120').retryAfterSeconds, 120);
});

// --- admission webhook denials ------------------------------------------------------------

void test('classifyResponse: an admission webhook denial is webhookDenied whatever the status code', () => {
  const message = 'admission webhook "deny.svm.test" denied the request: no';
  for (const status of [400, 403, 422, 500]) {
    const e = classifyResponse(status, statusBody(status, 'Forbidden', message));
    assert.equal(e.kind, 'webhookDenied', `HTTP ${status}`);
    assert.equal(e.status, status);
    assert.equal(e.message, `HTTP ${status} Forbidden: admission webhook "deny.svm.test" denied the request`);
    assert.equal(e.info.webhook, 'deny.svm.test');
    assert.equal(isPerObjectFailure(e.kind), true);
    assert.equal(isRetryable(e.kind), false);
  }
});

void test('classifyResponse: a webhook denial in a non-JSON body, and with a capitalised message, is still webhookDenied', () => {
  assert.equal(classifyResponse(403, 'admission webhook "deny.svm.test" denied the request: no').kind, 'webhookDenied');
  assert.equal(
    classifyResponse(400, statusBody(400, 'BadRequest', 'Admission Webhook "x.y" Denied The Request: nope')).kind,
    'webhookDenied',
  );
});

void test('classifyResponse: a webhook that cannot be called is not a denial', () => {
  const m =
    'Internal error occurred: failed calling webhook "deny.svm.test": failed to call webhook: Post "https://x/validate": dial tcp 10.0.0.1:443: connect: connection refused';
  const e = classifyResponse(500, statusBody(500, 'InternalError', m));
  assert.equal(e.kind, 'unavailable');
  assert.equal(isRetryable(e.kind), true);
});

// --- non-Status bodies ------------------------------------------------------------------------

void test('classifyResponse: a non-JSON body is never quoted', () => {
  const e = classifyResponse(502, '  <html><body>Bad Gateway</body></html>\n');
  assert.equal(e.kind, 'unavailable');
  assert.equal(e.message, 'HTTP 502 BadGateway: the response is not a Kubernetes Status');
  const long = classifyResponse(500, 'E'.repeat(2000));
  assert.equal(long.message, 'HTTP 500 InternalError: the response is not a Kubernetes Status');
});

void test('classifyResponse: an empty or blank body gives "HTTP <status> <name>"', () => {
  assert.equal(classifyResponse(404, '').message, 'HTTP 404 NotFound');
  assert.equal(classifyResponse(503, '   \n').message, 'HTTP 503 ServiceUnavailable');
  assert.equal(classifyResponse(404, '').kind, 'notFound');
  assert.equal(classifyResponse(418, '').message, 'HTTP 418');
});

void test('classifyResponse: a Status without a message gives its code and reason', () => {
  const e = classifyResponse(409, '{"kind":"Status","code":409}');
  assert.equal(e.kind, 'conflict');
  assert.equal(e.message, 'HTTP 409 Conflict');
});

void test('classifyResponse: 429 says how long to wait, never what the server said', () => {
  const e = classifyResponse(429, statusBody(429, 'TooManyRequests', 'storage is (re)initializing'), '3');
  assert.equal(e.message, 'HTTP 429 TooManyRequests (retry after 3s)');
});

// --- rule 4: nothing a body quotes reaches a message -------------------------------------------

const SECRET = 'hunter2-s3cr3t';
const SECRET_B64 = Buffer.from(SECRET).toString('base64');
const noSecret = (e: KubeError) => {
  for (const n of [SECRET, SECRET_B64, 'hunter2', 'aHVudGVy']) assert.ok(!e.message.includes(n), `"${e.message}" contains ${n}`);
};

void test('rule 4: a webhook that echoes a value in its message, reason and details: only the code and its name', () => {
  // What kube-apiserver returns for a webhook denial: the webhook's Status, its message prefixed by the server.
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `admission webhook "echo.svm.test" denied the request: refusing deny-1: its values are password=${SECRET} (base64 ${SECRET_B64})`,
    reason: `password=${SECRET}`,
    details: {
      name: `password=${SECRET}`,
      kind: SECRET_B64,
      causes: [{ reason: 'FieldValueInvalid', message: SECRET, field: `data.${SECRET}` }],
    },
    code: 403,
  });
  const e = classifyResponse(403, body);
  assert.equal(e.kind, 'webhookDenied');
  assert.equal(e.message, 'HTTP 403 Forbidden: admission webhook "echo.svm.test" denied the request');
  assert.equal(e.info.webhook, 'echo.svm.test');
  assert.equal(e.info.reason, undefined, 'a reason that is not a StatusReason constant is dropped');
  assert.equal(e.info.details, undefined, "a webhook's details are not kept");
  noSecret(e);
  const withoutExplanation = classifyResponse(400, statusBody(400, '', 'admission webhook "a.b.c" denied the request without explanation'));
  assert.equal(withoutExplanation.message, 'HTTP 400 BadRequest: admission webhook "a.b.c" denied the request');
});

void test('rule 4: a 422 that quotes the invalid value keeps the field path and cause type only', () => {
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `Widget.example.com "w-1" is invalid: [spec.password: Invalid value: "${SECRET}": must not look like a password, data.token: Required value]`,
    reason: 'Invalid',
    details: {
      name: 'w-1',
      group: 'example.com',
      kind: 'Widget',
      causes: [
        { reason: 'FieldValueInvalid', message: `Invalid value: "${SECRET}": must not look like a password`, field: 'spec.password' },
        { reason: 'FieldValueRequired', message: 'Required value', field: 'data.token' },
        { reason: 'FieldValueInvalid', message: 'x', field: `data[${SECRET} with spaces]` },
      ],
    },
    code: 422,
  });
  const e = classifyResponse(422, body);
  assert.equal(e.kind, 'invalid');
  assert.equal(e.message, 'HTTP 422 Invalid: spec.password (FieldValueInvalid), data.token (FieldValueRequired), (FieldValueInvalid)');
  noSecret(e);
});

void test('rule 4: many causes are capped', () => {
  const causes = Array.from({ length: 9 }, (_, i) => ({ reason: 'FieldValueInvalid', message: SECRET, field: `spec.f${i}` }));
  const e = classifyResponse(422, statusBody(422, 'Invalid', SECRET, { details: { causes } }));
  assert.equal(
    e.message,
    'HTTP 422 Invalid: spec.f0 (FieldValueInvalid), spec.f1 (FieldValueInvalid), spec.f2 (FieldValueInvalid), spec.f3 (FieldValueInvalid), spec.f4 (FieldValueInvalid), …',
  );
});

void test('rule 4: a ValidatingAdmissionPolicy whose messageExpression quotes a value: only the policy and binding names', () => {
  const message = `secrets "s-1" is forbidden: ValidatingAdmissionPolicy 'no-hunter.svm.test' with binding 'no-hunter-binding' denied request: password is ${SECRET}`;
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: 'Invalid',
    details: { name: 's-1', kind: 'secrets', causes: [{ message }] },
    code: 422,
  });
  const e = classifyResponse(422, body);
  assert.equal(e.kind, 'invalid');
  assert.equal(
    e.message,
    'HTTP 422 Invalid: ValidatingAdmissionPolicy "no-hunter.svm.test" (binding "no-hunter-binding") denied the request',
  );
  noSecret(e);
  const forbidden = classifyResponse(
    403,
    statusBody(403, 'Forbidden', `widgets.example.com "w" is forbidden: ValidatingAdmissionPolicy 'p.example' denied request: ${SECRET}`),
  );
  assert.equal(forbidden.kind, 'forbidden');
  assert.equal(forbidden.message, 'HTTP 403 Forbidden: ValidatingAdmissionPolicy "p.example" denied the request');
});

void test('rule 4: RBAC refusals say (RBAC) and the verb; other 403s only the code', () => {
  const rbac = classifyResponse(
    403,
    statusBody(
      403,
      'Forbidden',
      'secrets "s-1" is forbidden: User "system:serviceaccount:svm:svm" cannot update resource "secrets" in API group "" in the namespace "ns"',
      { details: { name: 's-1', kind: 'secrets' } },
    ),
  );
  assert.equal(rbac.message, 'HTTP 403 Forbidden (RBAC: cannot update)');
  const list = classifyResponse(
    403,
    statusBody(403, 'Forbidden', 'secrets is forbidden: User "x" cannot list resource "secrets" in API group "" at the cluster scope'),
  );
  assert.equal(list.message, 'HTTP 403 Forbidden (RBAC: cannot list)');
  const other = classifyResponse(403, statusBody(403, 'Forbidden', `secrets "s-1" is forbidden: something said ${SECRET}`));
  assert.equal(other.message, 'HTTP 403 Forbidden');
});

void test('rule 4: a quoted value that looks like a webhook denial does not make one', () => {
  const body = statusBody(
    422,
    'Invalid',
    `Secret "s" is invalid: data.x: Invalid value: "admission webhook \\"leak.${SECRET}.io\\" denied the request"`,
    {
      details: { causes: [{ reason: 'FieldValueInvalid', field: 'data.x' }] },
    },
  );
  const e = classifyResponse(422, body);
  assert.equal(e.kind, 'invalid');
  assert.equal(e.message, 'HTTP 422 Invalid: data.x (FieldValueInvalid)');
  noSecret(e);
});

void test('rule 4: resource-level errors keep fixed phrases only', () => {
  const call = classifyResponse(
    500,
    statusBody(
      500,
      'InternalError',
      `Internal error occurred: failed calling webhook "deny.svm.test": failed to call webhook: Post "https://127.0.0.1:1/validate?x=${SECRET}": dial tcp: connection refused`,
    ),
  );
  assert.equal(call.kind, 'unavailable');
  assert.equal(call.message, 'HTTP 500 InternalError: calling admission webhook "deny.svm.test" failed');
  noSecret(call);
  const etcd = classifyResponse(500, statusBody(500, 'InternalError', `etcdserver: request is too large: ${SECRET}`));
  assert.equal(etcd.message, 'HTTP 500 InternalError');
  const odd = classifyResponse(503, statusBody(503, SECRET, SECRET), '2');
  assert.equal(odd.message, 'HTTP 503 ServiceUnavailable (Retry-After 2s)');
  noSecret(odd);
});

// --- 404: the object, or the resource itself -----------------------------------------------------

const widgets: ResourceRef = {
  group: 'example.com',
  version: 'v1',
  resource: 'widgets',
  kind: 'Widget',
  namespaced: true,
  storageVersionHash: '',
  custom: true,
};
const secrets: ResourceRef = {
  group: '',
  version: 'v1',
  resource: 'secrets',
  kind: 'Secret',
  namespaced: true,
  storageVersionHash: '',
  custom: false,
};

// Bodies as kube-apiserver v1.36 returns them (captured by test/test-resource-gone.test.ts).
const DELETED_WIDGET =
  '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.example.com \\"w-000000\\" not found","reason":"NotFound","details":{"name":"w-000000","group":"example.com","kind":"widgets"},"code":404}\n';
/** A custom resource version set served:false, and a deleted CRD: Go's plain-text NotFound, for PUT and LIST alike. */
const VERSION_NOT_SERVED = '404 page not found\n';
/** An unknown group version. */
const DELETED_SECRET =
  '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets \\"gone\\" not found","reason":"NotFound","details":{"name":"gone","kind":"secrets"},"code":404}\n';
const NOT_SERVED =
  '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}\n';

void test('404: a deleted object names itself in details; only then is it the object', () => {
  const w = classifyResponse(404, DELETED_WIDGET);
  assert.equal(w.kind, 'notFound');
  assert.equal(w.message, 'HTTP 404 NotFound');
  assert.deepEqual(w.info.details, { name: 'w-000000', group: 'example.com', kind: 'widgets' });
  assert.equal(isObjectNotFound(w, widgets, { name: 'w-000000' }), true);
  assert.equal(isObjectNotFound(w, widgets, { name: 'w-000001' }), false, 'another name');
  assert.equal(isObjectNotFound(w, { ...widgets, group: 'other.com' }, { name: 'w-000000' }), false, 'another group');
  assert.equal(isObjectNotFound(w, { ...widgets, resource: 'gadgets', kind: 'Gadget' }, { name: 'w-000000' }), false, 'another resource');
  const s = classifyResponse(404, DELETED_SECRET);
  assert.equal(isObjectNotFound(s, secrets, { name: 'gone' }), true);
  assert.equal(isObjectNotFound(s, widgets, { name: 'gone' }), false);
});

void test('404: a version not served, a deleted CRD, an unknown group version are the resource, never an object', () => {
  for (const body of [VERSION_NOT_SERVED, NOT_SERVED]) {
    const e = classifyResponse(404, body);
    assert.equal(e.kind, 'notFound');
    assert.equal(e.info.resourceNotServed, true);
    assert.equal(e.message, 'HTTP 404 NotFound: the requested resource is not served');
    assert.equal(isObjectNotFound(e, widgets, { name: 'w-000000' }), false);
  }
  // An empty, foreign or detail-less 404 names nothing either.
  assert.equal(isObjectNotFound(classifyResponse(404, ''), widgets, { name: 'w' }), false);
  assert.equal(isObjectNotFound(classifyResponse(404, '<html>nginx</html>'), widgets, { name: 'w' }), false);
  assert.equal(isObjectNotFound(classifyResponse(404, statusBody(404, 'NotFound', 'w not found')), widgets, { name: 'w' }), false);
});

// --- transport errors ---------------------------------------------------------------------

function errno(code: string, message: string): NodeJS.ErrnoException {
  const e = new Error(message) as NodeJS.ErrnoException;
  e.code = code;
  return e;
}

void test('classifyTransportError: ECONNRESET, ECONNREFUSED, EPIPE, socket hang up are network errors', () => {
  for (const [code, message] of [
    ['ECONNRESET', 'read ECONNRESET'],
    ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:6443'],
    ['EPIPE', 'write EPIPE'],
    ['ENOTFOUND', 'getaddrinfo ENOTFOUND kube.example'],
  ]) {
    const e = classifyTransportError(errno(code!, message!));
    assert.equal(e.kind, 'network', code);
    assert.equal(e.status, undefined);
    assert.equal(e.message, `${code}: ${message}`);
    assert.equal(isRetryable(e.kind), true);
  }
  const hangUp = classifyTransportError(new Error('socket hang up'));
  assert.equal(hangUp.kind, 'network');
  assert.equal(hangUp.message, 'socket hang up');
});

void test('classifyTransportError: ETIMEDOUT and timeout messages are timeouts', () => {
  const e = classifyTransportError(errno('ETIMEDOUT', 'connect ETIMEDOUT 10.0.0.1:6443'));
  assert.equal(e.kind, 'timeout');
  assert.equal(e.message, 'ETIMEDOUT: connect ETIMEDOUT 10.0.0.1:6443');
  assert.equal(isRetryable(e.kind), true);
  assert.equal(classifyTransportError(new Error('request timeout after 120000ms')).kind, 'timeout');
  assert.equal(classifyTransportError(errno('ESOCKETTIMEDOUT', 'Socket Timeout')).kind, 'timeout');
});

void test('classifyTransportError: a KubeError passes through unchanged', () => {
  const original = new KubeError('conflict', 'changed', 409);
  assert.equal(classifyTransportError(original), original);
});

void test('classifyTransportError: non-Error values do not throw', () => {
  const s = classifyTransportError('boom');
  assert.equal(s.kind, 'network');
  assert.equal(s.message, 'boom');
  assert.equal(classifyTransportError(undefined).kind, 'network');
  assert.equal(classifyTransportError(null).kind, 'network');
  assert.equal(classifyTransportError({ code: 'ECONNRESET' }).kind, 'network');
});

// --- policies ------------------------------------------------------------------------------

void test('isRetryable: exactly throttled, unavailable, timeout and network', () => {
  const retryable = ALL_KINDS.filter(isRetryable).sort();
  assert.deepEqual(retryable, ['network', 'throttled', 'timeout', 'unavailable']);
});

void test('isPerObjectFailure: exactly forbidden, invalid, badRequest and webhookDenied', () => {
  const perObject = ALL_KINDS.filter(isPerObjectFailure).sort();
  assert.deepEqual(perObject, ['badRequest', 'forbidden', 'invalid', 'webhookDenied']);
});

void test('no kind is both retryable and a per-object failure; conflict, notFound, gone are neither', () => {
  for (const k of ALL_KINDS) assert.ok(!(isRetryable(k) && isPerObjectFailure(k)), k);
  for (const k of ['conflict', 'notFound', 'gone', 'unauthorized', 'methodNotAllowed', 'other'] as const) {
    assert.equal(isRetryable(k), false, k);
    assert.equal(isPerObjectFailure(k), false, k);
  }
});

void test('classifyResponse: a 400 that is not a Kubernetes Status (Go net/http or a proxy refused the request) is retried, not a per-object failure', () => {
  const e = classifyResponse(400, '400 Bad Request');
  assert.equal(e.kind, 'network');
  assert.ok(isRetryable(e.kind));
  assert.equal(e.message, 'HTTP 400 BadRequest: the response is not a Kubernetes Status');
  const api = classifyResponse(
    400,
    JSON.stringify({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'BadRequest',
      code: 400,
      message: 'the body is not valid',
    }),
  );
  assert.equal(api.kind, 'badRequest');
});

void test('neverSent: only transport errors that prove the request never reached a server are sent again', () => {
  assert.equal(
    neverSent(
      classifyTransportError(
        Object.assign(new Error('Client network socket disconnected before secure TLS connection was established'), { code: 'ECONNRESET' }),
      ),
    ),
    true,
  );
  assert.equal(
    neverSent(classifyTransportError(Object.assign(new Error('connect ECONNREFUSED 198.18.1.11:6443'), { code: 'ECONNREFUSED' }))),
    true,
  );
  assert.equal(
    neverSent(classifyTransportError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }))),
    false,
    'a reset after sending may have been applied',
  );
});

void test('a Kubernetes API that does not answer is named with its address; a kubeconfig that does not parse, with its file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-kubeconfig-'));
  try {
    const file = path.join(dir, 'config');
    fs.writeFileSync(
      file,
      'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "https://127.0.0.1:2", insecure-skip-tls-verify: true}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n',
    );
    const kube = KubeClient.fromKubeconfig(file, {
      retry: { unsentAttempts: 0, throttledReadAttempts: 0, transientReadAttempts: 0, retryRaw: false },
    });
    const err = await kube.getJson('/version').then(
      () => undefined,
      (e: unknown) => e,
    );
    kube.close();
    assert.match(
      errorLine(err),
      /^error: the Kubernetes API at https:\/\/127\.0\.0\.1:2 did not answer \(.*ECONNREFUSED.*\): check the kubeconfig \(KUBECONFIG or --kubeconfig\)/,
    );
    fs.writeFileSync(file, 'clusters: [\n  - {name: c\n');
    assert.throws(() => KubeClient.fromKubeconfig(file), new RegExp(`^Error: the kubeconfig ${file} could not be read: [^\\n]+$`));
    assert.equal(errorLine(new Error('plain')), 'error: plain\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
