/**
 * The published workflow contract (contract/v<N>/*.schema.json) is exactly
 * what the code checks with: regenerated here and compared file by file. A
 * change to an input, signal, update, query or result that is not
 * regenerated (npm run gen:contract) fails; one that breaks callers needs a
 * new CONTRACT_VERSION (and keeps the old files).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { contractDir, contractFile, render } from '../scripts/gen-contract';
import { contractSchemas, StartInputSchema } from '../src/contract/json-schema';
import { argumentRefusal, CONTRACT_VERSION, HandlerArgSchemas } from '../src/contract/definitions';

void test('every contract schema file matches the code', () => {
  const schemas = contractSchemas();
  for (const [name, schema] of Object.entries(schemas)) {
    assert.ok(existsSync(contractFile(name)), `contract/v${CONTRACT_VERSION}/${name}.schema.json is missing: run npm run gen:contract`);
    assert.deepEqual(
      JSON.parse(readFileSync(contractFile(name), 'utf8')),
      JSON.parse(render(schema)),
      `${name} drifted: run npm run gen:contract`,
    );
  }
  const files = readdirSync(contractDir).filter((f) => f.endsWith('.schema.json'));
  assert.deepEqual(
    files.sort(),
    Object.keys(schemas)
      .map((n) => `${n}.schema.json`)
      .sort(),
    'no schema file without its code',
  );
});

void test('the minimal starts are valid input; a bad option and an unknown field are not', () => {
  for (const ok of [
    { resource: 'gizmos.example.com' },
    { resource: 'secrets' },
    { group: 'example.com', resource: 'gizmos', options: { qps: 20 } },
  ]) {
    assert.ok(StartInputSchema.safeParse(ok).success, JSON.stringify(ok));
  }
  assert.ok(!StartInputSchema.safeParse({ resource: 'secrets', options: { chunkSize: 0 } }).success);
  assert.ok(!StartInputSchema.safeParse({ resource: 'secrets', continueToken: 'x' }).success);
  assert.ok(!StartInputSchema.safeParse({}).success);
});

// ------------------------------------------------------------ signal and update arguments

void test('signal and update arguments: the contract object or none; the older bare string; anything else refused, naming the field', () => {
  const H = HandlerArgSchemas;
  for (const [name, schema, arg] of [
    ['pause', H.empty, {}],
    ['pause', H.empty, undefined],
    ['pause', H.empty, null],
    ['pause', H.empty, { extra: 1 }], // extra fields are ignored, as the schema allows
    ['abort', H.abort, { reason: 'rollback' }],
    ['abort', H.abort, {}],
    ['abort', H.abort, 'rollback'],
    ['abort', H.abort, undefined],
    ['attachMigrationObject', H.attachMigrationObject, { name: 'gizmos-1' }],
    ['attachMigrationObject', H.attachMigrationObject, 'storagemigration.k8s.io/gizmos-1'],
    ['agreementChanged', H.agreementChanged, 'StorageVersion gizmos modified'],
    ['agreementChanged', H.agreementChanged, undefined],
  ] as const) {
    assert.equal(argumentRefusal(name, schema, arg), undefined, `${name} ${JSON.stringify(arg)}`);
  }
  for (const [name, schema, arg, why] of [
    ['pause', H.empty, 'now', /^invalid argument to pause: argument: .*expected object, received string/],
    ['pause', H.empty, [1], /argument: .*expected object, received array/],
    ['abort', H.abort, { reason: 5 }, /^invalid argument to abort: reason: .*expected string, received number/],
    ['abort', H.abort, 7, /argument: .*expected object/],
    ['attachMigrationObject', H.attachMigrationObject, undefined, /argument: .*expected object/],
    ['attachMigrationObject', H.attachMigrationObject, '', /name: Too small/],
    ['attachMigrationObject', H.attachMigrationObject, { name: 'x'.repeat(321) }, /name: Too big/],
    ['agreementChanged', H.agreementChanged, 3, /argument: .*expected string, received number/],
  ] as const) {
    assert.match(argumentRefusal(name, schema, arg) ?? 'accepted', why, `${name} ${JSON.stringify(arg)}`);
  }
});

void test('a refusal never quotes the value it refused (an abort reason may be anything a person typed)', () => {
  const secret = 'c2VjcmV0LXZhbHVl';
  for (const arg of [{ name: secret.repeat(30) }, { reason: { value: secret } }, { name: [secret] }]) {
    for (const schema of [HandlerArgSchemas.abort, HandlerArgSchemas.attachMigrationObject]) {
      assert.ok(!(argumentRefusal('x', schema, arg) ?? '').includes(secret));
    }
  }
});

// ------------------------------------------------------------ examples/go against the contract

/** One field of a Go struct: its Go type and its json tag (undefined for an embedded struct). */
interface GoField {
  go: string;
  type: string;
  json?: { name: string; omitempty: boolean };
}

