/**
 * Splits a list response into the exact text of each item, so that the PUT
 * as listed (KubeClient.putAsListed) sends the object back byte for byte as
 * the API server listed it.
 * (JSON.parse + JSON.stringify would round integers above 2^53 in custom
 * resources and reorder nothing else, but "exactly as listed" is the rule.)
 *
 * The splitter works on a stream of chunks: each item is handed out as soon
 * as its closing brace arrives, so a page of five hundred one-megabyte
 * Secrets never has to be held whole. It scans bytes: every structural
 * character of JSON is ASCII, and no byte of a multi-byte UTF-8 sequence is,
 * so a chunk boundary inside a character cannot mislead it.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
/** The first byte of null, the one value besides an array that "items" may hold. */
const NULL_FIRST_BYTE = 0x6e;
const isWs = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
/** Bytes that end a bare value (number, true, false, null). */
const endsScalar = (b: number) => b === COMMA || b === CLOSE_BRACE || b === CLOSE_BRACKET || isWs(b);

type Phase =
  | 'start' // before the top-level '{'
  | 'key' // expecting a key or '}'
  | 'colon'
  | 'value' // expecting a top-level value
  | 'afterValue' // expecting ',' or '}'
  | 'itemOrClose' // inside "items": expecting an item or ']'
  | 'afterItem' // inside "items": expecting ',' or ']'
  | 'done';

/** A JSON value being captured, possibly across chunks. */
interface Capture {
  kind: 'string' | 'container' | 'scalar';
  pieces: Buffer[];
  bytes: number;
  depth: number;
  inString: boolean;
  escape: boolean;
}

/**
 * Incremental splitter of a Kubernetes list response. push() each chunk of
 * the body and take the complete items it returns; end() checks the response
 * was complete and returns the raw text of the other top-level fields
 * (kind, apiVersion, metadata), which are small.
 */
export class RawListSplitter {
  private phase: Phase = 'start';
  private cap: Capture | undefined;
  /** What the value being captured is: a key, a top-level field's value, or an item. */
  private capFor: 'key' | 'field' | 'item' = 'key';
  private key = '';
  private sawItems = false;
  private offset = 0;
  readonly fields = new Map<string, string>();

