/**
 * The trigger's decisions applied, one period: per action, stop the resource's migration, write its StorageState
 * and start its migration, in that order. A migration is not started where somebody else's standard object for the
 * resource is unfinished, nor where the worker may not re-encode the resource (both said once an hour, not every
 * period). Returns names and counts only.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { StorageStateStatus } from '../api/migration';
import { groupResourceString } from '../api/resource';
import { standardFinished } from '../api/standard-migration';
import { abortSignal } from '../contract/definitions';
import type { Placement } from '../contract/placement';
import { migrationStart } from '../contract/start-options';
import type { TriggerAction } from '../contract/trigger';
import { missingReencodeRights } from '../kube/access';
import { KubeError } from '../kube/errors';
import { resolveResource } from '../kube/resolve';
import { listStandardMigrations, standardVersion } from '../kube/standard-migrations';
import { evictForeignRun, expectationOf } from '../kube/migration-record';
import { createStorageState, patchStorageStateStatus } from '../kube/storage-states';
import { CREATED_BY_ANNOTATION } from './built-in';
import type { TriggerDeps } from './trigger';

/** What a period's applying did: the StorageStates written, the migrations started and stopped, what was left. */
export interface TriggerApplied {
  written: number;
  started: string[];
  stopped: string[];
  conflicts: string[];
  needsGrant?: string[];
  waitingForStandard?: string[];
}

/** A standard object with no status this long after its creation has no controller (src/worker/unattended.ts's bound). */
const STANDARD_UNATTENDED_MS = 120_000;

/** When each resource's missing grant was last logged: once an hour per worker, not every trigger period. */
const grantWarned = new Map<string, number>();
function warnOnce(resource: string, message: string): void {
  const now = Date.now();
  if ((grantWarned.get(resource) ?? 0) > now - 3_600_000) return;
  grantWarned.set(resource, now);
  try {
    Context.current().log.warn(message, { resource });
  } catch {
    // not in an activity (a direct call): nothing to log to
  }
}

/** One call of applyTriggerActions: its actions applied in order, and what each did, counted. */
export class TriggerPeriod {
  private written = 0;
  private readonly started: string[] = [];
  private readonly stopped: string[] = [];
  private readonly conflicts: string[] = [];
  private readonly needsGrant: string[] = [];
  private readonly waitingForStandard: string[] = [];
  /** Standard objects somebody else created (not svm's delegations), unfinished, by resource: read once per period. */
  private others: Map<string, string> | undefined;

  constructor(private readonly deps: TriggerDeps) {}

  async apply(actions: TriggerAction[]): Promise<TriggerApplied> {
    for (const a of actions) await this.applyOne(a);
    return {
      written: this.written,
      started: this.started,
      stopped: this.stopped,
      conflicts: this.conflicts,
      ...(this.needsGrant.length > 0 ? { needsGrant: this.needsGrant } : {}),
      ...(this.waitingForStandard.length > 0 ? { waitingForStandard: this.waitingForStandard } : {}),
    };
  }

  private async applyOne(a: TriggerAction): Promise<void> {
    this.deps.mirrorWithoutRecord?.(a.name, a.mirrorWithoutRecord === true);
    const temporal = this.deps.temporal;
    if (a.stopMigration && temporal) await this.stop(a.name, a.stopMigration, temporal.client, temporal.placement);
    if (!(await this.writeState(a))) return;
    if (a.startMigration && temporal) await this.start(a.name, temporal.client, temporal.placement);
  }

  private async stop(name: string, reason: string, client: Client, placement: Placement): Promise<void> {
    const handle = client.workflow.getHandle(placement.id(`migrate/${name}`));
    // No waiting for it to close: a new one starts only in a later period, once this one is closed.
    // Closed (or never started): nothing to stop. Anything else is not swallowed: the activity fails and is retried.
    await handle.signal(abortSignal, reason).catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
    this.stopped.push(name);
  }

