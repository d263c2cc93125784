/**
 * The CR bridge: kubectl users create a StorageVersionMigration and wait on
 * its conditions; this controller, in the worker process, turns each new
 * object into (or attaches it to) the resource's migration workflow, aborts
 * the migration when the last object attached to it is deleted, and repairs
 * the status of objects whose workflow closed without writing one.
 *
 * What it does with an object, by its state (migrationObjectState):
 *
 *   state / situation                              action
 *   ---------------------------------------------  ------------------------------------------------
 *   finished (our terminal phase, or upstream's     nothing: it is never run again
 *     Succeeded=True / Failed=True, no phase)
 *   new, spec.continueToken set                     refused: Failed, reason ContinueTokenRefused
 *   new, resource not migratable                    refused: Failed, reason InvalidResource
 *   new, workflow-id annotation set by its creator  refused: Failed, reason WorkflowAnnotationRefused
 *     (the workflow does not list it)                 (checked again for a few seconds first: the
 *                                                     workflow's own objects are annotated at creation)
 *   new                                             attached (signalWithStart), then annotated
 *   upstreamRunning (Running=True, no phase:        taken over: attached like a new one, a whole pass,
 *     left by kube-storage-version-migrator)          spec.continueToken ignored, said in the message
 *   inProgress, its workflow closed without         repaired: the workflow's result, or Failed with
 *     a terminal status (terminated, timed out,       the reason the workflow closed
 *     cancelled, failed, completed)
 *   deleted, attached to a running workflow          abort, only if the workflow lists it and no other
 *                                                     object it lists still exists
 *
 * Errors are classified before anything terminal is written: a network blip
 * talking to Temporal or Kubernetes leaves the object as it is and is retried
 * at the next resync (every 30 s, and at each re-list of the watch); only a
 * definite answer (a refusal, a closed or missing workflow) becomes a status.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TerminatedFailure, TimeoutFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { conditionsFor } from '../api/conditions';
import {
  CONTINUE_TOKEN_REFUSED,
  CONTINUE_TOKEN_REFUSED_MESSAGE,
  StorageVersionMigration,
  TAKEOVER_MESSAGE,
  migrationObjectState,
  type MigrationPhase,
  type StorageVersionMigrationStatus,
} from '../api/migration';
import { groupResourceString } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { isRetryable, KubeError } from '../kube/errors';
import {
  annotateMigrationObject,
  findMigrationObject,
  listMigrationObjects,
  patchMigrationStatus,
  SVMS_PATH,
  WORKFLOW_ID_ANNOTATION,
} from '../kube/migrations';
import { MalformedObjectError, parseAs } from '../kube/typed';
import { InvalidResourceError, resolveResource } from '../kube/resolve';
import { watchForever } from '../kube/watch';
import { abortSignal, attachMigrationObjectSignal, progressQuery, type MigrationResult } from '../workflows/definitions';
import type { migrateResource } from '../workflows/migrate-resource';
import { startOptions } from '../workflows/start-options';

export interface BridgeOptions {
  kube: KubeClient;
  client: Client;
  taskQueue: string;
  log: Logger;
  /** How often every object is looked at again (repair, retries); default 30 s. */
  resyncSeconds?: number;
  /** How long an annotated object may stay unlisted by its workflow before it is refused; default 10 s. */
  unlistedGraceSeconds?: number;
}

type Obj = StorageVersionMigration;

/** The reason given for a closed workflow's status, per Temporal status. */
const CLOSED: Record<string, { verb: string; reason: string }> = {
  TERMINATED: { verb: 'was terminated', reason: 'WorkflowTerminated' },
  TIMED_OUT: { verb: 'timed out', reason: 'WorkflowTimedOut' },
  CANCELLED: { verb: 'was cancelled', reason: 'WorkflowCancelled' },
  FAILED: { verb: 'failed', reason: 'WorkflowFailed' },
  COMPLETED: { verb: 'completed', reason: 'WorkflowCompleted' },
};

/** Errors that say nothing about the object: retry later, write nothing. */
function isTransient(err: unknown): boolean {
  if (err instanceof KubeError) return isRetryable(err.kind) || err.kind === 'conflict';
  if (err instanceof InvalidResourceError || err instanceof WorkflowNotFoundError) return false;
  // Temporal service errors (unavailable, deadline exceeded, no poller for a
  // query, ...) and anything unknown: never a reason to fail someone's migration.
  return true;
}

/** A re-look at one object that checks everything (resync, re-list, a deferred check). */
const RECHECK = 'RECHECK';
const QUERY_TIMEOUT_MS = 10_000;

