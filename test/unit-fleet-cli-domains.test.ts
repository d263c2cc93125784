/**
 * `svm fleet` with trust domains (src/client/cli-fleet-domains.ts, src/client/fleet.ts, docs/fleet.md "Trust
 * domains"): the file a command reads (--domains over SVM_FLEET_DOMAINS), the one loader's refusals naming where
 * the file was given, each cluster's registration read in its own domain's namespace (one of the same name
 * elsewhere not listed), pin and forget acting there, and what `svm fleet migrate` refuses before anything starts.
 * Temporal is stood in for by a client per namespace answering list and describe from a table of registrations.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { FleetDomains } from '../src/config/fleet-domains';
import { TemporalSettings } from '../src/config/temporal';
import { checkNamedInDomains, domainsFileOf } from '../src/client/cli-fleet-domains';
import { clustersTable, domainClusterForm, dryRunTable } from '../src/client/cli-fleet';
import { Fleet, type RegisteredCluster } from '../src/client/fleet';
import { clusterRegistrationId } from '../src/contract/fleet';
import { planCampaign } from '../src/client/fleet-check';

const settings = TemporalSettings.parse({ address: '127.0.0.1:7233', namespace: 'fleet', taskQueue: 'svm' });
const dir = mkdtempSync(path.join(tmpdir(), 'svm-fleet-cli-domains-'));
const config = {
  domains: [
    { name: 'team-a', namespace: 'ns-a', clusters: ['a1', 'a2'] },
    { name: 'team-b', namespace: 'ns-b', clusters: ['b1'], taskQueue: 'svm-b' },
  ],
};

/** A namespace's registrations: name -> uid. */
type Registry = Record<string, string>;

/** A stand-in client of one namespace: list answers its registrations (the query recorded), describe each one's memo. */
function standIn(namespace: string, registry: Registry, queries: string[]): Client {
  const entry = (name: string) => ({
    workflowId: clusterRegistrationId(name),
    status: { name: 'RUNNING' },
    memo: { uid: registry[name] },
    typedSearchAttributes: { get: () => undefined },
  });
  return {
    options: { namespace },
    workflow: {
      list: ({ query }: { query: string }) => {
        queries.push(`${namespace}: ${query}`);
        return (async function* () {
          for (const name of Object.keys(registry)) yield entry(name);
        })();
      },
      getHandle: (id: string) => ({
        describe: () => {
          const name = Object.keys(registry).find((n) => clusterRegistrationId(n) === id);
          return name ? Promise.resolve(entry(name)) : Promise.reject(new WorkflowNotFoundError('not found', id, undefined));
        },
      }),
    },
  } as unknown as Client;
}

/** A Fleet over stand-in namespaces: the fleet's own, and each domain's, its client handed out by the domains. */
function fleetOver(namespaces: Record<string, Registry>, withDomains: boolean) {
  const queries: string[] = [];
  const clients = Object.fromEntries(Object.entries(namespaces).map(([ns, r]) => [ns, standIn(ns, r, queries)]));
  const domains = withDomains ? FleetDomains.of(config, settings, '--domains') : undefined;
  if (domains) domains.client = (name: string) => Promise.resolve(clients[domains.domain(name).namespace]!);
  const FleetCtor = Fleet as unknown as new (c: Client, q: string, conn: unknown, d?: FleetDomains) => Fleet;
  return { fleet: new FleetCtor(clients.fleet!, 'svm-fleet', { close: () => Promise.resolve() }, domains), queries };
}

const namespaces = {
  fleet: { a1: 'forged-in-fleet', zz: 'u-zz' },
  'ns-a': { a1: 'u-a1', a2: 'u-a2', b1: 'forged-in-a' },
  'ns-b': { b1: 'u-b1' },
};

void test('--domains FILE over SVM_FLEET_DOMAINS; neither: one namespace', () => {
  assert.deepEqual(domainsFileOf('/f.json', { SVM_FLEET_DOMAINS: '/e.json' }), { file: '/f.json', source: '--domains' });
  assert.deepEqual(domainsFileOf(undefined, { SVM_FLEET_DOMAINS: '/e.json' }), { file: '/e.json', source: 'SVM_FLEET_DOMAINS' });
  assert.equal(domainsFileOf(undefined, {}), undefined);
});

void test('the one loader refuses a malformed file, or a cluster in two domains, naming where the file was given', () => {
  const twice = path.join(dir, 'twice.json');
  writeFileSync(
    twice,
    JSON.stringify({
      domains: [
        { name: 'x', namespace: 'n1', clusters: ['c'] },
        { name: 'y', namespace: 'n2', clusters: ['c'] },
      ],
    }),
  );
  assert.throws(() => FleetDomains.load(twice, settings, '--domains'), /^Error: --domains: cluster "c" is in two domains \(x and y\)$/);
  const bad = path.join(dir, 'bad.json');
  writeFileSync(bad, '{"domains": [');
  assert.throws(() => FleetDomains.load(bad, settings, '--domains'), /^Error: --domains: .*bad\.json is not JSON/);
  const unknown = path.join(dir, 'unknown.json');
  writeFileSync(unknown, JSON.stringify({ domains: [{ name: 'x', namespace: 'n1', clusters: ['c'], credential: 'k' }] }));
  assert.throws(() => FleetDomains.load(unknown, settings), /^Error: SVM_FLEET_DOMAINS: domains\.0: .*credential/);
  assert.throws(() => FleetDomains.load(path.join(dir, 'none.json'), settings, '--domains'), /--domains: cannot read .*none\.json: ENOENT/);
});

