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
 * Before them the input is admitted (admission.ts); the run's state, and one
 * method per message, is MigrationState (migration-state.ts). Whatever ends the
 * workflow, its StorageVersionMigration objects say so (the catch below):
 * Succeeded, Aborted, or Failed with the reason. A continue token is only ever
 * one this workflow got from its own pass: the input has no token, and carried
 * state is accepted only in a run continued from an earlier run of this workflow.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  ContinueAsNew,
  deprecatePatch,
  isCancellation,
  log,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { acceptAgreement, sameAgreement, type Agreement, type UnverifiedHold } from '../contract/agreement';
import { addCounters } from '../api/counters';
import { currentCluster } from './cluster-context';
import type { ObjectFailure } from '../api/migration';
import type { ResourceRef } from '../api/resource';
import {
  abortReason,
  abortSignal,
  abortUpdate,
  agreementChangedSignal,
  attachedName,
  attachMigrationObjectSignal,
  defaultMigrationOptions,
  HandlerArgSchemas,
  nextPageLimit,
  pauseSignal,
  pauseUpdate,
  progressQuery,
  resumeSignal,
  resumeUpdate,
  type MigrateResourceInput,
  type MigrationResult,
} from '../contract/definitions';
import { MAX_FAILURES_KEPT, type ChunkInput, type ChunkResult } from '../contract/chunk';
import { passRecord } from '../contract/pass-record';
import { MigrationGroup, MigrationResource } from '../contract/search-attributes';
import { admitInput, refuseArgument, validSignal } from './admission';
import { cancelledChunkResult, failureType, rootMessage } from './failures';
import { MigrationState } from './migration-state';
import { shortActivities, taskStartWait } from './task-start';
import type { z } from 'zod';
import { AGREEMENT_CHANGED, INVALID_RESOURCE, MIGRATION_FAILED, NO_LONGER_SERVED, RESOURCE_GONE } from '../contract/reasons';

export * from '../contract/definitions';

/** Agreement polls per run while waiting, before continue-as-new (Temporal may suggest it sooner). */
const MAX_WAITS_PER_RUN = 500;

/** Ends the pass and starts a fresh one (after agreement): everything so far may have gone to the wrong version. */
class StartOver {
  constructor(readonly why: string) {}
}

// ------------------------------------------------------------ the workflow

export async function migrateResource(raw: MigrateResourceInput): Promise<MigrationResult> {
  // Tasks no worker starts in time are scheduled again (task-start.ts). Until the input is checked, its option is not
  // trusted: the default wait.
  const input = await admitInput(raw, shortActivities(taskStartWait(defaultMigrationOptions.taskStartTimeoutSeconds)));
  const migration = new MigrationState(input);
  handleMessages(migration);
  const finishAborted = () => migration.finish('Aborted', `aborted: ${migration.aborting}`);
  try {
    if (migration.carried.runs === 1) {
      upsertSearchAttributes([
        { key: MigrationResource, value: migration.name },
        { key: MigrationGroup, value: migration.ref.group || 'core' },
        ...migration.here.attributes,
      ]);
      if (migration.objects.size === 0) await migration.ensureMigrationObject(); // at once with the first agreement read
    }
    if (!migration.carried.agreement && !(await waitForAgreement(migration))) return await finishAborted();
    const pass = await migrateChunks(migration);
    if (pass === 'aborted') return await finishAborted();
    if (pass instanceof StartOver) return await migration.startOver(pass.why);
    const result = await verdict(migration);
    if (result === 'aborted') return await finishAborted();
    if (result instanceof StartOver) return await migration.startOver(result.why);
    return result;
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    if (err instanceof ApplicationFailure && err.type === MIGRATION_FAILED) throw err;
    if (isCancellation(err)) return migration.finish('Aborted', 'aborted: the workflow was cancelled');
    return migration.finish('Failed', `migration of ${migration.name} stopped: ${rootMessage(err)}`);
  }
}

/**
 * Each message calls one method of the state, in the order the handlers are registered (signals sent before are
 * delivered then, in this order). A signal's argument is checked first (validSignal: an invalid one is logged and
 * the signal ignored); an update is refused by its validator when its argument is not the contract's or it cannot
 * apply, and answers with the new state.
 */
