/**
 * The drop check's pure rules (src/kube/drop-check.ts, src/contract/drop.ts):
 * the refused inputs, reading request counters from a /metrics text, each
 * check's verdict, how verdicts combine, and the table.
 */
import assert from 'node:assert/strict';
import { RequestSamples, requestTotals } from '../src/kube/request-samples';
import YAML from 'yaml';
import { managedFieldsGrantManifests } from '../src/client/grant';
import type { DiscoveredResource, KubeClient, ListedObject } from '../src/kube/client';
import type { ApiServerSource } from '../src/kube/apiservers';
import { storageVersionHashOf } from '../src/kube/agreement';
import { classifyResponse } from '../src/kube/errors';
import { rewriteManagedFieldsAt } from '../src/kube/managed-fields';
import { test } from 'node:test';
import { dropTable } from '../src/client/drop-report';
import {
  combineVerdicts,
  DropCheckInputSchema,
  DropReportSchema,
  dropExitCode,
  groupVersionRefusal,
  type DropReport,
} from '../src/contract/drop';
import type { Agreement } from '../src/kube/agreement';
import { requestCounts } from '../src/kube/apiserver-metrics';
import {
  checkDrop,
  managedFieldsCheck,
  requestsCheck,
  serverRequests,
  storageVersionCheck,
  type MigrationRecord,
} from '../src/kube/drop-check';

