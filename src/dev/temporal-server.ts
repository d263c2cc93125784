/**
 * The plane's Temporal server on PostgreSQL (`svm dev up --temporal server`):
 * what users deploy, in place of the dev server's SQLite. Every part is
 * started by the plane and lives under its directory:
 *
 *   DIR/postgres/            a private PostgreSQL 15 cluster (Debian's, at
 *                            /usr/lib/postgresql/15/bin), owned by the postgres
 *                            user (PostgreSQL refuses to run as root): data/,
 *                            the unix socket, postgres.log, the password file.
 *                            It listens on 127.0.0.1 only, password (SCRAM) auth.
 *   DIR/temporal-server/     config.yaml (default store and visibility store:
 *                            the postgres12 plugin), dynamicconfig.yaml (from
 *                            --temporal-arg --dynamic-config-value k=v),
 *                            temporal-server.log
 *   DIR/temporal-ui/         the Web UI server's config and log
 *
 * The databases `temporal` and `temporal_visibility` get their schemas from
 * temporal-sql-tool (setup-schema -v 0.0, then update-schema with the server
 * module's schema/postgresql/v12 directories; update-schema runs on every
 * start and applies only what is missing). The "default" namespace and svm's
 * search attributes are registered through the frontend, as `svm setup` does.
 * `down` stops the UI, the server and then PostgreSQL (pg_ctl stop -m fast);
 * the data stays for the next `up`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { packageRoot } from '../config/build-info';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import YAML from 'yaml';
import { EAGER_ACTIVITIES, TRANSFER_POLL_RPS, TRANSFER_POLL_RPS_VALUE } from './temporal-dynamic-config';
import versions from '../../tools/versions.json';
import { registerSearchAttributes } from '../client/setup';
import { searchAttributeDefinitions } from '../contract/search-attributes';
import { isRunning, startProcess, stopProcess, waitFor, type ProcessRecord } from './processes';
import { freePort, holdsPorts, portOpen, startServerOnPorts, waitServing } from './ports';
import { ensureCa, ensureCert } from './tls';
import { planeAdminToken, temporalServerAuthConfig, type TemporalAuthFiles } from './temporal-auth';
import { toolsDir } from './tools';

// ------------------------------------------------------------ the deployment, as docker-compose.yml has it too
// docker-compose.yml runs the same server from images; test/unit-compose.test.ts compares it with these.

/** Shards of the history service (fixed for a cluster's life: changing it needs a new database). */
export const NUM_HISTORY_SHARDS = 4;
/** Retention of the `default` namespace's closed workflows. */
export const NAMESPACE_RETENTION_HOURS = 72;
/** The PostgreSQL major release (Debian's postgresql-15 here; the postgres:15 image in docker-compose.yml). */
export const POSTGRES_MAJOR = 15;

/**
 * The server's dynamic config; the plane adds what `--temporal-arg --dynamic-config-value` asks for (tests).
 *   limit.maxIDLength 255: SQL persistence stores workflow IDs in VARCHAR(255) columns (schema/postgresql/v12:
 *     executions.workflow_id): a longer ID is refused by the frontend with a clear error, not by the database.
 *   system.forceSearchAttributesCacheRefreshOnRead: search attributes registered a moment ago (svm setup) are
 *     usable at once, not after the cache's refresh; a local setup's choice.
 *   system.enableActivityEagerExecution, history.transferProcessorMaxPollRPS: src/dev/temporal-dynamic-config.ts.
 */
export const SERVER_DYNAMIC_CONFIG: Readonly<Record<string, Array<{ value: unknown; constraints: Record<string, never> }>>> = {
  'limit.maxIDLength': [{ value: 255, constraints: {} }],
  'system.forceSearchAttributesCacheRefreshOnRead': [{ value: true, constraints: {} }],
  [EAGER_ACTIVITIES]: [{ value: true, constraints: {} }],
  [TRANSFER_POLL_RPS]: [{ value: TRANSFER_POLL_RPS_VALUE, constraints: {} }],
};

/** The two databases and their schema directories (under schema/postgresql/v12 of the server module). */
export const SCHEMA_DATABASES = [
  { database: 'temporal', dir: 'temporal' },
  { database: 'temporal_visibility', dir: 'visibility' },
] as const;

/**
 * temporal-sql-tool's steps for one database, after its connection flags (`--plugin postgres12 --endpoint ...
 * --database DB`). Each may run again: create-database ignores an existing database, setup-schema -v 0.0 leaves
 * a newer schema version alone, update-schema applies only what is missing.
 */