void test("with domains, every domain's clusters, each read in its own namespace; a registration outside its domain is not listed", async () => {
  const { fleet, queries } = fleetOver(namespaces, true);
  const listed = await fleet.clusters("MigrationKubeVersions = 'v1.36.3'");
  assert.deepEqual(
    listed.map((c) => [c.name, c.domain, c.uid]),
    [
      ['a1', 'team-a', 'u-a1'],
      ['a2', 'team-a', 'u-a2'],
      ['b1', 'team-b', 'u-b1'],
    ],
    "b1's forged registration in ns-a and the fleet namespace's a1 and zz are not listed",
  );
  // `--where` is asked of each domain's namespace, never of the fleet's.
  assert.deepEqual(
    queries.map((q) => q.split(':')[0]),
    ['ns-a', 'ns-b'],
  );
  assert.ok(queries.every((q) => q.includes("AND (MigrationKubeVersions = 'v1.36.3')")));
  // A cluster's pin is its domain's.
  assert.equal((await fleet.pinOf('b1'))?.uid, 'u-b1');
  assert.equal((await fleet.pinOf('a1'))?.uid, 'u-a1');
  await assert.rejects(fleet.pinOf('zz'), /cluster "zz" is in no trust domain of --domains \(domains: team-a, team-b\)/);
  assert.equal(fleet.domainOf('b1')?.namespace, 'ns-b');
  await fleet.close();
});

void test('without domains nothing changes: the one namespace is listed and read', async () => {
  const { fleet, queries } = fleetOver(namespaces, false);
  assert.deepEqual(
    (await fleet.clusters()).map((c) => [c.name, c.domain, c.uid]),
    [
      ['a1', undefined, 'forged-in-fleet'],
      ['zz', undefined, 'u-zz'],
    ],
  );
  assert.deepEqual(
    queries.map((q) => q.split(':')[0]),
    ['fleet'],
  );
  assert.equal((await fleet.pinOf('zz'))?.uid, 'u-zz');
  assert.equal(fleet.domainOf('zz'), undefined);
});

void test('svm fleet migrate with domains: a name in no domain is refused; one not registered in its own domain is refused unless --include-unregistered', async () => {
  const { fleet } = fleetOver(namespaces, true);
  const registered = await fleet.clusters();
  const domains = fleet.domains!;
  assert.throws(
    () => checkNamedInDomains(['a1', 'zz'], domains, registered),
    /^Error: a cluster named is in no trust domain of --domains: "zz" \(domains: team-a \[2 clusters\], team-b \[1 clusters\]\)\. No campaign was started/,
  );
  assert.throws(() => checkNamedInDomains(['zz'], domains, registered, { includeUnregistered: true }), /in no trust domain/);
  // b1 registered in ns-a (a forgery, or a worker in the wrong namespace) does not make b1 registered: only ns-b counts.
  const withoutB = registered.filter((c) => c.name !== 'b1');
  withoutB.push({ name: 'b1', servers: [], kubeVersions: [], domain: 'team-a' });
  assert.throws(
    () => checkNamedInDomains(['a1', 'b1'], domains, withoutB),
    /^Error: a cluster named is not registered in its domain: "b1" \(domain team-b, namespace ns-b\)\. No campaign was started/,
  );
  checkNamedInDomains(['a1', 'b1'], domains, withoutB, { includeUnregistered: true });
  checkNamedInDomains(['a1', 'a2', 'b1'], domains, registered);
  // The plan (and --dry-run's table) over every domain's registrations, each with its domain.
  const planned = planCampaign({ clusters: ['b1'], canary: 'b1', parallel: 2 }, registered, registered.slice(0, 2));
  assert.deepEqual(
    planned.map((p) => [p.name, p.wave, p.registration?.domain]),
    [
      ['b1', 0, 'team-b'],
      ['a1', 1, 'team-a'],
      ['a2', 1, 'team-a'],
    ],
  );
  const table = dryRunTable('c1', { migrate: 'all', canary: 'b1' }, planned);
  assert.match(table, /WAVE {2}CLUSTER {2}DOMAIN {2}UID/);
  assert.match(table, /^ {3}0 {2}b1 {7}team-b {2}u-b1 /m);
});

void test('svm fleet clusters with domains: a DOMAIN column after CLUSTER', () => {
  const rows: RegisteredCluster[] = [
    { name: 'a1', uid: 'u-a1', servers: [], kubeVersions: ['v1.37.0'], domain: 'team-a' },
    { name: 'b1', uid: 'u-b1', servers: [], kubeVersions: ['v1.36.3'], domain: 'team-b' },
  ];
  const lines = clustersTable(rows, domainClusterForm).trimEnd().split('\n');
  assert.match(lines[0]!, /^CLUSTER +DOMAIN +UID +IDENTITY +KUBERNETES +SVM +LAST SEEN$/);
  assert.match(lines[2]!, /^b1 +team-b +u-b1 +pinned +v1\.36\.3 /);
  assert.equal(domainClusterForm.name(rows[0]!), 'a1');
  assert.match(clustersTable([], domainClusterForm), /no cluster registered in any trust domain/);
  // Without domains, the table is as before: no DOMAIN column.
  assert.doesNotMatch(clustersTable(rows), /DOMAIN/);
});
