/**
 * How to reach Temporal, the Temporal way. @temporalio/envconfig reads
 * Temporal's own client configuration: the TOML profiles the Temporal CLI
 * writes (TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml;
 * TEMPORAL_PROFILE, else "default") overlaid with the standard variables
 * (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS,
 * TEMPORAL_TLS_CLIENT_CERT_PATH / _KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH,
 * TEMPORAL_TLS_SERVER_NAME, their _DATA forms, TEMPORAL_GRPC_META_*), so a
 * user's existing Temporal CLI profile works for svm as it is. svm adds
 * TEMPORAL_TASK_QUEUE, and keeps older names as aliases: TEMPORAL_TLS_CERT and
 * TEMPORAL_TLS_KEY (svm's own, which the Temporal CLI also reads) and
 * TEMPORAL_TLS_CA (the CLI's), each with a _DATA form.
 *
 * The settings are validated with zod, the connection options are made by
 * envconfig's toClientOptions, and a refused connection (a server
 * certificate from another CA, a missing client certificate, a wrong server
 * name, TLS against plaintext) is explained by explainTemporalConnectError.
 * Shared by the client (`svm migrate`, `Migrator.connect`) and the worker, so
 * it lives below both.
 */
import type { Connection } from '@temporalio/client';
import { loadClientConfigProfile, toClientOptions, type ClientConfigProfile, type ConfigDataSource } from '@temporalio/envconfig';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import { z } from 'zod';
import { explainSettings, SettingsError, settingBool } from './settings';
import { ClusterNameSchema } from '../api/cluster';

export const TemporalSettings = z.object({
  address: z
    .string()
    .regex(/^[^\s:]+:\d+$/, 'must be host:port')
    .optional(),
  namespace: z.string().min(1).default('default'),
  taskQueue: z.string().min(1).default('storage-version-migrator'),
  /**
   * The cluster this worker or client works on, when one Temporal namespace serves several (SVM_CLUSTER,
   * docs/fleet.md): its task queue is taskQueue's cluster queue and its workflow IDs name it. Unset: one cluster.
   */
  cluster: ClusterNameSchema.optional(),
  apiKey: z.string().min(1).optional(),
  /** TLS on (true) or off (false); unset: on when any TLS setting or an API key is given (as Temporal's SDKs and CLI do). */
  tls: settingBool.optional(),
  /** Client certificate and key (PEM files, or the PEM text in the *Data forms) for mTLS; imply tls. */
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  tlsCertData: z.string().min(1).optional(),
  tlsKeyData: z.string().min(1).optional(),
  /** The CA that signed the server's certificate (PEM file or text); unset: the system's roots. */
  tlsCa: z.string().min(1).optional(),
  tlsCaData: z.string().min(1).optional(),
  /** The name the server's certificate must hold, when it is not the address's host. */
  tlsServerName: z.string().min(1).optional(),
  /** gRPC headers sent with every call (TEMPORAL_GRPC_META_<NAME>, or a profile's grpc_meta). */
  grpcMeta: z.record(z.string(), z.string()).optional(),
});
export type TemporalSettings = z.infer<typeof TemporalSettings>;

/** Environment variable behind each Temporal setting (paths as in a settings object that holds them under `temporal`). */
export const temporalSettingSources: Record<string, string> = {
  'temporal.address': 'TEMPORAL_ADDRESS',
  'temporal.namespace': 'TEMPORAL_NAMESPACE',
  'temporal.taskQueue': 'TEMPORAL_TASK_QUEUE',
  'temporal.cluster': 'SVM_CLUSTER',
  'temporal.apiKey': 'TEMPORAL_API_KEY',
  'temporal.tls': 'TEMPORAL_TLS',
  'temporal.tlsCert': 'TEMPORAL_TLS_CLIENT_CERT_PATH',
  'temporal.tlsKey': 'TEMPORAL_TLS_CLIENT_KEY_PATH',
  'temporal.tlsCertData': 'TEMPORAL_TLS_CLIENT_CERT_DATA',
  'temporal.tlsKeyData': 'TEMPORAL_TLS_CLIENT_KEY_DATA',
  'temporal.tlsCa': 'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
  'temporal.tlsCaData': 'TEMPORAL_TLS_SERVER_CA_CERT_DATA',
  'temporal.tlsServerName': 'TEMPORAL_TLS_SERVER_NAME',
  'temporal.grpcMeta': 'TEMPORAL_GRPC_META_*',
};

