/**
 * The standard API: storagemigration.k8s.io StorageVersionMigration, GA as v1
 * in Kubernetes 1.37 (v1beta1 in 1.35 and 1.36, same shape), served by the
 * API server itself and acted on by kube-controller-manager's built-in
 * migrator unless the operator turned it off.
 *
 * Its status holds only conditions (metav1.Condition) and resourceVersion:
 * extra fields are dropped by the server. So svm writes exactly the
 * conditions the built-in writes (Running, Succeeded, Failed, with the
 * built-in's reasons) and puts its own facts in conditions of its own types
 * (migration.k8s.io/Progress), which tools written for the built-in ignore.
 * Pure: the bridge and the activities render status with it; tests check it.
 */
import { z } from 'zod';
import type { MigrationPhase, StorageVersionMigrationStatus } from './migration';
import { ABORTED, BUILT_IN_REASONS, INVALID_RESOURCE } from '../contract/reasons';
import { isTerminalPhase } from './phases';

export const STANDARD_GROUP = 'storagemigration.k8s.io';
/** Versions svm speaks, newest first: v1 (GA, 1.37), v1beta1 (1.35, 1.36). */
export const STANDARD_VERSIONS = ['v1', 'v1beta1'] as const;
export type StandardVersion = (typeof STANDARD_VERSIONS)[number];

/**
 * How the workflow lists a standard object among its migrationObjects:
 * `storagemigration.k8s.io/<name>`. A Kubernetes name has no slash, so a
 * plain entry is always a migration.k8s.io/v1alpha1 object.
 */
export const STANDARD_REF_PREFIX = `${STANDARD_GROUP}/`;
export const standardRef = (name: string): string => `${STANDARD_REF_PREFIX}${name}`;
/** The object name of a standard entry, or undefined for a migration.k8s.io/v1alpha1 entry. */
export const standardName = (ref: string): string | undefined =>
  ref.startsWith(STANDARD_REF_PREFIX) ? ref.slice(STANDARD_REF_PREFIX.length) : undefined;

/** svm's own condition: counts, rate, phase and workflow, in its message. Its reason is the phase. */
export const PROGRESS_CONDITION = 'migration.k8s.io/Progress';
/** Set when something other than svm writes the status of an object svm acts on (never two controllers). */
export const SHARED_CONDITION = 'migration.k8s.io/OtherController';

export const StandardCondition = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.number().int().optional(),
  lastTransitionTime: z.string().optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
});
export type StandardCondition = z.infer<typeof StandardCondition>;

export const StandardMigration = z.object({
  // Items of a built-in type's list carry no apiVersion or kind.
  apiVersion: z
    .string()
    .refine((v) => v.startsWith(STANDARD_REF_PREFIX))
    .optional(),
  kind: z.literal('StorageVersionMigration').optional(),
  metadata: z
    .object({
      name: z.string(),
      uid: z.string().optional(),
      generation: z.number().int().optional(),
      resourceVersion: z.string().optional(),
      creationTimestamp: z.string().optional(),
      annotations: z.record(z.string(), z.string()).optional(),
      managedFields: z
        .array(
          z
            .object({
              manager: z.string().optional(),
              operation: z.string().optional(),
              subresource: z.string().optional(),
              time: z.string().optional(),
            })
            .loose(),
        )
        .optional(),
    })
    .loose(),
  spec: z.object({ resource: z.object({ group: z.string().optional(), resource: z.string() }) }),
  status: z
    .object({
      conditions: z.array(StandardCondition).optional(),
      resourceVersion: z.string().optional(),
    })
    .optional(),
});
export type StandardMigration = z.infer<typeof StandardMigration>;

/** The field manager svm writes standard objects' status with: how another writer is told apart (managedFields). */
export const SVM_FIELD_MANAGER = 'svm';

const find = (conditions: StandardCondition[] | undefined, type: string) => conditions?.find((c) => c.type === type);
const isTrue = (conditions: StandardCondition[] | undefined, type: string) => find(conditions, type)?.status === 'True';

/** Succeeded=True or Failed=True: nothing more happens to it (the server refuses to turn either back). */
export const standardFinished = (status: StandardMigration['status']): boolean =>
  isTrue(status?.conditions, 'Succeeded') || isTrue(status?.conditions, 'Failed');

/** When another writer than svm last wrote the object's status (ms since the epoch; managedFields time), if ever. */
export function lastOtherStatusWrite(obj: StandardMigration): number | undefined {
  const times = (obj.metadata.managedFields ?? [])
    .filter((f) => f.subresource === 'status' && f.manager && f.manager !== SVM_FIELD_MANAGER && f.time)
    .map((f) => Date.parse(f.time!))
    .filter((t) => Number.isFinite(t));
  return times.length > 0 ? Math.max(...times) : undefined;
}

/** Who other than svm wrote the object's status (managedFields of the status subresource). */
export function otherStatusWriters(obj: StandardMigration): string[] {
  const writers = (obj.metadata.managedFields ?? [])
    .filter((f) => f.subresource === 'status' && f.manager && f.manager !== SVM_FIELD_MANAGER)
    .map((f) => f.manager!);
  return [...new Set(writers)].sort();
}

