/**
 * How the workflows read a failure: the first failure of a kind in its cause
 * chain (an activity's own failure sits under the ActivityFailure, a child's
 * under the ChildWorkflowFailure), and the message at its root. One copy for
 * every workflow.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/workflow';
import type { ChunkResult } from '../contract/chunk';

/** The first failure of class `kind` in err's cause chain, err itself included. */
export function causeOfKind<T>(err: unknown, kind: abstract new (...args: never[]) => T): T | undefined {
  for (let e = err as { cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof kind) return e;
  }
  return undefined;
}

/** The ApplicationFailure type at the root of an activity failure. */
export function failureType(err: unknown): string | undefined {
  return causeOfKind(err, ApplicationFailure)?.type ?? undefined;
}

/** The partial result a cancelled chunk reports in its CancelledFailure details. */
export function cancelledChunkResult(err: unknown): ChunkResult | undefined {
  return causeOfKind(err, CancelledFailure)?.details?.[0] as ChunkResult | undefined;
}

/** The message of the failure at the root of err's cause chain (what the activity or child said, not its wrapper). */
export function rootMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && e.cause) e = e.cause as typeof e;
  return e?.message ?? String(err);
}
