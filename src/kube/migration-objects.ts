/**
 * The two StorageVersionMigration APIs svm speaks, as small adapters over one
 * bridge (src/worker/bridge.ts) and one status writer (the reportStatus
 * activity):
 *
 *   adapter    API                                  status svm writes
 *   sigs       migration.k8s.io/v1alpha1 (a CRD)    phase, counters, failures, conditions
 *   standard   storagemigration.k8s.io/v1|v1beta1    the built-in's conditions and resourceVersion,
 *              (served by the API server)             svm's facts in its migration.k8s.io/Progress condition
 *
 * Each adapter turns its objects into one ObjectView, and one set of status
 * facts (StorageVersionMigrationStatus) into its own status. The workflow
 * lists a standard object as `storagemigration.k8s.io/<name>` and a sigs one
 * by its name (standardRef / standardName).
 */
import type { ResourceRef } from '../api/resource';
import { conditionsFor } from '../api/conditions';
import { isTerminalPhase } from '../api/phases';
import {
  migrationObjectState,
  StorageVersionMigration,
  type MigrationObjectState,
  type MigrationPhase,
  type StorageVersionMigrationStatus,
} from '../api/migration';
import {
  lastOtherStatusWrite,
  otherStatusWriters,
  PROGRESS_CONDITION,
  standardConditions,
  standardFinished,
  StandardMigration,
  standardName,
  standardRef,
} from '../api/standard-migration';
import type { KubeClient } from './client';
import { KubeError } from './errors';
import {
  annotateMigrationObject,
  findMigrationObject,
  listMigrationObjects,
  patchMigrationStatus,
  SVMS_PATH,
  WORKFLOW_ID_ANNOTATION,
} from './migrations';
import {
  annotateStandardMigration,
  findStandardMigration,
  latestResourceVersion,
  listStandardMigrations,
  standardCollectionPath,
  standardVersion,
  writeStandardStatus,
} from './standard-migrations';
import { MalformedObjectError, parseAs } from './typed';

/** What the bridge needs to know of an object, whichever API it belongs to. */
export interface ObjectView {
  name: string;
  uid?: string;
  /** How the workflow lists it. */
  ref: string;
  /** The workflow svm tied it to (annotation; only svm sets it). */
  workflowId?: string;
  /** Exactly as its spec names it. */
  resource: { group?: string; resource: string; version?: string };
  continueToken?: string;
  /**
   * finished, new, inProgress (svm wrote a non-terminal status), upstreamRunning
   * (sigs: left Running by kube-storage-version-migrator; standard: marked
   * Running by another controller, the built-in: svm keeps its hands off).
   */
  state: MigrationObjectState;
  /** svm wrote a status for this workflow before: its workflow listed it once. */
  statusFromWorkflow?: string;
  /** Writers of its status other than svm (standard objects: managedFields). */
  otherWriters: string[];
  /** When another writer last wrote its status (ms since the epoch), if ever: a built-in acting now, or long ago. */
  lastOtherWrite?: number;
  /** metadata.creationTimestamp (ms since the epoch), when the server gave one. */
  createdAt?: number;
}

export interface MigrationObjectApi {
  readonly kind: 'sigs' | 'standard';
  /** e.g. migration.k8s.io/v1alpha1 */
  label(): Promise<string>;
  /** The collection to watch, or undefined when the cluster does not serve this API. */
  watchPath(): Promise<string | undefined>;
  /** Throws MalformedObjectError for an object that does not match the schema. */
  view(raw: unknown): ObjectView;
  find(name: string): Promise<ObjectView | undefined>;
  list(): Promise<{ items: ObjectView[]; malformed: MalformedObjectError[] }>;
  annotate(name: string, uid: string | undefined, workflowId: string): Promise<'annotated' | 'gone'>;
  /** Writes one set of facts as this API's status. `reason` names why a Failed phase failed. */
  write(name: string, facts: StorageVersionMigrationStatus, reason?: string, ref?: ResourceRef): Promise<void>;
}

// ------------------------------------------------------------ migration.k8s.io/v1alpha1

