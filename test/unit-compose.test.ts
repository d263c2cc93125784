/**
 * Static checks of the container files: docker-compose.yml and Dockerfile.
 * Nothing here needs Docker; the files are parsed and their properties
 * asserted, so a broken edit (a `latest` tag, a port open to the network, a
 * dependency on a renamed service, a missing search attribute, a root user)
 * fails CI before anyone tries `docker compose up`.
 *
 * docker-compose.yml is the same deployment as the plane's temporal-server
 * (`svm dev up --temporal server`, which the suite runs): the same releases
 * (tools/versions.json), schema set-up, history shards, dynamic config,
 * namespace retention and search attributes (src/dev/temporal-server.ts,
 * src/contract), and the worker's settings of deploy/deployment.yaml. No
 * container engine runs here, so these comparisons are how the file stays
 * true.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { searchAttributeDefinitions } from '../src/contract/search-attributes';
import {
  NAMESPACE_RETENTION_HOURS,
  NUM_HISTORY_SHARDS,
  POSTGRES_MAJOR,
  SCHEMA_DATABASES,
  schemaSteps,
  SERVER_DYNAMIC_CONFIG,
} from '../src/dev/temporal-server';
import versions from '../tools/versions.json';

const root = path.resolve(__dirname, '..');
const composeText = fs.readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');
const dockerfileText = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');

type Dict = Record<string, unknown>;

function isDict(v: unknown): v is Dict {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const compose: unknown = parse(composeText);
assert.ok(isDict(compose), 'docker-compose.yml is a mapping');
const servicesRaw = compose.services;
assert.ok(isDict(servicesRaw), 'docker-compose.yml has a services mapping');
const services: Record<string, Dict> = {};
for (const [name, svc] of Object.entries(servicesRaw)) {
  assert.ok(isDict(svc), `service ${name} is a mapping`);
  services[name] = svc;
}
const serviceNames = Object.keys(services);

// --- small parsers -----------------------------------------------------------

interface ImageRef {
  name: string;
  tag: string | undefined;
}

/** Splits "registry/repo/name:tag@digest" into a name (without docker.io/) and a tag. */
function parseImage(ref: string): ImageRef {
  const noDigest = ref.split('@')[0] ?? ref;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  const hasTag = colon > slash;
  let name = hasTag ? noDigest.slice(0, colon) : noDigest;
  name = name.replace(/^(docker\.io|index\.docker\.io)\//, '').replace(/^library\//, '');
  return { name, tag: hasTag ? noDigest.slice(colon + 1) : undefined };
}

function environment(svc: Dict): Record<string, string> {
  const env = svc.environment;
  const out: Record<string, string> = {};
  if (env === undefined || env === null) return out;
  if (Array.isArray(env)) {
    for (const item of env) {
      const s = String(item);
      const i = s.indexOf('=');
      if (i > 0) out[s.slice(0, i)] = s.slice(i + 1);
    }
    return out;
  }
  assert.ok(isDict(env), 'environment is a list or a mapping');
  for (const [k, v] of Object.entries(env)) out[k] = v === null || v === undefined ? '' : String(v);
  return out;
}

interface PortBinding {
  hostIp: string | undefined;
  published: string | undefined;
  target: number;
}

/** Compose ports, short ("127.0.0.1:80:8080/tcp", "[::1]:80:80", "80") or long syntax. */
function ports(svc: Dict): PortBinding[] {
  const list = svc.ports;
  if (list === undefined) return [];
  assert.ok(Array.isArray(list), 'ports is a list');
  return list.map((p: unknown): PortBinding => {
    if (isDict(p)) {
      return {
        hostIp: p.host_ip === undefined ? undefined : String(p.host_ip),
        published: p.published === undefined ? undefined : String(p.published),
        target: Number(p.target),
      };
    }
    let s = String(p).replace(/\/(tcp|udp|sctp)$/, '');
    let hostIp: string | undefined;
    const v6 = /^\[([^\]]+)\]:(.*)$/.exec(s);
    if (v6) {
      hostIp = v6[1];
      s = v6[2] ?? '';
    }
    const parts = s.split(':');
    if (!v6 && parts.length === 3) hostIp = parts.shift();
    const target = Number(parts.pop());
    const published = parts.pop();
    return { hostIp, published, target };
  });
}