/** Older names svm still reads, each for its standard variable: [standard, alias]. */
export const TEMPORAL_ENV_ALIASES: ReadonlyArray<readonly [string, string]> = [
  ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CERT'],
  ['TEMPORAL_TLS_CLIENT_KEY_PATH', 'TEMPORAL_TLS_KEY'],
  ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_CA'],
  ['TEMPORAL_TLS_CLIENT_CERT_DATA', 'TEMPORAL_TLS_CERT_DATA'],
  ['TEMPORAL_TLS_CLIENT_KEY_DATA', 'TEMPORAL_TLS_KEY_DATA'],
  ['TEMPORAL_TLS_SERVER_CA_CERT_DATA', 'TEMPORAL_TLS_CA_DATA'],
];

/**
 * The environment envconfig sees: blank values dropped (blank means unset in
 * svm, where envconfig would let an empty TEMPORAL_ADDRESS override a
 * profile's), aliases mapped to their standard names (both set to different
 * values is refused), TEMPORAL_TLS in svm's spellings (yes/no, 1/0) made
 * true/false. Only the variables envconfig reads, and where the config file is.
 */
export function temporalEnvconfigEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    // (a blank TEMPORAL_GRPC_META_<NAME> is kept: envconfig reads it as "remove the profile's header")
    if (v === undefined || (v.trim() === '' && !k.startsWith('TEMPORAL_GRPC_META_'))) continue;
    if (k.startsWith('TEMPORAL_') || k === 'HOME' || k === 'XDG_CONFIG_HOME' || k === 'APPDATA') out[k] = v;
  }
  for (const [standard, alias] of TEMPORAL_ENV_ALIASES) {
    const a = out[alias];
    if (a === undefined) continue;
    if (out[standard] !== undefined && out[standard] !== a)
      throw new SettingsError(
        `invalid setting: ${alias} (an older name of ${standard}) and ${standard} are both set, to different values: set only ${standard}`,
      );
    out[standard] = a;
    delete out[alias];
  }
  const tls = out.TEMPORAL_TLS;
  if (tls !== undefined) {
    const parsed = settingBool.safeParse(tls.trim().toLowerCase());
    if (parsed.success) out.TEMPORAL_TLS = String(parsed.data);
    else delete out.TEMPORAL_TLS; // refused by the schema, with the variable's name (temporalFromEnv keeps the raw value)
  }
  if (out.TEMPORAL_TLS_DISABLE_HOST_VERIFICATION !== undefined && settingBool.safeParse(out.TEMPORAL_TLS_DISABLE_HOST_VERIFICATION).data)
    throw new SettingsError(
      'invalid setting: TEMPORAL_TLS_DISABLE_HOST_VERIFICATION is not supported by the TypeScript SDK svm runs on: give the CA that signed the server certificate (TEMPORAL_TLS_SERVER_CA_CERT_PATH) and, when the certificate does not name the address, TEMPORAL_TLS_SERVER_NAME',
    );
  return out;
}

/** Where the profile comes from, for messages: `profile "p" of FILE`. */
function profileOrigin(env: Record<string, string>): string {
  const file = env.TEMPORAL_CONFIG_FILE ?? '~/.config/temporalio/temporal.toml';
  return `profile "${env.TEMPORAL_PROFILE ?? 'default'}" of ${file}`;
}

function source(s: ConfigDataSource | undefined): { path?: string; data?: string } {
  if (!s) return {};
  if ('path' in s) return { path: s.path };
  return { data: typeof s.data === 'string' ? s.data : Buffer.from(s.data).toString('utf8') };
}

/**
 * The raw Temporal values (before validation): the TOML profile overlaid with
 * the environment, by envconfig, plus TEMPORAL_TASK_QUEUE.
 */
