/**
 * migrateResource: one durable workflow per resource (ID migrate/<resource>.<group>).
 * Deterministic orchestration only; every Kubernetes call is an activity.
 *
 * Read top to bottom, this is the whole migration loop:
 *   1. wait until every API server agrees on the resource's encoding version
 *      (phase WaitingForAgreement, naming who disagrees), and take the
 *      agreement's token;
 *   2. chunk after chunk: list one page and no-op update its objects
 *      (migrateChunk), fold in the counters, move the continue token on;
 *      pause / abort signals are honoured between and during chunks; an
 *      agreementChanged signal (from the watcher) re-checks agreement beside
 *      the chunks, and if it broke or moved, the chunk in flight is stopped
 *      and the migration starts over (objects migrated so far may have gone
 *      to the wrong version); continue-as-new carries token and counters when
 *      history grows;
 *   3. when the list is exhausted: failures make it Failed (naming them);
 *      otherwise agreement is checked once more and its token compared with
 *      the one taken at the start: only if it held throughout is the run a
 *      success (and a CRD's storedVersions reduced to the agreed version);
 *      otherwise it starts over and says why.
 */
import {
  ActivityCancellationType,
  allHandlersFinished,
  CancelledFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities, Agreement } from '../activities';
import type { ChunkOptions, ChunkResult } from '../activities/migrate-chunk';
import type { MigrationCounters, MigrationPhase, ObjectFailure, StorageVersionMigrationStatus } from '../api/migration';
import { addCounters, zeroCounters } from '../api/counters';
import { groupResourceString, type ResourceRef } from '../api/resource';
import { MigrationGroup, MigrationMigrated, MigrationPhase as PhaseAttr, MigrationResource } from './search-attributes';

export interface MigrationOptions extends ChunkOptions {
  /** Continue-as-new after this many chunks even if Temporal does not suggest it. */
  maxChunksPerRun: number;
  /** While waiting for agreement, re-check at least this often (a signal wakes it sooner). */
  agreementPollSeconds: number;
  /** A chunk whose worker went silent this long is retried elsewhere (resuming from its last heartbeat). */
  heartbeatTimeoutSeconds: number;
}

export const defaultMigrationOptions: MigrationOptions = { chunkSize: 500, concurrency: 8, qps: 0, maxChunksPerRun: 200, heartbeatTimeoutSeconds: 30, agreementPollSeconds: 15 };

/** State that travels across continue-as-new. */
export interface CarriedState {
  continueToken?: string;
  counters: MigrationCounters;
  failures: ObjectFailure[];
  /** The agreement this pass started under; undefined until the servers agree. */
  agreement?: Agreement;
  startedAt: number;
  runs: number;
  /** Times the whole resource was started over (storage version moved). */
  restarts: number;
  remainingEstimate?: number;
  message?: string;
}

export interface MigrateResourceInput {
  resource: ResourceRef;
  options?: Partial<MigrationOptions>;
  /** StorageVersionMigration objects that mirror this migration's status. */
  migrationObjects?: string[];
  /** Where to start listing (StorageVersionMigration spec.continueToken). */
  continueToken?: string;
  carried?: CarriedState;
}

export interface MigrationProgress {
  resource: string;
  phase: MigrationPhase;
  counters: MigrationCounters;
  failures: ObjectFailure[];
  continueTokenPresent: boolean;
  remainingEstimate?: number;
  objectsPerSecond: number;
  startedAt: number;
  runs: number;
  restarts: number;
  message?: string;
  migrationObjects: string[];
}

export type MigrationResult = MigrationProgress;

export const abortSignal = defineSignal<[reason?: string]>('abort');
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const attachMigrationObjectSignal = defineSignal<[name: string]>('attachMigrationObject');
/** Sent by the agreement watcher when a StorageVersion or CRD of this resource changed. */
export const agreementChangedSignal = defineSignal<[why?: string]>('agreementChanged');
export const progressQuery = defineQuery<MigrationProgress>('progress');

/** Bugs, not weather: retrying them only delays the failure. */
const PROGRAMMING_ERRORS = ['TypeError', 'ReferenceError', 'SyntaxError', 'ZodError'];

/** A proxy per chunk, so that each chunk carries its own summary in the UI's event history. */
const chunkActivities = (heartbeatTimeoutSeconds: number, summary: string) =>
  proxyActivities<Activities>({
    summary,
    // An abort waits for the chunk to stop, so its partial counters arrive.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
    retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 12, nonRetryableErrorTypes: PROGRAMMING_ERRORS },
  });
const { agreement, confirmAgreement, ensureMigrationObject, reportStatus } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', maximumInterval: '30s', maximumAttempts: 10, nonRetryableErrorTypes: PROGRAMMING_ERRORS },
});

