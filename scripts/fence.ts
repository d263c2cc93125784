/**
 * The fence (docs/security.md, "The fence"): the ValidatingAdmissionPolicy that admits a request of the worker's
 * identity only if it is a re-encode that leaves the object as it was, or one of the worker's own writes, each
 * named. One source for every copy of it: deploy/worker-policy.yaml, its manifest-loaded twin in deploy/static-fence
 * (with the AdmissionConfiguration that loads it), and the chart's named templates (charts/svm/templates/_fence.tpl),
 * each rendered from its target's settings: the worker's ServiceAccount and namespace, the policy's name. The names
 * the worker writes come from the code that writes them (its Leases, its annotations, its records' groups).
 * `npm run gen` writes the files; test/unit-static-fence.test.ts fails when one differs from what this renders.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import YAML from 'yaml';
import { CREATED_BY_ANNOTATION } from '../src/activities/built-in';
import { MIGRATION_GROUP } from '../src/api/migration';
import { STANDARD_GROUP } from '../src/api/standard-migration';
import { WORKFLOW_ID_ANNOTATION } from '../src/kube/migrations';
import { DEFAULT_BUDGET_TIMING } from '../src/worker/budget';
import { DEFAULT_TIMING, LEADER_LEASE } from '../src/worker/leader';

export const ROOT = path.join(__dirname, '..');

/** The policy's (and its binding's) name in deploy/; the chart's is <namePrefix>-worker-no-op-only. */
export const FENCE_NAME = 'svm-worker-no-op-only';

/** The name suffix only a manifest-loaded policy may carry (KEP-5793). */
export const STATIC_SUFFIX = '.static.k8s.io';

/** Every budget member's Lease is named so (memberLeaseName in src/worker/budget.ts). */
export const MEMBER_LEASE_PREFIX = 'svm-worker-';

/** The standard objects svm creates for the built-in migrator are named so (src/workflows/delegate-to-built-in.ts). */
export const BUILT_IN_OBJECT_PREFIX = 'svm-';

/** The longest a Lease of the worker lasts (its leader election's and its budget membership's): a forged one lapses as soon. */
export const MAX_LEASE_SECONDS = Math.max(DEFAULT_TIMING.leaseDurationSeconds, DEFAULT_BUDGET_TIMING.leaseDurationSeconds);

/** What one copy of the fence is rendered from. */
export interface FenceSettings {
  /** The policy's and its binding's name. */
  name: string;
  /** The worker's user name as the API server gives it: system:serviceaccount:<namespace>:<name>. */
  user: string;
  /** The worker's namespace, where its Leases are. */
  namespace: string;
}

/** A generated file: its path under the repository's root, and its text. */
export interface GeneratedFile {
  file: string;
  text: string;
}

/** The worker's ServiceAccount as deploy/rbac.yaml ships it. */
export function deployServiceAccount(root = ROOT): { namespace: string; name: string } {
  const docs = YAML.parseAllDocuments(readFileSync(path.join(root, 'deploy', 'rbac.yaml'), 'utf8')).map((d) => d.toJS() as unknown);
  const sa = docs.find((d): d is { metadata: { name: string; namespace: string } } => (d as { kind?: string }).kind === 'ServiceAccount');
  if (!sa) throw new Error('deploy/rbac.yaml holds no ServiceAccount');
  return { namespace: sa.metadata.namespace, name: sa.metadata.name };
}

export const serviceAccountUser = (sa: { namespace: string; name: string }) => `system:serviceaccount:${sa.namespace}:${sa.name}`;

/** deploy/'s settings: the ServiceAccount of deploy/rbac.yaml, the policy named FENCE_NAME. */
export function deploySettings(root = ROOT): FenceSettings {
  const sa = deployServiceAccount(root);
  return { name: FENCE_NAME, user: serviceAccountUser(sa), namespace: sa.namespace };
}

/**
 * The chart's settings: Helm expressions, in the named template "svm.fence" whose context is
 * (dict "name" <the policy's name> "root" <the chart's context>). Note: each is substituted into the text as it
 * stands, so Helm renders it before YAML reads it; the values (DNS names) need no quoting either way.
 */
