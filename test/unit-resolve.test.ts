/**
 * Unit tests of src/kube/resolve.ts: turning what a person types into one
 * discovered resource, and refusing what cannot be migrated. Uses a
 * hand-made discovery array: no cluster, no network.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  groupsNamedBy,
  InvalidResourceError,
  matchDiscovering,
  matchResource,
  notMigratableReason,
  throughVersion,
} from '../src/kube/resolve';
import { matchExact } from '../src/kube/resolve-exact';
import { migratableResources } from '../src/client';
import { storageVersionHashOf } from '../src/kube/agreement';
import type { DiscoveredResource, KubeClient } from '../src/kube/client';
import { resourceNameRefusal } from '../src/api/resource';

const CRUD = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function r(
  group: string,
  version: string,
  preferred: boolean,
  fields: Partial<DiscoveredResource> & { name: string; kind: string },
): DiscoveredResource {
  return {
    namespaced: true,
    verbs: CRUD,
    storageVersionHash: `hash-${fields.name}-${group}-${version}`,
    ...fields,
    group,
    version,
    preferred,
  };
}

const discovery: DiscoveredResource[] = [
  // core v1
  r('', 'v1', true, { name: 'secrets', singularName: 'secret', kind: 'Secret' }),
  r('', 'v1', true, { name: 'configmaps', singularName: 'configmap', kind: 'ConfigMap', shortNames: ['cm'] }),
  r('', 'v1', true, { name: 'pods', singularName: 'pod', kind: 'Pod', shortNames: ['po'] }),
  r('', 'v1', true, {
    name: 'pods/status',
    singularName: '',
    kind: 'Pod',
    verbs: ['get', 'patch', 'update'],
    storageVersionHash: undefined,
  }),
  r('', 'v1', true, { name: 'pods/log', singularName: '', kind: 'Pod', verbs: ['get'], storageVersionHash: undefined }),
  r('', 'v1', true, { name: 'events', singularName: 'event', kind: 'Event', shortNames: ['ev'] }),
  r('', 'v1', true, { name: 'namespaces', singularName: 'namespace', kind: 'Namespace', namespaced: false, shortNames: ['ns'] }),
  r('', 'v1', true, {
    name: 'namespaces/finalize',
    singularName: '',
    kind: 'Namespace',
    namespaced: false,
    verbs: ['update'],
    storageVersionHash: undefined,
  }),
  // events.k8s.io v1
  r('events.k8s.io', 'v1', true, { name: 'events', singularName: 'event', kind: 'Event', shortNames: ['ev'] }),
  // apps
  r('apps', 'v1', true, { name: 'deployments', singularName: 'deployment', kind: 'Deployment', shortNames: ['deploy'] }),
  r('apps', 'v1', true, {
    name: 'deployments/scale',
    singularName: '',
    kind: 'Scale',
    group: 'autoscaling',
    verbs: ['get', 'patch', 'update'],
    storageVersionHash: undefined,
  }),
  // a CRD with two versions; v2 is preferred
  r('example.com', 'v1', false, {
    name: 'widgets',
    singularName: 'widget',
    kind: 'Widget',
    shortNames: ['wd'],
    storageVersionHash: 'widget-hash',
  }),
  r('example.com', 'v2', true, {
    name: 'widgets',
    singularName: 'widget',
    kind: 'Widget',
    shortNames: ['wd'],
    storageVersionHash: 'widget-hash',
  }),
  // two groups sharing the short name "gz"
  r('alpha.example.org', 'v1', true, { name: 'gizmos', singularName: 'gizmo', kind: 'Gizmo', shortNames: ['gz'] }),
  r('beta.example.org', 'v1', true, { name: 'gadgetzs', singularName: 'gadgetz', kind: 'Gadgetz', shortNames: ['gz'] }),
  // not persisted: no storageVersionHash, create only
  r('authentication.k8s.io', 'v1', true, {
    name: 'tokenreviews',
    singularName: 'tokenreview',
    kind: 'TokenReview',
    namespaced: false,
    verbs: ['create'],
    storageVersionHash: undefined,
  }),
  // persisted, get/list but no update
  r('readonly.example.com', 'v1', true, { name: 'reports', singularName: 'report', kind: 'Report', verbs: ['get', 'list', 'watch'] }),
  // persisted, get/update but no list
  r('nolist.example.com', 'v1', true, { name: 'things', singularName: 'thing', kind: 'Thing', verbs: ['get', 'update'] }),
  // persisted, create only
  r('createonly.example.com', 'v1', true, { name: 'stamps', singularName: 'stamp', kind: 'Stamp', verbs: ['create'] }),
];

function pick(input: string): { name: string; group: string; version: string } {
  const m = matchResource(input, discovery);
  return { name: m.name, group: m.group, version: m.version };
}

/** Asserts that input is refused with an InvalidResourceError whose message matches every pattern. */
function refused(input: string, ...patterns: RegExp[]): string {
  let caught: unknown;
  try {
    matchResource(input, discovery);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof InvalidResourceError, `"${input}" is refused with an InvalidResourceError (got ${String(caught)})`);
  assert.equal(caught.name, 'InvalidResourceError');
  for (const p of patterns) assert.match(caught.message, p, `message for "${input}"`);
  return caught.message;
}

