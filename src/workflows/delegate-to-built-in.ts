/**
 * delegateToBuiltIn: the deferring mode's migration of one resource (same
 * workflow ID as migrateResource, migrate/<resource>.<group>: one per
 * resource whichever does the work). kube-controller-manager's built-in
 * migrator rewrites the objects; svm adds what the built-in lacks:
 *
 *   1. wait until the API servers agree on the storage version (the built-in
 *      does not look), then create a storagemigration.k8s.io object;
 *   2. follow it, re-reading the agreement at every look: the built-in knows
 *      nothing of a server that goes back to the old version mid-way;
 *   3. on the built-in's Succeeded, record success (StorageState) only if the
 *      agreement held from creation to now; otherwise, or after a Failed (the
 *      built-in never retries one), create a new object: a new whole pass;
 *   4. when no controller has written any status to the object within
 *      noActionSeconds of its creation (no built-in runs), end Failed saying
 *      so, instead of waiting for ever.
 *
 * Deterministic: every read is an activity, time is waited with condition().
 * The workflow's loop holds every await (the activities, the sleeps, the wait
 * for handlers before continue-as-new); its phases' decisions, messages and
 * state changes are synchronous methods of Delegation, its state. Note: keep
 * them synchronous: an await added between an activity's answer and the next
 * command could order one workflow task's commands differently from the
 * histories already recorded.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  deprecatePatch,
  log,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { z } from 'zod';
import { ClusterRefSchema } from '../api/cluster';
import { currentCluster, enterCluster } from './cluster-context';
import type { Activities } from '../activities';
import type { BuiltInView } from '../contract/built-in';
import { zeroCounters } from '../api/counters';
import type { MigrationPhase } from '../api/migration';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { standardRef } from '../api/standard-migration';
import {
  abortReason,
  abortSignal,
  agreementChangedSignal,
  argumentRefusal,
  HandlerArgSchemas,
  progressQuery,
  ResourceRefSchema,
  type MigrationProgress,
  type MigrationResult,
} from '../contract/definitions';
import { acceptAgreement, sameAgreement, type Agreement, type UnverifiedHold } from '../contract/agreement';
import { passRecord, type PassRecord } from '../contract/pass-record';
import { MigrationGroup, MigrationPhase as PhaseAttr, MigrationResource } from '../contract/search-attributes';
import { reschedulingActivities, taskStartWait } from './task-start';
import { AGREEMENT_CHANGED, INVALID_INPUT, MIGRATION_FAILED, STANDARD_API_NOT_SERVED } from '../contract/reasons';

const ACTIVITY_OPTIONS = {
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1s',
    maximumInterval: '30s',
    maximumAttempts: 10,
    nonRetryableErrorTypes: [AGREEMENT_CHANGED, STANDARD_API_NOT_SERVED],
  },
};

export const DelegateInputSchema = z
  .object({
    resource: ResourceRefSchema,
    /** Seconds between looks at the agreement and the built-in's object. */
    pollSeconds: z.number().int().min(1).max(3600).optional(),
    /** An agreement svm cannot verify per API server is accepted once it held this long (as migrateResource). */
    unverifiedAgreementSeconds: z.number().int().min(0).max(86_400).optional(),
    /** Seconds the built-in may leave its object without any status before the migration ends Failed (no built-in runs). */
    noActionSeconds: z.number().int().min(30).max(86_400).optional(),
    /** Objects created for the built-in before giving up (a Failed one, or a pass whose agreement broke, takes another). */
    maxPasses: z.number().int().min(1).max(100).optional(),
    /** The cluster, when one Temporal namespace serves several (src/api/cluster.ts). */
    cluster: ClusterRefSchema.optional(),
    /** Across continue-as-new only. */
    carried: z
      .object({
        passes: z.number().int().min(0),
        objects: z.array(z.string()).max(100),
        current: z.string().optional(),
        /** When the current object was created (workflow time, ms). */
        createdAt: z.number().optional(),
        agreement: z.object({ agreed: z.boolean(), token: z.string() }).loose().optional(),
        startedAt: z.number(),
        message: z.string().optional(),
        /** Why the agreement did not hold while the built-in ran the current object. */
        broken: z.string().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type DelegateInput = Omit<z.infer<typeof DelegateInputSchema>, 'carried'> & {
  carried?: Omit<NonNullable<z.infer<typeof DelegateInputSchema>['carried']>, 'agreement'> & { agreement?: Agreement };
};

/** What continue-as-new carries to the next run. */
type Carried = NonNullable<DelegateInput['carried']>;

/** Looks per run before continue-as-new (each look is a few events). */
const MAX_LOOKS_PER_RUN = 300;

export async function delegateToBuiltIn(input: DelegateInput): Promise<MigrationResult> {
  admit(input);
  input = (await enterCluster(input.cluster)).input(input);
  // A task no worker starts in time (one the server lost) is scheduled again, not waited on for ever.
  const { agreement, createBuiltInMigration, builtInMigrationState, recordAgreedHash } = reschedulingActivities<Activities>(
    ACTIVITY_OPTIONS,
    taskStartWait(),
  );
  const d = new Delegation(input);
  d.listen();
  if (!input.carried) d.announce();
  for (let looks = 0; ; looks++) {
    if (d.aborted) return d.finish('Aborted', `aborted: ${d.aborted}; the built-in migrator is not stopped by svm (it has no abort)`);
    if (looks >= MAX_LOOKS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof delegateToBuiltIn>({ ...input, carried: d.carried });
    }
    const a = await agreement(d.ref);
    const current = d.carried.current;
    if (!current) {
      // 1. Agreement first: the built-in would migrate into whichever version the server it reaches encodes.
      if (!d.accepts(a)) d.waitForAgreement(a);
      else {
        const objectName = d.nextObjectName();
        await createBuiltInMigration(d.ref, objectName, workflowInfo().workflowId);
        d.created(objectName, a);
      }
      await d.sleep();
      continue;
    }
    // 2. Follow the built-in, and the agreement beside it.
    const broke = agreementBreak(a, d.carried.agreement!);
    const b = await builtInMigrationState(current);
    if (b.state === 'gone')
      return d.finish('Aborted', `the StorageVersionMigration ${current} was deleted before the built-in finished it`);
    // Once broken, a pass stays broken: a server that went back and forth wrote old encodings meanwhile.
    d.carried.broken ??= broke;
    // 4. Nobody acts on it: say so and end, rather than wait for a controller that does not run.
    if (d.noControllerActs(b)) return d.fail(d.noControllerMessage());
    if (b.state === 'pending' || b.state === 'running') {
      d.showFollowing(b);
      await d.sleep();
      continue;
    }
    // 3. The built-in ended.
    let why = d.whyNoSuccess(b);
    if (why === undefined) {
      try {
        const recorded = await recordAgreedHash(d.ref, d.carried.agreement!);
        return d.succeeded(recorded?.hash);
      } catch (err) {
        why = `the agreement could not be confirmed at the end of ${current} (${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)})`;
      }
    }
    d.anotherPass(why);
  }
}

/** Refuses an input that does not parse (InvalidInput, not retried) before anything is read or created. */
function admit(raw: DelegateInput): void {
  const parsed = DelegateInputSchema.safeParse(raw);
  if (parsed.success) return;
  throw ApplicationFailure.create({
    type: INVALID_INPUT,
    message: `invalid input: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')}`,
    nonRetryable: true,
  });
}

/** Why the agreement no longer holds as it did when the current object was created; undefined while it does. */
function agreementBreak(a: Agreement, atCreation: Agreement): string | undefined {
  if (sameAgreement(atCreation, a)) return undefined;
  return a.agreed ? `the agreement moved (${a.checked})` : `agreement broke: ${a.reason}`;
}

/**
 * The state of one run of delegateToBuiltIn, what it shows and how it ends. Each message is one method: abort,
 * agreementChanged (listen()) and the progress query (progress()). What continue-as-new carries is `carried`.
 */
class Delegation {
  readonly ref: ResourceRef;
  readonly name: string;
  readonly carried: Carried;
  phase: MigrationPhase;
  /** Why an abort was asked for; undefined until one is. */
  aborted?: string;
  /** The agreement watcher said it may have changed: the sleep ends early. */
  private recheck = false;
  /** Set on success: the record of the built-in's pass under agreement. */
  private record?: PassRecord;
  /** An agreement svm cannot verify per API server, and since when it has held (its token unchanged). */
  private unverified?: UnverifiedHold;
  private readonly poll: string;
  private readonly unverifiedSeconds: number;
  private readonly maxPasses: number;
  private readonly noActionSeconds: number;

  constructor(input: DelegateInput) {
    this.ref = input.resource;
    this.name = groupResourceString(this.ref);
    this.poll = `${input.pollSeconds ?? 15} seconds`;
    this.unverifiedSeconds = input.unverifiedAgreementSeconds ?? 120;
    this.maxPasses = input.maxPasses ?? 3;
    this.noActionSeconds = input.noActionSeconds ?? 300;
    const c = input.carried;
    this.carried = {
      passes: c?.passes ?? 0,
      objects: c?.objects ?? [],
      current: c?.current,
      createdAt: c?.createdAt,
      agreement: c?.agreement,
      startedAt: c?.startedAt ?? Date.now(),
      message: c?.message,
      broken: c?.broken,
    };
    this.phase = c?.current ? 'Running' : 'Pending';
  }

  // ------------------------------------------------------------ messages

  listen(): void {
    setHandler(abortSignal, (arg) => {
      if (this.valid('abort', HandlerArgSchemas.abort, arg)) this.aborted = abortReason(arg) ?? 'abort requested';
    });
    setHandler(agreementChangedSignal, (arg) => {
      if (this.valid('agreementChanged', HandlerArgSchemas.agreementChanged, arg)) this.recheck = true;
    });
    setHandler(progressQuery, () => this.progress());
  }

  /**
   * Arguments as the contract publishes them (HandlerArgSchemas): an invalid one is logged (its reason, never its
   * value) and the signal ignored, as migrateResource does.
   */
  private valid(signal: string, schema: z.ZodType, arg: unknown): boolean {
    const refusal = argumentRefusal(signal, schema, arg);
    if (refusal === undefined) return true;
    deprecatePatch('signal-arguments-validated');
    log.warn(`${refusal}; the signal is ignored`, { resource: this.name });
    return false;
  }

  progress(): MigrationProgress {
    const s = this.carried;
    return {
      resource: this.name,
      phase: this.phase,
      counters: zeroCounters(),
      failures: [],
      continueTokenPresent: false,
      objectsPerSecond: 0,
      startedAt: s.startedAt,
      runs: s.passes,
      restarts: Math.max(0, s.passes - 1),
      message: s.message,
      ...(this.record ? { record: this.record } : {}),
      migrationObjects: s.objects.map(standardRef),
    };
  }

  /** Waits a poll, or less when the agreement may have changed or an abort came. */
  async sleep(): Promise<void> {
    this.recheck = false;
    await condition(() => this.recheck || this.aborted !== undefined, this.poll);
  }

  // ------------------------------------------------------------ 1. agreement, then an object for the built-in

  /** Whether to create an object under this agreement: agreed, and verified per API server or unverified for long enough. */
  accepts(a: Agreement): boolean {
    const { accepted, hold } = acceptAgreement(a, this.unverified, this.unverifiedSeconds, Date.now());
    this.unverified = hold;
    return accepted;
  }

  waitForAgreement(a: Agreement): void {
    this.show('WaitingForAgreement', a.agreed ? `waiting for agreement: ${a.checked}` : `waiting for agreement: ${a.reason}`);
  }

  /** The name of the next pass's object; the end, Failed, once maxPasses objects gave no success. */
  nextObjectName(): string {
    const s = this.carried;
    if (s.passes >= this.maxPasses)
      return this.fail(`${s.passes} built-in migrations of ${this.name} did not give a success under one agreement; ${s.message ?? ''}`);
    return `svm-${this.name.replace(/[^a-z0-9-]+/g, '-').slice(0, 200)}-${uuid4().slice(0, 8)}`;
  }

  created(objectName: string, a: Agreement): void {
    const s = this.carried;
    s.passes++;
    s.current = objectName;
    s.createdAt = Date.now();
    s.objects = [...s.objects, objectName].slice(-100);
    s.agreement = a;
    this.show('Running', `created ${objectName} for the built-in migrator under agreement on ${a.encodingVersion} (${a.checked})`);
  }

  // ------------------------------------------------------------ 2. following the built-in

  /** No controller has written any status to the current object within noActionSeconds of its creation. */
  noControllerActs(b: BuiltInView): boolean {
    const due =
      b.state === 'pending' && this.carried.createdAt !== undefined && (Date.now() - this.carried.createdAt) / 1000 >= this.noActionSeconds;
    if (due) deprecatePatch('delegate-no-action-bound');
    return due;
  }

  noControllerMessage(): string {
    return `no controller has acted on StorageVersionMigration ${this.carried.current} ${this.noActionSeconds}s after svm created it: the built-in migrator does not seem to run (kube-controller-manager --controllers=...,storage-version-migrator-controller); the object is left as it is. Start it, or run svm with SVM_STANDARD_MIGRATIONS=own and SVM_TRIGGER_API=svm`;
  }

  /** Shows the built-in at work (pending or running), or that this pass will not count. */
  showFollowing(b: BuiltInView): void {
    const s = this.carried;
    this.show(
      'Running',
      s.broken
        ? `agreement did not hold while the built-in runs ${s.current} (${s.broken}): a new migration follows when it ends`
        : `the built-in migrator ${b.state === 'pending' ? 'has not started' : 'runs'} ${s.current}${b.message ? `: ${b.message}` : ''}`,
    );
  }

  // ------------------------------------------------------------ 3. the built-in ended

  /** Why the built-in's end is no success to record (it failed, or the agreement broke meanwhile); undefined when it may be. */
  whyNoSuccess(b: BuiltInView): string | undefined {
    const s = this.carried;
    if (b.state === 'failed') return `the built-in migrator failed ${s.current} (${b.message ?? 'no reason given'})`;
    if (s.broken) return `agreement did not hold until the built-in's success on ${s.current} (${s.broken})`;
    return undefined;
  }

  /** hash: what the StorageState was refined to (undefined in histories from before it was returned). */
  succeeded(hash?: string): MigrationResult {
    const s = this.carried;
    this.record = passRecord(s.agreement!, 'built-in', {
      storageVersionHash: hash,
      object: s.current,
      clusterUid: currentCluster()?.uid,
      resource: this.name,
    });
    return this.finish(
      'Succeeded',
      `the built-in migrator migrated ${this.name} (${s.current}) and the API servers agreed on ${s.agreement!.encodingVersion} from its creation to its success: ${s.agreement!.checked}`,
    );
  }

  /** This pass does not count: the next look waits for agreement, then creates a new object (a new whole pass). */
  anotherPass(why: string): void {
    log.warn('delegated migration: another pass', { resource: this.name, why });
    const s = this.carried;
    s.current = undefined;
    s.createdAt = undefined;
    s.agreement = undefined;
    s.broken = undefined;
    this.show('WaitingForAgreement', `${why}; a new migration is created once the API servers agree`);
  }

  // ------------------------------------------------------------ what it shows, how it ends

  /** The search attributes written once, by the first run. */
  announce(): void {
    upsertSearchAttributes([
      { key: MigrationResource, value: this.name },
      { key: MigrationGroup, value: this.ref.group || 'core' },
      { key: PhaseAttr, value: 'Pending' },
    ]);
  }

  show(phase: MigrationPhase, message: string): void {
    if (phase !== this.phase) upsertSearchAttributes([{ key: PhaseAttr, value: phase }]);
    this.phase = phase;
    this.carried.message = message;
    log.info('delegated migration', { resource: this.name, phase, message });
  }

  finish(phase: 'Succeeded' | 'Aborted', message: string): MigrationResult {
    this.show(phase, message);
    return this.progress();
  }

  fail(message: string): never {
    this.show('Failed', message);
    throw ApplicationFailure.create({ type: MIGRATION_FAILED, message, nonRetryable: true, details: [this.progress()] });
  }
}
