/**
 * Rule 4 against the worst webhook: a validating webhook that refuses some
 * Secrets' updates and echoes their values (decoded) in everything it
 * returns — message, reason, details. The migration records those refusals
 * by name, HTTP code and webhook name, and no value reaches the
 * StorageVersionMigration status, the workflow history (as exported by
 * `temporal workflow show` and by the SDK, payloads decoded) or the worker's
 * logs. etcd judges that the Secrets are unchanged.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { WORKFLOW_ID_ANNOTATION } from '../src/activities/index';
import { installCrds } from '../src/client/cli-migrate';
import { readStoredObjects } from '../src/dev/etcd-truth';
import { ensureNamespace, parallel } from './helpers/crd';
import { endLeftovers, eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { denySecretsEchoingValues } from './helpers/webhook';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube); // the StorageVersionMigration mirror kubectl users read
});
after(async () => plane?.close());

const ALLOWED = 30;
const DENIED = 4;

/** Every way a value can show up: in clear, and base64 at each of the three alignments. */
function needlesOf(value: string): string[] {
  const out = [value];
  for (let pad = 0; pad < 3; pad++) {
    const b64 = Buffer.from('x'.repeat(pad) + value).toString('base64');
    // Skip the characters that depend on the padding prefix and the tail.
    const start = Math.ceil((pad * 4) / 3) + 1;
    out.push(b64.slice(start, start + 12));
  }
  return out;
}

/** Every base64 run of at least 16 characters, decoded (history payloads are base64 in JSON). */
function decodeBase64Runs(text: string): string {
  return [...text.matchAll(/[A-Za-z0-9+/]{16,}={0,2}/g)].map((m) => Buffer.from(m[0], 'base64').toString('utf8')).join('\n');
}

void test('a webhook that echoes Secret values in its denials: reasons keep the HTTP code and webhook name, no value reaches status, history or logs', async () => {
  const ns = uniq('redact');
  await ensureNamespace(plane.kube, ns);
  const marker = `svmsecret${randomBytes(6).toString('hex')}`;
  const value = (name: string) => `${marker}-${name}`;
  const names = [...Array.from({ length: ALLOWED }, (_, i) => `s-${i}`), ...Array.from({ length: DENIED }, (_, i) => `deny-${i}`)];
  await parallel(names.length, 8, async (i) => {
    const name = names[i]!;
    await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: { password: value(name) } }),
    });
  });
  const before = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
  assert.equal(before.length, names.length);

  const { hook, remove } = await denySecretsEchoingValues(plane, ns, 'deny-0', (name) => name.startsWith('deny-'));
  try {
    // The premise: the API server hands the webhook's echo to the client.
    const probe = await plane.kube.getJson<Record<string, unknown>>(`/api/v1/namespaces/${ns}/secrets/deny-1`);
    const refused = await plane.kube.raw('PUT', `/api/v1/namespaces/${ns}/secrets/deny-1`, { body: JSON.stringify(probe) });
    assert.equal(refused.status, 403);
    assert.ok(refused.body.includes(value('deny-1')), `the webhook's denial should quote the value: ${refused.body}`);
    assert.match(refused.body, /admission webhook \\"echo\.svm\.test\\" denied the request/);

    await endLeftovers(plane);
    const logs: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        logs.push(chunk.toString('utf8'));
        cb();
      },
    });
    const deniedBefore = hook.denied;
    const { result, workflowId } = await withWorker(
      plane,
      async (m) => {
        const h = await m.start('secrets', { chunkSize: 100, concurrency: 4 });
        return { result: await migrationResult(h), workflowId: h.workflowId };
      },
      { logTo: sink },
    );
    assert.ok(hook.denied - deniedBefore >= DENIED, `the webhook denied ${hook.denied - deniedBefore} updates`);

    // The refusals are recorded: name, HTTP code, webhook — nothing else.
    assert.equal(result.phase, 'Failed', result.message);
    const ours = result.failures.filter((f) => f.namespace === ns);
    assert.deepEqual(ours.map((f) => f.name).sort(), names.filter((n) => n.startsWith('deny-')).sort());
    for (const f of ours) assert.equal(f.reason, 'HTTP 403 Forbidden: admission webhook "echo.svm.test" denied the request');
    assert.match(
      result.message ?? '',
      /could not be updated: .*deny-\d \(HTTP 403 Forbidden: admission webhook "echo\.svm\.test" denied the request\)/,
    );

    const needles = [...new Set(names.filter((n) => n.startsWith('deny-')).flatMap((n) => needlesOf(value(n)))), ...needlesOf(marker)];
    const leaks = (where: string, text: string) => {
      for (const n of needles) assert.ok(!text.includes(n), `${where} contains ${n}`);
      const decoded = decodeBase64Runs(text);
      for (const n of needles) assert.ok(!decoded.includes(n), `${where} (base64 decoded) contains ${n}`);
    };

    // 1. StorageVersionMigration status, as kubectl users read it.
    const kubectl = (...args: string[]) =>
      execFileSync(plane.env.KUBECTL!, args, {
        env: { ...process.env, KUBECONFIG: plane.env.KUBECONFIG },
        encoding: 'utf8',
        maxBuffer: 64 << 20,
      });
    const svmJson = kubectl('get', 'storageversionmigrations.migration.k8s.io', '-o', 'json');
    const svms = (
      JSON.parse(svmJson) as {
        items: Array<{ metadata: { annotations?: Record<string, string> }; status?: { phase?: string; message?: string } }>;
      }
    ).items.filter((o) => o.metadata.annotations?.[WORKFLOW_ID_ANNOTATION] === workflowId);
    assert.ok(svms.length >= 1, `a StorageVersionMigration mirrors ${workflowId}`);
    const svmText = JSON.stringify(svms);
    assert.match(svmText, /HTTP 403 Forbidden: admission webhook \\"echo\.svm\.test\\" denied the request/);
    leaks('StorageVersionMigration status', svmJson);

    // 2. The workflow history of every run, exported by the Temporal CLI and by the SDK.
    const runs: string[] = [];
    for await (const w of plane.temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(w.runId);
    assert.ok(runs.length >= 1);
    let sdkHistory = '';
    let cliHistory = '';
    for (const runId of runs) {
      sdkHistory += JSON.stringify(await plane.temporal.client.workflow.getHandle(workflowId, runId).fetchHistory());
      cliHistory += execFileSync(
        plane.env.TEMPORAL_CLI!,
        [
          'workflow',
          'show',
          '--workflow-id',
          workflowId,
          '--run-id',
          runId,
          '--output',
          'json',
          '--address',
          plane.temporal.address,
          '--namespace',
          plane.env.TEMPORAL_NAMESPACE ?? 'default',
        ],
        { encoding: 'utf8', maxBuffer: 256 << 20 },
      );
    }
    assert.ok(cliHistory.length > 1000 && sdkHistory.length > 1000, 'the history exports look empty');
    for (const [where, text] of [
      ['temporal workflow show', cliHistory],
      ['fetchHistory', sdkHistory],
    ] as const) {
      const readable = `${text}\n${decodeBase64Runs(text)}`;
      assert.match(
        readable,
        /HTTP 403 Forbidden: admission webhook \\?"echo\.svm\.test\\?" denied the request/,
        `${where} names the code and the webhook`,
      );
      leaks(where, text);
    }

    // 3. The worker's logs.
    const logText = logs.join('');
    assert.match(logText, /migration finished/, 'the worker logs were not captured');
    leaks('worker logs', logText);

    // etcd: every Secret is there with its value, the refused ones included.
    const after = await readStoredObjects(plane.etcd, `/registry/secrets/${ns}/`);
    assert.equal(after.length, names.length);
    for (const o of after) {
      const name = o.key.split('/').pop()!;
      assert.equal(Buffer.from((o.object.data as { password: string }).password, 'base64').toString(), value(name), name);
    }
  } finally {
    await remove();
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});

