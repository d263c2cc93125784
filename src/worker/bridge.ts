/**
 * The CR bridge: kubectl users create a StorageVersionMigration and wait on
 * its conditions; this controller, in the worker process, turns each new
 * object into (or attaches it to) the resource's migration workflow, aborts
 * the migration when the last object attached to it is deleted, and repairs
 * the status of objects whose workflow closed without writing one.
 *
 * What it does with an object is decided from what it observed (the object's state, its workflow's) by a pure
 * function, decide(), whose header is the bridge's decision table (src/worker/bridge-decision.ts); this file
 * observes, asks it, and acts. What it reads of a workflow (its progress, shared; missing, running or closed) is
 * bridge-workflow.ts; what it says when another controller acts on an object (own mode) is bridge-controllers.ts.
 *
 * The same bridge serves both StorageVersionMigration APIs through an
 * adapter (src/worker/migration-objects.ts): migration.k8s.io/v1alpha1 and,
 * where the operator chose svm for it (SVM_STANDARD_MIGRATIONS=own), the
 * standard storagemigration.k8s.io API. A standard object another controller
 * (the built-in) wrote first is never touched, and svm says so on it (an
 * Event); one svm acts on that another controller writes too is reported (log
 * and metric): never two controllers. Once the built-in was seen acting, a new
 * object is taken two minutes after its creation if nobody wrote it by then.
 * Both take the resource exactly as its spec names it (plural and group).
 *
 * Errors are classified before anything terminal is written: a network blip
 * talking to Temporal or Kubernetes leaves the object as it is and is retried
 * at the next resync (every 30 s, and at each re-list of the watch); only a
 * definite answer (a refusal, a closed or missing workflow) becomes a status.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { TAKEOVER_MESSAGE } from '../api/migration';
import { groupResourceString, type ResourceRef } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { KubeError } from '../kube/errors';
import { isConflict, isTransientError, retryBounded } from '../kube/retry';
import { MalformedObjectError } from '../kube/typed';
import { InvalidResourceError } from '../kube/resolve';
import { resolveExact } from '../kube/resolve-exact';
import { watchForever } from '../kube/watch';
import { abortSignal, attachMigrationObjectSignal } from '../contract/definitions';
import type { migrateResource } from '../workflows/migrate-resource';
import { migrationStatus, type StatusFacts } from '../contract/migration-status';
import { INVALID_RESOURCE } from '../contract/reasons';
import { migrationStart } from '../contract/start-options';
import type { Placement } from '../contract/placement';
import { adapterFor, sigsApi, standardApi, type MigrationObjectApi, type ObjectView } from '../kube/migration-objects';
import { decide, type BridgeAction, type BridgeSituation, type WorkflowSeen } from './bridge-decision';
import { BUILT_IN_QUIET_MS, OtherControllers, type BuiltInSeen } from './bridge-controllers';
import { WorkflowLook } from './bridge-workflow';

export { BUILT_IN_QUIET_MS, LEFT_TO_BUILT_IN_REASON, WAITING_FOR_BUILT_IN_REASON } from './bridge-controllers';

export interface BridgeOptions {
  kube: KubeClient;
  client: Client;
  /** Where its workflows are started: the cluster this bridge's worker serves, when one Temporal namespace serves several. */
  placement: Placement;
  log: Logger;
  /** How often every object is looked at again (repair, retries); default 30 s. */
  resyncSeconds?: number;
  /** How long an annotated object may stay unlisted by its workflow before it is refused; default 10 s. */
  unlistedGraceSeconds?: number;
  /** The API this bridge serves; migration.k8s.io/v1alpha1 when not given. */
  api?: MigrationObjectApi;
  /** Called when another controller writes the status of an object svm acts on (never two controllers). */
  onSharedObject?: (name: string, writers: string[]) => void;
  /** Called for each unattached standard object svm leaves to the controller that wrote it first (own mode). */
  onLeftToBuiltIn?: (name: string) => void;
  /** Where the Events about standard objects go: default (cluster-scoped objects' Events live there). */
  eventNamespace?: string;
  /** Own mode: how long from its creation a new object is left to the built-in seen acting lately (SVM_OWN_TAKE_AFTER_SECONDS); OWN_TAKE_AFTER_MS when not given. */
  ownTakeAfterMs?: number;
}

