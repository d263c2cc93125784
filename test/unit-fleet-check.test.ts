/** What `svm fleet migrate` refuses before anything starts, the order `--dry-run` prints (src/client/fleet-check.ts), and when a worker reports its cluster again (reportUnchanged). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nearNames, planCampaign } from '../src/client/fleet-check';
import { campaignInput, dryRunTable } from '../src/client/cli-fleet';
import type { RegisteredCluster } from '../src/client/fleet';
import { reportUnchanged } from '../src/kube/cluster-identity';
import { probeWait } from '../src/workflows/campaign';

const reg = (name: string, extra: Partial<RegisteredCluster> = {}): RegisteredCluster => ({
  name,
  uid: `uid-${name}`,
  servers: [],
  kubeVersions: ['v1.37.2'],
  ...extra,
});
const registered = ['east', 'west', 'north', 'prod-eu-1', 'prod-eu-2'].map((n) => reg(n));
const flags = { parallel: 2, parallelism: 2, pauseBetweenWaves: 0, unreachableAfter: 60, deadline: 86_400, output: 'text' };

void test('a named cluster not registered is refused with the names it may have meant, and nothing else is planned', () => {
  assert.throws(
    () => planCampaign({ clusters: ['east', 'eats', 'prod-eu-3'] }, registered, undefined),
    (err: Error) => {
      assert.match(err.message, /not registered in this Temporal namespace/);
      assert.match(err.message, /"eats" \(did you mean "east"\?\)/);
      assert.match(err.message, /"prod-eu-3" \(did you mean "prod-eu-1" or "prod-eu-2"\?\)/);
      assert.match(err.message, /5 registered: east, west, north, prod-eu-1, prod-eu-2/);
      assert.match(err.message, /No campaign was started/);
      assert.match(err.message, /--include-unregistered/);
      return true;
    },
  );
  // Asked for explicitly, the unregistered name is planned, with no registration.
  const planned = planCampaign({ clusters: ['east', 'eats'] }, registered, undefined, { includeUnregistered: true });
  assert.deepEqual(
    planned.map((p) => [p.name, p.wave, p.registration?.uid]),
    [
      ['east', 0, 'uid-east'],
      ['eats', 1, undefined],
    ],
  );
});

void test('a query that matches nothing, and a canary outside the set, are refused', () => {
  assert.throws(() => planCampaign({ where: "MigrationKubeVersions = 'v9'" }, registered, []), /matched none of the 5 registered clusters/);
  assert.throws(
    () => planCampaign({ clusters: ['east', 'west'], canary: 'north' }, registered, undefined),
    /--canary north is not one of the campaign's 2 clusters \(east, west\)/,
  );
});

void test("the campaign's order: the named ones in order, then the matched ones by name, each once; the canary first; waves of parallel", () => {
  const planned = planCampaign({ clusters: ['west', 'east'], where: 'x', canary: 'north', parallel: 2 }, registered, [
    reg('prod-eu-2'),
    reg('north'),
    reg('east'),
  ]);
  assert.deepEqual(
    planned.map((p) => `${p.wave}:${p.name}`),
    ['0:north', '1:west', '1:east', '2:prod-eu-2'],
  );
  const text = dryRunTable('c1', { clusters: ['west', 'east'], migrate: 'all', canary: 'north', parallel: 2 } as never, planned);
  assert.match(text, /^campaign c1 \(dry run: nothing started\): 4 clusters; north first, alone, then waves of 2\n/);
  assert.match(text, /\n +0 +north +uid-north +v1\.37\.2 /);
});

void test('near names: within two edits or a prefix, closest first, at most three', () => {
  assert.deepEqual(nearNames('eats', ['east', 'west', 'north']), ['east']);
  assert.deepEqual(nearNames('prod', ['prod-eu-1', 'prod-eu', 'staging']), ['prod-eu', 'prod-eu-1']);
  assert.deepEqual(nearNames('zzzz', ['east', 'west']), []);
});

void test('--drop must be a group/version, refused before anything connects', () => {
  assert.throws(
    () => campaignInput('c1', ['secrets'], { ...flags, clusters: ['east'], drop: 'v1' }),
    /--drop: "v1" is not <group>\/<version>/,
  );
  assert.throws(
    () => campaignInput('c1', ['secrets'], { ...flags, clusters: ['east'], drop: 'example.com/one' }),
    /--drop: "one" is not a Kubernetes API version/,
  );
  assert.equal(campaignInput('c1', ['secrets'], { ...flags, clusters: ['east'], drop: 'example.com/v1' }).dropCheck, 'example.com/v1');
});

void test('a report the registration holds already, and younger than the heartbeat, is not sent again', () => {
  const report = {
    name: 'east',
    uid: 'u-1',
    servers: [{ server: '10.0.0.1:6443', version: 'v1.37.2' }],
    svmVersion: '0.1.0',
    seenAt: '2026-12-07T10:30:00.000Z',
  };
  const memo = { uid: 'u-1', servers: report.servers, svmVersion: '0.1.0', seenAt: '2026-12-07T10:00:00.000Z' };
  assert.equal(reportUnchanged(memo, report), true);
  assert.equal(reportUnchanged({ ...memo, seenAt: '2026-12-07T09:30:00.000Z' }, report), false, 'an hour old: the heartbeat');
  assert.equal(reportUnchanged({ ...memo, uid: 'u-2' }, report), false, 'another uid');
  assert.equal(reportUnchanged({ ...memo, svmVersion: '0.1.1' }, report), false, 'another svm');
  assert.equal(reportUnchanged({ ...memo, servers: [{ server: '10.0.0.1:6443', version: 'v1.36.3' }] }, report), false, 'an upgrade');
  assert.equal(reportUnchanged({ ...memo, servers: [...report.servers, { server: '10.0.0.2:6443', version: 'v1.37.2' }] }, report), false);
  assert.equal(reportUnchanged({ ...memo, conflict: { uid: 'u-9', message: 'm', seenAt: memo.seenAt } }, report), false, 'a conflict open');
  assert.equal(reportUnchanged({ ...memo, seenAt: undefined }, report), false, 'never reported');
});

void test("a campaign's probe of a cluster away waits twice as long each time, from unreachableAfterSeconds to an hour", () => {
  assert.deepEqual(
    [0, 1, 2, 3, 5, 6, 7, 40].map((misses) => probeWait(60_000, misses) / 1000),
    [60, 120, 240, 480, 1920, 3600, 3600, 3600],
  );
  assert.equal(probeWait(7_200_000, 3), 7_200_000, 'never shorter than unreachableAfterSeconds');
  // A day away at the default 60 s: the probes it takes (each about five events of the campaign's history).
  let t = 0;
  let probes = 0;
  while (t < 86_400_000) t += probeWait(60_000, probes++);
  assert.equal(probes, 29);
});
