/**
 * `svm fleet`: campaigns across the clusters registered in one Temporal namespace, or, given the fleet's trust
 * domains file (--domains, SVM_FLEET_DOMAINS), in each cluster's domain (docs/fleet.md). Needs only Temporal.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { CAMPAIGN_NAME_PATTERN, CAMPAIGN_NAME_RULE, CLUSTER_NAME_PATTERN, CLUSTER_NAME_RULE } from '../api/cluster-name';
import { outputOption as formatOption, parseIntArg, watchOption, withExamples, type OutputFormat } from '../config/cli-options';
import type { CampaignHandle, CampaignInput, CampaignStatus, Fleet, RegisteredCluster } from './fleet';
import { groupVersionRefusal } from '../contract/drop';
import { planCampaign, type PlannedCluster } from './fleet-check';
import { checkNamedInDomains, domainsFileOf, domainsOption } from './cli-fleet-domains';
import { formatted, interruption, rowsTable, tableLines, watchPrinter, watchRows, type RowForm } from './table';

/** Exit codes of `svm fleet migrate --wait`. */
export const CAMPAIGN_EXIT = { succeeded: 0, notSucceeded: 1 } as const;

const fleetModule = () => require('./fleet') as typeof import('./fleet'); // eslint-disable-line @typescript-eslint/no-require-imports

/** Runs with the fleet's client; `domains`: the --domains flag (else SVM_FLEET_DOMAINS; neither: one namespace). */
async function withFleet<T>(run: (fleet: Fleet) => Promise<T>, domains?: string): Promise<T> {
  const file = domainsFileOf(domains);
  const fleet = await fleetModule().Fleet.connect(file ? { domains: file } : {});
  try {
    return await run(fleet);
  } finally {
    await fleet.close();
  }
}

const outputOption = () => new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text');

function clusterList(value: string, previous: string[] = []): string[] {
  const names = value.split(',').map((n) => n.trim());
  for (const n of names) if (!CLUSTER_NAME_PATTERN.test(n)) throw new InvalidArgumentError(`--clusters: ${CLUSTER_NAME_RULE}, got "${n}"`);
  return [...previous, ...names];
}

function ratio(value: string): number {
  const n = Number(value);
  if (!/^(0(\.\d+)?|1(\.0+)?)$/.test(value) || Number.isNaN(n))
    throw new InvalidArgumentError(`--max-failure-ratio must be between 0 and 1, got "${value}"`);
  return n;
}

/** A windowed campaign's counts in a line: clusters done, running, failed, away. */
export function campaignProgress(s: CampaignStatus): string {
  const c = s.counts;
  if (!c) return `campaign ${s.name}: ${s.phase}, wave ${s.wave}`;
  const done = c.Succeeded + c.Failed + c.Skipped + c.Aborted;
  return (
    `campaign ${s.name}: ${s.phase}, wave ${s.wave}: ${done} of ${c.clusters} clusters done (${c.Succeeded} succeeded, ${c.Failed} failed` +
    `${c.Skipped ? `, ${c.Skipped} skipped` : ''}${c.Aborted ? `, ${c.Aborted} aborted` : ''}), ${c.Running} running, ${c.Unreachable} unreachable, ${c.Pending} pending`
  );
}

/** The campaign's table: a line per cluster, then each failure and note. */
export function campaignTable(s: CampaignStatus): string {
  const out = [`campaign ${s.name}: ${s.phase}, wave ${s.wave}${s.message ? ` (${s.message})` : ''}`];
  const c = s.counts;
  if (c)
    out.push(
      `${c.clusters} clusters: ${c.Succeeded} succeeded, ${c.Failed} failed, ${c.Running} running, ${c.Unreachable} unreachable, ${c.Pending} pending, ${c.Skipped} skipped, ${c.Aborted} aborted`,
    );
  const cells = s.rows.map((r) => [
    r.cluster,
    r.phase,
    r.wave === undefined ? '-' : String(r.wave),
    `${r.resources.succeeded}/${r.resources.asked}`,
    String(r.objects),
    r.drop ? `${r.drop.verdict} (${r.drop.groupVersion})` : '-',
  ]);
  if (cells.length > 0) out.push(...tableLines(['CLUSTER', 'PHASE', 'WAVE', 'MIGRATED', 'OBJECTS', 'DROP'], cells, [2, 4]));
  for (const r of s.rows) {
    if (r.note) out.push(`${r.cluster}: ${r.note}`);
    for (const f of r.failures) out.push(`${r.cluster}: ${f.resource} failed: ${f.reason}`);
  }
  if (c && c.Pending > 0) out.push(`${c.Pending} cluster(s) not started yet`);
  if (s.skipped && s.skipped.leftOff > 0) out.push(`${s.skipped.leftOff} more cluster(s) skipped: ${s.skipped.note}`);
  return out.join('\n') + '\n';
}

