/**
 * The programmatic API for upgrade tooling: resolve, start (idempotent: the
 * same resource joins the same workflow), wait, status, abort, pause, resume.
 * The `svm` CLI is built on it. What status() reads of the migrations (their summaries, and the Worker Deployment
 * Version that runs each) is ./status.ts.
 *
 *   const m = await Migrator.connect({ temporal: { address: 'localhost:7233' } });
 *   const h = await m.start('widgets.example.com', { chunkSize: 200 });
 *   const result = await h.wait((p) => console.log(p.counters.migrated));
 */
import {
  Client,
  Connection,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type WorkflowHandle,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { groupResourceString, migrationWorkflowId, type ResourceRef } from '../api/resource';
import type { DiscoveredResource, KubeClient } from '../kube/client';
import { groupsNamedBy, InvalidResourceError, resolveResource } from '../kube/resolve';
import { commandPlacement, connectTemporal, type TemporalTarget } from './connect';
import {
  abortSignal,
  abortUpdate,
  defaultMigrationOptions,
  MigrationOptionsSchema,
  pauseSignal,
  pauseUpdate,
  progressQuery,
  resumeSignal,
  resumeUpdate,
  type SteerResult,
  MIGRATE_ALL_WORKFLOW_ID,
  migrateAllProgressQuery,
  TRIGGER_WORKFLOW_ID,
  type MigrateAllRow,
  type MigrationOptions,
  type MigrationProgress,
  type MigrationResult,
} from '../contract/definitions';
import type { migrateAll } from '../workflows/migrate-all';
import type { migrateResource } from '../workflows/migrate-resource';
import type { Plan } from './plan-report';
import type { PlanOptions } from '../kube/plan';
import { managedFieldsStart, migrateAllStart, migrationStart, triggerStart } from '../contract/start-options';
import type { Placement } from '../contract/placement';
import { DEFAULT_MIGRATE_ALL_PARALLELISM } from '../contract/defaults';
import { ClusterNameSchema } from '../api/cluster';
import { CLUSTER_NAME_RULE } from '../api/cluster-name';
import type { storageVersionTrigger } from '../workflows/trigger';
import type { TriggerInput } from '../contract/trigger';
import type { ManagedFieldsInput, ManagedFieldsResult } from '../contract/drop';
import type { rewriteManagedFields } from '../workflows/rewrite-managed-fields';
import { migratableResources } from '../kube/migratable';
import { MIGRATION_FAILED } from '../contract/reasons';
import { summariesOf, summaryOf, type MigrationSummary } from './status';

export type { MigrateAllRow, MigrationOptions, MigrationProgress, MigrationResult, ResourceRef };
export { deploymentVersionOf, type DeploymentVersionInfo, type MigrationSummary } from './status';
export { InvalidResourceError } from '../kube/resolve';
export { migratableResources };
export { defaultMigrationOptions };
export type { PlanOptions } from '../kube/plan';
export type { Plan, PlanItem, PlanVerdict, PlanExitCode, PlanSource } from './plan-report';
export { planTable, PLAN_ERROR_EXIT_CODE, DEFAULT_PLAN_QPS } from './plan-report';

// Loaded when first used: the Kubernetes client (KubeConfig, from @kubernetes/client-node or its bundle) is not
// needed to list or signal migrations, and `svm status` should not pay for it; making a plan needs it.
/* eslint-disable @typescript-eslint/no-require-imports */
const kubeClient = () => require('../kube/client') as typeof import('../kube/client');
const planner = () => require('../kube/plan') as typeof import('../kube/plan');
const records = () => require('../kube/drop-storage') as typeof import('../kube/drop-storage');
const identity = () => require('../kube/cluster-identity') as typeof import('../kube/cluster-identity');
/* eslint-enable @typescript-eslint/no-require-imports */

export interface MigratorOptions {
  /**
   * How to reach Temporal. Omitted: Temporal's own client configuration, as
   * the Temporal CLI reads it (the TOML profile and the TEMPORAL_* variables,
   * src/config/temporal.ts).
   */
  temporal?: TemporalTarget;
  /** Path to a kubeconfig; KUBECONFIG / in-cluster when omitted. */
  kubeconfig?: string;
  /** The kubeconfig's context to use (kubectl's --context); its current-context when omitted. */
  context?: string;
  /**
   * The cluster, when one Temporal namespace serves several (docs/fleet.md): its workflows are started on its task
   * queue, with its name in their IDs, search attributes and input. Default: temporal.cluster, else SVM_CLUSTER;
   * none: one cluster, as before.
   */
  cluster?: string;
}

export class MigrationHandle {
  constructor(
    readonly resource: ResourceRef,
    readonly workflow: WorkflowHandle<typeof migrateResource>,
  ) {}

  get workflowId(): string {
    return this.workflow.workflowId;
  }

  progress(): Promise<MigrationProgress> {
    return this.workflow.query(progressQuery);
  }

  /**
   * Waits for the migration to end; polls every intervalMs and calls onProgress when the progress changed.
   * A Failed migration resolves with phase Failed (and its message), it does not throw.
   */
  async wait(onProgress?: (p: MigrationProgress) => void, intervalMs = 1000): Promise<MigrationResult> {
    let done = false;
    let last = '';
    const poller = (async () => {
      while (!done && onProgress) {
        try {
          const p = await this.progress();
          const key = JSON.stringify([p.phase, p.counters, p.message]);
          if (key !== last) onProgress(p); // only when something changed
          last = key;
        } catch {
          /* between runs (continue-as-new) a query can miss; the next one answers */
        }
        await new Promise((r) => setTimeout(r, intervalMs));
      }
    })();
    try {
      return await this.workflow.result();
    } catch (err) {
      if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure && err.cause.type === MIGRATION_FAILED) {
        return err.cause.details?.[0] as MigrationResult;
      }
      throw err;
    } finally {
      done = true;
      await poller;
    }
  }

  abort(reason = 'aborted by request'): Promise<void> {
    return this.send('abort', () => this.workflow.signal(abortSignal, reason));
  }
  pause(): Promise<void> {
    return this.send('pause', () => this.workflow.signal(pauseSignal));
  }
  resume(): Promise<void> {
    return this.send('resume', () => this.workflow.signal(resumeSignal));
  }

  /**
   * Pause, resume or abort with an acknowledgement (the workflow's updates): resolves with the progress and what the
   * migration does next (paused, abortRequested), or throws MigrationSteerRefusedError with the migration's reason
   * (it is paused already, not paused, being aborted, recording its success), or MigrationNotRunningError. A signal
   * (pause(), resume(), abort()) that cannot apply is dropped silently; this says so. An update is answered by a
   * worker: with none running the migration's workflow tasks, no answer comes; after `answerWithinSeconds` the same
   * request is sent as a signal instead (durable: taken once a worker runs the migration) and this resolves with
   * undefined.
   */
  async steer(
    what: 'pause' | 'resume' | 'abort',
    opts: { reason?: string; answerWithinSeconds?: number } = {},
  ): Promise<SteerResult | undefined> {
    const { reason, answerWithinSeconds = 30 } = opts;
    let answer: SteerResult | undefined;
    await this.send(what, async () => {
      const update = () =>
        what === 'pause'
          ? this.workflow.executeUpdate(pauseUpdate, { args: [{}] })
          : what === 'resume'
            ? this.workflow.executeUpdate(resumeUpdate, { args: [{}] })
            : this.workflow.executeUpdate(abortUpdate, { args: [reason !== undefined ? { reason } : {}] });
      try {
        answer = await this.workflow.client.withDeadline(Date.now() + answerWithinSeconds * 1000, update);
      } catch (err) {
        if (err instanceof WorkflowUpdateFailedError)
          throw new MigrationSteerRefusedError(err.cause instanceof Error ? err.cause.message : err.message);
        if (!(err instanceof WorkflowUpdateRPCTimeoutOrCancelledError)) throw err;
        // No worker answered: the signal waits in the history for one (a pause or abort taken twice is refused or idempotent).
        if (what === 'pause') await this.workflow.signal(pauseSignal);
        else if (what === 'resume') await this.workflow.signal(resumeSignal);
        else await this.workflow.signal(abortSignal, reason ?? 'aborted by request');
      }
    });
    return answer;
  }

  /** A signal or update to a migration that is not running says so in words, with how it ended. */
  private async send(what: string, signal: () => Promise<void>): Promise<void> {
    try {
      await signal();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      const name = groupResourceString(this.resource);
      const ended = await this.workflow.describe().then(
        (d) => d.status.name,
        () => undefined,
      );
      throw new MigrationNotRunningError(
        ended
          ? `the migration of ${name} is not running (its last run is ${ended.toLowerCase()}): nothing to ${what}`
          : `there is no migration of ${name}: nothing to ${what}`,
      );
    }
  }
}

