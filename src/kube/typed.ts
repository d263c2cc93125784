/**
 * Parsing what the API server returns with the zod schemas of src/api, so
 * that every typed read of the kube layer refuses a malformed object the same
 * way: a KubeError('other') that names the kind, the object (when the caller
 * knows its name: it asked for it) and the fields that did not match, never
 * a value. zod's own messages are not used: some quote the input, and the
 * input may be anything (the rule of src/kube/errors.ts).
 */
import type { z } from 'zod';
import { parseJson } from './client';
import { classifyResponse, KubeError } from './errors';
import type { KubeClient, KubeResponse } from './client';

/** What a malformed object is: the kind, and the name when the caller asked for one by name. */
export interface ObjectDescription {
  kind: string;
  name?: string;
}

/** A segment of a field path, as long as it has the shape of a field name (a record's key might be anything). */
const SEGMENT = /^[A-Za-z0-9_.\-/]{1,63}$/;
const MAX_ISSUES = 3;

export class MalformedObjectError extends KubeError {
  constructor(
    message: string,
    /** The field paths that did not match (e.g. "spec.versions[0].storage"). */
    readonly fields: string[],
  ) {
    super('other', message);
    this.name = 'MalformedObjectError';
  }
}

/** "spec.versions[0].storage" from a zod issue path; keys that are not field-shaped become "*". */
export function fieldPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else {
      const s = typeof seg === 'string' && SEGMENT.test(seg) ? seg : '*';
      out += out ? `.${s}` : s;
    }
  }
  return out || '(the object)';
}

/** What is wrong with a field, from the issue's code and our schema's expectation only. */
function problem(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? `missing (expected ${issue.expected})` : `expected ${issue.expected}`;
    case 'invalid_value':
      return 'not an allowed value';
    case 'invalid_union':
      return 'matches none of the allowed shapes';
    case 'invalid_format':
      return `not a valid ${issue.format}`;
    case 'too_big':
    case 'too_small':
      return 'out of range';
    default:
      return `invalid (${issue.code})`;
  }
}

/** The object as the schema says, or a MalformedObjectError naming the kind and fields. */
export function parseAs<S extends z.ZodType>(schema: S, value: unknown, what: ObjectDescription): z.output<S> {
  const parsed = schema.safeParse(value, { reportInput: true });
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues;
  const fields = issues.map((i) => fieldPath(i.path));
  const parts = issues.slice(0, MAX_ISSUES).map((i, n) => `${fields[n]} ${problem(i)}`);
  const more = issues.length > MAX_ISSUES ? `, and ${issues.length - MAX_ISSUES} more` : '';
  const subject = what.name ? `${what.kind} ${what.name}` : `a ${what.kind}`;
  return throwMalformed(`${subject} does not match its schema: ${parts.join('; ')}${more}`, fields);
}

function throwMalformed(message: string, fields: string[]): never {
  throw new MalformedObjectError(message, fields);
}

/** Text (a response body) parsed as JSON, then as the schema says. */
export function parseBodyAs<S extends z.ZodType>(schema: S, body: string, what: ObjectDescription): z.output<S> {
  return parseAs(schema, parseJson(body, what.name ? `${what.kind} ${what.name}` : `a ${what.kind}`), what);
}

/** The items of a list body, each parsed as the schema says (a malformed item refuses the whole list). */
export function parseListAs<S extends z.ZodType>(schema: S, body: string, kind: string): Array<z.output<S>> {
  const list = parseJson<{ items?: unknown }>(body, `a ${kind} list`);
  const items = list && typeof list === 'object' ? list.items : undefined;
  if (items !== undefined && items !== null && !Array.isArray(items))
    throw new MalformedObjectError(`a ${kind} list does not match its schema: items expected array`, ['items']);
  return ((items as unknown[] | null | undefined) ?? []).map((item, i) => parseAs(schema, item, { kind, name: `(list item ${i})` }));
}

/** A response that must be 2xx, else classified (src/kube/errors.ts). For requests made with raw(). */
export function ensureOk(res: KubeResponse): KubeResponse {
  if (res.status < 200 || res.status >= 300) throw classifyResponse(res.status, res.body, res.headers['retry-after']);
  return res;
}

/**
 * Every item of a cluster-wide list, page by page (500 at a time), as the
 * server sent it, or undefined when the API is not served (404: a CRD not
 * installed, an alpha API off). Parse each with parseAs: a caller may skip a
 * malformed item (and say so) rather than refuse the whole list.
 */
export async function listAllIfServed(
  kube: KubeClient,
  path: string,
  kind: string,
  query: Record<string, string> = {},
): Promise<unknown[] | undefined> {
  const out: unknown[] = [];
  let cont: string | undefined;
  do {
    const res = await kube.request('GET', path, { query: { ...query, limit: 500, ...(cont ? { continue: cont } : {}) }, allow: [404] });
    if (res.status === 404) return undefined;
    ensureOk(res);
    const page = parseJson<{ items?: unknown; metadata?: { continue?: unknown } }>(res.body, `a ${kind} list`);
    if (page?.items !== undefined && page.items !== null && !Array.isArray(page.items))
      throw new MalformedObjectError(`a ${kind} list does not match its schema: items expected array`, ['items']);
    out.push(...((page?.items as unknown[] | null | undefined) ?? []));
    cont = typeof page?.metadata?.continue === 'string' && page.metadata.continue ? page.metadata.continue : undefined;
  } while (cont);
  return out;
}
