/**
 * What the bridge asks of a migration's workflow: its progress (one query in flight per workflow, shared by every
 * object that asks meanwhile), and what it is (missing, running, or closed with its result or why), the WorkflowSeen
 * that bridge-decision.ts decides on. Reads only: Temporal errors other than "not found" are thrown as they come.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TerminatedFailure, TimeoutFailure } from '@temporalio/common';
import { withTimeout } from '../kube/timeout';
import type { ObjectView } from '../kube/migration-objects';
import { progressQuery, type MigrationProgress, type MigrationResult } from '../contract/definitions';
import type { migrateResource } from '../workflows/migrate-resource';
import type { WorkflowSeen } from './bridge-decision';

const QUERY_TIMEOUT_MS = 10_000;
/** How long an answered progress query serves further objects of the same workflow. */
const PROGRESS_REUSE_MS = 2_000;

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Why a workflow closed without a result, from its failure. */
function closedCause(err: WorkflowFailedError): string {
  const cause = err.cause;
  if (cause instanceof TerminatedFailure) return `reason: ${cause.message}`;
  if (cause instanceof TimeoutFailure) return 'its execution timeout passed';
  if (cause instanceof CancelledFailure) return 'cancelled by request';
  if (cause instanceof ApplicationFailure) return cause.message;
  return errText(cause ?? err);
}

/** The bridge's reads of its migrations' workflows, with the progress queries in flight or last answered. */
export class WorkflowLook {
  /** The progress query in flight or last answered, by workflow (progressOf). */
  private readonly progressQueries = new Map<string, { progress: Promise<MigrationProgress>; answeredAt?: number; failedAt?: number }>();

  constructor(private readonly client: Client) {}

  /** The workflow ended (its object finished): its next progress is asked anew. */
  forget(workflowId: string): void {
    this.progressQueries.delete(workflowId);
  }

  /**
   * One progress query per workflow at a time, shared by every object that asks meanwhile (and reused for
   * maxAgeMs after it answered): a hundred objects of one resource must not become a hundred concurrent queries,
   * which the Temporal server refuses past a small buffer per workflow ("consistent query buffer is full").
   */
  progressOf(workflowId: string, maxAgeMs: number): Promise<MigrationProgress> {
    const now = performance.now();
    const cached = this.progressQueries.get(workflowId);
    // In flight, answered recently enough, or failed within a query timeout (a workflow nobody serves answers no
    // query: the next hundred objects need not wait the timeout each).
    if (
      cached &&
      (cached.answeredAt === undefined
        ? cached.failedAt === undefined || now - cached.failedAt <= QUERY_TIMEOUT_MS
        : now - cached.answeredAt <= maxAgeMs)
    )
      return cached.progress;
    const entry: { progress: Promise<MigrationProgress>; answeredAt?: number; failedAt?: number } = {
      progress: withTimeout(
        this.client.workflow.getHandle<typeof migrateResource>(workflowId).query(progressQuery),
        QUERY_TIMEOUT_MS,
        `querying ${workflowId}: no answer within ${QUERY_TIMEOUT_MS / 1000}s`,
      ),
    };
    this.progressQueries.set(workflowId, entry);
    entry.progress.then(
      () => (entry.answeredAt = performance.now()),
      () => (entry.failedAt = performance.now()),
    );
    return entry.progress;
  }

  /**
   * What an annotated object's workflow is: missing, running (its progress, and how long the object has gone
   * unlisted by it: `unlistedSince`, when first seen so, or undefined), or closed (the object read again after that, by
   * `reread`, and if unfinished the workflow's result or why it closed without one). Transient errors are thrown.
   */
  async look(
    workflowId: string,
    o: { unlistedSince: () => number | undefined; graceMs: number; reread: () => Promise<ObjectView | undefined> },
  ): Promise<WorkflowSeen> {
    let status: string;
    try {
      // The latest run's: a continued-as-new chain is RUNNING.
      status = (await this.client.workflow.getHandle(workflowId).describe()).status.name;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      return { state: 'missing' };
    }
    if (status === 'RUNNING' || status === 'CONTINUED_AS_NEW') {
      const progress = await this.progressOf(workflowId, PROGRESS_REUSE_MS);
      const first = o.unlistedSince();
      return { state: 'running', progress, unlistedForMs: first === undefined ? 0 : Date.now() - first, graceMs: o.graceMs };
    }
    // Read the object again, after the describe.
    const now = await o.reread();
    if (!now || now.state === 'finished') return { state: 'closed', status, objectFinished: true };
    try {
      const result: MigrationResult = await this.client.workflow.getHandle<typeof migrateResource>(workflowId).result();
      return { state: 'closed', status, objectFinished: false, result };
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
      return { state: 'closed', status, objectFinished: false, cause: closedCause(err) };
    }
  }
}
