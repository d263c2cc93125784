/**
 * The fleet's activities toward a trust domain (src/activities/fleet-domains.ts, docs/fleet.md "Trust domains"): on the fleet's
 * task queue, in the fleet's namespace, each with the client of the domain the cluster is bound to. A campaign's
 * member reaches its cluster only through these (a child workflow cannot cross namespaces):
 *
 *   domainClusterPin   the cluster's registration, read in its domain (its uid pinned there); a registration of the
 *                      same name in any other namespace the fleet reaches is ignored, and the pin says so;
 *   startDomainStep    starts the cluster's campaign step in its domain, or joins the one running there;
 *   awaitDomainStep    waits for the step's end (heartbeating; at most waitMs a call, so each call is bounded);
 *   judgeDomainStep    the cluster's row, from the domain's own records: each migration the step ran is read at its
 *                      ID in the domain's namespace and counts only when checkRecord admits it (the workflow type,
 *                      the cluster's task queue, its input, its result's schema, the pass record's uid and
 *                      resource), never on the step's word;
 *   cancelDomainStep   the campaign was aborted: the step is cancelled (its migrations end Aborted).
 *
 * Names, uids, counts and reasons only: no object data.
 */
import { ApplicationFailure, type Client, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { groupResourceString, type GroupResource } from '../api/resource';
import { CAMPAIGN_STEP_WORKFLOW_TYPE, type CampaignStepInput, type CampaignStepResult } from '../contract/fleet';
import { objectsHandled } from '../contract/definitions';
import { Placement } from '../contract/placement';
import { INVALID_INPUT } from '../contract/reasons';
import { pinOf } from '../kube/cluster-identity';
import { checkRecord, expectationOf, readMigrationRun } from '../kube/migration-record';
import type { FleetDomains } from './fleet-domains';
import type { CampaignCluster } from './fleet';

/** A cluster's place in its domain, as a member carries it: where its step and migrations run. */
export interface DomainCluster {
  domain: string;
  name: string;
  uid?: string;
  /** The task queue its registration names (a pool's); absent: the cluster's own. */
  queue?: string;
}

/** What awaitDomainStep found: the step ended (how), or it still runs. */
export type DomainStepState =
  | { ended: false; started: boolean }
  | { ended: true; status: 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timedOut' | 'gone'; message?: string };

/** The row parts a judged step gives (CampaignRow's resources, objects, failures, drop). */
export interface DomainVerdict {
  clusterUid?: string;
  resources: { asked: number; succeeded: number };
  objects: number;
  failures: Array<{ resource: string; reason: string }>;
  drop?: { groupVersion: string; verdict: string; exitCode: number };
  /** The records refused by the check, counted among failures (a sentence each). */
  refused: number;
}

const stepId = (c: DomainCluster, campaign: string) => placementOf(c, '').id(`svm-campaign/${campaign}`);

function placementOf(c: DomainCluster, base: string): Placement {
  return Placement.of(base, { name: c.name, ...(c.uid ? { uid: c.uid } : {}), ...(c.queue ? { queue: c.queue } : {}) });
}

/** `widgets.example.com` -> {group: example.com, resource: widgets}; `secrets` -> the core group. */
function parseGroupResource(name: string): GroupResource {
  const dot = name.indexOf('.');
  return dot < 0 ? { group: '', resource: name } : { group: name.slice(dot + 1), resource: name.slice(0, dot) };
}

function invalid(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: INVALID_INPUT, message, nonRetryable: true });
}

/** The domains as the activities reach them: each cluster's domain, its client, the placement of its workers. */
class DomainAccess {
  constructor(private readonly deps: { domains?: FleetDomains; fleetClient?: () => Client }) {}

  get domains(): FleetDomains {
    if (!this.deps.domains) throw invalid('this fleet worker has no trust domains configured (SVM_FLEET_DOMAINS)');
    return this.deps.domains;
  }

