/**
 * The one error classifier of the project: every Kubernetes response or
 * transport error becomes a KubeError with a kind that decides the policy.
 *
 * What a KubeError's message may say
 * ------------------------------------------------------------------
 * The message reaches StorageVersionMigration status, workflow history,
 * logs and the Temporal UI, all read by people who must not read Secrets.
 * A response body can quote an object's content: a 422 quotes the invalid
 * value, a ValidatingAdmissionPolicy's messageExpression and a webhook's
 * message can say anything. So the rule is:
 *
 *   Free text is never copied from a response body. The message is composed
 *   here, from the HTTP code and these parts only:
 *   - the Status reason, if it is one of metav1's StatusReason constants
 *     (otherwise the standard name of the HTTP code);
 *   - for an invalid object (a Status made by the API server, not by a
 *     webhook): details.causes[].field and causes[].reason, each only if it
 *     has the shape of a field path / a cause type, at most MAX_CAUSES;
 *   - for an admission webhook denial: the webhook's name, read from the API
 *     server's own fixed prefix at the start of the message
 *     (`admission webhook "<name>" denied the request`); the webhook's
 *     message, reason and details are ignored (the webhook writes them all);
 *   - for a ValidatingAdmissionPolicy denial: the policy and binding names,
 *     read from the server's fixed prefix; never the policy's message;
 *   - for an RBAC refusal: "(RBAC)" and the verb refused;
 *   - for resource-level errors (the resource itself not served, 5xx, 429,
 *     410, non-Status bodies): fixed phrases of this file, chosen by
 *     recognising the server's fixed texts (by equality or an anchored
 *     prefix), plus the Retry-After seconds;
 *   - names are matched with a DNS-name pattern, so even a crafted message
 *     can yield nothing but such a name.
 *   Transport errors (no response) keep Node's error code and message: they
 *   are made from the socket, never from a body.
 *
 * Structured parts a caller needs to decide (details.name/group/kind of a
 * 404, the 410 continue token) travel in fields of the KubeError, never in
 * its message.
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

/** metav1.StatusDetails as the API server fills it (name, group, and the resource in `kind`). Never from a webhook. */
export interface StatusDetails {
  name?: string;
  group?: string;
  /** The resource (plural) for API server errors such as NotFound, e.g. "secrets". */
  kind?: string;
}

export interface KubeErrorInfo {
  /** The Status reason, only if it is a metav1 StatusReason constant. */
  reason?: string;
  details?: StatusDetails;
  /** A 404 that is the server's answer for a path it does not serve ("the server could not find the requested resource", "404 page not found"). */
  resourceNotServed?: boolean;
  /** For webhookDenied: the webhook's name. */
  webhook?: string;
  /** For a ValidatingAdmissionPolicy's denial: the policy's name. */
  policy?: string;
  /** A kept-alive connection closed by the server as idle just as this request went out (it was not read). */
  closedIdleConnection?: boolean;
  /** A 5xx because a CRD's conversion webhook failed: the group, version and kind it was asked to convert. */
  conversionFailed?: string;
  /**
   * A 503 from a filter in front of every handler, so the request was not handled and any verb is safe to send
   * again: 'storageVersionsPending', a server that has not yet published its StorageVersion objects (the
   * StorageVersion API on, the first seconds after it starts), or 'shuttingDown', a server past its shutdown delay.
   */
  notHandled?: 'storageVersionsPending' | 'shuttingDown';
  /** For a transport error: the API server address the request went to (the kubeconfig's server). */
  server?: string;
}