// --- matching ---------------------------------------------------------------------------

void test('matchResource: plural, singular, Kind and short name of a core resource', () => {
  for (const input of ['secrets', 'secret', 'Secret', 'SECRETS'])
    assert.deepEqual(pick(input), { name: 'secrets', group: '', version: 'v1' }, input);
  for (const input of ['configmaps', 'configmap', 'ConfigMap', 'cm', 'CM'])
    assert.deepEqual(pick(input), { name: 'configmaps', group: '', version: 'v1' }, input);
  assert.deepEqual(pick('pods'), { name: 'pods', group: '', version: 'v1' });
  assert.deepEqual(pick('po'), { name: 'pods', group: '', version: 'v1' });
});

void test('matchResource: surrounding whitespace is ignored', () => {
  assert.deepEqual(pick('  secrets \n'), { name: 'secrets', group: '', version: 'v1' });
});

void test('matchResource: returns the discovered entry itself with its fields', () => {
  const m = matchResource('cm', discovery);
  assert.equal(m.kind, 'ConfigMap');
  assert.equal(m.namespaced, true);
  assert.equal(m.storageVersionHash, 'hash-configmaps--v1');
  assert.ok(discovery.includes(m));
});

void test('matchResource: core version named explicitly (secrets.v1)', () => {
  assert.deepEqual(pick('secrets.v1'), { name: 'secrets', group: '', version: 'v1' });
});

void test('matchResource: deployments, deployments.apps, deployments.v1.apps, Deployment, deploy', () => {
  for (const input of [
    'deployments',
    'deployments.apps',
    'deployments.v1.apps',
    'Deployment',
    'deployment.apps',
    'deploy',
    'deploy.apps',
    'Deployment.v1.apps',
  ]) {
    assert.deepEqual(pick(input), { name: 'deployments', group: 'apps', version: 'v1' }, input);
  }
});

void test('matchResource: a group that does not serve the resource is unknown', () => {
  refused('deployments.batch', /unknown/);
  refused('deployments.v2.apps', /unknown/);
  refused('secrets.apps', /unknown/);
});

void test('matchResource: widgets.example.com picks the preferred version v2', () => {
  assert.deepEqual(pick('widgets.example.com'), { name: 'widgets', group: 'example.com', version: 'v2' });
  assert.deepEqual(pick('widgets'), { name: 'widgets', group: 'example.com', version: 'v2' });
  assert.deepEqual(pick('Widget'), { name: 'widgets', group: 'example.com', version: 'v2' });
  assert.deepEqual(pick('wd'), { name: 'widgets', group: 'example.com', version: 'v2' });
});

void test('matchResource: widgets.v1.example.com picks the explicit version v1, widgets.v2.example.com v2', () => {
  assert.deepEqual(pick('widgets.v1.example.com'), { name: 'widgets', group: 'example.com', version: 'v1' });
  assert.deepEqual(pick('widget.v1.example.com'), { name: 'widgets', group: 'example.com', version: 'v1' });
  assert.deepEqual(pick('widgets.v2.example.com'), { name: 'widgets', group: 'example.com', version: 'v2' });
  refused('widgets.v3.example.com', /unknown/);
});

