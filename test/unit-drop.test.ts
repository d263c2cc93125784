/**
 * The drop check's pure rules (src/kube/drop-check.ts, src/contract/drop.ts):
 * the refused inputs, reading request counters from a /metrics text, each
 * check's verdict, how verdicts combine, and the table.
 */
import assert from 'node:assert/strict';
import YAML from 'yaml';
import { managedFieldsGrantManifests } from '../src/client/grant';
import type { KubeClient } from '../src/kube/client';
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
import { managedFieldsCheck, requestsCheck, serverRequests, storageVersionCheck } from '../src/kube/drop-check';

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