/** A signal (abort, pause, resume) sent to a migration that is not running. */
export class MigrationNotRunningError extends Error {
  override name = 'MigrationNotRunningError';
}

/** A pause, resume or abort the running migration refused, with its reason (steer()). */
export class MigrationSteerRefusedError extends Error {
  override name = 'MigrationSteerRefusedError';
}

export class Migrator {
  private discovered?: DiscoveredResource[];
  private kubeClient?: KubeClient;

  private constructor(
    readonly client: Client,
    private readonly kubeconfig: { path?: string; context?: string },
    /** Where its workflows run: the cluster's task queue, IDs and search attribute when one is named. */
    readonly placement: Placement,
    private readonly connection: Connection,
  ) {}

  /** The task queue migrations are started on: the cluster's own when one is named. */
  get taskQueue(): string {
    return this.placement.taskQueue;
  }

  /** The cluster, when one is named. */
  get cluster(): string | undefined {
    return this.placement.name;
  }

  /**
   * The placement with the uid pinned to the named cluster, for a start's input. Refused while the cluster's
   * identity is in conflict: nothing is started.
   */
  private pinned(): Promise<Placement> {
    return identity().pinnedPlacement(this.client, this.placement, 'Nothing was started');
  }

  /** The uid pinned to the named cluster (undefined when none is named or it is not registered); throws on a conflict. */
  async pinnedUid(): Promise<string | undefined> {
    return (await this.pinned()).uid;
  }