function dependsOn(svc: Dict): Record<string, string> {
  const d = svc.depends_on;
  const out: Record<string, string> = {};
  if (d === undefined) return out;
  if (Array.isArray(d)) {
    for (const name of d) out[String(name)] = 'service_started';
    return out;
  }
  assert.ok(isDict(d), 'depends_on is a list or a mapping');
  for (const [name, spec] of Object.entries(d)) {
    out[name] = isDict(spec) && spec.condition !== undefined ? String(spec.condition) : 'service_started';
  }
  return out;
}

function commandText(svc: Dict): string {
  const parts: string[] = [];
  for (const key of ['entrypoint', 'command']) {
    const v = svc[key];
    if (Array.isArray(v)) parts.push(...v.map(String));
    else if (v !== undefined && v !== null) parts.push(String(v));
  }
  return parts.join('\n');
}

/** The shell words of the first `temporal operator search-attribute create` invocation. */
function searchAttributeCreateWords(text: string): string[] {
  const joined = text.replace(/\\\r?\n/g, ' ');
  const line = joined.split(/\r?\n/).find((l) => /\btemporal\s+operator\s+search-attribute\s+create\b/.test(l));
  assert.ok(line, 'a `temporal operator search-attribute create` command is present');
  const start = line.search(/\btemporal\s+operator\s+search-attribute\s+create\b/);
  // The invocation ends at the first shell separator.
  const invocation = line.slice(start).split(/;|&&|\|\||\|/)[0] ?? '';
  return invocation
    .trim()
    .split(/\s+/)
    .map((w) => w.replace(/^['"]|['"]$/g, ''));
}

/** Values of a repeatable flag (--flag value and --flag=value). */
function flagValues(words: string[], ...flags: string[]): string[] {
  const values: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i] ?? '';
    for (const f of flags) {
      if (w === f) values.push(words[i + 1] ?? '');
      else if (w.startsWith(`${f}=`)) values.push(w.slice(f.length + 1));
    }
  }
  return values;
}

function hostPort(address: string): { host: string; port: number } {
  const m = /^([A-Za-z0-9][A-Za-z0-9_.-]*):(\d+)$/.exec(address);
  assert.ok(m, `"${address}" has the form host:port`);
  return { host: m[1] ?? '', port: Number(m[2]) };
}

/**
 * The gRPC port a service's container listens on, from what its image is
 * documented to do: the Temporal server binds its frontend on
 * FRONTEND_GRPC_PORT (default 7233) at BIND_ON_IP.
 */
function temporalFrontendPort(name: string): number {
  const svc = services[name];
  assert.ok(svc, `service ${name} exists`);
  const image = parseImage(String(svc.image ?? ''));
  assert.equal(image.name, 'temporalio/server', `${name} runs the Temporal server image`);
  const env = environment(svc);
  const bind = env.BIND_ON_IP;
  assert.ok(
    bind === undefined || bind === '0.0.0.0' || bind === '::',
    `${name} must listen on all interfaces to be reachable from other containers (BIND_ON_IP=${bind})`,
  );
  return Number(env.FRONTEND_GRPC_PORT ?? '7233');
}

function assertTemporalAddress(owner: string, address: string) {
  const { host, port } = hostPort(address);
  assert.ok(serviceNames.includes(host), `${owner}: Temporal address host "${host}" is a service in docker-compose.yml`);
  assert.equal(port, temporalFrontendPort(host), `${owner}: ${address} is the port service ${host} listens on`);
  const svc = services[host] ?? {};
  const containerPorts = [...ports(svc).map((p) => p.target), ...((svc.expose as unknown[] | undefined) ?? []).map(Number)];
  assert.ok(containerPorts.includes(port), `${host} publishes or exposes container port ${port}`);
}

interface DockerInstruction {
  keyword: string;
  args: string;
}

/** Dockerfile instructions (comments dropped, continuation lines joined), grouped by stage. */
function dockerStages(text: string): DockerInstruction[][] {
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split(/\r?\n/)) {
    if (/^\s*#/.test(raw) && current === '') continue;
    if (/^\s*#/.test(raw)) continue;
    const line = raw.replace(/\s+$/, '');
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' ';
      continue;
    }
    current += line;
    if (current.trim() !== '') logical.push(current.trim());
    current = '';
  }
  if (current.trim() !== '') logical.push(current.trim());
  const stages: DockerInstruction[][] = [];
  for (const l of logical) {
    const m = /^(\S+)\s*(.*)$/.exec(l);
    if (!m) continue;
    const ins = { keyword: (m[1] ?? '').toUpperCase(), args: (m[2] ?? '').trim() };
    if (ins.keyword === 'FROM') stages.push([]);
    const stage = stages[stages.length - 1];
    assert.ok(stage, `"${l}" comes after a FROM`);
    stage.push(ins);
  }
  return stages;
}

function execForm(args: string): string[] {
  const v: unknown = JSON.parse(args);
  assert.ok(Array.isArray(v) && v.every((x) => typeof x === 'string'), `${args} is the exec (JSON array) form`);
  return v as string[];
}

// --- docker-compose.yml ------------------------------------------------------

const expectedImages = new Set(['postgres', 'temporalio/server', 'temporalio/admin-tools', 'temporalio/ui']);

void test('compose: every service has a pinned image from the expected set, or is built here', () => {
  assert.ok(serviceNames.length > 0);
  for (const [name, svc] of Object.entries(services)) {
    if (svc.build !== undefined) {
      assert.equal(svc.image, undefined, `${name} is built locally and names no registry image`);
      continue;
    }
    assert.equal(typeof svc.image, 'string', `${name} has an image or a build`);
    const image = parseImage(String(svc.image));
    assert.ok(image.tag, `${name}: image ${svc.image} has an explicit tag`);
    assert.notEqual(image.tag, 'latest', `${name}: image ${svc.image} is not :latest`);
    assert.match(image.tag, /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/, `${name}: tag of ${svc.image} is literal, not interpolated`);
    assert.ok(expectedImages.has(image.name), `${name}: image ${image.name} is one of ${[...expectedImages].join(', ')}`);
  }
});

void test('compose: the expected services use the expected images', () => {
  const imageName = (s: string) => parseImage(String(services[s]?.image ?? '')).name;
  assert.equal(imageName('postgresql'), 'postgres');
  assert.equal(imageName('temporal'), 'temporalio/server');
  assert.equal(imageName('temporal-ui'), 'temporalio/ui');
  assert.ok(services.migrator?.build !== undefined, 'migrator is built from this repository');
  // admin-tools must match the server release it sets up.
  const serverTag = parseImage(String(services.temporal?.image)).tag;
  for (const [name, svc] of Object.entries(services)) {
    const image = parseImage(String(svc.image ?? ''));
    if (image.name === 'temporalio/admin-tools') assert.equal(image.tag, serverTag, `${name}: admin-tools tag matches the server tag`);
  }
});

void test('compose: every published port binds 127.0.0.1 only', () => {
  let count = 0;
  for (const [name, svc] of Object.entries(services)) {
    for (const p of ports(svc)) {
      count++;
      assert.equal(p.hostIp, '127.0.0.1', `${name}: port ${p.target} is published on 127.0.0.1, not on every interface`);
      assert.ok(Number.isInteger(p.target) && p.target > 0, `${name}: port target ${p.target} is a number`);
    }
  }
  assert.ok(count >= 3, 'Temporal, the UI and the migrator metrics are published');
  const published = (s: string) => ports(services[s] ?? {}).map((p) => p.target);
  assert.ok(published('temporal').includes(7233), 'Temporal gRPC 7233 is published');
  assert.ok(published('temporal-ui').includes(8080), 'the UI 8080 is published');
  assert.ok(published('migrator').includes(9464), 'migrator metrics 9464 are published');
});

void test('compose: every depends_on names an existing service, and health conditions have healthchecks', () => {
  const conditions = new Set(['service_started', 'service_healthy', 'service_completed_successfully']);
  for (const [name, svc] of Object.entries(services)) {
    for (const [dep, condition] of Object.entries(dependsOn(svc))) {
      assert.ok(serviceNames.includes(dep), `${name} depends on "${dep}", which is a service`);
      assert.notEqual(dep, name, `${name} does not depend on itself`);
      assert.ok(conditions.has(condition), `${name} -> ${dep}: condition ${condition} is valid`);
      if (condition === 'service_healthy') {
        assert.ok(isDict(services[dep]?.healthcheck), `${name} waits for ${dep} to be healthy, so ${dep} has a healthcheck`);
      }
    }
  }
  // No cycles: a topological walk visits every service.
  const done = new Set<string>();
  const visiting = new Set<string>();
  const visit = (n: string) => {
    if (done.has(n)) return;
    assert.ok(!visiting.has(n), `depends_on has a cycle through ${n}`);
    visiting.add(n);
    for (const d of Object.keys(dependsOn(services[n] ?? {}))) visit(d);
    visiting.delete(n);
    done.add(n);
  };
  serviceNames.forEach(visit);
});

void test('compose: postgresql has a named volume and a pg_isready healthcheck; temporal waits for it', () => {
  const pg = services.postgresql;
  assert.ok(pg);
  const declared = isDict(compose.volumes) ? Object.keys(compose.volumes) : [];
  const vols = (pg.volumes as unknown[] | undefined) ?? [];
  const named = vols
    .map((v) => (isDict(v) ? (v.type === 'volume' ? String(v.source) : '') : (String(v).split(':')[0] ?? '')))
    .filter((src) => src !== '' && !src.startsWith('.') && !src.startsWith('/') && !src.startsWith('~') && !src.startsWith('$'));
  assert.ok(named.length > 0, 'postgresql keeps its data in a named volume');
  for (const n of named) assert.ok(declared.includes(n), `volume ${n} is declared at the top level`);
  assert.ok(isDict(pg.healthcheck));
  assert.match(JSON.stringify(pg.healthcheck.test), /pg_isready/);
  // The server starts only after the database exists (directly or through the schema job).
  const reaches = (from: string, to: string, seen = new Set<string>()): boolean => {
    if (from === to) return true;
    if (seen.has(from)) return false;
    seen.add(from);
    return Object.keys(dependsOn(services[from] ?? {})).some((d) => reaches(d, to, seen));
  };
  assert.ok(reaches('temporal', 'postgresql'), 'temporal starts after postgresql');
  assert.equal(environment(services.temporal ?? {}).POSTGRES_SEEDS, 'postgresql', 'temporal connects to the postgresql service');
});

void test("compose: the registered search attributes are exactly the migrator's, with their types", () => {
  const registering = Object.entries(services).filter(([, svc]) => /search-attribute\s+create/.test(commandText(svc)));
  assert.equal(registering.length, 1, 'exactly one service registers search attributes');
  const [regName, regSvc] = registering[0] ?? ['', {}];
  const words = searchAttributeCreateWords(commandText(regSvc));
  const names = flagValues(words, '--name');
  const types = flagValues(words, '--type');
  assert.equal(names.length, types.length, 'every --name has its --type');
  const registered = Object.fromEntries(names.map((n, i) => [n, types[i]]));
  assert.equal(Object.keys(registered).length, names.length, 'no attribute is registered twice');

  const expected = {
    MigrationResource: 'Keyword',
    MigrationPhase: 'Keyword',
    MigrationMigrated: 'Int',
    MigrationGroup: 'Keyword',
    MigrationCluster: 'Keyword',
    MigrationKubeVersions: 'KeywordList',
    MigrationLastSeen: 'Datetime',
    MigrationCampaign: 'Keyword',
  };
  assert.deepEqual(registered, expected);
  // ...and the same list the workflows use.
  assert.deepEqual(registered, Object.fromEntries(searchAttributeDefinitions.map((d) => [d.name, d.type])));

  assert.deepEqual(flagValues(words, '--namespace', '-n'), ['default'], 'registered in namespace default');
  for (const address of flagValues(words, '--address')) assertTemporalAddress(regName, address);
  assert.equal(
    parseImage(String(regSvc.image)).name,
    'temporalio/admin-tools',
    `${regName} uses the admin-tools image (it has the temporal CLI)`,
  );
  assert.ok(
    ['service_healthy', 'service_started'].includes(dependsOn(regSvc).temporal ?? ''),
    `${regName} starts after the temporal service`,
  );
  assert.match(commandText(regSvc), /until\s+temporal\s+operator\s+cluster\s+health/, `${regName} waits for the server before registering`);
  assert.equal(
    dependsOn(services.migrator ?? {})[regName],
    'service_completed_successfully',
    'the migrator starts only after the search attributes are registered',
  );
});

void test('compose: shell commands escape $ so Compose does not interpolate them', () => {
  for (const [name, svc] of Object.entries(services)) {
    const text = commandText(svc).replace(/\$\$/g, '');
    assert.doesNotMatch(text, /\$/, `${name}: every shell $ in entrypoint/command is written $$`);
  }
});

void test('compose: every TEMPORAL_ADDRESS points at the service and port Temporal listens on', () => {
  const migratorEnv = environment(services.migrator ?? {});
  assert.ok(migratorEnv.TEMPORAL_ADDRESS, 'migrator has TEMPORAL_ADDRESS');
  assertTemporalAddress('migrator', migratorEnv.TEMPORAL_ADDRESS);
  let checked = 0;
  for (const [name, svc] of Object.entries(services)) {
    const address = environment(svc).TEMPORAL_ADDRESS;
    if (address === undefined) continue;
    assertTemporalAddress(name, address);
    checked++;
  }
  assert.ok(checked >= 2, 'the UI and the migrator are both pointed at Temporal');
});

void test('compose: the migrator runs the worker against namespace default with the mounted kubeconfig', () => {
  const m = services.migrator;
  assert.ok(m);
  const build = m.build;
  const context = typeof build === 'string' ? build : isDict(build) ? String(build.context ?? '.') : '.';
  const dockerfile = isDict(build) && build.dockerfile !== undefined ? String(build.dockerfile) : 'Dockerfile';
  assert.ok(fs.existsSync(path.join(root, context, dockerfile)), `build uses ${path.join(context, dockerfile)}, which exists`);
  assert.deepEqual(m.command, ['worker']);
  const env = environment(m);
  assert.equal(env.TEMPORAL_NAMESPACE, 'default');
  assert.equal(env.KUBECONFIG, '/kube/config');
  const mounts = ((m.volumes as unknown[] | undefined) ?? []).map((v) => {
    if (isDict(v)) return { source: String(v.source), target: String(v.target), ro: v.read_only === true };
    const [source = '', target = '', mode = ''] = String(v).split(':');
    return { source, target, ro: mode.split(',').includes('ro') };
  });
  const kube = mounts.find((x) => x.target === env.KUBECONFIG);
  assert.ok(kube, 'the file named by KUBECONFIG is mounted');
  assert.equal(kube.source, '${KUBECONFIG_HOST:-~/.kube/config}');
  assert.ok(kube.ro, 'the kubeconfig is mounted read-only');
});

// --- docker-compose.yml is the plane's deployment -------------------------------

const bare = (v: string) => v.replace(/^v/, '');

void test("compose = plane: the Temporal server, admin-tools and UI releases are tools/versions.json's, PostgreSQL the same major", () => {
  const tag = (s: string) => parseImage(String(services[s]?.image ?? '')).tag;
  assert.equal(tag('temporal'), bare(versions.temporalServer), 'temporalio/server is the release the plane builds');
  for (const [name, svc] of Object.entries(services))
    if (parseImage(String(svc.image ?? '')).name === 'temporalio/admin-tools')
      assert.equal(parseImage(String(svc.image)).tag, bare(versions.temporalServer), `${name}: admin-tools of the same release`);
  assert.equal(tag('temporal-ui'), bare(versions.temporalUi), 'temporalio/ui is the UI server release the plane builds');
  assert.equal(tag('postgresql')?.split('.')[0], String(POSTGRES_MAJOR), `PostgreSQL ${POSTGRES_MAJOR}, as the plane's`);
});

void test('compose = plane: the schema set-up runs the same temporal-sql-tool steps, database by database', () => {
  const svc = services['temporal-schema'];
  assert.ok(svc, 'the temporal-schema service sets the schemas up');
  const text = commandText(svc);
  // `sql="temporal-sql-tool ..."` then `$$sql --db DB STEP...` lines
  const prefix = /sql="([^"]+)"/.exec(text)?.[1] ?? '';
  assert.match(prefix, /^temporal-sql-tool --plugin postgres12 /, 'temporal-sql-tool with the postgres12 plugin');
  assert.equal(environment(services.temporal ?? {}).DB, 'postgres12', 'the server on the postgres12 plugin, as the plane');
  const steps = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.startsWith('$$sql '))
    .map((l) => l.split(/\s+/).slice(1));
  const expected = SCHEMA_DATABASES.flatMap(({ database, dir }) =>
    schemaSteps('/etc/temporal/schema/postgresql/v12', dir).map((step) => ['--db', database, ...step]),
  );
  assert.deepEqual(steps, expected);
});