export const CHART_SETTINGS: FenceSettings = {
  name: '{{ .name }}',
  user: '{{ include "svm.migratorUser" .root }}',
  namespace: '{{ .root.Release.Namespace }}',
};

/** What the fence admits, said above each copy of it. */
const EXPLANATION = `# RBAC grants the worker \`patch\` on what it migrates, which RBAC cannot tell
# from a change; this policy, matched to the worker's identity only, admits a
# request of it only if it is one of these (docs/security.md, "The fence"):
#   - an update of a top-level object that leaves it as it was
#     (\`object == oldObject\`: every field of every kind, metadata with its
#     labels, annotations, ownerReferences, finalizers and managedFields; the
#     API server's own fields are equal here: an update carrying the listed
#     resourceVersion keeps it, and an empty patch changes no managedFields
#     entry);
#   - a CRD's status as the built-in's storedVersions protocol writes it:
#     status.storedVersions unchanged or pruned to exactly the storage
#     version, the StorageMigrating condition, nothing else of the CRD;
#   - the worker's own writes, each named:
#     - its Leases in its namespace, ${LEADER_LEASE} and ${MEMBER_LEASE_PREFIX}*: created,
#       renewed, a member's deleted, none held for more than ${MAX_LEASE_SECONDS} s;
#     - the status of its records (StorageVersionMigrations of both APIs,
#       StorageStates), but for the standard objects it created for the
#       built-in migrator: their status is the built-in's to write;
#     - on a StorageVersionMigration, the annotation
#       ${WORKFLOW_ID_ANNOTATION} (the bridge) and nothing else;
#     - the creates it makes, with no finalizers and no owners: a
#       StorageState named for its resource, a StorageVersionMigration with
#       svm's annotation (for the built-in, named ${BUILT_IN_OBJECT_PREFIX}*), an Event in
#       \`default\` about a StorageVersionMigration, its Leases;
#   - the questions about itself every user may ask (SelfSubjectAccessReview,
#     SelfSubjectRulesReview, SelfSubjectReview): they store nothing.
# Every other create, update, delete, connect and subresource of this identity
# is denied. Kubernetes never evaluates admission policies on admission
# policies and their bindings, so the worker holds no right on those
# (rbac.yaml); where you control the API servers, load this policy from a
# manifest too (docs/security.md, "The fence out of the API's reach").
`;

const GENERATED = '# Generated by `npm run gen` from scripts/fence.ts: edit that, not this file.\n';

/** A CEL test of the request's resource. */
const isResource = (group: string, resource: string) =>
  `request.resource.group == '${group}' && request.resource.resource == '${resource}'`;

/** What a request is, from the request alone: which of the worker's kinds, in its namespace, by which name. */
function requestVariables(namespace: string): string {
  return `    # request.subResource is absent (not empty) for a request on the object itself.
    - name: subresource
      expression: "has(request.subResource) ? request.subResource : ''"
    # A create names its object here; one by generateName (none of the worker's) has no name yet.
    - name: name
      expression: "has(request.name) ? request.name : ''"
    # Its Leases, by name: the leader election's and each process's budget membership.
    - name: lease
      expression: >-
        ${isResource('coordination.k8s.io', 'leases')} && request.namespace == '${namespace}' &&
        (variables.name == '${LEADER_LEASE}' || variables.name.startsWith('${MEMBER_LEASE_PREFIX}'))
    - name: memberLease
      expression: "variables.lease && variables.name.startsWith('${MEMBER_LEASE_PREFIX}')"
    # Its records: the StorageVersionMigrations of both APIs, and the StorageStates.
    - name: migrationObject
      expression: "request.resource.group in ['${MIGRATION_GROUP}', '${STANDARD_GROUP}'] && request.resource.resource == 'storageversionmigrations'"
    - name: storageState
      expression: "${isResource(MIGRATION_GROUP, 'storagestates')}"
    - name: recordStatus
      expression: "(variables.migrationObject || variables.storageState) && variables.subresource == 'status'"
    - name: crdStatus
      expression: "${isResource('apiextensions.k8s.io', 'customresourcedefinitions')} && variables.subresource == 'status'"
    # The questions about itself that every user may ask (system:basic-user): nothing is stored.
    - name: selfReview
      expression: >-
        (request.resource.group == 'authorization.k8s.io' && request.resource.resource in ['selfsubjectaccessreviews', 'selfsubjectrulesreviews']) ||
        ${isResource('authentication.k8s.io', 'selfsubjectreviews')}
`;
}

