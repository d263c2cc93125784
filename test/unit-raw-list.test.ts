/**
 * Unit tests of src/kube/raw-list.ts: splitting a list response into the
 * exact text of each item, and adding apiVersion/kind to an item's text.
 * Pure string logic: no cluster, no network.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { itemIdentity, RawListSplitter, rawListItems, withTypeMeta } from '../src/kube/raw-list';

/** Splits, and checks that every slice parses to the same value as the matching item of JSON.parse. */
function splitAndCompare(text: string): string[] {
  const slices = rawListItems(text);
  const parsed = JSON.parse(text) as { items?: unknown[] | null };
  const items = parsed.items ?? [];
  assert.equal(slices.length, items.length, 'one slice per parsed item');
  slices.forEach((s, i) => {
    assert.deepEqual(JSON.parse(s), items[i], `slice ${i} parses to item ${i}`);
    // Each slice is a substring of the response at the exact position of the item.
    assert.ok(text.includes(s), `slice ${i} is verbatim text of the response`);
    assert.equal(s, s.trim(), `slice ${i} has no surrounding whitespace`);
  });
  return slices;
}

// --- rawListItems ---------------------------------------------------------------

void test('rawListItems: simple compact list returns each item verbatim', () => {
  const a = '{"metadata":{"name":"a","namespace":"ns","resourceVersion":"1"},"data":{"k":"dg=="}}';
  const b = '{"metadata":{"name":"b","namespace":"ns","resourceVersion":"2"}}';
  const text = `{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[${a},${b}]}`;
  const slices = splitAndCompare(text);
  assert.deepEqual(slices, [a, b]);
});

void test('rawListItems: strings containing brackets, braces, commas and quotes do not confuse the split', () => {
  const a = String.raw`{"metadata":{"name":"a"},"data":{"tricky":"}]},{[\"items\":[","close":"]]]}}}","open":"{{{[[["}}`;
  const b = String.raw`{"metadata":{"name":"b"},"note":"a \"quoted\" value, with ] and } inside","empty":""}`;
  const text = `{"items":[${a},${b}]}`;
  const slices = splitAndCompare(text);
  assert.deepEqual(slices, [a, b]);
  assert.equal((JSON.parse(slices[0]!) as { data: { tricky: string } }).data.tricky, '}]},{["items":[');
});

void test('rawListItems: backslashes, including a string ending in an escaped backslash', () => {
  // "a\\" is the string a\ : its closing quote must not be taken as escaped.
  const a = String.raw`{"path":"C:\\dir\\","next":"x"}`;
  const b = String.raw`{"only":"\\"}`;
  const c = String.raw`{"mix":"\\\"\\\\\"","k":"]"}`;
  const d = String.raw`{"esc":"\/\b\f\n\r\t\u0041\u005c\u0022"}`;
  const text = `{"items":[${a},${b},${c},${d}]}`;
  const slices = splitAndCompare(text);
  assert.deepEqual(slices, [a, b, c, d]);
  assert.equal((JSON.parse(slices[0]!) as { path: string }).path, 'C:\\dir\\');
  assert.equal((JSON.parse(slices[1]!) as { only: string }).only, '\\');
});

void test('rawListItems: unicode (BMP, astral/surrogate pairs, escaped and literal) is preserved', () => {
  const a = '{"name":"ünïcødé","jp":"日本語","emoji":"🚀👩‍👩‍👧","rtl":"שלום"}';
  const b = String.raw`{"escaped":"\ud83d\ude80 \u00e9 \u2028\u2029","zero":"a\u0000b"}`;
  const c = '{"sep":"\u2028\u2029"}';
  const text = `{"items":[${a},${b},${c}]}`;
  const slices = splitAndCompare(text);
  assert.deepEqual(slices, [a, b, c]);
  assert.equal((JSON.parse(slices[0]!) as { emoji: string }).emoji, '🚀👩‍👩‍👧');
});