const MAX_FAILURES = 50;

export async function migrateResource(input: MigrateResourceInput): Promise<MigrationResult> {
  const ref = input.resource;
  const name = groupResourceString(ref);
  const options: MigrationOptions = { ...defaultMigrationOptions, ...input.options };
  const s: CarriedState = input.carried ?? { continueToken: input.continueToken, counters: zeroCounters(), failures: [], startedAt: Date.now(), runs: 0, restarts: 0 };
  s.runs++;
  const objects = new Set(input.migrationObjects ?? []);
  let phase: MigrationPhase = 'Running';
  let aborted: string | undefined;
  let paused = false;
  let chunkScope: CancellationScope | undefined;
  let chunksThisRun = 0;
  let recheck = false; // the watcher says agreement may have changed
  let broken: Agreement | undefined; // agreement moved away from s.agreement

  const progress = (): MigrationProgress => {
    const processed = s.counters.migrated + s.counters.conflicts + s.counters.notFound + s.counters.failed;
    const seconds = Math.max(0.001, (Date.now() - s.startedAt) / 1000);
    return {
      resource: name,
      phase,
      counters: { ...s.counters },
      failures: s.failures,
      continueTokenPresent: s.continueToken !== undefined,
      remainingEstimate: s.remainingEstimate,
      objectsPerSecond: Math.round((processed / seconds) * 10) / 10,
      startedAt: s.startedAt,
      runs: s.runs,
      restarts: s.restarts,
      message: s.message,
      migrationObjects: [...objects],
    };
  };

  setHandler(progressQuery, progress);
  setHandler(abortSignal, (reason?: string) => {
    aborted = reason || 'aborted by request';
    chunkScope?.cancel();
  });
  setHandler(pauseSignal, () => void (paused = true));
  setHandler(resumeSignal, () => void (paused = false));
  setHandler(attachMigrationObjectSignal, (objectName: string) => void objects.add(objectName));
  setHandler(agreementChangedSignal, () => void (recheck = true));

  const status = (): StorageVersionMigrationStatus => ({
    phase,
    message: s.message,
    workflowId: workflowInfo().workflowId,
    progress: { ...s.counters, ...(s.remainingEstimate !== undefined ? { remainingEstimate: s.remainingEstimate } : {}) },
    failures: s.failures,
    startTime: new Date(s.startedAt).toISOString(),
    ...(phase === 'Succeeded' || phase === 'Failed' || phase === 'Aborted' ? { completionTime: new Date(Date.now()).toISOString() } : {}),
  });

  const show = async (next: MigrationPhase, report = true) => {
    phase = next;
    upsertSearchAttributes([
      { key: PhaseAttr, value: phase },
      { key: MigrationMigrated, value: s.counters.migrated },
    ]);
    const p = progress();
    const c = p.counters;
    setCurrentDetails(
      [
        `**${name}** (${ref.version}${ref.custom ? ', custom resource' : ''}): **${phase}**`,
        `migrated ${c.migrated} (rewritten ${c.rewritten}), conflicts ${c.conflicts}, not found ${c.notFound}, failed ${c.failed}`,
        `chunks ${c.chunks}, run ${s.runs}${s.restarts ? `, started over ${s.restarts}×` : ''}, ${p.objectsPerSecond} objects/s` +
          (s.remainingEstimate !== undefined ? `, about ${s.remainingEstimate} remaining` : ''),
        ...(s.message ? [s.message] : []),
      ].join('\n\n'),
    );
    if (report) await reportStatus([...objects], status(), name);
  };

  const finish = async (final: 'Succeeded' | 'Failed' | 'Aborted'): Promise<MigrationResult> => {
    await CancellationScope.nonCancellable(() => show(final));
    log.info('migration finished', { resource: name, phase: final, ...s.counters });
    if (final === 'Failed') {
      throw ApplicationFailure.create({ type: 'MigrationFailed', message: s.message ?? `migration of ${name} failed`, nonRetryable: true, details: [progress()] });
    }
    return progress();
  };

  /** Everything so far may have gone to the wrong version: a fresh pass, after agreement. */
  const startOver = async (why: string): Promise<never> => {
    s.restarts++;
    s.message = `${why}; started over`;
    log.warn(s.message, { resource: name });
    await CancellationScope.nonCancellable(() => show(phase));
    await condition(allHandlersFinished);
    return continueAsNew<typeof migrateResource>({
      resource: ref,
      options,
      migrationObjects: [...objects],
      carried: { ...s, continueToken: undefined, counters: zeroCounters(), failures: [], agreement: undefined, remainingEstimate: undefined },
    });
  };
  const changeReason = (a: Agreement) =>
    a.agreed ? `the API servers now agree on ${a.encodingVersion} (was ${s.agreement?.encodingVersion}), or their storage versions were republished` : `agreement on the storage version of ${name} broke: ${a.reason}`;

  // -- 1. start: search attributes, the kubectl-visible object, agreement
  if (s.runs === 1) {
    upsertSearchAttributes([
      { key: MigrationResource, value: name },
      { key: MigrationGroup, value: ref.group || 'core' },
    ]);
    if (objects.size === 0) {
      const created = await ensureMigrationObject(ref, workflowInfo().workflowId, `${name}-${uuid4().slice(0, 8)}`);
      if (created) objects.add(created);
    }
  }
  let waited = false;
  while (!s.agreement && !aborted) {
    const a = await agreement(ref);
    if (a.agreed) {
      s.agreement = a;
      break;
    }
    const message = `waiting for agreement: ${a.reason}`;
    if (!waited || message !== s.message) {
      s.message = message;
      await show('WaitingForAgreement');
    }
    waited = true;
    recheck = false;
    await condition(() => recheck || aborted !== undefined, `${options.agreementPollSeconds} seconds`);
  }
  if (aborted) {
    s.message = `aborted: ${aborted}`;
    return finish('Aborted');
  }
  if (waited) s.message = `the API servers agree on ${s.agreement!.encodingVersion}`;
  await show('Running');

  // Beside the chunks: re-check agreement whenever the watcher says it may have changed.
  void (async () => {
    for (;;) {
      await condition(() => recheck);
      recheck = false;
      const a = await agreement(ref);
      if (!broken && (!a.agreed || a.token !== s.agreement!.token)) {
        broken = a;
        chunkScope?.cancel();
      }
    }
  })();

  // -- 2. chunk after chunk
  for (;;) {
    if (aborted) break;
    if (broken) return startOver(changeReason(broken));
    if (paused) {
      await show('Paused');
      await condition(() => !paused || aborted !== undefined || broken !== undefined);
      if (aborted) break;
      if (broken) continue;
      await show('Running');
    }
    if (chunksThisRun >= options.maxChunksPerRun || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof migrateResource>({ resource: ref, options, migrationObjects: [...objects], carried: s });
    }

    let result: ChunkResult;
    try {
      chunkScope = new CancellationScope();
      const summary = `chunk ${s.counters.chunks + 1} of ${name}: up to ${options.chunkSize} objects${s.continueToken ? ' after the continue token' : ' from the start'}`;
      const { migrateChunk } = chunkActivities(options.heartbeatTimeoutSeconds, summary);
      result = await chunkScope.run(() => migrateChunk({ resource: ref, continueToken: s.continueToken, options }));
    } catch (err) {
      if (isCancellation(err) && aborted) {
        const partial = cancelledChunkResult(err);
        if (partial) s.counters = addCounters(s.counters, partial.counters);
        break;
      }
      if (isCancellation(err) && broken) continue; // starts over at the top of the loop
      s.message = `migration of ${name} stopped: ${rootMessage(err)}`;
      return finish('Failed');
    } finally {
      chunkScope = undefined;
    }
    chunksThisRun++;
    s.counters = addCounters(s.counters, result.counters);
    for (const f of result.failures) if (s.failures.length < MAX_FAILURES) s.failures.push(f);
    s.continueToken = result.continueToken;
    s.remainingEstimate = result.remainingItemCount;
    if (result.counters.tokenResumes > 0) s.message = 'a continue token expired; the list resumed from the inconsistent continue token';
    await show('Running', false);
    if (s.continueToken === undefined) break;
  }

  if (aborted) {
    s.message = `aborted: ${aborted}`;
    return finish('Aborted');
  }

  // -- 3. the verdict
  if (s.counters.failed > 0) {
    const named = s.failures
      .slice(0, 5)
      .map((f) => `${f.namespace ? f.namespace + '/' : ''}${f.name} (${f.reason})`)
      .join('; ');
    s.message = `${s.counters.failed} object(s) of ${name} could not be updated: ${named}${s.counters.failed > 5 ? '; …' : ''}`;
    return finish('Failed');
  }
  const verdict = await confirmAgreement(ref, s.agreement!);
  if (!verdict.held || broken) return startOver(changeReason(broken ?? verdict.now));
  s.remainingEstimate = 0;
  s.message = `migrated every object of ${name} to ${s.agreement!.encodingVersion}; the API servers agreed from start to end`;
  return finish('Succeeded');
}

/** The partial result a cancelled chunk reports in its CancelledFailure details. */
function cancelledChunkResult(err: unknown): ChunkResult | undefined {
  for (let e = err as { cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof CancelledFailure) return e.details?.[0] as ChunkResult | undefined;
  }
  return undefined;
}

function rootMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && e.cause) e = e.cause as typeof e;
  return e?.message ?? String(err);
}