/** Whether a create is one the worker makes (read only for a create: they read object). */
const CREATE_VARIABLES = `    # What it creates: nothing that holds up a deletion or that the garbage collector would delete.
    - name: unowned
      expression: "!has(object.metadata.finalizers) && !has(object.metadata.ownerReferences)"
    # A StorageState is named for its resource (<resource>.<group>, the core group's by the resource alone).
    - name: createdStorageState
      expression: >-
        variables.storageState && variables.name == (has(object.spec.resource.group) && object.spec.resource.group != ''
          ? object.spec.resource.resource + '.' + object.spec.resource.group : object.spec.resource.resource)
    # A StorageVersionMigration svm creates carries its annotation: svm's API the workflow's ID (the bridge refuses
    # one whose workflow does not list it), the standard API the ID of the workflow that defers to the built-in.
    - name: createdMigrationObject
      expression: >-
        variables.migrationObject && has(object.metadata.annotations) && (request.resource.group == '${MIGRATION_GROUP}'
          ? '${WORKFLOW_ID_ANNOTATION}' in object.metadata.annotations
          : variables.name.startsWith('${BUILT_IN_OBJECT_PREFIX}') && '${CREATED_BY_ANNOTATION}' in object.metadata.annotations)
    # Where Events about cluster-scoped objects live: svm says there that no controller acts on a StorageVersionMigration.
    - name: createdEvent
      expression: >-
        ${isResource('', 'events')} && request.namespace == 'default' &&
        has(object.involvedObject.kind) && object.involvedObject.kind == 'StorageVersionMigration' && has(object.involvedObject.apiVersion) &&
        (object.involvedObject.apiVersion.startsWith('${STANDARD_GROUP}/') || object.involvedObject.apiVersion.startsWith('${MIGRATION_GROUP}/'))
`;

/** Whether an update changes only what the bridge writes (read only for an update: they read both objects). */
const UPDATE_VARIABLES = `    # The metadata a write of its own may not touch (an absent field is not an empty one).
    - name: sameOwnersAndLabels
      expression: >-
        has(object.metadata.labels) == has(oldObject.metadata.labels) && (!has(object.metadata.labels) || object.metadata.labels == oldObject.metadata.labels) &&
        has(object.metadata.ownerReferences) == has(oldObject.metadata.ownerReferences) && (!has(object.metadata.ownerReferences) || object.metadata.ownerReferences == oldObject.metadata.ownerReferences) &&
        has(object.metadata.finalizers) == has(oldObject.metadata.finalizers) && (!has(object.metadata.finalizers) || object.metadata.finalizers == oldObject.metadata.finalizers)
    - name: annotations
      expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"
    - name: oldAnnotations
      expression: "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"
    # The bridge ties a StorageVersionMigration to its workflow: the annotation set, nothing else of the object
    # changed (an update of the object itself leaves its status as it was; managedFields record the write).
    - name: attached
      expression: >-
        variables.migrationObject && object.spec == oldObject.spec && variables.sameOwnersAndLabels &&
        '${WORKFLOW_ID_ANNOTATION}' in variables.annotations &&
        variables.annotations.all(k, k == '${WORKFLOW_ID_ANNOTATION}' || (k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.annotations[k])) &&
        variables.oldAnnotations.all(k, k == '${WORKFLOW_ID_ANNOTATION}' || k in variables.annotations)
`;