  /** The Kubernetes client, made (from the kubeconfig given to connect) when first needed: status and signals by workflow need none. */
  get kube(): KubeClient {
    return (this.kubeClient ??= kubeClient().KubeClient.fromKubeconfig(this.kubeconfig.path, { context: this.kubeconfig.context }));
  }

  static async connect(opts: MigratorOptions = {}): Promise<Migrator> {
    const { client, connection, settings: t } = await connectTemporal(opts.temporal);
    const here = commandPlacement(t, opts.cluster);
    if (here.name !== undefined && !ClusterNameSchema.safeParse(here.name).success) {
      await connection.close();
      throw new RangeError(`cluster "${here.name}": ${CLUSTER_NAME_RULE}`);
    }
    return new Migrator(client, { path: opts.kubeconfig, context: opts.context }, here, connection);
  }

  async close(): Promise<void> {
    this.kubeClient?.close();
    await this.connection.close();
  }

  /**
   * What must be migrated before the next upgrade step can go on: CRDs with
   * old storedVersions, StorageStates with old or unknown hashes, resources
   * whose API servers disagree, StorageStates saying migrated that no whole pass in Temporal backs; each with its object count and an estimate at
   * opts.qps (default 100). plan.exitCode: 0 nothing, 1 needed, 2 blocked.
   * A read: nothing is written (src/client/plan.ts).
   */
  async plan(opts: PlanOptions = {}): Promise<Plan> {
    // A settled StorageState counts only on the migration's record, read through this client's Temporal.
    // A named cluster's records count only against its pinned uid, and only for the cluster the kubeconfig reaches.
    const here = await identity().judgedPlacement(this.client, this.kube, this.placement);
    return planner().makePlan(this.kube, {
      migrationOf: records().migrationRecords(this.client, here),
      cluster: here.name,
      ...opts,
    });
  }

