/** The drop check's conversionWebhook check: a CRD's conversion webhook, probed by metadata-only lists at its other served versions. */
import type { CustomResourceDefinition } from '../api/custom-resource-definition';
import type { DropCheck } from '../contract/drop';
import type { KubeClient } from './client';
import { why, type DropTarget, type ManagedFieldsFinding } from './drop-shared';
import { KubeError } from './errors';

interface WebhookClientConfig {
  url?: string;
  service?: { namespace?: string; name?: string; path?: string; port?: number };
}

function webhookWhere(c: WebhookClientConfig | undefined): string {
  if (c?.url) {
    try {
      const u = new URL(c.url);
      return `${u.host}${u.pathname}`;
    } catch {
      return 'a URL';
    }
  }
  if (c?.service) return `service ${c.service.namespace ?? '?'}/${c.service.name ?? '?'}:${c.service.port ?? 443}${c.service.path ?? ''}`;
  return '(no client config)';
}

/** A CRD's conversion webhook client config, where its strategy is Webhook. */
function conversionWebhookOf(crd: CustomResourceDefinition): WebhookClientConfig | undefined {
  const conversion = (crd.spec as { conversion?: { strategy?: string; webhook?: { clientConfig?: WebhookClientConfig } } }).conversion;
  return conversion?.strategy === 'Webhook' ? (conversion.webhook?.clientConfig ?? {}) : undefined;
}

/** One metadata-only list that probed a conversion webhook: the version it was asked at, and its error. */
interface ConversionProbe {
  version: string;
  error?: KubeError;
}

/**
 * The conversionWebhook check of a CRD, from lists at each of its served versions but the one to drop: the
 * managedFields list (every object) where it read that version, else a list of one object, metadata only.
 *
 * Note: a list converts only the objects stored at another version than the one it asks for, and may be served
 * from a watch cache filled while the webhook worked; no list is asked at the version to drop (it would count as a
 * client of it). So a working answer is what clients see now, not a proof the webhook converts every object.
 */
export async function conversionWebhookFinding(
  kube: KubeClient,
  { group, version }: DropTarget,
  crd: CustomResourceDefinition,
  listed: ManagedFieldsFinding,
): Promise<DropCheck> {
  if (!conversionWebhookOf(crd)) return conversionWebhookCheck(crd, version, []);
  const ref = { group, resource: crd.spec.names.plural, kind: crd.spec.names.kind };
  const versions = crd.spec.versions.filter((v) => v.served && v.name !== version).map((v) => v.name);
  const probes = await Promise.all(
    versions.map(async (v): Promise<ConversionProbe> => {
      if (v === listed.listedAt) return { version: v, ...(listed.listError ? { error: listed.listError } : {}) };
      try {
        await kube.listEach({ ...ref, version: v }, { limit: 1 }, () => undefined);
        return { version: v };
      } catch (err) {
        if (!(err instanceof KubeError)) throw err;
        return { version: v, error: err };
      }
    }),
  );
  return conversionWebhookCheck(crd, version, probes);
}

/** The conversionWebhook check from the probes (pure): NotYet where a list failed to convert, Unknown where one failed otherwise. */
function conversionWebhookCheck(crd: CustomResourceDefinition, version: string, probes: ConversionProbe[]): DropCheck {
  const webhook = conversionWebhookOf(crd);
  if (!webhook) return { check: 'conversionWebhook', verdict: 'Ready', reason: 'no conversion webhook (strategy None)' };
  const at = (p: ConversionProbe) => `${crd.spec.group}/${p.version}`;
  const converted = `converted by the webhook at ${webhookWhere(webhook)}`;
  const keep = `it has to keep converting ${version} until ${version} is removed from the CRD; remove it there first, then from the webhook`;
  const failed = probes.find((p) => p.error?.info.conversionFailed);
  if (failed)
    return {
      check: 'conversionWebhook',
      verdict: 'NotYet',
      reason:
        `${converted}, which fails: a metadata-only list at ${at(failed)} failed (${failed.error!.message}); until it converts ` +
        `again, objects stored at another version cannot be read or migrated, and ${keep}`,
    };
  const unprobed = probes.find((p) => p.error);
  if (unprobed)
    return {
      check: 'conversionWebhook',
      verdict: 'Unknown',
      reason: `${converted}, which could not be probed: a metadata-only list at ${at(unprobed)} failed (${why(unprobed.error)})`,
    };
  if (probes.length === 0)
    return {
      check: 'conversionWebhook',
      verdict: 'Unknown',
      reason: `${converted}, which could not be probed: no version but ${version} is served (a list at ${version} would itself be a request at it)`,
    };
  return {
    check: 'conversionWebhook',
    verdict: 'Ready',
    reason:
      `${converted}; metadata-only lists at ${probes.map(at).join(', ')} answered (each converts what is stored at another version; ` +
      `none is asked at ${version}, which would count as a client of it): ${keep}`,
  };
}
