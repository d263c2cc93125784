/**
 * Turns what a person types (`secrets`, `cm`, `deployments.apps`,
 * `widgets.v2.example.com`, `Secret`) into a migratable ResourceRef, or
 * refuses it with a message that says what is wrong. Nothing is written
 * before this succeeds.
 */
import { resourceNameRefusal, type ResourceRef } from '../api/resource';
import { storageVersionHashOf } from './agreement';
import type { DiscoveredResource, KubeClient } from './client';

export class InvalidResourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidResourceError';
  }
}

const label = (r: { name: string; group: string }) => (r.group ? `${r.name}.${r.group}` : r.name);

/** Whether this served version is the one the API server stores the resource in (its storageVersionHash is this version's). */
export function isStorageVersion(r: DiscoveredResource): boolean {
  return !!r.storageVersionHash && r.storageVersionHash === storageVersionHashOf(r.group, r.version, r.kind);
}

/**
 * The version to list and rewrite a resource through, among the served versions of one resource of one group: the
 * version it is stored in, when that is served (discovery's storageVersionHash names it), else the group's preferred
 * version, else the first. A no-op update sent in the storage version costs the API server no conversion between
 * the version asked for and the version stored: 0.9 CPU ms per object less on this project's bench when the two
 * differed (docs/benchmarks.md).
 */
export function throughVersion<T extends DiscoveredResource>(served: T[]): T | undefined {
  return served.find(isStorageVersion) ?? served.find((r) => r.preferred) ?? served[0];
}

/** Why a discovered resource cannot be migrated, or undefined when it can. */
export function notMigratableReason(r: DiscoveredResource): string | undefined {
  if (r.name.includes('/'))
    return `"${r.name}" is a subresource; migrate the resource "${label({ ...r, name: r.name.split('/')[0]! })}" instead`;
  if (!r.storageVersionHash)
    return `${label(r)} is not persisted (discovery gives it no storageVersionHash), so there is nothing to migrate`;
  // The re-encode is a patch; a PUT where the server refuses it (KubeClient.reencode, putAsListed).
  const missing = [
    ...(r.verbs.includes('list') ? [] : ['list']),
    ...(r.verbs.includes('patch') || r.verbs.includes('update') ? [] : ['patch (or update)']),
  ];
  if (missing.length > 0) return `${label(r)} cannot be migrated: it does not support ${missing.join(' and ')}`;
  return undefined;
}

/** Pure matching over discovery; see resolveResource. */
export function matchResource(input: string, discovered: DiscoveredResource[]): DiscoveredResource {
  const text = input.trim();
  const refusal = resourceNameRefusal(text);
  if (refusal) throw new InvalidResourceError(refusal);
  const dot = text.indexOf('.');
  const namePart = (dot < 0 ? text : text.slice(0, dot)).toLowerCase();
  const rest = dot < 0 ? undefined : text.slice(dot + 1).toLowerCase();

  const nameMatches = (r: DiscoveredResource) =>
    r.name === namePart || r.singularName === namePart || r.kind.toLowerCase() === namePart || (r.shortNames ?? []).includes(namePart);
  const groupMatches = (r: DiscoveredResource): boolean => {
    if (rest === undefined) return true;
    if (r.group === rest) return true;
    // resource.version.group, e.g. deployments.v1.apps or widgets.v2.example.com
    return `${r.version}.${r.group}` === rest || (r.group === '' && r.version === rest);
  };
  const candidates = discovered.filter((r) => !r.name.includes('/') && nameMatches(r) && groupMatches(r));
  if (candidates.length === 0) {
    const sub = discovered.find((r) => r.name.includes('/') && r.name.split('/')[1] === namePart);
    const hint = sub ? ` ("${namePart}" is only a subresource, e.g. ${sub.name})` : '';
    throw new InvalidResourceError(`unknown resource "${text}": the API servers serve no such resource${hint}`);
  }
  const explicitVersion =
    rest !== undefined && candidates.some((r) => `${r.version}.${r.group}` === rest || (r.group === '' && r.version === rest));
  const pool = explicitVersion
    ? candidates
    : candidates.filter((r) => r.preferred).length > 0
      ? candidates.filter((r) => r.preferred)
      : candidates;
  const groups = [...new Set(pool.map((r) => r.group))];
  let group: string;
  if (groups.length === 1) group = groups[0]!;
  else if (groups.includes(''))
    group = ''; // e.g. events (or ev, event): core wins, like kubectl
  else {
    const names = [...new Set(pool.map(label))].sort();
    throw new InvalidResourceError(`"${text}" is ambiguous: it matches ${names.join(', ')}; name the group, e.g. ${names[0]}`);
  }
  // The group is chosen among the preferred versions; the version among every one the name matched in it.
  return throughVersion((explicitVersion ? pool : candidates).filter((r) => r.group === group))!;
}

/** Resolves and validates input against the cluster's discovery (only the groups it can name, when it names one). */
export async function resolveResource(kube: KubeClient, input: string, discovered?: DiscoveredResource[]): Promise<ResourceRef> {
  if (discovered) return refOf(kube, matchResource(input, discovered));
  return refOf(kube, await matchDiscovering(kube, groupsNamedBy(input), (d) => matchResource(input, d)));
}

const VERSION = /^v\d+(?:(?:alpha|beta)\d+)?$/;

/**
 * Every group a name as matchResource reads it can resolve in, or [] when it names none (a bare `secrets`, `cm`):
 * `deployments.apps` -> apps; `widgets.v2.example.com` -> v2.example.com (a group of that name) and example.com;
 * `pods.v1` -> v1 and the core group.
 */
export function groupsNamedBy(input: string): string[] {
  const text = input.trim();
  const dot = text.indexOf('.');
  if (dot < 0 || text.includes('/')) return [];
  const rest = text.slice(dot + 1).toLowerCase();
  const next = rest.indexOf('.');
  const first = next < 0 ? rest : rest.slice(0, next);
  if (!VERSION.test(first)) return [rest];
  return next < 0 ? [rest, ''] : [rest, rest.slice(next + 1)];
}

/**
 * match applied to the discovery of just `groups` (KubeClient.discoverGroup: 2-4 requests each, where the whole
 * discovery sends one per served group-version and waits for every aggregated API), or to the whole discovery when
 * groups is empty or the match refuses there: a refusal then says what it says against the whole discovery, hints
 * included. Every resource a match can choose lies in the groups it names, so the choice is the same either way.
 */
export async function matchDiscovering<T>(kube: KubeClient, groups: string[], match: (d: DiscoveredResource[]) => T): Promise<T> {
  if (groups.length > 0) {
    const some = (await Promise.all(groups.map((g) => kube.discoverGroup(g)))).flat();
    try {
      return match(some);
    } catch (err) {
      if (!(err instanceof InvalidResourceError)) throw err;
    }
  }
  return match(await kube.discover());
}

/** The ResourceRef of a discovered resource, refused (InvalidResourceError) when it cannot be migrated. */
export async function refOf(kube: KubeClient, r: DiscoveredResource): Promise<ResourceRef> {
  const reason = notMigratableReason(r);
  if (reason) throw new InvalidResourceError(reason);
  return {
    group: r.group,
    version: r.version,
    resource: r.name,
    kind: r.kind,
    namespaced: r.namespaced,
    storageVersionHash: r.storageVersionHash!,
    custom: await kube.isCustomResource(r.group, r.name),
  };
}
