/**
 * `svm prune`: a CRD's status.storedVersions pruned to its storage version by the operator's identity, on the
 * checked record of a whole pass (SVM_PRUNE=operator: the worker's token then holds no right on CRD status, and the
 * worker leaves storedVersions as they are). storedVersions is the API server's own guard against removing a
 * version objects may still be stored in: pruned, the owner's next apply without that version is admitted.
 *
 * A CRD is pruned only when the record of its migration in Temporal counts (src/kube/migration-record.ts: a
 * migration of that resource, on the workers' task queue, in this cluster, with a migration's result) and says what
 * the drop check's migration verdict needs to be Ready (judgeRecord): Succeeded, a pass record verified on every API
 * server, under an agreement that still holds now (no API server restarted or added since, the CRD's storage
 * version and generation unchanged), to the version the CRD stores now. Anything else is refused, saying why; the
 * write itself is the built-in's protocol (pruneStoredVersions: on exactly the CRD read, under the generation
 * checked).
 */
import { crdName, CustomResourceDefinition, groupResourceOfCrd, storageVersionOf } from '../api/custom-resource-definition';
import { migrationWorkflowId } from '../api/resource';
import type { Agreement } from '../contract/agreement';
import { placedId } from '../contract/placement';
import type { KubeClient } from './client';
import { CRDS_PATH, pruneStoredVersions } from './crds';
import type { DropCheckOptions } from './drop-shared';
import { judgeRecord, lookUpRecord, type RecordLookup } from './drop-storage';
import { parseBodyAs } from './typed';

/** What `svm prune` did with one CRD. */
export interface PruneOutcome {
  crd: string;
  /** pruned; refused (the reason says why); nothing (storedVersions names only the storage version already). */
  action: 'pruned' | 'refused' | 'nothing';
  storedVersions: string[];
  /** After a prune. */
  now?: string[];
  reason: string;
}

export type PruneDecision = { prune: true; to: string; reason: string } | { prune: false; nothing: boolean; reason: string };

/**
 * The decision for one CRD, pure: prune to its storage version only on a record that counts and holds now.
 * now: the agreement on the resource read now (undefined: none could be read).
 */
export function pruneDecision(crd: CustomResourceDefinition, lookup: RecordLookup, now: Agreement | undefined): PruneDecision {
  const name = crd.metadata.name;
  const storage = storageVersionOf(crd);
  const stored = crd.status?.storedVersions ?? [];
  if (!storage) return { prune: false, nothing: false, reason: `${name} has no storage version` };
  if (stored.length === 1 && stored[0] === storage)
    return { prune: false, nothing: true, reason: `status.storedVersions is [${storage}] already` };
  if (!stored.includes(storage))
    return {
      prune: false,
      nothing: false,
      reason: `status.storedVersions [${stored.join(', ')}] does not name the storage version ${storage}: not svm's to change`,
    };
  const judged = judgeRecord(lookup, now, name);
  if (judged.verdict !== 'Ready') return { prune: false, nothing: false, reason: judged.reason };
  // Ready implies a found, counted, Succeeded record with a pass record (judgeRecord).
  const record = 'found' in lookup ? lookup.found.record : undefined;
  if (record?.encodingVersion !== storage)
    return {
      prune: false,
      nothing: false,
      reason: `its last whole pass was to ${record?.encodingVersion ?? '?'}, but the CRD stores ${storage} now (svm migrate ${name})`,
    };
  return { prune: true, to: storage, reason: judged.reason };
}

export interface PruneOptions {
  /** The checked records (migrationRecords over the operator's placement): required, a prune rests on them. */
  migrationOf: NonNullable<DropCheckOptions['migrationOf']>;
  /** The cluster whose workflows migrationOf reads, when one Temporal namespace serves several (for the IDs named). */
  cluster?: string;
  /** The agreement on the CRD's resource now (src/kube/server-agreements.ts readAgreement over the API servers). */
  agreementOf: (crd: CustomResourceDefinition) => Promise<Agreement | undefined>;
}

/** The CRDs named (or every one whose storedVersions names more than its storage version), each decided, pruned where it may. */
export async function pruneCrds(kube: KubeClient, names: string[] | 'all', opts: PruneOptions): Promise<PruneOutcome[]> {
  const listed = await kube.getJson<{ items: unknown[] }>(CRDS_PATH);
  const crds = new Map(
    listed.items
      .map((o) => parseBodyAs(CustomResourceDefinition, JSON.stringify(o), { kind: 'CustomResourceDefinition', name: '?' }))
      .map((c) => [c.metadata.name, c] as const),
  );
  const chosen =
    names === 'all' ? [...crds.values()].filter((c) => !pruneDecisionNothing(c)).map((c) => c.metadata.name) : [...new Set(names)];
  const out: PruneOutcome[] = [];
  for (const name of chosen.sort()) {
    const crd = crds.get(name);
    if (!crd) {
      out.push({ crd: name, action: 'refused', storedVersions: [], reason: `no CustomResourceDefinition ${name}` });
      continue;
    }
    out.push(await pruneOne(kube, crd, opts));
  }
  return out;
}

/** Whether a CRD has nothing to prune: storedVersions is exactly its storage version. */
function pruneDecisionNothing(crd: CustomResourceDefinition): boolean {
  const stored = crd.status?.storedVersions ?? [];
  return stored.length === 1 && stored[0] === storageVersionOf(crd);
}

async function pruneOne(kube: KubeClient, crd: CustomResourceDefinition, opts: PruneOptions): Promise<PruneOutcome> {
  const name = crd.metadata.name;
  const storedVersions = crd.status?.storedVersions ?? [];
  const gr = groupResourceOfCrd(name) ?? { group: crd.spec.group, resource: crd.spec.names.plural };
  const lookup = await lookUpRecord(gr, placedId(migrationWorkflowId(gr), opts.cluster), opts.migrationOf);
  const decision = pruneDecision(crd, lookup, await opts.agreementOf(crd));
  if (!decision.prune) return { crd: name, action: decision.nothing ? 'nothing' : 'refused', storedVersions, reason: decision.reason };
  const generation = crd.metadata.generation;
  if (generation === undefined) return { crd: name, action: 'refused', storedVersions, reason: `${crdName(gr)} has no generation` };
  const done = await pruneStoredVersions(kube, gr, { generation, storageVersion: decision.to }, 'svm prune');
  return done.pruned
    ? { crd: name, action: 'pruned', storedVersions, now: done.storedVersions, reason: decision.reason }
    : { crd: name, action: 'refused', storedVersions, reason: `not pruned: ${done.why}` };
}

/** The exit code of `svm prune`: 0 every CRD pruned or nothing to prune, 1 one refused (2: an error, set by the CLI). */
export function pruneExitCode(outcomes: PruneOutcome[]): number {
  return outcomes.some((o) => o.action === 'refused') ? 1 : 0;
}