void test("compose = plane: history shards, dynamic config and the namespace retention are the plane's", () => {
  assert.equal(environment(services.temporal ?? {}).NUM_HISTORY_SHARDS, String(NUM_HISTORY_SHARDS));
  const configs = compose.configs;
  assert.ok(isDict(configs) && isDict(configs['temporal-dynamic-config']), 'the dynamic config is inline');
  assert.deepEqual(parse(String(configs['temporal-dynamic-config'].content)), SERVER_DYNAMIC_CONFIG);
  const temporalSvc = services.temporal ?? {};
  const mounted = ((temporalSvc.configs as unknown[] | undefined) ?? []).find((c) => isDict(c) && c.source === 'temporal-dynamic-config');
  assert.ok(isDict(mounted) && mounted.target === environment(temporalSvc).DYNAMIC_CONFIG_FILE_PATH, 'the server reads that file');
  const words = commandText(services['temporal-admin-tools'] ?? {})
    .split(/\s+/)
    .filter(Boolean);
  const create = words.findIndex((w, i) => w === 'namespace' && words[i + 1] === 'create');
  assert.ok(create > 0, 'the namespace is created');
  const createWords = words.slice(create, words.indexOf('--address', create) + 2);
  assert.deepEqual(flagValues(createWords, '--retention'), [`${NAMESPACE_RETENTION_HOURS}h`]);
});