export function schemaSteps(schemaRoot: string, dir: string): string[][] {
  return [
    ['create-database', '--defaultdb', 'postgres'],
    ['setup-schema', '-v', '0.0'],
    ['update-schema', '-d', `${schemaRoot}/${dir}/versioned`],
  ];
}

/** Debian's PostgreSQL 15 (apt-get install postgresql-15). */
export const PG_BIN = process.env.SVM_PG_BIN || `/usr/lib/postgresql/${POSTGRES_MAJOR}/bin`;
const PG_USER = 'postgres';
/** The database role Temporal uses (the cluster's superuser, created by initdb). */
const DB_ROLE = 'temporal';

/**
 * SQL visibility has a fixed number of custom search attribute columns per
 * type in each namespace (schema/postgresql/v12/visibility/schema.sql:
 * Keyword01..10, Int01..03, ...). svm's attributes must fit.
 */
export const SQL_VISIBILITY_SLOTS: Readonly<Record<string, number>> = {
  Keyword: 10,
  Int: 3,
  Double: 3,
  Bool: 3,
  Datetime: 3,
  Text: 3,
  KeywordList: 3,
};

export interface TemporalServerTools {
  version: string;
  server: string;
  sqlTool: string;
  /** schema/postgresql/v12 of the server module (temporal/ and visibility/). */
  schema: string;
  uiVersion: string;
  ui: string;
}

export function temporalServerTools(): TemporalServerTools {
  const root = toolsDir();
  const bin = path.join(root, 'bin');
  return {
    version: versions.temporalServer,
    server: path.join(bin, `temporal-server-${versions.temporalServer}`),
    sqlTool: path.join(bin, `temporal-sql-tool-${versions.temporalServer}`),
    schema: path.join(root, `temporal-schema-${versions.temporalServer}`, 'postgresql', 'v12'),
    uiVersion: versions.temporalUi,
    ui: path.join(bin, `temporal-ui-server-${versions.temporalUi}`),
  };
}

/** The paths, building what is missing with scripts/tools.d/temporal-server.sh (about 4 minutes cold on 2 cores). */
export function ensureTemporalServerTools(log: (l: string) => void): TemporalServerTools {
  const t = temporalServerTools();
  const missing = [t.server, t.sqlTool, t.schema, t.ui].filter((p) => !fs.existsSync(p));
  if (missing.length > 0) {
    log(`building the Temporal server on PostgreSQL (${missing.map((m) => path.basename(m)).join(', ')}); the first build takes minutes`);
    const bin = path.join(toolsDir(), 'bin');
    execFileSync('bash', [path.join(packageRoot(), 'scripts', 'tools.d', 'temporal-server.sh')], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, SVM_TOOLS_BIN: bin, SVM_TOOLS_WORK: path.join(toolsDir(), 'build') },
    });
  }
  return t;
}

export interface PostgresRecord extends ProcessRecord {
  port: number;
  /** DIR/postgres: owned by the postgres user; holds data/, the socket, the log and the password file. */
  base: string;
  dataDir: string;
}

/** What runs besides the frontend (recorded as the plane's `temporal` process, so env and `down` find it as before). */
export interface TemporalServerRecord {
  version: string;
  postgres: PostgresRecord;
  /** DIR/temporal-server/config.yaml */
  config: string;
  dynamicConfig: string;
  /** The other services' ports on 127.0.0.1 (the frontend's gRPC port is the plane's temporal.port). */
  ports: {
    frontendHttp: number;
    frontendMembership: number;
    history: number;
    historyMembership: number;
    matching: number;
    matchingMembership: number;
    worker: number;
    workerMembership: number;
    /** With `--temporal-auth`: the internal-frontend, through which the server's own system worker skips the authorizer. */
    internalFrontend?: number;
    internalFrontendMembership?: number;
  };
  ui: ProcessRecord & { version: string; root: string };
  /** With `--temporal-tls`: the frontend requires mTLS (certificates made by the plane, DIR/pki/temporal/). */
  tls?: TemporalTlsFiles;
  /** With `--temporal-auth`: the frontend requires a JWT the plane's key signed (src/dev/temporal-auth.ts). */
  auth?: TemporalAuthFiles;
}

