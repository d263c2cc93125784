/**
 * Where a workflow runs: one value, made once per context (the client when it connects, the worker from its
 * settings, a workflow from its input), that gives everything a start needs to know about the cluster.
 *
 * A placement is a base task queue and, in a fleet (docs/fleet.md), a cluster: its name and, once known, the uid
 * pinned to it (the kube-system namespace's; src/kube/cluster-identity.ts). From it come the workflow ID (the
 * cluster as the ID's second segment: `migrate/<cluster>/<resource>`), the task queue (`<base>/cluster/<name>`),
 * the MigrationCluster search attribute, the summary's "in cluster" and the input's `cluster` field. An unnamed
 * placement (a single-cluster install) is the identity: IDs and queue as given, no attribute, no field.
 *
 * This is the one place those forms are derived; `start` and `child` below are the one way a workflow is started
 * (or joined) from it, whichever the kind (src/contract/start-options.ts names the kinds). Pure data: safe to import
 * from workflow code.
 */
import { TypedSearchAttributes, type SearchAttributePair } from '@temporalio/common';
import { clusterTaskQueue, idInCluster, inClusterText, type ClusterRef } from '../api/cluster';
import { MigrationCluster } from './search-attributes';

/** What a start needs besides the placement: the workflow's kind, its ID (unplaced), its input and its description. */
export interface StartSpec<I> {
  /** The workflow type. */
  type: string;
  /** The ID as a single-cluster install names it (`migrate/secrets`); the placement inserts the cluster. */
  id: string;
  /** The input, without `cluster`: the placement adds it. */
  input: I;
  /** The summary the Temporal UI shows, without the cluster: the placement appends it. */
  summary: string;
  details?: string;
  /** Search attributes of the kind, besides MigrationCluster. */
  attributes?: SearchAttributePair[];
}

/** The input as a placed workflow receives it: its cluster named when the placement names one. */
export type Placed<I> = I & { cluster?: ClusterRef };

export class Placement {
  private constructor(
    /** The base task queue (TEMPORAL_TASK_QUEUE): a cluster's queue is derived from it. */
    readonly base: string,
    /** The cluster, with the uid pinned to it once known; undefined in a single-cluster install. */
    readonly cluster: ClusterRef | undefined,
  ) {}

  /** The placement on a base task queue, in a cluster (a name, or a name and uid) or none. */
  static of(base: string, cluster?: string | ClusterRef): Placement {
    const ref = typeof cluster === 'string' ? { name: cluster } : cluster;
    return new Placement(base, ref ? { name: ref.name, ...(ref.uid ? { uid: ref.uid } : {}) } : undefined);
  }

  /** The placement of a workflow that runs on `queue` (its own task queue: the cluster's, when it names one). */
  static running(queue: string, cluster?: ClusterRef): Placement {
    const suffix = cluster ? clusterTaskQueue('', cluster.name) : '';
    return Placement.of(suffix && queue.endsWith(suffix) ? queue.slice(0, -suffix.length) : queue, cluster);
  }

  /** The cluster's name; undefined when none is named. */
  get name(): string | undefined {
    return this.cluster?.name;
  }

  /** The uid pinned to the cluster, when known. */
  get uid(): string | undefined {
    return this.cluster?.uid;
  }

  /** The same placement with the cluster's uid (unchanged when none is named). */
  withUid(uid: string | undefined): Placement {
    return this.cluster ? Placement.of(this.base, { name: this.cluster.name, ...(uid ? { uid } : {}) }) : this;
  }

  /** The task queue its workflows and activities run on. */
  get taskQueue(): string {
    return clusterTaskQueue(this.base, this.name);
  }

  /** A workflow's ID in this placement (`migrate/secrets` -> `migrate/prod-1/secrets`). */
  id(unplaced: string): string {
    return idInCluster(unplaced, this.name);
  }

  /** ' in cluster prod-1', or empty. */
  get inText(): string {
    return inClusterText(this.name);
  }

  /** The MigrationCluster search attribute, or none. */
  get attributes(): SearchAttributePair[] {
    return this.name ? [{ key: MigrationCluster, value: this.name }] : [];
  }

  /** A visibility query narrowed to this placement's cluster (the query itself when none is named). */
  query(query: string): string {
    return this.name ? `${query} AND ${MigrationCluster.name} = '${this.name}'` : query;
  }

  /** The input with the cluster (name, and uid when known) when one is named. */
  input<I extends object>(input: I): Placed<I> {
    return this.cluster ? { ...input, cluster: this.cluster } : input;
  }

  /** Options to start a workflow, or join it when it is running (the same ID): a client's or an activity's. */
  start<I extends object>(spec: StartSpec<I>) {
    return { ...this.child(spec), workflowIdConflictPolicy: 'USE_EXISTING' as const };
  }

  /** Options to start a child workflow (a child cannot join a running workflow: its parent handles the conflict). */
  child<I extends object>(spec: StartSpec<I>) {
    const attributes = [...(spec.attributes ?? []), ...this.attributes];
    return {
      workflowId: this.id(spec.id),
      taskQueue: this.taskQueue,
      args: [this.input(spec.input)] as [Placed<I>],
      ...(attributes.length > 0 ? { typedSearchAttributes: new TypedSearchAttributes(attributes) } : {}),
      staticSummary: `${spec.summary}${this.inText}`,
      ...(spec.details ? { staticDetails: spec.details } : {}),
    };
  }
}
