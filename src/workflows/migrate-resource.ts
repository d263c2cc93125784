/**
 * migrateResource: one durable workflow per resource (ID migrate/<resource>.<group>).
 * Deterministic orchestration only; every Kubernetes call is an activity.
 *
 * The workflow is its three phases, each a function below:
 *   1. waitForAgreement: until every API server agrees on the resource's
 *      encoding version (phase WaitingForAgreement, naming who disagrees);
 *      take the agreement's token. Waiting continues-as-new like chunking, so
 *      it can last days.
 *   2. migrateChunks: a whole pass, chunk after chunk from the beginning of
 *      the list: list one page and no-op update its objects (migrateChunk),
 *      fold in the counters, move the continue token on. Pause / abort are
 *      honoured between and during chunks. An agreementChanged signal (from
 *      the watcher) re-checks agreement while the chunk runs; if it broke or
 *      moved, the chunk is stopped and the pass starts over. A resource that
 *      is no longer served (404 on the resource itself) starts it over too.
 *   3. verdict: failures make it Failed (naming them, never quoting values);
 *      otherwise agreement is read once more and its token compared with the
 *      one taken at the start. Only if it held is the pass a success: then
 *      (a separate effect) the StorageState is refined and a CRD's
 *      storedVersions reduced. Otherwise the pass starts over.
 *
 * Whatever ends the workflow, its StorageVersionMigration objects say so
 * (run()'s catch): Succeeded, Aborted, or Failed with the reason. A continue
 * token is only ever one this workflow got from its own pass: the input has
 * no token, and carried state is accepted only in a run continued from an
 * earlier run of this workflow.
 */
import {
  ActivityCancellationType,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  condition,
  ContinueAsNew,
  continueAsNew,
  isCancellation,
  log,
  patched,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities, Agreement } from '../activities';
import type { ChunkResult } from '../activities/migrate-chunk';
import type { MigrationPhase, StorageVersionMigrationStatus } from '../api/migration';
import { addCounters, zeroCounters } from '../api/counters';
import { groupResourceString, migrationWorkflowId, type ResourceRef } from '../api/resource';
import {
  abortReason,
  abortSignal,
  abortUpdate,
  argumentRefusal,
  attachedName,
  HandlerArgSchemas,
  MAX_MIGRATION_OBJECTS,
  type StatusReport,
  pauseUpdate,
  resolutionUpdate,
  resumeUpdate,
  type ResolvedInput,
  type SteerResult,
  agreementChangedSignal,
  attachMigrationObjectSignal,
  defaultMigrationOptions,
  explainInput,
  nextPageLimit,
  MigrateResourceInputSchema,
  pauseSignal,
  progressQuery,
  resumeSignal,
  type CarriedState,
  type MigrateResourceInput,
  type MigrationOptions,
  type MigrationProgress,
  type MigrationResult,
} from '../contract/definitions';
import { MigrationGroup, MigrationMigrated, MigrationPhase as PhaseAttr, MigrationResource } from '../contract/search-attributes';
import { reschedulingActivities, taskStartWait } from './task-start';
import type { z } from 'zod';

export * from '../contract/definitions';

/** Bugs, not weather: retrying them only delays the failure. */
const PROGRAMMING_ERRORS = ['TypeError', 'ReferenceError', 'SyntaxError', 'ZodError'];

/**
 * A proxy per chunk, so that each chunk carries its own summary in the UI's event history. Every proxy here
 * schedules a task again when no worker starts it within taskStartWait seconds (task-start.ts); undefined in
 * runs from before that (their histories replay as they ran).
 */
const chunkActivities = (heartbeatTimeoutSeconds: number, summary: string, taskStartWait: number | undefined) =>
  reschedulingActivities<Activities>(
    {
      summary,
      // An abort waits for the chunk to stop, so its partial counters arrive.
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      startToCloseTimeout: '10 minutes',
      heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
      retry: {
        initialInterval: '2s',
        backoffCoefficient: 2,
        maximumInterval: '1 minute',
        maximumAttempts: 12,
        nonRetryableErrorTypes: PROGRAMMING_ERRORS,
      },
    },
    taskStartWait,
  );
/** The short activities: an agreement check, recording success, the StorageVersionMigration objects, resolving. */
const shortActivities = (taskStartWait: number | undefined) =>
  reschedulingActivities<Activities>(
    {
      startToCloseTimeout: '1 minute',
      retry: {
        initialInterval: '1s',
        maximumInterval: '30s',
        maximumAttempts: 10,
        nonRetryableErrorTypes: [...PROGRAMMING_ERRORS, 'AgreementChanged', 'InvalidResource'],
      },
    },
    taskStartWait,
  );
type ShortActivities = ReturnType<typeof shortActivities>;

const MAX_FAILURES = 50;
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
/** Agreement polls per run while waiting, before continue-as-new (Temporal may suggest it sooner). */
const MAX_WAITS_PER_RUN = 500;

type Final = 'Succeeded' | 'Failed' | 'Aborted';

/** Ends the pass and starts a fresh one (after agreement): everything so far may have gone to the wrong version. */
class StartOver {
  constructor(readonly why: string) {}
}

