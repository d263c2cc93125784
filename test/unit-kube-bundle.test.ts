/**
 * The bundle of @kubernetes/client-node's KubeConfig and Watch (src/kube/kubeconfig-bundle.ts) that the worker
 * and the image load: built here into a temporary file, then used as src/kube/client.ts uses it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type * as k8s from '@kubernetes/client-node';
import { buildKubeConfigBundle } from '../src/kube/kubeconfig-bundle';

void test('the KubeConfig bundle: ASCII, without the generated API or the Unicode table, and KubeConfig works from it', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svm-kube-bundle-'));
  try {
    const out = await buildKubeConfigBundle(path.join(dir, 'kube-client-node.js'));
    const code = readFileSync(out, 'utf8');
    // Any character past Latin-1 makes V8 hold the whole source at two bytes a character.
    assert.doesNotMatch(code, /[\u0080-\uffff]/, 'nothing outside ASCII');
    // The generated models (V1PodSpec, ...) and tr46's mapping table (whatwg-url) are left out.
    assert.doesNotMatch(code, /V1PodSpec|V1CustomResourceDefinitionSpec/);
    assert.doesNotMatch(code, /xn--|punycode/i);

    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const m = require(out) as { KubeConfig: typeof k8s.KubeConfig; Watch: typeof k8s.Watch };
    assert.equal(typeof m.Watch, 'function');
    const kc = new m.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from('not a real CA').toString('base64') }],
      users: [{ name: 'u', token: 'a-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    assert.equal(kc.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
    const opts: { headers?: Record<string, string>; ca?: Buffer } = {};
    await kc.applyToHTTPSOptions(opts);
    assert.equal(opts.headers?.Authorization, 'Bearer a-token');
    assert.equal(opts.ca?.toString(), 'not a real CA');
    // Watch's URL handling: node's URL in place of whatwg-url.
    const fetchOpts = await kc.applyToFetchOptions({});
    const headers = fetchOpts.headers as { get(name: string): string | null };
    assert.equal(headers.get('Authorization'), 'Bearer a-token');
    assert.throws(() => kc.makeApiClient(class {} as never), /makeApiClient is not in svm's bundle/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
