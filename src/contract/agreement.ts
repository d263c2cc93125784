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

/**
 * Is `now` still the agreement `then` that a pass started under? Both agreed, on the same encoding version, with
 * the same token: the token changes whenever the answer might have (src/kube/agreement.ts), so a server restarted,
 * gone or back, or a StorageVersion object written again, makes another agreement, and the pass is not under it.
 */
export function sameAgreement(then: Agreement, now: Agreement): boolean {
  return then.agreed && now.agreed && now.token === then.token && now.encodingVersion === then.encodingVersion;
}

/** An agreement svm could not verify per API server, and since when it has been read unchanged (its token). */
export interface UnverifiedHold {
  readonly token: string;
  /** When it was first read with this token (ms since the epoch). */
  readonly since: number;
}

/**
 * May a pass start under the agreement `a`? Agreed, and verified per API server, or else read unchanged for
 * `seconds`: one snapshot cannot tell a managed cluster (one address for several servers) from a server starting or
 * stopping (its identity lease there, its endpoint not yet), so an unverified agreement is accepted only once it held.
 * `hold` is what earlier readings remembered; the answer gives what to remember next (only an agreed, unverified
 * reading changes it). Timed by when `a` was read (Agreement.at, recorded in history with it); `now` stands in for
 * readings from before it existed.
 */
export function acceptAgreement(
  a: Agreement,
  hold: UnverifiedHold | undefined,
  seconds: number,
  now: number,
): { accepted: boolean; hold: UnverifiedHold | undefined } {
  if (!a.agreed) return { accepted: false, hold };
  if (a.verified !== false) return { accepted: true, hold };
  const at = a.at ?? now;
  const held = hold?.token === a.token ? hold : { token: a.token, since: at };
  return { accepted: (at - held.since) / 1000 >= seconds, hold: held };
}