/** One run of the workflow: its state, what it shows, and how it ends. */
class Migration {
  /** The resource and the version it is migrated through (resolved again if that version stops being served while waiting). */
  ref: ResourceRef;
  readonly name: string;
  readonly options: MigrationOptions;
  /** The options as given (what continue-as-new carries: a worker of an older version knows every field of them). */
  private readonly givenOptions: Partial<MigrationOptions> | undefined;
  readonly s: CarriedState;
  readonly objects: Set<string>;
  /** The attached set was full once (said in the log once per run). */
  private saidFull = false;
  phase: MigrationPhase = 'Running';
  aborted?: string;
  paused = false;
  /** The verdict is recording the success: a pause or an abort can no longer apply, and is refused. */
  recordingSuccess = false;
  /** The watcher says agreement may have changed. */
  recheck = false;
  chunkScope?: CancellationScope;
  /** An agreement that could not be verified per server, and since when it has held unchanged. */
  unverified?: { token: string; since: number };
  /** Histories from before sparse progress attributes wrote them after every chunk: they replay as they ran. */
  readonly sparseAttributes = patched('progress-search-attribute-every-10-chunks');
  /** A pause stops the chunk in flight (it goes on where it stopped on resume); before, it waited for the chunk's end. */
  readonly pauseMidChunk = patched('pause-stops-the-chunk-in-flight');
  /**
   * The first run's steps that need not wait for each other run at once: the StorageVersionMigration object is
   * created while the first agreement is read, and the Running status is written while the first chunk runs (a
   * migration of a few objects spent most of its time in these round trips). Runs from before replay as they ran.
   */
  readonly stepsAtOnce = patched('start-steps-at-once');
  /** Writes to the StorageVersionMigration objects started and not yet waited for (stepsAtOnce), in order. */
  private pending: Promise<void> | undefined;
  /** The search attributes written last in this run: the phase, and at which chunk count. */
  private shown?: { phase: MigrationPhase; chunks: number };
  /** Seconds a task may wait for a worker before it is scheduled again; undefined in runs from before that. */
  readonly taskStartWait: number | undefined;
  readonly act: ShortActivities;

  constructor(input: ResolvedInput, reschedulesTasks: boolean) {
    this.ref = input.resource;
    this.name = groupResourceString(this.ref);
    this.options = { ...defaultMigrationOptions, ...input.options };
    this.givenOptions = input.options;
    this.taskStartWait = reschedulesTasks ? this.options.taskStartTimeoutSeconds : undefined;
    this.act = shortActivities(this.taskStartWait);
    this.s = input.carried ?? { counters: zeroCounters(), failures: [], startedAt: Date.now(), runs: 0, restarts: 0 };
    this.s.runs++;
    this.objects = new Set((input.migrationObjects ?? []).slice(0, MAX_MIGRATION_OBJECTS));
  }

  installHandlers(): void {
    setHandler(progressQuery, () => this.progress());
    const abort = (reason: string | undefined) => {
      this.aborted = reason || 'aborted by request';
      this.chunkScope?.cancel();
    };
    // Each signal's argument is checked first (validSignal): an invalid one is logged and the signal ignored.
    setHandler(abortSignal, (arg) => {
      if (this.validSignal('abort', HandlerArgSchemas.abort, arg)) abort(abortReason(arg));
    });
    setHandler(pauseSignal, (arg) => {
      if (this.validSignal('pause', HandlerArgSchemas.empty, arg)) this.paused = true;
    });
    setHandler(resumeSignal, (arg) => {
      if (this.validSignal('resume', HandlerArgSchemas.empty, arg)) this.paused = false;
    });
    setHandler(attachMigrationObjectSignal, (arg) => {
      if (!this.validSignal('attachMigrationObject', HandlerArgSchemas.attachMigrationObject, arg)) return;
      const name = attachedName(arg);
      if (!name || this.objects.has(name)) return;
      // Bounded (it is carried across continue-as-new): objects beyond it get the status from the bridge.
      if (this.objects.size >= MAX_MIGRATION_OBJECTS) {
        if (!this.saidFull)
          log.warn('StorageVersionMigration objects beyond the limit are not listed; the bridge mirrors their status', {
            resource: this.name,
            limit: MAX_MIGRATION_OBJECTS,
            name,
          });
        this.saidFull = true;
        return;
      }
      this.objects.add(name);
    });
    setHandler(agreementChangedSignal, (why) => {
      if (this.validSignal('agreementChanged', HandlerArgSchemas.agreementChanged, why)) this.recheck = true;
    });
    // The same steering with an acknowledgement: refused (validator) when its argument is not the contract's or
    // it cannot apply, else the new state.
    const steerable = (what: string) => {
      if (this.phase === 'Succeeded' || this.phase === 'Failed' || this.phase === 'Aborted')
        throw new Error(`cannot ${what}: the migration of ${this.name} has ended (${this.phase})`);
      if (this.aborted) throw new Error(`cannot ${what}: the migration of ${this.name} is being aborted (${this.aborted})`);
      // Past the verdict's last hold: an acknowledged pause or abort would be followed by a success all the same.
      if (this.recordingSuccess)
        throw new Error(`cannot ${what}: the migration of ${this.name} has migrated every object and is recording its success`);
    };
    const steered = (): SteerResult => ({
      ...this.progress(),
      paused: this.paused,
      ...(this.aborted ? { abortRequested: this.aborted } : {}),
    });
    setHandler(
      pauseUpdate,
      () => {
        this.paused = true;
        return steered();
      },
      {
        validator: (arg) => {
          refuseArgument('pauseMigration', HandlerArgSchemas.empty, arg);
          steerable('pause');
          if (this.paused) throw new Error(`cannot pause: the migration of ${this.name} is paused already`);
        },
      },
    );
    setHandler(
      resumeUpdate,
      () => {
        this.paused = false;
        return steered();
      },
      {
        validator: (arg) => {
          refuseArgument('resumeMigration', HandlerArgSchemas.empty, arg);
          steerable('resume');
          if (!this.paused) throw new Error(`cannot resume: the migration of ${this.name} is not paused`);
        },
      },
    );
    setHandler(
      abortUpdate,
      (arg) => {
        abort(abortReason(arg));
        return steered();
      },
      {
        validator: (arg) => {
          refuseArgument('abortMigration', HandlerArgSchemas.abort, arg);
          steerable('abort');
        },
      },
    );
  }