/**
 * The message the built-in gives a Failed condition, for svm's failure (pure):
 * what a tool written for the built-in parses (pkg/controller/storageversionmigrator
 * of v1.37.2: "X/Y not yet migrated. migration encountered unhandled error: ...",
 * "resource does not exist in discovery"; v1.36.3 has no counts).
 */
export function builtInFailureMessage(
  facts: StorageVersionMigrationStatus,
  failedReason: string | undefined,
  version: StandardVersion,
): string {
  const why = facts.message ?? `migration ${facts.phase ?? 'Failed'}`;
  if (failedReason === INVALID_RESOURCE && /serve no resource/.test(why)) return `resource does not exist in discovery: ${why}`;
  const p = facts.progress ?? {};
  const failed = p.failed ?? 0;
  const total = (p.migrated ?? 0) + (p.conflicts ?? 0) + (p.notFound ?? 0) + failed;
  if (version === 'v1' && failed > 0) return `${failed}/${total} not yet migrated. migration encountered unhandled error: ${why}`;
  return `migration encountered unhandled error: ${why}`;
}

/**
 * The conditions of a phase as the built-in writes them, plus svm's Progress
 * condition (svm's own words: counts, workflow, its message and reason); a
 * condition whose status does not change keeps its lastTransitionTime
 * (metav1.Condition semantics). Reasons and messages are the built-in's
 * (docs/standard-api.md, checked against the real controller by test-conformance).
 *
 *   phase                         Running                            Succeeded / Failed
 *   Pending, WaitingForAgreement  False (reason: the phase)          -
 *   Paused                        False Paused                       -
 *   Running                       True  MigrationRunning             -
 *   Succeeded                     False MigrationCompleted           Succeeded True StorageVersionMigrationSucceeded
 *   Failed                        False MigrationCompleted           Failed True StorageVersionMigrationFailed
 *   Aborted                       False MigrationCompleted           Failed True Aborted
 *
 * Running is True only while objects are being rewritten: a tool written for
 * the built-in reads Running=True as "rewriting", and the built-in has no
 * waiting state (its queued objects have no condition at all). While svm
 * waits for the API servers to agree, or is paused, Running is False with
 * the phase as its reason and the wait's cause as its message.
 */
export function standardConditions(
  previous: StandardCondition[] | undefined,
  facts: StorageVersionMigrationStatus,
  now: string,
  failedReason?: string,
  version: StandardVersion = 'v1',
): StandardCondition[] {
  const phase: MigrationPhase = facts.phase ?? 'Running';
  const message = facts.message;
  const terminal = isTerminalPhase(phase);
  const out = new Map<string, StandardCondition>();
  for (const c of previous ?? []) out.set(c.type, c);
  const set = (type: string, status: StandardCondition['status'], reason: string, text: string) => {
    const old = out.get(type);
    const lastTransitionTime = old && old.status === status && old.lastTransitionTime ? old.lastTransitionTime : now;
    out.set(type, { type, status, lastTransitionTime, reason, message: text.slice(0, 32_000) });
  };
  if (phase === 'Running') set('Running', 'True', BUILT_IN_REASONS.running, 'The migration is running');
  else if (!terminal) set('Running', 'False', phase, message ?? `the migration is ${phase}`);
  else {
    set('Running', 'False', BUILT_IN_REASONS.completed, 'Migration completed');
    if (phase === 'Succeeded') set('Succeeded', 'True', BUILT_IN_REASONS.succeeded, version === 'v1' ? 'Migration completed' : '');
    else if (phase === 'Aborted') set('Failed', 'True', ABORTED, message ?? 'migration aborted');
    else set('Failed', 'True', BUILT_IN_REASONS.failed, builtInFailureMessage(facts, failedReason, version));
  }
  const own = [progressMessage(facts), ...(failedReason ? [`reason ${failedReason}`] : []), ...(message ? [message] : [])].join('; ');
  set(PROGRESS_CONDITION, terminal ? 'False' : 'True', phase, own);
  return [...out.values()];
}

/** svm's facts in one line: counts, remaining, the workflow. No object data: names of failed objects stay in Temporal. */
export function progressMessage(facts: StorageVersionMigrationStatus): string {
  const p = facts.progress ?? {};
  const parts = [
    `phase ${facts.phase ?? 'Running'}`,
    `migrated ${p.migrated ?? 0} (rewritten ${p.rewritten ?? 0}, conflicts ${p.conflicts ?? 0}, gone ${p.notFound ?? 0}, failed ${p.failed ?? 0})`,
  ];
  if (p.remainingEstimate !== undefined && !isTerminalPhase(facts.phase)) {
    parts.push(`~${p.remainingEstimate} remaining`);
  }
  if (p.chunks !== undefined) parts.push(`${p.chunks} chunks`);
  if (facts.workflowId) parts.push(`workflow ${facts.workflowId}`);
  return parts.join(', ');
}

/** The kubectl name of a workflow's entry, with its group: with both APIs installed, a plain `storageversionmigrations` means the standard one. */
export function kubectlName(ref: string): string {
  const name = standardName(ref);
  return name === undefined ? `storageversionmigrations.migration.k8s.io/${ref}` : `storageversionmigrations.${STANDARD_GROUP}/${name}`;
}
