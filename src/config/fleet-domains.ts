/**
 * Trust domains (docs/fleet.md "Trust domains", docs/security.md): a fleet whose clusters live in Temporal
 * namespaces of their own. A domain is one namespace: a single cluster's worker, or a pool with all its clusters.
 * A cluster's migrations, its registration and its campaign step run there, started by its own worker; campaigns
 * run in the fleet's namespace, whose worker alone holds a client per domain and reaches a domain only through the
 * fleet's activities (src/activities/fleet-domain.ts).
 *
 * The fleet's worker reads its domains from a JSON file named by SVM_FLEET_DOMAINS:
 *
 *   {
 *     "domains": [
 *       { "name": "team-a", "namespace": "svm-team-a", "clusters": ["a1", "a2"],
 *         "apiKeyFile": "/var/run/svm/team-a.jwt" },
 *       { "name": "team-b", "namespace": "svm-team-b", "clusters": ["b1"],
 *         "address": "temporal-b:7233", "tlsCert": "...", "tlsKey": "...", "tlsCa": "...", "taskQueue": "svm" }
 *     ]
 *   }
 *
 * Each domain names its namespace and the clusters bound to it (a cluster is in one domain at most); its address,
 * TLS files and task queue default to the fleet worker's own; its credential is an API key read from apiKeyFile
 * (read at each connection, so a rotated file is picked up), or a client certificate (tlsCert, tlsKey), or the fleet
 * worker's own when it names none. Without SVM_FLEET_DOMAINS the fleet is one namespace, as before: every cluster's
 * workflows run in the fleet's namespace and nothing here is used.
 *
 * The file is checked when the worker starts (and by `svm fleet`, which reads the same file: --domains, or
 * SVM_FLEET_DOMAINS): a malformed one, a cluster in two domains, a domain without a namespace are refused with the
 * reason, before anything starts.
 */
import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { z } from 'zod';
import { ClusterNameSchema } from '../api/cluster';
import { temporalConnectionOptions, type TemporalSettings } from './temporal';

export const FLEET_DOMAINS_ENV = 'SVM_FLEET_DOMAINS';

const DomainSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a domain name is a DNS label'),
    namespace: z.string().min(1).max(1000),
    clusters: z.array(ClusterNameSchema).min(1).max(10_000),
    address: z
      .string()
      .regex(/^[^\s:]+:\d+$/, 'must be host:port')
      .optional(),
    /** The base task queue of the domain's workers (TEMPORAL_TASK_QUEUE there); default: the fleet worker's. */
    taskQueue: z.string().min(1).max(1000).optional(),
    apiKeyFile: z.string().min(1).optional(),
    tlsCert: z.string().min(1).optional(),
    tlsKey: z.string().min(1).optional(),
    tlsCa: z.string().min(1).optional(),
    tlsServerName: z.string().min(1).optional(),
  })
  .strict();
export type DomainConfig = z.infer<typeof DomainSchema>;

export const FleetDomainsSchema = z.object({ domains: z.array(DomainSchema).min(1).max(1000) }).strict();

/** One domain as the fleet sees it: its name, namespace, base task queue and the clusters bound to it. */
export interface Domain {
  name: string;
  namespace: string;
  taskQueue: string;
  clusters: readonly string[];
}

/** The fleet's domains, and a client per domain, connected when first asked. */
export class FleetDomains {
  private readonly byCluster = new Map<string, Domain>();
  private readonly byName = new Map<string, { domain: Domain; config: DomainConfig }>();
  private readonly clients = new Map<string, Promise<Client>>();

  private constructor(
    configs: DomainConfig[],
    private readonly fleet: TemporalSettings,
    /** Where the file was given (SVM_FLEET_DOMAINS, --domains): named in refusals. */
    readonly source: string,
  ) {
    for (const c of configs) {
      if (this.byName.has(c.name)) throw new Error(`${source}: domain "${c.name}" is named twice`);
      const domain: Domain = { name: c.name, namespace: c.namespace, taskQueue: c.taskQueue ?? fleet.taskQueue, clusters: c.clusters };
      if (c.namespace === fleet.namespace)
        throw new Error(`${source}: domain "${c.name}" is the fleet's own namespace (${c.namespace}): a domain is a namespace of its own`);
      for (const other of this.byName.values())
        if (other.domain.namespace === c.namespace)
          throw new Error(`${source}: domains "${other.domain.name}" and "${c.name}" are one namespace (${c.namespace})`);
      if (Boolean(c.tlsCert) !== Boolean(c.tlsKey)) throw new Error(`${source}: domain "${c.name}": tlsCert and tlsKey go together`);
      for (const name of c.clusters) {
        const already = this.byCluster.get(name);
        if (already) throw new Error(`${source}: cluster "${name}" is in two domains (${already.name} and ${c.name})`);
        this.byCluster.set(name, domain);
      }
      this.byName.set(c.name, { domain, config: c });
    }
  }

