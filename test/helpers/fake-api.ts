/** A local plain-HTTP server standing in for an API server in unit tests, and a KubeClient that talks to it. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '../../src/kube/client';

export interface FakeApi {
  kube: KubeClient;
  close(): Promise<void>;
}

/** Starts handler on 127.0.0.1 and returns a client of it; close() stops both. */
export async function fakeApi(handler: http.RequestListener): Promise<FakeApi> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // Plain HTTP: client-node wants skipTLSVerify said for it (there is no TLS to verify).
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const kube = new KubeClient(kc);
  return {
    kube,
    close: async () => {
      kube.close();
      await new Promise((r) => server.close(r));
    },
  };
}