/** `svm fleet migrate --dry-run`: the clusters in the campaign's order, with their waves; nothing started. */
export function dryRunTable(name: string, input: CampaignInput, planned: PlannedCluster[]): string {
  const canary = input.canary
    ? `${input.canary} first, alone`
    : 'the first of these to answer first, alone (waves shown as if they answered in this order)';
  const out = [`campaign ${name} (dry run: nothing started): ${planned.length} clusters; ${canary}, then waves of ${input.parallel ?? 2}`];
  const cells = planned.map((p) => [
    String(p.wave),
    p.name,
    p.registration?.uid ?? '-',
    p.registration?.kubeVersions.join(',') || '-',
    p.registration?.lastSeen ?? '-',
    p.registration === undefined ? 'not registered' : p.registration.conflict ? 'identity conflict: it will fail' : '',
  ]);
  // With trust domains, the domain each cluster is read in (a cluster not registered there: '-').
  if (planned.some((p) => p.registration?.domain))
    out.push(
      ...tableLines(
        ['WAVE', 'CLUSTER', 'DOMAIN', 'UID', 'KUBERNETES', 'LAST SEEN', 'NOTE'],
        cells.map((c, i) => [c[0]!, c[1]!, planned[i]!.registration?.domain ?? '-', ...c.slice(2)]),
        [0],
      ),
    );
  else out.push(...tableLines(['WAVE', 'CLUSTER', 'UID', 'KUBERNETES', 'LAST SEEN', 'NOTE'], cells, [0]));
  return out.join('\n') + '\n';
}

/** The registered clusters a query matches; a query Temporal refuses is refused here, before anything starts. */
async function matching(fleet: Fleet, where: string): Promise<RegisteredCluster[]> {
  try {
    return await fleet.clusters(where);
  } catch (err) {
    // The SDK's own message ("Failed to list workflows") wraps the server's, which says what is wrong in the query.
    const said: string[] = [];
    for (let e: unknown = err; e instanceof Error && said.length < 4; e = e.cause) if (!said.includes(e.message)) said.push(e.message);
    throw new Error(`--where "${where}": Temporal refused the query: ${said.join(': ') || String(err)}`);
  }
}

/** `svm fleet clusters`' rows: the table's columns, and each cluster's name for -o name. */
export const clusterForm: RowForm<RegisteredCluster> = {
  header: () => ['CLUSTER', 'UID', 'IDENTITY', 'KUBERNETES', 'SVM', 'LAST SEEN'],
  right: [],
  cells: (c) => [
    c.name,
    c.uid ?? '-',
    c.conflict ? `CONFLICT (${c.conflict.uid})` : c.uid ? 'pinned' : '-',
    c.kubeVersions.join(',') || '-',
    c.svmVersion ?? '-',
    c.lastSeen ?? '-',
  ],
  name: (c) => c.name,
  empty: 'no cluster registered (a worker with SVM_CLUSTER set registers its cluster)',
};

/** The rows with trust domains: a DOMAIN column after CLUSTER (where its registration is read). */
export const domainClusterForm: RowForm<RegisteredCluster> = {
  ...clusterForm,
  header: (wide) => {
    const h = clusterForm.header(wide);
    return [h[0]!, 'DOMAIN', ...h.slice(1)];
  },
  cells: (c, wide) => {
    const cells = clusterForm.cells(c, wide);
    return [cells[0]!, c.domain ?? '-', ...cells.slice(1)];
  },
  empty: 'no cluster registered in any trust domain (a worker with SVM_CLUSTER set registers its cluster in its namespace)',
};

/** What --watch prints a cluster again for: its identity, pin and versions (not LAST SEEN, which each heartbeat moves). */
export const clusterState = (c: RegisteredCluster): string =>
  JSON.stringify([c.uid, c.conflict?.uid, c.conflict?.seenAt, c.kubeVersions, c.svmVersion]);

