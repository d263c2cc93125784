/**
 * The one shared environment of the tests against real servers. scripts/test.sh
 * brings the local control plane up once per run and exports SVM_DEV_DIR; a
 * test file run on its own brings one up in .svm-dev (and leaves it running
 * for the next run, like `svm dev up`).
 */
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { readEnv, readState, up, type PlaneState } from '../../src/dev/plane';
import { KubeClient } from '../../src/kube/client';
import { loadWorkerSettings, type WorkerSettings } from '../../src/worker/config';

export interface TestPlane {
  dir: string;
  env: Record<string, string>;
  state: PlaneState;
  kube: KubeClient;
  /** A kube client per API server. */
  kubeOf(index: number): KubeClient;
  etcd: string;
  temporal: { client: Client; connection: Connection; address: string };
  /** Worker settings for this plane on a fresh task queue. */
  workerSettings(taskQueue: string, overrides?: Partial<WorkerSettings>): WorkerSettings;
  close(): Promise<void>;
}

export async function testPlane(): Promise<TestPlane> {
  const dir = path.resolve(process.env.SVM_DEV_DIR || '.svm-dev');
  await up({ dir, log: () => undefined }); // idempotent: instant when it is running
  const env = readEnv(dir);
  const state = readState(dir)!;
  const kube = KubeClient.fromKubeconfig(env.KUBECONFIG);
  const clients: KubeClient[] = [];
  const connection = await Connection.connect({ address: env.TEMPORAL_ADDRESS! });
  const client = new Client({ connection, namespace: env.TEMPORAL_NAMESPACE });
  return {
    dir,
    env,
    state,
    kube,
    kubeOf(index: number) {
      const k = KubeClient.fromKubeconfig(env[`KUBECONFIG_APISERVER_${index}`]);
      clients.push(k);
      return k;
    },
    etcd: env.ETCD_ENDPOINTS!,
    temporal: { client, connection, address: env.TEMPORAL_ADDRESS! },
    workerSettings(taskQueue, overrides = {}) {
      const perServer = state.apiservers.map((a) => env[`KUBECONFIG_APISERVER_${a.index}`]).join(',');
      const base = loadWorkerSettings({ TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS, KUBECONFIG: env.KUBECONFIG, TEMPORAL_TASK_QUEUE: taskQueue, SVM_BRIDGE: 'false', SVM_QPS: '0', SVM_APISERVER_KUBECONFIGS: perServer });
      return { ...base, ...overrides, temporal: { ...base.temporal, ...overrides.temporal } };
    },
    async close() {
      kube.close();
      for (const k of clients) k.close();
      await connection.close();
    },
  };
}

/** A unique suffix for names in one test. */
export const uniq = (prefix: string) => `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
