/**
 * kubectl against a plane as an operator runs it (the plane's kubeconfig: its one API address), and what the tests
 * of the standard API do with it: create a StorageVersionMigration and `kubectl wait` on its Succeeded condition.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestPlane } from './plane';

const run = promisify(execFile);

/** kubectl ARGS on plane, input on its stdin when given; bounded at 120 s. */
export function kubectlOn(plane: TestPlane, args: string[], input?: string): Promise<{ stdout: string; stderr: string }> {
  const p = run(plane.env.KUBECTL!, ['--kubeconfig', plane.env.KUBECONFIG!, ...args], { timeout: 120_000 });
  if (input !== undefined) p.child.stdin!.end(input);
  return p;
}

/** `kubectl create` of a standard StorageVersionMigration of resource at apiVersion, then `kubectl wait` until it is Succeeded. */
export async function createStandardAndWait(
  plane: TestPlane,
  apiVersion: string,
  name: string,
  resource: { group: string; resource: string },
): Promise<void> {
  await kubectlOn(
    plane,
    ['create', '-f', '-'],
    JSON.stringify({ apiVersion, kind: 'StorageVersionMigration', metadata: { name }, spec: { resource } }),
  );
  const wait = await kubectlOn(plane, [
    'wait',
    '--for=condition=Succeeded',
    `storageversionmigrations.storagemigration.k8s.io/${name}`,
    '--timeout=120s',
  ]);
  assert.match(wait.stdout, /condition met/);
}