/**
 * The plane's Temporal mTLS: a CA of its own (not the API servers': a client
 * certificate for Kubernetes must not open Temporal, nor the reverse), the
 * server's certificate (frontend, internode and the server's own system
 * worker, which is a client of the frontend too) and one client certificate
 * for svm, the Temporal CLI and the UI server.
 */
export interface TemporalTlsFiles {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** The name clients check the server's certificate against (it names localhost and 127.0.0.1). */
  serverName: string;
}

export const TEMPORAL_TLS_SERVER_NAME = 'localhost';

/** Makes (once; again when the CA is newer) the CA and certificates under DIR/pki/temporal. */
export function ensureTemporalTls(dir: string): TemporalTlsFiles {
  const pki = path.join(dir, 'pki', 'temporal');
  const ca = ensureCa(pki, 'svm-dev-temporal-ca');
  const server = ensureCert(ca, pki, 'server', {
    cn: 'temporal-server',
    san: `DNS:${TEMPORAL_TLS_SERVER_NAME},IP:127.0.0.1`,
    usage: ['serverAuth', 'clientAuth'],
  });
  const client = ensureCert(ca, pki, 'client', { cn: 'svm', usage: ['clientAuth'] });
  return {
    ca: ca.cert,
    serverCert: server.cert,
    serverKey: server.key,
    clientCert: client.cert,
    clientKey: client.key,
    serverName: TEMPORAL_TLS_SERVER_NAME,
  };
}

/** What the plane's env file says for mTLS: Temporal's standard variables (read by svm through envconfig, and by the Temporal CLI). */
export function temporalTlsEnv(tls: TemporalTlsFiles): Record<string, string> {
  return {
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: tls.ca,
    TEMPORAL_TLS_CLIENT_CERT_PATH: tls.clientCert,
    TEMPORAL_TLS_CLIENT_KEY_PATH: tls.clientKey,
    TEMPORAL_TLS_SERVER_NAME: tls.serverName,
  };
}

/** The server's `global.tls`: mTLS required on the frontend and between the services; the system worker presents the server's certificate. */
export function temporalServerTlsConfig(tls: TemporalTlsFiles): Record<string, unknown> {
  const client = { serverName: tls.serverName, rootCaFiles: [tls.ca] };
  const server = { certFile: tls.serverCert, keyFile: tls.serverKey, requireClientAuth: true, clientCaFiles: [tls.ca] };
  return {
    frontend: { server, client },
    internode: { server, client },
    // The worker service (and every other part of the server that calls the frontend) is a frontend client:
    // with requireClientAuth it must present a certificate as well.
    systemWorker: { certFile: tls.serverCert, keyFile: tls.serverKey, client },
  };
}

/**
 * A free port on 127.0.0.1 below 32768: temporal-server records each service's membership address in
 * cluster_membership, whose rpc_port is a SMALLINT on PostgreSQL (a port of 32768 and up fails with "value out of
 * range for type smallint" and the server exits). freePort draws below the ephemeral range; this also refuses the
 * kernel's pick it falls back to. The draw of temporal-server's ports, the first and any other (startServerOnPorts).
 */
export async function smallintPort(taken: Set<number> = new Set()): Promise<number> {
  const port = await freePort(taken);
  if (port >= 32_768) throw new Error(`no free port on 127.0.0.1 below 32768 (got ${port})`);
  return port;
}

/**
 * A new record; `frontendPort` is for the frontend's gRPC port (below 32768 as well). Its ports are drawn: candidates
 * the servers bind when they start, drawing others when one is taken (the plane marks the frontend's record too).
 */
export async function newTemporalServerRecord(dir: string): Promise<TemporalServerRecord & { frontendPort: number }> {
  const t = temporalServerTools();
  const base = path.join(dir, 'postgres');
  const taken = new Set<number>();
  const p = async () => smallintPort(taken);
  return {
    version: t.version,
    postgres: {
      pid: 0,
      binary: path.join(PG_BIN, 'postgres'),
      log: path.join(base, 'postgres.log'),
      port: await p(),
      base,
      dataDir: path.join(base, 'data'),
      portsDrawn: true,
    },
    config: path.join(dir, 'temporal-server', 'config.yaml'),
    dynamicConfig: path.join(dir, 'temporal-server', 'dynamicconfig.yaml'),
    ports: {
      frontendHttp: await p(),
      frontendMembership: await p(),
      history: await p(),
      historyMembership: await p(),
      matching: await p(),
      matchingMembership: await p(),
      worker: await p(),
      workerMembership: await p(),
    },
    ui: {
      pid: 0,
      binary: t.ui,
      log: path.join(dir, 'temporal-ui', 'temporal-ui.log'),
      version: t.uiVersion,
      root: path.join(dir, 'temporal-ui'),
      portsDrawn: true,
    },
    frontendPort: await p(),
  };
}

