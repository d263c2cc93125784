/**
 * A resource whose objects the API servers cannot convert (its CRD's
 * conversion webhook is down) fails its migration after a bounded time,
 * naming the webhook's error; any other error, and the same error before the
 * bound, stays with the activity's retries.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONVERSION_FAILURE_BOUND_MS, unreadable } from '../src/activities/migrate-chunk';
import { KubeError } from '../src/kube/errors';

const conversion = new KubeError(
  'unavailable',
  'conversion webhook for widgets.x.svm.test/v1, Kind=Widget failed: Post "https://198.18.1.1:4443/convert": connection refused',
  500,
);

void test('a failing conversion webhook fails the migration once retried past the bound, naming it', () => {
  assert.equal(unreadable(conversion, 'widgets.x.svm.test', CONVERSION_FAILURE_BOUND_MS - 1), undefined);
  const f = unreadable(conversion, 'widgets.x.svm.test', CONVERSION_FAILURE_BOUND_MS + 5_000);
  assert.ok(f);
  assert.equal(f.type, 'ConversionWebhookFailed');
  assert.equal(f.nonRetryable, true);
  assert.match(
    f.message,
    /^listing widgets\.x\.svm\.test: the API servers cannot convert its objects \(tried for 65s\): conversion webhook for/,
  );
});

void test('other errors are left to the retries, however long they last', () => {
  assert.equal(unreadable(new KubeError('unavailable', 'etcdserver: leader changed', 500), 'w', 10 * CONVERSION_FAILURE_BOUND_MS), undefined);
  assert.equal(unreadable(new KubeError('forbidden', 'conversion webhook denied', 403), 'w', 10 * CONVERSION_FAILURE_BOUND_MS), undefined);
  assert.equal(unreadable(new Error('conversion webhook'), 'w', 10 * CONVERSION_FAILURE_BOUND_MS), undefined);
});