  /** Resolves and validates a resource name; throws InvalidResourceError with the reason. */
  async resolve(resource: string): Promise<ResourceRef> {
    // A name with a group: the discovery of that group alone, unless the whole one is already here (startAll).
    if (!this.discovered && groupsNamedBy(resource).length === 0) this.discovered = await this.kube.discover();
    return resolveResource(this.kube, resource, this.discovered);
  }

  /** Starts the migration of a resource, or joins the one already running. Nothing is written before validation. */
  async start(resource: string | ResourceRef, options: Partial<MigrationOptions> = {}): Promise<MigrationHandle> {
    validateOptions(options);
    const ref = typeof resource === 'string' ? await this.resolve(resource) : resource;
    const spec = migrationStart({ resource: ref, options });
    const workflow = await this.client.workflow.start<typeof migrateResource>(spec.type, (await this.pinned()).start(spec));
    return new MigrationHandle(ref, workflow);
  }

  /**
   * The initializer: migrates every migratable resource (or the chosen ones),
   * `parallelism` at a time, as one durable workflow (migrateAll, workflow ID
   * svm-migrate-all) whose children share the workers' budget. Resources are
   * resolved and checked here, before anything starts. If it is already
   * running, this joins it (`onStart` says so). Returns one row per resource
   * once every migration has ended; never throws for a failed migration: see
   * each row. The client may go away: the workflow goes on, and calling this
   * again follows it.
   */
  async migrateAll(
    opts: {
      parallelism?: number;
      options?: Partial<MigrationOptions>;
      /** Resource names as `svm migrate` takes them; default: every migratable resource. */
      resources?: string[];
      onDone?: (row: MigrateAllRow) => void;
      /** Called once started (or joined: it was already running). */
      onStart?: (started: { workflowId: string; joined: boolean; resources: number }) => void;
    } = {},
  ): Promise<MigrateAllRow[]> {
    const h = await this.startAll(opts);
    opts.onStart?.({ workflowId: h.workflowId, joined: h.joined, resources: h.resources.length });
    const reported = new Set<string>();
    const report = (rows: MigrateAllRow[]) => {
      for (const r of rows) {
        if (reported.has(r.resource)) continue;
        reported.add(r.resource);
        opts.onDone?.(r);
      }
    };
    let finished = false;
    const result = h.handle.result().finally(() => (finished = true));
    while (!finished) {
      try {
        report((await h.handle.query(migrateAllProgressQuery)).done);
      } catch {
        // no worker has the workflow at the moment: the result still comes
      }
      await Promise.race([result.catch(() => undefined), new Promise((r) => setTimeout(r, 1000))]);
    }
    const rows = await result;
    report(rows);
    return rows;
  }