/** The rules, each with the message a refused request reads. */
const VALIDATIONS = `  validations:
    - expression: "request.operation in ['CREATE', 'UPDATE'] || (request.operation == 'DELETE' && variables.memberLease)"
      messageExpression: >-
        'svm only re-encodes objects: a ' + request.operation + ' of ' + request.resource.resource + ' by its worker is denied'
      reason: Forbidden
    - expression: "variables.subresource == '' || variables.crdStatus || (variables.recordStatus && request.operation == 'UPDATE')"
      messageExpression: >-
        'svm re-encodes top-level objects only: ' + (request.operation == 'CREATE' ? 'a create' : 'an update') + ' of ' +
        request.resource.resource + '/' + variables.subresource + ' by its worker is denied'
      reason: Forbidden
    - expression: >-
        request.operation != 'CREATE' || variables.subresource != '' || variables.selfReview ||
        (variables.unowned && (variables.lease || variables.createdStorageState || variables.createdMigrationObject || variables.createdEvent))
      messageExpression: >-
        'svm creates only its Leases, its records and its Events: a create of ' + request.resource.resource + ' ' + variables.name + ' by its worker is denied'
      reason: Forbidden
    # The status of a standard StorageVersionMigration svm created for the built-in migrator is the built-in's to write:
    # svm's record of a delegated pass rests on it, so the worker's token may not write it.
    - expression: >-
        !(request.operation == 'UPDATE' && variables.recordStatus && request.resource.group == '${STANDARD_GROUP}' &&
          has(oldObject.metadata.annotations) && '${CREATED_BY_ANNOTATION}' in oldObject.metadata.annotations)
      messageExpression: >-
        'the status of ' + variables.name + ', a StorageVersionMigration svm created for the built-in migrator, is for the built-in migrator to write, not for its worker'
      reason: Forbidden
    - expression: "request.operation != 'UPDATE' || variables.subresource != '' || variables.lease || object == oldObject || variables.attached"
      messageExpression: >-
        'svm only re-encodes objects unchanged: its worker changed ' + request.resource.resource + ' ' + oldObject.metadata.name
      reason: Forbidden
    # Its Leases last as long as it writes them for: a forged one lapses as soon as its writer stops.
    - expression: >-
        !variables.lease || request.operation == 'DELETE' ||
        (has(object.spec.leaseDurationSeconds) && object.spec.leaseDurationSeconds <= ${MAX_LEASE_SECONDS})
      messageExpression: >-
        'svm holds its Leases for ${MAX_LEASE_SECONDS} s at most: its worker wrote ' + variables.name + ' for longer'
      reason: Forbidden
    # A CRD's status: the storedVersions protocol and nothing else.
    - expression: >-
        !variables.crdStatus || (
          object.spec == oldObject.spec && variables.sameOwnersAndLabels && variables.annotations == variables.oldAnnotations &&
          has(object.status.acceptedNames) == has(oldObject.status.acceptedNames) && (!has(object.status.acceptedNames) || object.status.acceptedNames == oldObject.status.acceptedNames) &&
          (has(object.status.conditions) ? object.status.conditions.filter(c, c.type != 'StorageMigrating') : []) ==
            (has(oldObject.status.conditions) ? oldObject.status.conditions.filter(c, c.type != 'StorageMigrating') : []) &&
          ((has(object.status.storedVersions) ? object.status.storedVersions : []) == (has(oldObject.status.storedVersions) ? oldObject.status.storedVersions : []) ||
           (has(object.status.storedVersions) && has(oldObject.status.storedVersions) &&
            object.status.storedVersions == object.spec.versions.filter(v, v.storage).map(v, v.name) &&
            object.status.storedVersions.all(v, v in oldObject.status.storedVersions))))
      messageExpression: >-
        'svm only prunes a CRD status.storedVersions to its storage version: its worker changed more of ' + oldObject.metadata.name
      reason: Forbidden
`;

/** deploy/'s labels of the fence's objects (YAML lines under metadata.labels). */
const DEPLOY_LABELS = '    app.kubernetes.io/name: svm';

/** The chart's: the recommended labels and helm.sh/chart of every object of the release (charts/svm/templates/_helpers.tpl). */
export const CHART_LABELS = '    {{- include "svm.labels" (dict "root" .root "component" "worker") | nindent 4 }}';

