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
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  patched,
  setHandler,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { z } from 'zod';
import type { Activities, Agreement } from '../activities';
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
import { MigrationGroup, MigrationPhase as PhaseAttr, MigrationResource } from '../contract/search-attributes';
import { reschedulingActivities, taskStartWait } from './task-start';

const ACTIVITY_OPTIONS = {
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1s',
    maximumInterval: '30s',
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['AgreementChanged', 'StandardApiNotServed'],
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

/** Looks per run before continue-as-new (each look is a few events). */
const MAX_LOOKS_PER_RUN = 300;

export async function delegateToBuiltIn(raw: DelegateInput): Promise<MigrationResult> {
  const parsed = DelegateInputSchema.safeParse(raw);
  if (!parsed.success) {
    throw ApplicationFailure.create({
      type: 'InvalidInput',
      message: `invalid input: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')}`,
      nonRetryable: true,
    });
  }
  const input = raw;
  // Patched: a task no worker starts in time (one the server lost) is scheduled again, not waited on for ever.
  const { agreement, createBuiltInMigration, builtInMigrationState, recordAgreedHash } = reschedulingActivities<Activities>(
    ACTIVITY_OPTIONS,
    taskStartWait(),
  );
  const ref: ResourceRef = input.resource;
  const name = groupResourceString(ref);
  const poll = `${input.pollSeconds ?? 15} seconds`;
  const unverifiedSeconds = input.unverifiedAgreementSeconds ?? 120;
  const maxPasses = input.maxPasses ?? 3;
  const noActionSeconds = input.noActionSeconds ?? 300;
  const c = input.carried;
  const s = {
    passes: c?.passes ?? 0,
    objects: c?.objects ?? [],
    current: c?.current,
    createdAt: c?.createdAt,
    agreement: c?.agreement,
    startedAt: c?.startedAt ?? Date.now(),
    message: c?.message,
    broken: c?.broken,
    phase: (c?.current ? 'Running' : 'Pending') as MigrationPhase,
  };
  let aborted: string | undefined;
  let recheck = false;
  // Arguments as the contract publishes them (HandlerArgSchemas): an invalid one is logged (its reason, never its
  // value) and the signal ignored, as migrateResource does.
  const valid = (signal: string, schema: z.ZodType, arg: unknown): boolean => {
    const refusal = argumentRefusal(signal, schema, arg);
    if (refusal === undefined || !patched('signal-arguments-validated')) return true;
    log.warn(`${refusal}; the signal is ignored`, { resource: name });
    return false;
  };
  setHandler(abortSignal, (arg) => {
    if (valid('abort', HandlerArgSchemas.abort, arg)) aborted = abortReason(arg) ?? 'abort requested';
  });
  setHandler(agreementChangedSignal, (arg) => {
    if (valid('agreementChanged', HandlerArgSchemas.agreementChanged, arg)) recheck = true;
  });
  const progress = (): MigrationProgress => ({
    resource: name,
    phase: s.phase,
    counters: zeroCounters(),
    failures: [],
    continueTokenPresent: false,
    objectsPerSecond: 0,
    startedAt: s.startedAt,
    runs: s.passes,
    restarts: Math.max(0, s.passes - 1),
    message: s.message,
    migrationObjects: s.objects.map(standardRef),
  });
  setHandler(progressQuery, progress);
  const show = (phase: MigrationPhase, message: string) => {
    if (phase !== s.phase) upsertSearchAttributes([{ key: PhaseAttr, value: phase }]);
    s.phase = phase;
    s.message = message;
    log.info('delegated migration', { resource: name, phase, message });
  };
  if (!c) {
    upsertSearchAttributes([
      { key: MigrationResource, value: name },
      { key: MigrationGroup, value: ref.group || 'core' },
      { key: PhaseAttr, value: 'Pending' },
    ]);
  }
  const finish = (phase: 'Succeeded' | 'Aborted', message: string): MigrationResult => {
    show(phase, message);
    return progress();
  };
  const fail = (message: string): never => {
    show('Failed', message);
    throw ApplicationFailure.create({ type: 'MigrationFailed', message, nonRetryable: true, details: [progress()] });
  };
  const sleep = async () => {
    recheck = false;
    await condition(() => recheck || aborted !== undefined, poll);
  };

  let unverified: { token: string; since: number } | undefined;
  for (let looks = 0; ; looks++) {
    if (aborted) return finish('Aborted', `aborted: ${aborted}; the built-in migrator is not stopped by svm (it has no abort)`);
    if (looks >= MAX_LOOKS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      const { phase: _phase, ...carried } = s;
      return continueAsNew<typeof delegateToBuiltIn>({ ...input, carried });
    }
    const a = await agreement(ref);
    if (!s.current) {
      // 1. Agreement first: the built-in would migrate into whichever version the server it reaches encodes.
      let accept = a.agreed && a.verified !== false;
      if (a.agreed && a.verified === false) {
        const at = a.at ?? Date.now();
        if (unverified?.token !== a.token) unverified = { token: a.token, since: at };
        accept = (at - unverified.since) / 1000 >= unverifiedSeconds;
      }
      if (!accept) {
        show('WaitingForAgreement', a.agreed ? `waiting for agreement: ${a.checked}` : `waiting for agreement: ${a.reason}`);
        await sleep();
        continue;
      }
      if (s.passes >= maxPasses)
        return fail(`${s.passes} built-in migrations of ${name} did not give a success under one agreement; ${s.message ?? ''}`);
      const objectName = `svm-${name.replace(/[^a-z0-9-]+/g, '-').slice(0, 200)}-${uuid4().slice(0, 8)}`;
      await createBuiltInMigration(ref, objectName, workflowInfo().workflowId);
      s.passes++;
      s.current = objectName;
      s.createdAt = Date.now();
      s.objects = [...s.objects, objectName].slice(-100);
      s.agreement = a;
      show('Running', `created ${objectName} for the built-in migrator under agreement on ${a.encodingVersion} (${a.checked})`);
      await sleep();
      continue;
    }
    // 2. Follow the built-in, and the agreement beside it.
    const broke =
      !a.agreed || a.token !== s.agreement!.token
        ? a.agreed
          ? `the agreement moved (${a.checked})`
          : `agreement broke: ${a.reason}`
        : undefined;
    const b = await builtInMigrationState(s.current);
    if (b.state === 'gone')
      return finish('Aborted', `the StorageVersionMigration ${s.current} was deleted before the built-in finished it`);
    // Once broken, a pass stays broken: a server that went back and forth wrote old encodings meanwhile.
    s.broken ??= broke;
    // 4. Nobody acts on it: say so and end, rather than wait for a controller that does not run.
    if (
      b.state === 'pending' &&
      s.createdAt !== undefined &&
      (Date.now() - s.createdAt) / 1000 >= noActionSeconds &&
      patched('delegate-no-action-bound')
    )
      return fail(
        `no controller has acted on StorageVersionMigration ${s.current} ${noActionSeconds}s after svm created it: the built-in migrator does not seem to run (kube-controller-manager --controllers=...,storage-version-migrator-controller); the object is left as it is. Start it, or run svm with SVM_STANDARD_MIGRATIONS=own and SVM_TRIGGER_API=svm`,
      );
    if (b.state === 'pending' || b.state === 'running') {
      show(
        'Running',
        s.broken
          ? `agreement did not hold while the built-in runs ${s.current} (${s.broken}): a new migration follows when it ends`
          : `the built-in migrator ${b.state === 'pending' ? 'has not started' : 'runs'} ${s.current}${b.message ? `: ${b.message}` : ''}`,
      );
      await sleep();
      continue;
    }
    // 3. The built-in ended.
    let why: string;
    if (b.state === 'failed') why = `the built-in migrator failed ${s.current} (${b.message ?? 'no reason given'})`;
    else if (s.broken) why = `agreement did not hold until the built-in's success on ${s.current} (${s.broken})`;
    else {
      try {
        await recordAgreedHash(ref, s.agreement!);
        return finish(
          'Succeeded',
          `the built-in migrator migrated ${name} (${s.current}) and the API servers agreed on ${s.agreement!.encodingVersion} from its creation to its success: ${s.agreement!.checked}`,
        );
      } catch (err) {
        why = `the agreement could not be confirmed at the end of ${s.current} (${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)})`;
      }
    }
    log.warn('delegated migration: another pass', { resource: name, why });
    s.current = undefined;
    s.createdAt = undefined;
    s.agreement = undefined;
    s.broken = undefined;
    show('WaitingForAgreement', `${why}; a new migration is created once the API servers agree`);
  }
}