  /** Starts the initializer's workflow (or finds it running) without waiting for it. */
  async startAll(
    opts: { parallelism?: number; options?: Partial<MigrationOptions>; resources?: string[] } = {},
  ): Promise<{ handle: WorkflowHandle<typeof migrateAll>; workflowId: string; joined: boolean; resources: ResourceRef[] }> {
    validateOptions(opts.options ?? {});
    const parallelism = opts.parallelism ?? DEFAULT_MIGRATE_ALL_PARALLELISM;
    if (!Number.isInteger(parallelism) || parallelism < 1 || parallelism > 64)
      throw new RangeError(`parallelism must be a whole number between 1 and 64, got ${parallelism}`);
    this.discovered = await this.kube.discover();
    const names = opts.resources ?? migratableResources(this.discovered).map((r) => (r.group ? `${r.name}.${r.group}` : r.name));
    // Every name is resolved and checked before anything starts (an unknown one refuses the whole run).
    const resources: ResourceRef[] = [];
    for (const n of names) resources.push(await this.resolve(n));
    if (resources.length === 0) throw new InvalidResourceError('no migratable resource to migrate');
    const workflowId = this.placement.id(MIGRATE_ALL_WORKFLOW_ID);
    const running = await this.client.workflow
      .getHandle(workflowId)
      .describe()
      .then((d) => d.status.name === 'RUNNING')
      .catch(() => false);
    const options = opts.options && Object.keys(opts.options).length ? { options: opts.options } : {};
    const spec = migrateAllStart({ resources, parallelism, ...options }, opts.resources !== undefined);
    const handle = await this.client.workflow.start<typeof migrateAll>(spec.type, (await this.pinned()).start(spec));
    return { handle, workflowId, joined: running, resources };
  }

  /**
   * Starts the periodic trigger (one instance: starting it again joins the
   * running one), which keeps StorageState objects and starts migrations by
   * itself when a storage version changes.
   */
  async startTrigger(input: TriggerInput): Promise<WorkflowHandle<typeof storageVersionTrigger>> {
    if (!Number.isInteger(input.periodSeconds) || input.periodSeconds < 1)
      throw new RangeError(`periodSeconds must be a whole number >= 1, got ${input.periodSeconds}`);
    const spec = triggerStart(input);
    return this.client.workflow.start<typeof storageVersionTrigger>(spec.type, (await this.pinned()).start(spec));
  }

  /**
   * Brings the managedFields entries of a resource at an API version about to be removed to another version
   * (rewriteManagedFields, run by the worker as its own fenced identity; off unless turned on:
   * deploy/managed-fields.yaml), and returns what it did. One such run per resource and version at a time: a
   * second call joins the first. A refusal fails with the reason (ApplicationFailure InvalidInput or NotEnabled).
   */
  async rewriteManagedFields(input: ManagedFieldsInput): Promise<ManagedFieldsResult> {
    const spec = managedFieldsStart(input);
    return this.client.workflow.execute<typeof rewriteManagedFields>(spec.type, (await this.pinned()).start(spec));
  }

  /** Stops the trigger (it can be started again later; StorageStates older than the staleness bound are then reset). */
  async stopTrigger(): Promise<void> {
    const h = this.client.workflow.getHandle(this.placement.id(TRIGGER_WORKFLOW_ID));
    await h.cancel();
    await h.result().catch(() => undefined);
  }

  /** A handle on the latest migration of a resource. */
  async handle(resource: string | ResourceRef): Promise<MigrationHandle> {
    const ref = typeof resource === 'string' ? await this.resolve(resource) : resource;
    return new MigrationHandle(ref, this.client.workflow.getHandle<typeof migrateResource>(this.placement.id(migrationWorkflowId(ref))));
  }

  /** Status of one resource's latest migration, or of every migration of its placement (./status.ts). */
  async status(resource?: string): Promise<MigrationSummary[]> {
    return resource ? summaryOf(this.client, await this.handle(resource)) : summariesOf(this.client, this.placement);
  }
}

/** Refuses nonsense before anything is started: the same schema the workflow checks its input with. */
export function validateOptions(o: Partial<MigrationOptions>): void {
  const parsed = MigrationOptionsSchema.partial().safeParse(o);
  if (!parsed.success) {
    throw new RangeError(
      parsed.error.issues.map((i) => (i.code === 'unrecognized_keys' ? `unknown option(s) ${i.keys.join(', ')}` : i.message)).join('; '),
    );
  }
}