  /**
   * Does a signal's argument hold? An invalid one is logged (the reason, never the value) and the signal ignored.
   * Behind a patch asked only then: histories from before ran every signal whatever its argument.
   */
  private validSignal(name: string, schema: z.ZodType, arg: unknown): boolean {
    const refusal = argumentRefusal(name, schema, arg);
    if (refusal === undefined || !patched('signal-arguments-validated')) return true;
    log.warn(`${refusal}; the signal is ignored`, { resource: this.name });
    return false;
  }

  progress(): MigrationProgress {
    const c = this.s.counters;
    const processed = c.migrated + c.conflicts + c.notFound + c.failed;
    const seconds = Math.max(0.001, (Date.now() - this.s.startedAt) / 1000);
    return {
      resource: this.name,
      phase: this.phase,
      counters: { ...c },
      failures: this.s.failures,
      continueTokenPresent: this.s.continueToken !== undefined,
      remainingEstimate: this.s.remainingEstimate,
      objectsPerSecond: Math.round((processed / seconds) * 10) / 10,
      startedAt: this.s.startedAt,
      runs: this.s.runs,
      restarts: this.s.restarts,
      message: this.s.message,
      migrationObjects: [...this.objects],
    };
  }

  private status(): StorageVersionMigrationStatus {
    const terminal = this.phase === 'Succeeded' || this.phase === 'Failed' || this.phase === 'Aborted';
    return {
      phase: this.phase,
      message: this.s.message,
      workflowId: workflowInfo().workflowId,
      progress: { ...this.s.counters, ...(this.s.remainingEstimate !== undefined ? { remainingEstimate: this.s.remainingEstimate } : {}) },
      failures: this.s.failures,
      startTime: new Date(this.s.startedAt).toISOString(),
      ...(terminal ? { completionTime: new Date(Date.now()).toISOString() } : {}),
    };
  }

  /** Search attributes and UI details; with report, the StorageVersionMigration objects too. */
  async show(next: MigrationPhase, report = true): Promise<void> {
    this.phase = next;
    const chunks = this.s.counters.chunks;
    const due = !this.sparseAttributes || report || this.shown?.phase !== next || chunks - this.shown.chunks >= PROGRESS_ATTRIBUTE_CHUNKS;
    if (due) {
      upsertSearchAttributes([
        { key: PhaseAttr, value: next },
        { key: MigrationMigrated, value: this.s.counters.migrated },
      ]);
      this.shown = { phase: next, chunks };
    }
    const p = this.progress();
    const c = p.counters;
    // Paragraphs as the UI test reads them (test/test-ui.test.ts); the message last, as the panel is short.
    setCurrentDetails(
      [
        `**${this.name}** (${this.ref.version}${this.ref.custom ? ', custom resource' : ''}): **${next}**`,
        `migrated ${c.migrated} (rewritten ${c.rewritten}), conflicts ${c.conflicts}, not found ${c.notFound}, failed ${c.failed}`,
        `chunks ${c.chunks}, run ${this.s.runs}${this.s.restarts ? `, started over ${this.s.restarts}×` : ''}, ${p.objectsPerSecond} objects/s` +
          (this.s.remainingEstimate !== undefined ? `, about ${this.s.remainingEstimate} remaining` : ''),
        ...(this.s.message ? [this.s.message] : []),
      ].join('\n\n'),
    );
    if (report) {
      await this.settle(); // statuses are written in order, to every object created so far
      this.forget(await this.act.reportStatus([...this.objects], this.status(), this.name));
    }
  }

  /**
   * Shows the phase at once and writes it to the StorageVersionMigration objects in the background (stepsAtOnce):
   * the write is waited for before the next one, before continue-as-new and at the end.
   */
  showSoon(next: MigrationPhase): Promise<void> {
    if (!this.stepsAtOnce) return this.show(next);
    const shown = this.show(next, false); // no write: settles at once
    this.inBackground(async () => this.forget(await this.act.reportStatus([...this.objects], this.status(), this.name)));
    return shown;
  }

