/**
 * The CR bridge: kubectl users create a StorageVersionMigration and wait on
 * its conditions; this controller, in the worker process, turns each new
 * object into (or attaches it to) the resource's migration workflow, and
 * aborts the migration when its object is deleted.
 */
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { WORKFLOW_ID_ANNOTATION, svmPath } from '../activities';
import { MIGRATION_API_VERSION, StorageVersionMigration } from '../api/migration';
import { groupResourceString, migrationWorkflowId } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { InvalidResourceError, resolveResource } from '../kube/resolve';
import { watchForever } from '../kube/watch';
import { abortSignal, attachMigrationObjectSignal, migrateResource } from '../workflows/migrate-resource';
import { startOptions } from '../client/start-options';

export interface BridgeOptions {
  kube: KubeClient;
  client: Client;
  taskQueue: string;
  log: Logger;
}

const TERMINAL = new Set(['Succeeded', 'Failed', 'Aborted']);

/** Handles one object event; exported for tests. */
export async function handleMigrationObject(opts: BridgeOptions, type: string, raw: unknown): Promise<void> {
  const parsed = StorageVersionMigration.safeParse(raw);
  if (!parsed.success) {
    opts.log.warn({ issues: parsed.error.issues.length }, 'ignoring a StorageVersionMigration that does not match the schema');
    return;
  }
  const obj = parsed.data;
  const name = obj.metadata.name;
  const attachedTo = obj.metadata.annotations?.[WORKFLOW_ID_ANNOTATION];

  if (type === 'DELETED') {
    if (attachedTo && !TERMINAL.has(obj.status?.phase ?? '')) {
      opts.log.info({ name, workflowId: attachedTo }, 'StorageVersionMigration deleted: aborting its migration');
      await opts.client.workflow
        .getHandle(attachedTo)
        .signal(abortSignal, `StorageVersionMigration ${name} was deleted`)
        .catch((err: unknown) => opts.log.info({ name, err: String(err) }, 'nothing to abort'));
    }
    return;
  }
  if (attachedTo || TERMINAL.has(obj.status?.phase ?? '')) return; // already handled

  const spec = obj.spec.resource;
  const input = spec.group ? `${spec.resource}.${spec.version ? spec.version + '.' : ''}${spec.group}` : spec.version ? `${spec.resource}.${spec.version}` : spec.resource;
  try {
    const ref = await resolveResource(opts.kube, input);
    const workflowId = migrationWorkflowId(ref);
    // Annotate first: the object now belongs to that workflow, whatever happens next.
    await opts.kube.request('PATCH', svmPath(name), {
      body: JSON.stringify({ metadata: { annotations: { [WORKFLOW_ID_ANNOTATION]: workflowId } } }),
      contentType: 'application/merge-patch+json',
    });
    await opts.client.workflow.signalWithStart(migrateResource, {
      ...startOptions(ref, opts.taskQueue, { continueToken: obj.spec.continueToken }),
      args: [{ resource: ref, migrationObjects: [name], continueToken: obj.spec.continueToken }],
      signal: attachMigrationObjectSignal,
      signalArgs: [name],
    });
    opts.log.info({ name, workflowId, resource: groupResourceString(ref) }, 'StorageVersionMigration attached to its migration workflow');
  } catch (err) {
    const message = err instanceof InvalidResourceError ? err.message : `could not start the migration: ${String(err instanceof Error ? err.message : err)}`;
    opts.log.warn({ name, message }, 'StorageVersionMigration refused');
    await opts.kube.patchStatus(svmPath(name), {
      phase: 'Failed',
      message,
      conditions: [{ type: 'Failed', status: 'True', reason: 'InvalidResource', message, lastUpdateTime: new Date().toISOString() }],
    });
  }
}

/** Watches StorageVersionMigration objects until stopped; events are handled one at a time, in order. */
export function startBridge(opts: BridgeOptions): { stop(): void } {
  let chain = Promise.resolve();
  const enqueue = (type: string, obj: unknown) => {
    chain = chain.then(() => handleMigrationObject(opts, type, obj)).catch((err: unknown) => opts.log.error({ err: String(err) }, 'bridge event failed'));
  };
  return watchForever(opts.kube, `/apis/${MIGRATION_API_VERSION}/storageversionmigrations`, {
    onList: (items) => items.forEach((item) => enqueue('ADDED', item)),
    onEvent: enqueue,
    onError: (err) => opts.log.warn({ err: String(err) }, 'StorageVersionMigration watch failed; retrying'),
  });
}
