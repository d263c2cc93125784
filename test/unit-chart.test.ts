/**
 * charts/svm keeps its documentation honest, by reading its files (no helm): every value of values.yaml is in
 * values.schema.json with a description, and in the chart README's values table; every property of the schema
 * has a description; the README lists no value that is gone; the presets set only values that exist; NOTES.txt
 * says where the svm command comes from and warns of the placeholder image values.yaml ships.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';

const CHART = path.join(__dirname, '..', 'charts', 'svm');
const read = (f: string) => readFileSync(path.join(CHART, f), 'utf8');

interface Schema {
  description?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
}
const schema = JSON.parse(read('values.schema.json')) as Schema;
const values = YAML.parse(read('values.yaml')) as Record<string, unknown>;
const readme = read('README.md');

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The dotted path of every value in a values file, down to where the schema stops naming properties (a map the
 * schema leaves free, such as resources or labels, is one value), with the schema's node for it (undefined: not
 * in the schema).
 */
function valuePaths(vals: Record<string, unknown>, node: Schema | undefined = schema, prefix = ''): Array<[string, Schema | undefined]> {
  return Object.entries(vals).flatMap(([k, v]): Array<[string, Schema | undefined]> => {
    const p = `${prefix}${k}`;
    const child = node?.properties?.[k];
    if (child?.properties && isMap(v)) return [[p, child], ...valuePaths(v, child, `${p}.`)];
    return [[p, child]];
  });
}

/** Every property the schema names, at any depth (in items and alternatives too), by path. */
function schemaProperties(node: Schema, prefix = ''): Array<[string, Schema]> {
  const own = Object.entries(node.properties ?? {}).flatMap(([k, child]): Array<[string, Schema]> => [
    [`${prefix}${k}`, child],
    ...schemaProperties(child, `${prefix}${k}.`),
  ]);
  const nested = [node.items, ...(node.anyOf ?? []), ...(node.oneOf ?? [])]
    .filter((n): n is Schema => n !== undefined)
    .flatMap((n) => schemaProperties(n, `${prefix.replace(/\.$/, '')}[].`));
  return [...own, ...nested];
}

/** The value paths of the README's values table: its rows' first cells. */
function readmeRows(): string[] {
  const section = readme.slice(readme.indexOf('\n## Values\n'));
  assert.ok(section.length > 0, 'the README has no "## Values" section');
  return [...section.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
}

void test('every value of values.yaml is in values.schema.json, with a description', () => {
  const paths = valuePaths(values);
  assert.ok(paths.length > 80, `only ${paths.length} values found`);
  const missing = paths.filter(([, node]) => node === undefined).map(([p]) => p);
  assert.deepEqual(missing, [], 'values not in the schema');
  const undescribed = paths.filter(([, node]) => !node?.description?.trim()).map(([p]) => p);
  assert.deepEqual(undescribed, [], 'values without a description in the schema');
});

void test('every property of values.schema.json has a description, and names a value of values.yaml', () => {
  const all = schemaProperties(schema);
  assert.deepEqual(
    all.filter(([, node]) => !node.description?.trim()).map(([p]) => p),
    [],
    'schema properties without a description',
  );
  // Each top-level and nested (non-item) property has a default in values.yaml, but Helm's own `global`.
  const inValues = new Set(valuePaths(values).map(([p]) => p));
  assert.deepEqual(
    all
      .map(([p]) => p)
      .filter((p) => !p.includes('[]') && p !== 'global')
      .filter((p) => !inValues.has(p)),
    [],
    'schema properties without a value in values.yaml',
  );
});

void test("the README's values table has a row for every value of values.yaml, and none for a value that is gone", () => {
  const rows = readmeRows();
  const paths = valuePaths(values).map(([p]) => p);
  assert.deepEqual(
    paths.filter((p) => !rows.includes(p)),
    [],
    'values without a row in charts/svm/README.md',
  );
  assert.deepEqual(
    rows.filter((r) => !paths.includes(r)),
    [],
    'rows of charts/svm/README.md naming no value',
  );
  assert.equal(new Set(rows).size, rows.length, 'a value with two rows');
});

void test('the presets set only values of values.yaml, as the schema types them', () => {
  for (const preset of ['presets/pool.yaml']) {
    const vals = YAML.parse(read(preset)) as Record<string, unknown>;
    for (const [p, node] of valuePaths(vals)) {
      assert.ok(node, `${preset}: ${p} is not a value of the chart`);
      const want = node.type;
      if (typeof want === 'string') {
        const got = p.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], vals);
        const kind = Array.isArray(got) ? 'array' : got === null ? 'null' : typeof got === 'number' ? 'integer' : typeof got;
        assert.equal(kind, want, `${preset}: ${p}`);
      }
    }
  }
  // The pool preset mounts the Secret where SVM_KUBECONFIG_DIR points (docs/fleet.md).
  const pool = YAML.parse(read('presets/pool.yaml')) as {
    extraVolumes: Array<{ name: string; secret?: { secretName: string } }>;
    extraVolumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
    extraEnv: Array<{ name: string; value: string }>;
  };
  const dir = pool.extraEnv.find((e) => e.name === 'SVM_KUBECONFIG_DIR')?.value;
  const mount = pool.extraVolumeMounts.find((m) => m.mountPath === dir);
  assert.ok(mount?.readOnly, 'SVM_KUBECONFIG_DIR is not a read-only mount');
  assert.ok(pool.extraVolumes.find((v) => v.name === mount.name)?.secret?.secretName, 'the mount is not a Secret');
  assert.ok(readme.includes('presets/pool.yaml') && readme.includes('SVM_KUBECONFIG_DIR'), 'the README does not show the pool');
});

void test("NOTES.txt says where the svm command comes from and warns while the image is values.yaml's placeholder", () => {
  const notes = read('templates/NOTES.txt');
  const helpers = read('templates/_helpers.tpl');
  const placeholder = /define "svm\.placeholderImage" -}}\n(.+)\n/.exec(helpers)?.[1];
  assert.equal(placeholder, (values.image as { repository: string }).repository, 'the placeholder NOTES.txt checks is not the default');
  assert.match(notes, /if eq \.Values\.image\.repository \(include "svm\.placeholderImage" \.\)/);
  assert.match(notes, /WARNING: image\.repository is the placeholder/);
  // The image's svm (its entrypoint is node bin/svm.js), and the npm package for elsewhere.
  assert.match(notes, /exec deploy\/\{\{ \.Values\.namePrefix \}\}-worker -- node bin\/svm\.js /);
  assert.match(notes, /npx --package/);
  const dockerfile = readFileSync(path.join(__dirname, '..', 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /^ENTRYPOINT \["node", "bin\/svm\.js"\]$/m, 'the image no longer runs bin/svm.js: fix NOTES.txt');
  assert.match(dockerfile, /^WORKDIR \/app$/m);
});