  get fleetClient(): Client | undefined {
    return this.deps.fleetClient?.();
  }

  client(domain: string): Promise<Client> {
    return this.domains.client(domain);
  }

  /** Where the cluster's workers run in its domain: the domain workers' base queue, the cluster's name, uid and queue. */
  placed(c: DomainCluster): Placement {
    return placementOf(c, this.domains.domain(c.domain).taskQueue);
  }
}

export function createFleetDomainActivities(deps: { domains?: FleetDomains; fleetClient?: () => Client }) {
  const access = new DomainAccess(deps);
  return {
    domainClusterPin: (name: string) => domainClusterPin(access, name),
    startDomainStep: (input: StartStepInput) => startDomainStep(access, input),
    awaitDomainStep: (input: AwaitStepInput) => awaitDomainStep(access, input),
    judgeDomainStep: (input: JudgeStepInput) => judgeDomainStep(access, input),
    cancelDomainStep: (input: { cluster: DomainCluster; campaign: string }) => cancelDomainStep(access, input),
  };
}

/**
 * A cluster's pin in its domain: its registration there (uid, queue, open conflict). Registrations of the same
 * name elsewhere (the fleet's namespace, another domain's) are not read for anything but to say they are ignored.
 */
async function domainClusterPin(access: DomainAccess, name: string): Promise<CampaignCluster & { domain: string; note?: string }> {
  const d = access.domains;
  const domain = d.domainOf(name);
  if (!domain)
    throw invalid(`cluster "${name}" is in no trust domain of the fleet's configuration (SVM_FLEET_DOMAINS): nothing is started for it`);
  const pin = await pinOf(await d.client(domain.name), name);
  const elsewhere = await registrationsElsewhere(access, name, domain.name);
  return {
    name,
    domain: domain.name,
    ...(pin?.uid ? { uid: pin.uid } : {}),
    ...(pin?.conflict ? { conflict: pin.conflict.message } : {}),
    ...(pin?.queue ? { queue: pin.queue } : {}),
    ...(elsewhere.length > 0
      ? {
          note: `a registration of ${name} in ${elsewhere.join(' and ')} is ignored: ${name} is bound to domain ${domain.name} (namespace ${domain.namespace}), whose registration alone counts`,
        }
      : {}),
  };
}

/** The namespaces other than the cluster's own domain that hold a registration of its name (said, never read for more). */
async function registrationsElsewhere(access: DomainAccess, name: string, own: string): Promise<string[]> {
  const elsewhere: string[] = [];
  const fleet = access.fleetClient;
  if (fleet && (await pinOf(fleet, name).catch(() => undefined))) elsewhere.push(`the fleet's namespace (${fleet.options.namespace})`);
  for (const other of access.domains.all) {
    if (other.name === own) continue;
    const found = await access
      .client(other.name)
      .then((c) => pinOf(c, name))
      .catch(() => undefined);
    if (found) elsewhere.push(`domain ${other.name} (namespace ${other.namespace})`);
  }
  return elsewhere;
}

export interface StartStepInput {
  cluster: DomainCluster;
  campaign: string;
  step: Omit<CampaignStepInput, 'cluster'>;
}

/** Starts the cluster's step in its domain (`svm-campaign/<cluster>/<campaign>`), or joins the one running there. */
async function startDomainStep(access: DomainAccess, input: StartStepInput): Promise<{ workflowId: string; runId: string }> {
  const client = await access.client(input.cluster.domain);
  const spec = access.placed(input.cluster).start({
    type: CAMPAIGN_STEP_WORKFLOW_TYPE,
    id: `svm-campaign/${input.campaign}`,
    input: input.step,
    summary: `Campaign ${input.campaign}`,
  });
  const h = await client.workflow.start(CAMPAIGN_STEP_WORKFLOW_TYPE, spec);
  return { workflowId: h.workflowId, runId: h.firstExecutionRunId };
}