/** The structs of a Go file: `type X struct { ... }`, each field with its type and json tag. */
function goStructs(source: string): Map<string, GoField[]> {
  const out = new Map<string, GoField[]>();
  for (const m of source.matchAll(/^type (\w+) struct\s*\{([^}]*)\}/gm)) {
    const fields: GoField[] = [];
    for (const line of m[2]!.split('\n').map((l) => l.replace(/\/\/.*$/, '').trim())) {
      if (!line) continue;
      const f = /^(\w+)(?:\s+([^\s`]+))?(?:\s+`json:"([^"]*)"`)?$/.exec(line);
      assert.ok(f, `examples/go: cannot read the field "${line}" of ${m[1]}`);
      if (f[2] === undefined) {
        fields.push({ go: f[1]!, type: f[1]! }); // embedded: its fields are this struct's (encoding/json)
        continue;
      }
      assert.ok(f[3] !== undefined, `examples/go: ${m[1]}.${f[1]} has no json tag`);
      const [name, ...opts] = f[3].split(',');
      fields.push({ go: f[1]!, type: f[2], json: { name: name!, omitempty: opts.includes('omitempty') } });
    }
    out.set(m[1]!, fields);
  }
  return out;
}

type Schema = {
  type?: string;
  anyOf?: Schema[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
};

/**
 * Problems of one Go struct against one JSON Schema object, as encoding/json reads and writes it: the same property
 * names (none missing, none extra); a required property is a plain field, an optional one `omitempty` (so a Go
 * caller never sends a zero value the workflow refuses); each field's type is the property's.
 */
function checkStruct(structs: Map<string, GoField[]>, name: string, schema: Schema, where: string, seen: Set<string>): string[] {
  seen.add(name);
  const problems: string[] = [];
  const fields = (n: string): GoField[] => structs.get(n)!.flatMap((f) => (f.json ? [f] : fields(f.type)));
  for (const f of structs.get(name)!) if (!f.json) seen.add(f.type);
  const props = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const byTag = new Map(fields(name).map((f) => [f.json!.name, f]));
  for (const p of Object.keys(props)) if (!byTag.has(p)) problems.push(`${name} has no field for ${where} property "${p}"`);
  for (const [tag, f] of byTag) {
    const prop = props[tag];
    if (!prop) {
      problems.push(`${name}.${f.go} (json "${tag}") is not a property of ${where}`);
      continue;
    }
    const optional = f.json!.omitempty;
    if (required.has(tag) && (optional || f.type.startsWith('*')))
      problems.push(`${name}.${f.go}: ${where} requires "${tag}", the Go field is optional`);
    if (!required.has(tag) && !optional) problems.push(`${name}.${f.go}: "${tag}" is optional in ${where}, the Go field lacks omitempty`);
    problems.push(...checkType(structs, `${name}.${f.go}`, f.type.replace(/^\*/, ''), prop, `${where}.${tag}`, seen));
  }
  return problems;
}

function checkType(
  structs: Map<string, GoField[]>,
  field: string,
  goType: string,
  schema: Schema,
  where: string,
  seen: Set<string>,
): string[] {
  // A property of several forms (the start's resource: a name or the resolved reference) takes any one of them.
  if (schema.anyOf) {
    const tries = schema.anyOf.map((s) => checkType(structs, field, goType, s, where, new Set()));
    const fits = tries.findIndex((t) => t.length === 0);
    if (fits < 0) return [`${field} (${goType}) fits none of the forms of ${where}`];
    return checkType(structs, field, goType, schema.anyOf[fits]!, where, seen);
  }
  const scalar: Record<string, string> = { string: 'string', bool: 'boolean', int: 'integer', int64: 'integer', float64: 'number' };
  if (goType.startsWith('[]')) {
    if (schema.type !== 'array') return [`${field} is a Go slice, ${where} is ${schema.type}`];
    return checkType(structs, `${field}[]`, goType.slice(2), schema.items ?? {}, `${where}[]`, seen);
  }
  if (scalar[goType]) return scalar[goType] === schema.type ? [] : [`${field} is a Go ${goType}, ${where} is ${schema.type}`];
  if (structs.has(goType)) {
    if (schema.type !== 'object') return [`${field} is the Go struct ${goType}, ${where} is ${schema.type}`];
    return checkStruct(structs, goType, schema, where, seen);
  }
  return [`${field}: the Go type ${goType} is not one the check knows`];
}

/** Which contract file each Go type of examples/go is (nested structs are checked where they occur). */
const GO_TYPES: Record<string, string[]> = {
  StartInput: ['start-input'],
  MigrationOptions: ['options'],
  ResolvedResource: ['update-resolution-result'],
  Progress: ['progress', 'result'],
  SteerResult: ['update-steer-result'],
  AbortInput: ['update-abortMigration-input', 'signal-abort'],
  Empty: ['update-pauseMigration-input', 'update-resumeMigration-input', 'update-resolution-input', 'signal-pause', 'signal-resume'],
};

/** The problems of examples/go/contract.go against contract/v<N>/ (also run on broken copies, below). */
function goContractProblems(source: string): string[] {
  const structs = goStructs(source);
  const seen = new Set<string>();
  const problems: string[] = [];
  const version = /^const ContractVersion = "([^"]*)"/m.exec(source)?.[1];
  if (version !== CONTRACT_VERSION) problems.push(`ContractVersion is "${version}", the contract is version ${CONTRACT_VERSION}`);
  for (const [goType, files] of Object.entries(GO_TYPES)) {
    if (!structs.has(goType)) {
      problems.push(`examples/go has no type ${goType}`);
      continue;
    }
    for (const file of files) {
      const schema = JSON.parse(readFileSync(contractFile(file), 'utf8')) as Schema;
      problems.push(...checkStruct(structs, goType, schema, `${file}.schema.json`, seen));
    }
  }
  for (const s of structs.keys())
    if (!seen.has(s)) problems.push(`examples/go type ${s} is checked against no contract file: add it to GO_TYPES`);
  return problems;
}

