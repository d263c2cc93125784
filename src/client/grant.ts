/**
 * The narrow grant of one migration (docs/security.md):
 * the worker's default rights re-encode the built-in resources the fence can
 * see, nothing else. A custom resource, or a resource of a group the fence
 * cannot guard (admission policies and their bindings, webhook
 * configurations, RBAC objects), is migrated only once the operator grants
 * `list` and `patch` on exactly that resource to the worker's
 * ServiceAccount: these manifests. For a group the fence cannot guard, the
 * grant is for one migration: delete it when the migration has succeeded.
 */
import YAML from 'yaml';
import type { ResourceRef } from '../api/resource';
import { needsManifestFence } from '../kube/fence-probe';

import { UNFENCED_GROUPS } from '../kube/migratable';

export { needsGrant, UNFENCED_GROUPS } from '../kube/migratable';

export const DEFAULT_SERVICE_ACCOUNT = 'svm-system/svm-migrator';

/** The name of the grant's ClusterRole and ClusterRoleBinding for a resource. */
export function grantName(ref: Pick<ResourceRef, 'group' | 'resource'>): string {
  const name = `svm-migrate-${ref.resource}${ref.group ? `.${ref.group}` : ''}`;
  return name.length <= 253 ? name : name.slice(0, 253);
}

/**
 * A ClusterRole with `verbs` on exactly this resource and its ClusterRoleBinding to a ServiceAccount
 * (namespace/name), both named `name`, as YAML after the comment lines `head`.
 */
function roleManifests(
  ref: Pick<ResourceRef, 'group' | 'resource'>,
  opts: { name: string; component: string; verbs: string[]; serviceAccount: string; head: string[] },
): string {
  const [namespace, account] = opts.serviceAccount.split('/');
  if (!namespace || !account) throw new Error(`--service-account must be NAMESPACE/NAME, not "${opts.serviceAccount}"`);
  const labels = { 'app.kubernetes.io/name': 'svm', 'app.kubernetes.io/component': opts.component };
  const role = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: opts.name, labels },
    rules: [{ apiGroups: [ref.group], resources: [ref.resource], verbs: opts.verbs }],
  };
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: opts.name, labels },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: opts.name },
    subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
  };
  return [...opts.head, YAML.stringify(role).trimEnd(), '---', YAML.stringify(binding).trimEnd(), ''].join('\n');
}

const resourceLabel = (ref: Pick<ResourceRef, 'group' | 'resource'>) => `${ref.resource}${ref.group ? `.${ref.group}` : ''}`;

/** A ClusterRole with list + patch on exactly this resource, bound to the worker's ServiceAccount (namespace/name). */
export function grantManifests(
  ref: Pick<ResourceRef, 'group' | 'resource' | 'custom'> & { aggregated?: boolean },
  serviceAccount = DEFAULT_SERVICE_ACCOUNT,
): string {
  const n = grantName(ref);
  const what = resourceLabel(ref);
  const head = ref.aggregated
    ? [
        `# Lets svm re-encode ${what} for one migration. An aggregated API server serves it: its`,
        `# requests are proxied past kube-apiserver's admission, so no fence of svm's sees them and`,
        `# while this grant exists the worker's token could change these objects: delete it as soon`,
        `# as the migration has succeeded:`,
        `#   kubectl delete clusterrolebinding,clusterrole ${n}`,
        `# The shipped worker (SVM_REQUIRE_FENCE=true) rewrites them only where a dry run finds svm's`,
        `# fence refusing its changes (an aggregated server that runs admission policies itself); else`,
        `# migrate them with a worker under your own credentials (docs/security.md).`,
      ]
    : UNFENCED_GROUPS.includes(ref.group)
      ? [
          `# Lets svm re-encode ${what} for one migration. Admission policies cannot guard`,
          `# ${ref.group}, so while this grant exists the worker's token could change`,
          `# these objects: delete it as soon as the migration has succeeded:`,
          `#   kubectl delete clusterrolebinding,clusterrole ${n}`,
          ...(needsManifestFence(ref)
            ? [
                `# The shipped worker (SVM_REQUIRE_STATIC_FENCE=true) rewrites them only while the fence loaded`,
                `# from a manifest (deploy/static-fence, Kubernetes >= 1.37) is in force; it checks by a dry run.`,
              ]
            : []),
        ]
      : [`# Lets svm re-encode ${what}: list, and an empty patch fenced to leave each object unchanged.`];
  return roleManifests(ref, { name: n, component: 'grant', verbs: ['list', 'patch'], serviceAccount, head });
}

/** The identity the managedFields rewrite writes as (deploy/managed-fields.yaml): the worker impersonates it. */
export const MANAGED_FIELDS_SERVICE_ACCOUNT = 'svm-system/svm-managed-fields';

/**
 * `svm grant <resource> --managed-fields`: `patch` on exactly this resource for the managedFields rewrite's
 * identity, whose fence (deploy/managed-fields.yaml) admits nothing but a change of managedFields apiVersions.
 */
export function managedFieldsGrantManifests(
  ref: Pick<ResourceRef, 'group' | 'resource'>,
  serviceAccount = MANAGED_FIELDS_SERVICE_ACCOUNT,
): string {
  const what = resourceLabel(ref);
  const n = `svm-managed-fields-${what}`.slice(0, 253);
  const head = UNFENCED_GROUPS.includes(ref.group)
    ? [
        `# Lets svm managed-fields rewrite the managedFields apiVersions of ${what}. Admission policies cannot`,
        `# guard ${ref.group}, so while this grant exists its identity could change these objects: delete it as`,
        `# soon as the rewrite is done:`,
      ]
    : [
        `# Lets svm managed-fields rewrite the managedFields apiVersions of ${what}: patch, fenced`,
        `# (deploy/managed-fields.yaml) to change nothing else. Delete it once the old version is gone:`,
      ];
  head.push(`#   kubectl delete clusterrolebinding,clusterrole ${n}`);
  return roleManifests(ref, { name: n, component: 'managed-fields-grant', verbs: ['patch'], serviceAccount, head });
}