  /** The StorageState as decided; false when somebody wrote it since it was read (a conflict: decided again next period). */
  private async writeState(a: TriggerAction): Promise<boolean> {
    const status: StorageStateStatus = {
      persistedStorageVersionHashes: a.write.persisted,
      ...(a.write.current !== undefined ? { currentStorageVersionHash: a.write.current } : {}),
      lastHeartbeatTime: a.write.lastHeartbeatTime,
      currentStorageVersionHashes: a.write.reporters,
      discoveryConsistent: a.write.discoveryConsistent,
    };
    if (a.write.create) await createStorageState(this.deps.kube, a.name, a);
    try {
      await patchStorageStateStatus(this.deps.kube, a.name, status, a.write.create ? undefined : a.write.resourceVersion);
    } catch (err) {
      // Someone (a migration refining it) wrote it since we read it: decide again next period.
      if (err instanceof KubeError && err.kind === 'conflict') {
        this.conflicts.push(a.name);
        return false;
      }
      throw err;
    }
    this.written++;
    return true;
  }

  private async start(name: string, client: Client, placement: Placement): Promise<void> {
    // Upgrade tooling created a standard object for this resource, and the built-in runs it (or will): svm's
    // pass waits until it ends (and then re-encodes what is left: a current object's re-encode writes nothing).
    const theirs = await this.othersFor(name);
    if (theirs) {
      this.waitingForStandard.push(name);
      warnOnce(
        `standard:${name}`,
        `not migrating ${name} yet: StorageVersionMigration ${theirs} (storagemigration.k8s.io), created by somebody else, is not finished; svm waits for it rather than run a second migration of the resource`,
      );
      return;
    }
    const ref = await resolveResource(this.deps.kube, name);
    // svm's own pass needs list and patch on the resource: without them it could only fail with a 403 (custom
    // resources, admission and RBAC objects are left out of the shipped rights until granted). Not started; said.
    const missing = this.deps.triggerApi === 'standard' ? [] : await missingReencodeRights(this.deps.kube, ref);
    if (missing.length > 0) {
      this.needsGrant.push(name);
      warnOnce(name, `not migrating ${name}: the worker may not ${missing.join(' or ')} it; grant it with \`svm grant ${name}\``);
      return;
    }
    // One setting chooses the API: svm's own pass, or the built-in's behind svm's agreement checks (same workflow ID).
    const spec = migrationStart({ resource: ref }, this.deps.triggerApi === 'standard' ? 'delegateToBuiltIn' : 'migrateResource');
    // A run at the migration's ID that is not svm's migration would be joined, and waited on, forever: terminated first.
    const evicted = await evictForeignRun(client, placement.id(spec.id), expectationOf(placement, ref));
    if (evicted) warnOnce(`evicted:${name}`, `${evicted}; starting svm's migration of ${name}`);
    await client.workflow.start(spec.type, placement.start(spec));
    this.started.push(name);
  }

  /** The unfinished standard object somebody else created for the resource, if any (none looked for under 'own'). */
  private async othersFor(name: string): Promise<string | undefined> {
    if (this.deps.standardMigrations === 'own') return undefined;
    this.others ??= await this.readOthers();
    return this.others.get(name);
  }

  private async readOthers(): Promise<Map<string, string>> {
    const others = new Map<string, string>();
    if (!(await standardVersion(this.deps.kube))) return others;
    for (const o of (await listStandardMigrations(this.deps.kube)).items) {
      if (standardFinished(o.status) || o.metadata.annotations?.[CREATED_BY_ANNOTATION]) continue;
      // Nobody acts on it (no status STANDARD_UNATTENDED_MS after its creation: no built-in runs, which the
      // worker reports on the object): svm does not wait for a controller that is not there.
      const age = Date.now() - Date.parse(o.metadata.creationTimestamp ?? '');
      if ((o.status?.conditions ?? []).length === 0 && age >= STANDARD_UNATTENDED_MS) continue;
      others.set(groupResourceString({ group: o.spec.resource.group ?? '', resource: o.spec.resource.resource }), o.metadata.name);
    }
    return others;
  }
}
