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
import { defaultPayloadConverter, TypedSearchAttributes, type Payload, type SearchAttributePair } from '@temporalio/common';
import { CLUSTER_HEADER, clusterTaskQueue, idInCluster, type ClusterRef } from '../api/cluster';

/**
 * A cluster as a placement takes it: its name, its uid once known, and the task queue that serves it when its
 * registration names one (`queue`: a pool's, src/api/cluster.ts poolTaskQueue; absent: the cluster's own,
 * `<base>/cluster/<name>`). The queue decides where its workflows and activities run, nothing else: it is in no
 * workflow ID, no input and no header.
 */
export type PlacedCluster = ClusterRef & { queue?: string };
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

/**
 * Where a workflow runs. Two kinds, chosen once, in `of`: a single-cluster install's (the identity) and a named
 * cluster's; nothing else asks whether a cluster is named to derive a form.
 */
export abstract class Placement {
  protected constructor(
    /** The base task queue (TEMPORAL_TASK_QUEUE): a cluster's queue is derived from it. */
    readonly base: string,
  ) {}

  /**
   * The placement on a base task queue, in a cluster (a name, or a name and uid, and the queue its registration
   * names) or none. A single cluster has no registration: a queue given with no cluster is not looked at.
   */
  static of(base: string, cluster?: string | PlacedCluster): Placement {
    if (!cluster) return new SingleCluster(base);
    return new InCluster(base, typeof cluster === 'string' ? { name: cluster } : cluster);
  }

  /** The placement of a workflow that runs on `queue` (its own task queue: the cluster's, when it names one). */
  static running(queue: string, cluster?: ClusterRef): Placement {
    return Placement.of(queue, cluster).runningOn(queue);
  }

  /** The cluster, with the uid pinned to it once known; undefined in a single-cluster install. */
  abstract readonly cluster: ClusterRef | undefined;
  /** The task queue its workflows and activities run on. */
  abstract readonly taskQueue: string;
  /** The MigrationCluster search attribute, or none. */
  abstract readonly attributes: SearchAttributePair[];
  /** ' in cluster prod-1', or empty. */
  abstract readonly inText: string;
  /** A workflow's ID in this placement (`migrate/secrets` -> `migrate/prod-1/secrets`). */
  abstract id(unplaced: string): string;
  /**
   * A visibility query narrowed to this placement: a named cluster's MigrationCluster; a single-cluster install's, no
   * MigrationCluster (every named cluster's workflow carries one from its start, none of a single-cluster install's
   * ever did), so that in a namespace shared with named clusters it does not match theirs. Not its task queue: a
   * client need not be told the workers' queue to read their migrations (`svm status` with only an address).
   */
  abstract query(query: string): string;
  /** An activity's headers with the cluster (name, and uid when known) when one is named (src/worker/cluster-check.ts reads it). */
  abstract headers<H extends Record<string, Payload>>(headers: H): H;
  /** The labels a metric carries for this placement: `cluster` when one is named. */
  abstract readonly labels: Record<string, string>;
  /** The input with the cluster (name, and uid when known) when one is named. */
  abstract input<I extends object>(input: I): Placed<I>;
  /**
   * Why a start input's `cluster` field (as found, unchecked) is not this placement's, or undefined when it is (its
   * name: the uid is compared apart, src/kube/migration-record.ts). `input`'s inverse, for a run read back.
   */
  abstract inputRefusal(cluster: unknown): string | undefined;
  /** The same placement with the cluster's uid (unchanged when none is named). */
  abstract withUid(uid: string | undefined): Placement;
  /**
   * The same placement on the task queue the cluster's registration names (a pool's); undefined: the cluster's own.
   * Unchanged when no cluster is named.
   */
  abstract withQueue(queue: string | undefined): Placement;
  /** The same placement, its base taken from the task queue it runs on. */
  protected abstract runningOn(queue: string): Placement;

  /** The cluster's name; undefined when none is named. */
  get name(): string | undefined {
    return this.cluster?.name;
  }

