/**
 * Unit tests of src/kube/errors.ts: how every Kubernetes response and
 * transport error is classified, and which kinds are retried or recorded
 * per object. Pure: no cluster, no network.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { classifyResponse, classifyTransportError, isPerObjectFailure, isRetryable, KubeError, type KubeErrorKind } from '../src/kube/errors';

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
    statusBody(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.', { metadata: { continue: token } }),
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
  assert.equal(classifyResponse(400, statusBody(400, 'BadRequest', 'Admission Webhook "x.y" Denied The Request: nope')).kind, 'webhookDenied');
});

void test('classifyResponse: a webhook that cannot be called is not a denial', () => {
  const m = 'Internal error occurred: failed calling webhook "deny.svm.test": failed to call webhook: Post "https://x/validate": dial tcp 10.0.0.1:443: connect: connection refused';
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