  /** Creates the StorageVersionMigration object kubectl users see: at once (stepsAtOnce), or waiting for it. */
  async ensureObject(): Promise<void> {
    const name = `${this.name}-${uuid4().slice(0, 8)}`;
    const create = async () => {
      const created = await this.act.ensureMigrationObject(this.ref, workflowInfo().workflowId, name);
      if (created) this.objects.add(created);
    };
    if (this.stepsAtOnce) this.inBackground(create);
    else await create();
  }

  /**
   * Starts a write after those already in the background (at once when there are none), waited for by settle();
   * its failure, if any, is thrown there (never left unhandled).
   */
  private inBackground(step: () => Promise<void>): void {
    const before = this.pending;
    const run = (async () => {
      if (before) await before;
      await step();
    })();
    run.catch(() => undefined);
    this.pending = run;
  }

  /** Waits for the writes started in the background; throws the first one's failure. */
  async settle(): Promise<void> {
    const p = this.pending;
    this.pending = undefined;
    if (p) await p;
  }

  /** Objects deleted since they were attached leave the set (histories from before returned nothing). */
  private forget(written: StatusReport | void): void {
    for (const name of written?.gone ?? []) this.objects.delete(name);
  }

  /** Writes the final status (even while the workflow is being cancelled) and returns or throws the result. */
  async finish(final: Final, message: string): Promise<MigrationResult> {
    this.s.message = message;
    await CancellationScope.nonCancellable(async () => {
      // A background write that failed does not keep the final status from being written.
      await this.settle().catch((err: unknown) =>
        log.warn('an earlier write of the StorageVersionMigration status failed', { resource: this.name, error: rootMessage(err) }),
      );
      await this.show(final);
    });
    log.info('migration finished', { resource: this.name, phase: final, ...this.s.counters });
    if (final === 'Failed') {
      throw ApplicationFailure.create({ type: 'MigrationFailed', message, nonRetryable: true, details: [this.progress()] });
    }
    return this.progress();
  }

  /** Continue-as-new with the whole state, once every handler has finished. */
  async continueAsNew(carried: CarriedState): Promise<never> {
    await this.settle();
    await condition(allHandlersFinished);
    return continueAsNew<typeof migrateResource>({
      resource: this.ref,
      // Not the defaults filled in: an option added later (taskStartTimeoutSeconds) would make the next run's
      // input invalid to a worker of an earlier version (the options are strict), during a rollout or a rollback.
      ...(this.givenOptions ? { options: this.givenOptions } : {}),
      migrationObjects: [...this.objects],
      carried,
    });
  }

  historyIsLong(runsSoFar: number, limit: number): boolean {
    return runsSoFar >= limit || workflowInfo().continueAsNewSuggested;
  }

  async startOver(why: string): Promise<never> {
    this.s.restarts++;
    this.s.message = `${why}; started over`;
    log.warn(this.s.message, { resource: this.name });
    await CancellationScope.nonCancellable(() => this.show(this.phase));
    return this.continueAsNew({
      ...this.s,
      continueToken: undefined,
      counters: zeroCounters(),
      failures: [],
      agreement: undefined,
      remainingEstimate: undefined,
      resume: undefined,
    });
  }

  changeReason(a: Agreement): string {
    return a.agreed
      ? `the API servers now agree on ${a.encodingVersion} (was ${this.s.agreement?.encodingVersion}), or what agreement rests on changed`
      : `agreement on the storage version of ${this.name} broke: ${a.reason}`;
  }
}

// ------------------------------------------------------------ 1. agreement

/** Waits until the API servers agree; returns false when aborted meanwhile. */
async function waitForAgreement(m: Migration): Promise<boolean> {
  let waited = false;
  for (let polls = 0; !m.s.agreement && !m.aborted; polls++) {
    if (m.historyIsLong(polls, MAX_WAITS_PER_RUN)) return m.continueAsNew(m.s);
    let message: string;
    try {
      const a = await m.act.agreement(m.ref);
      if (a.agreed && a.verified === false) {
        // One snapshot cannot tell a managed cluster (one address for several servers) from a server
        // starting or stopping (its identity lease there, its endpoint not yet): accept it only once it held.
        // Timed by when each answer was read, recorded in history (Agreement.at); older histories had none.
        const at = a.at ?? Date.now();
        if (m.unverified?.token !== a.token) m.unverified = { token: a.token, since: at };
        const heldFor = (at - m.unverified.since) / 1000;
        if (heldFor >= m.options.unverifiedAgreementSeconds) {
          m.s.agreement = a;
          break;
        }
        message = `waiting for agreement: ${a.checked}; accepted once this has held for ${m.options.unverifiedAgreementSeconds}s (a server starting or stopping looks the same for a moment)`;
      } else if (a.agreed) {
        m.s.agreement = a;
        break;
      } else if (a.notServed && patched('re-resolve-a-version-no-longer-served')) {
        // The version waited on is gone (a CRD version no longer served, an API version turned off): resolve the
        // resource again, or end with the reason; never wait on a version that is gone.
        const was = m.ref.version;
        m.ref = await resolveAgain(m);
        message =
          m.ref.version === was
            ? `waiting for agreement: ${a.reason}`
            : `waiting for agreement: ${m.name} is no longer served at ${was}; it is migrated through ${m.ref.version} now`;
        if (m.ref.version !== was) log.info(message, { resource: m.name });
      } else message = `waiting for agreement: ${a.reason}`;
    } catch (err) {
      // The resource is gone: end with the reason (resolveAgain). Otherwise activity retries exhausted (API servers
      // away): keep waiting, say why.
      if (err instanceof ApplicationFailure && err.type === 'NoLongerServed') throw err;
      message = `waiting for agreement: could not check it (${rootMessage(err)}); trying again`;
    }
    if (!waited || message !== m.s.message) {
      m.s.message = message;
      await m.show('WaitingForAgreement');
    }
    waited = true;
    m.recheck = false;
    await condition(() => m.recheck || m.aborted !== undefined, `${m.options.agreementPollSeconds} seconds`);
  }
  if (m.aborted) return false;
  if (waited) m.s.message = `the API servers agree on ${m.s.agreement!.encodingVersion}`;
  await m.showSoon('Running'); // written while the first chunk runs
  return true;
}

