/**
 * The Temporal side of the workflow tests: the cached dev server (the binary
 * `npm run tools` builds) started by TestWorkflowEnvironment, and the
 * workflow code as the worker loads it (src/worker/workflow-bundle.ts
 * workflowBundleOption): the bundle `npm run build:workflows` made
 * (dist/workflow-bundle.js, which `npm test` builds first) while it is not
 * older than the workflows' sources, else one bundled in this process, as
 * each file did before (webpack: seconds of CPU per file). No Kubernetes:
 * activities are test doubles each test file passes to its own Worker.
 */
import { after, before } from 'node:test';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { workflowBundleOption } from '../../src/worker/workflow-bundle';
import { DefaultLogger, Runtime, type WorkflowBundleOption } from '@temporalio/worker';
import { ensureTools } from '../../src/dev/tools';
import { searchAttributeDefinitions } from '../../src/contract/search-attributes';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export interface WorkflowEnv {
  env: TestWorkflowEnvironment;
  /** Worker.create's workflowBundle. */
  bundle: WorkflowBundleOption;
}

/**
 * Registers before/after hooks that start the dev server (Temporal suggests
 * continue-as-new after `suggestContinueAsNewAt` events, so scenarios cross
 * runs) and find the workflow bundle; the returned object is filled in before
 * the first test runs.
 */
export function workflowTestEnv(suggestContinueAsNewAt: number): WorkflowEnv {
  const out = {} as WorkflowEnv;
  before(async () => {
    // Expected workflow failures are the point of several tests: keep the output to real errors.
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    out.env = await TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'existing-path', path: ensureTools(['temporal-cli']).temporal },
        searchAttributes: searchAttributeDefinitions.map((d) =>
          defineSearchAttributeKey(d.name, d.type === 'Int' ? SearchAttributeType.INT : SearchAttributeType.KEYWORD),
        ),
        extraArgs: ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${suggestContinueAsNewAt}`, '--log-level', 'error'],
      },
    });
    out.bundle = await workflowBundleOption();
  });
  after(async () => out.env?.teardown());
  return out;
}
