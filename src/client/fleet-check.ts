/**
 * What `svm fleet migrate` checks before it starts a campaign, and what `--dry-run` prints: the clusters the
 * campaign would take, in the order the campaign takes them (those named, in order, then those `--where` matched,
 * sorted by name; the canary first), against the clusters registered in the namespace. Pure: the registrations are
 * read by the caller (Fleet.clusters).
 */
import type { CampaignInput, RegisteredCluster } from './fleet';

/** One cluster of a campaign as planned: its registration (none for a name not registered) and its wave. */
export interface PlannedCluster {
  name: string;
  /** 0: the canary (the named one, or the first of all to answer); 1..: the waves after it. */
  wave: number;
  registration?: RegisteredCluster;
}

/** The clusters a campaign would take, or throws why it must not start (nothing is started then). */
export function planCampaign(
  input: Pick<CampaignInput, 'clusters' | 'canary' | 'parallel'> & { where?: string },
  registered: readonly RegisteredCluster[],
  matched: readonly RegisteredCluster[] | undefined,
  opts: { includeUnregistered?: boolean } = {},
): PlannedCluster[] {
  const byName = new Map(registered.map((c) => [c.name, c]));
  const unknown = (input.clusters ?? []).filter((n) => !byName.has(n));
  if (unknown.length > 0 && !opts.includeUnregistered) throw new Error(unregisteredMessage(unknown, registered));
  // Each once, in the campaign's order (a Set keeps insertion order): linear at a fleet's ten thousand names.
  const names = [...new Set([...(input.clusters ?? []), ...(matched ?? []).map((c) => c.name).sort(compare)])];
  if (names.length === 0)
    throw new Error(
      `--where "${input.where}" matched none of the ${registered.length} registered clusters: nothing to migrate (svm fleet clusters --where lists what a query matches)`,
    );
  if (input.canary !== undefined && !names.includes(input.canary))
    throw new Error(`--canary ${input.canary} is not one of the campaign's ${names.length} clusters (${sample(names)})`);
  const order = input.canary === undefined ? names : [input.canary, ...names.filter((n) => n !== input.canary)];
  const parallel = input.parallel ?? 2;
  return order.map((name, i) => {
    const registration = byName.get(name); // every matched cluster is a registered one
    return { name, wave: i === 0 ? 0 : Math.ceil(i / parallel), ...(registration ? { registration } : {}) };
  });
}

/** Why named clusters are refused: each with the registered names it may have meant. */
export function unregisteredMessage(unknown: readonly string[], registered: readonly RegisteredCluster[]): string {
  const names = registered.map((c) => c.name);
  const each = unknown.map((n) => {
    const near = nearNames(n, names);
    return `"${n}"${near.length > 0 ? ` (did you mean ${near.map((m) => `"${m}"`).join(' or ')}?)` : ''}`;
  });
  return (
    `${unknown.length === 1 ? 'a cluster named is' : 'clusters named are'} not registered in this Temporal namespace (no worker of it has reported): ${each.join(', ')}; ` +
    `${registered.length} registered${registered.length > 0 ? `: ${sample(names)}` : ''} (svm fleet clusters). ` +
    'No campaign was started. Start its worker first (SVM_CLUSTER), or pass --include-unregistered to start anyway ' +
    '(such a cluster is reported Unreachable until its worker answers)'
  );
}

/** The registered names within two edits of `name`, or sharing its prefix, closest first (at most 3). */
export function nearNames(name: string, names: readonly string[]): string[] {
  return names
    .map((n) => {
      const prefix = n.startsWith(name) || name.startsWith(n);
      return { n, prefix, d: prefix ? Math.abs(n.length - name.length) : editDistance(name, n) };
    })
    .filter((x) => x.prefix || x.d <= 2)
    .sort((a, b) => a.d - b.d || compare(a.n, b.n))
    .slice(0, 3)
    .map((x) => x.n);
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** At most ten names, then how many more. */
const sample = (names: readonly string[]) =>
  names.length <= 10 ? names.join(', ') : `${names.slice(0, 10).join(', ')} and ${names.length - 10} more`;