/** A query nobody answers (no worker on that task queue) must not hold the bridge: it fails, as a transient error. */
async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000}s`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Bridge {
  /** Objects seen annotated but not (yet) listed by their workflow: uid -> first seen (ms). */
  private readonly unlisted = new Map<string, number>();

  constructor(private readonly opts: BridgeOptions) {}

  private get log() {
    return this.opts.log;
  }

  /** The object as it is now; undefined when it is gone, or does not match the schema (left alone, like a malformed event). */
  private async fresh(name: string): Promise<Obj | undefined> {
    try {
      return await findMigrationObject(this.opts.kube, name);
    } catch (err) {
      if (err instanceof MalformedObjectError) return undefined;
      throw err;
    }
  }

  /** A terminal status with its conditions (kubectl wait --for=condition=Failed returns). */
  private async writeTerminal(
    name: string,
    phase: MigrationPhase,
    message: string,
    reason: string,
    extra: Partial<StorageVersionMigrationStatus> = {},
  ): Promise<void> {
    const now = new Date().toISOString();
    await patchMigrationStatus(this.opts.kube, name, {
      ...extra,
      phase,
      message,
      conditions: conditionsFor(phase, message, now, reason),
      completionTime: now,
    });
  }

  /** Handles one watch event (or a resync of one object). Throws only on transient errors. */
  async handle(type: string, raw: unknown): Promise<void> {
    let event: Obj;
    try {
      event = parseAs(StorageVersionMigration, raw, { kind: 'StorageVersionMigration' });
    } catch (err) {
      if (!(err instanceof MalformedObjectError)) throw err;
      this.log.warn({ err: err.message }, 'ignoring a StorageVersionMigration that does not match the schema');
      return;
    }
    const name = event.metadata.name;
    if (type === 'DELETED') return this.deleted(event);

    if (migrationObjectState(event.status) === 'finished') return;
    // Updates the workflow writes (every chunk) are not looked at one by one: the resync looks at those.
    if (type !== RECHECK && event.metadata.annotations?.[WORKFLOW_ID_ANNOTATION] && event.status?.workflowId) return;
    // Decide on the object as it is now, not as this (possibly old) event saw it.
    const obj = await this.fresh(name);
    if (!obj) return;
    const state = migrationObjectState(obj.status);
    if (state === 'finished') return;
    const workflowId = obj.metadata.annotations?.[WORKFLOW_ID_ANNOTATION];
    if (workflowId) return this.checkAttached(obj, workflowId);
    if (state === 'new' && obj.spec.continueToken !== undefined) {
      this.log.warn({ name }, 'StorageVersionMigration refused: spec.continueToken is set');
      await this.writeTerminal(name, 'Failed', CONTINUE_TOKEN_REFUSED_MESSAGE, CONTINUE_TOKEN_REFUSED);
      return;
    }
    return this.attach(obj, state === 'upstreamRunning');
  }

  /** Starts (or joins) the resource's migration for obj, then annotates obj. */
  private async attach(obj: Obj, takeover: boolean): Promise<void> {
    const name = obj.metadata.name;
    const spec = obj.spec.resource;
    const input = spec.group
      ? `${spec.resource}.${spec.version ? spec.version + '.' : ''}${spec.group}`
      : spec.version
        ? `${spec.resource}.${spec.version}`
        : spec.resource;
    let ref;
    try {
      ref = await resolveResource(this.opts.kube, input);
    } catch (err) {
      if (!(err instanceof InvalidResourceError)) throw err;
      this.log.warn({ name, message: err.message }, 'StorageVersionMigration refused');
      await this.writeTerminal(name, 'Failed', err.message, 'InvalidResource');
      return;
    }
    if (takeover) {
      // Before the workflow's first status: kubectl users see why an upstream Running object restarts.
      await patchMigrationStatus(this.opts.kube, name, {
        phase: 'Pending',
        message: TAKEOVER_MESSAGE,
        conditions: conditionsFor('Pending', TAKEOVER_MESSAGE, new Date().toISOString()),
      });
    }
    // Attach first, annotate second: a crash in between leaves an object the
    // workflow lists but that is not annotated, and the next look attaches it
    // again (a no-op). The other order could leave an annotated object its
    // workflow does not know, which would be refused as not ours.
    const handle = await this.opts.client.workflow.signalWithStart<typeof migrateResource, [string]>('migrateResource', {
      ...startOptions(ref, this.opts.taskQueue),
      args: [{ resource: ref, migrationObjects: [name] }],
      signal: attachMigrationObjectSignal,
      signalArgs: [name],
    });
    // Deleted (or replaced) meanwhile: the DELETED event handles it.
    if ((await annotateMigrationObject(this.opts.kube, name, obj.metadata.uid, handle.workflowId)) === 'gone') return;
    this.log.info(
      { name, workflowId: handle.workflowId, resource: groupResourceString(ref), takeover },
      'StorageVersionMigration attached to its migration workflow',
    );
  }

  /**
   * An annotated, unfinished object: is its workflow still running and does
   * it list the object? Repairs the status of one whose workflow closed,
   * refuses one the workflow does not know (its creator set the annotation).
   */
  private async checkAttached(obj: Obj, workflowId: string): Promise<void> {
    const name = obj.metadata.name;
    const key = obj.metadata.uid ?? name;
    const handle = this.opts.client.workflow.getHandle<typeof migrateResource>(workflowId);
    let status: string;
    try {
      status = (await handle.describe()).status.name; // the latest run: a continued-as-new chain is RUNNING
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      const message = obj.status?.workflowId
        ? `its migration workflow ${workflowId} no longer exists in Temporal (past the namespace's retention, or the Temporal server lost it) and never recorded a result here`
        : `the annotation ${WORKFLOW_ID_ANNOTATION} names a workflow that does not exist (${workflowId}); only svm sets it: create the StorageVersionMigration without it`;
      this.log.warn({ name, workflowId }, message);
      await this.writeTerminal(name, 'Failed', message, obj.status?.workflowId ? 'WorkflowNotFound' : 'WorkflowAnnotationRefused');
      return;
    }

    if (status === 'RUNNING' || status === 'CONTINUED_AS_NEW') {
      const { migrationObjects } = await withTimeout(handle.query(progressQuery), QUERY_TIMEOUT_MS, `querying ${workflowId}`);
      if (migrationObjects.includes(name)) {
        this.unlisted.delete(key);
        return;
      }
      if (obj.status?.workflowId === workflowId) {
        // Its workflow wrote here before, so it listed it: that run closed without a result, and the one going now is another.
        const message = `an earlier run of the migration workflow ${workflowId} ended without recording a result here; the run going now does not include this object`;
        this.log.warn({ name, workflowId }, `repairing the status of a StorageVersionMigration: ${message}`);
        await this.writeTerminal(name, 'Failed', message, 'WorkflowClosed');
        return;
      }
      // The workflow's own objects are created annotated and listed a moment later: give it time.
      const first = this.unlisted.get(key) ?? Date.now();
      this.unlisted.set(key, first);
      const grace = (this.opts.unlistedGraceSeconds ?? 10) * 1000;
      if (Date.now() - first < grace) {
        setTimeout(() => this.enqueue(RECHECK, obj), Math.min(grace, 3000)).unref();
        return;
      }
      this.unlisted.delete(key);
      const message = `refused: the annotation ${WORKFLOW_ID_ANNOTATION} was set by this object's creator (the workflow ${workflowId} does not list it); only svm sets it. Create the StorageVersionMigration without the annotation`;
      this.log.warn({ name, workflowId }, 'StorageVersionMigration refused: workflow-id annotation set by its creator');
      await this.writeTerminal(name, 'Failed', message, 'WorkflowAnnotationRefused');
      return;
    }

    // Closed. Its last act is to write a terminal status; read the object again, after the describe.
    const now = await this.fresh(name);
    if (!now || migrationObjectState(now.status) === 'finished') return;
    const closed = CLOSED[status] ?? { verb: `closed (${status})`, reason: 'WorkflowClosed' };
    let phase: MigrationPhase = 'Failed';
    let reason = closed.reason;
    let message: string;
    let extra: Partial<StorageVersionMigrationStatus> = {};
    try {
      const result: MigrationResult = await handle.result();
      if (!result.migrationObjects.includes(name)) {
        message = obj.status?.workflowId
          ? `an earlier run of the migration workflow ${workflowId} ended without recording a result here; its latest run (${result.phase}) did not include this object`
          : `refused: the annotation ${WORKFLOW_ID_ANNOTATION} was set by this object's creator (the workflow ${workflowId} completed without it); only svm sets it. Create the StorageVersionMigration without the annotation`;
        reason = obj.status?.workflowId ? 'WorkflowClosed' : 'WorkflowAnnotationRefused';
      } else {
        // The workflow finished but its last status write did not land here: write its result.
        phase = result.phase;
        reason = result.phase === 'Aborted' ? 'Aborted' : 'Failed';
        message = result.message ?? `the migration ${result.phase === 'Succeeded' ? 'succeeded' : 'ended ' + result.phase}`;
        extra = { progress: { ...result.counters }, failures: result.failures, workflowId };
      }
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
      const cause = err.cause;
      const why =
        cause instanceof TerminatedFailure
          ? `reason: ${cause.message}`
          : cause instanceof TimeoutFailure
            ? 'its execution timeout passed'
            : cause instanceof CancelledFailure
              ? 'cancelled by request'
              : cause instanceof ApplicationFailure
                ? cause.message
                : errText(cause ?? err);
      message = `the migration workflow ${workflowId} ${closed.verb} (${why}) without recording a result`;
    }
    this.log.warn({ name, workflowId, status, phase }, `repairing the status of a StorageVersionMigration: ${message}`);
    await this.writeTerminal(name, phase, message, reason, extra);
  }

  /**
   * A deleted object aborts its migration only if the workflow itself lists
   * it (the annotation alone proves nothing: its creator may have set it) and
   * no other object the workflow lists still exists (someone else may be
   * waiting on the same migration).
   */
  private async deleted(obj: Obj): Promise<void> {
    const name = obj.metadata.name;
    const workflowId = obj.metadata.annotations?.[WORKFLOW_ID_ANNOTATION];
    this.unlisted.delete(obj.metadata.uid ?? name);
    if (!workflowId || migrationObjectState(obj.status) === 'finished') return;
    const handle = this.opts.client.workflow.getHandle(workflowId);
    for (let attempt = 1; ; attempt++) {
      try {
        const { migrationObjects } = await withTimeout(handle.query(progressQuery), QUERY_TIMEOUT_MS, `querying ${workflowId}`);
        if (!migrationObjects.includes(name)) {
          this.log.warn({ name, workflowId }, 'StorageVersionMigration deleted: its workflow does not list it, so it aborts nothing');
          return;
        }
        const others: string[] = [];
        for (const other of migrationObjects.filter((n) => n !== name)) {
          const o = await this.fresh(other);
          if (o && o.metadata.annotations?.[WORKFLOW_ID_ANNOTATION] === workflowId) others.push(other);
        }
        if (others.length > 0) {
          this.log.info(
            { name, workflowId, others },
            'StorageVersionMigration deleted: other objects still wait on its migration, which goes on',
          );
          return;
        }
        this.log.info({ name, workflowId }, 'StorageVersionMigration deleted: aborting its migration');
        await handle.signal(abortSignal, `StorageVersionMigration ${name} was deleted`);
        return;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return; // nothing to abort
        // A closed workflow answers no signal and needs no abort; anything else is retried a few times.
        const desc = await handle.describe().catch(() => undefined);
        if (desc && desc.status.name !== 'RUNNING') return;
        if (attempt >= 5) {
          this.log.error(
            { name, workflowId, err: errText(err) },
            'StorageVersionMigration deleted, but its migration could not be reached to abort it; abort it with `svm abort`',
          );
          return;
        }
        await new Promise((r) => setTimeout(r, attempt * 2000));
      }
    }
  }

  private chain = Promise.resolve();
  private stopped = false;

  stop(): void {
    this.stopped = true;
  }

  /** Events are handled one at a time, in order; transient errors wait for the next resync. */
  enqueue(type: string, obj: unknown): void {
    if (this.stopped) return;
    this.chain = this.chain
      .then(() => (this.stopped ? undefined : this.handle(type, obj)))
      .catch((err: unknown) => {
        const name = (obj as { metadata?: { name?: string } })?.metadata?.name;
        if (isTransient(err))
          this.log.warn(
            { name, err: errText(err) },
            'StorageVersionMigration not handled yet (transient error); retrying at the next resync',
          );
        else this.log.error({ name, err: errText(err) }, 'StorageVersionMigration event failed');
      });
  }

  /** Every object again: attach what is unattached, repair what is stale. */
  async resync(): Promise<void> {
    const { items, malformed } = await listMigrationObjects(this.opts.kube);
    for (const err of malformed) this.log.warn({ err: err.message }, 'ignoring a StorageVersionMigration that does not match the schema');
    items.forEach((item) => this.enqueue(RECHECK, item));
    await this.chain;
  }
}

/** Handles one object event; exported for tests. */
export async function handleMigrationObject(opts: BridgeOptions, type: string, raw: unknown): Promise<void> {
  await new Bridge(opts).handle(type, raw);
}

/** Watches StorageVersionMigration objects until stopped, and looks at all of them again every resyncSeconds. */
export function startBridge(opts: BridgeOptions): { stop(): void } {
  const bridge = new Bridge(opts);
  const watch = watchForever(opts.kube, SVMS_PATH, {
    onList: (items) => items.forEach((item) => bridge.enqueue(RECHECK, item)),
    onEvent: (type, obj) => bridge.enqueue(type, obj),
    onError: (err) => opts.log.warn({ err: String(err) }, 'StorageVersionMigration watch failed; retrying'),
  });
  let resyncing = false;
  const timer = setInterval(
    () => {
      if (resyncing) return;
      resyncing = true;
      bridge
        .resync()
        .catch((err: unknown) => opts.log.warn({ err: errText(err) }, 'StorageVersionMigration resync failed; retrying at the next one'))
        .finally(() => (resyncing = false));
    },
    (opts.resyncSeconds ?? 30) * 1000,
  );
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      bridge.stop();
      watch.stop();
    },
  };
}
