/**
 * The state of one run of migrateResource, what it shows, and how the run ends. The workflow
 * (migrate-resource.ts) reads and moves it on in its phases; each message is one method here: the
 * progress query progress(), the steering messages pause(), resume() and abort() (an update's validator
 * refusePause(), refuseResume(), refuseAbort()), attachMigrationObject attach(), agreementChanged
 * agreementMayHaveChanged().
 *
 * What travels across continue-as-new is `carried` (CarriedState), the options as given and the
 * StorageVersionMigration objects; the rest lives for one run.
 */
import { Placement } from '../contract/placement';
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  deprecatePatch,
  log,
  setCurrentDetails,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { zeroCounters } from '../api/counters';
import type { MigrationPhase, StorageVersionMigrationStatus } from '../api/migration';
import { groupResourceString, type ResourceRef } from '../api/resource';
import {
  defaultMigrationOptions,
  MAX_MIGRATION_OBJECTS,
  objectsHandled,
  type CarriedState,
  type MigrateResourceInput,
  type MigrationOptions,
  type MigrationProgress,
  type MigrationResult,
  type ResolvedInput,
  type StatusReport,
  type SteerResult,
} from '../contract/definitions';
import { isTerminalPhase, migrationStatus, type FinalPhase } from '../contract/migration-status';
import type { PassRecord } from '../contract/pass-record';
import { MigrationMigrated, MigrationPhase as PhaseAttr } from '../contract/search-attributes';
import { rootMessage } from './failures';
import { MigrationActivities } from './task-start';
import { MIGRATION_FAILED } from '../contract/reasons';
import { abortAsked, end, firstMode, pauseHeld, recordFailed, startRecording, withAbort, withPause, type Mode } from './migration-mode';

/**
 * While a migration runs, its progress search attribute (MigrationMigrated)
 * is written every PROGRESS_ATTRIBUTE_CHUNKS chunks: each write is a history
 * event, and once per chunk was a sixth of them. A phase change is written at
 * once; the UI's current details and the progress query are always live.
 * Counted in chunks, never in time: what a replay decides must not depend on
 * the clock (a time-based rule met a non-determinism error in the suite when
 * a worker replayed a history after a restart).
 */
const PROGRESS_ATTRIBUTE_CHUNKS = 10;

/**
 * The StorageVersionMigration objects that mirror the migration's status, and the writes to them in order. Bounded:
 * the set is carried across continue-as-new.
 */
class MigrationObjects {
  private readonly names: Set<string>;
  /** The set was full once (said in the log once per run). */
  private saidFull = false;
  /** Writes to the objects started and not yet waited for, in order. */
  private pendingWrites: Promise<void> | undefined;

  constructor(
    names: string[] | undefined,
    private readonly resource: string,
  ) {
    this.names = new Set((names ?? []).slice(0, MAX_MIGRATION_OBJECTS));
  }

  get size(): number {
    return this.names.size;
  }

  list(): string[] {
    return [...this.names];
  }

  /** One the workflow created itself (the first run's). */
  add(name: string): void {
    this.names.add(name);
  }

  /** One the bridge attached: beyond the bound, the bridge mirrors its status itself. */
  attach(name: string | undefined): void {
    if (!name || this.names.has(name)) return;
    if (this.names.size < MAX_MIGRATION_OBJECTS) {
      this.names.add(name);
      return;
    }
    if (!this.saidFull)
      log.warn('StorageVersionMigration objects beyond the limit are not listed; the bridge mirrors their status', {
        resource: this.resource,
        limit: MAX_MIGRATION_OBJECTS,
        name,
      });
    this.saidFull = true;
  }

  /** Objects deleted since they were attached leave the set (histories from before returned nothing). */
  dropGone(written: StatusReport | void): void {
    for (const name of written?.gone ?? []) this.names.delete(name);
  }

  /**
   * Starts a write to the objects after those already in the background (at once when there are none), waited for
   * by waitForBackgroundWrites(); its failure, if any, is thrown there (never left unhandled).
   */
  writeInBackground(step: () => Promise<void>): void {
    const before = this.pendingWrites;
    const run = (async () => {
      if (before) await before;
      await step();
    })();
    run.catch(() => undefined);
    this.pendingWrites = run;
  }

