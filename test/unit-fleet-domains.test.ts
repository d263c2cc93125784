/**
 * The fleet's trust domains configuration (src/activities/fleet-domains.ts, SVM_FLEET_DOMAINS): what is accepted, what is
 * refused before the worker starts, and that without it the fleet is one namespace.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { FleetDomains } from '../src/activities/fleet-domains';
import { TemporalSettings } from '../src/config/temporal';

const fleet = TemporalSettings.parse({ address: '127.0.0.1:7233', namespace: 'fleet', taskQueue: 'svm' });
const dir = mkdtempSync(path.join(tmpdir(), 'svm-domains-unit-'));

void test('a domains file binds each cluster to one domain, its task queue defaulting to the fleet worker’s', () => {
  const d = FleetDomains.of(
    {
      domains: [
        { name: 'team-a', namespace: 'ns-a', clusters: ['a1', 'a2'], apiKeyFile: '/x' },
        { name: 'team-b', namespace: 'ns-b', clusters: ['b1'], taskQueue: 'other' },
      ],
    },
    fleet,
  );
  assert.deepEqual(d.domainOf('a2'), { name: 'team-a', namespace: 'ns-a', taskQueue: 'svm', clusters: ['a1', 'a2'] });
  assert.equal(d.domainOf('b1')?.taskQueue, 'other');
  assert.equal(d.domainOf('c'), undefined, 'a cluster in no domain');
  assert.deepEqual(
    d.all.map((x) => x.name),
    ['team-a', 'team-b'],
  );
});

void test('refused before anything starts, with the reason: a cluster in two domains, two domains on one namespace, the fleet’s own namespace, a certificate without its key, unknown fields', () => {
  const cases: Array<[unknown, RegExp]> = [
    [
      {
        domains: [
          { name: 'x', namespace: 'n1', clusters: ['c'] },
          { name: 'y', namespace: 'n2', clusters: ['c'] },
        ],
      },
      /cluster "c" is in two domains \(x and y\)/,
    ],
    [
      {
        domains: [
          { name: 'x', namespace: 'n1', clusters: ['c'] },
          { name: 'y', namespace: 'n1', clusters: ['d'] },
        ],
      },
      /domains "x" and "y" are one namespace \(n1\)/,
    ],
    [{ domains: [{ name: 'x', namespace: 'fleet', clusters: ['c'] }] }, /is the fleet's own namespace \(fleet\)/],
    [{ domains: [{ name: 'x', namespace: 'n1', clusters: ['c'], tlsCert: '/c' }] }, /tlsCert and tlsKey go together/],
    [{ domains: [{ name: 'x', namespace: 'n1', clusters: ['c'], token: 'inline' }] }, /SVM_FLEET_DOMAINS: domains\.0: /],
    [{ domains: [] }, /SVM_FLEET_DOMAINS: domains: /],
    [{ domains: [{ name: 'X_', namespace: 'n1', clusters: ['c'] }] }, /a domain name is a DNS label/],
  ];
  for (const [config, expected] of cases) assert.throws(() => FleetDomains.of(config, fleet), expected);
});

void test('SVM_FLEET_DOMAINS names a JSON file; unset, the fleet is one namespace (undefined); unreadable or not JSON, refused', () => {
  assert.equal(FleetDomains.fromEnv({}, fleet), undefined);
  const good = path.join(dir, 'good.json');
  writeFileSync(good, JSON.stringify({ domains: [{ name: 'x', namespace: 'n1', clusters: ['c'] }] }));
  assert.equal(FleetDomains.fromEnv({ SVM_FLEET_DOMAINS: good }, fleet)?.domainOf('c')?.namespace, 'n1');
  const bad = path.join(dir, 'bad.json');
  writeFileSync(bad, '{ not json');
  assert.throws(() => FleetDomains.fromEnv({ SVM_FLEET_DOMAINS: bad }, fleet), /bad\.json is not JSON/);
  assert.throws(() => FleetDomains.fromEnv({ SVM_FLEET_DOMAINS: path.join(dir, 'none.json') }, fleet), /cannot read .*none\.json: ENOENT/);
});

void test('a client of a domain not configured is refused with the reason', async () => {
  const d = FleetDomains.of({ domains: [{ name: 'x', namespace: 'n1', clusters: ['c'] }] }, fleet);
  await assert.rejects(d.client('y'), /no domain "y" in the fleet's configuration/);
  assert.throws(() => d.domain('y'), /no domain "y"/);
});