void test("compose = deploy/deployment.yaml: the migrator's environment is the Deployment's, but for the Temporal address and the kubeconfig", () => {
  const docs = fs
    .readFileSync(path.join(root, 'deploy', 'deployment.yaml'), 'utf8')
    .split(/^---$/m)
    .map((d) => parse(d) as unknown);
  const deployment = docs.find((d): d is Dict => isDict(d) && d.kind === 'Deployment');
  assert.ok(deployment, 'deploy/deployment.yaml holds the Deployment');
  const container = ((deployment as { spec: { template: { spec: { containers: Dict[] } } } }).spec.template.spec.containers ?? [])[0];
  assert.ok(container);
  const deployed = Object.fromEntries(
    ((container.env as Array<{ name: string; value?: string }> | undefined) ?? []).map((e) => [e.name, String(e.value ?? '')]),
  );
  const composed = environment(services.migrator ?? {});
  // In a cluster the frontend is a Service and the API the Pod's ServiceAccount; here a service of this file and a kubeconfig.
  const { TEMPORAL_ADDRESS: _d, ...deployedRest } = deployed;
  const { TEMPORAL_ADDRESS: _c, KUBECONFIG: _k, ...composedRest } = composed;
  assert.ok(_d && _c, 'both name a Temporal address');
  assert.deepEqual(composedRest, deployedRest);
  assert.deepEqual(services.migrator?.command, container.args, 'the same command');
});

