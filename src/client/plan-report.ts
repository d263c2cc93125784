/**
 * The plan's readable form and the CLI's constants: what `svm plan --help`, the programmatic API's re-exports and
 * the table need, without the Kubernetes client that making a plan needs (src/kube/plan.ts; its shape:
 * src/contract/plan.ts).
 */
import { tableLines } from './table';
import { needsManifestFence } from '../api/resource';
import type { Plan } from '../contract/plan';

export { DEFAULT_PLAN_QPS, PLAN_ERROR_EXIT_CODE } from '../contract/plan';
export type { Plan, PlanExitCode, PlanItem, PlanSource, PlanVerdict } from '../contract/plan';

/** 0.4s, 42s, 3m20s, 2h05m, 3d04h. */
export function formatDuration(seconds: number): string {
  if (seconds < 10) return `${Math.round(seconds * 10) / 10}s`;
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86_400)}d${String(Math.floor((s % 86_400) / 3600)).padStart(2, '0')}h`;
}

const verdictText = (plan: Plan): string =>
  plan.verdict === 'NothingToMigrate'
    ? 'nothing to migrate'
    : plan.verdict === 'MigrationsNeeded'
      ? 'migrations needed, all can run now'
      : `blocked: ${plan.totals.blocked} resource(s) cannot be migrated now (see above)`;

/** The readable form: a table, then what blocks, then the verdict with its exit code. */
export function planTable(plan: Plan): string {
  const out: string[] = [];
  if (plan.items.length > 0) {
    const header = ['RESOURCE', 'ACTION', 'OBJECTS', 'ESTIMATE', 'WHY'];
    const cells = plan.items.map((i) => [
      i.resource,
      i.action,
      i.objects === null ? 'unknown' : String(i.objects),
      i.estimateSeconds === null ? '-' : formatDuration(i.estimateSeconds),
      i.sources
        .map((s) =>
          s === 'storedVersions'
            ? `storedVersions [${(i.storedVersions ?? []).join(',')}], storage ${i.storageVersion ?? '-'}`
            : s === 'storageState'
              ? `StorageState [${(i.persistedStorageVersionHashes ?? []).join(',')}]`
              : s === 'noRecord'
                ? `StorageState [${(i.persistedStorageVersionHashes ?? []).join(',')}], no pass on record`
                : 'servers disagree',
        )
        .join('; '),
    ]);
    out.push(...tableLines(header, cells, [2, 3]));
    const blocked = plan.items.filter((i) => i.blockedBy);
    if (blocked.length > 0) out.push('', ...blocked.map((i) => `${i.resource} blocked: ${i.blockedBy}`));
    const unknown = plan.items.filter((i) => i.objectsNote);
    if (unknown.length > 0) out.push('', ...unknown.map((i) => `${i.resource} objects: ${i.objectsNote}`));
    const grants = plan.items.filter((i) => i.needsGrant);
    if (grants.length > 0)
      out.push(
        '',
        "outside the shipped worker's rights (docs/security.md); grant each before it is migrated:",
        ...grants.map(
          (i) =>
            `  svm grant ${i.resource} | kubectl apply -f -${needsManifestFence(i) ? '   # and the fence loaded from a manifest (deploy/static-fence): the shipped worker rewrites admission objects only under it' : ''}`,
        ),
      );
    out.push('');
  }
  for (const n of plan.notes) out.push(`note: ${n}`);
  out.push(`agreement checked: ${plan.checked}`);
  const t = plan.totals;
  const budget = plan.qps > 0 ? `${plan.qps} updates/s` : 'an unlimited budget';
  const objects =
    t.objectsUnknown > 0 ? `at least ${t.objects} objects (${t.objectsUnknown} resource(s) uncounted)` : `${t.objects} objects`;
  const time = t.estimateSeconds === null ? '' : `, about ${formatDuration(t.estimateSeconds)} at ${budget}`;
  out.push(
    plan.items.length === 0
      ? `${verdictText(plan)} (exit ${plan.exitCode})`
      : `${t.resources} resource(s), ${objects}${time}: ${verdictText(plan)} (exit ${plan.exitCode})`,
  );
  return out.join('\n') + '\n';
}