/** Refuses svm's search attributes when they would not fit SQL visibility's columns. */
export function checkSearchAttributesFitSql(defs: ReadonlyArray<{ name: string; type: string }> = searchAttributeDefinitions): void {
  const count = new Map<string, number>();
  for (const d of defs) count.set(d.type, (count.get(d.type) ?? 0) + 1);
  for (const [type, n] of count) {
    const slots = SQL_VISIBILITY_SLOTS[type] ?? 0;
    if (n > slots) throw new Error(`svm defines ${n} ${type} search attributes; SQL visibility has ${slots} per namespace`);
  }
}

/**
 * The dev server's flags the plane passes on (`--temporal-arg`), translated
 * for the real server: `--dynamic-config-value KEY=VALUE` (VALUE as JSON when
 * it parses, as in the CLI) become dynamic config entries; `--log-level L`
 * sets the log level. Anything else is refused with the reason.
 */
export function translateTemporalArgs(args: string[]): { dynamicConfig: Record<string, Array<{ value: unknown }>>; logLevel: string } {
  const dynamicConfig: Record<string, Array<{ value: unknown }>> = {};
  let logLevel = 'warn';
  const flat = args.flatMap((a) =>
    a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a],
  );
  for (let i = 0; i < flat.length; i++) {
    const flag = flat[i]!;
    const value = flat[i + 1];
    if (flag === '--dynamic-config-value' && value !== undefined) {
      const eq = value.indexOf('=');
      if (eq <= 0) throw new Error(`--dynamic-config-value expects KEY=VALUE, got "${value}"`);
      let v: unknown = value.slice(eq + 1);
      try {
        v = JSON.parse(v as string);
      } catch {
        /* a plain string */
      }
      (dynamicConfig[value.slice(0, eq)] ??= []).push({ value: v });
      i++;
    } else if (flag === '--log-level' && value !== undefined) {
      logLevel = value;
      i++;
    } else {
      throw new Error(
        `the Temporal server on PostgreSQL takes --dynamic-config-value KEY=VALUE and --log-level from --temporal-arg, not "${flag}"`,
      );
    }
  }
  return { dynamicConfig, logLevel };
}

/** The server's configuration: one cluster, every service on 127.0.0.1, both stores on the plane's PostgreSQL. */
export function temporalServerConfig(opts: {
  frontendPort: number;
  rec: TemporalServerRecord;
  password: string;
  logLevel: string;
}): Record<string, unknown> {
  const { rec } = opts;
  const sql = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `127.0.0.1:${rec.postgres.port}`,
      connectProtocol: 'tcp',
      user: DB_ROLE,
      password: opts.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const svc = (grpcPort: number, membershipPort: number, extra: Record<string, unknown> = {}) => ({
    rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...extra },
  });
  return {
    log: { stdout: true, level: opts.logLevel },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: NUM_HISTORY_SHARDS,
      datastores: { 'postgres-default': sql('temporal', 20), 'postgres-visibility': sql('temporal_visibility', 10) },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      ...(rec.tls ? { tls: temporalServerTlsConfig(rec.tls) } : {}),
      ...(rec.auth ? { authorization: temporalServerAuthConfig(rec.auth) } : {}),
    },
    services: {
      frontend: svc(opts.frontendPort, rec.ports.frontendMembership, { httpPort: rec.ports.frontendHttp }),
      history: svc(rec.ports.history, rec.ports.historyMembership),
      matching: svc(rec.ports.matching, rec.ports.matchingMembership),
      worker: svc(rec.ports.worker, rec.ports.workerMembership),
      ...(rec.auth ? { 'internal-frontend': svc(rec.ports.internalFrontend!, rec.ports.internalFrontendMembership!) } : {}),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `127.0.0.1:${opts.frontendPort}` },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: rec.dynamicConfig, pollInterval: '10s' },
  };
}