  /** Feeds one chunk; returns the items completed by it, each as its exact bytes. */
  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let i = 0;
    while (i < chunk.length) {
      if (this.cap) i = this.captureOn(chunk, i, out);
      else if (isWs(chunk[i]!)) i++;
      else i = this.structural(chunk, i);
    }
    this.offset += chunk.length;
    return out;
  }

  /** Takes the value being captured on from chunk[i]; returns the index after what it took (the chunk's end when the value goes on). */
  private captureOn(chunk: Buffer, i: number, out: Buffer[]): number {
    const end = this.scan(chunk, i);
    if (end < 0) {
      this.append(chunk.subarray(i));
      return chunk.length;
    }
    this.append(chunk.subarray(i, end));
    this.finishCapture(out);
    return end;
  }

  /** Reads the byte at chunk[i] between values (not whitespace) in the current phase; returns the index to go on from. */
  private structural(chunk: Buffer, i: number): number {
    const b = chunk[i]!;
    switch (this.phase) {
      case 'start':
        if (b !== OPEN_BRACE) throw new Error('list response is not a JSON object');
        this.phase = 'key';
        return i + 1;
      case 'key':
        if (b === CLOSE_BRACE) {
          this.phase = 'done';
          return i + 1;
        }
        if (b !== QUOTE) throw this.malformed(i);
        this.begin(chunk, i, 'key');
        return i;
      case 'colon':
        if (b !== COLON) throw this.malformed(i);
        this.phase = 'value';
        return i + 1;
      case 'value':
        return this.topLevelValue(chunk, i);
      case 'afterValue':
        if (b === COMMA) this.phase = 'key';
        else if (b === CLOSE_BRACE) this.phase = 'done';
        else throw this.malformed(i);
        return i + 1;
      case 'itemOrClose':
        if (b !== CLOSE_BRACKET) {
          this.begin(chunk, i, 'item');
          return i;
        }
        this.phase = 'afterValue';
        return i + 1;
      case 'afterItem':
        if (b === COMMA) this.phase = 'itemOrClose';
        else if (b === CLOSE_BRACKET) this.phase = 'afterValue';
        else throw this.malformed(i);
        return i + 1;
      case 'done':
        throw this.malformed(i);
    }
  }

  /** The value of a top-level field at chunk[i]: the "items" array is entered (each item is captured on its own), any other value captured whole. */
  private topLevelValue(chunk: Buffer, i: number): number {
    const b = chunk[i]!;
    if (this.key === 'items' && b === OPEN_BRACKET) {
      if (this.sawItems) throw new Error('malformed list response: "items" appears twice');
      this.sawItems = true;
      this.phase = 'itemOrClose';
      return i + 1;
    }
    if (this.key === 'items' && b !== NULL_FIRST_BYTE) throw new Error('"items" is not an array');
    this.begin(chunk, i, 'field');
    return i;
  }

  /** Checks that the response ended where a complete list ends. */
  end(): void {
    if (this.cap?.kind === 'scalar' && this.capFor === 'field') throw new Error('list response ends inside a value');
    if (this.cap) throw new Error('unterminated value in list response');
    if (this.phase === 'start') throw new Error('list response is not a JSON object');
    if (this.phase === 'itemOrClose' || this.phase === 'afterItem') throw new Error('list response ends inside "items"');
    if (this.phase !== 'done') throw new Error('unterminated list response');
  }

  private malformed(i: number): Error {
    return new Error(`malformed list response at offset ${this.offset + i}`);
  }

  private begin(chunk: Buffer, i: number, what: 'key' | 'field' | 'item'): void {
    const b = chunk[i]!;
    const kind = b === QUOTE ? 'string' : b === OPEN_BRACE || b === OPEN_BRACKET ? 'container' : 'scalar';
    if (kind === 'scalar' && endsScalar(b)) throw this.malformed(i);
    this.cap = { kind, pieces: [], bytes: 0, depth: 0, inString: false, escape: false };
    this.capFor = what;
  }

  private append(piece: Buffer): void {
    if (piece.length === 0) return;
    this.cap!.pieces.push(piece);
    this.cap!.bytes += piece.length;
  }

  /** Index just past the end of the captured value in chunk, or -1 if it goes on. */
  private scan(chunk: Buffer, i: number): number {
    const c = this.cap!;
    const n = chunk.length;
    if (c.kind === 'scalar') {
      while (i < n && !endsScalar(chunk[i]!)) i++;
      return i < n ? i : -1;
    }
    if (c.kind === 'string' && c.bytes === 0 && !c.inString) {
      c.inString = true;
      i++;
    }
    /** The first quote at or after i in chunk (-1: none), kept while i has not passed it. */
    let q = -2;
    while (i < n) {
      if (c.inString) {
        if (c.escape) {
          c.escape = false;
          i++;
          continue;
        }
        // Long strings (Secret data) are skipped by indexOf, not byte by byte; a backslash is looked for only up to
        // the next quote (looking to the chunk's end for each string made a chunk of many short strings quadratic).
        if (q < i && q !== -1) q = chunk.indexOf(QUOTE, i);
        const bs = chunk.subarray(i, q < 0 ? n : q).indexOf(BACKSLASH);
        if (bs >= 0) {
          c.escape = true;
          i += bs + 1;
          continue;
        }
        if (q < 0) return -1;
        c.inString = false;
        i = q + 1;
        if (c.kind === 'string') return i;
        continue;
      }
      const b = chunk[i]!;
      if (b === QUOTE) c.inString = true;
      else if (b === OPEN_BRACE || b === OPEN_BRACKET) c.depth++;
      else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
        c.depth--;
        if (c.depth === 0) return i + 1;
      }
      i++;
    }
    return -1;
  }

  private finishCapture(out: Buffer[]): void {
    const c = this.cap!;
    this.cap = undefined;
    const bytes = c.pieces.length === 1 ? c.pieces[0]! : Buffer.concat(c.pieces, c.bytes);
    if (this.capFor === 'item') {
      out.push(bytes);
      this.phase = 'afterItem';
    } else if (this.capFor === 'key') {
      try {
        this.key = JSON.parse(bytes.toString('utf8')) as string;
      } catch {
        throw new Error(`malformed key in list response at offset ${this.offset}`); // never V8's message: it quotes the text
      }
      this.phase = 'colon';
    } else {
      if (this.key === 'items' && bytes.toString('latin1') !== 'null') throw new Error('"items" is not an array');
      if (this.key !== 'items') this.fields.set(this.key, bytes.toString('utf8'));
      this.phase = 'afterValue';
    }
  }
}

