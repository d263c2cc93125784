/**
 * The API servers' own metrics (GET /metrics on each server, as the plane's
 * admin): what the servers did, counted by them, not by the worker.
 */
import type { TestPlane } from './plane';

import { samples, type Sample } from '../../src/kube/apiserver-metrics';

/** The parser lives in the kube layer (svm plan --drop reads each server's /metrics too). */
export { samples, type Sample };

/** Every API server's samples of metric whose labels include `where`, one array per server. */
export async function apiserverSamples(plane: TestPlane, metric: string, where: Record<string, string> = {}): Promise<Sample[][]> {
  return Promise.all(
    plane.state.apiservers.map(async (_, i) => {
      const text = (await plane.kubeOf(i).request('GET', '/metrics')).body;
      return samples(text, metric).filter((s) => Object.entries(where).every(([k, v]) => s.labels[k] === v));
    }),
  );
}

/** The sum of a counter's samples (labels including `where`) over every API server. */
export async function apiserverSum(plane: TestPlane, metric: string, where: Record<string, string> = {}): Promise<number> {
  return (await apiserverSamples(plane, metric, where)).flat().reduce((a, s) => a + s.value, 0);
}
