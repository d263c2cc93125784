/**
 * Beside the worker: watches StorageVersion objects and CRDs, and when one
 * changes, signals the running migration of that resource so it re-checks
 * agreement at once (stopping its chunk in flight if agreement broke or
 * moved). A migration that is not running ignores it. After a restart the
 * watch resumes from a fresh list; a change missed meanwhile is still caught,
 * because every migration compares its agreement token before recording
 * success.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from 'pino';
import { groupResourceOfStorageVersion } from '../api/storage-version';
import { migrationWorkflowId } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { watchForever } from '../kube/watch';
import { agreementChangedSignal } from '../workflows/migrate-resource';

export function startAgreementWatcher(opts: { kube: KubeClient; client: Client; log: Logger }): { stop(): void } {
  const signal = async (workflowId: string, why: string) => {
    try {
      await opts.client.workflow.getHandle(workflowId).signal(agreementChangedSignal, why);
      opts.log.info({ workflowId, why }, 'signalled a migration to re-check agreement');
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) opts.log.warn({ workflowId, err: String(err) }, 'could not signal the migration');
    }
  };
  const nameOf = (obj: unknown) => (obj as { metadata?: { name?: string } }).metadata?.name ?? '';
  const storageVersions = watchForever(opts.kube, '/apis/internal.apiserver.k8s.io/v1alpha1/storageversions', {
    onList: () => undefined,
    onEvent: (type, obj) => {
      const name = nameOf(obj);
      if (name.includes('.')) void signal(migrationWorkflowId(groupResourceOfStorageVersion(name)), `StorageVersion ${name} ${type.toLowerCase()}`);
    },
    onError: (err) => opts.log.warn({ err: String(err) }, 'StorageVersion watch failed; re-listing'),
  });
  const crds = watchForever(opts.kube, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
    onList: () => undefined,
    onEvent: (type, obj) => {
      const name = nameOf(obj); // <plural>.<group>: exactly the resource's kubectl name
      const dot = name.indexOf('.');
      if (dot > 0) void signal(migrationWorkflowId({ resource: name.slice(0, dot), group: name.slice(dot + 1) }), `CustomResourceDefinition ${name} ${type.toLowerCase()}`);
    },
    onError: (err) => opts.log.warn({ err: String(err) }, 'CRD watch failed; re-listing'),
  });
  return {
    stop() {
      storageVersions.stop();
      crds.stop();
    },
  };
}