void test('matchResource: events in core and events.k8s.io: the core group wins, like kubectl', () => {
  assert.deepEqual(pick('events'), { name: 'events', group: '', version: 'v1' });
  assert.deepEqual(pick('events.events.k8s.io'), { name: 'events', group: 'events.k8s.io', version: 'v1' });
  assert.deepEqual(pick('events.v1.events.k8s.io'), { name: 'events', group: 'events.k8s.io', version: 'v1' });
});

void test('matchResource: singular, Kind and short name of events also resolve to the core group, like kubectl', () => {
  // `kubectl get event`, `kubectl get Event` and `kubectl get ev` all list core events.
  const got: Record<string, unknown> = {};
  for (const input of ['event', 'Event', 'ev']) {
    try {
      got[input] = pick(input);
    } catch (err) {
      got[input] = (err as Error).message;
    }
  }
  const core = { name: 'events', group: '', version: 'v1' };
  assert.deepEqual(got, { event: core, Event: core, ev: core });
});

void test('matchResource: cluster-scoped core resource and its short name', () => {
  const m = matchResource('ns', discovery);
  assert.equal(m.name, 'namespaces');
  assert.equal(m.namespaced, false);
});

// --- refusals --------------------------------------------------------------------------

void test('matchResource: an unknown name is refused with a message saying unknown', () => {
  const msg = refused('frobnicators', /unknown resource "frobnicators"/);
  assert.doesNotMatch(msg, /subresource/);
  refused('frobnicators.example.com', /unknown resource "frobnicators\.example\.com"/);
});

void test('matchResource: a subresource (pods/status, pods/log) is refused, naming the resource to migrate instead', () => {
  refused('pods/status', /subresource/, /"pods"/);
  refused('pods/log', /subresource/, /"pods"/);
  refused('deployments.apps/scale', /subresource/);
});

void test('matchResource: a bare subresource name is unknown, with a hint that it is only a subresource', () => {
  refused('status', /unknown/, /only a subresource/, /pods\/status/);
  refused('log', /unknown/, /pods\/log/);
  refused('finalize', /unknown/, /namespaces\/finalize/);
});

void test('matchResource: an ambiguous short name is refused, listing every candidate', () => {
  const msg = refused('gz', /ambiguous/, /gizmos\.alpha\.example\.org/, /gadgetzs\.beta\.example\.org/);
  // The message suggests naming the group.
  assert.match(msg, /group/);
});

void test('matchResource: naming the group resolves the ambiguous short name', () => {
  assert.deepEqual(pick('gz.alpha.example.org'), { name: 'gizmos', group: 'alpha.example.org', version: 'v1' });
  assert.deepEqual(pick('gz.beta.example.org'), { name: 'gadgetzs', group: 'beta.example.org', version: 'v1' });
  assert.deepEqual(pick('gizmos'), { name: 'gizmos', group: 'alpha.example.org', version: 'v1' });
});

void test('matchResource: empty or blank input is refused', () => {
  refused('', /no resource/);
  refused('   ', /no resource/);
});

void test('matchResource: an empty discovery refuses everything as unknown', () => {
  assert.throws(
    () => matchResource('secrets', []),
    (err: unknown) => err instanceof InvalidResourceError && /unknown/.test(err.message),
  );
});

// --- migratability -----------------------------------------------------------------------

void test('notMigratableReason: ordinary persisted resources are migratable', () => {
  for (const input of ['secrets', 'cm', 'deployments.apps', 'widgets.example.com', 'widgets.v1.example.com', 'ns', 'events']) {
    assert.equal(notMigratableReason(matchResource(input, discovery)), undefined, input);
  }
});

void test('notMigratableReason: tokenreviews is not persisted (no storageVersionHash)', () => {
  const m = matchResource('tokenreviews', discovery);
  assert.equal(m.group, 'authentication.k8s.io');
  const reason = notMigratableReason(m);
  assert.ok(reason, 'tokenreviews is refused');
  assert.match(reason, /not persisted/);
  assert.match(reason, /tokenreviews\.authentication\.k8s\.io/);
  assert.match(reason, /storageVersionHash/);
});

