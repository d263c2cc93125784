/**
 * What the drop check's modules (drop-check.ts and drop-*.ts) share: its input and options, what it reads once for
 * the group and finds per resource, and the phrasings its reasons share.
 */
import type { PassRecord } from '../contract/pass-record';
import type { CustomResourceDefinition } from '../api/custom-resource-definition';
import type { StorageState } from '../api/migration';
import type { DropCheck } from '../contract/drop';
import type { Agreement } from './agreement';
import type { ApiServers, ApiServerSource } from './apiservers';
import type { DiscoveredResource } from './client';
import { KubeError } from './errors';
import type { RequestSamples } from './request-samples';

/** A refused input (a malformed group version): nothing was read. */
export class DropInputError extends Error {
  override name = 'DropInputError';
}

/** The last migration workflow of a resource, as Temporal describes it. */
export interface MigrationRecord {
  workflowId: string;
  /** RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT, CONTINUED_AS_NEW. */
  status: string;
  /** The result's phase, for a completed run. */
  phase?: string;
  /** A Succeeded result's record of its whole pass (absent in results from before svm wrote one). */
  record?: PassRecord;
  closeTime?: string;
  /**
   * Why the run does not count as svm's record of this resource in this cluster (src/kube/migration-record.ts,
   * checkRecord): another workflow type, another task queue than svm's workers of the cluster poll, an input naming
   * another resource or cluster, a result that is not a migration's, a pass record of another resource or made
   * against another uid than the one pinned to the cluster (or naming none, in a named cluster). Its record is
   * dropped.
   */
  refused?: string;
}

export interface DropCheckOptions {
  /** Seconds between the two readings of each server's request counters (default 30; 0: one reading, any request since start counts). */
  requestsWindowSeconds?: number;
  /** Where the API servers are found; default: the `kubernetes` EndpointSlice and identity leases, as the worker does. */
  apiservers?: ApiServerSource;
  /**
   * The resource's migration workflow, its last run checked (src/kube/migration-record.ts: migrationRecords over a
   * placement), where a Temporal client is at hand (the worker's activity; the CLI with TEMPORAL_ADDRESS).
   */
  migrationOf?: (resource: { group: string; resource: string }) => Promise<MigrationRecord | undefined>;
  /** The cluster whose migration workflows migrationOf is asked for, when one Temporal namespace serves several. */
  cluster?: string;
  /**
   * The worker's samples of each server's request counters (src/kube/request-samples.ts): where one is older than the
   * window's start, that server's count starts there (the check run by the worker: up to a day back).
   */
  requestSamples?: Pick<RequestSamples, 'oldest'>;
  /** Called while objects are listed and the window runs (an activity heartbeats). */
  heartbeat?: (what: string) => void;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
export const why = (err: unknown) =>
  err instanceof KubeError && err.kind === 'forbidden' ? `forbidden (${err.message})` : err instanceof Error ? err.message : String(err);

/** The group version asked about, and the requests window. */
export interface DropTarget {
  groupVersion: string;
  group: string;
  version: string;
  windowSeconds: number;
}

/** What the check reads once for the whole group. */
export interface GroupReading {
  discovered: DiscoveredResource[];
  /** The group's CustomResourceDefinitions, by plural. */
  crdOf: Map<string, CustomResourceDefinition>;
  /** The StorageState of one of the group's resources (its plural). */
  stateOf: (resource: string) => StorageState | undefined;
  found: ApiServers;
  agreementOf: (r: DiscoveredResource) => Agreement;
  /** Whether an aggregated API serves the group version. */
  aggregation: Aggregation;
}

/** Whether kube-apiserver serves a group version itself or proxies it to an aggregated API. */
export interface Aggregation {
  /** The APIService's service (namespace/name), where an aggregated API serves the group version. */
  service?: string;
  /** Why that could not be read. */
  unreadable?: string;
}

/** One resource's findings: every check but requests (read once the window has passed), and what the resource reports. */
export interface ResourceFindings {
  name: string;
  key: string;
  kind?: string;
  crd?: CustomResourceDefinition;
  storageVersion?: string;
  /** The agreement the storageVersion check read, when a version of the resource is served. */
  agreement?: Agreement;
  /** Discovery lists the resource at the version to drop. */
  servedAt: boolean;
  /** The versions discovery lists the resource at. */
  servedVersions: string[];
  /** storageVersion, migration, storedVersions (a CRD), managedFields: the checks before requests. */
  checks: DropCheck[];
  /** A CRD's conversionWebhook check, after requests. */
  conversion?: DropCheck;
  managedFields: ManagedFieldsFinding;
}

/** The managedFields check, and the counts the resource reports (null where the objects could not be listed). */
export interface ManagedFieldsFinding {
  check: DropCheck;
  objects: number | null;
  naming: number | null;
  managers?: string[];
  /** The version the objects were listed at, and the list's error: a conversion webhook's probe too. */
  listedAt?: string;
  listError?: KubeError;
}
