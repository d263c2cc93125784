/**
 * Status parity with the built-in migrator: the same three migrations (a
 * success, a webhook denial, a resource that does not exist) done by the real
 * built-in and by svm on one plane, and the conditions each leaves compared:
 * types, statuses, reasons, the shape of each message, and the CRD's
 * StorageMigrating condition. Differences are allowed only where
 * DOCUMENTED_DIFFERENCES says so (docs/standard-api.md lists the same).
 */
import assert from 'node:assert/strict';
import type { StandardCondition } from '../../src/api/standard-migration';
import { findStandardMigration, listStandardMigrations, standardVersion } from '../../src/kube/standard-migrations';
import { getCrd } from '../../src/kube/crds';
import { applyCrd, createObjects, testCrd } from './crd';
import { eventually } from './waits';
import { uniq, type TestPlane } from './plane';
import { denyUpdatesOf } from './webhook';

/** The message templates of the built-in (pkg/controller/storageversionmigrator, v1.36.3 and v1.37.2). */
const SHAPES: Array<[string, RegExp]> = [
  ['(empty)', /^$/],
  ['Migration completed', /^Migration completed$/],
  ['The migration is running', /^The migration is running$/],
  ['The migration is running, N objects verified migrated', /^The migration is running, \d+ objects verified migrated$/],
  ['The migration is running, X/Y objects not yet migrated', /^The migration is running, \d+\/\d+ objects not yet migrated$/],
  [
    'X/Y not yet migrated. migration encountered unhandled error: …',
    /^\d+\/\d+ not yet migrated\. migration encountered unhandled error: .+/s,
  ],
  ['resource does not exist in discovery…', /^resource does not exist in discovery/],
  ['migration encountered unhandled error: …', /^migration encountered unhandled error: .+/s],
  ['Migration <name> is running', /^Migration \S+ is running$/],
  [
    'The migration has succeeded and the stored versions have been updated…',
    /^The migration has succeeded and the stored versions have been updated/,
  ],
  ['The migration has failed…', /^The migration has failed/],
];
export const messageShape = (m: string | undefined): string => SHAPES.find(([, re]) => re.test(m ?? ''))?.[0] ?? `other: ${m}`;

export type Case = 'success' | 'denied' | 'missing';
/** What one migrator left: per condition type, "status reason shape". */
export type Outcome = Record<string, string>;

function normalize(conditions: StandardCondition[] | undefined, crdCondition?: StandardCondition): Outcome {
  const out: Outcome = {};
  for (const c of conditions ?? []) {
    if (c.type.includes('/')) continue; // svm's own condition types (migration.k8s.io/Progress): ignored by tools written for the built-in
    out[c.type] = `${c.status} ${c.reason ?? ''} ${messageShape(c.message)}`;
  }
  if (crdCondition)
    out['CRD StorageMigrating'] = `${crdCondition.status} ${crdCondition.reason ?? ''} ${messageShape(crdCondition.message)}`;
  return out;
}

/**
 * Differences svm keeps on purpose, by case and key ("condition type"): what the built-in shows, what svm
 * shows, and why. Anything else that differs fails the parity test.
 */
export const DOCUMENTED_DIFFERENCES: Array<{ case: Case | '*'; key: string; why: string }> = [];

type StandardObject = Awaited<ReturnType<typeof findStandardMigration>>;
const terminal = (o: StandardObject) =>
  o?.status?.conditions?.some((c) => (c.type === 'Succeeded' || c.type === 'Failed') && c.status === 'True') ?? false;
const running = (o: StandardObject) => o?.status?.conditions?.some((c) => c.type === 'Running' && c.status === 'True') ?? false;

/** How long a verdict is given to settle (finishedAndSettled). */
const SETTLE_MS = 30_000;

/**
 * The standard object `name` once finished (within timeoutMs), and settled: the built-in writes Succeeded (or Failed)
 * first, and its migration runner turns Running to False (and cleans the CRD's condition) in a later write; read
 * both, or what stands SETTLE_MS after the verdict.
 */
async function finishedAndSettled(p: TestPlane, what: string, name: string, timeoutMs: number): Promise<NonNullable<StandardObject>> {
  const done = await eventually(
    `${what} finished`,
    async () => {
      const o = await findStandardMigration(p.kube, name);
      return terminal(o) ? o : undefined;
    },
    timeoutMs,
    async () => `its conditions ${JSON.stringify((await findStandardMigration(p.kube, name))?.status?.conditions ?? 'none')}`,
  );
  const until = Date.now() + SETTLE_MS;
  let o = done;
  while (running(o) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 500));
    o = (await findStandardMigration(p.kube, name)) ?? o;
  }
  return o;
}