function handleMessages(migration: MigrationState): void {
  const valid = (name: string, schema: z.ZodType, arg: unknown) => validSignal(migration.name, name, schema, arg);
  setHandler(progressQuery, () => migration.progress());
  setHandler(abortSignal, (arg) => {
    if (valid('abort', HandlerArgSchemas.abort, arg)) migration.abort(abortReason(arg));
  });
  setHandler(pauseSignal, (arg) => {
    if (valid('pause', HandlerArgSchemas.empty, arg)) migration.pause();
  });
  setHandler(resumeSignal, (arg) => {
    if (valid('resume', HandlerArgSchemas.empty, arg)) migration.resume();
  });
  setHandler(attachMigrationObjectSignal, (arg) => {
    if (valid('attachMigrationObject', HandlerArgSchemas.attachMigrationObject, arg)) migration.attach(attachedName(arg));
  });
  setHandler(agreementChangedSignal, (why) => {
    if (valid('agreementChanged', HandlerArgSchemas.agreementChanged, why)) migration.agreementMayHaveChanged();
  });
  setHandler(pauseUpdate, () => migration.pause(), {
    validator: (arg) => {
      refuseArgument('pauseMigration', HandlerArgSchemas.empty, arg);
      migration.refusePause();
    },
  });
  setHandler(resumeUpdate, () => migration.resume(), {
    validator: (arg) => {
      refuseArgument('resumeMigration', HandlerArgSchemas.empty, arg);
      migration.refuseResume();
    },
  });
  setHandler(abortUpdate, (arg) => migration.abort(abortReason(arg)), {
    validator: (arg) => {
      refuseArgument('abortMigration', HandlerArgSchemas.abort, arg);
      migration.refuseAbort();
    },
  });
}

// ------------------------------------------------------------ 1. agreement

/**
 * Waits until the API servers agree; returns false when aborted meanwhile.
 *
 * Note: the agreement is awaited here, not in a helper: each async call between its answer and the first chunk is a
 * turn of the microtask queue, and when the first run's StorageVersionMigration object is created in the same workflow
 * task (the first run's steps at once), those turns decide whether the first chunk or the Running status write is scheduled first.
 * Recorded histories have the chunk first (test/unit-replay.test.ts fails otherwise).
 */
async function waitForAgreement(migration: MigrationState): Promise<boolean> {
  const carried = migration.carried;
  let unverified: UnverifiedHold | undefined; // one run's memory
  let waited = false;
  for (let polls = 0; !carried.agreement && !migration.aborting; polls++) {
    if (migration.historyIsLong(polls, MAX_WAITS_PER_RUN)) return migration.continueAsNew(carried);
    let message: string;
    try {
      const a = await migration.activities.short.agreement(migration.ref);
      const accepting = acceptAgreement(a, unverified, migration.options.unverifiedAgreementSeconds, Date.now());
      unverified = accepting.hold;
      if (accepting.accepted) {
        carried.agreement = a;
        break;
      }
      if (a.agreed)
        message = `waiting for agreement: ${a.checked}; accepted once this has held for ${migration.options.unverifiedAgreementSeconds}s (a server starting or stopping looks the same for a moment)`;
      else if (a.notServed) {
        deprecatePatch('re-resolve-a-version-no-longer-served');
        // The version waited on is gone (a CRD version no longer served, an API version turned off): resolve the
        // resource again, or end with the reason; never wait on a version that is gone.
        const was = migration.ref.version;
        migration.ref = await resolveAgain(migration);
        message = servedVersionMessage(migration, was, a);
      } else message = `waiting for agreement: ${a.reason}`;
    } catch (err) {
      // The resource is gone: end with the reason (resolveAgain). Otherwise activity retries exhausted (API servers
      // away): keep waiting, say why.
      if (err instanceof ApplicationFailure && err.type === NO_LONGER_SERVED) throw err;
      message = `waiting for agreement: could not check it (${rootMessage(err)}); trying again`;
    }
    if (!waited || message !== carried.message) {
      carried.message = message;
      await migration.publish('WaitingForAgreement');
    }
    waited = true;
    migration.recheck = false;
    await condition(() => migration.recheck || migration.aborting !== undefined, `${migration.options.agreementPollSeconds} seconds`);
  }
  if (migration.aborting) return false;
  if (waited) carried.message = `the API servers agree on ${carried.agreement!.encodingVersion}`;
  await migration.publishWithBackgroundWrite('Running'); // written while the first chunk runs
  return true;
}