  /** Waits for the writes started in the background; throws the first one's failure. */
  async waitForBackgroundWrites(): Promise<void> {
    const p = this.pendingWrites;
    this.pendingWrites = undefined;
    if (p) await p;
  }
}

export class MigrationState {
  /** The resource and the version it is migrated through (resolved again if that version stops being served while waiting). */
  ref: ResourceRef;
  readonly name: string;
  /** The options as given (what continue-as-new carries: a worker of an older version knows every field of them). */
  private readonly givenOptions: Partial<MigrationOptions> | undefined;
  /** Where it runs: the cluster (with the uid recorded at the start) when one is named, carried into the next run. */
  readonly here: Placement;
  readonly carried: CarriedState;
  readonly objects: MigrationObjects;
  phase: MigrationPhase = 'Running';
  /** Where the run is (running, paused, aborting, recording, ended: migration-mode.ts); moved by the methods below. */
  private mode: Mode;
  /** Set on success: the record of the whole pass (the result carries it). */
  private record?: PassRecord;
  /** The watcher says agreement may have changed: not a mode, news the next look at agreement takes, whatever the mode. */
  recheck = false;
  /** The scope of the chunk in flight, which an abort cancels. */
  chunkScope?: CancellationScope;
  /** The search attributes written last in this run: the phase, and at which chunk count. */
  private shownAttributes?: { phase: MigrationPhase; chunks: number };
  /** The activities this run calls (a task no worker starts in time is scheduled again: task-start.ts). */
  readonly activities: MigrationActivities;

  constructor(input: ResolvedInput) {
    // The markers of three patches folded at 0.2.0 (sparse progress attributes, a pause that stops the chunk in
    // flight, the first run's steps at once), asked here in the order their patched() calls were: deprecatePatch for
    // one release (docs/development.md, "The patch ledger").
    deprecatePatch('progress-search-attribute-every-10-chunks');
    deprecatePatch('pause-stops-the-chunk-in-flight');
    deprecatePatch('start-steps-at-once');
    this.ref = input.resource;
    this.name = groupResourceString(this.ref);
    this.givenOptions = input.options;
    this.here = Placement.running(workflowInfo().taskQueue, input.cluster);
    this.activities = new MigrationActivities(this.options.taskStartTimeoutSeconds, this.options.heartbeatTimeoutSeconds);
    this.carried = input.carried ?? { counters: zeroCounters(), failures: [], startedAt: Date.now(), runs: 0, restarts: 0 };
    this.carried.runs++;
    this.mode = firstMode(this.carried.paused === true);
    this.objects = new MigrationObjects(input.migrationObjects, this.name);
  }

  /** The options, each one not given at its default (a view of the options as given). */
  get options(): MigrationOptions {
    return { ...defaultMigrationOptions, ...this.givenOptions };
  }

  // ------------------------------------------------------------ messages

  progress(): MigrationProgress {
    const c = this.carried.counters;
    const processed = objectsHandled(c);
    const seconds = Math.max(0.001, (Date.now() - this.carried.startedAt) / 1000);
    return {
      resource: this.name,
      phase: this.phase,
      counters: { ...c },
      failures: this.carried.failures,
      continueTokenPresent: this.carried.continueToken !== undefined,
      remainingEstimate: this.carried.remainingEstimate,
      objectsPerSecond: Math.round((processed / seconds) * 10) / 10,
      startedAt: this.carried.startedAt,
      runs: this.carried.runs,
      restarts: this.carried.restarts,
      message: this.carried.message,
      ...(this.record ? { record: this.record } : {}),
      migrationObjects: this.objects.list(),
    };
  }

  pause(): SteerResult {
    this.mode = withPause(this.mode, true);
    return this.steered();
  }

  resume(): SteerResult {
    this.mode = withPause(this.mode, false);
    return this.steered();
  }

  abort(reason: string | undefined): SteerResult {
    this.mode = withAbort(this.mode, reason || 'aborted by request');
    this.chunkScope?.cancel();
    return this.steered();
  }

  attach(name: string | undefined): void {
    this.objects.attach(name);
  }

  agreementMayHaveChanged(): void {
    this.recheck = true;
  }

  /** The pause update's validator: throws when a pause cannot apply (the update is refused, it never enters history). */
  refusePause(): void {
    this.refuseSteering('pause');
    if (this.mode.is === 'paused') throw new Error(`cannot pause: the migration of ${this.name} is paused already`);
  }

