/**
 * The status mirror never outlives its activity: a StorageVersionMigration
 * status write the API server never answers is given up after the write
 * timeout, the whole report within its budget, and the report returns (the
 * migration goes on; the failure is counted). A fake API server stands in:
 * the bound is pure client-side logic, no real server hangs on demand.
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import { test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../src/activities';
import { RateLimiter } from '../src/kube/rate-limit';
import { createMetrics } from '../src/worker/metrics';
import { fakeApi } from './helpers/fake-api';
import { bounded } from './helpers/waits';

void test('a status write that never answers is given up within the budget; the report returns and counts the failure', async () => {
  const hanging: http.ServerResponse[] = [];
  let patches = 0;
  const api = await fakeApi((req, res) => {
    if (req.method === 'PATCH') {
      patches++;
      hanging.push(res); // never answered
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
  });
  try {
    const metrics = createMetrics();
    const acts = createActivities({ kube: api.kube, budget: new RateLimiter(0), metrics, mirror: { writeTimeoutMs: 300, budgetMs: 1500 } });
    // The writes never answer: only the mirror's own budget (1.5 s here) can end the report. The test's bound is
    // the activity's start-to-close (a minute), past which the report is reported as waited for, not given up.
    const report: { gone: string[] } = await bounded(
      'the status report to give up writes that never answer',
      new MockActivityEnvironment().run(
        acts.reportStatus,
        ['first', 'second', 'third'],
        { phase: 'Running' as const, message: 'running' },
        'widgets.svm.test',
      ),
      60_000,
      () => `${patches} writes sent`,
    );
    assert.deepEqual(report.gone, []);
    assert.ok(patches >= 2, `the first object's write was tried again before the budget ran out (${patches} writes)`);
    const failures = (await metrics.registry.getSingleMetric('svm_status_mirror_failures_total')?.get())?.values[0]?.value;
    // Once the budget is spent the others are given up without a try: each object is counted once.
    assert.equal(failures, 3, 'each object whose status could not be written is counted once');
  } finally {
    for (const r of hanging) r.destroy();
    await api.close();
  }
});