  /** The uid pinned to the cluster, when known. */
  get uid(): string | undefined {
    return this.cluster?.uid;
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

/** A single-cluster install's placement: the identity (IDs and queue as given, no attribute, no input field). */
class SingleCluster extends Placement {
  readonly cluster = undefined;
  readonly attributes: SearchAttributePair[] = [];
  readonly inText = '';
  readonly labels = {};
  constructor(base: string) {
    super(base);
  }
  get taskQueue(): string {
    return this.base;
  }
  id(unplaced: string): string {
    return unplaced;
  }
  query(query: string): string {
    return `${query} AND ${MigrationCluster.name} IS NULL`;
  }
  headers<H extends Record<string, Payload>>(headers: H): H {
    return headers;
  }
  input<I extends object>(input: I): Placed<I> {
    return input;
  }
  inputRefusal(cluster: unknown): string | undefined {
    return cluster === undefined
      ? undefined
      : `was started in cluster ${String((cluster as { name?: unknown } | null)?.name)}, and this install names none`;
  }
  withUid(): Placement {
    return this;
  }
  withQueue(): Placement {
    return this;
  }
  protected runningOn(queue: string): Placement {
    return new SingleCluster(queue);
  }
}

/** A named cluster's placement, in a fleet on one Temporal namespace (docs/fleet.md). */
class InCluster extends Placement {
  readonly cluster: ClusterRef;
  /** The queue its registration names (a pool's); undefined: the cluster's own. */
  private readonly queue: string | undefined;
  constructor(base: string, ref: PlacedCluster) {
    super(base);
    this.cluster = { name: ref.name, ...(ref.uid ? { uid: ref.uid } : {}) };
    this.queue = ref.queue || undefined;
  }
  get taskQueue(): string {
    return this.queue ?? clusterTaskQueue(this.base, this.cluster.name);
  }
  get attributes(): SearchAttributePair[] {
    return [{ key: MigrationCluster, value: this.cluster.name }];
  }
  get inText(): string {
    return ` in cluster ${this.cluster.name}`;
  }
  get labels(): Record<string, string> {
    return { cluster: this.cluster.name };
  }
  id(unplaced: string): string {
    return idInCluster(unplaced, this.cluster.name);
  }
  query(query: string): string {
    return `${query} AND ${MigrationCluster.name} = '${this.cluster.name}'`;
  }
  headers<H extends Record<string, Payload>>(headers: H): H {
    return { ...headers, [CLUSTER_HEADER]: defaultPayloadConverter.toPayload(this.cluster) };
  }
  input<I extends object>(input: I): Placed<I> {
    return { ...input, cluster: this.cluster };
  }
  inputRefusal(cluster: unknown): string | undefined {
    const ref = typeof cluster === 'object' && cluster !== null ? (cluster as { name?: unknown }) : undefined;
    if (ref?.name === this.cluster.name) return undefined;
    return `was started ${ref ? `in cluster ${String(ref.name)}` : 'in no cluster'}`;
  }
  withUid(uid: string | undefined): Placement {
    return new InCluster(this.base, { name: this.cluster.name, uid, ...(this.queue ? { queue: this.queue } : {}) });
  }
  withQueue(queue: string | undefined): Placement {
    return new InCluster(this.base, { ...this.cluster, ...(queue ? { queue } : {}) });
  }
  /** On its own queue (`<base>/cluster/<name>`): that base; on any other (a pool's): that queue, for what it starts too. */
  protected runningOn(queue: string): Placement {
    const suffix = clusterTaskQueue('', this.cluster.name);
    if (queue.endsWith(suffix)) return new InCluster(queue.slice(0, -suffix.length), this.cluster);
    return new InCluster(queue, { ...this.cluster, queue });
  }
}

/** A workflow ID in a cluster when one is named (`migrate/secrets` -> `migrate/prod-1/secrets`), else as given. */
export function placedId(unplaced: string, cluster: string | undefined): string {
  return Placement.of('', cluster).id(unplaced);
}