void test('notMigratableReason: a resource with get/list but no update names the missing verb', () => {
  const reason = notMigratableReason(matchResource('reports', discovery));
  assert.ok(reason);
  assert.match(reason, /reports\.readonly\.example\.com/);
  assert.match(reason, /update/);
  assert.doesNotMatch(reason, /list/);
});

void test('notMigratableReason: a resource without list names list', () => {
  const reason = notMigratableReason(matchResource('things', discovery));
  assert.ok(reason);
  assert.match(reason, /does not support list/);
  assert.doesNotMatch(reason, /update/);
});

void test('notMigratableReason: a persisted resource with only create names both list and patch', () => {
  const reason = notMigratableReason(matchResource('stamps', discovery));
  assert.ok(reason);
  assert.match(reason, /list and patch \(or update\)/);
});

void test('notMigratableReason: a subresource entry is refused, naming its parent with the group', () => {
  const status = discovery.find((d) => d.name === 'pods/status')!;
  const reason = notMigratableReason(status);
  assert.ok(reason);
  assert.match(reason, /subresource/);
  assert.match(reason, /"pods"/);
  const scale = discovery.find((d) => d.name === 'deployments/scale')!;
  // The entry's own group field is overwritten by the group it was discovered in (apps).
  assert.equal(scale.group, 'apps');
  assert.match(notMigratableReason(scale)!, /"deployments\.apps"/);
});

void test('notMigratableReason: a core resource label has no group suffix', () => {
  const noUpdate: DiscoveredResource = { ...discovery.find((d) => d.name === 'secrets')!, verbs: ['get', 'list'] };
  const reason = notMigratableReason(noUpdate);
  assert.ok(reason);
  assert.match(reason, /^secrets cannot be migrated/);
});

// The version a resource is listed and rewritten through: the one its objects are stored in, when served.
const storedInV1 = (['v1', 'v2', 'v3'] as const).map((v) =>
  r('stored.example.com', v, v === 'v3', {
    name: 'sprockets',
    singularName: 'sprocket',
    kind: 'Sprocket',
    // What kube-apiserver serves for every version of a resource stored in v1 (k8s.io/apiserver StorageVersionHash).
    storageVersionHash: storageVersionHashOf('stored.example.com', 'v1', 'Sprocket'),
  }),
);

void test('throughVersion: the version the resource is stored in when served, not the preferred one', () => {
  assert.equal(throughVersion(storedInV1)?.version, 'v1');
  // The stored version not served (any more): the preferred version, else the first.
  assert.equal(throughVersion(storedInV1.filter((x) => x.version !== 'v1'))?.version, 'v3');
  assert.equal(throughVersion(storedInV1.filter((x) => x.version === 'v2'))?.version, 'v2');
  // A hash that names no served version (the fixtures' made-up ones): the preferred version.
  assert.equal(throughVersion(discovery.filter((x) => x.name === 'widgets'))?.version, 'v2');
});

void test('resolution picks the stored version: matchResource, matchExact and migratableResources alike; an explicit version stays', () => {
  const all = [...discovery, ...storedInV1];
  for (const typed of ['sprockets.stored.example.com', 'sprockets', 'Sprocket'])
    assert.equal(matchResource(typed, all).version, 'v1', typed);
  assert.equal(matchResource('sprockets.v2.stored.example.com', all).version, 'v2');
  assert.equal(matchExact({ group: 'stored.example.com', resource: 'sprockets' }, all).version, 'v1');
  assert.equal(matchExact({ group: 'stored.example.com', resource: 'sprockets', version: 'v3' }, all).version, 'v3');
  const listed = migratableResources(all).filter((x) => x.name === 'sprockets');
  assert.deepEqual(
    listed.map((x) => x.version),
    ['v1'],
  );
  // Resources whose hash names none of their versions keep the preferred one.
  assert.equal(migratableResources(all).find((x) => x.name === 'widgets')?.version, 'v2');
});