export function clustersTable(clusters: RegisteredCluster[], form: RowForm<RegisteredCluster> = clusterForm): string {
  const out = rowsTable(form, clusters, false).trimEnd().split('\n');
  for (const c of clusters) if (c.conflict) out.push(`${c.name}: identity conflict (${c.conflict.seenAt}): ${c.conflict.message}`);
  return out.join('\n') + '\n';
}

const write = (output: string, json: unknown, text: string) =>
  process.stdout.write(output === 'json' ? JSON.stringify(json, null, 2) + '\n' : text);

interface MigrateFlags {
  all?: boolean;
  plan?: boolean;
  clusters?: string[];
  where?: string;
  drop?: string;
  dropWindow?: number;
  canary?: string;
  parallel: number;
  parallelism: number;
  pauseBetweenWaves: number;
  maxFailureRatio?: number;
  unreachableAfter: number;
  deadline: number;
  wait?: boolean;
  dryRun?: boolean;
  includeUnregistered?: boolean;
  output: string;
  domains?: string;
}

/** The campaign's input from the flags; bad combinations are refused before anything is started. */
export function campaignInput(name: string, resources: string[], o: MigrateFlags): CampaignInput {
  if (!CAMPAIGN_NAME_PATTERN.test(name)) throw new InvalidArgumentError(`campaign "${name}": ${CAMPAIGN_NAME_RULE}`);
  if ([o.all, o.plan, resources.length > 0].filter(Boolean).length !== 1)
    throw new InvalidArgumentError('say what to migrate in each cluster: the resources, --all or --plan (one of them)');
  if (!o.clusters?.length && !o.where)
    throw new InvalidArgumentError('name the clusters (--clusters a,b) or a query on their registrations (--where)');
  if (o.canary && !CLUSTER_NAME_PATTERN.test(o.canary)) throw new InvalidArgumentError(`--canary: ${CLUSTER_NAME_RULE}, got "${o.canary}"`);
  if (o.dropWindow !== undefined && !o.drop) throw new InvalidArgumentError('--drop-window goes with --drop');
  const dropRefusal = o.drop === undefined ? undefined : groupVersionRefusal(o.drop);
  if (dropRefusal) throw new InvalidArgumentError(`--drop: ${dropRefusal}`);
  return {
    ...(o.clusters?.length ? { clusters: o.clusters } : {}),
    ...(o.where ? { where: o.where } : {}),
    migrate: o.all ? 'all' : o.plan ? 'plan' : resources,
    ...(o.drop ? { dropCheck: o.drop } : {}),
    ...(o.dropWindow !== undefined ? { dropCheckWindowSeconds: o.dropWindow } : {}),
    ...(o.canary ? { canary: o.canary } : {}),
    parallel: o.parallel,
    parallelism: o.parallelism,
    pauseBetweenWavesSeconds: o.pauseBetweenWaves,
    ...(o.maxFailureRatio !== undefined ? { maxFailureRatio: o.maxFailureRatio } : {}),
    unreachableAfterSeconds: o.unreachableAfter,
    deadlineSeconds: o.deadline,
  };
}

