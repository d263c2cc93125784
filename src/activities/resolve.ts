/**
 * The minimal start's resolution, as an activity (durable, visible in the
 * workflow's history): `gizmos.example.com`, `secrets`, or a plural with a
 * group, taken exactly (plural and group, no short names or kinds), checked
 * against discovery: unknown, subresource, not stored, not updatable are
 * refused (non-retryable, type InvalidResource) with the accepted forms.
 * Nothing is written.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { ResourceRef } from '../api/resource';
import type { KubeClient } from '../kube/client';
import { InvalidResourceError } from '../kube/resolve';
import { resolveExact } from '../kube/resolve-exact';
import { RESOURCE_FORMS } from '../contract/definitions';
import { INVALID_RESOURCE } from '../contract/reasons';

/** `gizmos.example.com` -> {group: example.com, resource: gizmos}; `secrets` -> core; with a group given, the name is the plural. */
export function splitResourceName(resource: string, group?: string): { group: string; resource: string } {
  if (group !== undefined) return { group, resource };
  const dot = resource.indexOf('.');
  return dot < 0 ? { group: '', resource } : { group: resource.slice(dot + 1), resource: resource.slice(0, dot) };
}

export function createResolveActivities(kube: KubeClient) {
  return {
    async resolveMigrationResource(input: { resource: string; group?: string }): Promise<ResourceRef> {
      try {
        return await resolveExact(kube, splitResourceName(input.resource.trim(), input.group));
      } catch (err) {
        if (!(err instanceof InvalidResourceError)) throw err; // the API servers away: retried
        throw ApplicationFailure.create({ type: INVALID_RESOURCE, message: `${err.message}; ${RESOURCE_FORMS}`, nonRetryable: true });
      }
    },
  };
}
