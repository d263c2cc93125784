/**
 * Recording workflow histories for the replay test (test/unit-replay.test.ts):
 * with SVM_RECORD_HISTORIES=1, the workflow tests save every run of each
 * scenario's workflow to test/fixtures/histories (README, "Changing workflow
 * code").
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expectedToolPaths } from '../../src/dev/tools';

export const recording = (): boolean => Boolean(process.env.SVM_RECORD_HISTORIES);

/** Saves every run of a workflow, following continue-as-new from its first run, as `<prefix>-<scenario>-<i>.json`. */
export function recordHistories(address: string, prefix: string, scenarioName: string, workflowId: string, firstRunId: string): void {
  const dir = path.join(__dirname, '..', 'fixtures', 'histories');
  fs.mkdirSync(dir, { recursive: true });
  const scenario = scenarioName
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60)
    .toLowerCase();
  for (let i = 0, runId: string | undefined = firstRunId; runId; i++) {
    // The CLI's proto JSON is what `temporal workflow show --output json` gives a person, and what historyFromJSON reads.
    const json = execFileSync(
      expectedToolPaths().temporal,
      ['workflow', 'show', '--address', address, '--workflow-id', workflowId, '--run-id', runId, '--output', 'json'],
      { encoding: 'utf8' },
    );
    const history = JSON.parse(json) as {
      events: Array<{ workflowExecutionContinuedAsNewEventAttributes?: { newExecutionRunId?: string } }>;
    };
    fs.writeFileSync(path.join(dir, `${prefix}-${scenario}-${i}.json`), JSON.stringify({ workflowId, history }) + '\n');
    runId = history.events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
  }
}