function runAsPostgres(args: string[], what: string): string {
  const r = spawnSync('runuser', ['-u', PG_USER, '--', ...args], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(`${what} failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
  return r.stdout;
}

function postmasterPid(dataDir: string): number {
  try {
    return Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || 0;
  } catch {
    return 0;
  }
}

/** Ids of the postgres user, and a check that it can reach DIR (every directory above must let it through). */
function postgresIds(base: string): { uid: number; gid: number } {
  if (process.getuid?.() !== 0) throw new Error('--temporal server runs PostgreSQL as the postgres user: svm dev up must run as root');
  if (!fs.existsSync(path.join(PG_BIN, 'initdb')))
    throw new Error(`PostgreSQL 15 is not installed at ${PG_BIN} (apt-get install postgresql-15, or set SVM_PG_BIN)`);
  const id = spawnSync('id', ['-u', PG_USER], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', PG_USER], { encoding: 'utf8' });
  if (id.status !== 0) throw new Error(`there is no "${PG_USER}" user (Debian's postgresql package creates it)`);
  const parent = path.dirname(base);
  // mkdtemp makes 0700 directories: let the postgres user through the plane's own directory (not list it).
  const st = fs.statSync(parent);
  if ((st.mode & 0o001) === 0) fs.chmodSync(parent, (st.mode & 0o7777) | 0o001);
  const reach = spawnSync('runuser', ['-u', PG_USER, '--', 'test', '-x', parent]);
  if (reach.status !== 0)
    throw new Error(`the postgres user cannot reach ${parent}: a directory above it does not let others through (chmod o+x)`);
  return { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** Creates the cluster when DIR/postgres/data does not exist yet. Returns whether it did. */
function initPostgres(pg: PostgresRecord): boolean {
  const { uid, gid } = postgresIds(pg.base);
  fs.mkdirSync(pg.base, { recursive: true, mode: 0o700 });
  fs.chownSync(pg.base, uid, gid);
  fs.chmodSync(pg.base, 0o700);
  const pwFile = path.join(pg.base, 'password');
  if (!fs.existsSync(pwFile)) {
    fs.writeFileSync(pwFile, randomBytes(18).toString('base64url') + '\n', { mode: 0o600 });
    fs.chownSync(pwFile, uid, gid);
  }
  if (fs.existsSync(path.join(pg.dataDir, 'PG_VERSION'))) return false;
  runAsPostgres(
    [
      path.join(PG_BIN, 'initdb'),
      `--pgdata=${pg.dataDir}`,
      `--username=${DB_ROLE}`,
      `--pwfile=${pwFile}`,
      '--auth-host=scram-sha-256',
      '--auth-local=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      '--no-instructions',
    ],
    'initdb',
  );
  // A test plane's database, as etcd runs with --unsafe-no-fsync: no fsync (an OS crash could lose data; no test
  // crashes the OS). Commits stay synchronous: a commit reaches the OS before it is acknowledged, so a killed
  // PostgreSQL (pg_ctl stop -m immediate) loses none. With synchronous_commit off it lost acknowledged ones, and
  // temporal-server then lost an activity task whose start it had recorded (docs/temporal-server.md).
  fs.appendFileSync(
    path.join(pg.dataDir, 'postgresql.conf'),
    [
      '',
      '# svm dev plane',
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${pg.base}'`,
      'max_connections = 200',
      'fsync = off',
      'synchronous_commit = on',
      'full_page_writes = off',
      '',
    ].join('\n'),
  );
  return true;
}

export function postgresPassword(rec: TemporalServerRecord): string {
  return fs.readFileSync(path.join(rec.postgres.base, 'password'), 'utf8').trim();
}

/**
 * Runs SQL on one of the plane's databases with psql as Temporal's role; returns psql's unaligned, tuples-only
 * output. For tests that look at or break what the server stored (a lost task), never for svm itself.
 */
export function postgresQuery(rec: TemporalServerRecord, database: string, sql: string): string {
  const r = spawnSync(
    path.join(PG_BIN, 'psql'),
    [
      '-h',
      '127.0.0.1',
      '-p',
      String(rec.postgres.port),
      '-U',
      DB_ROLE,
      '-d',
      database,
      '-X',
      '-A',
      '-t',
      '-v',
      'ON_ERROR_STOP=1',
      '-c',
      sql,
    ],
    { encoding: 'utf8', env: { ...process.env, PGPASSWORD: postgresPassword(rec) } },
  );
  if (r.status !== 0)
    throw new Error(`psql on ${database} failed (${r.status ?? r.signal}): ${(r.stderr || r.error?.message || '').trim()}`);
  return r.stdout.trim();
}

/** Starts PostgreSQL on its port (recorded, or drawn: then on another when it finds it taken); restartPostgres uses it too. */
export async function startPostgres(pg: PostgresRecord, log: (l: string) => void): Promise<void> {
  if (isRunning(pg)) return;
  const fresh = initPostgres(pg);
  const start = async ([port]: number[]) => {
    pg.port = port!;
    log(`${fresh ? 'initialized and ' : ''}starting PostgreSQL 15 on 127.0.0.1:${pg.port} (data ${pg.dataDir})`);
    const logFrom = fileSize(pg.log); // pg_ctl appends: what this start wrote is what follows
    const sinceStart = () => {
      try {
        return fs.readFileSync(pg.log).subarray(logFrom).toString('utf8').trimEnd().split('\n').slice(-15).join('\n');
      } catch {
        return '(no log)';
      }
    };
    try {
      runAsPostgres(
        [path.join(PG_BIN, 'pg_ctl'), 'start', '-w', '-t', '60', `--pgdata=${pg.dataDir}`, `--log=${pg.log}`, '-o', `-p ${pg.port}`],
        `pg_ctl start (log ${pg.log})`,
      );
    } catch (e) {
      throw new Error(`${e instanceof Error ? e.message : String(e)}; its log says:\n${sinceStart()}`);
    }
    pg.pid = postmasterPid(pg.dataDir);
    pg.binary = path.join(PG_BIN, 'postgres');
    if (!isRunning(pg)) throw new Error(`PostgreSQL did not start; its log is ${pg.log}:\n${sinceStart()}`);
    // pg_ctl -w waited for this data directory's postmaster to accept connections: it listens (checked, not assumed).
    if (!holdsPorts(pg.pid, [pg.port])) {
      await stopPostgres(pg, 'immediate');
      throw new Error(`PostgreSQL (pid ${pg.pid}) does not listen on 127.0.0.1:${pg.port}; its log is ${pg.log}:\n${sinceStart()}`);
    }
  };
  await startServerOnPorts('PostgreSQL', pg, [pg.port], start, { log });
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * pg_ctl stop: 'fast' (the default: clients are disconnected, a checkpoint is written) or 'immediate' (every
 * server process quits at once, no checkpoint: the next start recovers from the WAL, as after a crash).
 */
export async function stopPostgres(pg: PostgresRecord, mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
  if (!isRunning(pg)) return;
  const r = spawnSync(
    'runuser',
    ['-u', PG_USER, '--', path.join(PG_BIN, 'pg_ctl'), 'stop', '-m', mode, '-w', '-t', '30', `--pgdata=${pg.dataDir}`],
    {
      encoding: 'utf8',
    },
  );
  if (r.status !== 0 || isRunning(pg)) await stopProcess(pg); // SIGTERM, then SIGKILL
}

function sqlTool(tools: TemporalServerTools, pg: PostgresRecord, password: string, database: string, args: string[]): void {
  const r = spawnSync(
    tools.sqlTool,
    ['--plugin', 'postgres12', '--endpoint', '127.0.0.1', '--port', String(pg.port), '--user', DB_ROLE, '--database', database, ...args],
    { encoding: 'utf8', env: { ...process.env, SQL_PASSWORD: password } },
  );
  if (r.status !== 0)
    throw new Error(`temporal-sql-tool ${args.join(' ')} on ${database} failed: ${(r.stderr || r.stdout).trim().slice(-2000)}`);
}

/** Creates both databases and their version tables once, then brings both schemas up to this server's version. */
function applySchemas(tools: TemporalServerTools, pg: PostgresRecord, password: string, log: (l: string) => void): void {
  const marker = path.join(pg.base, 'schema-initialized');
  for (const { database, dir } of SCHEMA_DATABASES) {
    const [create, setup, update] = schemaSteps(tools.schema, dir);
    // The first two only once (they would leave the database as it is, but cost a connection each at every start).
    if (!fs.existsSync(marker)) for (const step of [create!, setup!]) sqlTool(tools, pg, password, database, step);
    sqlTool(tools, pg, password, database, update!);
  }
  fs.writeFileSync(marker, `${tools.version}\n`);
  log(`schemas of temporal and temporal_visibility at ${tools.version} (temporal-sql-tool, ${tools.schema})`);
}

/**
 * Starts PostgreSQL, applies the schemas, writes the configuration and starts
 * temporal-server and its UI. `frontend` is the plane's temporal record (its
 * pid and binary are set here). Waiting for readiness and registering the
 * namespace is finishTemporalServer's part.
 */
export async function startTemporalServer(
  frontend: ProcessRecord & { port: number; uiPort: number; extraArgs: string[] },
  rec: TemporalServerRecord,
  log: (l: string) => void,
  save: () => void,
): Promise<void> {
  checkSearchAttributesFitSql();
  const tools = ensureTemporalServerTools(log);
  const { dynamicConfig, logLevel } = translateTemporalArgs(frontend.extraArgs);
  await startPostgres(rec.postgres, log);
  save();
  const password = postgresPassword(rec);
  if (!isRunning(frontend)) {
    applySchemas(tools, rec.postgres, password, log);
    fs.mkdirSync(path.dirname(rec.config), { recursive: true });
    fs.writeFileSync(rec.dynamicConfig, YAML.stringify({ ...SERVER_DYNAMIC_CONFIG, ...dynamicConfig }));
    frontend.log = path.join(path.dirname(rec.config), 'temporal-server.log');
    // Every port the record holds (the internal-frontend's only with authorization).
    const services = (Object.keys(rec.ports) as Array<keyof TemporalServerRecord['ports']>).filter((k) => rec.ports[k] !== undefined);
    const portOf = (k: keyof TemporalServerRecord['ports']) => rec.ports[k]!;
    const start = async ([frontendPort, ...others]: number[]) => {
      frontend.port = frontendPort!;
      services.forEach((k, i) => (rec.ports[k] = others[i]!));
      fs.writeFileSync(rec.config, YAML.stringify(temporalServerConfig({ frontendPort: frontend.port, rec, password, logLevel })), {
        mode: 0o600,
      });
      log(
        `starting temporal-server ${tools.version} on 127.0.0.1:${frontend.port}${rec.tls ? ' (mTLS required)' : ''}${rec.auth ? ' (JWT authorization)' : ''} (PostgreSQL 127.0.0.1:${rec.postgres.port})`,
      );
      frontend.binary = tools.server;
      // The services to start: the default four, and with authorization the internal-frontend (not started unless named).
      const only = rec.auth ? ['frontend', 'internal-frontend', 'history', 'matching', 'worker'].flatMap((s) => ['--service', s]) : [];
      frontend.pid = await startProcess(tools.server, ['--config-file', rec.config, '--allow-no-auth', 'start', ...only], frontend.log);
      save();
      // Until it holds every one of its ports (finishTemporalServer waits for it to serve).
      await waitServing('temporal-server', frontend, [frontend.port, ...services.map(portOf)], undefined, 90_000);
    };
    await startServerOnPorts('temporal-server', frontend, [frontend.port, ...services.map(portOf)], start, {
      draw: smallintPort,
      names: ['frontend', ...services],
      log,
    });
    save();
  }
  // The UI server calls the frontend without a token (it would need an OIDC provider): not started with authorization.
  if (!rec.auth && !isRunning(rec.ui)) {
    const start = async ([uiPort]: number[]) => {
      frontend.uiPort = uiPort!;
      writeUiConfig(frontend, rec);
      log(`starting the Temporal UI server ${rec.ui.version} on http://127.0.0.1:${frontend.uiPort}`);
      rec.ui.binary = tools.ui;
      rec.ui.pid = await startProcess(tools.ui, ['--root', rec.ui.root, '--config', 'config', '--env', 'development', 'start'], rec.ui.log);
      save();
      await waitServing('the Temporal UI server', rec.ui, [frontend.uiPort], undefined, 60_000);
    };
    await startServerOnPorts('the Temporal UI server', rec.ui, [frontend.uiPort], start, { log });
    save();
  }
}

/** The UI server's config/development.yaml: the frontend, and its own port. */
function writeUiConfig(frontend: { port: number; uiPort: number }, rec: TemporalServerRecord): void {
  fs.mkdirSync(path.join(rec.ui.root, 'config'), { recursive: true });
  fs.writeFileSync(
    path.join(rec.ui.root, 'config', 'development.yaml'),
    YAML.stringify({
      temporalGrpcAddress: `127.0.0.1:${frontend.port}`,
      ...(rec.tls
        ? {
            tls: {
              caFile: rec.tls.ca,
              certFile: rec.tls.clientCert,
              keyFile: rec.tls.clientKey,
              serverName: rec.tls.serverName,
              enableHostVerification: true,
            },
          }
        : {}),
      host: '127.0.0.1',
      port: frontend.uiPort,
      enableUi: true,
      defaultNamespace: 'default',
      cors: { allowOrigins: [`http://127.0.0.1:${frontend.uiPort}`], cookieInsecure: true },
      refreshInterval: '1m',
      disableNewsFetch: true,
      notifyOnNewVersion: false,
    }),
  );
}

/** The plane's own connection over mTLS (the readiness checks, the namespace, the search attributes). */
export function temporalTlsConnection(tls: TemporalTlsFiles) {
  return {
    serverNameOverride: tls.serverName,
    serverRootCACertificate: fs.readFileSync(tls.ca),
    clientCertPair: { crt: fs.readFileSync(tls.clientCert), key: fs.readFileSync(tls.clientKey) },
  };
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: 5000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/**
 * Waits for the frontend, registers the "default" namespace and svm's search
 * attributes (idempotent), and waits until a visibility query on them is
 * accepted (the namespace cache has them) and the UI answers.
 */
export async function finishTemporalServer(
  frontend: ProcessRecord & { port: number; uiPort: number },
  rec: TemporalServerRecord,
  log: (l: string) => void,
): Promise<void> {
  const address = `127.0.0.1:${frontend.port}`;
  let conn: Connection | undefined;
  await waitFor(
    'temporal-server',
    frontend,
    async () => {
      if (!(await portOpen(frontend.port))) return false;
      conn = await Connection.connect({
        address,
        connectTimeout: 5_000,
        tls: rec.tls ? temporalTlsConnection(rec.tls) : undefined,
        ...(rec.auth ? { apiKey: planeAdminToken(rec.auth) } : {}),
      });
      return true;
    },
    90_000,
  );
  const connection = conn!;
  try {
    await waitFor(
      'temporal-server (the default namespace)',
      frontend,
      async () => {
        try {
          await connection.workflowService.describeNamespace({ namespace: 'default' });
          return true;
        } catch (e) {
          if ((e as { code?: number }).code !== 5) throw e; // NOT_FOUND: register it
        }
        await connection.workflowService
          .registerNamespace({ namespace: 'default', workflowExecutionRetentionPeriod: msToTs(`${NAMESPACE_RETENTION_HOURS} hours`) })
          .catch((e: { code?: number }) => {
            if (e.code !== 6) throw e; // ALREADY_EXISTS
          });
        log('registered the "default" namespace');
        return false;
      },
      90_000,
    );
    // The frontend's namespace cache learns of a new namespace within seconds (system.namespaceCacheRefreshInterval).
    await waitFor(
      'temporal-server (svm search attributes)',
      frontend,
      async () => {
        const sa = await registerSearchAttributes(connection, 'default');
        if (sa.added.length > 0) log(`registered search attributes on SQL visibility: ${sa.added.join(', ')}`);
        return true;
      },
      60_000,
    );
    const probe = searchAttributeDefinitions.find((d) => d.type === 'Keyword')!.name;
    await waitFor(
      'temporal-server (visibility knows the search attributes)',
      frontend,
      async () => {
        await connection.workflowService.listWorkflowExecutions({ namespace: 'default', pageSize: 1, query: `${probe} = 'svm-ready'` });
        return true;
      },
      60_000,
    );
  } finally {
    await connection.close();
  }
  // Ready when it lists namespaces through the frontend, not when it serves its page: its own connection to the
  // frontend comes up after that (a test asking it at once got 503). None with authorization (see startTemporalServer).
  if (rec.auth) return;
  await waitFor(
    'the Temporal UI server',
    rec.ui,
    async () => (await httpStatus(`http://127.0.0.1:${frontend.uiPort}/api/v1/namespaces`)) === 200,
    60_000,
  );
}

/** Stops the UI, the server (`frontend`) and PostgreSQL, in that order. */
export async function stopTemporalServer(frontend: ProcessRecord, rec: TemporalServerRecord, log: (l: string) => void): Promise<void> {
  if (isRunning(rec.ui)) log(`stopping the Temporal UI server (pid ${rec.ui.pid})`);
  await stopProcess(rec.ui);
  await stopProcess(frontend);
  if (isRunning(rec.postgres)) log(`stopping PostgreSQL (pid ${rec.postgres.pid}, pg_ctl stop -m fast)`);
  await stopPostgres(rec.postgres);
}