/** What the wait says once the resource was resolved again (it was migrated through `was`). */
function servedVersionMessage(migration: MigrationState, was: string, a: Agreement): string {
  if (migration.ref.version === was) return `waiting for agreement: ${a.reason}`;
  const message = `waiting for agreement: ${migration.name} is no longer served at ${was}; it is migrated through ${migration.ref.version} now`;
  log.info(message, { resource: migration.name });
  return message;
}

/** Has the agreement this pass started under broken or moved? Reads it; a failed read counts as broken. */
async function agreementMoved(migration: MigrationState): Promise<string | undefined> {
  try {
    const a = await migration.activities.short.agreement(migration.ref);
    return sameAgreement(migration.carried.agreement!, a) ? undefined : agreementChangeReason(migration, a);
  } catch (err) {
    return `agreement could not be re-checked (${rootMessage(err)})`;
  }
}

/** Why the agreement `a` is not the one the pass started under: it moved, or it broke. */
function agreementChangeReason(migration: MigrationState, a: Agreement): string {
  return a.agreed
    ? `the API servers now agree on ${a.encodingVersion} (was ${migration.carried.agreement?.encodingVersion}), or what agreement rests on changed`
    : `agreement on the storage version of ${migration.name} broke: ${a.reason}`;
}

/**
 * The resource resolved again by its name (plural.group), through the version the API servers serve now. A
 * resource that is gone, or no longer stored, ends the migration (non-retryable, type NoLongerServed) with the reason.
 */
async function resolveAgain(migration: MigrationState): Promise<ResourceRef> {
  try {
    return await migration.activities.short.resolveMigrationResource({ resource: migration.name });
  } catch (err) {
    if (failureType(err) !== INVALID_RESOURCE) throw err;
    throw ApplicationFailure.create({
      type: NO_LONGER_SERVED,
      nonRetryable: true,
      message: `${migration.name} is no longer served at ${migration.ref.version} and cannot be resolved again: ${rootMessage(err)}`,
    });
  }
}

// ------------------------------------------------------------ 2. chunks

type ChunkOutcome = { ok: true; result: ChunkResult } | { ok: false; err: unknown };

/** A chunk stopped by a pause, with what it did before it stopped. */
class PausedMidChunk {
  constructor(readonly partial: ChunkResult | undefined) {}
}

/** The first metadata-only page holds the chunk size (folded at 0.2.0: deprecatePatch; asked in two places). */
const FIRST_METADATA_PAGE_WHOLE = 'first-metadata-page-whole';

/** A whole pass from where the carried token says. Returns 'done', 'aborted', or a StartOver. */
async function migrateChunks(migration: MigrationState): Promise<'done' | 'aborted' | StartOver> {
  for (let chunksThisRun = 0; ; chunksThisRun++) {
    if (migration.aborting) return 'aborted';
    if (migration.recheck) {
      migration.recheck = false;
      const moved = await agreementMoved(migration);
      if (moved) return new StartOver(moved);
    }
    if (migration.paused) {
      await migration.publish('Paused');
      await condition(() => !migration.paused || migration.recheck); // resumed, aborted, or a re-check
      if (migration.aborting) return 'aborted';
      if (migration.paused) continue; // a re-check woke us
      await migration.publish('Running');
    }
    if (migration.historyIsLong(chunksThisRun, migration.options.maxChunksPerRun)) return migration.continueAsNew(migration.carried);

    const outcome = await runChunk(migration);
    if (outcome instanceof StartOver) return outcome;
    if (outcome instanceof PausedMidChunk) {
      if (outcome.partial) countPausedChunk(migration, outcome.partial);
      continue;
    }
    if (!outcome.ok) return failedChunk(migration, outcome.err);
    countChunk(migration, outcome.result);
    await migration.publish('Running', false);
    if (migration.carried.continueToken === undefined) return 'done';
  }
}