  refuseResume(): void {
    this.refuseSteering('resume');
    if (this.mode.is !== 'paused') throw new Error(`cannot resume: the migration of ${this.name} is not paused`);
  }

  refuseAbort(): void {
    this.refuseSteering('abort');
  }

  private refuseSteering(what: string): void {
    if (this.mode.is === 'ended') throw new Error(`cannot ${what}: the migration of ${this.name} has ended (${this.phase})`);
    const abort = abortAsked(this.mode);
    if (abort !== undefined) throw new Error(`cannot ${what}: the migration of ${this.name} is being aborted (${abort})`);
    // Past the verdict's last hold: an acknowledged pause or abort would be followed by a success all the same.
    if (this.mode.is === 'recording')
      throw new Error(`cannot ${what}: the migration of ${this.name} has migrated every object and is recording its success`);
  }

  /** What a steering update answers: the progress, and what the migration will do next. */
  private steered(): SteerResult {
    const abort = abortAsked(this.mode);
    return { ...this.progress(), paused: pauseHeld(this.mode), ...(abort ? { abortRequested: abort } : {}) };
  }

  // ------------------------------------------------------------ where the run is, as the workflow reads it

  /** Held by a pause (an abort under way is not). */
  get paused(): boolean {
    return this.mode.is === 'paused';
  }

  /** Why an abort was asked for, once one was (the run ends Aborted at its next step); undefined until then. */
  get aborting(): string | undefined {
    return this.mode.is === 'aborting' ? this.mode.reason : undefined;
  }

  /** A pause holds, even under an abort (histories from before the verdict honoured an abort hold on it). */
  get pauseHeld(): boolean {
    return pauseHeld(this.mode);
  }

  /** The verdict records the success: from here a pause or an abort is refused. */
  startRecording(): void {
    this.mode = startRecording(this.mode);
  }

  /** The record failed: the run is back in the mode the steering signals left it in meanwhile. */
  recordFailed(): void {
    this.mode = recordFailed(this.mode);
  }

  // ------------------------------------------------------------ what it shows

  /**
   * Sets the phase and shows it with the progress: search attributes (sparse while running: PROGRESS_ATTRIBUTE_CHUNKS)
   * and the UI's current details; with writeStatus, the StorageVersionMigration objects' status too.
   */
  async publish(next: MigrationPhase, writeStatus = true): Promise<void> {
    this.phase = next;
    if (isTerminalPhase(next)) this.mode = end();
    this.upsertAttributes(next, writeStatus);
    this.showDetails(next);
    if (writeStatus) {
      await this.objects.waitForBackgroundWrites(); // statuses are written in order, to every object created so far
      this.objects.dropGone(await this.activities.short.reportStatus(this.objects.list(), this.status(), this.name));
    }
  }

  /**
   * Publishes the phase at once and writes it to the StorageVersionMigration objects in the background (the first
   * run's steps that need not wait for each other run at once): the write is waited for before the next one, before
   * continue-as-new and at the end.
   */
  publishWithBackgroundWrite(next: MigrationPhase): Promise<void> {
    const published = this.publish(next, false); // no write: settles at once
    this.objects.writeInBackground(async () =>
      this.objects.dropGone(await this.activities.short.reportStatus(this.objects.list(), this.status(), this.name)),
    );
    return published;
  }

  /** Creates the StorageVersionMigration object kubectl users see, in the background (while the first agreement is read). */
  async ensureMigrationObject(): Promise<void> {
    const name = `${this.name}-${uuid4().slice(0, 8)}`;
    const create = async () => {
      const created = await this.activities.short.ensureMigrationObject(this.ref, workflowInfo().workflowId, name);
      if (created) this.objects.add(created);
    };
    this.objects.writeInBackground(create);
  }

  /** The phase and the migrated count as search attributes, when due (a phase change, a status write, every PROGRESS_ATTRIBUTE_CHUNKS chunks). */
  private upsertAttributes(next: MigrationPhase, writeStatus: boolean): void {
    const chunks = this.carried.counters.chunks;
    const shown = this.shownAttributes;
    const due = writeStatus || shown?.phase !== next || chunks - shown.chunks >= PROGRESS_ATTRIBUTE_CHUNKS;
    if (!due) return;
    upsertSearchAttributes([
      { key: PhaseAttr, value: next },
      { key: MigrationMigrated, value: this.carried.counters.migrated },
    ]);
    this.shownAttributes = { phase: next, chunks };
  }