/** Errors that say nothing about the object: retry later, write nothing. */
function isTransient(err: unknown): boolean {
  // The kube layer's rule (src/kube/retry.ts), and a conflict: the next resync reads the object again.
  if (err instanceof KubeError) return isTransientError(err) || isConflict(err);
  if (err instanceof InvalidResourceError || err instanceof WorkflowNotFoundError) return false;
  // Temporal service errors (unavailable, deadline exceeded, no poller for a
  // query, ...) and anything unknown: never a reason to fail someone's migration.
  return true;
}

/** A re-look at one object that checks everything (resync, re-list, a deferred check). */
const RECHECK = 'RECHECK';

/** A resync hands over views already made; watch events are raw objects. */
const isView = (x: unknown): x is ObjectView => typeof x === 'object' && x !== null && 'ref' in x && 'state' in x;

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Bridge {
  /** Objects seen annotated but not (yet) listed by their workflow: uid -> first seen (ms). */
  private readonly unlisted = new Map<string, number>();
  /** Own mode: when another controller was last seen acting on a standard object, and on which. */
  private builtInSeen: BuiltInSeen | undefined;
  /** Objects whose status the bridge copies (more than the workflow lists), by workflow: looked at again when it ends. */
  private readonly followers = new Map<string, Map<string, ObjectView>>();
  /** What it said about other controllers (own mode), once per object. */
  private readonly others: OtherControllers;
  /** Its reads of the workflows (their progress, shared). */
  private readonly workflows: WorkflowLook;
  readonly api: MigrationObjectApi;
  private readonly apis: { sigs: MigrationObjectApi; standard: MigrationObjectApi };

  constructor(private readonly opts: BridgeOptions) {
    this.apis = { sigs: sigsApi(opts.kube), standard: standardApi(opts.kube) };
    this.api = opts.api ?? this.apis.sigs;
    this.workflows = new WorkflowLook(opts.client);
    this.others = new OtherControllers({
      kube: opts.kube,
      log: opts.log,
      api: this.api.kind,
      ...(opts.onSharedObject ? { onSharedObject: opts.onSharedObject } : {}),
      ...(opts.onLeftToBuiltIn ? { onLeftToBuiltIn: opts.onLeftToBuiltIn } : {}),
      ...(opts.eventNamespace ? { eventNamespace: opts.eventNamespace } : {}),
      ...(opts.ownTakeAfterMs !== undefined ? { ownTakeAfterMs: opts.ownTakeAfterMs } : {}),
      recheck: (obj) => this.enqueue(RECHECK, obj),
    });
  }

  private get log() {
    return this.opts.log;
  }

  /** The object as it is now; undefined when it is gone, or does not match the schema (left alone, like a malformed event). */
  private async currentObject(name: string): Promise<ObjectView | undefined> {
    try {
      return await this.api.find(name);
    } catch (err) {
      if (err instanceof MalformedObjectError) return undefined;
      throw err;
    }
  }

  /** A terminal status with its conditions (kubectl wait --for=condition=Failed returns), ended now. */
  private async writeTerminal(name: string, facts: Omit<StatusFacts, 'endedAt'>, reason: string): Promise<void> {
    await this.api.write(name, migrationStatus({ ...facts, endedAt: Date.now() }), reason);
  }

  /** Handles one watch event (or a resync of one object). Throws only on transient errors. */
  async handle(type: string, raw: unknown): Promise<void> {
    let event: ObjectView;
    try {
      event = isView(raw) ? raw : this.api.view(raw);
    } catch (err) {
      if (!(err instanceof MalformedObjectError)) throw err;
      this.log.warn({ err: err.message }, 'ignoring a StorageVersionMigration that does not match the schema');
      return;
    }
    const name = event.name;
    if (type === 'DELETED') return this.deleted(event);

    // svm owns this API here (own mode): any object another controller writes means two controllers run.
    if (this.api.kind === 'standard' && event.otherWriters.length > 0) {
      // Acting lately (by the time of its last status write, not by an old object a resync lists again, nor by one
      // a built-in turned off left Running): svm gives new objects time to be written by it first.
      const at = event.lastOtherWrite;
      if (at !== undefined && Date.now() - at < BUILT_IN_QUIET_MS && (!this.builtInSeen || at > this.builtInSeen.at))
        this.builtInSeen = { at, name, writers: event.otherWriters };
      this.others.reportShared(
        event,
        event.workflowId
          ? undefined
          : `another controller (${event.otherWriters.join(', ')}) acts on StorageVersionMigration ${event.name}, which svm was configured to own (SVM_STANDARD_MIGRATIONS=own): svm leaves it alone; turn the built-in migrator off (kube-controller-manager --controllers=...,-storage-version-migrator-controller) or run svm with SVM_STANDARD_MIGRATIONS=defer`,
      );
    }
    if (event.state === 'finished') {
      // The workflow wrote its result to the objects it lists: now copy it to those it does not.
      if (event.workflowId) this.workflows.forget(event.workflowId);
      if (event.workflowId && !this.followers.get(event.workflowId)?.has(event.uid ?? name)) this.recheckFollowers(event.workflowId);
      return;
    }
    // Updates the workflow writes (every chunk) are not looked at one by one: the resync looks at those.
    if (type !== RECHECK && event.workflowId && event.statusFromWorkflow && event.otherWriters.length === 0) return;
    // Decide on the object as it is now, not as this (possibly old) event saw it.
    const obj = await this.currentObject(name);
    if (!obj || obj.state === 'finished') return;
    if (obj.workflowId && obj.otherWriters.length > 0) this.others.reportShared(obj);
    const seen = this.builtInSeen && Date.now() - this.builtInSeen.at < BUILT_IN_QUIET_MS ? this.builtInSeen : undefined;
    const situation: BridgeSituation = {
      object: obj,
      api: this.api.kind,
      cluster: this.opts.placement.name,
      builtInActing: seen !== undefined,
      ...(this.opts.ownTakeAfterMs !== undefined ? { ownTakeAfterMs: this.opts.ownTakeAfterMs } : {}),
      now: Date.now(),
    };
    let action = decide(situation);
    let workflow: WorkflowSeen | undefined;
    if (action.act === 'lookAtWorkflow') {
      workflow = await this.lookAtWorkflow(obj, action.workflowId);
      action = decide({ ...situation, workflow });
    }
    return this.act(obj, action, workflow, seen);
  }

  /** Does what decide() said. */
  private async act(
    obj: ObjectView,
    action: BridgeAction,
    workflow: WorkflowSeen | undefined,
    seen: BuiltInSeen | undefined,
  ): Promise<void> {
    const name = obj.name;
    const key = obj.uid ?? name;
    if (action.act === 'recheckLater') {
      if (!this.unlisted.has(key)) this.unlisted.set(key, Date.now());
      setTimeout(() => this.enqueue(RECHECK, obj), action.afterMs).unref();
      return;
    }
    this.unlisted.delete(key);
    switch (action.act) {
      case 'none':
      case 'lookAtWorkflow': // decide() asks for the workflow once: it answers with an act once it has seen it
        return;
      case 'leaveToOtherController':
        // Another controller (the built-in) wrote it first: never two controllers on one object.
        this.others.stopWaiting(key);
        this.others.reportShared(
          obj,
          `another controller (${obj.otherWriters.join(', ') || 'unknown'}) runs StorageVersionMigration ${name}: left to it, svm does not act on an object another controller runs`,
        );
        this.others.leaveToOtherController(obj);
        return;
      case 'waitForOtherController':
        this.others.waitForOtherController(obj, action.takeAt, action.afterMs, seen);
        return;
      case 'attach':
        this.others.stopWaiting(key);
        return this.attach(obj, action.takeover);
      case 'copyProgress': {
        const workflowId = obj.workflowId!;
        const mine = this.followers.get(workflowId) ?? new Map<string, ObjectView>();
        this.followers.set(workflowId, mine.set(key, obj));
        await this.api.write(name, action.status, action.reason);
        return;
      }
      case 'end': {
        const closed = workflow?.state === 'closed' ? { status: workflow.status, phase: action.facts.phase } : {};
        this.log.warn({ name, ...(obj.workflowId ? { workflowId: obj.workflowId } : {}), ...closed }, action.log);
        await this.writeTerminal(name, action.facts, action.reason);
        return;
      }
    }
  }

  private recheckFollowers(workflowId: string): void {
    const mine = this.followers.get(workflowId);
    if (!mine) return;
    this.followers.delete(workflowId);
    for (const obj of mine.values()) this.enqueue(RECHECK, obj);
  }

  /** Starts (or joins) the resource's migration for obj, then annotates obj. */
  private async attach(obj: ObjectView, takeover: boolean): Promise<void> {
    const name = obj.name;
    let ref: ResourceRef;
    try {
      // Exactly the plural and group the spec names: what an admission policy authorized is what is migrated.
      ref = await resolveExact(this.opts.kube, obj.resource);
    } catch (err) {
      if (!(err instanceof InvalidResourceError)) throw err;
      this.log.warn({ name, message: err.message }, 'StorageVersionMigration refused');
      await this.writeTerminal(name, { phase: 'Failed', message: err.message }, INVALID_RESOURCE);
      return;
    }
    if (this.api.kind === 'standard') {
      // The built-in's first status: Running, and the resource's list resourceVersion (set once, immutable).
      await this.api.write(
        name,
        migrationStatus({ phase: 'Pending', message: `svm is starting the migration of ${groupResourceString(ref)}` }),
        undefined,
        ref,
      );
    }
    if (takeover) {
      // Before the workflow's first status: kubectl users see why an upstream Running object restarts.
      await this.api.write(name, migrationStatus({ phase: 'Pending', message: TAKEOVER_MESSAGE }));
    }
    // Attach first, annotate second: a crash in between leaves an object the
    // workflow lists but that is not annotated, and the next look attaches it
    // again (a no-op). The other order could leave an annotated object its
    // workflow does not know, which would be refused as not ours.
    const handle = await this.opts.client.workflow.signalWithStart<typeof migrateResource, [string | { name: string }]>('migrateResource', {
      ...this.opts.placement.start(migrationStart({ resource: ref, migrationObjects: [obj.ref] })),
      signal: attachMigrationObjectSignal,
      signalArgs: [obj.ref],
    });
    // Deleted (or replaced) meanwhile: the DELETED event handles it.
    if ((await this.api.annotate(name, obj.uid, handle.workflowId)) === 'gone') return;
    this.log.info(
      { name, api: this.api.kind, workflowId: handle.workflowId, resource: groupResourceString(ref), takeover },
      'StorageVersionMigration attached to its migration workflow',
    );
  }

  /** What an annotated object's workflow is (bridge-workflow.ts), with how long the object has gone unlisted by it. */
  private lookAtWorkflow(obj: ObjectView, workflowId: string): Promise<WorkflowSeen> {
    return this.workflows.look(workflowId, {
      unlistedSince: () => this.unlisted.get(obj.uid ?? obj.name),
      graceMs: (this.opts.unlistedGraceSeconds ?? 10) * 1000,
      reread: () => this.currentObject(obj.name),
    });
  }

  /**
   * A deleted object aborts its migration only if the workflow itself lists
   * it (the annotation alone proves nothing: its creator may have set it) and
   * no other object the workflow lists still exists (someone else may be
   * waiting on the same migration).
   */
  private async deleted(obj: ObjectView): Promise<void> {
    const name = obj.name;
    const workflowId = obj.workflowId;
    this.unlisted.delete(obj.uid ?? name);
    if (workflowId) this.followers.get(workflowId)?.delete(obj.uid ?? name);
    if (!workflowId || obj.state === 'finished') return;
    const handle = this.opts.client.workflow.getHandle(workflowId);
    // A migration gone or closed answers no signal and needs no abort; anything else is retried a few times.
    const stillWanted = async (err: unknown): Promise<boolean> => {
      if (err instanceof WorkflowNotFoundError) return false;
      const desc = await handle.describe().catch(() => undefined);
      return !desc || desc.status.name === 'RUNNING';
    };
    try {
      await retryBounded({ attempts: 5, stepMs: 2000, retryIf: stillWanted }, () => this.abortIfLast(obj, workflowId));
    } catch (err) {
      if (await stillWanted(err))
        this.log.error(
          { name, workflowId, err: errText(err) },
          'StorageVersionMigration deleted, but its migration could not be reached to abort it; abort it with `svm abort`',
        );
    }
  }

  /** Aborts the deleted object's migration when it lists the object and no other object it lists still exists. */
  private async abortIfLast(obj: ObjectView, workflowId: string): Promise<void> {
    const name = obj.name;
    const { migrationObjects } = await this.workflows.progressOf(workflowId, 0);
    if (!migrationObjects.includes(obj.ref)) {
      this.log.warn({ name, workflowId }, 'StorageVersionMigration deleted: its workflow does not list it, so it aborts nothing');
      return;
    }
    const others: string[] = [];
    for (const other of migrationObjects.filter((n) => n !== obj.ref)) {
      const { api, name: otherName } = adapterFor(other, this.apis);
      const o = await api.find(otherName).catch((err: unknown) => {
        if (err instanceof MalformedObjectError) return undefined;
        throw err;
      });
      if (o && o.workflowId === workflowId) others.push(other);
    }
    if (others.length > 0) {
      this.log.info(
        { name, workflowId, others },
        'StorageVersionMigration deleted: other objects still wait on its migration, which goes on',
      );
      return;
    }
    this.log.info({ name, workflowId }, 'StorageVersionMigration deleted: aborting its migration');
    await this.opts.client.workflow.getHandle(workflowId).signal(abortSignal, `StorageVersionMigration ${name} was deleted`);
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
    const { items, malformed } = await this.api.list();
    for (const err of malformed) this.log.warn({ err: err.message }, 'ignoring a StorageVersionMigration that does not match the schema');
    items.forEach((item) => this.enqueue(RECHECK, item));
    await this.chain;
  }
}