/** Has the agreement this pass started under broken or moved? Reads it; a failed read counts as broken. */
async function agreementMoved(m: Migration): Promise<string | undefined> {
  try {
    const a = await m.act.agreement(m.ref);
    return a.agreed && a.token === m.s.agreement!.token ? undefined : m.changeReason(a);
  } catch (err) {
    return `agreement could not be re-checked (${rootMessage(err)})`;
  }
}

/**
 * The resource resolved again by its name (plural.group), through the version the API servers serve now. A
 * resource that is gone, or no longer stored, ends the migration (non-retryable, type NoLongerServed) with the reason.
 */
async function resolveAgain(m: Migration): Promise<ResourceRef> {
  try {
    return await m.act.resolveMigrationResource({ resource: m.name });
  } catch (err) {
    if (failureType(err) !== 'InvalidResource') throw err;
    throw ApplicationFailure.create({
      type: 'NoLongerServed',
      nonRetryable: true,
      message: `${m.name} is no longer served at ${m.ref.version} and cannot be resolved again: ${rootMessage(err)}`,
    });
  }
}

// ------------------------------------------------------------ 2. chunks

type ChunkOutcome = { ok: true; result: ChunkResult } | { ok: false; err: unknown };

/** A chunk stopped by a pause, with what it did before it stopped. */
class PausedMidChunk {
  constructor(readonly partial: ChunkResult | undefined) {}
}

/** The patch under which a migration's first metadata-only page holds the chunk size (before it, FIRST_PAGE_LIMIT). */
const FIRST_METADATA_PAGE_WHOLE = 'first-metadata-page-whole';

/**
 * Runs one chunk; while it runs, re-checks agreement whenever the watcher
 * signals, and stops it when a pause arrives. Returns the chunk's outcome, a
 * StartOver when agreement moved, or PausedMidChunk.
 */
async function runChunk(m: Migration): Promise<ChunkOutcome | StartOver | PausedMidChunk> {
  const scope = new CancellationScope();
  m.chunkScope = scope;
  // A first page listed as metadata only (the empty patch) holds the chunk size at once: its objects come as a few
  // hundred bytes each. Should the chunk have to list it with content, it cuts it to FIRST_PAGE_LIMIT (contentLimit).
  const wholeFirst = m.s.pageLimit === undefined && m.s.rewrite !== 'put' && patched(FIRST_METADATA_PAGE_WHOLE);
  const limit = m.s.pageLimit ?? (wholeFirst ? m.options.chunkSize : nextPageLimit(m.options, undefined));
  const summary = `chunk ${m.s.counters.chunks + 1} of ${m.name}: up to ${limit} objects${m.s.continueToken ? ' after the continue token' : ' from the start'}`;
  const { migrateChunk } = chunkActivities(m.options.heartbeatTimeoutSeconds, summary, m.taskStartWait);
  const input = {
    resource: m.ref,
    continueToken: m.s.continueToken,
    options: {
      chunkSize: limit,
      concurrency: m.options.concurrency,
      qps: m.options.qps,
      ...(wholeFirst ? { contentLimit: nextPageLimit(m.options, undefined) } : {}),
    },
    ...(m.s.resume ? { resume: m.s.resume } : {}),
    ...(m.s.rewrite ? { rewrite: m.s.rewrite } : {}),
  };
  let outcome: ChunkOutcome | undefined;
  // Both settle paths are handled here: nothing floats.
  const settled = scope
    .run(() => migrateChunk(input))
    .then(
      (result) => (outcome = { ok: true, result }),
      (err: unknown) => (outcome = { ok: false, err }),
    );
  let moved: string | undefined;
  let pausing = false;
  const pauseNow = () => m.pauseMidChunk && m.paused && !pausing && moved === undefined;
  try {
    for (;;) {
      await condition(() => outcome !== undefined || (m.recheck && moved === undefined) || pauseNow());
      if (outcome) break;
      if (pauseNow()) {
        pausing = true;
        scope.cancel(); // the chunk stops where it is; its partial result arrives next
        continue;
      }
      m.recheck = false;
      moved = await agreementMoved(m);
      if (moved) scope.cancel(); // the chunk stops; its outcome (cancelled) arrives next
    }
    await settled;
  } finally {
    m.chunkScope = undefined;
  }
  if (moved) return new StartOver(moved);
  const o = outcome!;
  // Stopped by the pause (not by an abort, and not finished before the cancel reached it).
  if (pausing && !o.ok && isCancellation(o.err) && m.aborted === undefined) return new PausedMidChunk(cancelledChunkResult(o.err));
  return o;
}