export function temporalFromEnv(env: NodeJS.ProcessEnv) {
  const e = temporalEnvconfigEnv(env);
  let p: ClientConfigProfile;
  try {
    p = loadClientConfigProfile({ overrideEnvVars: e });
  } catch (err) {
    throw new SettingsError(`invalid Temporal client configuration (${profileOrigin(e)}): ${(err as Error).message}`);
  }
  const cert = source(p.tls?.clientCert);
  const key = source(p.tls?.clientKey);
  const ca = source(p.tls?.serverCACert);
  const rawTls = env.TEMPORAL_TLS?.trim() ? env.TEMPORAL_TLS : undefined;
  return {
    address: p.address,
    namespace: p.namespace,
    taskQueue: env.TEMPORAL_TASK_QUEUE || undefined,
    cluster: env.SVM_CLUSTER || undefined,
    apiKey: p.apiKey,
    // A TEMPORAL_TLS value svm cannot read reaches the schema as it is, to be refused by name.
    tls: rawTls !== undefined && e.TEMPORAL_TLS === undefined ? rawTls : p.tls === undefined ? undefined : p.tls.disabled !== true,
    tlsCert: cert.path,
    tlsKey: key.path,
    tlsCertData: cert.data,
    tlsKeyData: key.data,
    tlsCa: ca.path,
    tlsCaData: ca.data,
    tlsServerName: p.tls?.serverName,
    grpcMeta: p.grpcMeta && Object.keys(p.grpcMeta).length > 0 ? p.grpcMeta : undefined,
  };
}

export function loadTemporalSettings(env: NodeJS.ProcessEnv): TemporalSettings {
  const parsed = z.object({ temporal: TemporalSettings }).safeParse({ temporal: temporalFromEnv(env) });
  if (!parsed.success) throw new SettingsError(`invalid setting: ${explainSettings(parsed.error, temporalSettingSources)}`);
  return parsed.data.temporal;
}

/** The settings as an envconfig profile (the inverse of temporalFromEnv's mapping). */
export function temporalProfile(t: TemporalSettings): ClientConfigProfile {
  const data = (path?: string, text?: string): ConfigDataSource | undefined =>
    path !== undefined ? { path } : text !== undefined ? { data: text } : undefined;
  const anyTls = [t.tlsCert, t.tlsKey, t.tlsCertData, t.tlsKeyData, t.tlsCa, t.tlsCaData, t.tlsServerName].some((v) => v !== undefined);
  return {
    address: t.address,
    namespace: t.namespace,
    apiKey: t.apiKey,
    tls:
      t.tls === false
        ? { disabled: true }
        : t.tls === true || anyTls
          ? {
              serverName: t.tlsServerName,
              clientCert: data(t.tlsCert, t.tlsCertData),
              clientKey: data(t.tlsKey, t.tlsKeyData),
              serverCACert: data(t.tlsCa, t.tlsCaData),
            }
          : undefined,
    grpcMeta: t.grpcMeta,
  };
}

/**
 * Connection options for @temporalio/client's Connection and
 * @temporalio/worker's NativeConnection, made by envconfig from the settings
 * (it reads the PEM files). Accepts partial settings (the typed client's
 * callers give what they have).
 */
export function temporalConnectionOptions(settings: Partial<TemporalSettings> & { address: string }) {
  const t = TemporalSettings.parse(settings);
  const hasCert = Boolean(t.tlsCert ?? t.tlsCertData);
  const hasKey = Boolean(t.tlsKey ?? t.tlsKeyData);
  if (hasCert !== hasKey)
    throw new SettingsError(
      `invalid setting: a client certificate needs its key: TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or their _DATA forms, or a profile's tls.client_cert_path and tls.client_key_path) go together; ${hasCert ? 'the key' : 'the certificate'} is missing`,
    );
  if (t.tlsCert && t.tlsCertData) throw new SettingsError('invalid setting: TEMPORAL_TLS_CLIENT_CERT_PATH and _DATA are both set');
  if (t.tlsKey && t.tlsKeyData) throw new SettingsError('invalid setting: TEMPORAL_TLS_CLIENT_KEY_PATH and _DATA are both set');
  if (t.tlsCa && t.tlsCaData) throw new SettingsError('invalid setting: TEMPORAL_TLS_SERVER_CA_CERT_PATH and _DATA are both set');
  let options: ReturnType<typeof toClientOptions>['connectionOptions'];
  try {
    options = toClientOptions(temporalProfile(t)).connectionOptions;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const which =
      e.path === t.tlsCa
        ? 'TEMPORAL_TLS_SERVER_CA_CERT_PATH'
        : e.path === t.tlsCert
          ? 'TEMPORAL_TLS_CLIENT_CERT_PATH'
          : e.path === t.tlsKey
            ? 'TEMPORAL_TLS_CLIENT_KEY_PATH'
            : 'a TLS file';
    throw new SettingsError(`invalid setting: ${which}: cannot read ${e.path ?? ''}: ${e.code ?? e.message}`);
  }
  return { ...options, address: t.address! };
}

