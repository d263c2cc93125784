/**
 * `svm fleet` with trust domains (docs/fleet.md "Trust domains"): the file the fleet's worker reads
 * (SVM_FLEET_DOMAINS), given to the command by `--domains FILE` or the same variable, and what `svm fleet migrate`
 * checks of the clusters it names against it before anything starts. Without a file: one namespace, as before.
 */
import { Option } from 'commander';
import { FLEET_DOMAINS_ENV, type Domain } from '../config/fleet-domains';
import type { RegisteredCluster } from './fleet';

/** `--domains FILE`: the trust domains file (the fleet worker's SVM_FLEET_DOMAINS). */
export const domainsOption = () =>
  new Option(
    '--domains <file>',
    `the fleet's trust domains (a JSON file, the fleet worker's ${FLEET_DOMAINS_ENV}): each cluster is read and acted on in its domain's namespace (default: $${FLEET_DOMAINS_ENV}; neither: one namespace)`,
  );

/** The domains file a command reads: the flag's, else the variable's; undefined: one namespace. */
export function domainsFileOf(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): { file: string; source: string } | undefined {
  if (flag) return { file: flag, source: '--domains' };
  const file = env[FLEET_DOMAINS_ENV];
  return file ? { file, source: FLEET_DOMAINS_ENV } : undefined;
}

/** What the check needs of the domains: the domain a name is bound to, every domain, where the file was given. */
export interface DomainsView {
  domainOf(cluster: string): Domain | undefined;
  readonly all: Domain[];
  readonly source: string;
}

/**
 * The clusters a campaign names, checked against the domains before it starts: a name bound to no domain is refused
 * (the campaign would fail its row at once, nothing started for it); a name bound to a domain whose namespace holds
 * no registration of it is refused unless `includeUnregistered` (its row is Unreachable until its worker answers),
 * each with its domain and namespace. `registered`: every domain's registrations (Fleet.clusters with domains).
 */
export function checkNamedInDomains(
  names: readonly string[],
  domains: DomainsView,
  registered: readonly RegisteredCluster[],
  opts: { includeUnregistered?: boolean } = {},
): void {
  const unbound = names.filter((n) => !domains.domainOf(n));
  if (unbound.length > 0)
    throw new Error(
      `${unbound.length === 1 ? 'a cluster named is' : 'clusters named are'} in no trust domain of ${domains.source}: ${unbound.map((n) => `"${n}"`).join(', ')} ` +
        `(domains: ${domains.all.map((d) => `${d.name} [${d.clusters.length} clusters]`).join(', ')}). No campaign was started. ` +
        `Bind it to its domain in the file (the fleet worker's ${FLEET_DOMAINS_ENV} too), or leave it out`,
    );
  if (opts.includeUnregistered) return;
  const found = new Set(registered.map((c) => `${c.domain ?? ''}/${c.name}`));
  const missing = names.filter((n) => !found.has(`${domains.domainOf(n)!.name}/${n}`));
  if (missing.length > 0)
    throw new Error(
      `${missing.length === 1 ? 'a cluster named is' : 'clusters named are'} not registered in its domain: ` +
        missing
          .map((n) => {
            const d = domains.domainOf(n)!;
            return `"${n}" (domain ${d.name}, namespace ${d.namespace})`;
          })
          .join(', ') +
        '. No campaign was started. Start its worker in its domain first (TEMPORAL_NAMESPACE, SVM_CLUSTER), or pass --include-unregistered ' +
        'to start anyway (such a cluster is reported Unreachable until its worker answers)',
    );
}