void test('rawListItems: deeply nested arrays and objects', () => {
  const a = '{"spec":{"matrix":[[1,[2,[3,{"x":[[],{}]}]]],[]],"obj":{"a":{"b":{"c":{"d":[{"e":[{}]}]}}}}}}';
  const b = '{"spec":{"list":[{"a":[1,2,{"b":"]"}]},[[["}"]]]]}}';
  const text = `{"items":[${a},${b}]}`;
  const slices = splitAndCompare(text);
  assert.deepEqual(slices, [a, b]);
});

void test('rawListItems: integers above 2^53 keep their exact text', () => {
  const a =
    '{"metadata":{"name":"big"},"spec":{"n":9007199254740993,"neg":-9007199254740993,"huge":123456789012345678901234567890,"f":1.0000000000000000001,"e":1e400}}';
  const text = `{"items":[${a}]}`;
  const slices = rawListItems(text);
  assert.equal(slices.length, 1);
  assert.equal(slices[0], a);
  assert.ok(slices[0]!.includes('9007199254740993'), 'exact digits kept');
  assert.ok(slices[0]!.includes('-9007199254740993'));
  assert.ok(slices[0]!.includes('123456789012345678901234567890'));
  assert.ok(slices[0]!.includes('1.0000000000000000001'));
  // What JSON.parse + JSON.stringify would have done instead (the reason for this module):
  assert.ok(!JSON.stringify(JSON.parse(a)).includes('9007199254740993'));
});

void test('rawListItems: items that are bare numbers, strings, booleans and null', () => {
  const text = '{"items":[9007199254740993, -1.5e+10 ,"s,]}",true,false,null,{},[]]}';
  const slices = rawListItems(text);
  assert.deepEqual(slices, ['9007199254740993', '-1.5e+10', '"s,]}"', 'true', 'false', 'null', '{}', '[]']);
  assert.deepEqual(
    slices.map((s) => JSON.parse(s) as unknown),
    (JSON.parse(text) as { items: unknown[] }).items,
  );
});

void test('rawListItems: "items": null gives no items', () => {
  assert.deepEqual(rawListItems('{"kind":"List","items":null}'), []);
  assert.deepEqual(rawListItems('{"items":null,"kind":"List"}'), []);
  assert.deepEqual(rawListItems('{ "items" : null }'), []);
});

void test('rawListItems: "items": [] (and with whitespace inside) gives no items', () => {
  assert.deepEqual(rawListItems('{"items":[]}'), []);
  assert.deepEqual(rawListItems('{"kind":"List","items":[],"metadata":{}}'), []);
  assert.deepEqual(rawListItems('{"items":[ \n\t\r ]}'), []);
});

void test('rawListItems: no "items" key at all, and an empty object', () => {
  assert.deepEqual(rawListItems('{}'), []);
  assert.deepEqual(rawListItems('  { }  '), []);
  assert.deepEqual(rawListItems('{"kind":"List","metadata":{"continue":"x"}}'), []);
});

void test('rawListItems: "items" first, middle and last among the top-level keys', () => {
  const a = '{"metadata":{"name":"a"}}';
  const b = '{"metadata":{"name":"b"},"x":[1,2]}';
  const metadata = '{"resourceVersion":"9","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==","remainingItemCount":12}';
  for (const text of [
    `{"items":[${a},${b}],"kind":"List","apiVersion":"v1","metadata":${metadata}}`,
    `{"kind":"List","items":[${a},${b}],"apiVersion":"v1","metadata":${metadata}}`,
    `{"kind":"List","apiVersion":"v1","metadata":${metadata},"items":[${a},${b}]}`,
  ]) {
    assert.deepEqual(splitAndCompare(text), [a, b], text);
  }
});

void test('rawListItems: top-level values before "items" that look like items are skipped', () => {
  const a = '{"metadata":{"name":"real"}}';
  const text =
    '{"metadata":{"items":[{"metadata":{"name":"decoy1"}}]},' +
    '"note":"\\"items\\":[{\\"decoy\\":2}]",' +
    '"list":[[{"items":[1]}],"]"],' +
    '"n":-12.5e3,"t":true,"f":false,"z":null,' +
    `"items":[${a}]}`;
  assert.deepEqual(splitAndCompare(text), [a]);
});

void test('rawListItems: an escaped key that decodes to "items" is the items key (as JSON.parse reads it)', () => {
  const a = '{"metadata":{"name":"a"}}';
  const text = `{"kind":"List","\\u0069tems":[${a}]}`;
  assert.deepEqual(splitAndCompare(text), [a]);
});