/** What svm was given for TLS, in words, for the messages below. */
function tlsGiven(t: Partial<TemporalSettings>): { ca: string; cert: string; serverName: string } {
  return {
    ca: t.tlsCa ? `the CA in ${t.tlsCa}` : t.tlsCaData ? 'the CA given as PEM text' : "the system's root CAs (no CA given)",
    cert: t.tlsCert ? `the client certificate ${t.tlsCert}` : t.tlsCertData ? 'the client certificate given as PEM text' : '',
    serverName: t.tlsServerName ?? '',
  };
}

type Refusal = 'no-client-cert' | 'client-cert-refused' | 'server-name' | 'server-ca' | 'not-tls' | 'needs-tls' | 'unauthorized';

/** The refusal a connection error's text names (the Rust core's, OpenSSL's and Node's wordings), if any. */
export function refusalOf(text: string, hasClientCert: boolean): Refusal | undefined {
  const m = text.toLowerCase();
  if (/certificate.?required|peer did not return a certificate/.test(m)) return hasClientCert ? 'client-cert-refused' : 'no-client-cert';
  if (/alert.{0,20}handshake.?failure|alertreceived\(handshakefailure\)/.test(m))
    return hasClientCert ? 'client-cert-refused' : 'no-client-cert';
  if (
    /alert.{0,20}(unknown.?ca|bad.?certificate|certificate.?unknown|decrypt.?error)|alertreceived\((unknownca|badcertificate|certificateunknown)\)/.test(
      m,
    )
  )
    return 'client-cert-refused';
  if (
    /notvalidforname|does not match certificate's altnames|err_tls_cert_altname_invalid|not valid for name|certificate is not valid for/.test(
      m,
    )
  )
    return 'server-name';
  if (
    /unknownissuer|unable to (get local issuer|verify the first) certificate|unable_to_(get_issuer_cert|verify_leaf_signature)|self.signed.certificate|depth_zero_self_signed|certificate verify failed|badsignature|cert_signature_failure/.test(
      m,
    )
  )
    return 'server-ca';
  if (
    /wrong.version.number|packet length too long|invalidcontenttype|corrupt ?message|record overflow|first record does not look like a tls/.test(
      m,
    )
  )
    return 'not-tls';
  // The server's authorizer (docs/temporal-server.md#authorization): the connection's first call was refused.
  if (/permission_denied|permissiondenied|request unauthorized|unauthenticated/.test(m)) return 'unauthorized';
  return undefined;
}

/**
 * One TLS handshake with svm's settings (CA, client certificate, server
 * name, ALPN h2 as gRPC), to learn why a connection failed when the SDK's
 * error does not say (Node's gRPC reports only "Failed to connect before the
 * deadline"). In TLS 1.3 the server judges the client certificate after the
 * client's part of the handshake: a refusal then comes as an alert on the
 * first read, so the probe waits a moment after the handshake.
 */
export async function probeTls(settings: Partial<TemporalSettings> & { address: string }, timeoutMs = 5_000): Promise<string | undefined> {
  const t = TemporalSettings.parse(settings);
  const host = t.address!.replace(/:\d+$/, '');
  const port = Number(/:(\d+)$/.exec(t.address!)?.[1]);
  const read = (file?: string, text?: string) => (file ? readFileSync(file) : text !== undefined ? Buffer.from(text) : undefined);
  let options: tls.ConnectionOptions;
  try {
    options = {
      host,
      port,
      servername: t.tlsServerName ?? (isIP(host) ? undefined : host),
      ca: read(t.tlsCa, t.tlsCaData),
      cert: read(t.tlsCert, t.tlsCertData),
      key: read(t.tlsKey, t.tlsKeyData),
      ALPNProtocols: ['h2'],
    };
  } catch {
    return undefined;
  }
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: string | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    const socket = tls.connect(options, () => {
      // HTTP/2's preface makes the server read, and so send its verdict on our certificate.
      socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
      setTimeout(() => finish(undefined), 1_000);
    });
    socket.on('data', () => undefined);
    socket.on('error', (e: NodeJS.ErrnoException) => finish(`${e.code ?? ''} ${e.message}`));
    socket.on('close', () => finish(undefined));
  });
}