/** The chunks found the server refusing the empty patch: the rest of the pass rewrites by PUT. */
function adoptPut(m: Migration): void {
  if (m.s.rewrite === 'put') return;
  // Said once, in the status: this resource's objects pass through the worker (the exception to "no object content in the worker").
  m.s.rewrite = 'put';
  m.s.message = `objects of ${m.name} are rewritten by PUT as listed, not by the empty patch (the API server refuses the patch, or the worker is set to PUT)`;
}

/** A whole pass from where the carried token says. Returns 'done', 'aborted', or a StartOver. */
async function migrateChunks(m: Migration): Promise<'done' | 'aborted' | StartOver> {
  for (let chunksThisRun = 0; ; chunksThisRun++) {
    if (m.aborted) return 'aborted';
    if (m.recheck) {
      m.recheck = false;
      const moved = await agreementMoved(m);
      if (moved) return new StartOver(moved);
    }
    if (m.paused) {
      await m.show('Paused');
      await condition(() => !m.paused || m.aborted !== undefined || m.recheck);
      if (m.aborted) return 'aborted';
      if (m.paused) continue; // a re-check woke us
      await m.show('Running');
    }
    if (m.historyIsLong(chunksThisRun, m.options.maxChunksPerRun)) return m.continueAsNew(m.s);

    const outcome = await runChunk(m);
    if (outcome instanceof StartOver) return outcome;
    if (outcome instanceof PausedMidChunk) {
      // What it did counts now; the same page is listed again on resume, skipping what is finished.
      const p = outcome.partial;
      if (p) {
        m.s.counters = addCounters(m.s.counters, { ...p.counters, chunks: 0 });
        for (const f of p.failures) if (m.s.failures.length < MAX_FAILURES) m.s.failures.push(f);
        if (p.resume) m.s.resume = p.resume;
        // A first page the chunk listed with content cut to FIRST_PAGE_LIMIT is listed again so, by PUT at once (a
        // page listed whole is listed whole again: the chunk cuts only a page of which nothing is finished).
        if (p.rewrite === 'put' && p.contentLimited && patched(FIRST_METADATA_PAGE_WHOLE)) adoptPut(m);
        // The estimate counted this page's objects as remaining; those it finished are not any more.
        const done = p.counters.migrated + p.counters.notFound + p.counters.failed;
        if (m.s.remainingEstimate !== undefined) m.s.remainingEstimate = Math.max(0, m.s.remainingEstimate - done);
      }
      continue;
    }
    if (!outcome.ok) {
      const err = outcome.err;
      if (isCancellation(err) && m.aborted) {
        const partial = cancelledChunkResult(err);
        if (partial) m.s.counters = addCounters(m.s.counters, partial.counters);
        return 'aborted';
      }
      if (failureType(err) === 'ResourceGone')
        return new StartOver(`${m.name} ${m.ref.version} is not served any more (${rootMessage(err)})`);
      throw err; // run() records it as Failed
    }
    const result = outcome.result;
    m.s.counters = addCounters(m.s.counters, result.counters);
    for (const f of result.failures) if (m.s.failures.length < MAX_FAILURES) m.s.failures.push(f);
    m.s.continueToken = result.continueToken;
    m.s.resume = undefined;
    m.s.pageLimit = nextPageLimit(m.options, result);
    m.s.remainingEstimate = result.remainingItemCount;
    if (result.counters.tokenResumes > 0) m.s.message = 'a continue token expired; the list resumed from the inconsistent continue token';
    if (result.rewrite === 'put') adoptPut(m);
    await m.show('Running', false);
    if (m.s.continueToken === undefined) return 'done';
  }
}

// ------------------------------------------------------------ 3. verdict

/** The patch under which a pause holds the verdict (histories from before it end as they ended). */
const PAUSE_HOLDS_THE_VERDICT = 'pause-holds-the-verdict';