void test('rawListItems: a key merely containing "items" is not the items key', () => {
  const a = '{"metadata":{"name":"a"}}';
  const text = `{"itemsX":[{"no":1}],"xitems":[{"no":2}],"items":[${a}]}`;
  assert.deepEqual(splitAndCompare(text), [a]);
});

void test('rawListItems: pretty-printed JSON (2-space indent) gives slices equal to each item', () => {
  const list = {
    kind: 'ConfigMapList',
    apiVersion: 'v1',
    metadata: { resourceVersion: '77', continue: '' },
    items: [
      {
        metadata: { name: 'a', namespace: 'default', labels: { x: 'y' } },
        data: { 'k.json': '{"a":[1,2]}', s: 'with ] } [ { and "quotes" and \\ backslash' },
      },
      { metadata: { name: 'b', namespace: 'default' }, data: {} },
      {
        metadata: { name: 'c', namespace: 'kube-system', annotations: { u: '日本 🚀' } },
        binaryData: { b: 'AAEC' },
        list: [[], [{}], [1, [2]]],
      },
    ],
  };
  for (const indent of [2, 4, '\t']) {
    const text = JSON.stringify(list, null, indent);
    const slices = splitAndCompare(text);
    assert.equal(slices.length, 3);
    // The slices keep the indentation inside the item, byte for byte.
    slices.forEach((s, i) => {
      assert.ok(s.startsWith('{') && s.endsWith('}'));
      assert.ok(s.includes('\n'), `item ${i} text keeps its line breaks`);
    });
  }
});

void test('rawListItems: CRLF and irregular whitespace between tokens', () => {
  const a = '{ "a" : [ 1 , 2 ] }';
  const b = '{\r\n\t"b":\r\n\t\t"x"\r\n}';
  const text = `\r\n {\r\n "kind" : "List" ,\r\n\t"items" \r\n:\r\n [\r\n ${a} \r\n,\r\n\t${b}\r\n ]\r\n ,"metadata" : { } \r\n}\r\n`;
  assert.deepEqual(splitAndCompare(text), [a, b]);
});

void test('rawListItems: a large list is split into as many slices as it has items', () => {
  const items = Array.from({ length: 500 }, (_, i) => ({
    metadata: { name: `o-${i}`, resourceVersion: String(i) },
    data: { v: `]${i}}` },
  }));
  const text = JSON.stringify({ kind: 'List', items, metadata: {} });
  const slices = splitAndCompare(text);
  assert.equal(slices.length, 500);
  assert.equal(slices[499], JSON.stringify(items[499]));
});

void test('rawListItems: inputs that are not a list object are refused', () => {
  assert.throws(() => rawListItems('[]'), /not a JSON object/);
  assert.throws(() => rawListItems(''), /not a JSON object/);
  assert.throws(() => rawListItems('"items"'), /not a JSON object/);
  assert.throws(() => rawListItems('{"items":{"a":1}}'), /"items" is not an array/);
  assert.throws(() => rawListItems('{"items":"[]"}'), /"items" is not an array/);
  assert.throws(() => rawListItems('{"items" 1}'), /malformed/);
  assert.throws(() => rawListItems('{"a":"unterminated'), /unterminated/);
  assert.throws(() => rawListItems('{"items":[{"a":"b"'), /unterminated/);
});

/**
 * Runs rawListItems in a worker with a small heap, so that an endless loop
 * (which grows the result array) ends in an out-of-memory error rather than
 * hanging the suite. Resolves to the error message thrown, or 'OOM'.
 */