/** The raw text of each element of the top-level "items" array. */
export function rawListItems(text: string): string[] {
  const s = new RawListSplitter();
  const items = s.push(Buffer.from(text, 'utf8'));
  s.end();
  return items.map((b) => b.toString('utf8'));
}

// ------------------------------------------------------------ one item's identity

function skipWs(s: string, i: number): number {
  while (i < s.length && (s[i] === ' ' || s[i] === '\n' || s[i] === '\r' || s[i] === '\t')) i++;
  return i;
}

/**
 * Index just past the string starting at s[i] === '"': the first quote not escaped, that is not preceded by an odd
 * run of backslashes. Linear in the string's length (searching for the next backslash instead scanned to the item's
 * end for every string without one: quadratic in an item of many strings, such as a large managedFields).
 */
function skipString(s: string, i: number): number {
  for (i++; ;) {
    const q = s.indexOf('"', i);
    if (q < 0) throw new Error('unterminated string in list item');
    let backslashes = 0;
    for (let b = q - 1; b >= i && s.charCodeAt(b) === 92; b--) backslashes++;
    if (backslashes % 2 === 0) return q + 1;
    i = q + 1;
  }
}

/** Index just past the JSON value starting at s[i]. */
function skipValue(s: string, i: number): number {
  i = skipWs(s, i);
  const c = s[i];
  if (c === '"') return skipString(s, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    while (i < s.length) {
      const d = s[i];
      if (d === '"') {
        i = skipString(s, i);
        continue;
      }
      if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    throw new Error('unterminated value in list item');
  }
  while (i < s.length && !',}] \n\r\t'.includes(s[i]!)) i++;
  return i;
}

/**
 * The top-level apiVersion, kind and metadata of one item, parsed without
 * parsing the rest (a Secret's data stays one string, never a second copy).
 */
export function itemIdentity(raw: string): {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    managedFields?: Array<{ manager?: string; apiVersion?: string }>;
  };
} {
  const out: Record<string, unknown> = {};
  let i = skipWs(raw, 0);
  if (raw[i] !== '{') throw new Error('list item is not a JSON object');
  i = skipWs(raw, i + 1);
  while (i < raw.length && raw[i] !== '}') {
    if (raw[i] !== '"') throw new Error('malformed list item');
    const keyEnd = skipString(raw, i);
    const key = JSON.parse(raw.slice(i, keyEnd)) as string;
    i = skipWs(raw, keyEnd);
    if (raw[i] !== ':') throw new Error('malformed list item');
    const start = skipWs(raw, i + 1);
    const end = skipValue(raw, start);
    if (end === start) throw new Error('malformed list item');
    if (key === 'apiVersion' || key === 'kind' || key === 'metadata') {
      try {
        out[key] = JSON.parse(raw.slice(start, end));
      } catch {
        throw new Error(`list item: malformed ${key}`);
      }
    }
    i = skipWs(raw, end);
    if (raw[i] === ',') i = skipWs(raw, i + 1);
  }
  return out as ReturnType<typeof itemIdentity>;
}

/** The item with apiVersion and kind set (list items of built-in types omit them). */
export function withTypeMeta(raw: string, apiVersion: string, kind: string, has: { apiVersion?: unknown; kind?: unknown }): string {
  if (has.apiVersion && has.kind) return raw;
  const prefix = `${has.apiVersion ? '' : `"apiVersion":${JSON.stringify(apiVersion)},`}${has.kind ? '' : `"kind":${JSON.stringify(kind)},`}`;
  const body = raw.slice(1).trimStart();
  return body.startsWith('}') ? `{${prefix.slice(0, -1)}}` : `{${prefix}${body}`;
}
