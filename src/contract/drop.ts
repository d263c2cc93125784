/**
 * The drop check's contract: can an API version be removed now (from a CRD's
 * versions, or by the next Kubernetes release)? Its input and its report, as
 * zod schemas that the workflow checks with and contract/v<N>/ publishes
 * (drop-check-input, drop-check-result); `svm plan --drop -o json` prints the
 * same report. Side-effect free, like definitions.ts.
 */
import { z } from 'zod';
import { ClusterRefSchema } from '../api/cluster';

/** The workflow type any SDK starts (one argument: DropCheckInput); its result is a DropReport. */
export const DROP_CHECK_WORKFLOW_TYPE = 'checkVersionDrop';
/** A workflow ID for a check of one group version (any ID works; this one names what was checked). */
export const dropCheckWorkflowId = (groupVersion: string) => `drop-check/${groupVersion}`;

/** How long request counters are watched by default: a client that requests the version in this window is seen. */
export const DEFAULT_REQUESTS_WINDOW_SECONDS = 30;

/** What a requests window cannot see, said with every verdict that rests on it: the clients that call less often. */
/** A length of time as the reasons say it: 45s, 12m, 23h05m. */
export function spanText(seconds: number): string {
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  const m = Math.floor(seconds / 60);
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

export function unseenClients(windowSeconds: number, sampled = false): string {
  if (windowSeconds <= 0) return 'a client that has not called since each API server started is not seen';
  if (sampled)
    return `a client that calls less often than every ${spanText(windowSeconds)} is not seen (the worker's samples of each server's counters reach back that far, SVM_REQUEST_SAMPLE_SECONDS)`;
  return `a client that calls less often than every ${windowSeconds}s is not seen (--requests-window; 0 counts every request since each API server started)`;
}

const GROUP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const VERSION = /^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$/;

/** Why a group version cannot be checked, or undefined when it can. */
export function groupVersionRefusal(gv: string): string | undefined {
  const slash = gv.indexOf('/');
  if (slash < 0)
    return `"${gv}" is not <group>/<version> (e.g. example.com/v1, admissionregistration.k8s.io/v1beta1); the core group's v1 cannot be dropped`;
  const group = gv.slice(0, slash);
  const version = gv.slice(slash + 1);
  if (!GROUP.test(group) || group.length > 253) return `"${group}" is not an API group (a DNS subdomain, e.g. example.com, batch)`;
  if (!VERSION.test(version)) return `"${version}" is not a Kubernetes API version (v1, v2, v1beta1, v2alpha1, ...)`;
  return undefined;
}

export const DropCheckInputSchema = z
  .object({
    groupVersion: z
      .string()
      .max(320)
      .superRefine((gv, ctx) => {
        const why = groupVersionRefusal(gv);
        if (why) ctx.addIssue({ code: 'custom', message: why });
      })
      .describe('the API version to drop, <group>/<version>, e.g. example.com/v1')
      .meta({ pattern: `${GROUP.source.slice(0, -1)}/${VERSION.source.slice(1)}` }),
    requestsWindowSeconds: z
      .number()
      .int()
      .min(0)
      .max(3600)
      .optional()
      .describe(
        `each API server's request counters are read at the start and again this many seconds later (default ${DEFAULT_REQUESTS_WINDOW_SECONDS}): a request at the version in between is a client still using it; 0: any request since the server started counts`,
      ),
    /** The cluster, when one Temporal namespace serves several (src/api/cluster.ts). */
    cluster: ClusterRefSchema.optional(),
  })
  .strict()
  .describe('the input of checkVersionDrop; minimal: {"groupVersion": "example.com/v1"}');
export type DropCheckInput = z.infer<typeof DropCheckInputSchema>;

export const DropVerdict = z.enum(['Ready', 'NotYet', 'Unknown']);
export type DropVerdict = z.infer<typeof DropVerdict>;

export const DropCheckName = z.enum(['storageVersion', 'migration', 'storedVersions', 'managedFields', 'requests', 'conversionWebhook']);
export type DropCheckName = z.infer<typeof DropCheckName>;

export const DropCheckSchema = z.object({
  check: DropCheckName,
  verdict: DropVerdict,
  reason: z.string().describe('one sentence: what was found, or why it could not be known'),
});
export type DropCheck = z.infer<typeof DropCheckSchema>;

export const DropServerRequestsSchema = z.object({
  server: z.string().describe('address:port of one API server (the kubernetes EndpointSlice)'),
  verdict: DropVerdict,
  requestsInWindow: z.number().nullable().describe('requests at the version during the window; null when unknown'),
  requestsSinceStart: z.number().nullable().describe('requests at the version since the server started; null when unknown'),
  open: z.number().nullable().describe('requests at the version open now (watches); null when unknown'),
  deprecatedRemovedRelease: z.string().optional().describe('set when the server counted it as a deprecated API requested'),
  windowSeconds: z
    .number()
    .optional()
    .describe(
      "how far back requestsInWindow reaches for this server when the worker's samples of its counters reach further than requestsWindowSeconds (the check run by the worker, checkVersionDrop)",
    ),
  reason: z.string().optional().describe('why it is unknown'),
});
export type DropServerRequests = z.infer<typeof DropServerRequestsSchema>;

export const DropResourceSchema = z.object({
  resource: z.string().describe('plural.group, e.g. widgets.example.com'),
  kind: z.string().optional(),
  custom: z.boolean().describe('served by a CustomResourceDefinition'),
  verdict: DropVerdict,
  storageVersion: z.string().optional().describe('the version every API server stores it in, when they agree and it can be named'),
  objects: z.number().nullable().describe('objects listed (metadata only); null when they could not be listed'),
  managedFieldsNaming: z.number().nullable().describe('objects with managedFields entries at the version; null when unknown'),
  managers: z.array(z.string()).optional().describe('the field managers of those entries'),
  requests: z.array(DropServerRequestsSchema).describe('per API server'),
  checks: z.array(DropCheckSchema),
});
export type DropResource = z.infer<typeof DropResourceSchema>;

export const DropReportSchema = z
  .object({
    groupVersion: z.string(),
    verdict: DropVerdict.describe(
      'Ready when every resource is; NotYet when any is not; Unknown otherwise, and when there is no resource to check (the notes say what the group serves)',
    ),
    exitCode: z
      .union([z.literal(0), z.literal(1), z.literal(2)])
      .describe('0 Ready, 1 NotYet, 2 Unknown (the CLI also exits 2 on an error)'),
    resources: z.array(DropResourceSchema),
    requestsWindowSeconds: z
      .number()
      .describe(
        "how long each API server's request counters were watched: a client that calls less often than that is not seen; 0: every request since each server started was counted",
      ),
    checked: z.string().describe('what agreement was checked over, as a sentence'),
    notes: z.array(z.string()),
    at: z.string().describe('when the check ended (RFC 3339)'),
  })
  .describe('the result of checkVersionDrop, and `svm plan --drop -o json`');
export type DropReport = z.infer<typeof DropReportSchema>;

/** The verdict of several: NotYet if any is, else Unknown if any is, else Ready. */
export function combineVerdicts(vs: DropVerdict[]): DropVerdict {
  if (vs.includes('NotYet')) return 'NotYet';
  if (vs.includes('Unknown')) return 'Unknown';
  return 'Ready';
}

export const dropExitCode = (v: DropVerdict): 0 | 1 | 2 => (v === 'Ready' ? 0 : v === 'NotYet' ? 1 : 2);

// ------------------------------------------------------------ the managedFields rewrite (off by default)

/**
 * The workflow type that brings managedFields entries at an API version about to be removed to another version of
 * the resource (one argument: ManagedFieldsInput; result: ManagedFieldsResult). It changes metadata, so a worker runs
 * it only where it was turned on (deploy/managed-fields.yaml: its own identity, fenced to change nothing else).
 */
export const MANAGED_FIELDS_WORKFLOW_TYPE = 'rewriteManagedFields';
export const managedFieldsWorkflowId = (resource: string, from: string) => `managed-fields/${resource}/${from}`;

export const ManagedFieldsInputSchema = z
  .object({
    resource: z.string().min(1).max(320).describe('the resource, as for svm migrate: widgets.example.com, mutatingadmissionpolicies'),
    from: z
      .string()
      .max(320)
      .superRefine((gv, ctx) => {
        const why = groupVersionRefusal(gv);
        if (why) ctx.addIssue({ code: 'custom', message: why });
      })
      .describe('the API version whose managedFields entries are rewritten, <group>/<version> of the resource, e.g. example.com/v1'),
    to: z
      .string()
      .regex(VERSION)
      .optional()
      .describe(
        "the version they name instead (default: a CRD's storage version, or the preferred version of a built-in resource's group)",
      ),
    /** The cluster, when one Temporal namespace serves several (src/api/cluster.ts). */
    cluster: ClusterRefSchema.optional(),
  })
  .strict()
  .describe('the input of rewriteManagedFields; minimal: {"resource": "widgets.example.com", "from": "example.com/v1"}');
export type ManagedFieldsInput = z.infer<typeof ManagedFieldsInputSchema>;

export const ManagedFieldsResultSchema = z
  .object({
    resource: z.string(),
    from: z.string().describe('<group>/<version> the entries named'),
    to: z.string().describe('<group>/<version> they name now'),
    objects: z.number().describe('objects listed (metadata only)'),
    rewritten: z.number().describe('objects whose entries were rewritten'),
    entries: z.number().describe('entries rewritten in all'),
    changedMeanwhile: z.number().describe('objects whose managedFields changed between the list and the patch: left as they were'),
    gone: z.number().describe('objects deleted between the list and the patch'),
    remaining: z.number().describe('objects that still have an entry at `from`, counted by a list after the pass (0: done)'),
  })
  .strict()
  .describe('the result of rewriteManagedFields, and `svm managed-fields -o json`');
export type ManagedFieldsResult = z.infer<typeof ManagedFieldsResultSchema>;
