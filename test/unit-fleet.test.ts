/** `svm fleet`: its flags become the campaign's input (bad ones refused before Temporal is asked), and its tables. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from 'commander';
import { campaignInput, campaignTable, clustersTable } from '../src/client/cli-fleet';
import { CampaignInputSchema, type CampaignStatus } from '../src/contract/fleet';
import { buildProgram } from '../cli/svm';

const defaults = { parallel: 2, parallelism: 2, pauseBetweenWaves: 0, unreachableAfter: 60, deadline: 86_400, output: 'text' };

void test('the flags make the input the workflow takes', () => {
  const input = campaignInput('crd-v2', ['widgets.example.com'], {
    ...defaults,
    clusters: ['east', 'west'],
    canary: 'east',
    drop: 'example.com/v1',
    dropWindow: 0,
    maxFailureRatio: 0.1,
  });
  assert.deepEqual(input, {
    clusters: ['east', 'west'],
    migrate: ['widgets.example.com'],
    dropCheck: 'example.com/v1',
    dropCheckWindowSeconds: 0,
    canary: 'east',
    parallel: 2,
    parallelism: 2,
    pauseBetweenWavesSeconds: 0,
    maxFailureRatio: 0.1,
    unreachableAfterSeconds: 60,
    deadlineSeconds: 86_400,
  });
  assert.ok(CampaignInputSchema.safeParse(input).success);
  const all = campaignInput('to-1.37', [], { ...defaults, all: true, where: "MigrationKubeVersions = 'v1.36.3'" });
  assert.equal(all.migrate, 'all');
  assert.equal(all.where, "MigrationKubeVersions = 'v1.36.3'");
  assert.ok(CampaignInputSchema.safeParse(all).success);
});

void test('bad flags are refused, each with its reason', () => {
  const refused = (name: string, resources: string[], o: Partial<Parameters<typeof campaignInput>[2]>, why: RegExp) =>
    assert.throws(
      () => campaignInput(name, resources, { ...defaults, ...o }),
      (e: unknown) => e instanceof InvalidArgumentError && why.test(e.message),
    );
  refused('c', [], { clusters: ['a'] }, /name the resources .* or --all/);
  refused('c', ['secrets'], { clusters: ['a'], all: true }, /not both/);
  refused('c', ['secrets'], {}, /--clusters a,b\) or a query/);
  refused('C!', ['secrets'], { clusters: ['a'] }, /a campaign name is/);
  refused('c', ['secrets'], { clusters: ['a'], canary: 'Not_A_Name' }, /--canary: a cluster name is a DNS label/);
  refused('c', ['secrets'], { clusters: ['a'], dropWindow: 5 }, /--drop-window goes with --drop/);
});

void test('commander refuses a bad cluster list and a ratio out of range, before the action runs', async () => {
  for (const [args, why] of [
    [['--clusters', 'east,West'], /--clusters: a cluster name is a DNS label.*"West"/],
    [['--clusters', 'east', '--max-failure-ratio', '1.5'], /--max-failure-ratio must be between 0 and 1/],
    [['--clusters', 'east', '--parallel', '0'], /--parallel must be between 1 and 100/],
  ] as const) {
    const program = buildProgram().exitOverride();
    const fleet = program.commands.find((c) => c.name() === 'fleet')!;
    let err = '';
    for (const c of [program, fleet, ...fleet.commands])
      c.exitOverride().configureOutput({ writeErr: (s) => (err += s), writeOut: () => {} });
    await assert.rejects(program.parseAsync(['node', 'svm', 'fleet', 'migrate', 'c', 'secrets', ...args]));
    assert.match(err, why);
  }
});

void test("the campaign's table: a line per cluster, then notes and failures", () => {
  const s: CampaignStatus = {
    name: 'crd-v2',
    phase: 'DeadlineExceeded',
    wave: 1,
    rows: [
      {
        cluster: 'east',
        phase: 'Succeeded',
        wave: 0,
        reachable: true,
        resources: { asked: 1, succeeded: 1 },
        objects: 300,
        failures: [],
        drop: { groupVersion: 'example.com/v1', verdict: 'Ready', exitCode: 0 },
      },
      {
        cluster: 'west',
        phase: 'Failed',
        wave: 1,
        reachable: true,
        resources: { asked: 2, succeeded: 1 },
        objects: 12,
        failures: [{ resource: 'secrets', reason: 'Forbidden' }],
        note: '1 migration(s) did not succeed',
      },
    ],
  };
  assert.equal(
    campaignTable(s),
    [
      'campaign crd-v2: DeadlineExceeded, wave 1',
      'CLUSTER  PHASE      WAVE  MIGRATED  OBJECTS  DROP',
      'east     Succeeded     0  1/1           300  Ready (example.com/v1)',
      'west     Failed        1  1/2            12  -',
      'west: 1 migration(s) did not succeed',
      'west: secrets failed: Forbidden',
      '',
    ].join('\n'),
  );
  assert.match(clustersTable([]), /no cluster registered/);
  assert.equal(
    clustersTable([
      { name: 'east', uid: 'u-1', servers: [], kubeVersions: ['v1.36.3', 'v1.37.2'], running: true, lastSeen: '2026-12-04T00:00:00.000Z' },
    ]),
    'CLUSTER  UID  KUBERNETES       SVM  LAST SEEN\neast     u-1  v1.36.3,v1.37.2  -    2026-12-04T00:00:00.000Z\n',
  );
});
