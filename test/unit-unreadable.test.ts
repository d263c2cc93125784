/**
 * A resource whose objects the API servers cannot convert (its CRD's
 * conversion webhook is down) fails its migration after a bounded time,
 * naming the webhook's error; any other error, and the same error before the
 * bound, stays with the activity's retries.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONVERSION_FAILURE_BOUND_MS, unreadable } from '../src/activities/migrate-chunk';
import { classifyResponse, KubeError } from '../src/kube/errors';

// What the API server answers a list whose objects its CRD's webhook cannot convert (the webhook is down).
const conversion = classifyResponse(
  500,
  JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    message:
      'conversion webhook for widgets.x.svm.test/v1, Kind=Widget failed: Post "https://198.18.1.1:4443/convert?timeout=30s": dial tcp 198.18.1.1:4443: connect: connection refused',
    reason: 'InternalError',
    code: 500,
  }),
);

void test('the error is classified as a failed conversion, naming the kind, not quoting the server', () => {
  const wrapped = classifyResponse(
    500,
    JSON.stringify({
      kind: 'Status',
      message:
        'object not decodable revision=503: conversion webhook for a.svm.test/v1, Kind=Widget failed: Post "https://x/convert": dial tcp',
      reason: 'InternalError',
      code: 500,
    }),
  );
  assert.equal(wrapped.info.conversionFailed, 'a.svm.test/v1, Kind=Widget');
  const listed = classifyResponse(
    500,
    JSON.stringify({
      kind: 'Status',
      message: 'unable to convert list: conversion webhook for a.svm.test/v1, Kind=Widget failed: connection refused',
      code: 500,
    }),
  );
  assert.equal(listed.info.conversionFailed, 'a.svm.test/v1, Kind=Widget');
  // Not the server's text: a 4xx that quotes it (an admission webhook's message) is not a conversion failure.
  assert.equal(
    classifyResponse(400, JSON.stringify({ kind: 'Status', message: 'x: conversion webhook for a.b/v1, Kind=W failed', code: 400 })).info
      .conversionFailed,
    undefined,
  );
  assert.equal(conversion.kind, 'unavailable');
  assert.equal(conversion.info.conversionFailed, 'widgets.x.svm.test/v1, Kind=Widget');
  assert.equal(conversion.message, 'HTTP 500 InternalError: the conversion webhook for widgets.x.svm.test/v1, Kind=Widget failed');
});

void test('a failing conversion webhook fails the migration once retried past the bound, naming it', () => {
  assert.equal(unreadable(conversion, 'listing widgets.x.svm.test', CONVERSION_FAILURE_BOUND_MS - 1), undefined);
  const f = unreadable(conversion, 'listing widgets.x.svm.test', CONVERSION_FAILURE_BOUND_MS + 5_000);
  assert.ok(f);
  assert.equal(f.type, 'ConversionWebhookFailed');
  assert.equal(f.nonRetryable, true);
  assert.equal(
    f.message,
    'listing widgets.x.svm.test: the API servers cannot convert its objects (tried for 65s): HTTP 500 InternalError: the conversion webhook for widgets.x.svm.test/v1, Kind=Widget failed',
  );
});

void test('other errors are left to the retries, however long they last', () => {
  assert.equal(
    unreadable(new KubeError('unavailable', 'etcdserver: leader changed', 500), 'w', 10 * CONVERSION_FAILURE_BOUND_MS),
    undefined,
  );
  assert.equal(unreadable(new KubeError('forbidden', 'conversion webhook denied', 403), 'w', 10 * CONVERSION_FAILURE_BOUND_MS), undefined);
  assert.equal(unreadable(new KubeError('unavailable', 'HTTP 500 InternalError', 500), 'w', 10 * CONVERSION_FAILURE_BOUND_MS), undefined);
  assert.equal(unreadable(new Error('conversion webhook'), 'w', 10 * CONVERSION_FAILURE_BOUND_MS), undefined);
});