// --- Dockerfile ----------------------------------------------------------------

const stages = dockerStages(dockerfileText);
const finalStage = stages[stages.length - 1] ?? [];
const lastOf = (keyword: string) => [...finalStage].reverse().find((i) => i.keyword === keyword);

void test('Dockerfile: multi-stage, pinned Node 20 base images', () => {
  assert.ok(stages.length >= 2, 'the Dockerfile has a build stage and a runtime stage');
  for (const stage of stages) {
    const from = stage[0]?.args.split(/\s+/)[0] ?? '';
    const image = parseImage(from);
    assert.equal(image.name, 'node', `${from} is the official Node image`);
    assert.ok(image.tag && image.tag !== 'latest', `${from} has an explicit tag`);
    assert.match(image.tag, /^20[.-]/, `${from} is Node 20`);
  }
});

void test('Dockerfile: the final stage runs as a non-root user', () => {
  const user = lastOf('USER');
  assert.ok(user, 'the final stage sets USER');
  const name = user.args.split(':')[0]?.trim() ?? '';
  assert.ok(name !== '' && name !== 'root' && name !== '0', `USER ${user.args} is not root`);
  // Nothing after it switches back.
  const idx = finalStage.lastIndexOf(user);
  assert.ok(finalStage.slice(idx + 1).every((i) => i.keyword !== 'USER'));
});

