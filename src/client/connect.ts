/** A Temporal client from svm's settings, shared by the Migrator (one cluster) and the Fleet (many). */
import { Client, Connection } from '@temporalio/client';
import {
  checkNamespaceAccess,
  explainTemporalConnectError,
  loadTemporalSettings,
  TemporalSettings as TemporalSettingsSchema,
  temporalConnectionOptions,
  type TemporalSettings,
} from '../config/temporal';

/** How to reach Temporal: given, or (omitted) Temporal's own client configuration and SVM_CLUSTER. */
export type TemporalTarget = Partial<TemporalSettings> & { address: string };

/** Connects; a frontend that cannot be reached, a credential refused or a namespace missing is said in a sentence (src/config/temporal.ts). */
export async function connectTemporal(
  temporal?: TemporalTarget,
): Promise<{ client: Client; connection: Connection; settings: TemporalSettings }> {
  const t = temporal ? TemporalSettingsSchema.parse(temporal) : loadTemporalSettings(process.env);
  if (!t.address)
    throw new Error('TEMPORAL_ADDRESS is not set (host:port of the Temporal frontend), nor an address in the Temporal profile');
  const target = { ...t, address: t.address };
  const connection = await Connection.connect(temporalConnectionOptions(target)).catch(async (e: unknown) => {
    throw await explainTemporalConnectError(e, target);
  });
  await checkNamespaceAccess(connection, target).catch(async (e: unknown) => {
    await connection.close();
    throw e;
  });
  return { client: new Client({ connection, namespace: t.namespace }), connection, settings: t };
}