  /** The UI's current details: paragraphs as the UI test reads them (test/test-ui.test.ts); the message last, as the panel is short. */
  private showDetails(next: MigrationPhase): void {
    const p = this.progress();
    const c = p.counters;
    const { runs, restarts, remainingEstimate, message } = this.carried;
    setCurrentDetails(
      [
        `**${this.name}** (${this.ref.version}${this.ref.custom ? ', custom resource' : ''}): **${next}**`,
        `migrated ${c.migrated} (rewritten ${c.rewritten}), conflicts ${c.conflicts}, not found ${c.notFound}, failed ${c.failed}`,
        `chunks ${c.chunks}, run ${runs}${restarts ? `, started over ${restarts}×` : ''}, ${p.objectsPerSecond} objects/s` +
          (remainingEstimate !== undefined ? `, about ${remainingEstimate} remaining` : ''),
        ...(message ? [message] : []),
      ].join('\n\n'),
    );
  }

  /** The status the StorageVersionMigration objects get; a terminal one says when it ended. */
  private status(): StorageVersionMigrationStatus {
    const progress = this.progress();
    const { phase, message } = progress;
    const endedAt = isTerminalPhase(phase) ? Date.now() : undefined;
    return migrationStatus({ phase, message, workflowId: workflowInfo().workflowId, progress, endedAt });
  }

  // ------------------------------------------------------------ how a run ends

  /** Writes the final status (even while the workflow is being cancelled) and returns or throws the result. */
  async finish(final: FinalPhase, message: string, record?: PassRecord): Promise<MigrationResult> {
    this.carried.message = message;
    if (final === 'Succeeded') this.record = record;
    await CancellationScope.nonCancellable(async () => {
      // A background write that failed does not keep the final status from being written.
      await this.objects
        .waitForBackgroundWrites()
        .catch((err: unknown) =>
          log.warn('an earlier write of the StorageVersionMigration status failed', { resource: this.name, error: rootMessage(err) }),
        );
      await this.publish(final);
    });
    log.info('migration finished', { resource: this.name, phase: final, ...this.carried.counters });
    if (final === 'Failed') {
      throw ApplicationFailure.create({ type: MIGRATION_FAILED, message, nonRetryable: true, details: [this.progress()] });
    }
    return this.progress();
  }

  /** Continue-as-new with the whole state, once every handler has finished. */
  async continueAsNew(carried: CarriedState): Promise<never> {
    await this.objects.waitForBackgroundWrites();
    await condition(allHandlersFinished);
    // Note: typed by the workflow's signature, not `typeof migrateResource`: the workflow imports this state.
    return continueAsNew<(input: MigrateResourceInput) => Promise<MigrationResult>>(
      this.here.input({
        resource: this.ref,
        // Not the defaults filled in: an option added later (taskStartTimeoutSeconds) would make the next run's
        // input invalid to a worker of an earlier version (the options are strict), during a rollout or a rollback.
        ...(this.givenOptions ? { options: this.givenOptions } : {}),
        migrationObjects: this.objects.list(),
        // A pause holds across runs: a start over (agreement moved while paused) or a long history does not resume it.
        carried: { ...carried, paused: this.pauseHeld ? true : undefined },
      }),
    );
  }

  historyIsLong(runsSoFar: number, limit: number): boolean {
    return runsSoFar >= limit || workflowInfo().continueAsNewSuggested;
  }

  /** Ends the pass and starts a fresh one in a new run (after agreement): everything so far may have gone to the wrong version. */
  async startOver(why: string): Promise<never> {
    this.carried.restarts++;
    this.carried.message = `${why}; started over`;
    log.warn(this.carried.message, { resource: this.name });
    await CancellationScope.nonCancellable(() => this.publish(this.phase));
    return this.continueAsNew({
      ...this.carried,
      continueToken: undefined,
      counters: zeroCounters(),
      failures: [],
      agreement: undefined,
      remainingEstimate: undefined,
      resume: undefined,
    });
  }
}