void test('Dockerfile: ENTRYPOINT runs bin/svm.js with node, the worker by default, metrics exposed', () => {
  const entrypoint = lastOf('ENTRYPOINT');
  assert.ok(entrypoint, 'the final stage has an ENTRYPOINT');
  assert.deepEqual(execForm(entrypoint.args), ['node', 'bin/svm.js']);
  const cmd = lastOf('CMD');
  assert.ok(cmd);
  assert.deepEqual(execForm(cmd.args), ['worker']);
  const env = finalStage.filter((i) => i.keyword === 'ENV').map((i) => i.args.replace(/\s+/g, '='));
  assert.ok(
    env.some((e) => /(^|\s)NODE_ENV=production\b/.test(e)),
    'NODE_ENV=production',
  );
  const exposed = finalStage
    .filter((i) => i.keyword === 'EXPOSE')
    .flatMap((i) => i.args.split(/\s+/))
    .map((p) => Number(p.split('/')[0]));
  assert.ok(exposed.includes(9464), 'EXPOSE 9464');
  const migratorTargets = ports(services.migrator ?? {}).map((p) => p.target);
  for (const t of migratorTargets) assert.ok(exposed.includes(t), `compose publishes migrator port ${t}, which the image exposes`);
});

void test("Dockerfile: the build stage makes the client commands' code cache with the runtime stage's NODE_OPTIONS", () => {
  // V8 refuses a code cache made by a node started with other flags (bin/svm.js then compiles, as without it).
  const env = (stage: DockerInstruction[]) =>
    stage.filter((i) => i.keyword === 'ENV' && i.args.startsWith('NODE_OPTIONS=')).map((i) => i.args);
  const runtime = env(finalStage);
  assert.equal(runtime.length, 1, 'the runtime stage sets NODE_OPTIONS once');
  assert.deepEqual(env(stages[0]!), runtime);
  const build = stages[0]!;
  const envAt = build.findIndex((i) => i.keyword === 'ENV' && i.args.startsWith('NODE_OPTIONS='));
  const buildAt = build.findIndex((i) => i.keyword === 'RUN' && /npm run build\b/.test(i.args));
  assert.ok(envAt >= 0 && envAt < buildAt, 'NODE_OPTIONS is set before `npm run build`');
  assert.match(build[buildAt]!.args, /test -s dist\/cli\/svm-client\.js\.cache/, 'the build checks the cache is there');
});

