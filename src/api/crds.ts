/**
 * The CustomResourceDefinitions of migration.k8s.io, generated from the zod
 * schemas in ./migration so that the CRDs and the code cannot drift.
 * `npm run gen` writes them to deploy/crds.yaml; a unit test fails when that
 * file is stale.
 */
import { z } from 'zod';
import YAML from 'yaml';
import {
  MIGRATION_GROUP,
  MIGRATION_VERSION,
  StorageStateSpec,
  StorageStateStatus,
  StorageVersionMigrationSpec,
  StorageVersionMigrationStatus,
} from './migration';

type JsonSchema = Record<string, unknown>;

/** zod's JSON Schema made structural for Kubernetes: no $schema, no additionalProperties: false. */
function structural(schema: z.ZodType): JsonSchema {
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (node && typeof node === 'object') {
      const out: JsonSchema = {};
      for (const [k, v] of Object.entries(node)) {
        if (k === '$schema' || (k === 'additionalProperties' && v === false)) continue;
        if (k === 'maximum' || k === 'minimum') continue; // zod's safe-integer bounds are noise here
        out[k] = strip(v);
      }
      if (out.type === 'integer') out.format = 'int64';
      return out;
    }
    return node;
  };
  return strip(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'throw' })) as JsonSchema;
}

function crd(opts: {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: z.ZodType;
  status: z.ZodType;
  columns: Array<{ name: string; type: string; jsonPath: string; priority?: number }>;
}) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${opts.plural}.${MIGRATION_GROUP}`,
      annotations: {
        // A *.k8s.io group requires this annotation; this API is not approved upstream.
        'api-approved.kubernetes.io': 'unapproved, experimental-only; please use a different group',
      },
    },
    spec: {
      group: MIGRATION_GROUP,
      scope: 'Cluster',
      // No `shortNames: []`: the API server stores an empty list as absent, so a server-side apply of [] by another
      // field manager (Helm 4 applies crds/ that way) conflicts with ours over a field neither actually sets.
      names: {
        kind: opts.kind,
        listKind: `${opts.kind}List`,
        plural: opts.plural,
        singular: opts.singular,
        ...(opts.shortNames.length > 0 ? { shortNames: opts.shortNames } : {}),
      },
      versions: [
        {
          name: MIGRATION_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [...opts.columns, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: structural(opts.spec),
                status: structural(opts.status),
              },
            },
          },
        },
      ],
    },
  };
}

export function migrationCrds() {
  return [
    crd({
      kind: 'StorageVersionMigration',
      plural: 'storageversionmigrations',
      singular: 'storageversionmigration',
      shortNames: ['svm'],
      spec: StorageVersionMigrationSpec,
      status: StorageVersionMigrationStatus,
      columns: [
        { name: 'Resource', type: 'string', jsonPath: '.spec.resource.resource' },
        { name: 'Group', type: 'string', jsonPath: '.spec.resource.group' },
        { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
        { name: 'Migrated', type: 'integer', jsonPath: '.status.progress.migrated' },
        { name: 'Failed', type: 'integer', jsonPath: '.status.progress.failed' },
        { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1 },
      ],
    }),
    crd({
      kind: 'StorageState',
      plural: 'storagestates',
      singular: 'storagestate',
      shortNames: [],
      spec: StorageStateSpec,
      status: StorageStateStatus,
      columns: [
        { name: 'Current', type: 'string', jsonPath: '.status.currentStorageVersionHash' },
        { name: 'Persisted', type: 'string', jsonPath: '.status.persistedStorageVersionHashes' },
        { name: 'Heartbeat', type: 'date', jsonPath: '.status.lastHeartbeatTime' },
      ],
    }),
  ];
}

export function migrationCrdsYaml(): string {
  return (
    '# Generated from src/api/migration.ts by `npm run gen`. Do not edit.\n' +
    migrationCrds()
      .map((c) => YAML.stringify(c))
      .join('---\n')
  );
}
