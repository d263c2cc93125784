/**
 * What migrateResource admits, checked before anything is written: its input (admitInput) and the argument of
 * each message (refuseArgument for an update, validSignal for a signal).
 *
 * Carried state (a continue token, counters, an agreement) is accepted only in a run continued from an earlier
 * run of this workflow: nothing from outside can shorten a pass. One workflow per resource, found and joined by
 * anyone: a first run's workflow ID must be the one start options give its resource (migrate/<resource>.<group>,
 * src/contract/start-options.ts), in the fully resolved form and the minimal start alike; a continued run keeps
 * the ID its first run had.
 */
import { allHandlersFinished, ApplicationFailure, condition, deprecatePatch, log, setHandler, workflowInfo } from '@temporalio/workflow';
import type { z } from 'zod';
import { migrationWorkflowId, type ResourceRef } from '../api/resource';
import { enterCluster } from './cluster-context';
import type { Placement } from '../contract/placement';
import {
  argumentRefusal,
  explainInput,
  HandlerArgSchemas,
  MigrateResourceInputSchema,
  resolutionUpdate,
  type MigrateResourceInput,
  type ResolvedInput,
} from '../contract/definitions';
import { migrationStatus } from '../contract/migration-status';
import { rootMessage } from './failures';
import type { ShortActivities } from './task-start';
import { INVALID_ARGUMENT, INVALID_INPUT, INVALID_RESOURCE } from '../contract/reasons';

type AdmissionActivities = Pick<ShortActivities, 'resolveMigrationResource' | 'reportStatus'>;

/** A first run whose workflow ID is not its resource's is refused as InvalidInput (folded at 0.2.0: deprecatePatch). */
const WORKFLOW_ID_PATCH = 'workflow-id-refused-as-invalid-input';

const CARRIED_REFUSED =
  'carried: carried state is accepted only from an earlier run of this same workflow (continue-as-new), never from a caller';

/**
 * The input, checked, with its resource resolved; or the workflow fails (non-retryable, type InvalidInput) and the
 * resolution update answers with the refusal. The minimal start ({"resource": "gizmos.example.com"}) is resolved by
 * the workflow itself, in an activity, before anything else; histories of the fully resolved form never take that
 * branch, so it changes none of their commands.
 */
export async function admitInput(raw: MigrateResourceInput, activities: AdmissionActivities): Promise<ResolvedInput> {
  // First: every refusal below is the answer of a resolution update, an Update-with-Start's included.
  const resolution = new Resolution(raw, activities);
  const parsed = MigrateResourceInputSchema.safeParse(raw);
  if (!parsed.success) return resolution.refuse(INVALID_INPUT, explainInput(parsed.error));
  // A named cluster's workflow: its activities carry the cluster from here on (the uid read first when not given).
  const here = await enterCluster(parsed.data.cluster);
  const input = here.input({ ...(parsed.data as MigrateResourceInput) });
  const continued = workflowInfo().continuedFromExecutionRunId !== undefined;
  if (input.carried && !continued) return resolution.refuse(INVALID_INPUT, CARRIED_REFUSED);
  if (typeof input.resource !== 'string') {
    // A first run whose workflow ID is not its resource's is refused and writes nothing, not even to the
    // StorageVersionMigration objects in its input (they follow the migration under the right ID).
    const wrongId = continued ? undefined : wrongWorkflowId(input.resource, here);
    if (wrongId !== undefined) {
      deprecatePatch(WORKFLOW_ID_PATCH);
      return resolution.refuse(INVALID_INPUT, wrongId, { writeStatus: false });
    }
    return resolution.admit(input, input.resource);
  }
  // The minimal start: the resource as named, resolved in an activity.
  let resolved: ResourceRef;
  try {
    resolved = await activities.resolveMigrationResource({
      resource: input.resource,
      ...(input.group !== undefined ? { group: input.group } : {}),
    });
  } catch (err) {
    return resolution.refuse(INVALID_RESOURCE, rootMessage(err));
  }
  const wrongId = wrongWorkflowId(resolved, here);
  if (wrongId === undefined) return resolution.admit(input, resolved);
  deprecatePatch(WORKFLOW_ID_PATCH);
  return resolution.refuse(INVALID_INPUT, wrongId, { writeStatus: false });
}

