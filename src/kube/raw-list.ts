/**
 * Splits a list response into the exact text of each item, so that a no-op
 * update sends back the object byte for byte as the API server listed it.
 * (JSON.parse + JSON.stringify would round integers above 2^53 in custom
 * resources and reorder nothing else, but "exactly as listed" is the rule.)
 */

function skipWs(s: string, i: number): number {
  while (i < s.length && (s[i] === ' ' || s[i] === '\n' || s[i] === '\r' || s[i] === '\t')) i++;
  return i;
}

/** Index just past the string starting at s[i] === '"'. */
function skipString(s: string, i: number): number {
  i++;
  while (i < s.length) {
    const c = s[i];
    if (c === '\\') i += 2;
    else if (c === '"') return i + 1;
    else i++;
  }
  throw new Error('unterminated string in list response');
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
    throw new Error('unterminated value in list response');
  }
  while (i < s.length && !',}] \n\r\t'.includes(s[i]!)) i++;
  return i;
}

/** The raw text of each element of the top-level "items" array. */
export function rawListItems(text: string): string[] {
  let i = skipWs(text, 0);
  if (text[i] !== '{') throw new Error('list response is not a JSON object');
  i++;
  for (;;) {
    i = skipWs(text, i);
    if (text[i] === '}') return [];
    const keyEnd = skipString(text, i);
    let key: string;
    try {
      key = JSON.parse(text.slice(i, keyEnd)) as string;
    } catch {
      throw new Error(`malformed key in list response at offset ${i}`); // never V8's message: it quotes the text
    }
    i = skipWs(text, keyEnd);
    if (text[i] !== ':') throw new Error('malformed list response');
    i = skipWs(text, i + 1);
    if (key === 'items') {
      if (text.startsWith('null', i)) return [];
      if (text[i] !== '[') throw new Error('"items" is not an array');
      const items: string[] = [];
      i = skipWs(text, i + 1);
      while (text[i] !== ']') {
        if (i >= text.length) throw new Error('list response ends inside "items"');
        const end = skipValue(text, i);
        if (end === i) throw new Error(`malformed list response at offset ${i}`);
        items.push(text.slice(i, end));
        i = skipWs(text, end);
        if (text[i] === ',') i = skipWs(text, i + 1);
      }
      return items;
    }
    i = skipWs(text, skipValue(text, i));
    if (text[i] === ',') i++;
  }
}

/** The item with apiVersion and kind set (list items of built-in types omit them). */
export function withTypeMeta(raw: string, apiVersion: string, kind: string, has: { apiVersion?: unknown; kind?: unknown }): string {
  if (has.apiVersion && has.kind) return raw;
  const prefix = `${has.apiVersion ? '' : `"apiVersion":${JSON.stringify(apiVersion)},`}${has.kind ? '' : `"kind":${JSON.stringify(kind)},`}`;
  const body = raw.slice(1).trimStart();
  return body.startsWith('}') ? `{${prefix.slice(0, -1)}}` : `{${prefix}${body}`;
}