export interface AwaitStepInput {
  domain: string;
  workflowId: string;
  runId: string;
  waitMs: number;
}

/**
 * Waits for the step's end, heartbeating, for at most waitMs (the member calls again while it runs: each call,
 * and so each history event, is bounded). `started`: its first workflow task was taken (a worker serves it).
 */
async function awaitDomainStep(access: DomainAccess, input: AwaitStepInput): Promise<DomainStepState> {
  const client = await access.client(input.domain);
  const ctx = Context.current();
  const handle = client.workflow.getHandle(input.workflowId, input.runId);
  const until = Date.now() + Math.max(1000, input.waitMs);
  for (;;) {
    let d: Awaited<ReturnType<typeof handle.describe>>;
    try {
      d = await handle.describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return { ended: true, status: 'gone', message: 'its step is gone from its domain' };
      throw err;
    }
    const ended = await stepEnd(d.status.name, handle);
    if (ended) return ended;
    if (Date.now() >= until) return { ended: false, started: d.historyLength > 2 };
    ctx.heartbeat();
    await ctx.sleep(Math.max(1, Math.min(2000, until - Date.now())));
  }
}

/** How a step whose status is `status` ended, or undefined while it runs. */
async function stepEnd(status: string, handle: { result(): Promise<unknown> }): Promise<DomainStepState | undefined> {
  if (status === 'COMPLETED') return { ended: true, status: 'completed' };
  if (status === 'FAILED') {
    const message = await handle.result().then(
      () => undefined,
      (err: unknown) => (err instanceof WorkflowFailedError ? (err.cause?.message ?? err.message) : String(err)),
    );
    return { ended: true, status: 'failed', ...(message ? { message } : {}) };
  }
  if (status === 'CANCELLED') return { ended: true, status: 'cancelled' };
  if (status === 'TERMINATED') return { ended: true, status: 'terminated' };
  if (status === 'TIMED_OUT') return { ended: true, status: 'timedOut' };
  if (status === 'CONTINUED_AS_NEW') return { ended: true, status: 'gone', message: 'its step continued as new (not svm’s step)' };
  return undefined;
}

export interface JudgeStepInput {
  cluster: DomainCluster;
  campaign: string;
  dropCheck?: string;
  /** The resources the campaign named, when it named them: each must be accounted for (run, or refused by name). */
  named?: string[];
}

/**
 * The cluster's row from its domain's own records. The step's migrateAll says which resources it ran (its rows
 * only name them); each one counts as migrated only when its record at `migrate/<cluster>/<resource>` in the
 * domain's namespace passes checkRecord against the cluster's task queue and pinned uid there. The step's own
 * result counts for nothing but the failures it names (which only make the row worse).
 */
async function judgeDomainStep(access: DomainAccess, input: JudgeStepInput): Promise<DomainVerdict> {
  const client = await access.client(input.cluster.domain);
  const placement = access.placed(input.cluster);
  const id = stepId(input.cluster, input.campaign);
  const step = (await client.workflow.getHandle(id).result()) as CampaignStepResult;
  const names = await resourcesRun(client, `${id}/migrate-all`);
  const judged = await judgeRecords(client, placement, input.cluster.domain, names);
  const failures = judged.failures;
  // What the step refused before migrating (a resource not found, blocked): named by the step, a failure either way.
  const refusedByStep = (step?.failures ?? []).filter((f) => !names.includes(f.resource));
  failures.push(...refusedByStep);
  // Resources named by the campaign and neither run nor refused by name: a step that ran less than it was asked
  // (or says so) does not make the row Succeeded.
  const accounted = names.length + refusedByStep.length;
  if (input.named && accounted < input.named.length)
    failures.push({
      resource: input.named.filter((n) => !names.includes(n) && !refusedByStep.some((f) => f.resource === n)).join(', ') || '(resources)',
      reason: `its step in domain ${input.cluster.domain} accounts for ${accounted} of the ${input.named.length} resources the campaign named`,
    });
  const drop = input.dropCheck ? await dropVerdict(client, placement, `${id}/drop-check`, input.dropCheck) : undefined;
  if (drop && 'failure' in drop) failures.push(drop.failure);
  return {
    ...(input.cluster.uid ? { clusterUid: input.cluster.uid } : {}),
    resources: { asked: Math.max(accounted, input.named?.length ?? 0), succeeded: judged.succeeded },
    objects: judged.objects,
    failures,
    ...(drop && 'verdict' in drop ? { drop: drop.verdict } : {}),
    refused: judged.refused,
  };
}

