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
import { Placement } from '../contract/placement';

/** How to reach Temporal: given, or (omitted) Temporal's own client configuration and SVM_CLUSTER. */
export type TemporalTarget = Partial<TemporalSettings> & { address: string };

/**
 * Where the workflows of the cluster a command works on run: the one a command names (--cluster, checked by the
 * option's parser) over SVM_CLUSTER, on the settings' task queue; neither: the single-cluster install's. Every
 * command that reads or starts a cluster's workflows takes its placement here.
 */
export function commandPlacement(t: Pick<TemporalSettings, 'taskQueue' | 'cluster'>, cluster: string | undefined): Placement {
  return Placement.of(t.taskQueue, cluster ?? t.cluster);
}

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

/**
 * A command's connection (`svm plan`, `svm prune`): connected and its namespace checked as connectTemporal does, with
 * the placement of the cluster the command works on (commandPlacement: --cluster over SVM_CLUSTER).
 */
export async function connectCommand(
  cluster: string | undefined,
): Promise<{ client: Client; here: Placement; close: () => Promise<void> }> {
  const { client, connection, settings } = await connectTemporal();
  return { client, here: commandPlacement(settings, cluster), close: () => connection.close() };
}