export class KubeError extends Error {
  constructor(
    readonly kind: KubeErrorKind,
    message: string,
    readonly status?: number,
    readonly retryAfterSeconds?: number,
    /** For 410 on a list: the inconsistent continue token from the error body. */
    readonly continueToken?: string,
    readonly info: KubeErrorInfo = {},
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

/** metav1.StatusReason constants: a reason outside this set is free text and is dropped. */
const STATUS_REASONS = new Set([
  'Unauthorized',
  'Forbidden',
  'NotFound',
  'AlreadyExists',
  'Conflict',
  'Gone',
  'Invalid',
  'ServerTimeout',
  'StoreReadError',
  'Timeout',
  'TooManyRequests',
  'BadRequest',
  'MethodNotAllowed',
  'NotAcceptable',
  'RequestEntityTooLarge',
  'UnsupportedMediaType',
  'InternalError',
  'Expired',
  'ServiceUnavailable',
]);

/** The reason the API server would give for a code, when the Status has none we may keep. */
const CODE_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Gone',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  502: 'BadGateway',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

const MAX_CAUSES = 5;
/** A DNS subdomain (webhook, policy and binding names). */
const DNS_NAME = '[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?';
/** A field path such as data.password, spec.items[2].name, metadata.labels[app.kubernetes.io/name]. */
const FIELD_PATH = /^[A-Za-z0-9_.\-/[\]:@~]{1,128}$/;
const CAUSE_TYPE = /^[A-Za-z]{1,64}$/;

const WEBHOOK_DENIAL = new RegExp(`^admission webhook "(${DNS_NAME})" denied the request`, 'i');
const WEBHOOK_CALL_FAILED = new RegExp(`^Internal error occurred: failed calling webhook "(${DNS_NAME})"`);
/** apiserver's WithStorageVersionPrecondition filter, in front of every handler (k8s.io/apiserver endpoints/filters/storageversion.go). */
const STORAGE_VERSIONS_PENDING = /^wait for storage version registration to complete for resource: /;
/** apiserver's WithWaitGroup filter once the server is shutting down (k8s.io/apiserver server/filters/waitgroup.go). */
const SHUTTING_DOWN = 'apiserver is shutting down';
/**
 * apiextensions-apiserver's webhook converter, `conversion webhook for <group>/<version>, Kind=<Kind> failed: ...`,
 * wrapped differently by the paths that read through it (`object not decodable revision=<n>: ...` on a get,
 * other prefixes on a list): the fixed text is recognised wherever it is in a 5xx's message, and only the kind,
 * by its shape, is kept.
 */
const CONVERSION_FAILED = /(?:^|: )conversion webhook for ([a-z0-9.-]+\/[a-z0-9]+, Kind=[A-Za-z0-9]+) failed/;
/** `<resource> ["<name>"] is forbidden: ` — the server's prefix of admission.NewForbidden and RBAC refusals. */
const FORBIDDEN_PREFIX = '^[a-z0-9.-]+(?: "[^"]*")? is forbidden: ';
const POLICY_DENIAL = new RegExp(
  `${FORBIDDEN_PREFIX}ValidatingAdmissionPolicy '(${DNS_NAME})'(?: with binding '(${DNS_NAME})')? denied request`,
);
const RBAC_DENIAL = new RegExp(`${FORBIDDEN_PREFIX}User "[^"]*" cannot ([a-z]{1,32}) resource "`);
/**
 * What kube-apiserver answers for a path it does not serve: a Status with this
 * message (an unknown group version), or Go's plain-text NotFound from its
 * mux (a custom resource version set served:false, a deleted CRD).
 */
const NOT_SERVED_STATUS = 'the server could not find the requested resource';
const NOT_SERVED_TEXT = '404 page not found';

interface ParsedStatus {
  kind?: unknown;
  message?: unknown;
  reason?: unknown;
  metadata?: { continue?: unknown };
  details?: { name?: unknown; group?: unknown; kind?: unknown; causes?: Array<{ reason?: unknown; field?: unknown }> };
}

function parseStatus(body: string): ParsedStatus | undefined {
  try {
    const s = JSON.parse(body) as unknown;
    return s && typeof s === 'object' && !Array.isArray(s) ? (s as ParsedStatus) : undefined;
  } catch {
    return undefined;
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** "data.password (FieldValueInvalid), spec.x (FieldValueRequired)" from details.causes, shape-checked. */
function describeCauses(causes: unknown): string | undefined {
  if (!Array.isArray(causes)) return undefined;
  const parts: string[] = [];
  for (const c of causes as Array<{ reason?: unknown; field?: unknown } | null>) {
    const field = str(c?.field);
    const type = str(c?.reason);
    const f = field && FIELD_PATH.test(field) ? field : undefined;
    const t = type && CAUSE_TYPE.test(type) ? type : undefined;
    if (!f && !t) continue;
    const part = f ? (t ? `${f} (${t})` : f) : `(${t})`;
    if (!parts.includes(part)) parts.push(part);
  }
  if (parts.length === 0) return undefined;
  return parts.length > MAX_CAUSES ? `${parts.slice(0, MAX_CAUSES).join(', ')}, …` : parts.join(', ');
}

/** Classifies a non-2xx HTTP response. The message follows the rule in this file's header. */
export function classifyResponse(status: number, body: string, retryAfterHeader?: string | string[]): KubeError {
  const parsed = parseStatus(body);
  const isStatus = parsed !== undefined && (parsed.kind === 'Status' || parsed.message !== undefined || parsed.reason !== undefined);
  const serverMessage = str(parsed?.message) ?? '';
  const rawReason = str(parsed?.reason);
  const reason = rawReason && STATUS_REASONS.has(rawReason) ? rawReason : undefined;
  const retryAfter = retryAfterSeconds(retryAfterHeader);
  const head = `HTTP ${status}${(reason ?? CODE_NAMES[status]) ? ` ${reason ?? CODE_NAMES[status]}` : ''}`;
  const at = (s?: string) => (s ? `${head}: ${s}` : head);

  // A webhook writes its whole Status (code, reason, message, details): only
  // its name, from the server's prefix, is ours to keep.
  const webhook = WEBHOOK_DENIAL.exec(serverMessage) ?? (isStatus ? null : WEBHOOK_DENIAL.exec(body.trimStart()));
  if (webhook) {
    const name = webhook[1]!.toLowerCase();
    return new KubeError('webhookDenied', at(`admission webhook "${name}" denied the request`), status, undefined, undefined, {
      reason,
      webhook: name,
    });
  }

  const d = parsed?.details;
  const details: StatusDetails | undefined =
    d && typeof d === 'object' ? { name: str(d.name), group: str(d.group), kind: str(d.kind) } : undefined;
  const info: KubeErrorInfo = { reason, details };
  const rbac = RBAC_DENIAL.exec(serverMessage);
  const detail = describeStatus(status, { serverMessage, body, isStatus, rbac: rbac !== null, causes: d?.causes }, info);

  let message = rbac ? `${head} (RBAC: cannot ${rbac[1]})` : at(detail);
  if (status === 429) message += ` (retry after ${retryAfter ?? 1}s)`;
  else if (retryAfter !== undefined) message += ` (Retry-After ${retryAfter}s)`;

  const retry = status === 429 ? (retryAfter ?? 1) : status >= 500 ? retryAfter : undefined;
  const continueToken = status === 410 ? str(parsed?.metadata?.continue) : undefined;
  return new KubeError(kindOf(status, isStatus, rawReason), message, status, retry, continueToken, info);
}

/** The Retry-After header's seconds (its HTTP-date form is not read). */
function retryAfterSeconds(header: string | string[] | undefined): number | undefined {
  const text = Array.isArray(header) ? header[0] : header;
  return text && /^\d+$/.test(text) ? Number(text) : undefined;
}

/**
 * What the message says after its head, from the server's fixed texts only, and what info learns from them
 * (conversionFailed, notHandled, resourceNotServed); undefined: the head alone. An RBAC refusal has its own message.
 */
function describeStatus(
  status: number,
  s: { serverMessage: string; body: string; isStatus: boolean; rbac: boolean; causes: unknown },
  info: KubeErrorInfo,
): string | undefined {
  let detail: string | undefined;
  const policy = POLICY_DENIAL.exec(s.serverMessage);
  const webhookCall = WEBHOOK_CALL_FAILED.exec(s.serverMessage);
  const conversion = status >= 500 ? CONVERSION_FAILED.exec(s.serverMessage) : null;
  if (policy) {
    detail = `ValidatingAdmissionPolicy "${policy[1]}"${policy[2] ? ` (binding "${policy[2]}")` : ''} denied the request`;
    info.policy = policy[1];
  } else if (s.rbac) detail = undefined;
  else if (webhookCall) detail = `calling admission webhook "${webhookCall[1]}" failed`;
  else if (conversion) {
    detail = `the conversion webhook for ${conversion[1]} failed`;
    info.conversionFailed = conversion[1];
  } else if (status === 503 && STORAGE_VERSIONS_PENDING.test(s.serverMessage)) {
    detail = 'the API server has not yet published its storage versions (it refuses writes until then; this one was not handled)';
    info.notHandled = 'storageVersionsPending';
  } else if (status === 503 && s.serverMessage === SHUTTING_DOWN) {
    detail = 'the API server is shutting down (this request was not handled)';
    info.notHandled = 'shuttingDown';
  } else if (status === 422 || status === 400) detail = describeCauses(s.causes);
  if (!s.isStatus && s.body.trim() !== '') detail = 'the response is not a Kubernetes Status';
  if (status === 404 && (s.isStatus ? s.serverMessage === NOT_SERVED_STATUS : s.body.trim() === NOT_SERVED_TEXT)) {
    detail = 'the requested resource is not served';
    info.resourceNotServed = true;
  }
  return detail;
}

/** The kind an HTTP status (and for a 5xx, its Status reason) decides. */
function kindOf(status: number, isStatus: boolean, rawReason: string | undefined): KubeErrorKind {
  switch (status) {
    case 400:
      // A 400 that is not a Status never reached the API: Go's HTTP server (or a proxy in front)
      // refused a malformed request, e.g. one cut short on a broken connection. Retry it like one.
      return isStatus ? 'badRequest' : 'network';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'notFound';
    case 405:
      return 'methodNotAllowed';
    case 409:
      return 'conflict';
    case 410:
      return 'gone';
    case 422:
      return 'invalid';
    case 429:
      return 'throttled';
    case 504:
      return 'timeout';
    default:
      if (status >= 500) return rawReason === 'Timeout' ? 'timeout' : 'unavailable';
      return 'other';
  }
}

/** Classifies a transport error (no HTTP response): Node's own code and message, never a body. */
export function classifyTransportError(err: unknown): KubeError {
  if (err instanceof KubeError) return err;
  const e = err as NodeJS.ErrnoException;
  const code = e?.code ?? '';
  const msg = `${code ? code + ': ' : ''}${e?.message ?? String(err)}`;
  if (code === 'ETIMEDOUT' || /timeout/i.test(e?.message ?? '')) return new KubeError('timeout', msg);
  return new KubeError('network', msg);
}
