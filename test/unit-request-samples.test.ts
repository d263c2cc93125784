/**
 * The worker's samples of the API servers' request counters (src/kube/request-samples.ts): what is kept, for how
 * long, a restart's counters starting the samples again, and the sampler against fake servers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fixedApiServers } from '../src/kube/apiservers';
import { KubeError } from '../src/kube/errors';
import { readRequestTotals, RequestSamples, requestTotals, startRequestSampler } from '../src/kube/request-samples';
import { fakeApi } from './helpers/fake-api';
import { bounded } from './helpers/waits';

const line = (version: string, resource: string, verb: string, n: number) =>
  `apiserver_request_total{code="200",component="apiserver",dry_run="",group="ex.com",resource="${resource}",scope="resource",subresource="",verb="${verb}",version="${version}"} ${n}`;
const metrics = (v1: number, v2 = 7) =>
  [
    '# HELP apiserver_request_total x',
    line('v1', 'widgets', 'GET', v1),
    line('v1', 'widgets', 'LIST', 1),
    line('v2', 'widgets', 'GET', v2),
    '',
  ].join('\n');
const V1 = { group: 'ex.com', version: 'v1', resource: 'widgets' };

void test('request totals: every verb and code of a group/version/resource together, nothing else', () => {
  const totals = requestTotals(metrics(30) + 'apiserver_longrunning_requests{group="ex.com",resource="widgets",version="v1"} 4\n');
  assert.deepEqual(
    [...totals],
    [
      ['ex.com/v1/widgets', 31],
      ['ex.com/v2/widgets', 7],
    ],
  );
});

void test('samples: the oldest within the day is the one asked for; older ones go; counters that went back start them again', () => {
  const s = new RequestSamples(10_000);
  assert.equal(s.oldest('a', 100), undefined);
  s.add('a', 1_000, requestTotals(metrics(30)));
  s.add('a', 5_000, requestTotals(metrics(35)));
  assert.equal(s.oldest('a', 500), undefined, 'none taken by then');
  assert.equal(s.oldest('a', 1_000)!.requests(V1), 31);
  assert.equal(s.oldest('a', 9_999)!.at, 1_000);
  assert.equal(s.oldest('a', 9_999)!.requests({ ...V1, resource: 'gadgets' }), 0, 'never counted: 0');
  s.add('a', 12_000, requestTotals(metrics(36)));
  assert.equal(s.oldest('a', 20_000)!.at, 5_000, 'the first is more than a day (here 10 s) older than the newest');
  // The server restarted: its counters start from 0, and so do its samples.
  s.add('a', 13_000, requestTotals(metrics(2, 1)));
  assert.equal(s.oldest('a', 20_000)!.at, 13_000);
  assert.equal(s.oldest('a', 20_000)!.requests(V1), 3);
  // A name first seen later is counted from there; each server by itself.
  s.add('b', 14_000, new Map([['ex.com/v1/gadgets', 4]]));
  assert.equal(s.oldest('b', 20_000)!.requests({ ...V1, resource: 'gadgets' }), 4);
  assert.equal(s.oldest('a', 20_000)!.requests({ ...V1, resource: 'gadgets' }), 0);
  s.keepOnly(new Set(['b']));
  assert.equal(s.oldest('a', 20_000), undefined, 'a server no longer found is forgotten');
});

void test("the sampler reads every server's /metrics at once and every period; one that refuses is told, the others sampled", async () => {
  let n = 30;
  const good = await fakeApi((req, res) => {
    assert.equal(req.url, '/metrics');
    res.writeHead(200, { 'content-type': 'text/plain' }).end(metrics(n++));
  });
  const refusing = await fakeApi((_req, res) => {
    res
      .writeHead(403, { 'content-type': 'application/json' })
      .end(JSON.stringify({ kind: 'Status', code: 403, reason: 'Forbidden', message: 'forbidden: /metrics' }));
  });
  const errors: string[] = [];
  const sampler = startRequestSampler(
    fixedApiServers(good.kube, [
      { id: 'a:6443', kube: good.kube },
      { id: 'b:6443', kube: refusing.kube },
    ]),
    { periodMs: 50, onError: (server) => errors.push(server) },
  );
  try {
    await bounded(
      'two samples of a:6443',
      (async () => {
        while (n < 32) await new Promise((r) => setTimeout(r, 10));
      })(),
      5_000,
      () => `${n - 30} read`,
    );
    assert.equal(sampler.samples.oldest('a:6443', Date.now())!.requests(V1), 31, 'the first sample, taken at start');
    assert.equal(sampler.samples.oldest('b:6443', Date.now()), undefined);
    assert.ok(errors.includes('b:6443'));
  } finally {
    sampler.stop();
    await good.close();
    await refusing.close();
  }
});

void test('a /metrics text is read line by line as it arrives: a line cut between chunks is whole, a refusal is a KubeError', async () => {
  const text = metrics(30);
  const api = await fakeApi((req, res) => {
    if (req.url === '/refused') {
      res
        .writeHead(403, { 'content-type': 'application/json' })
        .end(JSON.stringify({ kind: 'Status', code: 403, reason: 'Forbidden', message: 'no' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    // Cut mid-line, in three writes with pauses between them.
    const cuts = [0, 40, 150, text.length];
    let i = 0;
    const next = () => {
      if (i === cuts.length - 1) return void res.end();
      res.write(text.slice(cuts[i], cuts[i + 1]));
      i++;
      setTimeout(next, 20);
    };
    next();
  });
  try {
    const lines: string[] = [];
    await api.kube.eachLine('/metrics', {}, (l) => lines.push(l));
    assert.deepEqual(
      lines,
      text.split('\n').filter((l, i, all) => i < all.length - 1 || l !== ''),
    );
    assert.deepEqual([...(await readRequestTotals(api.kube))], [...requestTotals(text)]);
    await assert.rejects(
      api.kube.eachLine('/refused', {}, () => undefined),
      (err: unknown) => err instanceof KubeError && err.kind === 'forbidden',
    );
  } finally {
    await api.close();
  }
});