function migrateCommand(): Command {
  const cmd = new Command('migrate')
    .argument('<campaign>', "the campaign's name (its workflow: svm-campaign/<name>)")
    .argument('[resources...]', 'what to migrate in each cluster, as svm migrate names it')
    .option('--all', 'every migratable resource of each cluster')
    .option('--plan', 'in each cluster, what `svm plan` lists there: what must be migrated before the next upgrade step')
    .option('--clusters <names>', 'the clusters, by name (comma-separated; repeatable)', clusterList)
    .option(
      '--where <query>',
      'the registered clusters matching a query on their registrations, e.g. "MigrationKubeVersions = \'v1.36.3\'"',
    )
    .option('--drop <group/version>', "then, in each cluster, the drop-readiness check of this version (svm plan --drop's verdict)")
    .option(
      '--drop-window <seconds>',
      "with --drop: each API server's request counters watched this long",
      parseIntArg('--drop-window', 0, 3600),
    )
    .option('--canary <cluster>', 'the cluster migrated first, alone (default: the first that answers)')
    .option('--parallel <n>', 'clusters at once after the canary', parseIntArg('--parallel', 1, 100), 2)
    .option('--parallelism <n>', 'migrations at once within each cluster', parseIntArg('--parallelism', 1, 64), 2)
    .option('--pause-between-waves <seconds>', 'a wait between waves', parseIntArg('--pause-between-waves', 0, 7 * 86_400), 0)
    .option('--max-failure-ratio <r>', 'go on until failed/ended clusters exceeds r (default: stop on the first failure)', ratio)
    .option(
      '--unreachable-after <seconds>',
      'a cluster whose worker takes no task in this long is reported unreachable',
      parseIntArg('--unreachable-after', 5, 3600),
      60,
    )
    .option(
      '--deadline <seconds>',
      'when the campaign stops waiting for unreachable clusters',
      parseIntArg('--deadline', 60, 30 * 86_400),
      86_400,
    )
    .option('--wait', 'wait for the campaign to end and print its table (exit 0 Succeeded, 1 otherwise)')
    .option('--dry-run', 'print the clusters the campaign would take, in its order and waves, and start nothing')
    .option(
      '--include-unregistered',
      'start even if a cluster named has not registered yet (it is reported Unreachable until its worker answers)',
    )
    .addOption(domainsOption())
    .addOption(outputOption())
    .action(migrateAction);
  return withExamples(cmd, [
    'svm fleet migrate crd-v2 widgets.example.com --clusters east,west,north --canary east --drop example.com/v1 --wait',
    'svm fleet migrate to-1.37 --all --where "MigrationKubeVersions = \'v1.36.3\'" --parallel 10 --max-failure-ratio 0.05',
    'svm fleet migrate to-1.37 --all --where "MigrationKubeVersions = \'v1.36.3\'" --dry-run',
    'svm fleet migrate before-1.38 --plan --clusters east,west --wait   # in each, what svm plan lists there',
    'svm fleet migrate to-1.37 --all --domains /etc/svm/domains.json --where "MigrationKubeVersions = \'v1.36.3\'"   # across the trust domains',
  ]);
}

/** svm fleet migrate: every name and the query checked before anything starts, then the campaign, followed with --wait. */
async function migrateAction(name: string, resources: string[], o: MigrateFlags): Promise<void> {
  const input = campaignInput(name, resources, o);
  await withFleet(async (fleet) => {
    const planned = await checkedPlan(fleet, input, o);
    if (o.dryRun) {
      write(o.output, { name, dryRun: true, clusters: planned }, dryRunTable(name, input, planned));
      return;
    }
    const c = await fleet.startCampaign(name, input);
    if (!o.wait) {
      write(
        o.output,
        { name, workflowId: c.workflow.workflowId },
        `campaign ${name} started (workflow ${c.workflow.workflowId}; svm fleet status ${name})\n`,
      );
      return;
    }
    // Progress as it happens (on stderr: stdout is the table, or JSON), then the table.
    await follow(c, (now) => process.stderr.write(`${campaignProgress(now)}\n`));
    const { status: s, refused } = await fleet.checkedStatus(await c.result());
    write(o.output, s, campaignTable(s));
    if (s.phase !== 'Succeeded' || refused.length > 0) process.exitCode = CAMPAIGN_EXIT.notSucceeded;
  }, o.domains);
}

/** The campaign's clusters in its order, or a refusal before anything starts: a name outside its domain, an identity in conflict, a typo, a malformed query. */
async function checkedPlan(fleet: Fleet, input: CampaignInput, o: MigrateFlags) {
  // Every domain's registrations (with domains), or the namespace's.
  const registered = await fleet.clusters();
  // With trust domains: each cluster named is bound to a domain and registered there, or nothing starts.
  if (fleet.domains) checkNamedInDomains(o.clusters ?? [], fleet.domains, registered, o);
  // A cluster named whose identity is in conflict (in its domain): refused before anything starts (the campaign refuses it too).
  for (const cluster of o.clusters ?? []) {
    const conflict = (await fleet.pinOf(cluster))?.conflict;
    if (conflict)
      throw new Error(
        `cluster "${cluster}"'s identity is in conflict: ${conflict.message} (reported ${conflict.seenAt}). No campaign was started. Fix the worker that reported it, then: svm fleet pin ${cluster} --uid <its kube-system uid>`,
      );
  }
  // Then every name and the query checked against the registrations: a typo or a malformed query starts nothing.
  return planCampaign(input, registered, o.where ? await matching(fleet, o.where) : undefined, o);
}

/** How often `--wait` and `--watch` ask a campaign how it stands. */
const FOLLOW_EVERY_MS = 5_000;
const ENDED_PHASES = new Set(['Succeeded', 'Failed', 'Stopped', 'Aborted', 'DeadlineExceeded']);