void test('groupsNamedBy: the groups a typed name can resolve in; none for a bare name or a subresource', () => {
  assert.deepEqual(groupsNamedBy('secrets'), []);
  assert.deepEqual(groupsNamedBy('deployments/scale'), []);
  assert.deepEqual(groupsNamedBy('deployments.apps'), ['apps']);
  assert.deepEqual(groupsNamedBy(' Widgets.Example.com '), ['example.com']);
  assert.deepEqual(groupsNamedBy('widgets.v2.example.com'), ['v2.example.com', 'example.com']);
  assert.deepEqual(groupsNamedBy('widgets.v1beta1.example.com'), ['v1beta1.example.com', 'example.com']);
  assert.deepEqual(groupsNamedBy('pods.v1'), ['v1', '']);
});

void test('resolution through the discovery of the named groups alone chooses, and refuses, exactly as against the whole discovery', async () => {
  const calls = { whole: 0, groups: [] as string[] };
  const kube = {
    discover: async () => {
      calls.whole++;
      return discovery;
    },
    discoverGroup: async (group: string) => {
      calls.groups.push(group);
      return discovery.filter((d) => d.group === group);
    },
  } as unknown as KubeClient;
  /** What a match chose, or its refusal's message, for comparing the two ways of resolving. */
  const outcome = async (f: () => DiscoveredResource | Promise<DiscoveredResource>) => {
    try {
      const m = await f();
      return `${m.group}/${m.version}/${m.name}`;
    } catch (err) {
      assert.ok(err instanceof InvalidResourceError, String(err));
      return `refused: ${err.message}`;
    }
  };
  const named = [
    'deployments.apps',
    'widgets.example.com',
    'widgets.v1.example.com',
    'wd.example.com',
    'pods.v1',
    'events.events.k8s.io',
    'gz.alpha.example.org',
    'reports.readonly.example.com',
  ];
  for (const input of [
    ...named,
    'secrets',
    'cm',
    'gz',
    'events',
    'widgets.nosuch.example',
    'scale.apps',
    'pods/status',
    'widgets.v3.example.com',
  ]) {
    calls.whole = 0;
    calls.groups = [];
    const got = await outcome(() => matchDiscovering(kube, groupsNamedBy(input), (d) => matchResource(input, d)));
    assert.equal(got, await outcome(() => matchResource(input, discovery)), input);
    assert.equal(calls.whole, named.includes(input) ? 0 : 1, `${input}: the whole discovery only when the named groups do not resolve it`);
    assert.deepEqual(calls.groups, groupsNamedBy(input), input);
  }
  // The exact form: the group alone, the whole discovery only to word a refusal (its hint).
  for (const spec of [
    { group: 'apps', resource: 'deployments' },
    { group: '', resource: 'secrets' },
    { group: 'example.com', resource: 'widgets', version: 'v1' },
    { group: 'example.com', resource: 'widget' },
    { group: '', resource: 'deployments' },
  ]) {
    calls.whole = 0;
    const got = await outcome(() => matchDiscovering(kube, [spec.group], (d) => matchExact(spec, d)));
    assert.equal(got, await outcome(() => matchExact(spec, discovery)), JSON.stringify(spec));
    assert.equal(calls.whole, got.startsWith('refused') ? 1 : 0, JSON.stringify(spec));
  }
});

void test('a name that cannot name a resource is refused before anything is reached (resourceNameRefusal)', () => {
  assert.match(resourceNameRefusal('') ?? '', /no resource given/);
  assert.match(resourceNameRefusal('  ') ?? '', /no resource given/);
  assert.match(resourceNameRefusal('Secrets!!') ?? '', /"Secrets!!" is not a resource name/);
  assert.match(resourceNameRefusal('deployments/scale') ?? '', /subresource; migrate the resource "deployments"/);
  for (const ok of [
    'secrets',
    'Secret',
    'deploy',
    'deployments.apps',
    'deployments.v1.apps',
    'widgets.example.com',
    'crontabs.stable-x.io',
  ])
    assert.equal(resourceNameRefusal(ok), undefined, ok);
});