/** Why the server's authorizer refused svm (docs/temporal-server.md#authorization): its API key, or none given. */
function unauthorizedText(settings: Partial<TemporalSettings> & { address: string }): string {
  const at = `the Temporal server at ${settings.address}`;
  const ns = settings.namespace ?? 'default';
  return settings.apiKey
    ? `${at} refused svm's credential: the API key (TEMPORAL_API_KEY or the profile's api_key) is expired, signed by a key the server does not trust, or grants nothing in namespace ${ns}`
    : `${at} requires a credential and svm has none: set TEMPORAL_API_KEY (or the profile's api_key) to a token that grants namespace ${ns}`;
}

/**
 * Once connected: may svm use its namespace? A server with an authorizer lets a connection open without a credential
 * (its first call is a health check), and refuses the first real one; a namespace that does not exist fails every
 * call. Both are said here, naming the server and the namespace, instead of at the command's first call ("Failed to
 * list workflows"). Any other error is left to that call.
 */
export async function checkNamespaceAccess(
  connection: Connection,
  settings: Partial<TemporalSettings> & { address: string },
): Promise<void> {
  const namespace = settings.namespace ?? 'default';
  try {
    await connection.workflowService.describeNamespace({ namespace });
  } catch (err) {
    const code = (err as { code?: number }).code;
    if (code === 7 || code === 16) throw new Error(`cannot use Temporal: ${unauthorizedText(settings)} (${(err as Error).message})`);
    if (code === 5)
      throw new Error(
        `cannot use Temporal: namespace "${namespace}" does not exist on the Temporal server at ${settings.address}: create it (temporal operator namespace create --namespace ${namespace}), then run svm setup; or set TEMPORAL_NAMESPACE`,
      );
  }
}

/**
 * A refused connection, explained: what the server or svm refused and which
 * setting changes it, the original message kept at the end. The SDK error's
 * own text is read first (the worker's Rust core names the reason); when it
 * says nothing (Node's gRPC) and TLS is on, one TLS handshake with the same
 * settings (probeTls) finds it. Errors that are not about TLS come back as
 * they were.
 */
export async function explainTemporalConnectError(err: unknown, settings: Partial<TemporalSettings> & { address: string }): Promise<Error> {
  const original = err instanceof Error ? err : new Error(String(err));
  const hasCert = Boolean(settings.tlsCert ?? settings.tlsCertData);
  const tlsOn =
    settings.tls === true ||
    (settings.tls !== false &&
      [settings.tlsCa, settings.tlsCaData, settings.tlsCert, settings.tlsCertData, settings.tlsServerName, settings.apiKey].some(Boolean));
  let refusal = refusalOf(`${original.message} ${String((original as { cause?: unknown }).cause ?? '')}`, hasCert);
  if (!refusal && tlsOn) {
    const probed = await probeTls(settings).catch(() => undefined);
    if (probed) refusal = refusalOf(probed, hasCert);
  }
  if (refusal === 'not-tls' && !tlsOn) refusal = 'needs-tls';
  if (!refusal) {
    // Nothing answered (a wrong address, a port-forward not running): the SDK's sentence names neither Temporal nor where.
    const e = new Error(
      `cannot connect to Temporal at ${settings.address}: ${original.message.trim()}; check the address (TEMPORAL_ADDRESS or the profile's) and that the server, or the port-forward to it, is running`,
    );
    (e as { cause?: unknown }).cause = original;
    return e;
  }
  const given = tlsGiven(settings);
  const at = `the Temporal server at ${settings.address}`;
  const why: Record<Refusal, string> = {
    'no-client-cert': `${at} requires a client certificate (mTLS) and svm has none: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or a profile's tls.client_cert_path and tls.client_key_path)`,
    'client-cert-refused': `${at} refused ${given.cert || "svm's client certificate"}: it is not signed by a CA the server trusts for clients`,
    'server-name': `${at} presented a certificate that does not name ${given.serverName ? `"${given.serverName}" (TEMPORAL_TLS_SERVER_NAME)` : `"${settings.address.replace(/:\d+$/, '')}"`}: set TEMPORAL_TLS_SERVER_NAME to a name in the server's certificate`,
    'server-ca': `${at} presented a certificate that ${given.ca} does not trust: set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the CA that signed the server's certificate`,
    'not-tls': `${at} does not speak TLS: set TEMPORAL_TLS=false (or remove the TLS settings)`,
    'needs-tls': `${at} did not answer in plaintext: it may require TLS (set TEMPORAL_TLS=true and the TLS settings)`,
    unauthorized: unauthorizedText(settings),
  };
  const e = new Error(`cannot connect to Temporal: ${why[refusal]} (${original.message.trim()})`);
  (e as { cause?: unknown }).cause = original;
  return e;
}