/** Calls `changed` with the campaign's summary each time its progress changes, until it ends. */
async function follow(
  c: CampaignHandle,
  changed: (s: CampaignStatus) => void,
  read: () => Promise<CampaignStatus> = () => c.summary(),
): Promise<void> {
  let last = '';
  let failures = 0;
  for (;;) {
    let s: CampaignStatus;
    try {
      s = await read();
      failures = 0;
    } catch (err) {
      // A query between two runs of the campaign, or while its worker restarts: asked again, three times in a row at most.
      if (++failures >= 3) throw err;
      await new Promise((r) => setTimeout(r, FOLLOW_EVERY_MS));
      continue;
    }
    const line = JSON.stringify({ ...s, inflight: undefined, counts: s.counts, rows: s.rows.map((r) => [r.cluster, r.phase, r.note]) });
    if (line !== last) changed(s);
    last = line;
    if (ENDED_PHASES.has(s.phase)) return;
    await new Promise((r) => setTimeout(r, FOLLOW_EVERY_MS));
  }
}

function statusCommand(): Command {
  const cmd = new Command('status')
    .argument('<campaign>', "the campaign's name")
    .option('--watch', 'print the table again each time it changes, until the campaign ends')
    .addOption(domainsOption())
    .addOption(outputOption())
    .action(async (name: string, o: { output: string; watch?: boolean; domains?: string }) => {
      await withFleet(async (fleet) => {
        const c = fleet.campaign(name);
        // Each verdict checked against the uid pinned to its cluster now: one that is not counts for nothing (exit 1).
        const print = async (status: CampaignStatus) => {
          const { status: s, refused } = await fleet.checkedStatus(status);
          write(o.output, s, campaignTable(s));
          process.exitCode = refused.length > 0 ? CAMPAIGN_EXIT.notSucceeded : 0;
        };
        if (!o.watch) return print(await c.status());
        let printing = Promise.resolve();
        await follow(
          c,
          (s) => void (printing = printing.then(() => print(s))),
          () => c.status(),
        );
        await printing;
      }, o.domains);
    });
  return withExamples(cmd, [
    'svm fleet status crd-v2',
    'svm fleet status crd-v2 --watch',
    'svm fleet status crd-v2 -o json | jq \'.rows[] | select(.phase != "Succeeded")\'',
  ]);
}

function signalCommand(verb: 'pause' | 'resume' | 'abort', what: string): Command {
  const cmd = new Command(verb).argument('<campaign>', "the campaign's name").description(what);
  if (verb !== 'resume') cmd.option('--reason <text>', 'why, shown in its table');
  cmd.action(async (name: string, o: { reason?: string }) => {
    await withFleet(async (fleet) => {
      const c = fleet.campaign(name);
      await (verb === 'resume' ? c.resume() : c[verb](o.reason));
      process.stdout.write(`campaign ${name}: ${verb} sent\n`);
    });
  });
  return withExamples(cmd, [`svm fleet ${verb} crd-v2${verb === 'resume' ? '' : ' --reason "a canary alert"'}`]);
}

function clustersCommand(): Command {
  const cmd = new Command('clusters')
    .alias('list')
    .option('--where <query>', 'only the registrations matching this query (default: every registered cluster)')
    .addOption(formatOption(['text', 'json', 'yaml', 'name']))
    .addOption(
      watchOption(
        'print the table, then a row for each cluster registered or changed (identity, pin, versions), every 5 seconds, until interrupted',
      ),
    )
    .addOption(domainsOption())
    .action(async (o: { where?: string; output: OutputFormat; watch?: boolean; domains?: string }) => {
      await withFleet(async (fleet) => {
        const form = fleet.domains ? domainClusterForm : clusterForm;
        if (o.watch) {
          await watchRows({
            fetch: () => fleet.clusters(o.where),
            id: (c) => c.name,
            state: clusterState,
            emit: watchPrinter(o.output, form, (text) => process.stdout.write(text)),
            intervalMs: 5000,
            signal: interruption(),
          });
          return;
        }
        const clusters = await fleet.clusters(o.where);
        process.stdout.write(
          formatted(o.output, clusters, { text: () => clustersTable(clusters, form), names: () => clusters.map(form.name) }),
        );
      }, o.domains);
    });
  return withExamples(cmd, [
    'svm fleet clusters',
    'svm fleet clusters --where "MigrationKubeVersions = \'v1.36.3\'" -o json',
    'svm fleet clusters -o name   # one name a line: for f in $(svm fleet clusters -o name); do ...',
    'svm fleet clusters --watch',
    "svm fleet clusters --domains /etc/svm/domains.json   # every domain's clusters, each read in its namespace",
  ]);
}