async function verdict(m: Migration): Promise<MigrationResult | StartOver | 'aborted'> {
  const c = m.s.counters;
  if (c.failed > 0) {
    const named = m.s.failures
      .slice(0, 5)
      .map((f) => `${f.namespace ? f.namespace + '/' : ''}${f.name} (${f.reason})`)
      .join('; ');
    return m.finish('Failed', `${c.failed} object(s) of ${m.name} could not be updated: ${named}${c.failed > 5 ? '; …' : ''}`);
  }
  // The agreement is read again before anything is recorded. An abort that arrived after the last chunk (while it was
  // read) is honoured: nothing is recorded. A pause acknowledged while the last chunk was finishing holds the verdict:
  // nothing is recorded until a resume, after which the agreement is read again, or an abort. Each behind a patch:
  // histories from before them replay as they ran.
  for (;;) {
    const moved = await agreementMoved(m);
    if (moved) return new StartOver(moved);
    if (m.aborted && patched('verdict-honours-an-abort-before-recording')) return 'aborted';
    if (!(m.paused && patched(PAUSE_HOLDS_THE_VERDICT))) break;
    await m.show('Paused');
    await condition(() => !m.paused || m.aborted !== undefined);
    if (m.aborted) return 'aborted';
    await m.show('Running');
  }
  m.recordingSuccess = true;
  try {
    await m.act.recordMigrated(m.ref, m.s.agreement!);
  } catch (err) {
    m.recordingSuccess = false;
    if (failureType(err) === 'AgreementChanged')
      return new StartOver(`agreement changed while the success was being recorded (${rootMessage(err)})`);
    throw err;
  }
  m.s.remainingEstimate = 0;
  const a = m.s.agreement!;
  // Never claim more than was checked: an unverified agreement says what it relied on instead.
  const held = a.verified
    ? `the API servers agreed from start to end: ${a.checked}`
    : `agreement not verified per API server: ${a.checked}`;
  return m.finish('Succeeded', `migrated every object of ${m.name} to ${a.encodingVersion} in one whole pass; ${held}`);
}

// ------------------------------------------------------------ the workflow

export async function migrateResource(raw: MigrateResourceInput): Promise<MigrationResult> {
  // Tasks no worker starts in time are scheduled again (task-start.ts); runs from before replay as they ran.
  const reschedulesTasks = taskStartWait() !== undefined;
  // Until the input is checked, its option is not trusted: the default wait.
  const early = shortActivities(reschedulesTasks ? defaultMigrationOptions.taskStartTimeoutSeconds : undefined);
  // First: every refusal below is the answer of a resolution update, an Update-with-Start's included.
  const answer = new Resolution();
  const input = await resolvedInput(await validInput(raw, early, answer), early, answer);
  const m = new Migration(input, reschedulesTasks);
  m.installHandlers();
  try {
    if (m.s.runs === 1) {
      upsertSearchAttributes([
        { key: MigrationResource, value: m.name },
        { key: MigrationGroup, value: m.ref.group || 'core' },
      ]);
      if (m.objects.size === 0) await m.ensureObject(); // at once with the first agreement read (stepsAtOnce)
    }
    if (!m.s.agreement && !(await waitForAgreement(m))) return await m.finish('Aborted', `aborted: ${m.aborted}`);
    const pass = await migrateChunks(m);
    if (pass === 'aborted') return await m.finish('Aborted', `aborted: ${m.aborted}`);
    if (pass instanceof StartOver) return await m.startOver(pass.why);
    const result = await verdict(m);
    if (result === 'aborted') return await m.finish('Aborted', `aborted: ${m.aborted}`);
    if (result instanceof StartOver) return await m.startOver(result.why);
    return result;
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    if (err instanceof ApplicationFailure && err.type === 'MigrationFailed') throw err;
    if (isCancellation(err)) return m.finish('Aborted', 'aborted: the workflow was cancelled');
    return m.finish('Failed', `migration of ${m.name} stopped: ${rootMessage(err)}`);
  }
}

/**
 * The answer of the resolution update (a start's synchronous answer). Its handler is registered before the input is
 * checked, so that every refusal reaches the caller, an Update-with-Start's included (registered later, a refused
 * input answered "No registered handler for update"). It answers the resolved resource, or fails with the refusal:
 * type InvalidInput for the input itself (a field, carried state, the workflow ID), InvalidResource when the named
 * resource cannot be resolved. Updates rejected for want of a handler never entered history: no old history changes.
 */
class Resolution {
  resolved?: ResourceRef;
  private refusal?: { type: 'InvalidInput' | 'InvalidResource'; message: string };

  constructor() {
    setHandler(
      resolutionUpdate,
      async () => {
        await condition(() => this.resolved !== undefined || this.refusal !== undefined);
        if (this.refusal !== undefined) throw ApplicationFailure.create({ ...this.refusal, nonRetryable: true });
        return this.resolved!;
      },
      { validator: (arg) => refuseArgument('resolution', HandlerArgSchemas.empty, arg) },
    );
  }

  /** The first refusal is the answer. */
  refuse(type: 'InvalidInput' | 'InvalidResource', message: string): void {
    this.refusal ??= { type, message };
  }
}

/**
 * One workflow per resource, found and joined by anyone: its ID is the one start options give
 * (migrate/<resource>.<group>, src/contract/start-options.ts). Undefined when it is; else the refusal.
 */
function wrongWorkflowId(ref: ResourceRef): string | undefined {
  const want = migrationWorkflowId(ref);
  const id = workflowInfo().workflowId;
  return id === want ? undefined : `the workflow ID must be ${want} (one migration per resource, joined by every caller), not ${id}`;
}

/**
 * Asked only when a first run's workflow ID is not its resource's: a refused ID fails with InvalidInput and writes
 * nothing, not even to the StorageVersionMigration objects in the input (they follow the migration under the right
 * ID). Histories from before (the full reference unchecked; the minimal start answering InvalidResource and writing
 * its objects' status) replay as they ran.
 */
