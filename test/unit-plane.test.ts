/**
 * Unit tests of the dev plane's pieces that need no servers: interface and
 * namespace names (IFNAMSIZ), the haproxy configuration, the kubeconfigs
 * (a CA, never insecure) and the serving certificates made with openssl
 * (signed by the plane's CA, with the names a client in a cluster uses).
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import YAML from 'yaml';
import { KubeConfig } from '@kubernetes/client-node';
import type { KubeClient } from '../src/kube/client';
import { applyCrd, testCrd } from '../src/dev/test-crd';
import { haproxyConfig } from '../src/dev/load-balancer';
import { bridgeName, gatewayAddress, hostVethName, netnsName, serverAddress } from '../src/dev/network';
import { kubeconfigYaml } from '../src/dev/plane';
import { ensureCa, ensureServingCert, SERVICE_IP } from '../src/dev/tls';

void test('interface names fit IFNAMSIZ and addresses are in the benchmarking range, for every K and server', () => {
  for (const k of [1, 99, 254]) {
    assert.ok(bridgeName(k).length <= 15, bridgeName(k));
    for (let i = 0; i < 5; i++) {
      assert.ok(hostVethName(k, i).length <= 15, hostVethName(k, i));
      assert.match(serverAddress(k, i), /^198\.18\.\d+\.1\d$/);
      assert.notEqual(serverAddress(k, i), gatewayAddress(k));
    }
    assert.equal(new Set([0, 1, 2, 3, 4].map((i) => netnsName(k, i))).size, 5);
  }
  assert.notEqual(bridgeName(1), bridgeName(11), 'K=1 and K=11 are different planes');
  assert.notEqual(hostVethName(1, 11), hostVethName(11, 1));
});

void test('haproxy: TCP mode on 127.0.0.1, every server a health-checked backend verified against the CA', () => {
  const cfg = haproxyConfig({
    port: 40001,
    caFile: '/d/pki/ca.crt',
    servers: [
      { name: 'apiserver-0', address: '198.18.3.10', port: 6443 },
      { name: 'apiserver-1', address: '198.18.3.11', port: 6443 },
    ],
  });
  assert.match(cfg, /mode tcp/);
  assert.match(cfg, /bind 127\.0\.0\.1:40001/);
  const servers = cfg.split('\n').filter((l) => l.trim().startsWith('server '));
  assert.equal(servers.length, 2);
  for (const s of servers) {
    assert.match(s, / check /);
    assert.match(s, /verify required ca-file \/d\/pki\/ca\.crt/);
  }
  assert.match(servers[1]!, /198\.18\.3\.11:6443/);
});

void test('kubeconfigs carry the CA and never skip TLS verification', () => {
  const doc = YAML.parse(kubeconfigYaml('https://127.0.0.1:1234', 'tok', 'c', 'PEM')) as {
    clusters: { cluster: Record<string, unknown> }[];
  };
  const cluster = doc.clusters[0]!.cluster;
  assert.equal(cluster['certificate-authority-data'], Buffer.from('PEM').toString('base64'));
  assert.equal(cluster['insecure-skip-tls-verify'], undefined);
});

void test('serving certificates: signed by the plane CA, Service names and the server address, remade when the address changes', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-unit-pki-'));
  try {
    const ca = ensureCa(path.join(dir, 'pki'));
    const caCert = new X509Certificate(fs.readFileSync(ca.cert));
    assert.ok(caCert.ca, 'the CA is a CA');
    const first = ensureServingCert(ca, path.join(dir, 's'), ['198.18.7.10']);
    const cert = new X509Certificate(fs.readFileSync(first.cert));
    assert.ok(cert.verify(caCert.publicKey), 'signed by the CA');
    assert.equal(cert.checkHost('kubernetes.default.svc'), 'kubernetes.default.svc');
    assert.equal(cert.checkHost('kubernetes.default.svc.cluster.local'), 'kubernetes.default.svc.cluster.local');
    for (const ip of ['198.18.7.10', '127.0.0.1', SERVICE_IP]) assert.equal(cert.checkIP(ip), ip);
    assert.equal(cert.checkIP('198.18.7.11'), undefined);
    assert.ok(cert.checkPrivateKey(crypto.createPrivateKey(fs.readFileSync(first.key))));

    const again = fs.readFileSync(ensureServingCert(ca, path.join(dir, 's'), ['198.18.7.10']).cert, 'utf8');
    assert.equal(again, fs.readFileSync(first.cert, 'utf8'), 'kept when nothing changed');
    const moved = new X509Certificate(fs.readFileSync(ensureServingCert(ca, path.join(dir, 's'), ['198.18.9.10']).cert));
    assert.equal(moved.checkIP('198.18.9.10'), '198.18.9.10');
    assert.equal(moved.checkIP('198.18.7.10'), undefined);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void test('applyCrd: an API server that refuses connections (restarted by another test) is waited for, not a failure', async () => {
  // A port nothing listens on: the listed server refuses every connection, as one that is restarting does.
  const closed = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
  const base = new KubeConfig();
  base.loadFromOptions({
    clusters: [{ name: 'lb', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'c', cluster: 'lb', user: 'u' }],
    currentContext: 'c',
  });
  // The EndpointSlice lists the refusing server three times, then no longer (its endpoint lease expired).
  let sliceReads = 0;
  const ok = (body: unknown) => Promise.resolve({ status: 200, headers: {}, body: JSON.stringify(body) });
  const via = {
    kubeConfig: base,
    server: 'https://127.0.0.1:1',
    request: (_method: string, p: string) => {
      if (p.includes('endpointslices')) {
        const listed = ++sliceReads <= 3 ? [{ addresses: ['127.0.0.1'] }] : [];
        return ok({
          items: [{ metadata: { name: 'kubernetes' }, addressType: 'IPv4', endpoints: listed, ports: [{ name: 'https', port: closed }] }],
        });
      }
      if (p.includes('leases')) return ok({ items: [] });
      return ok({});
    },
    getJson: () => Promise.resolve({ status: { conditions: [{ type: 'Established', status: 'True' }] } }),
    raw: () => Promise.resolve({ status: 200, headers: {}, body: '{}' }),
  } as unknown as KubeClient;
  await applyCrd(via, testCrd('refused.svm.test'), 'v1');
  assert.ok(sliceReads > 3, `the refusing server was asked ${sliceReads} times before it left the list`);
});
