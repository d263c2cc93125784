/**
 * What anyone holding a Temporal namespace's credentials can do without a worker of svm's (issue 61's ten-line
 * worker): take the workflow task waiting on a queue with a hand-written poller and complete the workflow with the
 * result they choose. The record checks (src/kube/migration-record.ts) must refuse what this makes.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';

/** Completes the workflow task waiting on `queue` with `result`; returns the ID of the workflow it completed. */
export async function completeAsForger(client: Client, queue: string, result: unknown): Promise<string | undefined> {
  const namespace = client.options.namespace;
  // A long poll: the server wants a deadline, and answers at once (the task is there).
  const task = await client.withDeadline(Date.now() + 30_000, () =>
    client.workflowService.pollWorkflowTaskQueue({
      namespace,
      taskQueue: { name: queue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      identity: 'forger',
    }),
  );
  await client.workflowService.respondWorkflowTaskCompleted({
    namespace,
    taskToken: task.taskToken,
    identity: 'forger',
    commands: [
      {
        commandType: temporal.api.enums.v1.CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        completeWorkflowExecutionCommandAttributes: { result: { payloads: [defaultPayloadConverter.toPayload(result)] } },
      },
    ],
  });
  return task.workflowExecution?.workflowId ?? undefined;
}