/** Runs the three cases with the migrator `run` provides; returns what each left. */
export async function parityOutcomes(
  p: TestPlane,
  label: string,
  run: <T>(fn: () => Promise<T>) => Promise<T>,
  grant: (crd: ReturnType<typeof testCrd>) => Promise<void> = async () => undefined,
): Promise<Record<Case, Outcome>> {
  const version = await standardVersion(p.kube, true);
  assert.ok(version, 'the plane serves storagemigration.k8s.io');
  const create = (name: string, gr: { group: string; resource: string }) =>
    p.kube.request('POST', `/apis/storagemigration.k8s.io/${version}/storageversionmigrations`, {
      body: JSON.stringify({
        apiVersion: `storagemigration.k8s.io/${version}`,
        kind: 'StorageVersionMigration',
        metadata: { name },
        spec: { resource: gr },
      }),
    });
  const finished = (name: string, timeoutMs: number) => finishedAndSettled(p, `${label}: ${name}`, name, timeoutMs);
  const ns = uniq('parity');
  const ok = testCrd(`${uniq('pok')}.svm.test`);
  await applyCrd(p.kube, ok, 'v1');
  await createObjects(p.kube, ok, 'v1', 10, { namespace: ns });
  await applyCrd(p.kube, ok, 'v2');
  const bad = testCrd(`${uniq('pbad')}.svm.test`);
  await applyCrd(p.kube, bad, 'v1');
  await createObjects(p.kube, bad, 'v1', 5, { namespace: ns });
  await createObjects(p.kube, bad, 'v1', 1, { namespace: ns, prefix: 'deny' });
  await applyCrd(p.kube, bad, 'v2');
  await grant(ok);
  await grant(bad);
  const allow = await denyUpdatesOf(p, bad, ns);
  try {
    return await run(async () => {
      const names = { success: uniq('par-ok'), denied: uniq('par-denied'), missing: uniq('par-missing') };
      await create(names.success, { group: ok.group, resource: ok.plural });
      await create(names.denied, { group: bad.group, resource: bad.plural });
      await create(names.missing, { group: 'nosuch.svm.test', resource: 'gizmos' });
      const success = await finished(names.success, 180_000);
      const denied = await finished(names.denied, 180_000);
      // The built-in gives up on a resource discovery does not serve after a minute of looking.
      const missing = await finished(names.missing, 240_000);
      const crdOk = (await getCrd(p.kube, { group: ok.group, resource: ok.plural })).status?.conditions?.find(
        (c) => c.type === 'StorageMigrating',
      ) as StandardCondition | undefined;
      const crdBad = (await getCrd(p.kube, { group: bad.group, resource: bad.plural })).status?.conditions?.find(
        (c) => c.type === 'StorageMigrating',
      ) as StandardCondition | undefined;
      return {
        success: normalize(success.status?.conditions, crdOk),
        denied: normalize(denied.status?.conditions, crdBad),
        missing: normalize(missing.status?.conditions),
      };
    });
  } finally {
    await allow();
  }
}

/** The differences between the two, minus the documented ones; a printable table of both. */
export function compareOutcomes(builtIn: Record<Case, Outcome>, svm: Record<Case, Outcome>): { undocumented: string[]; table: string[] } {
  const undocumented: string[] = [];
  const table: string[] = [];
  for (const c of ['success', 'denied', 'missing'] as const) {
    const keys = [...new Set([...Object.keys(builtIn[c]), ...Object.keys(svm[c])])].sort();
    for (const k of keys) {
      const b = builtIn[c][k] ?? '(absent)';
      const s = svm[c][k] ?? '(absent)';
      const documented = DOCUMENTED_DIFFERENCES.find((d) => (d.case === c || d.case === '*') && d.key === k);
      table.push(`${c} | ${k} | ${b} | ${s} | ${b === s ? 'same' : documented ? `documented: ${documented.why}` : 'DIFFERENT'}`);
      if (b !== s && !documented) undocumented.push(`${c} ${k}: built-in "${b}", svm "${s}"`);
    }
  }
  return { undocumented, table };
}

/**
 * Deletes the standard objects kube-controller-manager wrote the status of. Run once the built-in is stopped and
 * before svm acts in own mode: svm would see the built-in's recent writes and give each new object two minutes
 * for it to write first (for 10 minutes after the last one).
 */
export async function deleteBuiltInObjects(p: TestPlane): Promise<void> {
  const version = await standardVersion(p.kube, true);
  if (!version) return;
  const { items } = await listStandardMigrations(p.kube);
  for (const o of items)
    if ((o.metadata.managedFields ?? []).some((f) => f.subresource === 'status' && f.manager?.startsWith('kube-controller-manager')))
      await p.kube.raw('DELETE', `/apis/storagemigration.k8s.io/${version}/storageversionmigrations/${o.metadata.name}`);
}