function runBounded(text: string): Promise<string> {
  const modulePath = path.resolve(__dirname, '../src/kube/raw-list.ts');
  // The worker does not inherit tsx's hooks: register tsx's CommonJS loader there first.
  const tsxCjs = require.resolve('tsx/cjs');
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    require(workerData.tsxCjs);
    const { rawListItems } = require(workerData.modulePath);
    try { const r = rawListItems(workerData.text); parentPort.postMessage('returned ' + r.length); }
    catch (e) { parentPort.postMessage('threw: ' + e.message); }
  `;
  return new Promise((resolve, reject) => {
    const w = new Worker(code, {
      eval: true,
      workerData: { text, modulePath, tsxCjs },
      resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 8 },
    });
    let result: string | undefined;
    w.on('message', (m: string) => {
      result = m;
    });
    w.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') result = 'OOM';
      else reject(err);
    });
    w.on('exit', () => resolve(result ?? 'OOM'));
  });
}

void test('rawListItems in a bounded worker: the harness reports returns and throws', async () => {
  assert.equal(await runBounded('{"items":[{"a":1},2]}'), 'returned 2');
  assert.match(await runBounded('[]'), /^threw: .*not a JSON object/);
  assert.match(await runBounded('{"items":[{"a":"b"'), /^threw: .*unterminated/);
});

void test('rawListItems: a response truncated inside the items array throws instead of looping forever', async () => {
  // A body cut after a complete item (or right after the opening bracket)
  // must be refused like other malformed input, not split into endless empty items.
  const inputs = ['{"items":[{"a":1}', '{"items":[', '{"items":[{"a":1},', '{"items":[1,2', '{"items":[{"a":1} '];
  const outcomes: Record<string, string> = {};
  for (const text of inputs) outcomes[text] = await runBounded(text);
  const bad = Object.entries(outcomes).filter(([, o]) => !o.startsWith('threw: '));
  assert.deepEqual(bad, [], `these truncated inputs did not throw (OOM = endless loop): ${JSON.stringify(bad)}`);
});

// --- withTypeMeta ---------------------------------------------------------------

void test('withTypeMeta: adds apiVersion and kind when both are missing, keeping the rest byte for byte', () => {
  const raw = '{"metadata":{"name":"a","resourceVersion":"1"},"data":{"n":9007199254740993,"s":"}"}}';
  const out = withTypeMeta(raw, 'v1', 'Secret', {});
  assert.equal(
    out,
    '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a","resourceVersion":"1"},"data":{"n":9007199254740993,"s":"}"}}',
  );
  assert.ok(out.endsWith(raw.slice(1)), 'the original text follows the added fields unchanged');
  const parsed = JSON.parse(out) as Record<string, unknown>;
  assert.equal(parsed.apiVersion, 'v1');
  assert.equal(parsed.kind, 'Secret');
});

void test('withTypeMeta: grouped apiVersion', () => {
  const raw = '{"metadata":{"name":"d"}}';
  const out = withTypeMeta(raw, 'apps/v1', 'Deployment', { apiVersion: undefined, kind: undefined });
  assert.equal(out, '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}');
});

void test('withTypeMeta: returns the input unchanged when both are present', () => {
  const raw = '{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"w"},"spec":{"n":9007199254740993}}';
  const out = withTypeMeta(raw, 'example.com/v2', 'Widget', { apiVersion: 'example.com/v2', kind: 'Widget' });
  assert.equal(out, raw);
  // Even when the given values differ, what the server listed wins: nothing is added or replaced.
  assert.equal(withTypeMeta(raw, 'other/v1', 'Other', { apiVersion: 'example.com/v2', kind: 'Widget' }), raw);
});

void test('withTypeMeta: adds only kind when apiVersion is present', () => {
  const raw = '{"apiVersion":"v1","metadata":{"name":"a"}}';
  const out = withTypeMeta(raw, 'v1', 'ConfigMap', { apiVersion: 'v1' });
  assert.equal(out, '{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}');
  const parsed = JSON.parse(out) as Record<string, unknown>;
  assert.deepEqual(Object.keys(parsed).sort(), ['apiVersion', 'kind', 'metadata']);
});

void test('withTypeMeta: adds only apiVersion when kind is present', () => {
  const raw = '{"kind":"ConfigMap","metadata":{"name":"a"}}';
  const out = withTypeMeta(raw, 'v1', 'ConfigMap', { kind: 'ConfigMap' });
  assert.equal(out, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}');
  assert.equal((JSON.parse(out) as { apiVersion: string }).apiVersion, 'v1');
});

void test('withTypeMeta: handles {} and { } without a trailing comma', () => {
  assert.equal(withTypeMeta('{}', 'v1', 'Pod', {}), '{"apiVersion":"v1","kind":"Pod"}');
  assert.equal(withTypeMeta('{ \n }', 'v1', 'Pod', {}), '{"apiVersion":"v1","kind":"Pod"}');
  assert.equal(withTypeMeta('{}', 'v1', 'Pod', { apiVersion: 'v1' }), '{"kind":"Pod"}');
  assert.equal(withTypeMeta('{}', 'v1', 'Pod', { kind: 'Pod' }), '{"apiVersion":"v1"}');
  for (const s of [withTypeMeta('{}', 'v1', 'Pod', {}), withTypeMeta('{ }', 'v1', 'Pod', { kind: 'Pod' })]) {
    assert.doesNotThrow(() => JSON.parse(s), s);
  }
});

void test('withTypeMeta: pretty-printed item stays valid and keeps its text after the opening brace', () => {
  const raw = '{\n  "metadata": {\n    "name": "a"\n  },\n  "data": {\n    "n": 9007199254740993\n  }\n}';
  const out = withTypeMeta(raw, 'v1', 'ConfigMap', {});
  assert.ok(out.startsWith('{"apiVersion":"v1","kind":"ConfigMap",'), out);
  assert.ok(out.endsWith('"metadata": {\n    "name": "a"\n  },\n  "data": {\n    "n": 9007199254740993\n  }\n}'), out);
  assert.deepEqual(JSON.parse(out), {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'a' },
    data: { n: JSON.parse('9007199254740993') as number },
  });
});

void test('withTypeMeta: kind and apiVersion values are JSON-escaped', () => {
  const out = withTypeMeta('{"a":1}', 'we"ird/v1', 'K\\ind', {});
  assert.deepEqual(JSON.parse(out), { apiVersion: 'we"ird/v1', kind: 'K\\ind', a: 1 });
});

void test('withTypeMeta + rawListItems: each listed item becomes a full object with its exact text', () => {
  const text =
    '{"kind":"SecretList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"a"},"data":{"n":"x"}},{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}]}';
  const parsed = JSON.parse(text) as { items: Array<{ apiVersion?: string; kind?: string }> };
  const out = rawListItems(text).map((r, i) => withTypeMeta(r, 'v1', 'Secret', parsed.items[i]!));
  assert.deepEqual(out, [
    '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"},"data":{"n":"x"}}',
    '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"}}',
  ]);
});

// --- RawListSplitter: the same split over a stream of chunks -----------------------

/** Feeds text in chunks cut at the given sizes (cycled); returns each item's text as it completed, and the fields. */
function splitStreamed(text: string, sizes: number[]): { items: string[]; fields: Map<string, string>; completedAt: number[] } {
  const bytes = Buffer.from(text, 'utf8');
  const s = new RawListSplitter();
  const items: string[] = [];
  const completedAt: number[] = [];
  for (let at = 0, k = 0; at < bytes.length; k++) {
    const end = Math.min(bytes.length, at + sizes[k % sizes.length]!);
    for (const b of s.push(bytes.subarray(at, end))) {
      items.push(b.toString('utf8'));
      completedAt.push(end);
    }
    at = end;
  }
  s.end();
  return { items, fields: s.fields, completedAt };
}

const TRICKY_LISTS = [
  '{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"5","continue":"abc"},"items":[{"metadata":{"name":"a"},"data":{"k":"dg=="}},{"metadata":{"name":"b"}}]}',
  String.raw`{"items":[{"metadata":{"name":"a"},"data":{"tricky":"}]},{[\"items\":[","close":"]]]}}}"}},{"p":"C:\\dir\\","q":"\\"}],"metadata":{"continue":"x\"y"}}`,
  '{"items":[{"name":"ünïcødé","jp":"日本語","emoji":"🚀👩‍👩‍👧"},{"sep":"\u2028\u2029"}],"kind":"List"}',
  '{"items":[9007199254740993, -1.5e+10 ,"s,]}",true,false,null,{},[]]}',
  '\r\n {\r\n "kind" : "List" ,\r\n\t"items" \r\n:\r\n [\r\n { "a" : [ 1 , 2 ] } \r\n,\r\n\t{\r\n\t"b":\r\n\t\t"x"\r\n} ]\r\n ,"metadata" : { "n" : 12 } \r\n}\r\n',
  '{"kind":"List","\\u0069tems":[{"metadata":{"name":"a"}}],"n":-12.5e3,"z":null}',
  '{"items":null,"kind":"List"}',
  '{"items":[]}',
];

void test('RawListSplitter: any chunking gives the same items, byte for byte, as the whole text', () => {
  for (const text of TRICKY_LISTS) {
    const whole = rawListItems(text);
    for (const sizes of [[1], [2], [3], [7], [1, 5, 2], [64], [1 << 20]]) {
      const { items } = splitStreamed(text, sizes);
      assert.deepEqual(items, whole, `chunk sizes ${JSON.stringify(sizes)} of ${text}`);
    }
  }
});

void test('RawListSplitter: multi-byte characters cut between chunks are kept whole', () => {
  const text = JSON.stringify({ items: [{ s: '日本語🚀é'.repeat(50) }, { t: '👩‍👩‍👧' }] });
  for (let size = 1; size <= 5; size++) assert.deepEqual(splitStreamed(text, [size]).items, rawListItems(text));
});

void test('RawListSplitter: each item is handed out as soon as its last byte arrives, not at the end', () => {
  const a = '{"metadata":{"name":"a"}}';
  const b = '{"metadata":{"name":"b"}}';
  const text = `{"kind":"List","items":[${a},${b}],"metadata":{"continue":"tok"}}`;
  const { items, completedAt, fields } = splitStreamed(text, [1]);
  assert.deepEqual(items, [a, b]);
  assert.equal(completedAt[0], text.indexOf(a) + a.length, 'the first item completes on its own closing brace');
  assert.equal(completedAt[1], text.indexOf(b) + b.length);
  assert.deepEqual(JSON.parse(fields.get('metadata')!), { continue: 'tok' }, 'fields after "items" are read too');
  assert.equal(fields.get('kind'), '"List"');
  assert.ok(!fields.has('items'));
});

void test('RawListSplitter: truncated or malformed streams are refused at end() or on the bad byte', () => {
  for (const text of [
    '{"items":[{"a":1}',
    '{"items":[',
    '{"items":[{"a":1},',
    '{"items":[1,2',
    '{"items":[{"a":1} ',
    '{"items":[{"a":"b"',
    '{"kind":"List"',
    '{"kind":"Li',
    '{"n":12',
    '',
  ]) {
    for (const size of [1, 3, 1000]) assert.throws(() => splitStreamed(text, [size]), Error, `${text} in chunks of ${size}`);
  }
  assert.throws(() => splitStreamed('{"items":[{}]} x', [4]), /malformed/);
  assert.throws(() => splitStreamed('{"items":[{}],"items":[{}]}', [4]), /twice/);
  assert.throws(() => splitStreamed('{"items":{"a":1}}', [2]), /"items" is not an array/);
  assert.throws(() => splitStreamed('{"items":"[]"}', [2]), /"items" is not an array/);
  assert.throws(() => splitStreamed('[{"items":[]}]', [2]), /not a JSON object/);
});

void test('RawListSplitter: a one-megabyte string value is split correctly in 16 KiB chunks', () => {
  const big = Buffer.alloc(900 * 1024, 7).toString('base64');
  const items = Array.from(
    { length: 5 },
    (_, i) => `{"metadata":{"name":"s-${i}","resourceVersion":"${i}"},"data":{"v":"${big}","n":9007199254740993}}`,
  );
  const text = `{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[${items.join(',')}]}`;
  const { items: got } = splitStreamed(text, [16 * 1024]);
  assert.equal(got.length, 5);
  got.forEach((g, i) => assert.ok(g === items[i], `item ${i} verbatim`));
});

// --- itemIdentity -------------------------------------------------------------------

void test('itemIdentity: apiVersion, kind and metadata of an item, whatever their place and whatever else it holds', () => {
  const raw = String.raw`{"data":{"x":"}\"metadata\":{\"name\":\"decoy\"}"},"metadata":{"name":"a","namespace":"ns","resourceVersion":"42","labels":{"k":"v"}},"kind":"Secret","spec":{"n":9007199254740993,"l":[1,{"metadata":{"name":"deep"}}]}}`;
  const id = itemIdentity(raw);
  assert.equal(id.kind, 'Secret');
  assert.equal(id.apiVersion, undefined);
  assert.deepEqual(id.metadata, { name: 'a', namespace: 'ns', resourceVersion: '42', labels: { k: 'v' } });
  assert.deepEqual(itemIdentity(' {\n "apiVersion" : "v1" , "metadata" : { "name" : "b" } }\n'), {
    apiVersion: 'v1',
    metadata: { name: 'b' },
  });
  assert.deepEqual(itemIdentity('{}'), {});
  assert.throws(() => itemIdentity('[]'), /not a JSON object/);
  assert.throws(() => itemIdentity('{"metadata":{"name":"a"'), /unterminated/);
});

void test('itemIdentity: strings ending in backslashes and holding escaped quotes end where JSON.parse ends them', () => {
  const values = ['a\\', 'a\\\\', '\\"', 'x\\"y', '"', '\\', '\\\\"\\\\', 'C:\\dir\\', '}"],{'];
  for (const v of values) {
    const item = { metadata: { name: 'a', annotations: { [v]: v, after: 'b' } }, data: { [v]: v }, kind: 'Secret' };
    const id = itemIdentity(JSON.stringify(item));
    assert.deepEqual(id, { metadata: item.metadata, kind: 'Secret' }, `value ${JSON.stringify(v)}`);
  }
});

void test('itemIdentity: an item of many strings is scanned once, not once per string (a large managedFields)', () => {
  // Counted, not timed: the characters String.prototype.indexOf is asked to search, over an item of 20,000 keys.
  const fields: Record<string, object> = {};
  for (let k = 0; k < 20_000; k++) fields[`f:key-${k}`] = {};
  const raw = JSON.stringify({ metadata: { name: 'cm', managedFields: [{ manager: 'm', fieldsV1: { 'f:data': fields } }] } });
  const indexOf = String.prototype.indexOf;
  let searched = 0;
  String.prototype.indexOf = function (this: string, search: string, from?: number) {
    const at = indexOf.call(this, search, from);
    if (this === raw) searched += (at < 0 ? this.length : at + search.length) - (from ?? 0);
    return at;
  } as typeof indexOf;
  try {
    assert.equal(itemIdentity(raw).metadata?.name, 'cm');
  } finally {
    String.prototype.indexOf = indexOf;
  }
  assert.ok(searched <= 2 * raw.length, `searched ${searched} characters of an item of ${raw.length}`);
});

void test('RawListSplitter: a chunk of many short strings is scanned once, not once per string', () => {
  // Counted, not timed: the bytes Buffer.prototype.indexOf is asked to search, over one chunk of a list whose
  // items hold 20,000 short strings (a large managedFields), with and without escapes.
  for (const key of ['f:key-', 'f:k\\"ey-']) {
    const fields: Record<string, object> = {};
    for (let k = 0; k < 20_000; k++) fields[`${key}${k}`] = {};
    const text = JSON.stringify({ kind: 'List', items: [{ metadata: { name: 'cm', managedFields: [{ fieldsV1: fields }] } }] });
    const bytes = Buffer.from(text, 'utf8');
    const indexOf = Buffer.prototype.indexOf;
    let searched = 0;
    Buffer.prototype.indexOf = function (this: Buffer, value: number, from?: number) {
      const at = indexOf.call(this, value, from);
      searched += (at < 0 ? this.length : at + 1) - (from ?? 0);
      return at;
    } as typeof indexOf;
    let items: Buffer[];
    try {
      const s = new RawListSplitter();
      items = s.push(bytes);
      s.end();
    } finally {
      Buffer.prototype.indexOf = indexOf;
    }
    assert.equal(items.length, 1);
    assert.deepEqual(JSON.parse(items[0]!.toString('utf8')), JSON.parse(text).items[0]);
    assert.ok(searched <= 3 * bytes.length, `searched ${searched} bytes of a chunk of ${bytes.length} (${JSON.stringify(key)})`);
  }
});