/**
 * Runs one chunk; while it runs, re-checks agreement whenever the watcher
 * signals, and stops it when a pause arrives. Returns the chunk's outcome, a
 * StartOver when agreement moved, or PausedMidChunk.
 */
async function runChunk(migration: MigrationState): Promise<ChunkOutcome | StartOver | PausedMidChunk> {
  const scope = new CancellationScope();
  migration.chunkScope = scope;
  const { summary, input } = chunkRequest(migration);
  const migrateChunk = migration.activities.chunk(summary);
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
  const pauseNow = () => migration.paused && !pausing && moved === undefined;
  try {
    for (;;) {
      await condition(() => outcome !== undefined || (migration.recheck && moved === undefined) || pauseNow());
      if (outcome) break;
      if (pauseNow()) {
        pausing = true;
        scope.cancel(); // the chunk stops where it is; its partial result arrives next
        continue;
      }
      migration.recheck = false;
      moved = await agreementMoved(migration);
      if (moved) scope.cancel(); // the chunk stops; its outcome (cancelled) arrives next
    }
    await settled;
  } finally {
    migration.chunkScope = undefined;
  }
  if (moved) return new StartOver(moved);
  const o = outcome!;
  // Stopped by the pause (not by an abort, and not finished before the cancel reached it).
  if (pausing && !o.ok && isCancellation(o.err) && migration.aborting === undefined) return new PausedMidChunk(cancelledChunkResult(o.err));
  return o;
}

/** The next chunk's activity input, and its summary in the UI's event history. */
function chunkRequest(migration: MigrationState): { summary: string; input: ChunkInput } {
  const { carried, options } = migration;
  // A first page listed as metadata only (the empty patch) holds the chunk size at once: its objects come as a few
  // hundred bytes each. Should the chunk have to list it with content, it cuts it to FIRST_PAGE_LIMIT (contentLimit).
  const wholeFirst = carried.pageLimit === undefined && carried.rewrite !== 'put';
  if (wholeFirst) deprecatePatch(FIRST_METADATA_PAGE_WHOLE);
  const limit = carried.pageLimit ?? (wholeFirst ? options.chunkSize : nextPageLimit(options, undefined));
  const summary = `chunk ${carried.counters.chunks + 1} of ${migration.name}: up to ${limit} objects${carried.continueToken ? ' after the continue token' : ' from the start'}`;
  const input: ChunkInput = {
    resource: migration.ref,
    continueToken: carried.continueToken,
    options: {
      chunkSize: limit,
      concurrency: options.concurrency,
      qps: options.qps,
      ...(wholeFirst ? { contentLimit: nextPageLimit(options, undefined) } : {}),
    },
    ...(carried.resume ? { resume: carried.resume } : {}),
    ...(carried.rewrite ? { rewrite: carried.rewrite } : {}),
  };
  return { summary, input };
}

/** A whole chunk: its counters and failures count, the continue token moves on. */
function countChunk(migration: MigrationState, result: ChunkResult): void {
  const carried = migration.carried;
  carried.counters = addCounters(carried.counters, result.counters);
  keepFailures(migration, result.failures);
  carried.continueToken = result.continueToken;
  carried.resume = undefined;
  carried.pageLimit = nextPageLimit(migration.options, result);
  carried.remainingEstimate = result.remainingItemCount;
  if (result.counters.tokenResumes > 0) carried.message = 'a continue token expired; the list resumed from the inconsistent continue token';
  if (result.rewrite === 'put') adoptPut(migration);
}

/** A chunk a pause stopped: what it did counts now; the same page is listed again on resume, skipping what is finished. */
function countPausedChunk(migration: MigrationState, partial: ChunkResult): void {
  const carried = migration.carried;
  carried.counters = addCounters(carried.counters, { ...partial.counters, chunks: 0 });
  keepFailures(migration, partial.failures);
  if (partial.resume) carried.resume = partial.resume;
  // A first page the chunk listed with content cut to FIRST_PAGE_LIMIT is listed again so, by PUT at once (a
  // page listed whole is listed whole again: the chunk cuts only a page of which nothing is finished).
  if (partial.rewrite === 'put' && partial.contentLimited) {
    deprecatePatch(FIRST_METADATA_PAGE_WHOLE);
    adoptPut(migration);
  }
  // The estimate counted this page's objects as remaining; those it finished are not any more.
  const done = partial.counters.migrated + partial.counters.notFound + partial.counters.failed;
  if (carried.remainingEstimate !== undefined) carried.remainingEstimate = Math.max(0, carried.remainingEstimate - done);
}