const UID_PATTERN = /^[A-Za-z0-9-]{1,64}$/;

function pinCommand(): Command {
  const cmd = new Command('pin')
    .argument('<cluster>', "the cluster's name")
    .requiredOption(
      '--uid <uid>',
      "the uid of the cluster's kube-system namespace (kubectl get namespace kube-system -o jsonpath='{.metadata.uid}')",
    )
    .addOption(domainsOption())
    .action(async (name: string, o: { uid: string; domains?: string }) => {
      if (!CLUSTER_NAME_PATTERN.test(name)) throw new InvalidArgumentError(`cluster "${name}": ${CLUSTER_NAME_RULE}`);
      if (!UID_PATTERN.test(o.uid)) throw new InvalidArgumentError(`--uid: a namespace's uid (letters, digits and dashes), got "${o.uid}"`);
      await withFleet(async (fleet) => {
        const r = await fleet.pin(name, o.uid);
        const domain = fleet.domainOf(name);
        const at = domain ? ` (domain ${domain.name}, namespace ${domain.namespace})` : '';
        const lines = [
          r.was === undefined
            ? `cluster ${name}${at}: pinned to kube-system uid ${r.uid} (it was not pinned)`
            : r.was === r.uid
              ? `cluster ${name}${at}: kube-system uid ${r.uid} confirmed (unchanged)`
              : `cluster ${name}${at}: pinned to kube-system uid ${r.uid}, replacing ${r.was}${r.lastSeen ? ` (last reported ${r.lastSeen})` : ''}; verdicts made against ${r.was} no longer count`,
          ...(r.cleared ? [`cleared the identity conflict of ${r.cleared.seenAt}: ${r.cleared.message}`] : []),
        ];
        process.stdout.write(lines.join('\n') + '\n');
      }, o.domains);
    });
  return withExamples(cmd, [
    "svm fleet pin east --uid $(kubectl --context east get namespace kube-system -o jsonpath='{.metadata.uid}')   # east recreated",
  ]);
}

function forgetCommand(): Command {
  const cmd = new Command('forget')
    .argument('<cluster>', "the cluster's name")
    .addOption(domainsOption())
    .action(async (name: string, o: { domains?: string }) => {
      if (!CLUSTER_NAME_PATTERN.test(name)) throw new InvalidArgumentError(`cluster "${name}": ${CLUSTER_NAME_RULE}`);
      await withFleet(async (fleet) => {
        const was = await fleet.forget(name);
        process.stdout.write(
          was
            ? `cluster ${name}: forgotten (its registration and the pin of kube-system uid ${was.uid ?? '(none)'} ended); a worker of that name registers it again\n`
            : `cluster ${name}: not registered, nothing to forget\n`,
        );
      }, o.domains);
    });
  return withExamples(cmd, ['svm fleet forget west   # decommissioned: its name and uid may be pinned again']);
}

export function fleetCommand(): Command {
  const fleet = new Command('fleet')
    .addCommand(migrateCommand().description('start a campaign: a canary cluster, then waves of clusters, each migrated by its own worker'))
    .addCommand(statusCommand().description("a campaign's table: each cluster's phase, migrations, failures and drop verdict"))
    .addCommand(signalCommand('pause', 'hold back the clusters not started (those running go on)'))
    .addCommand(signalCommand('resume', 'let a paused campaign go on'))
    .addCommand(signalCommand('abort', "cancel every cluster's step (their migrations end Aborted) and skip the rest"))
    .addCommand(
      clustersCommand().description(
        'the clusters registered in Temporal: pinned uid, identity, Kubernetes versions, svm version, last seen',
      ),
    )
    .addCommand(
      pinCommand().description(
        "pin a cluster's name to a kube-system uid (a cluster recreated under its name, or a conflict resolved); prints what it replaces",
      ),
    )
    .addCommand(forgetCommand().description("forget a decommissioned cluster: its registration and its uid's pin end"));
  return withExamples(fleet, [
    'svm fleet clusters',
    'svm fleet migrate crd-v2 widgets.example.com --clusters east,west --wait',
    'svm fleet status crd-v2',
  ]);
}