const WORKFLOW_ID_PATCH = 'workflow-id-refused-as-invalid-input';

/**
 * The input, checked before anything is written. Carried state (a continue
 * token, counters, an agreement) is accepted only in a run continued from an
 * earlier run of this workflow: nothing from outside can shorten a pass. The
 * fully resolved form obeys the one-workflow-per-resource rule as the minimal
 * start does (resolvedInput); a continued run keeps the ID its first run had.
 */
async function validInput(raw: MigrateResourceInput, act: ShortActivities, answer: Resolution): Promise<MigrateResourceInput> {
  const parsed = MigrateResourceInputSchema.safeParse(raw);
  let reason = parsed.success ? undefined : explainInput(parsed.error);
  const continued = workflowInfo().continuedFromExecutionRunId !== undefined;
  if (parsed.success && parsed.data.carried && !continued) {
    reason = 'carried: carried state is accepted only from an earlier run of this same workflow (continue-as-new), never from a caller';
  }
  if (reason === undefined && parsed.success && typeof parsed.data.resource !== 'string' && !continued) {
    const wrongId = wrongWorkflowId(parsed.data.resource);
    if (wrongId !== undefined && patched(WORKFLOW_ID_PATCH)) return refuseWorkflowId(wrongId, answer);
  }
  if (reason === undefined) return parsed.data as MigrateResourceInput;
  return failInput(raw, `invalid migration input: ${reason}`, act, answer);
}

/** Fails the workflow for its input: its StorageVersionMigration objects say why, nothing of the resource is touched. */
async function failInput(raw: MigrateResourceInput, message: string, act: ShortActivities, answer: Resolution): Promise<never> {
  answer.refuse('InvalidInput', message);
  const objects = Array.isArray(raw?.migrationObjects) ? raw.migrationObjects.filter((o): o is string => typeof o === 'string') : [];
  if (objects.length > 0) {
    await act.reportStatus(
      objects,
      { phase: 'Failed', message, workflowId: workflowInfo().workflowId, completionTime: new Date(Date.now()).toISOString() },
      typeof raw?.resource === 'string' ? raw.resource : String(raw?.resource?.resource ?? '?'),
    );
  }
  await condition(allHandlersFinished); // the resolution update answers with the refusal first
  throw ApplicationFailure.create({ type: 'InvalidInput', message, nonRetryable: true });
}

/** Fails the workflow for its ID (WORKFLOW_ID_PATCH): nothing is written anywhere. */
async function refuseWorkflowId(why: string, answer: Resolution): Promise<never> {
  const message = `invalid migration input: ${why}`;
  answer.refuse('InvalidInput', message);
  await condition(allHandlersFinished);
  throw ApplicationFailure.create({ type: 'InvalidInput', message, nonRetryable: true });
}

/**
 * The minimal start ({"resource": "gizmos.example.com"}): the workflow resolves the resource itself, in an
 * activity, before anything else. A refusal fails the workflow at once (non-retryable, type InvalidInput)
 * and answers the resolution update with it; nothing is written. Histories of the fully resolved form
 * never take this branch, so it changes none of their commands.
 */
async function resolvedInput(input: MigrateResourceInput, act: ShortActivities, answer: Resolution): Promise<ResolvedInput> {
  if (typeof input.resource !== 'string') answer.resolved = input.resource;
  else {
    let why: string | undefined;
    let resolved: ResourceRef | undefined;
    try {
      resolved = await act.resolveMigrationResource({
        resource: input.resource,
        ...(input.group !== undefined ? { group: input.group } : {}),
      });
    } catch (err) {
      why = rootMessage(err);
    }
    // One workflow per resource, found and joined by anyone: its ID is derived from the resource.
    const wrongId = resolved && wrongWorkflowId(resolved);
    if (wrongId !== undefined) {
      if (patched(WORKFLOW_ID_PATCH)) return refuseWorkflowId(wrongId, answer);
      why = wrongId;
      resolved = undefined;
    }
    if (why !== undefined) {
      const refusal = `invalid migration input: ${why}`;
      answer.refuse('InvalidResource', refusal);
      await failInput(input, refusal, act, answer);
    }
    answer.resolved = resolved;
  }
  const { group: _group, ...rest } = input;
  return { ...rest, resource: answer.resolved! };
}

/** Refuses an update whose argument is not the contract's (its validator: the update never enters history). */
function refuseArgument(name: string, schema: z.ZodType, arg: unknown): void {
  const refusal = argumentRefusal(name, schema, arg);
  if (refusal !== undefined) throw ApplicationFailure.create({ type: 'InvalidArgument', message: refusal, nonRetryable: true });
}

/** The partial result a cancelled chunk reports in its CancelledFailure details. */
function cancelledChunkResult(err: unknown): ChunkResult | undefined {
  for (let e = err as { cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof CancelledFailure) return e.details?.[0] as ChunkResult | undefined;
  }
  return undefined;
}

/** The ApplicationFailure type at the root of an activity failure. */
function failureType(err: unknown): string | undefined {
  for (let e = err as { cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof ApplicationFailure) return e.type ?? undefined;
  }
  return undefined;
}

function rootMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && e.cause) e = e.cause as typeof e;
  return e?.message ?? String(err);
}
