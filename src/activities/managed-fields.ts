/**
 * The managedFields rewrite as an activity (rewriteManagedFields's one step), off unless the worker was given the
 * identity it writes as (SVM_MANAGED_FIELDS_AS, set by deploy/managed-fields.yaml and the chart's
 * managedFields.rewrite): a ServiceAccount the worker may impersonate and nothing else, fenced to change only the
 * apiVersion of managedFields entries, with `patch` on the resources granted to it one by one
 * (`svm grant <resource> --managed-fields`). The worker lists (metadata only) as itself; every patch goes as that
 * identity. No object's content is read or written. Bad input and a rewrite that is not turned on or not granted
 * are refused before any write (non-retryable: InvalidInput, NotEnabled).
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { ManagedFieldsInput, ManagedFieldsResult } from '../contract/drop';
import type { KubeClient } from '../kube/client';
import { rewriteManagedFieldsAt } from '../kube/managed-fields';
import { InvalidResourceError, resolveResource } from '../kube/resolve';
import { INVALID_INPUT, NOT_ENABLED } from '../contract/reasons';

const refuse = (type: typeof INVALID_INPUT | typeof NOT_ENABLED, message: string) =>
  ApplicationFailure.create({ type, message, nonRetryable: true });

export function createManagedFieldsActivities(deps: { kube: KubeClient; managedFieldsAs?: string }) {
  return {
    async rewriteManagedFields(input: ManagedFieldsInput): Promise<ManagedFieldsResult> {
      if (!deps.managedFieldsAs)
        throw refuse(
          NOT_ENABLED,
          'the managedFields rewrite is off on this worker: it changes metadata, so it runs only as an identity of its own (SVM_MANAGED_FIELDS_AS; deploy/managed-fields.yaml, or the chart with managedFields.rewrite=true)',
        );
      const discovered = await deps.kube.discover();
      let ref;
      try {
        ref = await resolveResource(deps.kube, input.resource, discovered);
      } catch (err) {
        if (err instanceof InvalidResourceError) throw refuse(INVALID_INPUT, err.message);
        throw err;
      }
      const label = ref.group ? `${ref.resource}.${ref.group}` : ref.resource;
      const slash = input.from.indexOf('/');
      const [fromGroup, fromVersion] = [input.from.slice(0, slash), input.from.slice(slash + 1)];
      if (fromGroup !== ref.group)
        throw refuse(INVALID_INPUT, `${input.from} is not a version of ${label} (its group is ${ref.group || 'the core group'})`);
      const served = discovered.filter((r) => r.group === ref.group && r.name === ref.resource).map((r) => r.version);
      let to = input.to;
      if (!to) {
        if (ref.custom) {
          const crd = await deps.kube.getJson<{ spec: { versions: Array<{ name: string; storage?: boolean }> } }>(
            `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${label}`,
          );
          to = crd.spec.versions.find((v) => v.storage)?.name;
        } else to = ref.version;
      }
      if (!to || to === fromVersion)
        throw refuse(
          INVALID_INPUT,
          `${input.from} is the version ${label} is ${input.to ? 'to be rewritten to' : 'stored or preferred at'}: name another with to (--to)`,
        );
      if (!served.includes(to)) throw refuse(INVALID_INPUT, `${label} is not served at ${ref.group}/${to} (served: ${served.join(', ')})`);

      // Turned on and granted? Asked as the identity itself, before any write.
      const writer = deps.kube.impersonating(deps.managedFieldsAs);
      try {
        const review = await writer.raw('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
          body: JSON.stringify({
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: { resourceAttributes: { group: ref.group, resource: ref.resource, verb: 'patch' } },
          }),
        });
        if (review.status === 403)
          throw refuse(
            NOT_ENABLED,
            `the worker may not act as ${deps.managedFieldsAs}: apply deploy/managed-fields.yaml (or the chart with managedFields.rewrite=true) to turn the managedFields rewrite on`,
          );
        if (review.status !== 201 && review.status !== 200)
          throw new Error(`asking whether ${deps.managedFieldsAs} may patch ${label}: HTTP ${review.status}`);
        if (!(JSON.parse(review.body) as { status?: { allowed?: boolean } }).status?.allowed)
          throw refuse(
            NOT_ENABLED,
            `${deps.managedFieldsAs} may not patch ${label}: grant it with \`svm grant ${label} --managed-fields | kubectl apply -f -\``,
          );
        const result = await rewriteManagedFieldsAt(deps.kube, writer, { ...ref, version: to }, input.from, `${ref.group}/${to}`, (n) =>
          Context.current().heartbeat(`${n} objects listed`),
        );
        return { resource: label, from: input.from, to: `${ref.group}/${to}`, ...result };
      } finally {
        writer.close();
      }
    },
  };
}