const goSource = () => readFileSync(path.join(__dirname, '..', 'examples', 'go', 'contract.go'), 'utf8');

void test('examples/go: every struct field and json tag is the contract schema property of the same name, type and requiredness', () => {
  assert.deepEqual(goContractProblems(goSource()), []);
});

void test('the Go check fails on drift: a renamed tag, a dropped field, a lost omitempty, a wrong type', () => {
  const source = goSource();
  for (const [from, to, problem] of [
    [
      '`json:"chunkSize,omitempty"`',
      '`json:"chunksize,omitempty"`',
      /MigrationOptions\.ChunkSize \(json "chunksize"\) is not a property of options\.schema\.json/,
    ],
    ['\tTokenResumes int64 `json:"tokenResumes"`\n', '', /Counters has no field for .*"tokenResumes"/],
    ['`json:"abortRequested,omitempty"`', '`json:"abortRequested"`', /AbortRequested: "abortRequested" is optional/],
    ['Namespaced         bool ', 'Namespaced         string ', /ResolvedResource\.Namespaced is a Go string, .* is boolean/],
    [
      'Resource         string            `json:"resource"`',
      'Resource         int               `json:"resource"`',
      /StartInput\.Resource \(int\) fits none/,
    ],
    ['const ContractVersion = "1"', 'const ContractVersion = "0"', /ContractVersion is "0"/],
  ] as const) {
    assert.ok(source.includes(from), `the check of the check is stale: examples/go/contract.go has no ${JSON.stringify(from)}`);
    const problems = goContractProblems(source.replace(from, to));
    assert.ok(
      problems.some((p) => problem.test(p)),
      `${JSON.stringify(from)} -> ${JSON.stringify(to)} went unnoticed: ${problems.join('; ')}`,
    );
  }
});