/** The resources a step's migrateAll ran (its rows name them; nothing else of them is believed). */
async function resourcesRun(client: Client, migrateAllId: string): Promise<string[]> {
  const rows = await client.workflow
    .getHandle(migrateAllId)
    .result()
    .then(
      (r) => (Array.isArray(r) ? (r as Array<{ resource?: unknown }>) : []),
      (err: unknown) => {
        if (err instanceof WorkflowNotFoundError) return [];
        throw err;
      },
    );
  return [...new Set(rows.map((r) => r.resource).filter((r): r is string => typeof r === 'string'))];
}

/** Each resource's record in the domain, checked: what counts (succeeded, objects) and why the rest does not. */
async function judgeRecords(client: Client, placement: Placement, domain: string, names: string[]) {
  const failures: DomainVerdict['failures'] = [];
  let succeeded = 0;
  let objects = 0;
  let refused = 0;
  for (const name of names) {
    const resource = parseGroupResource(name);
    const found = await readMigrationRun(client, placement.id(`migrate/${groupResourceString(resource)}`));
    if (!found) {
      failures.push({ resource: name, reason: `no record of its migration in domain ${domain}` });
      continue;
    }
    if (found.status !== 'COMPLETED') {
      failures.push({ resource: name, reason: `its migration ${found.status.toLowerCase()}` });
      continue;
    }
    const checked = checkRecord(found.run, expectationOf(placement, resource));
    if (!checked.counts) {
      refused++;
      failures.push({ resource: name, reason: checked.why });
      continue;
    }
    objects += objectsHandled(checked.verdict.counters);
    if (checked.verdict.phase === 'Succeeded') succeeded++;
    else
      failures.push({ resource: name, reason: `${checked.verdict.phase}${checked.verdict.message ? `: ${checked.verdict.message}` : ''}` });
  }
  return { failures, succeeded, objects, refused };
}

/** The step's drop check, when it ran as svm's on the cluster's own queue in the domain; else a failure saying so. */
async function dropVerdict(
  client: Client,
  placement: Placement,
  workflowId: string,
  groupVersion: string,
): Promise<{ verdict: NonNullable<DomainVerdict['drop']> } | { failure: DomainVerdict['failures'][number] }> {
  const found = await readMigrationRun(client, workflowId);
  const report = found?.run.result as { verdict?: unknown; exitCode?: unknown } | undefined;
  if (
    found?.status === 'COMPLETED' &&
    found.run.type === 'checkVersionDrop' &&
    found.run.taskQueue === placement.taskQueue &&
    typeof report?.verdict === 'string' &&
    typeof report.exitCode === 'number'
  )
    return { verdict: { groupVersion, verdict: report.verdict, exitCode: report.exitCode } };
  return { failure: { resource: groupVersion, reason: 'no drop check of its own task queue recorded in its domain' } };
}

/** The campaign was aborted: the step in the domain is cancelled (nothing when it has ended). */
async function cancelDomainStep(access: DomainAccess, input: { cluster: DomainCluster; campaign: string }): Promise<void> {
  const client = await access.client(input.cluster.domain);
  await client.workflow
    .getHandle(stepId(input.cluster, input.campaign))
    .cancel()
    .catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    });
}
