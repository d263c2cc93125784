/**
 * The fleet's activities (docs/fleet.md). On the fleet task queue, with only a Temporal client: which clusters a
 * campaign names (their registrations). On a cluster's task queue, with its API: which resources a campaign's step
 * migrates there. Names, uids and resource references only.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { Placement } from '../contract/placement';
import type { ResourceRef } from '../api/resource';
import { groupResourceString } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { InvalidResourceError, resolveResource } from '../kube/resolve';
import { migratableResources } from '../kube/migratable';
import type { ApiServerSource } from '../kube/apiservers';
import { makePlan } from '../kube/plan';
import { migrationRecords } from '../kube/drop-storage';
import { CLUSTER_REGISTRATION_WORKFLOW_TYPE, clusterRegistrationId, type RegistrationMemo } from '../contract/fleet';
import { pinOf } from '../kube/cluster-identity';
import { INVALID_INPUT, NOT_ENABLED } from '../contract/reasons';
import type { FleetDomains } from './fleet-domains';
import { createFleetDomainActivities } from './fleet-domain';

export interface CampaignCluster {
  name: string;
  /** The uid pinned to it (its registration's); undefined for a cluster not registered (its step reads it). */
  uid?: string;
  /** Its identity's open conflict: the campaign starts nothing there. */
  conflict?: string;
  /** The task queue its registration names (a pool's); undefined: the cluster's own. Placement.of takes it. */
  queue?: string;
  /** With trust domains (src/activities/fleet-domains.ts): the domain it is bound to; its member reaches it there only. */
  domain?: string;
  /** Said in its row: a registration of its name found outside its domain, ignored. */
  note?: string;
}

/** A cluster of the campaign from its registration's memo. */
function campaignCluster(name: string, memo: RegistrationMemo | undefined): CampaignCluster {
  return {
    name,
    ...(memo?.uid ? { uid: memo.uid } : {}),
    ...(memo?.conflict ? { conflict: memo.conflict.message } : {}),
    ...(memo?.queue ? { queue: memo.queue } : {}),
  };
}

const REGISTRATION_PREFIX = clusterRegistrationId('');

/** The visibility query of the running registrations that match `where`. */
const registrationsWhere = (where: string) =>
  `WorkflowType = '${CLUSTER_REGISTRATION_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' AND (${where})`;