  /** The domains of a parsed configuration (checked: each cluster in one domain, each domain a namespace of its own). */
  static of(config: unknown, fleet: TemporalSettings, source: string = FLEET_DOMAINS_ENV): FleetDomains {
    const parsed = FleetDomainsSchema.safeParse(config);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(`${source}: ${issue ? `${issue.path.join('.') || 'the file'}: ${issue.message}` : 'not a domains file'}`);
    }
    return new FleetDomains(parsed.data.domains, fleet, source);
  }

  /** The domains named by SVM_FLEET_DOMAINS (a JSON file), or undefined when it is unset: one namespace for the whole fleet. */
  static fromEnv(env: NodeJS.ProcessEnv, fleet: TemporalSettings): FleetDomains | undefined {
    const file = env[FLEET_DOMAINS_ENV];
    return file ? FleetDomains.load(file, fleet) : undefined;
  }

  /**
   * The domains of a JSON file: the one loader of the fleet's worker (SVM_FLEET_DOMAINS) and of `svm fleet`
   * (--domains, or the same variable). `source` names where the file was given, in every refusal.
   */
  static load(file: string, fleet: TemporalSettings, source: string = FLEET_DOMAINS_ENV): FleetDomains {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`${source}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new Error(`${source}: ${file} is not JSON: ${(err as Error).message}`);
    }
    return FleetDomains.of(json, fleet, source);
  }

  /** The domain a cluster is bound to, or undefined. */
  domainOf(cluster: string): Domain | undefined {
    return this.byCluster.get(cluster);
  }

  /** Every domain. */
  get all(): Domain[] {
    return [...this.byName.values()].map((d) => d.domain);
  }

  /** The domain of this name; an error when the configuration has none (a member started under another configuration). */
  domain(name: string): Domain {
    const d = this.byName.get(name);
    if (!d) throw new Error(`no domain "${name}" in the fleet's configuration (${FLEET_DOMAINS_ENV})`);
    return d.domain;
  }

  /** The fleet's client of a domain: its namespace, with its credential (connected once, on first use). */
  client(name: string): Promise<Client> {
    const d = this.byName.get(name);
    if (!d) return Promise.reject(new Error(`no domain "${name}" in the fleet's configuration (${FLEET_DOMAINS_ENV})`));
    let c = this.clients.get(name);
    if (!c) {
      c = this.connect(d.config);
      this.clients.set(name, c);
      // A failed connection is tried again on the next ask.
      c.catch(() => this.clients.delete(name));
    }
    return c;
  }

  private async connect(c: DomainConfig): Promise<Client> {
    const f = this.fleet;
    const address = c.address ?? f.address;
    if (!address) throw new Error(`domain "${c.name}" names no address, and the fleet's worker has none (TEMPORAL_ADDRESS)`);
    const apiKey = c.apiKeyFile ? readFileSync(c.apiKeyFile, 'utf8').trim() : c.tlsCert ? undefined : f.apiKey;
    const settings: Partial<TemporalSettings> & { address: string } = {
      address,
      namespace: c.namespace,
      ...(apiKey ? { apiKey } : {}),
      ...(f.tls !== undefined ? { tls: f.tls } : {}),
      ...(c.tlsCert ? { tlsCert: c.tlsCert, tlsKey: c.tlsKey } : f.tlsCert ? { tlsCert: f.tlsCert, tlsKey: f.tlsKey } : {}),
      ...(c.tlsCa ? { tlsCa: c.tlsCa } : f.tlsCa ? { tlsCa: f.tlsCa } : {}),
      ...(c.tlsServerName ? { tlsServerName: c.tlsServerName } : f.tlsServerName ? { tlsServerName: f.tlsServerName } : {}),
    };
    const connection = await Connection.connect(temporalConnectionOptions(settings));
    return new Client({ connection, namespace: c.namespace });
  }

  /** Closes every domain's connection. */
  async close(): Promise<void> {
    const all = [...this.clients.values()];
    this.clients.clear();
    for (const c of all) await c.then((x) => x.connection.close()).catch(() => undefined);
  }
}