export function sigsApi(kube: KubeClient): MigrationObjectApi {
  const view = (o: StorageVersionMigration): ObjectView => ({
    name: o.metadata.name,
    uid: o.metadata.uid,
    ref: o.metadata.name,
    workflowId: o.metadata.annotations?.[WORKFLOW_ID_ANNOTATION],
    resource: o.spec.resource,
    continueToken: o.spec.continueToken,
    state: migrationObjectState(o.status),
    statusFromWorkflow: o.status?.workflowId,
    otherWriters: [],
  });
  return {
    kind: 'sigs',
    label: async () => 'migration.k8s.io/v1alpha1',
    watchPath: async () => SVMS_PATH,
    view: (raw) => view(parseAs(StorageVersionMigration, raw, { kind: 'StorageVersionMigration' })),
    async find(name) {
      const o = await findMigrationObject(kube, name);
      return o && view(o);
    },
    async list() {
      const { items, malformed } = await listMigrationObjects(kube);
      return { items: items.map(view), malformed };
    },
    annotate: (name, uid, workflowId) => annotateMigrationObject(kube, name, uid, workflowId),
    async write(name, facts, reason) {
      const terminal = isTerminalPhase(facts.phase);
      const now = new Date().toISOString();
      await patchMigrationStatus(kube, name, {
        ...facts,
        conditions: conditionsFor(facts.phase ?? 'Running', facts.message, now, reason),
        ...(terminal && !facts.completionTime ? { completionTime: now } : {}),
      });
    },
  };
}

// ------------------------------------------------------------ storagemigration.k8s.io

/** The standard object's state: svm's or another controller's doing, from its conditions and managedFields. */
export function standardState(o: StandardMigration): MigrationObjectState {
  if (standardFinished(o.status)) return 'finished';
  const conditions = o.status?.conditions ?? [];
  const svmWrote = conditions.some((c) => c.type === PROGRESS_CONDITION);
  if (svmWrote) return 'inProgress';
  if (conditions.some((c) => c.type === 'Running' && c.status === 'True')) return 'upstreamRunning';
  return 'new';
}

/** The creation time of an object, when it parses. */
function createdAt(timestamp: string | undefined): { createdAt?: number } {
  const at = timestamp === undefined ? NaN : Date.parse(timestamp);
  return Number.isFinite(at) ? { createdAt: at } : {};
}

export function standardApi(kube: KubeClient): MigrationObjectApi {
  const view = (o: StandardMigration): ObjectView => {
    const workflowId = o.metadata.annotations?.[WORKFLOW_ID_ANNOTATION];
    const state = standardState(o);
    return {
      name: o.metadata.name,
      uid: o.metadata.uid,
      ref: standardRef(o.metadata.name),
      workflowId,
      resource: { group: o.spec.resource.group ?? '', resource: o.spec.resource.resource },
      state,
      statusFromWorkflow: state === 'inProgress' || state === 'finished' ? workflowId : undefined,
      otherWriters: otherStatusWriters(o),
      lastOtherWrite: lastOtherStatusWrite(o),
      ...createdAt(o.metadata.creationTimestamp),
    };
  };
  return {
    kind: 'standard',
    async label() {
      const path = await standardCollectionPath(kube);
      return path ? path.split('/').slice(2, 4).join('/') : 'storagemigration.k8s.io (not served)';
    },
    watchPath: () => standardCollectionPath(kube),
    view: (raw) => view(parseAs(StandardMigration, raw, { kind: 'StorageVersionMigration' })),
    async find(name) {
      const o = await findStandardMigration(kube, name);
      return o && view(o);
    },
    async list() {
      const { items, malformed } = await listStandardMigrations(kube);
      return { items: items.map(view), malformed };
    },
    annotate: (name, uid, workflowId) => annotateStandardMigration(kube, name, uid, workflowId),
    async write(name, facts, reason, ref) {
      const o = await findStandardMigration(kube, name);
      if (!o) throw new KubeError('notFound', `StorageVersionMigration ${name} is gone`, 404);
      if (standardFinished(o.status)) return; // the server refuses to turn Succeeded/Failed back, and nothing more happens to it
      const conditions = standardConditions(
        o.status?.conditions,
        facts,
        new Date().toISOString(),
        reason,
        (await standardVersion(kube)) ?? 'v1',
      );
      // status.resourceVersion is immutable once set: the resource's list resourceVersion when svm first writes.
      const resourceVersion = o.status?.resourceVersion || (ref ? await latestResourceVersion(kube, ref) : undefined);
      await writeStandardStatus(kube, name, { conditions, ...(resourceVersion ? { resourceVersion } : {}) });
    },
  };
}

/** The adapter of a workflow's entry and the object's name. */
export function adapterFor(ref: string, apis: { sigs: MigrationObjectApi; standard: MigrationObjectApi }) {
  const name = standardName(ref);
  return name === undefined ? { api: apis.sigs, name: ref } : { api: apis.standard, name };
}

export type { MigrationPhase };
