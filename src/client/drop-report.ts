/**
 * The drop check's readable form (`svm plan --drop`): per resource one line
 * with its verdict, then each check's verdict and reason; at the end the
 * requests window with what it cannot see and the verdict with its exit
 * code. From the contract only (its types, the window's sentence): no client.
 */
import { tableLines } from './table';
import { spanText, unseenClients, type DropReport, type DropVerdict } from '../contract/drop';

/**
 * The requests window with what it cannot see: where the worker's samples reached further back for every server
 * counted (the check run by the worker), the shortest of their reaches.
 */
function windowText(report: DropReport): string {
  const asked = report.requestsWindowSeconds;
  if (asked === 0) return `0 (every request since each API server started): ${unseenClients(0)}`;
  const reach = report.resources.flatMap((r) => r.requests.filter((s) => s.verdict !== 'Unknown').map((s) => s.windowSeconds ?? asked));
  const shortest = reach.length > 0 ? Math.min(...reach) : asked;
  if (shortest <= asked) return `${asked}s: ${unseenClients(asked)}`;
  return `${spanText(shortest)} (the worker's samples of each server's counters; ${asked}s watched by the check itself): ${unseenClients(shortest, true)}`;
}

export const dropVerdictText = (v: DropVerdict): string => (v === 'Ready' ? 'ready' : v === 'NotYet' ? 'not yet' : 'unknown');

export function dropTable(report: DropReport): string {
  const out: string[] = [];
  const rows = report.resources.map((r) => [
    r.resource,
    dropVerdictText(r.verdict),
    r.storageVersion ?? '-',
    r.objects === null ? 'unknown' : String(r.objects),
    r.managedFieldsNaming === null ? 'unknown' : String(r.managedFieldsNaming),
  ]);
  const header = ['RESOURCE', 'VERDICT', 'STORAGE', 'OBJECTS', `MANAGED@${report.groupVersion.split('/')[1]}`];
  const [head, ...lines] = tableLines(header, rows, [3, 4]);
  const checkWidth = Math.max(0, ...report.resources.flatMap((r) => r.checks.map((c) => c.check.length)));
  if (rows.length > 0) out.push(head!);
  report.resources.forEach((r, i) => {
    out.push(lines[i]!);
    for (const c of r.checks) out.push(`  ${dropVerdictText(c.verdict).padEnd(7)}  ${c.check.padEnd(checkWidth)}  ${c.reason}`);
  });
  if (report.resources.length > 0) out.push('');
  for (const n of report.notes) out.push(`note: ${n}`);
  out.push(`agreement checked: ${report.checked}`);
  if (report.resources.length > 0) out.push(`requests window: ${windowText(report)}`);
  const counts = (['Ready', 'NotYet', 'Unknown'] as const)
    .map((v) => [v, report.resources.filter((r) => r.verdict === v).length] as const)
    .filter(([, n]) => n > 0)
    .map(([v, n]) => `${n} ${dropVerdictText(v)}`);
  out.push(
    `${report.groupVersion}: ${dropVerdictText(report.verdict)}${counts.length ? ` (${report.resources.length} resource(s): ${counts.join(', ')})` : ''} (exit ${report.exitCode})`,
  );
  return out.join('\n') + '\n';
}