/** The fence's ValidatingAdmissionPolicy and its binding, as YAML documents; labels: the lines under metadata.labels. */
export function fencePolicy(s: FenceSettings, labels = DEPLOY_LABELS): string {
  return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ${s.name}
  labels:
${labels}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: ["*"]
        apiVersions: ["*"]
        operations: ["CREATE", "UPDATE", "DELETE", "CONNECT"]
        resources: ["*/*"]
  matchConditions:
    - name: is-the-svm-worker
      expression: "request.userInfo.username == '${s.user}'"
  # Variables are evaluated when a rule first reads them: those that read object or oldObject only where the
  # operation has one.
  variables:
${requestVariables(s.namespace)}${CREATE_VARIABLES}${UPDATE_VARIABLES}${VALIDATIONS}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: ${s.name}
  labels:
${labels}
spec:
  policyName: ${s.name}
  validationActions: ["Deny"]
`;
}

/** The AdmissionConfiguration that has the ValidatingAdmissionPolicy plugin load the fence from a directory. */
export const ADMISSION_CONFIGURATION = `# Pass to every kube-apiserver (>= 1.37) as --admission-control-config-file,
# with the fence's manifest in the directory staticManifestsDir names. If your
# API servers already have an AdmissionConfiguration, add the
# ValidatingAdmissionPolicy plugin entry to it instead.
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionPolicy
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: ValidatingAdmissionPolicyConfiguration
      staticManifestsDir: /etc/kubernetes/svm-fence
`;

const STATIC_NOTE = `# The fence as a manifest the API servers load at start (Kubernetes 1.37:
# ManifestBasedAdmissionControlConfig, beta and on by default, KEP-5793): no
# API request can change or delete it, not even a cluster administrator's,
# and unlike a policy made through the API it is also evaluated on admission
# policies and their bindings. The same policy as the one made through the
# API, under the name suffix \`${STATIC_SUFFIX}\` that only manifests may use.
# Copy it into the directory named by staticManifestsDir in
# admission-configuration.yaml, on every API server (docs/security.md).
`;

/** deploy/worker-policy.yaml. */
function deployFence(s: FenceSettings): string {
  return `# The fence: the worker's rights are a re-encode and nothing more.
${GENERATED}# It names the ServiceAccount of rbac.yaml,
#   ${s.user}:
# to run the worker under another, change it there and run \`npm run gen\`
# (the Helm chart names its own).
${EXPLANATION}${fencePolicy(s)}`;
}

/** deploy/static-fence/<name>.yaml. */
function deployStaticFence(s: FenceSettings): string {
  return `${STATIC_NOTE}${GENERATED}# It names the ServiceAccount of deploy/rbac.yaml,
#   ${s.user};
# the Helm chart renders its own for the release's (staticFence.enabled).
${EXPLANATION}${fencePolicy({ ...s, name: `${s.name}${STATIC_SUFFIX}` })}`;
}

/** charts/svm/templates/_fence.tpl: the fence and the AdmissionConfiguration as named templates. */
function chartTemplates(): string {
  return `{{/*
Generated by \`npm run gen\` from scripts/fence.ts, the source of deploy/worker-policy.yaml and deploy/static-fence
too: edit that, not this file (test/unit-static-fence.test.ts fails when it differs).
"svm.fence": the fence's policy and binding, named .name, for the release's ServiceAccount (.root: the chart's context).
"svm.admissionConfiguration": the AdmissionConfiguration that loads the fence from a manifest.
*/}}
{{- define "svm.fence" -}}
# The fence: the worker's rights are a re-encode and nothing more.
# Rendered by the chart for its ServiceAccount,
#   ${CHART_SETTINGS.user}.
${EXPLANATION}${fencePolicy(CHART_SETTINGS, CHART_LABELS)}{{- end -}}

{{- define "svm.admissionConfiguration" -}}
${ADMISSION_CONFIGURATION}{{- end -}}
`;
}

/** Every file the fence is written to, as `npm run gen` writes it. */
export function fenceFiles(root = ROOT): GeneratedFile[] {
  const deploy = deploySettings(root);
  return [
    { file: 'deploy/worker-policy.yaml', text: deployFence(deploy) },
    { file: `deploy/static-fence/${FENCE_NAME}.yaml`, text: deployStaticFence(deploy) },
    { file: 'deploy/static-fence/admission-configuration.yaml', text: ADMISSION_CONFIGURATION },
    { file: 'charts/svm/templates/_fence.tpl', text: chartTemplates() },
  ];
}
