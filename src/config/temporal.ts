/**
 * How to reach Temporal: the settings (zod over TEMPORAL_* variables) and the
 * connection options built from them. Shared by the client (`svm migrate`,
 * `Migrator.connect`) and the worker, so it lives below both.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { explainSettings, SettingsError, settingBool } from './settings';

export const TemporalSettings = z.object({
  address: z
    .string()
    .regex(/^[^\s:]+:\d+$/, 'must be host:port')
    .optional(),
  namespace: z.string().min(1).default('default'),
  taskQueue: z.string().min(1).default('storage-version-migrator'),
  apiKey: z.string().min(1).optional(),
  tls: settingBool.default(false),
  /** Client certificate and key (PEM files) for mTLS, e.g. Temporal Cloud; implies tls. */
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
});
export type TemporalSettings = z.infer<typeof TemporalSettings>;

/** Environment variable behind each Temporal setting (paths as in a settings object that holds them under `temporal`). */
export const temporalSettingSources: Record<string, string> = {
  'temporal.address': 'TEMPORAL_ADDRESS',
  'temporal.namespace': 'TEMPORAL_NAMESPACE',
  'temporal.taskQueue': 'TEMPORAL_TASK_QUEUE',
  'temporal.apiKey': 'TEMPORAL_API_KEY',
  'temporal.tls': 'TEMPORAL_TLS',
  'temporal.tlsCert': 'TEMPORAL_TLS_CERT',
  'temporal.tlsKey': 'TEMPORAL_TLS_KEY',
};

/** The raw TEMPORAL_* values (blank means unset), before validation. */
export function temporalFromEnv(env: NodeJS.ProcessEnv) {
  return {
    address: env.TEMPORAL_ADDRESS || undefined,
    namespace: env.TEMPORAL_NAMESPACE || undefined,
    taskQueue: env.TEMPORAL_TASK_QUEUE || undefined,
    apiKey: env.TEMPORAL_API_KEY || undefined,
    tls: env.TEMPORAL_TLS || undefined,
    tlsCert: env.TEMPORAL_TLS_CERT || undefined,
    tlsKey: env.TEMPORAL_TLS_KEY || undefined,
  };
}

export function loadTemporalSettings(env: NodeJS.ProcessEnv): TemporalSettings {
  const parsed = z.object({ temporal: TemporalSettings }).safeParse({ temporal: temporalFromEnv(env) });
  if (!parsed.success) throw new SettingsError(`invalid setting: ${explainSettings(parsed.error, temporalSettingSources)}`);
  return parsed.data.temporal;
}

/** Connection options for @temporalio/client and @temporalio/worker from the settings (reads the mTLS PEM files). */
export function temporalConnectionOptions(t: TemporalSettings & { address: string }) {
  if (Boolean(t.tlsCert) !== Boolean(t.tlsKey)) throw new SettingsError('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY must be set together');
  const tls =
    t.tlsCert && t.tlsKey ? { clientCertPair: { crt: readFileSync(t.tlsCert), key: readFileSync(t.tlsKey) } } : t.tls || undefined;
  return { address: t.address, tls, apiKey: t.apiKey };
}
