/**
 * What `svm status` reads of migrations: each one's summary (its phase, its progress or result, and the Worker
 * Deployment Version that runs it), for one resource's latest migration or every migration of a placement. Reads
 * only; the Migrator's status() (./index.ts) is this.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, decodeVersioningBehavior } from '@temporalio/common';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { progressQuery, type MigrationProgress } from '../contract/definitions';
import type { Placement } from '../contract/placement';
import type { migrateResource } from '../workflows/migrate-resource';

export interface MigrationSummary {
  workflowId: string;
  resource: string;
  status: string;
  phase?: string;
  progress?: MigrationProgress;
  /**
   * The Worker Deployment Version that runs the migration's current run (ran it, once it ended), and its
   * versioning behavior; absent when unversioned workers run it (docs/deploy.md, "Upgrading svm").
   */
  deploymentVersion?: DeploymentVersionInfo;
}

export interface DeploymentVersionInfo {
  deploymentName: string;
  buildId: string;
  /** AUTO_UPGRADE (svm's workflows) or PINNED (an override). */
  behavior?: string;
}

/** The Worker Deployment Version of a described workflow run, from its versioningInfo. */
export function deploymentVersionOf(description: {
  raw: {
    workflowExecutionInfo?: {
      versioningInfo?: {
        behavior?: number | null;
        deploymentVersion?: { deploymentName?: string | null; buildId?: string | null } | null;
        versioningOverride?: { pinned?: { version?: { deploymentName?: string | null; buildId?: string | null } | null } | null } | null;
      } | null;
    } | null;
  };
}): DeploymentVersionInfo | undefined {
  const v = description.raw.workflowExecutionInfo?.versioningInfo;
  const pinned = v?.versioningOverride?.pinned?.version;
  const dv = pinned?.buildId ? pinned : v?.deploymentVersion;
  if (!dv?.buildId || !dv.deploymentName) return undefined;
  const behavior = pinned?.buildId ? 'PINNED' : decodeVersioningBehavior(v?.behavior ?? undefined);
  return { deploymentName: dv.deploymentName, buildId: dv.buildId, ...(behavior ? { behavior } : {}) };
}

/** The summary of one resource's latest migration (none when it has none). */
export async function summaryOf(
  client: Client,
  h: { resource: ResourceRef; workflow: WorkflowHandle<typeof migrateResource> },
): Promise<MigrationSummary[]> {
  try {
    const d = await h.workflow.describe();
    return [await summarize(client, h.workflow.workflowId, groupResourceString(h.resource), d.status.name, deploymentVersionOf(d))];
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return [];
    throw err;
  }
}

/** The summaries of every migration of the placement, each resource's latest run once. */
export async function summariesOf(client: Client, placement: Placement): Promise<MigrationSummary[]> {
  const out: MigrationSummary[] = [];
  // A named cluster's migrations only (its search attribute); a single-cluster install's, those on its task queue.
  const query = placement.query(`WorkflowType = 'migrateResource'`);
  const prefix = placement.id('migrate/');
  for await (const w of client.workflow.list({ query })) {
    if (out.some((o) => o.workflowId === w.workflowId)) continue; // older runs of the same resource
    // The latest run: its deployment version (the listing's row may be an older run of the chain).
    const d = await client.workflow
      .getHandle(w.workflowId)
      .describe()
      .catch(() => undefined);
    out.push(
      await summarize(
        client,
        w.workflowId,
        w.workflowId.startsWith(prefix) ? w.workflowId.slice(prefix.length) : w.workflowId,
        d?.status.name ?? w.status.name,
        d && deploymentVersionOf(d),
      ),
    );
  }
  return out;
}

async function summarize(
  client: Client,
  workflowId: string,
  resource: string,
  status: string,
  deploymentVersion?: DeploymentVersionInfo,
): Promise<MigrationSummary> {
  const handle = client.workflow.getHandle<typeof migrateResource>(workflowId);
  let progress: MigrationProgress | undefined;
  if (status === 'RUNNING') progress = await handle.query(progressQuery).catch(() => undefined);
  else if (status === 'COMPLETED') progress = await handle.result().catch(() => undefined);
  else if (status === 'FAILED') {
    progress = await handle.result().then(
      () => undefined,
      (err: unknown) =>
        err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure
          ? (err.cause.details?.[0] as MigrationProgress)
          : undefined,
    );
  }
  return { workflowId, resource, status, phase: progress?.phase, progress, ...(deploymentVersion ? { deploymentVersion } : {}) };
}