/** Undefined when this workflow's ID is the one of its resource; else the refusal. */
function wrongWorkflowId(ref: ResourceRef, here: Placement): string | undefined {
  const want = here.id(migrationWorkflowId(ref));
  const id = workflowInfo().workflowId;
  return id === want ? undefined : `the workflow ID must be ${want} (one migration per resource, joined by every caller), not ${id}`;
}

/**
 * The answer of the resolution update (a start's synchronous answer). Its handler is registered before the input is
 * checked, so that every refusal reaches the caller, an Update-with-Start's included (registered later, a refused
 * input answered "No registered handler for update"). It answers the resolved resource, or fails with the refusal:
 * type InvalidInput for the input itself (a field, carried state, the workflow ID), InvalidResource when the named
 * resource cannot be resolved. Updates rejected for want of a handler never entered history: no old history changes.
 */
class Resolution {
  private resolved?: ResourceRef;
  private refusal?: { type: typeof INVALID_INPUT | typeof INVALID_RESOURCE; message: string };

  constructor(
    private readonly raw: MigrateResourceInput,
    private readonly activities: AdmissionActivities,
  ) {
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

  /** The input a migration runs with: the resolved resource in place of the name (and its group). */
  admit(input: MigrateResourceInput, resource: ResourceRef): ResolvedInput {
    this.resolved = resource;
    const { group: _group, ...rest } = input;
    return { ...rest, resource };
  }

  /**
   * Answers the update with the refusal and fails the workflow. Unless writeStatus is false (a refused workflow ID),
   * the StorageVersionMigration objects in the input say why first; nothing of the resource is touched. Note: the
   * workflow fails with InvalidInput even when the update answers InvalidResource.
   */
  async refuse(type: typeof INVALID_INPUT | typeof INVALID_RESOURCE, why: string, { writeStatus = true } = {}): Promise<never> {
    const message = `invalid migration input: ${why}`;
    this.refusal = { type, message };
    if (writeStatus) await this.writeRefusal(message);
    await condition(allHandlersFinished); // the resolution update answers with the refusal first
    throw ApplicationFailure.create({ type: INVALID_INPUT, message, nonRetryable: true });
  }

  /** The refusal as the Failed status of the StorageVersionMigration objects the raw input names, if any. */
  private async writeRefusal(message: string): Promise<void> {
    const raw = this.raw;
    const objects = Array.isArray(raw?.migrationObjects) ? raw.migrationObjects.filter((o): o is string => typeof o === 'string') : [];
    if (objects.length === 0) return;
    await this.activities.reportStatus(
      objects,
      migrationStatus({ phase: 'Failed', message, workflowId: workflowInfo().workflowId, endedAt: Date.now() }),
      typeof raw?.resource === 'string' ? raw.resource : String(raw?.resource?.resource ?? '?'),
    );
  }
}

/** Refuses an update whose argument is not the contract's (its validator: the update never enters history). */
export function refuseArgument(name: string, schema: z.ZodType, arg: unknown): void {
  const refusal = argumentRefusal(name, schema, arg);
  if (refusal !== undefined) throw ApplicationFailure.create({ type: INVALID_ARGUMENT, message: refusal, nonRetryable: true });
}

/** Does a signal's argument hold? An invalid one is logged (the reason, never the value) and the signal ignored. */
export function validSignal(resource: string, name: string, schema: z.ZodType, arg: unknown): boolean {
  const refusal = argumentRefusal(name, schema, arg);
  if (refusal === undefined) return true;
  deprecatePatch('signal-arguments-validated');
  log.warn(`${refusal}; the signal is ignored`, { resource });
  return false;
}
