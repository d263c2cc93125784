/**
 * The one error classifier of the project: every Kubernetes response or
 * transport error becomes a KubeError with a kind that decides the policy.
 */

export type KubeErrorKind =
  | 'conflict' // 409: changed since we read it
  | 'notFound' // 404
  | 'gone' // 410: continue token expired
  | 'throttled' // 429 (Retry-After)
  | 'unavailable' // 5xx, including 503 while storage versions are unpublished, and unreachable webhooks
  | 'timeout' // request or server timeout
  | 'network' // connection refused/reset, socket hang up
  | 'unauthorized' // 401
  | 'forbidden' // 403
  | 'invalid' // 422
  | 'badRequest' // 400
  | 'webhookDenied' // an admission webhook denied the request
  | 'methodNotAllowed' // 405
  | 'other';

export class KubeError extends Error {
  constructor(
    readonly kind: KubeErrorKind,
    message: string,
    readonly status?: number,
    readonly retryAfterSeconds?: number,
    /** For 410 on a list: the inconsistent continue token from the error body. */
    readonly continueToken?: string,
  ) {
    super(message);
    this.name = 'KubeError';
  }
}

/** Transient: retry with backoff, bounded. */
export function isRetryable(kind: KubeErrorKind): boolean {
  return kind === 'throttled' || kind === 'unavailable' || kind === 'timeout' || kind === 'network';
}

/** A refusal of this one object's update: record it, migrate the rest. */
export function isPerObjectFailure(kind: KubeErrorKind): boolean {
  return kind === 'forbidden' || kind === 'invalid' || kind === 'badRequest' || kind === 'webhookDenied';
}

const MAX_MESSAGE = 300;

function statusMessage(body: string): { message?: string; reason?: string; continueToken?: string } {
  try {
    const s = JSON.parse(body) as { message?: string; reason?: string; metadata?: { continue?: string } };
    return { message: s.message, reason: s.reason, continueToken: s.metadata?.continue || undefined };
  } catch {
    return {};
  }
}

/** Classifies a non-2xx HTTP response. */
export function classifyResponse(status: number, body: string, retryAfterHeader?: string | string[]): KubeError {
  const parsed = statusMessage(body);
  const raw = parsed.message ?? (body.trim().slice(0, MAX_MESSAGE) || `HTTP ${status}`);
  const message = raw.length > MAX_MESSAGE ? raw.slice(0, MAX_MESSAGE) + '…' : raw;
  const retryAfterText = Array.isArray(retryAfterHeader) ? retryAfterHeader[0] : retryAfterHeader;
  const retryAfter = retryAfterText && /^\d+$/.test(retryAfterText) ? Number(retryAfterText) : undefined;
  if (/admission webhook .* denied the request/i.test(raw)) return new KubeError('webhookDenied', message, status);
  switch (status) {
    case 400:
      return new KubeError('badRequest', message, status);
    case 401:
      return new KubeError('unauthorized', message, status);
    case 403:
      return new KubeError('forbidden', message, status);
    case 404:
      return new KubeError('notFound', message, status);
    case 405:
      return new KubeError('methodNotAllowed', message, status);
    case 409:
      return new KubeError('conflict', message, status);
    case 410:
      return new KubeError('gone', message, status, undefined, parsed.continueToken);
    case 422:
      return new KubeError('invalid', message, status);
    case 429:
      return new KubeError('throttled', message, status, retryAfter ?? 1);
    case 504:
      return new KubeError('timeout', message, status, retryAfter);
    default:
      if (status >= 500) return new KubeError(parsed.reason === 'Timeout' ? 'timeout' : 'unavailable', message, status, retryAfter);
      return new KubeError('other', message, status);
  }
}

/** Classifies a transport error (no HTTP response). */
export function classifyTransportError(err: unknown): KubeError {
  if (err instanceof KubeError) return err;
  const e = err as NodeJS.ErrnoException;
  const code = e?.code ?? '';
  const msg = `${code ? code + ': ' : ''}${e?.message ?? String(err)}`;
  if (code === 'ETIMEDOUT' || /timeout/i.test(e?.message ?? '')) return new KubeError('timeout', msg);
  return new KubeError('network', msg);
}
