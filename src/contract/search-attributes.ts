/**
 * The custom search attributes the migrator keeps current on its workflows, so
 * a person can filter the Temporal UI by resource, phase and progress. The dev
 * plane, docker-compose and `svm setup` register exactly this list.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const MigrationResource = defineSearchAttributeKey('MigrationResource', SearchAttributeType.KEYWORD);
export const MigrationGroup = defineSearchAttributeKey('MigrationGroup', SearchAttributeType.KEYWORD);
export const MigrationPhase = defineSearchAttributeKey('MigrationPhase', SearchAttributeType.KEYWORD);
export const MigrationMigrated = defineSearchAttributeKey('MigrationMigrated', SearchAttributeType.INT);

/** Name and CLI type name (as `temporal operator search-attribute create --type` spells it). */
export const searchAttributeDefinitions: ReadonlyArray<{ name: string; type: 'Keyword' | 'Int' }> = [
  { name: MigrationResource.name, type: 'Keyword' },
  { name: MigrationGroup.name, type: 'Keyword' },
  { name: MigrationPhase.name, type: 'Keyword' },
  { name: MigrationMigrated.name, type: 'Int' },
];