/** The first MAX_FAILURES_KEPT failed objects are kept (carried across continue-as-new); the counters count them all. */
function keepFailures(migration: MigrationState, failures: ObjectFailure[]): void {
  for (const f of failures) if (migration.carried.failures.length < MAX_FAILURES_KEPT) migration.carried.failures.push(f);
}

/** A chunk that failed: stopped by an abort ('aborted', its partial counters counted), the resource no longer served (a StartOver), else thrown. */
function failedChunk(migration: MigrationState, err: unknown): 'aborted' | StartOver {
  if (isCancellation(err) && migration.aborting) {
    const partial = cancelledChunkResult(err);
    if (partial) migration.carried.counters = addCounters(migration.carried.counters, partial.counters);
    return 'aborted';
  }
  if (failureType(err) === RESOURCE_GONE)
    return new StartOver(`${migration.name} ${migration.ref.version} is not served any more (${rootMessage(err)})`);
  throw err; // migrateResource records it as Failed
}

/** The chunks found the server refusing the empty patch: the rest of the pass rewrites by PUT. */
function adoptPut(migration: MigrationState): void {
  if (migration.carried.rewrite === 'put') return;
  // Said once, in the status: this resource's objects pass through the worker (the exception to "no object content in the worker").
  migration.carried.rewrite = 'put';
  migration.carried.message = `objects of ${migration.name} are rewritten by PUT as listed, not by the empty patch (the API server refuses the patch, or the worker is set to PUT)`;
}

// ------------------------------------------------------------ 3. verdict

async function verdict(migration: MigrationState): Promise<MigrationResult | StartOver | 'aborted'> {
  const { counters, failures } = migration.carried;
  if (counters.failed > 0) {
    const named = failures
      .slice(0, 5)
      .map((f) => `${f.namespace ? f.namespace + '/' : ''}${f.name} (${f.reason})`)
      .join('; ');
    const more = counters.failed > 5 ? '; …' : '';
    return migration.finish('Failed', `${counters.failed} object(s) of ${migration.name} could not be updated: ${named}${more}`);
  }
  // The agreement is read again before anything is recorded. An abort that arrived after the last chunk (while it was
  // read) is honoured: nothing is recorded. A pause acknowledged while the last chunk was finishing holds the verdict:
  // nothing is recorded until a resume, after which the agreement is read again, or an abort.
  for (;;) {
    const moved = await agreementMoved(migration);
    if (moved) return new StartOver(moved);
    if (migration.aborting) {
      deprecatePatch('verdict-honours-an-abort-before-recording');
      return 'aborted';
    }
    if (!migration.pauseHeld) break;
    deprecatePatch('pause-holds-the-verdict');
    await migration.publish('Paused');
    await condition(() => !migration.paused); // resumed or aborted
    if (migration.aborting) return 'aborted';
    await migration.publish('Running');
  }
  migration.startRecording();
  let recorded: { hash?: string } | undefined;
  try {
    recorded = await migration.activities.short.recordMigrated(migration.ref, migration.carried.agreement!);
  } catch (err) {
    migration.recordFailed();
    if (failureType(err) === AGREEMENT_CHANGED)
      return new StartOver(`agreement changed while the success was being recorded (${rootMessage(err)})`);
    throw err;
  }
  migration.carried.remainingEstimate = 0;
  const a = migration.carried.agreement!;
  // Never claim more than was checked: an unverified agreement says what it relied on instead.
  const agreed = a.verified
    ? `the API servers agreed from start to end: ${a.checked}`
    : `agreement not verified per API server: ${a.checked}`;
  return migration.finish(
    'Succeeded',
    `migrated every object of ${migration.name} to ${a.encodingVersion} in one whole pass; ${agreed}`,
    passRecord(a, 'svm', { storageVersionHash: recorded?.hash, clusterUid: currentCluster()?.uid, resource: migration.name }),
  );
}
