/**
 * The plan's shape (`svm plan`, Migrator.plan, a campaign's "plan" step): what must be migrated before the next
 * upgrade step can go on. Made by src/kube/plan.ts; read as a table by src/client/plan-report.ts.
 */

/**
 * The rate `svm plan`'s estimates assume by default, updates per second. Not the worker's default budget: SVM_QPS is
 * auto (no fixed rate; it follows the API servers), so a plan can only assume one.
 */
export const DEFAULT_PLAN_QPS = 100;

export type PlanVerdict = 'NothingToMigrate' | 'MigrationsNeeded' | 'Blocked';
export type PlanExitCode = 0 | 1 | 2;
/** The CLI's exit code when the plan could not be made (e.g. the API cannot be reached). */
export const PLAN_ERROR_EXIT_CODE = 3;

/** noRecord: a StorageState says migrated, but Temporal holds no whole pass at its hash (the mirror does not count). */
export type PlanSource = 'storedVersions' | 'storageState' | 'noRecord' | 'disagreement';

export interface PlanItem {
  /** kubectl-style: widgets.example.com, secrets, deployments.apps. */
  resource: string;
  group: string;
  /** The plural resource name. */
  name: string;
  /** migrate: can run now; blocked: cannot (see blockedBy). */
  action: 'migrate' | 'blocked';
  /** Why it is listed. */
  sources: PlanSource[];
  /** One sentence per source. */
  reasons: string[];
  /** Why it cannot be migrated now (servers disagree, not served, ...). */
  blockedBy?: string;
  /** A CRD's status.storedVersions and storage version, when that is a reason. */
  storedVersions?: string[];
  storageVersion?: string;
  /** A StorageState's persistedStorageVersionHashes, when that is a reason. */
  persistedStorageVersionHashes?: string[];
  /** Objects stored (from a list with limit=1); null when unknown. */
  objects: number | null;
  /** Why objects is null, or how it was counted when not exactly. */
  objectsNote?: string;
  /** objects / qps; null when objects is unknown or the budget is unlimited. */
  estimateSeconds: number | null;
  /**
   * The shipped worker's rights leave this resource out (a custom resource, an admission or RBAC object): it is
   * migrated once the operator applies `svm grant <resource>` (docs/security.md).
   */
  needsGrant?: boolean;
}

export interface Plan {
  verdict: PlanVerdict;
  exitCode: PlanExitCode;
  /** The budget the estimates assume (updates per second; 0: unlimited, no estimates). */
  qps: number;
  items: PlanItem[];
  totals: { resources: number; blocked: number; objects: number; objectsUnknown: number; estimateSeconds: number | null };
  /** What agreement was checked over, as a sentence. */
  checked: string;
  notes: string[];
}