void test('Dockerfile: the runtime stage carries the compiled code and the prebuilt workflow bundle, not the sources', () => {
  const copies = finalStage.filter((i) => i.keyword === 'COPY').map((i) => i.args.split(/\s+/).filter((w) => !w.startsWith('--')));
  const destinations = copies.map((words) => words[words.length - 1]?.replace(/\/$/, '').replace(/^\.\//, ''));
  for (const dir of ['dist', 'bin', 'node_modules', 'tools']) {
    assert.ok(destinations.includes(dir), `the runtime stage copies ${dir}`);
  }
  // Without src/ the worker loads dist/workflow-bundle.js as is (src/worker/workflow-bundle.ts),
  // so the build stage must make it and check that it is there.
  assert.ok(!destinations.includes('src'), 'the runtime stage leaves the TypeScript sources behind');
  const built = stages
    .slice(0, -1)
    .flat()
    .filter((i) => i.keyword === 'RUN')
    .map((i) => i.args)
    .join('\n');
  assert.match(built, /npm run build:workflows/, 'the build stage bundles the workflows');
  assert.match(built, /test -s dist\/workflow-bundle\.js/, 'the build stage checks the bundle exists');
  const ignore = fs
    .readFileSync(path.join(root, '.dockerignore'), 'utf8')
    .split(/\r?\n/)
    .map((l) => l.trim());
  for (const entry of ['node_modules', 'dist', '.git']) assert.ok(ignore.includes(entry), `.dockerignore excludes ${entry}`);
});
