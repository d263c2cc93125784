/** A trivial workflow for the smoke test: one activity, one timer. */
import { proxyActivities, sleep } from '@temporalio/workflow';

const { greet } = proxyActivities<{ greet(name: string): Promise<string> }>({ startToCloseTimeout: '10 seconds' });

export async function smoke(name: string): Promise<string> {
  await sleep(10);
  return greet(name);
}