void test('a group version is <group>/<version>; anything else is refused with the reason', () => {
  for (const ok of ['example.com/v1', 'admissionregistration.k8s.io/v1beta1', 'batch/v2alpha1'])
    assert.equal(groupVersionRefusal(ok), undefined, ok);
  assert.match(groupVersionRefusal('v1')!, /is not <group>\/<version>.*core group's v1 cannot be dropped/);
  assert.match(groupVersionRefusal('/v1')!, /"" is not an API group/);
  assert.match(groupVersionRefusal('Example.com/v1')!, /"Example.com" is not an API group/);
  assert.match(groupVersionRefusal('example.com/1')!, /"1" is not a Kubernetes API version/);
  assert.match(groupVersionRefusal('example.com/v1/x')!, /"v1\/x" is not a Kubernetes API version/);
  assert.ok(DropCheckInputSchema.safeParse({ groupVersion: 'example.com/v1' }).success);
  assert.ok(DropCheckInputSchema.safeParse({ groupVersion: 'example.com/v1', requestsWindowSeconds: 0 }).success);
  assert.ok(!DropCheckInputSchema.safeParse({ groupVersion: 'example.com/v1', requestsWindowSeconds: -1 }).success);
  assert.ok(!DropCheckInputSchema.safeParse({ groupVersion: 'example.com/v1', extra: 1 }).success);
  const bad = DropCheckInputSchema.safeParse({ groupVersion: 'v1' });
  assert.ok(!bad.success && bad.error.issues[0]!.message.includes('is not <group>/<version>'));
});

const METRICS = `# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="ex.com",resource="widgets",scope="resource",subresource="",verb="APPLY",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ex.com",resource="widgets",scope="resource",subresource="status",verb="GET",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ex.com",resource="widgets",scope="resource",subresource="",verb="GET",version="v2"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ex.com",resource="gadgets",scope="resource",subresource="",verb="GET",version="v1"} 5
apiserver_longrunning_requests{component="apiserver",group="ex.com",resource="widgets",scope="cluster",subresource="",verb="WATCH",version="v1"} 1
apiserver_requested_deprecated_apis{group="ex.com",removed_release="1.40",resource="widgets",subresource="",version="v1"} 1
`;
const gvr = { group: 'ex.com', version: 'v1', resource: 'widgets' };

void test('request counters: every verb, code and subresource of the group version resource, open watches, the deprecated gauge', () => {
  assert.deepEqual(requestCounts(METRICS, gvr), { requests: 32, open: 1, deprecatedRemovedRelease: '1.40' });
  assert.deepEqual(requestCounts(METRICS, { ...gvr, version: 'v2' }), { requests: 7, open: 0 });
  assert.deepEqual(requestCounts('', gvr), { requests: 0, open: 0 });
});

void test('one server: requests in the window or open now are a client of the version; a counter that went back is unknown', () => {
  const quiet = METRICS.replace(/^apiserver_longrunning_requests.*\n/m, '');
  assert.equal(serverRequests('a:6443', gvr, { id: 'a:6443', text: quiet }, { id: 'a:6443', text: quiet }, 30).verdict, 'Ready');
  const more = quiet.replace('} 30\n', '} 31\n');
  assert.deepEqual(serverRequests('a:6443', gvr, { id: 'a:6443', text: quiet }, { id: 'a:6443', text: more }, 30), {
    server: 'a:6443',
    verdict: 'NotYet',
    requestsInWindow: 1,
    requestsSinceStart: 33,
    open: 0,
    deprecatedRemovedRelease: '1.40',
  });
  assert.equal(serverRequests('a:6443', gvr, { id: 'a:6443', text: METRICS }, { id: 'a:6443', text: METRICS }, 30).verdict, 'NotYet');
  assert.match(
    serverRequests('a:6443', gvr, { id: 'a:6443', text: more }, { id: 'a:6443', text: quiet }, 30).reason!,
    /went back during the window \(the server restarted\)/,
  );
  // Window 0: any request since the server started counts.
  assert.equal(serverRequests('a:6443', gvr, undefined, { id: 'a:6443', text: quiet }, 0).verdict, 'NotYet');
  assert.equal(serverRequests('a:6443', gvr, undefined, { id: 'a:6443', text: '' }, 0).verdict, 'Ready');
  const forbidden = serverRequests('a:6443', gvr, undefined, { id: 'a:6443', error: 'may not read /metrics' }, 0);
  assert.deepEqual([forbidden.verdict, forbidden.reason], ['Unknown', 'may not read /metrics']);
});

void test('the requests check: unknown without per-server addresses, or with fewer addresses than identity leases', () => {
  const ready = serverRequests('a:6443', gvr, undefined, { id: 'a:6443', text: '' }, 0);
  const found = { endpoints: [], identities: ['a'] };
  assert.equal(requestsCheck('ex.com/v1', [ready], 0, found).verdict, 'Ready');
  assert.match(
    requestsCheck('ex.com/v1', [ready], 0, found).reason,
    /^no client used ex.com\/v1 since the servers started: a:6443: 0 requests/,
  );
  assert.equal(requestsCheck('ex.com/v1', [ready], 0, { ...found, identities: ['a', 'b'] }).verdict, 'Unknown');
  const none = requestsCheck('ex.com/v1', [], 0, { endpoints: [], endpointsNote: 'the kubernetes EndpointSlice lists no ready address' });
  assert.equal(none.verdict, 'Unknown');
  assert.match(none.reason, /could not be asked one by one \(the kubernetes EndpointSlice lists no ready address\)/);
});

void test('storage version and managedFields checks', () => {
  const a = (over: Partial<Agreement>): Agreement => ({
    agreed: true,
    verified: true,
    token: 't',
    source: 'discovery',
    checked: 'c',
    servers: [],
    ...over,
  });
  assert.equal(storageVersionCheck('ex.com/v1', a({}), 'ex.com/v2').verdict, 'Ready');
  assert.equal(storageVersionCheck('ex.com/v1', a({}), 'ex.com/v1').verdict, 'NotYet');
  assert.equal(storageVersionCheck('ex.com/v1', a({ agreed: false, reason: 'API servers disagree' }), undefined).verdict, 'NotYet');
  assert.equal(storageVersionCheck('ex.com/v1', a({ verified: false }), 'ex.com/v2').verdict, 'Unknown');
  assert.equal(storageVersionCheck('ex.com/v1', a({ hash: 'H' }), undefined).verdict, 'Unknown');
  assert.equal(managedFieldsCheck('ex.com/v1', 'v1', { objects: 3, naming: 0, managers: [] }).verdict, 'Ready');
  const m = managedFieldsCheck('ex.com/v1', 'v1', { objects: 3, naming: 2, managers: ['flux', 'kubectl'] });
  assert.equal(m.verdict, 'NotYet');
  assert.match(m.reason, /^2 of 3 objects have managedFields entries at ex.com\/v1 \(managers: flux, kubectl\): server-side apply/);
  assert.match(
    managedFieldsCheck('ex.com/v1', 'v1', { objects: 3, naming: 2, managers: ['flux'] }, 'widgets.ex.com').reason,
    / until each manager applies at another version or svm managed-fields widgets\.ex\.com --from ex\.com\/v1 renames them$/,
  );
});

void test('verdicts combine: not yet over unknown over ready; exit 0, 1, 2', () => {
  assert.equal(combineVerdicts([]), 'Ready');
  assert.equal(combineVerdicts(['Ready', 'Unknown']), 'Unknown');
  assert.equal(combineVerdicts(['Unknown', 'NotYet', 'Ready']), 'NotYet');
  assert.deepEqual((['Ready', 'NotYet', 'Unknown'] as const).map(dropExitCode), [0, 1, 2]);
});

void test('the table: one line per resource with its verdict, each check under it, the verdict and exit code last', () => {
  const report: DropReport = {
    groupVersion: 'ex.com/v1',
    verdict: 'NotYet',
    exitCode: 1,
    resources: [
      {
        resource: 'widgets.ex.com',
        kind: 'Widget',
        custom: true,
        verdict: 'NotYet',
        storageVersion: 'ex.com/v2',
        objects: 30,
        managedFieldsNaming: 30,
        managers: ['owner'],
        requests: [],
        checks: [
          { check: 'storageVersion', verdict: 'Ready', reason: 'every API server stores it as ex.com/v2' },
          { check: 'managedFields', verdict: 'NotYet', reason: '30 of 30 objects ...' },
        ],
      },
    ],
    requestsWindowSeconds: 30,
    checked: '2 of 2 API servers',
    notes: [],
    at: '2026-11-26T00:00:00.000Z',
  };
  assert.ok(DropReportSchema.safeParse(report).success);
  assert.equal(
    dropTable(report),
    [
      'RESOURCE        VERDICT  STORAGE    OBJECTS  MANAGED@v1',
      'widgets.ex.com  not yet  ex.com/v2       30          30',
      '  ready    storageVersion  every API server stores it as ex.com/v2',
      '  not yet  managedFields   30 of 30 objects ...',
      '',
      'agreement checked: 2 of 2 API servers',
      'requests window: 30s: a client that calls less often than every 30s is not seen (--requests-window; 0 counts every request since each API server started)',
      'ex.com/v1: not yet (1 resource(s): 1 not yet) (exit 1)',
      '',
    ].join('\n'),
  );
});

void test('the managedFields rewrite: a JSON patch per object naming the version, each entry tested before its apiVersion is replaced; changed meanwhile and gone counted, the rest left', async () => {
  const objects = [
    {
      name: 'a',
      namespace: 'ns',
      managedFields: [
        { manager: 'flux', apiVersion: 'ex.com/v1' },
        { manager: 'kubectl', apiVersion: 'ex.com/v2' },
      ],
    },
    { name: 'b', namespace: 'ns', managedFields: [{ manager: 'kubectl', apiVersion: 'ex.com/v2' }] },
    {
      name: 'c',
      namespace: 'ns',
      managedFields: [
        { manager: 'x', apiVersion: 'ex.com/v1' },
        { manager: 'y', apiVersion: 'ex.com/v1' },
      ],
    },
    { name: 'd', namespace: 'ns', managedFields: [{ manager: 'z', apiVersion: 'ex.com/v1' }] },
  ];
  const sent: Array<{ path: string; ops: unknown; type?: string }> = [];
  const lister = {
    listEach: async (_ref: unknown, _o: unknown, onItem: (o: (typeof objects)[number]) => void) => {
      for (const o of objects) onItem(o);
      return {};
    },
  } as unknown as KubeClient;
  const writer = {
    request: async (_m: string, path: string, o: { body: string; contentType?: string }) => {
      sent.push({ path, ops: JSON.parse(o.body), type: o.contentType });
      // c changed meanwhile (a test failed), d was deleted.
      return { status: path.endsWith('/c') ? 422 : path.endsWith('/d') ? 404 : 200, headers: {}, body: '{}' };
    },
  } as unknown as KubeClient;
  const ref = { group: 'ex.com', version: 'v2', resource: 'widgets', kind: 'Widget' };
  const r = await rewriteManagedFieldsAt(lister, writer, ref, 'ex.com/v1', 'ex.com/v2');
  assert.deepEqual(
    sent.map((s) => s.path),
    ['/apis/ex.com/v2/namespaces/ns/widgets/a', '/apis/ex.com/v2/namespaces/ns/widgets/c', '/apis/ex.com/v2/namespaces/ns/widgets/d'],
  );
  assert.equal(sent[0]!.type, 'application/json-patch+json');
  assert.deepEqual(sent[0]!.ops, [
    { op: 'test', path: '/metadata/managedFields/0/apiVersion', value: 'ex.com/v1' },
    { op: 'test', path: '/metadata/managedFields/0/manager', value: 'flux' },
    { op: 'replace', path: '/metadata/managedFields/0/apiVersion', value: 'ex.com/v2' },
  ]);
  assert.equal((sent[1]!.ops as unknown[]).length, 6, 'both entries of c');
  // The fake lists the same objects again: a, c and d still name v1 there.
  assert.deepEqual(r, { objects: 4, rewritten: 1, entries: 1, changedMeanwhile: 1, gone: 1, remaining: 3 });
});

void test('svm grant --managed-fields: patch on exactly the resource for the rewrite identity; an unfenced group says to delete it', () => {
  const fenced = YAML.parseAllDocuments(managedFieldsGrantManifests({ group: 'ex.com', resource: 'widgets' })).map((d) => d.toJS());
  assert.deepEqual(fenced[0].rules, [{ apiGroups: ['ex.com'], resources: ['widgets'], verbs: ['patch'] }]);
  assert.deepEqual(fenced[1].subjects, [{ kind: 'ServiceAccount', name: 'svm-managed-fields', namespace: 'svm-system' }]);
  assert.match(
    managedFieldsGrantManifests({ group: 'ex.com', resource: 'widgets' }),
    /fenced\n# \(deploy\/managed-fields\.yaml\) to change nothing else/,
  );
  assert.match(
    managedFieldsGrantManifests({ group: 'admissionregistration.k8s.io', resource: 'mutatingadmissionpolicies' }),
    /Admission policies cannot\n# guard admissionregistration\.k8s\.io/,
  );
});

// ------------------------------------------------------------ checkDrop over a faked cluster

/** A cluster as the check reads it: discovery, CRDs, StorageStates, the APIService, the objects, lists refused by version. */
interface FakeCluster {
  discovered: DiscoveredResource[];
  crds?: object[];
  states?: object[];
  /** The APIServices listed; a number: the status their list is refused with. */
  apiServices?: object[] | number;
  objects?: ListedObject[];
  refuse?: Record<string, { status: number; body: string }>;
  /**
   * The migration workflows in Temporal, by resource (plural.group): 'holds' is a Succeeded run whose record's
   * agreement is the one the check reads now (the default for every resource), 'none' no workflow at all.
   */
  records?: Record<string, 'holds' | 'none' | MigrationRecord>;
  /** No Temporal client at hand. */
  noTemporal?: boolean;
  /** Every server's /metrics text (default: empty). */
  metrics?: string;
  /** The worker's samples of the servers' counters (the check run by the worker). */
  samples?: RequestSamples;
}

/** The fake's agreement token for a resource whose storage version hashes to `hash` (its CRD's storage and generation). */
const fakeToken = (hash: string, crd = '') => `discovery:crd=${crd}:ids=a=1:eps=a:6443=${hash}:via=${hash}`;

/** A Succeeded run of migrate/<key> with the record of a pass by svm under the agreement token. */
const succeededRecord = (key: string, token: string, o: { verified?: boolean } = {}): MigrationRecord => ({
  workflowId: `migrate/${key}`,
  status: 'COMPLETED',
  phase: 'Succeeded',
  closeTime: '2026-12-02T00:00:00.000Z',
  record: { by: 'svm', encodingVersion: 'v2', verified: o.verified ?? true, checked: '1 of 1 API server by their discovery', token },
});

/**
 * A KubeClient answering the check's reads from a FakeCluster, one API server at a:6443 (its own address and
 * identity lease), and every list the check asked (version and limit).
 */
function fakeCluster(c: FakeCluster) {
  const lists: Array<{ version: string; limit: number }> = [];
  const answer = (status: number, body: unknown) => ({ status, headers: {}, body: JSON.stringify(body) });
  const route = (path: string) => {
    if (path === '/apis/apiextensions.k8s.io/v1/customresourcedefinitions') return answer(200, { items: c.crds ?? [] });
    if (path === '/apis/migration.k8s.io/v1alpha1/storagestates') return answer(200, { items: c.states ?? [] });
    if (path === '/apis/apiregistration.k8s.io/v1/apiservices')
      return typeof c.apiServices === 'number'
        ? answer(c.apiServices, {
            kind: 'Status',
            code: c.apiServices,
            reason: 'Forbidden',
            message: 'apiservices.apiregistration.k8s.io is forbidden: User "u" cannot list resource "apiservices"',
          })
        : answer(200, { items: c.apiServices ?? [] });
    if (path === '/metrics') return { status: 200, headers: {}, body: c.metrics ?? '' };
    return answer(404, { kind: 'Status', code: 404, reason: 'NotFound' });
  };
  const kube = {
    server: 'https://via:6443',
    discover: async () => c.discovered,
    request: async (_method: string, path: string, o: { allow?: number[] } = {}) => {
      const res = route(path);
      if (res.status < 300 || o.allow?.includes(res.status)) return res;
      throw classifyResponse(res.status, res.body);
    },
    listEach: async (ref: { version: string }, o: { limit: number }, onItem: (obj: ListedObject, bytes: number) => void) => {
      lists.push({ version: ref.version, limit: o.limit });
      const refused = c.refuse?.[ref.version];
      if (refused) throw classifyResponse(refused.status, refused.body);
      for (const obj of c.objects ?? []) onItem(obj, 0);
      return { items: c.objects?.length ?? 0, bytes: 0 };
    },
  } as unknown as KubeClient;
  const apiservers: ApiServerSource = {
    find: async () => ({ via: kube, endpoints: [{ id: 'a:6443', kube }], identities: ['a'], processes: ['a=1'] }),
    close: () => undefined,
  };
  /** migrate/<plural.group>: as c.records says, by default a record that holds now. */
  const migrationOf = async (r: { group: string; resource: string }): Promise<MigrationRecord | undefined> => {
    const key = `${r.resource}.${r.group}`;
    const given = c.records?.[key] ?? 'holds';
    if (given === 'none') return undefined;
    if (given !== 'holds') return given;
    const entry =
      c.discovered.find((r) => `${r.name}.${r.group}` === key && r.preferred) ?? c.discovered.find((r) => `${r.name}.${r.group}` === key);
    const crd = (c.crds as Array<ReturnType<typeof widgetsCrd>> | undefined)?.find((x) => `${x.spec.names.plural}.${x.spec.group}` === key);
    const storage = crd?.spec.versions.find((v) => v.storage)?.name;
    return succeededRecord(key, fakeToken(entry?.storageVersionHash ?? '-', crd ? `${storage}@${crd.metadata.generation}` : ''));
  };
  const check = (gv: string, requestsWindowSeconds = 30) =>
    checkDrop(kube, gv, {
      apiservers,
      requestsWindowSeconds,
      sleep: async () => undefined,
      ...(c.noTemporal ? {} : { migrationOf }),
      ...(c.samples ? { requestSamples: c.samples } : {}),
    });
  return { check, lists };
}

/** A discovery entry: served at `version`, its storage version's hash (`stored`) as discovery gives it at every version. */
const served = (
  group: string,
  version: string,
  name: string,
  kind: string,
  o: { stored: string; preferred?: boolean },
): DiscoveredResource => ({
  name,
  kind,
  namespaced: true,
  verbs: ['list', 'patch'],
  group,
  version,
  preferred: o.preferred ?? false,
  storageVersionHash: storageVersionHashOf(group, o.stored, kind),
});

/** A StorageState recording a whole pass: objects persisted only in the storage version's hash. */
const migratedState = (group: string, resource: string, hash: string) => ({
  apiVersion: 'migration.k8s.io/v1alpha1',
  kind: 'StorageState',
  metadata: { name: `${resource}.${group}` },
  spec: { resource: { group, resource } },
  status: { persistedStorageVersionHashes: [hash], currentStorageVersionHash: hash },
});

/** A CRD of ex.com's widgets at these versions (the last one stored), with storedVersions and a conversion. */
const widgetsCrd = (versions: Array<{ name: string; served?: boolean }>, o: { storedVersions: string[]; webhookUrl?: string }) => ({
  metadata: { name: 'widgets.ex.com', generation: 3 },
  spec: {
    group: 'ex.com',
    names: { plural: 'widgets', kind: 'Widget' },
    versions: versions.map((v, i) => ({ name: v.name, served: v.served ?? true, storage: i === versions.length - 1 })),
    ...(o.webhookUrl ? { conversion: { strategy: 'Webhook', webhook: { clientConfig: { url: o.webhookUrl } } } } : {}),
  },
  status: { storedVersions: o.storedVersions },
});

const checkOf = (report: DropReport, resource: string, check: string) =>
  report.resources.find((r) => r.resource === resource)?.checks.find((c) => c.check === check);

void test('a version nothing serves and no CRD names: unknown (exit 2), no resource, the note says what the group serves', async () => {
  const { check, lists } = fakeCluster({
    discovered: [served('ex.com', 'v2', 'widgets', 'Widget', { stored: 'v2', preferred: true })],
    crds: [widgetsCrd([{ name: 'v2' }], { storedVersions: ['v2'] })],
  });
  const report = await check('ex.com/v1beta1');
  assert.deepEqual([report.verdict, report.exitCode, report.resources], ['Unknown', 2, []]);
  assert.deepEqual(report.notes, [
    'nothing serves ex.com/v1beta1 and no CustomResourceDefinition names v1beta1: ex.com serves v2 (widgets). There is nothing to check: ' +
      'a version already removed from every CRD has nothing left to drop, a misspelt one was never checked',
  ]);
  assert.deepEqual(lists, [], 'nothing listed');
  assert.ok(DropReportSchema.safeParse(report).success);
  assert.match(dropTable(report), /\nex\.com\/v1beta1: unknown \(exit 2\)\n$/);
  // A group nothing serves at all is refused, as before.
  await assert.rejects(
    check('nowhere.ex.com/v1'),
    /^DropInputError: no API group nowhere\.ex\.com is served and no CustomResourceDefinition names it$/,
  );
});

void test('a CRD version with served: false is still checked: no client can use it there', async () => {
  const { check, lists } = fakeCluster({
    discovered: [served('ex.com', 'v2', 'widgets', 'Widget', { stored: 'v2', preferred: true })],
    crds: [widgetsCrd([{ name: 'v1', served: false }, { name: 'v2' }], { storedVersions: ['v2'] })],
    objects: [{ name: 'a', namespace: 'ns', resourceVersion: '1', managedFields: [{ manager: 'm', apiVersion: 'ex.com/v2' }] }],
  });
  const report = await check('ex.com/v1');
  assert.deepEqual([report.verdict, report.exitCode], ['Ready', 0]);
  assert.deepEqual(checkOf(report, 'widgets.ex.com', 'requests'), {
    check: 'requests',
    verdict: 'Ready',
    reason: 'discovery does not list widgets.ex.com at ex.com/v1 (its CRD does not serve it): no client can use it there',
  });
  assert.ok(
    lists.every((l) => l.version !== 'v1'),
    'no list at the version to drop',
  );
});

const FLOW = 'flowcontrol.apiserver.k8s.io';
const flowSchemas = (versions: string[]) =>
  versions.map((v, i) => served(FLOW, v, 'flowschemas', 'FlowSchema', { stored: 'v1', preferred: i === 0 }));

void test('a built-in version nothing serves, while the resource is served at another than its storage version: unknown (a misspelling of that one?)', async () => {
  const { check } = fakeCluster({
    discovered: flowSchemas(['v1', 'v1beta3']),
    states: [migratedState(FLOW, 'flowschemas', storageVersionHashOf(FLOW, 'v1', 'FlowSchema'))],
  });
  const report = await check(`${FLOW}/v1beta4`);
  assert.deepEqual([report.verdict, report.exitCode], ['Unknown', 2]);
  const r = report.resources.find((x) => x.resource === `flowschemas.${FLOW}`)!;
  assert.deepEqual(
    r.checks.filter((c) => c.verdict !== 'Ready').map((c) => c.check),
    ['requests'],
  );
  assert.equal(
    checkOf(report, `flowschemas.${FLOW}`, 'requests')!.reason,
    `discovery does not list flowschemas.${FLOW} at ${FLOW}/v1beta4 but at ${FLOW}/v1beta3, not its storage version ${FLOW}/v1: ` +
      `if ${FLOW}/v1beta4 misspells one of those, its clients were not counted (check that version instead)`,
  );
  assert.deepEqual(report.notes, [`nothing serves ${FLOW}/v1beta4: ${FLOW} serves v1 (flowschemas), v1beta3 (flowschemas)`]);
});

void test('a built-in version no longer served, its objects migrated and the resource served only at its storage version: ready (the upgrade case)', async () => {
  const AR = 'admissionregistration.k8s.io';
  const hash = storageVersionHashOf(AR, 'v1', 'MutatingAdmissionPolicy');
  const { check } = fakeCluster({
    discovered: [served(AR, 'v1', 'mutatingadmissionpolicies', 'MutatingAdmissionPolicy', { stored: 'v1', preferred: true })],
    states: [migratedState(AR, 'mutatingadmissionpolicies', hash)],
  });
  const report = await check(`${AR}/v1beta1`);
  assert.deepEqual([report.verdict, report.exitCode], ['Ready', 0], JSON.stringify(report.resources[0]?.checks));
  assert.equal(
    checkOf(report, `mutatingadmissionpolicies.${AR}`, 'requests')!.reason,
    `discovery does not list mutatingadmissionpolicies.${AR} at ${AR}/v1beta1, only at ${AR}/v1 (its storage version ${AR}/v1): ` +
      `no client can use ${AR}/v1beta1 for it`,
  );
  assert.deepEqual(report.notes, [`nothing serves ${AR}/v1beta1: ${AR} serves v1 (mutatingadmissionpolicies)`]);
  assert.equal(report.resources[0]!.requests.length, 1, 'the counters are still read');

  // Before the upgrade: stored at v1beta1, served only at v1. Not yet for its storage version; no client at v1beta1.
  const before = await fakeCluster({
    discovered: [served(AR, 'v1', 'mutatingadmissionpolicies', 'MutatingAdmissionPolicy', { stored: 'v1beta1', preferred: true })],
  }).check(`${AR}/v1beta1`);
  assert.deepEqual([before.verdict, before.exitCode], ['NotYet', 1]);
  assert.equal(checkOf(before, `mutatingadmissionpolicies.${AR}`, 'storageVersion')!.verdict, 'NotYet');
  assert.deepEqual(checkOf(before, `mutatingadmissionpolicies.${AR}`, 'requests'), {
    check: 'requests',
    verdict: 'Ready',
    reason:
      `discovery does not list mutatingadmissionpolicies.${AR} at ${AR}/v1beta1, its storage version (it is served at ${AR}/v1): ` +
      'no client can use it there',
  });
});

void test('an aggregated API: its requests are unknown, and why (kube-apiserver does not count what it proxies); so where its APIService cannot be read', async () => {
  const W = 'wardle.example.com';
  const discovered = ['v1beta1', 'v1'].map((v) => served(W, v, 'flunders', 'Flunder', { stored: 'v1', preferred: v === 'v1' }));
  const states = [migratedState(W, 'flunders', storageVersionHashOf(W, 'v1', 'Flunder'))];
  const apiService = (name: string, service: object | null) => ({ metadata: { name }, spec: { service } });
  const aggregated = await fakeCluster({
    discovered,
    states,
    apiServices: [apiService(`v1beta1.${W}`, { namespace: 'wardle', name: 'api' })],
  }).check(`${W}/v1beta1`);
  assert.deepEqual([aggregated.verdict, aggregated.exitCode], ['Unknown', 2]);
  assert.deepEqual(checkOf(aggregated, `flunders.${W}`, 'requests'), {
    check: 'requests',
    verdict: 'Unknown',
    reason:
      `${W}/v1beta1 is served by the aggregated API wardle/api: kube-apiserver does not count the requests it proxies to an aggregated ` +
      "API, so its /metrics cannot show who still uses it (the aggregated API's own metrics or logs can)",
  });
  assert.deepEqual(aggregated.resources[0]!.requests, [
    {
      server: 'a:6443',
      verdict: 'Unknown',
      requestsInWindow: null,
      requestsSinceStart: null,
      open: null,
      reason: 'kube-apiserver does not count the requests it proxies to an aggregated API',
    },
  ]);
  const unreadable = await fakeCluster({ discovered, states, apiServices: 403 }).check(`${W}/v1beta1`);
  assert.deepEqual([unreadable.verdict, unreadable.exitCode], ['Unknown', 2]);
  assert.match(
    checkOf(unreadable, `flunders.${W}`, 'requests')!.reason,
    new RegExp(`^whether an aggregated API serves ${W}/v1beta1 is unknown \\(APIService v1beta1\\.${W} could not be listed: forbidden`),
  );
  // Its discovery not answering (kube-apiserver then leaves the version out of discovery): still served, still not counted.
  const down = await fakeCluster({
    discovered: discovered.filter((r) => r.version === 'v1'),
    states,
    apiServices: [apiService(`v1beta1.${W}`, { namespace: 'wardle', name: 'api' })],
  }).check(`${W}/v1beta1`);
  assert.deepEqual([down.verdict, down.exitCode], ['Unknown', 2]);
  assert.match(
    checkOf(down, `flunders.${W}`, 'requests')!.reason,
    new RegExp(`^${W}/v1beta1 is served by the aggregated API wardle/api: `),
  );
  assert.deepEqual(down.notes, [
    `discovery lists nothing at ${W}/v1beta1, whose APIService names the aggregated API wardle/api: its discovery did not answer (${W} serves v1 (flunders))`,
  ]);
  // Served by kube-apiserver itself (an APIService without a service): counted, and ready.
  const local = await fakeCluster({ discovered, states, apiServices: [apiService(`v1beta1.${W}`, null)] }).check(`${W}/v1beta1`);
  assert.deepEqual([local.verdict, local.exitCode], ['Ready', 0], JSON.stringify(local.resources[0]?.checks));
});

const CONVERSION_FAILED_BODY = JSON.stringify({
  kind: 'Status',
  code: 500,
  reason: 'InternalError',
  message:
    'conversion webhook for ex.com/v1, Kind=Widget failed: Post "https://hook.example:8443/convert?timeout=30s": dial tcp: connection refused',
});

void test('a conversion webhook that fails the lists at the other served versions: not yet (exit 1), naming it; none is asked at the version to drop', async () => {
  const crd = widgetsCrd([{ name: 'v1' }, { name: 'v2' }], { storedVersions: ['v2'], webhookUrl: 'https://hook.example:8443/convert' });
  const discovered = ['v1', 'v2'].map((v) => served('ex.com', v, 'widgets', 'Widget', { stored: 'v2', preferred: v === 'v2' }));
  const broken = fakeCluster({ discovered, crds: [crd], refuse: { v2: { status: 500, body: CONVERSION_FAILED_BODY } } });
  const report = await broken.check('ex.com/v1');
  assert.deepEqual([report.verdict, report.exitCode], ['NotYet', 1]);
  assert.deepEqual(checkOf(report, 'widgets.ex.com', 'conversionWebhook'), {
    check: 'conversionWebhook',
    verdict: 'NotYet',
    reason:
      'converted by the webhook at hook.example:8443/convert, which fails: a metadata-only list at ex.com/v2 failed ' +
      '(HTTP 500 InternalError: the conversion webhook for ex.com/v1, Kind=Widget failed); until it converts again, objects stored at ' +
      'another version cannot be read or migrated, and it has to keep converting v1 until v1 is removed from the CRD; remove it there ' +
      'first, then from the webhook',
  });
  // The managedFields list at v2 was the probe: one list, not at v1.
  assert.deepEqual(broken.lists, [{ version: 'v2', limit: 500 }]);

  // Working, with a third version: its one-object list converts what is stored at v2.
  const three = widgetsCrd([{ name: 'v1' }, { name: 'v3' }, { name: 'v2' }], {
    storedVersions: ['v2'],
    webhookUrl: 'https://hook.example:8443/convert',
  });
  const working = fakeCluster({ discovered, crds: [three] });
  const ready = await working.check('ex.com/v1');
  assert.deepEqual([ready.verdict, ready.exitCode], ['Ready', 0], JSON.stringify(ready.resources[0]?.checks));
  assert.equal(
    checkOf(ready, 'widgets.ex.com', 'conversionWebhook')!.reason,
    'converted by the webhook at hook.example:8443/convert; metadata-only lists at ex.com/v3, ex.com/v2 answered (each converts what is ' +
      'stored at another version; none is asked at v1, which would count as a client of it): it has to keep converting v1 until v1 is ' +
      'removed from the CRD; remove it there first, then from the webhook',
  );
  assert.deepEqual(working.lists, [
    { version: 'v2', limit: 500 },
    { version: 'v3', limit: 1 },
  ]);
  // A list refused for another reason: the webhook could not be probed.
  const forbidden = JSON.stringify({
    kind: 'Status',
    code: 403,
    reason: 'Forbidden',
    message: 'widgets.ex.com is forbidden: User "u" cannot list resource "widgets"',
  });
  const unprobed = await fakeCluster({ discovered, crds: [three], refuse: { v3: { status: 403, body: forbidden } } }).check('ex.com/v1');
  assert.deepEqual([unprobed.verdict, unprobed.exitCode], ['Unknown', 2]);
  assert.match(
    checkOf(unprobed, 'widgets.ex.com', 'conversionWebhook')!.reason,
    /^converted by the webhook at hook\.example:8443\/convert, which could not be probed: a metadata-only list at ex\.com\/v3 failed \(forbidden/,
  );
});

void test('the requests window is stated with a ready verdict: a client that calls less often is not seen', async () => {
  const discovered = ['v1', 'v2'].map((v) => served('ex.com', v, 'widgets', 'Widget', { stored: 'v2', preferred: v === 'v2' }));
  const cluster = fakeCluster({ discovered, crds: [widgetsCrd([{ name: 'v1' }, { name: 'v2' }], { storedVersions: ['v2'] })] });
  const report = await cluster.check('ex.com/v1', 30);
  assert.deepEqual([report.verdict, report.exitCode, report.requestsWindowSeconds], ['Ready', 0, 30]);
  assert.equal(
    checkOf(report, 'widgets.ex.com', 'requests')!.reason,
    'no client used ex.com/v1 in the last 30s: a:6443: 0 requests in 30s, 0 since the server started; a client that calls less often ' +
      'than every 30s is not seen (--requests-window; 0 counts every request since each API server started)',
  );
  assert.match(
    dropTable(report),
    /\nrequests window: 30s: a client that calls less often than every 30s is not seen \(--requests-window; 0 counts every request since each API server started\)\nex\.com\/v1: ready/,
  );
  const sinceStart = await cluster.check('ex.com/v1', 0);
  assert.match(
    checkOf(sinceStart, 'widgets.ex.com', 'requests')!.reason,
    /^no client used ex\.com\/v1 since the servers started: a:6443: 0 requests since it started; a client that has not called since each API server started is not seen$/,
  );
  assert.match(
    dropTable(sinceStart),
    /\nrequests window: 0 \(every request since each API server started\): a client that has not called since each API server started is not seen\n/,
  );
});

void test("the drop check run by the worker: each server's requests counted since the worker's oldest sample of it, up to a day back, the window stated", async () => {
  const discovered = ['v1', 'v2'].map((v) => served('ex.com', v, 'widgets', 'Widget', { stored: 'v2', preferred: v === 'v2' }));
  const crds = [widgetsCrd([{ name: 'v1' }, { name: 'v2' }], { storedVersions: ['v2'] })];
  const quiet = METRICS.replace(/^apiserver_longrunning_requests.*\n/m, '');
  const hours = (h: number) => Date.now() - h * 3600_000;
  // A client called twice at v1 in the 20 hours since the sample, none in the check's own 30 s.
  const samples = new RequestSamples();
  samples.add('a:6443', hours(20), requestTotals(quiet.replace('} 30\n', '} 28\n')));
  const called = await fakeCluster({ discovered, crds, metrics: quiet, samples }).check('ex.com/v1', 30);
  assert.equal(called.verdict, 'NotYet');
  const figures = called.resources[0]!.requests[0]!;
  assert.deepEqual([figures.requestsInWindow, figures.windowSeconds], [2, 72000]);
  assert.match(
    checkOf(called, 'widgets.ex.com', 'requests')!.reason,
    /^clients still use ex\.com\/v1: a:6443: 2 requests in 20h00m \(since the worker's oldest sample of it\)/,
  );
  // None since: ready, and the window the verdict rests on is the samples' (the table's last lines say so).
  const none = new RequestSamples();
  none.add('a:6443', hours(20), requestTotals(quiet));
  const ready = await fakeCluster({ discovered, crds, metrics: quiet, samples: none }).check('ex.com/v1', 30);
  assert.equal(ready.verdict, 'Ready');
  assert.match(checkOf(ready, 'widgets.ex.com', 'requests')!.reason, /^no client used ex\.com\/v1 in the last 20h00m: /);
  assert.match(
    dropTable(ready),
    /\nrequests window: 20h00m \(the worker's samples of each server's counters; 30s watched by the check itself\): a client that calls less often than every 20h00m is not seen \(the worker's samples/,
  );
  // A sample newer than the window's start, or none: the check's own window.
  const fresh = new RequestSamples();
  fresh.add('a:6443', Date.now() + 60_000, requestTotals(quiet));
  const own = await fakeCluster({ discovered, crds, metrics: quiet, samples: fresh }).check('ex.com/v1', 30);
  assert.equal(own.resources[0]!.requests[0]!.windowSeconds, undefined);
  assert.match(dropTable(own), /\nrequests window: 30s: /);
  // Window 0 (every request since each server started) is not the samples' business.
  const sinceStart = await fakeCluster({ discovered, crds, metrics: '', samples: none }).check('ex.com/v1', 0);
  assert.equal(sinceStart.resources[0]!.requests[0]!.windowSeconds, undefined);
});

void test('the migration check rests on the record in Temporal: a mirror the worker token can write never makes it ready, and is named where it disagrees', async () => {
  const AR = 'admissionregistration.k8s.io';
  const MAP = `mutatingadmissionpolicies.${AR}`;
  const hash = storageVersionHashOf(AR, 'v1', 'MutatingAdmissionPolicy');
  const discoveredMap = [served(AR, 'v1', 'mutatingadmissionpolicies', 'MutatingAdmissionPolicy', { stored: 'v1', preferred: true })];
  const forgedState = [migratedState(AR, 'mutatingadmissionpolicies', hash)];
  const mapCheck = async (c: Omit<FakeCluster, 'discovered'>) => {
    const report = await fakeCluster({ discovered: discoveredMap, ...c }).check(`${AR}/v1beta1`);
    return { report, migration: checkOf(report, MAP, 'migration')! };
  };

  // A StorageState marked migrated, no workflow in Temporal (forged by the token, or past retention): unknown.
  const forged = await mapCheck({ states: forgedState, records: { [MAP]: 'none' } });
  assert.deepEqual([forged.report.verdict, forged.report.exitCode, forged.migration.verdict], ['Unknown', 2, 'Unknown']);
  assert.equal(
    forged.migration.reason,
    `Temporal holds no migration workflow migrate/${MAP}: never migrated by svm, migrated by another migrator, or past the namespace's retention; ` +
      `StorageState ${MAP} says objects are persisted only in ${hash} (${AR}/v1), but that mirror is the worker's token's to write: without the record it does not count`,
  );
  // No Temporal client at hand: unknown, saying what to set.
  const noClient = await mapCheck({ states: forgedState, noTemporal: true });
  assert.equal(noClient.migration.verdict, 'Unknown');
  assert.match(
    noClient.migration.reason,
    new RegExp(
      `^the record of a whole pass is the migration workflow migrate/${MAP} in Temporal, and no Temporal client is at hand \\(set TEMPORAL_ADDRESS\\)`,
    ),
  );
  // The record of a pass under an agreement that no longer holds (an API server restarted since: a rollback and roll-forward).
  const stale = await mapCheck({ states: forgedState, records: { [MAP]: succeededRecord(MAP, fakeToken(hash).replace('a=1', 'a=0')) } });
  assert.deepEqual([stale.report.verdict, stale.migration.verdict], ['NotYet', 'NotYet']);
  assert.match(
    stale.migration.reason,
    /under an agreement that no longer holds \(the API server processes \(a restart changes them\): a=0 -> a=1\): an API server restarted or the storage version moved since/,
  );
  // Succeeded in a result with no record (an older svm), running, failed, unverified.
  const old = { ...succeededRecord(MAP, fakeToken(hash)), record: undefined };
  const noRecord = await mapCheck({ states: forgedState, records: { [MAP]: old } });
  assert.equal(noRecord.migration.verdict, 'Unknown');
  assert.match(noRecord.migration.reason, /without a record of its pass \(an svm from before records were kept\)/);
  const running = await mapCheck({ records: { [MAP]: { workflowId: `migrate/${MAP}`, status: 'RUNNING' } } });
  assert.deepEqual(
    [running.migration.verdict, running.migration.reason.startsWith(`its migration workflow migrate/${MAP} is running`)],
    ['NotYet', true],
  );
  const failed = await mapCheck({
    records: { [MAP]: { workflowId: `migrate/${MAP}`, status: 'FAILED', closeTime: '2026-12-02T00:00:00.000Z' } },
  });
  assert.equal(failed.migration.verdict, 'NotYet');
  assert.match(failed.migration.reason, /ended FAILED at 2026-12-02T00:00:00\.000Z: no whole pass is on record/);
  const unverified = await mapCheck({ records: { [MAP]: succeededRecord(MAP, fakeToken(hash), { verified: false }) } });
  assert.equal(unverified.migration.verdict, 'Unknown');
  assert.match(unverified.migration.reason, /its agreement was not verified per API server/);
  // The record holds, the StorageState says otherwise: the mirror is believed (and named).
  const reset = [{ ...forgedState[0]!, status: { persistedStorageVersionHashes: ['Unknown'], currentStorageVersionHash: hash } }];
  const holds = await mapCheck({ states: reset });
  assert.deepEqual([holds.report.verdict, holds.migration.verdict], ['NotYet', 'NotYet'], 'a mirror saying "not migrated" holds it back');
  assert.match(holds.migration.reason, /a whole pass by svm to v2, under the agreement that holds now/);
  assert.match(
    holds.migration.reason,
    /; but the mirror disagrees: StorageState persistedStorageVersionHashes \[Unknown\]: objects may be stored in any version \(believed: it only holds the drop back\)$/,
  );
  // No StorageState at all: the record alone.
  const alone = await mapCheck({});
  assert.deepEqual([alone.report.verdict, alone.migration.verdict], ['Ready', 'Ready']);
  // No record, and a mirror that says not migrated: believed (a forged one only holds the drop back).
  const never = await mapCheck({ states: reset, records: { [MAP]: 'none' } });
  assert.equal(never.migration.verdict, 'NotYet');

  // A CRD whose storedVersions the token pruned with nothing migrated: storedVersions reads ready, the migration unknown.
  const discovered = ['v1', 'v2'].map((v) => served('ex.com', v, 'widgets', 'Widget', { stored: 'v2', preferred: v === 'v2' }));
  const pruned = await fakeCluster({
    discovered,
    crds: [widgetsCrd([{ name: 'v1' }, { name: 'v2' }], { storedVersions: ['v2'] })],
    records: { 'widgets.ex.com': 'none' },
  }).check('ex.com/v1');
  assert.deepEqual([pruned.verdict, pruned.exitCode], ['Unknown', 2]);
  assert.equal(checkOf(pruned, 'widgets.ex.com', 'storedVersions')!.verdict, 'Ready');
  assert.match(
    checkOf(pruned, 'widgets.ex.com', 'migration')!.reason,
    /; status\.storedVersions no longer names v1, but that mirror is the worker's token's to write: without the record it does not count$/,
  );
});
