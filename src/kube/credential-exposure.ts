/**
 * Whether a worker's Temporal credential is within its own Kubernetes token's reach. The worker must list Secrets
 * cluster-wide to migrate them, and a list returns their content: a Temporal API key or mTLS key kept in a Secret
 * of a namespace the token can list is the token holder's too (docs/security.md, "Temporal credentials"). The
 * chart says which Secrets hold the credential (SVM_TEMPORAL_CREDENTIAL_SECRETS); a CSI volume or a projected
 * file names none, and nothing is reported.
 *
 * Asked of the API server's authorizer, never by reading a Secret: the worker asks for itself
 * (SelfSubjectAccessReview, which every identity may create), `svm plan` for each worker Deployment's
 * ServiceAccount (SubjectAccessReview, an operator's right), reading the Deployment's pod template.
 */
import type { KubeClient } from './client';
import { KubeError } from './errors';

export interface SecretRef {
  namespace: string;
  name: string;
}

/** A Secret holding the credential, and the verbs that return it to the identity asked about (get, list). */
export interface CredentialExposure {
  secret: string;
  verbs: string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const SECRET_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * SVM_TEMPORAL_CREDENTIAL_SECRETS: comma-separated `namespace/name` (or `name`, in the worker's namespace).
 * Throws, naming the bad entry, on anything that is not a Secret's name.
 */
export function parseSecretRefs(value: string | undefined, defaultNamespace: string): SecretRef[] {
  const refs: SecretRef[] = [];
  for (const raw of (value ?? '').split(',').map((s) => s.trim())) {
    if (!raw) continue;
    const [a, b, ...rest] = raw.split('/');
    const ref = b === undefined ? { namespace: defaultNamespace, name: a! } : { namespace: a!, name: b };
    if (rest.length > 0 || !DNS_LABEL.test(ref.namespace) || !SECRET_NAME.test(ref.name))
      throw new Error(`"${raw}" is not a Secret (namespace/name, or name in the worker's namespace)`);
    refs.push(ref);
  }
  return refs;
}

/** The identity a SubjectAccessReview asks about: a ServiceAccount, with the groups the API server gives it. */
export function serviceAccountSubject(namespace: string, name: string): { user: string; groups: string[] } {
  return {
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

async function allowed(
  kube: KubeClient,
  attributes: { verb: string; namespace: string; name?: string },
  subject?: { user: string; groups: string[] },
): Promise<boolean> {
  const kind = subject ? 'SubjectAccessReview' : 'SelfSubjectAccessReview';
  const res = await kube.request('POST', `/apis/authorization.k8s.io/v1/${kind.toLowerCase()}s`, {
    body: JSON.stringify({
      apiVersion: 'authorization.k8s.io/v1',
      kind,
      spec: { ...(subject ?? {}), resourceAttributes: { group: '', resource: 'secrets', ...attributes } },
    }),
  });
  return (JSON.parse(res.body) as { status?: { allowed?: boolean } }).status?.allowed === true;
}

/**
 * The Secrets among refs whose content the identity can obtain (get on the Secret, or list in its namespace):
 * the asking identity itself without a subject. Empty: none.
 */
export async function credentialExposure(
  kube: KubeClient,
  refs: SecretRef[],
  subject?: { user: string; groups: string[] },
): Promise<CredentialExposure[]> {
  const out: CredentialExposure[] = [];
  for (const ref of refs) {
    const verbs: string[] = [];
    if (await allowed(kube, { verb: 'get', namespace: ref.namespace, name: ref.name }, subject)) verbs.push('get');
    if (await allowed(kube, { verb: 'list', namespace: ref.namespace }, subject)) verbs.push('list');
    if (verbs.length > 0) out.push({ secret: `${ref.namespace}/${ref.name}`, verbs });
  }
  return out;
}

/** One sentence for a log line or a plan note. */
export function exposureMessage(who: string, found: CredentialExposure[]): string {
  const where = found.map((e) => `Secret ${e.secret} (${e.verbs.join(' and ')})`).join(', ');
  return `${who}'s Temporal credential sits in ${where}, which ${who}'s own Kubernetes token can read: whoever holds that token can reach Temporal as svm's worker. Deliver the credential as files no Kubernetes read returns (the chart's temporal.credentialsVolume, a CSI driver; docs/security.md, "Temporal credentials")`;
}

/** What `svm plan` reads of a worker Deployment: who it runs as, and where its credential and prune are set. */
export interface WorkerDeploymentView {
  name: string;
  namespace: string;
  serviceAccount: string;
  env: Record<string, string>;
}

interface DeploymentList {
  items?: Array<{
    metadata?: { name?: string; namespace?: string };
    spec?: {
      template?: {
        spec?: { serviceAccountName?: string; containers?: Array<{ name?: string; env?: Array<{ name?: string; value?: string }> }> };
      };
    };
  }>;
}

/** svm's worker Deployments (deploy/ and the chart label them alike), in every namespace. */
export async function workerDeployments(kube: KubeClient): Promise<WorkerDeploymentView[]> {
  const list = await kube.getJson<DeploymentList>('/apis/apps/v1/deployments', {
    labelSelector: 'app.kubernetes.io/name=svm,app.kubernetes.io/component=worker',
  });
  return (list.items ?? []).map((d) => {
    const env: Record<string, string> = {};
    for (const c of d.spec?.template?.spec?.containers ?? [])
      for (const e of c.env ?? []) if (e.name && e.value !== undefined) env[e.name] = e.value;
    return {
      name: d.metadata?.name ?? '',
      namespace: d.metadata?.namespace ?? '',
      serviceAccount: d.spec?.template?.spec?.serviceAccountName || 'default',
      env,
    };
  });
}

/**
 * `svm plan`'s notes about svm's own workers: a Temporal credential within the worker token's reach, and a prune
 * left to the operator (SVM_PRUNE=operator) while CRDs still hold older stored versions. Reading what the plan's
 * identity may not read is said, not fatal.
 */
export async function workerNotes(kube: KubeClient, opts: { crdsToPrune: number }): Promise<string[]> {
  let workers: WorkerDeploymentView[];
  try {
    workers = await workerDeployments(kube);
  } catch (err) {
    return [
      `svm's worker Deployments were not read (${reason(err)}): whether a worker's Temporal credential is within its token's reach was not checked`,
    ];
  }
  const notes: string[] = [];
  for (const w of workers) {
    const who = `worker ${w.namespace}/${w.name}`;
    if (w.env.SVM_PRUNE === 'operator' && opts.crdsToPrune > 0)
      notes.push(
        `${who} leaves the prune of CRDs' storedVersions to the operator (SVM_PRUNE=operator): once their migrations have succeeded, run \`svm prune --all\` with the operator's kubeconfig`,
      );
    let refs: SecretRef[];
    try {
      refs = parseSecretRefs(w.env.SVM_TEMPORAL_CREDENTIAL_SECRETS, w.namespace);
    } catch (err) {
      notes.push(`${who}: SVM_TEMPORAL_CREDENTIAL_SECRETS is malformed: ${reason(err)}`);
      continue;
    }
    if (refs.length === 0) continue;
    try {
      const found = await credentialExposure(kube, refs, serviceAccountSubject(w.namespace, w.serviceAccount));
      if (found.length > 0) notes.push(exposureMessage(who, found));
    } catch (err) {
      notes.push(`${who}: whether its Temporal credential is within its token's reach was not checked (${reason(err)})`);
    }
  }
  return notes;
}

function reason(err: unknown): string {
  if (err instanceof KubeError && err.status === 403) return 'forbidden to this identity';
  return err instanceof Error ? err.message.split('\n')[0]! : String(err);
}
