/**
 * What a failed `svm` run exits with, by the class of its error (docs/cli.md#exit-codes): a script tells a usage
 * error (fix the command), an unreachable service (try again, or fix the address) and a refusal (fix the
 * credential or the request) apart without reading the message. The codes are sysexits.h's, so that they never
 * collide with the 1, 2 and 3 that some commands give a result (svm plan's verdicts, svm prune's).
 *
 * One classification, where the program catches errors (runProgram in src/client/cli.ts), from what the error is
 * (its class, its kind, the gRPC or errno code in its causes), and from the first words of the few messages svm
 * itself writes for a class it has no error type for (the Temporal connection's, src/config/temporal.ts; the
 * kubeconfig's, src/kube/client.ts).
 */
import { CommanderError } from 'commander';

export const EXIT = {
  /** Done as asked. */
  ok: 0,
  /** The command ran and did not end as asked (a migration Failed or Aborted), or an error of no class below. */
  failed: 1,
  /** A bad flag or argument, or a setting or kubeconfig svm cannot use: refused before anything is changed. */
  usage: 64,
  /** Temporal or the Kubernetes API did not answer (nothing listening, a name that does not resolve, a timeout, 5xx). */
  unreachable: 69,
  /** A service answered no: a credential or right refused (TLS, auth, RBAC), a namespace that does not exist, a request the migration refuses. */
  refused: 77,
} as const;

export type ErrorClass = 'usage' | 'unreachable' | 'refused' | 'failed';

/** Input svm refuses before it connects: exit EXIT.usage. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Errno codes of a connection that nothing answered. */
const UNREACHABLE_ERRNO = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET']);
/** gRPC status codes: UNAVAILABLE, DEADLINE_EXCEEDED; PERMISSION_DENIED, UNAUTHENTICATED. */
const GRPC_UNREACHABLE = new Set([14, 4]);
const GRPC_REFUSED = new Set([7, 16]);
/* eslint-disable @typescript-eslint/no-require-imports */
/**
 * The error types of input refused (svm's, the typed client's argument checks) and of refusals the typed client
 * reports by type, by instanceof: class names do not survive the CLI's minified bundle. Required only when a run
 * failed, so that a command that does not load them (svm version) still does not.
 */
function typed(err: unknown): ErrorClass | undefined {
  if (!(err instanceof Error)) return undefined;
  if (err instanceof UsageError || err instanceof RangeError) return 'usage';
  const { InvalidResourceError } = require('../kube/resolve') as typeof import('../kube/resolve');
  const { SettingsError } = require('../config/settings') as typeof import('../config/settings');
  const { DropInputError } = require('../kube/drop-shared') as typeof import('../kube/drop-shared');
  if (err instanceof InvalidResourceError || err instanceof SettingsError || err instanceof DropInputError) return 'usage';
  const { MigrationSteerRefusedError, MigrationNotRunningError } = require('./index') as typeof import('./index');
  if (err instanceof MigrationSteerRefusedError || err instanceof MigrationNotRunningError) return 'refused';
  return undefined;
}
/* eslint-enable @typescript-eslint/no-require-imports */

/** The error and its causes, outermost first (a bounded walk: a cycle of causes ends it). */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < 10 && !out.includes(e); e = (e as { cause?: unknown }).cause) out.push(e);
  return out;
}

/** The class of the error a run ended with. */
export function classifyError(err: unknown): ErrorClass {
  if (err instanceof CommanderError) return 'usage';
  const byType = typed(err);
  if (byType) return byType;
  const message = err instanceof Error ? err.message : String(err);
  // The Temporal connection's own words (explainTemporalConnectError, checkNamespaceAccess).
  if (/^cannot connect to Temporal at /.test(message)) return 'unreachable';
  if (/^cannot (connect to|use) Temporal: /.test(message)) return 'refused';
  // The kubeconfig's (src/kube/client.ts): a file svm cannot read or use.
  if (/^the kubeconfig /.test(message)) return 'usage';
  for (const e of chain(err)) {
    const kind = (e as { kind?: unknown }).kind;
    // KubeError (src/kube/errors.ts).
    if (kind === 'network' || kind === 'timeout' || kind === 'unavailable') return 'unreachable';
    if (kind === 'unauthorized' || kind === 'forbidden' || kind === 'webhookDenied') return 'refused';
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && GRPC_UNREACHABLE.has(code)) return 'unreachable';
    if (typeof code === 'number' && GRPC_REFUSED.has(code)) return 'refused';
    if (typeof code === 'string' && UNREACHABLE_ERRNO.has(code)) return 'unreachable';
  }
  return 'failed';
}

/** The exit code of a run that ended with err. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof CommanderError && err.exitCode === 0) return EXIT.ok; // --help, --version
  return EXIT[classifyError(err)];
}