void test('a ValidatingAdmissionPolicy whose messageExpression quotes a Secret: the error names the policy and binding, not the value', async () => {
  const ns = uniq('redact-vap');
  await ensureNamespace(plane.kube, ns);
  const secretValue = `svmvap${randomBytes(6).toString('hex')}`;
  const created = await plane.kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'vap-0' }, stringData: { password: secretValue } }),
  });
  const secret = JSON.parse(created.body) as Record<string, unknown>;
  const policy = `${uniq('no-echo')}.svm.test`;
  const binding = `${policy}-binding`;
  const vapApi = '/apis/admissionregistration.k8s.io/v1';
  try {
    await plane.kube.request('POST', `${vapApi}/validatingadmissionpolicies`, {
      body: JSON.stringify({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name: policy },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['secrets'] }] },
          validations: [{ expression: 'false', messageExpression: "'the password is ' + object.data.password", reason: 'Invalid' }],
        },
      }),
    });
    await plane.kube.request('POST', `${vapApi}/validatingadmissionpolicybindings`, {
      body: JSON.stringify({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: binding },
        spec: {
          policyName: policy,
          validationActions: ['Deny'],
          matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } },
        },
      }),
    });
    const b64 = Buffer.from(secretValue).toString('base64');
    for (let i = 0; i < plane.state.apiservers.length; i++) {
      const k = plane.kubeOf(i);
      const res = await eventuallyRefused(k, `/api/v1/namespaces/${ns}/secrets/vap-0`, secret);
      assert.ok(res.body.includes(b64), `the policy's message should quote the value: ${res.body}`);
      // The same refusal through the client, as the migrator sees it.
      const err = await k.request('PUT', `/api/v1/namespaces/${ns}/secrets/vap-0`, { body: JSON.stringify(secret) }).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof Error);
      assert.equal(err.message, `HTTP 422 Invalid: ValidatingAdmissionPolicy "${policy}" (binding "${binding}") denied the request`);
      for (const n of [secretValue, b64, b64.slice(0, 12)])
        assert.ok(!err.message.includes(n) && !(err.stack ?? '').includes(n), `the error contains ${n}`);
    }
  } finally {
    await plane.kube.raw('DELETE', `${vapApi}/validatingadmissionpolicybindings/${binding}`);
    await plane.kube.raw('DELETE', `${vapApi}/validatingadmissionpolicies/${policy}`);
    await plane.kube.raw('DELETE', `/api/v1/namespaces/${ns}`);
  }
});

/** PUTs obj until the API server refuses it (a policy takes a moment to reach every server). */
async function eventuallyRefused(k: TestPlane['kube'], url: string, obj: unknown): Promise<{ status: number; body: string }> {
  return eventually(`a refusal of ${url}`, async () => {
    const res = await k.raw('PUT', url, { body: JSON.stringify(obj) });
    return res.status >= 400 ? res : undefined;
  });
}
