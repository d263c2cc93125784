/**
 * DeviceClasses (resource.k8s.io), the built-in resource whose encoding two
 * API servers of one binary disagree on when one runs with
 * --min-compatibility-version=1.33 (v1beta2) and the other without (v1).
 */
import type { KubeClient } from '../../src/kube/client';
import { KubeError } from '../../src/kube/errors';
import { parallel } from './crd';

export const OLD_ENCODING_FLAGS = ['--min-compatibility-version=1.33'];
export const DEVICECLASSES_PREFIX = '/registry/deviceclasses/';

/** Creates DeviceClasses through one API server, retrying the 503 of a server that has not published its storage versions yet. */
export async function createDeviceClasses(kube: KubeClient, prefix: string, count: number): Promise<void> {
  await parallel(count, 8, async (i) => {
    const body = JSON.stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: { name: `${prefix}-${i}` }, spec: {} });
    for (let attempt = 0; ; attempt++) {
      try {
        await kube.request('POST', '/apis/resource.k8s.io/v1/deviceclasses', { body });
        return;
      } catch (err) {
        if (!(err instanceof KubeError && err.kind === 'unavailable' && attempt < 30)) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  });
}
