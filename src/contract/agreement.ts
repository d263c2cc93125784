/**
 * What the agreement activity answers the migration workflow: whether every
 * API server encodes the resource alike, and the token that changes when that
 * answer might have. Computed in src/kube/agreement.ts.
 */
export interface ServerView {
  id: string;
  /** What this server encodes the resource as (encodingVersion or discovery hash); undefined: it does not serve the resource, or did not answer. */
  value?: string;
  /** Why it did not answer (set only when it did not). */
  error?: string;
}

export interface Agreement {
  agreed: boolean;
  /** The agreed encoding version (e.g. resource.k8s.io/v1, or a CRD's v2); undefined without agreement. */
  encodingVersion?: string;
  /** The agreed storageVersionHash, where discovery was asked. */
  hash?: string;
  /** Changes whenever the answer might have changed. */
  token: string;
  source: 'StorageVersion' | 'discovery';
  /**
   * True when the answer covers every API server that exists (each one's
   * StorageVersion entry, or each one's own discovery at its own address).
   * False when svm could only check through its own (load-balanced) address.
   */
  verified: boolean;
  /** Exactly what was checked, as a sentence for people (success messages are built from it). */
  checked: string;
  /** Which servers disagree, or why there is no agreement. */
  reason?: string;
  /**
   * Set when the resource is not served at the version asked (it is gone from discovery through the
   * worker's own address): the migration then resolves the resource again rather than wait on a version that is gone.
   */
  notServed?: boolean;
  servers: ServerView[];
  /**
   * When the activity read it (ms since the epoch, the worker's clock). The
   * workflow's time-based decisions use this reading, recorded in history
   * with the result, rather than the workflow task's time: a replay then
   * decides exactly as the run did whatever the workflow clock says on
   * replay (a retried workflow task's time is not guaranteed to replay as
   * the run saw it). Absent in histories from before it existed.
   */
  at?: number;
}