/** Handles one object event; exported for tests. */
export async function handleMigrationObject(opts: BridgeOptions, type: string, raw: unknown): Promise<void> {
  await new Bridge(opts).handle(type, raw);
}

/**
 * Watches the adapter's StorageVersionMigration objects until stopped, and
 * looks at all of them again every resyncSeconds. An API the cluster does not
 * serve (yet) is looked for again at each resync.
 */
export function startBridge(opts: BridgeOptions): { stop(): void } {
  const bridge = new Bridge(opts);
  let watch: { stop(): void } | undefined;
  let watching: string | undefined;
  let stopped = false;
  const startWatch = async () => {
    if (watch || stopped) return;
    const path = await bridge.api.watchPath();
    if (!path || watch || stopped) return;
    watching = path;
    watch = watchForever(opts.kube, path, {
      onList: (items) => items.forEach((item) => bridge.enqueue(RECHECK, item)),
      onEvent: (type, obj) => bridge.enqueue(type, obj),
      onError: (err) => opts.log.warn({ err: String(err), api: bridge.api.kind }, 'StorageVersionMigration watch failed; retrying'),
    });
  };
  const tryWatch = () =>
    startWatch().catch((err: unknown) =>
      opts.log.warn(
        { err: errText(err), api: bridge.api.kind },
        'StorageVersionMigration API not reachable yet; retrying at the next resync',
      ),
    );
  void tryWatch();
  let resyncing = false;
  const timer = setInterval(
    () => {
      if (resyncing) return;
      if (!watch) {
        void tryWatch();
        return;
      }
      resyncing = true;
      // The served version can change under a running worker (1.36's v1beta1, then 1.37's v1): watch the new one.
      bridge.api
        .watchPath()
        .then((path) => {
          if (path === watching || stopped) return;
          opts.log.info(
            { from: watching, to: path ?? 'none', api: bridge.api.kind },
            'StorageVersionMigration API version changed; watching again',
          );
          watch?.stop();
          watch = undefined;
          watching = undefined;
          return tryWatch();
        })
        .then(() => bridge.resync())
        .catch((err: unknown) => opts.log.warn({ err: errText(err) }, 'StorageVersionMigration resync failed; retrying at the next one'))
        .finally(() => (resyncing = false));
    },
    (opts.resyncSeconds ?? 30) * 1000,
  );
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      bridge.stop();
      watch?.stop();
    },
  };
}
