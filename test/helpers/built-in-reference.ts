/**
 * Kubernetes' built-in StorageVersionMigration controller (kube-controller-manager's storage-version-migrator-controller)
 * as a recorded reference, not a live control in every run. What the tests compare svm against (each case's verdicts,
 * the conditions each parity case leaves, the rolling upgrade's outcomes and the timings the side-by-side tables print;
 * never object data) is test/fixtures/built-in-reference.json, written by the same test files run with
 * SVM_RECORD_BUILT_IN=1 (`npm run reference:built-in`): they then run the built-in as they did when it was a live
 * control, and svm not at all.
 *
 * Each part names the release it was recorded on; a part recorded on another release than tools/versions.json names
 * fails the file that reads it (and test/unit-built-in-reference.test.ts, in the unit phase), with the command to run.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { kubeVersions } from '../../src/dev/tools';
import type { Case, Outcome } from './parity';

export const REFERENCE_FILE = path.join(__dirname, '..', 'fixtures', 'built-in-reference.json');
export const REFRESH_COMMAND = 'npm run reference:built-in';

/** SVM_RECORD_BUILT_IN=1: the files run the built-in (and not svm) and write what it did into REFERENCE_FILE. */
export const recording = process.env.SVM_RECORD_BUILT_IN === '1';

/** One case of test-conformance as the built-in did it: the verdicts svm is held to, and the table's seconds. */
export interface ReferenceCase {
  verdict: Record<string, unknown>;
  seconds?: number;
}

export interface ConformanceReference {
  /** kube-controller-manager's and the API servers' release (tools/versions.json's `kubernetes` when recorded). */
  kubernetes: string;
  recordedAt: string;
  cases: Record<string, ReferenceCase>;
  /** The side-by-side table's built-in column, by case. */
  rows: Array<{ case: string; text: string }>;
  /** Status parity (v1): what the built-in's conditions were, normalized (test/helpers/parity.ts). */
  parity: Record<Case, Outcome>;
}

export interface V1beta1Reference {
  /** tools/versions.json's `kubernetesPrevious` when recorded: the release serving storagemigration.k8s.io/v1beta1. */
  kubernetes: string;
  recordedAt: string;
  parity: Record<Case, Outcome>;
}

export interface UpgradeReference {
  from: string;
  to: string;
  recordedAt: string;
  /** The built-in resources whose storageVersionHash changed from -> to (discovery of both releases). */
  changed: string[];
  /** Per resource migrated (the changed ones and the CRD, by `<resource>.<group>`): Succeeded or Failed. */
  outcomes: Record<string, string>;
  secondsToAllFinished: number;
  /** In etcd after: per resource, apiVersion -> number of objects. */
  etcd: Record<string, Record<string, number>>;
  storedVersions?: string[];
  line: string;
}

export interface BuiltInReference {
  about: string;
  conformance?: ConformanceReference;
  v1beta1?: V1beta1Reference;
  upgrade?: UpgradeReference;
}

type Part = 'conformance' | 'v1beta1' | 'upgrade';

const ABOUT =
  "Kubernetes' built-in StorageVersionMigration controller as recorded by test-conformance, test-standard-v1beta1 and test-upgrade with SVM_RECORD_BUILT_IN=1 (npm run reference:built-in); the tests hold svm to it (test/helpers/built-in-reference.ts). No object data.";

export function readReferenceFile(file = REFERENCE_FILE): BuiltInReference {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as BuiltInReference;
  } catch {
    return { about: ABOUT };
  }
}

/** v1.37.2 < v1.38.0: -1, 0 or 1. */
export function compareReleases(a: string, b: string): number {
  const n = (v: string) => (/^v?(\d+)\.(\d+)\.(\d+)/.exec(v) ?? []).slice(1).map(Number);
  const [x, y] = [n(a), n(b)];
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0) ? -1 : 1;
  return 0;
}

/**
 * Why a part of the reference cannot be used with these releases (undefined: it can): missing, or recorded on another
 * release than tools/versions.json's (`kubernetes`, and `kubernetesPrevious` for the 1.36 parts), with the command.
 */
export function staleness(
  ref: BuiltInReference,
  part: Part,
  versions: { current: string; previous: string } = kubeVersions(),
): string | undefined {
  const file = path.relative(process.cwd(), REFERENCE_FILE) || REFERENCE_FILE;
  const rerun = `run \`${REFRESH_COMMAND}\` (it runs the built-in migrator on tools/versions.json's releases, as the tests did when it was a live control, and rewrites ${file}), look at its diff and commit it`;
  const p = ref[part];
  if (!p) return `the built-in's reference has no ${part} part (${file}): ${rerun}`;
  const pairs: Array<[string, string, string]> =
    part === 'upgrade'
      ? [
          ['from', (p as UpgradeReference).from, versions.previous],
          ['to', (p as UpgradeReference).to, versions.current],
        ]
      : [
          [
            'kubernetes',
            (p as ConformanceReference | V1beta1Reference).kubernetes,
            part === 'v1beta1' ? versions.previous : versions.current,
          ],
        ];
  for (const [what, recorded, wanted] of pairs) {
    if (recorded === wanted) continue;
    const key = wanted === versions.current ? 'kubernetes' : 'kubernetesPrevious';
    const age = compareReleases(recorded, wanted) < 0 ? 'older than' : 'not';
    return `the built-in's reference (${file}, ${part}${part === 'upgrade' ? ` ${what}` : ''}) was recorded on Kubernetes ${recorded}, ${age} tools/versions.json's ${key} ${wanted}: ${rerun}`;
  }
  return undefined;
}

/** The part, recorded on these releases; throws with the command to run otherwise. */
export function builtInReference<P extends Part>(part: P): NonNullable<BuiltInReference[P]> {
  const ref = readReferenceFile();
  const why = staleness(ref, part);
  if (why) throw new Error(why);
  return ref[part]!;
}

/** Writes one part (recording mode), leaving the others as they are. */
export function recordReference<P extends Part>(part: P, value: NonNullable<BuiltInReference[P]>): void {
  const ref = readReferenceFile();
  const out: BuiltInReference = { ...ref, about: ABOUT, [part]: value };
  const ordered: BuiltInReference = { about: out.about, conformance: out.conformance, v1beta1: out.v1beta1, upgrade: out.upgrade };
  writeFileSync(REFERENCE_FILE, JSON.stringify(ordered, null, 2) + '\n');
  process.stderr.write(`[built-in reference] wrote the ${part} part of ${REFERENCE_FILE}\n`);
}

/** Since when a reference part has stood, for the tables: "recorded 2026-12-07 on v1.37.2". */
export const recordedNote = (p: { recordedAt: string; kubernetes?: string; to?: string }): string =>
  `recorded ${p.recordedAt.slice(0, 10)} on ${p.kubernetes ?? p.to}`;