/** A clusters' query Temporal refused: the campaign fails (InvalidInput), saying so. */
function queryRefused(err: unknown): ApplicationFailure {
  return ApplicationFailure.create({
    type: INVALID_INPUT,
    message: `the clusters' query was refused: ${err instanceof Error ? err.message : String(err)}`,
    nonRetryable: true,
  });
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The clusters whose registration matches `where`, with what their memo says, sorted by name. */
async function clustersWhere(c: Client, where: string): Promise<CampaignCluster[]> {
  const found: CampaignCluster[] = [];
  try {
    for await (const w of c.workflow.list({ query: registrationsWhere(where) })) {
      if (!w.workflowId.startsWith(REGISTRATION_PREFIX)) continue;
      const name = w.workflowId.slice(REGISTRATION_PREFIX.length);
      found.push(campaignCluster(name, w.memo as RegistrationMemo | undefined));
    }
  } catch (err) {
    throw queryRefused(err);
  }
  return found.sort((a, b) => byName(a.name, b.name));
}

/** With trust domains: the registrations matching `where` in each domain's namespace, each name bound to that domain. */
async function namesInDomains(d: FleetDomains, where: string): Promise<string[]> {
  const found: string[] = [];
  for (const domain of d.all) {
    const c = await d.client(domain.name);
    for await (const w of c.workflow.list({ query: registrationsWhere(where), pageSize: 1000 })) {
      if (!w.workflowId.startsWith(REGISTRATION_PREFIX)) continue;
      const name = w.workflowId.slice(REGISTRATION_PREFIX.length);
      // A registration counts in its own domain only: a name bound to another (or to none) is ignored here.
      if (d.domainOf(name)?.name === domain.name) found.push(name);
    }
  }
  return found;
}

/** The names of the clusters whose registration matches `where` (in every domain's namespace, with trust domains), sorted. */
async function namesWhere(c: Client, domains: FleetDomains | undefined, where: string): Promise<string[]> {
  const found: string[] = [];
  try {
    if (domains) found.push(...(await namesInDomains(domains, where)));
    else
      for await (const w of c.workflow.list({ query: registrationsWhere(where), pageSize: 1000 })) {
        if (w.workflowId.startsWith(REGISTRATION_PREFIX)) found.push(w.workflowId.slice(REGISTRATION_PREFIX.length));
      }
  } catch (err) {
    throw queryRefused(err);
  }
  return found.sort(byName);
}

export function createFleetActivities(deps: { temporal?: { client: Client }; domains?: FleetDomains }) {
  const client = () => {
    if (!deps.temporal)
      throw ApplicationFailure.create({ type: NOT_ENABLED, message: 'this worker has no Temporal client', nonRetryable: true });
    return deps.temporal.client;
  };
  const toDomains = createFleetDomainActivities({ ...(deps.domains ? { domains: deps.domains } : {}), fleetClient: client });
  return {
    ...toDomains,
    /**
     * The campaign's clusters: those named (in order), then those whose registration matches `where` (sorted by
     * name), each once, with the uid registered. A query Temporal refuses fails the campaign (InvalidInput).
     */
    async resolveCampaignClusters(input: { clusters?: string[]; where?: string }): Promise<CampaignCluster[]> {
      const c = client();
      const out = new Map<string, CampaignCluster>();
      for (const name of input.clusters ?? []) out.set(name, campaignCluster(name, (await pinOf(c, name))?.memo));
      if (input.where) for (const f of await clustersWhere(c, input.where)) if (!out.has(f.name)) out.set(f.name, f);
      return [...out.values()];
    },

    /**
     * A windowed campaign's clusters, by name only: those named (in order), then those whose registration matches
     * `where` (sorted by name), each once. No registration is described here (each member reads its own pin when it
     * starts: campaignClusterPin), so ten thousand clusters are one paged visibility list, not ten thousand describes.
     * A query Temporal refuses fails the campaign (InvalidInput).
     */
    async resolveCampaignNames(input: { clusters?: string[]; where?: string }): Promise<string[]> {
      const c = client();
      const names = new Set(input.clusters ?? []);
      if (input.where) for (const f of await namesWhere(c, deps.domains, input.where)) names.add(f);
      return [...names];
    },

    /** One cluster's pin, for its campaign member: the uid registered, and its open conflict (none for an unregistered name). */
    async campaignClusterPin(name: string): Promise<CampaignCluster> {
      // With trust domains: its registration in its own domain (the member then reaches it there only).
      if (deps.domains) return toDomains.domainClusterPin(name);
      return campaignCluster(name, (await pinOf(client(), name))?.memo);
    },
  };
}

/**
 * On a cluster's worker: the resources a campaign's step migrates, resolved; those refused, with the reason. "plan":
 * what `svm plan` lists there now (each StorageState believed only on the migration's record in Temporal); those
 * it finds blocked (API servers that disagree, a resource not served) are refused with why.
 */
export function createCampaignStepActivities(deps: {
  kube: KubeClient;
  apiservers: ApiServerSource;
  temporal?: { client: Client; placement: Placement };
  /** A named cluster's pinned uid (its API's, checked before any activity); none for a single cluster. */
  pinnedUid?: () => Promise<string>;
}) {
  const { kube } = deps;
  return {
    async campaignResources(
      migrate: 'all' | 'plan' | string[],
    ): Promise<{ resources: ResourceRef[]; refused: Array<{ resource: string; reason: string }> }> {
      const discovered = await kube.discover();
      const refused: Array<{ resource: string; reason: string }> = [];
      let names: string[];
      if (migrate === 'plan') {
        const plan = await makePlan(kube, {
          qps: 0,
          apiservers: deps.apiservers,
          ...(deps.temporal
            ? {
                migrationOf: migrationRecords(deps.temporal.client, deps.temporal.placement.withUid(await deps.pinnedUid?.())),
                cluster: deps.temporal.placement.name,
              }
            : {}),
        });
        for (const i of plan.items)
          if (i.action === 'blocked') refused.push({ resource: i.resource, reason: `blocked: ${i.blockedBy ?? 'see svm plan'}` });
        names = plan.items.filter((i) => i.action === 'migrate').map((i) => i.resource);
      } else
        names =
          migrate === 'all'
            ? migratableResources(discovered).map((r) => groupResourceString({ group: r.group, resource: r.name }))
            : migrate;
      const resources: ResourceRef[] = [];
      for (const n of names) {
        try {
          resources.push(await resolveResource(kube, n, discovered));
        } catch (err) {
          if (!(err instanceof InvalidResourceError)) throw err;
          refused.push({ resource: n, reason: err.message });
        }
      }
      return { resources, refused };
    },
  };
}
