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
/** The cluster a workflow belongs to (a named worker's: SVM_CLUSTER); unset on a single-cluster worker's workflows. */
export const MigrationCluster = defineSearchAttributeKey('MigrationCluster', SearchAttributeType.KEYWORD);
/** On a cluster's registration (docs/fleet.md): the Kubernetes versions its API servers report, and when its worker last reported. */
export const MigrationKubeVersions = defineSearchAttributeKey('MigrationKubeVersions', SearchAttributeType.KEYWORD_LIST);
export const MigrationLastSeen = defineSearchAttributeKey('MigrationLastSeen', SearchAttributeType.DATETIME);
/** On a campaign and each of its members (docs/fleet.md): the campaign's name; a member's rows are paged by it. */
export const MigrationCampaign = defineSearchAttributeKey('MigrationCampaign', SearchAttributeType.KEYWORD);

/** Name and CLI type name (as `temporal operator search-attribute create --type` spells it). */
export const searchAttributeDefinitions: ReadonlyArray<{ name: string; type: 'Keyword' | 'Int' | 'KeywordList' | 'Datetime' }> = [
  { name: MigrationResource.name, type: 'Keyword' },
  { name: MigrationGroup.name, type: 'Keyword' },
  { name: MigrationPhase.name, type: 'Keyword' },
  { name: MigrationMigrated.name, type: 'Int' },
  { name: MigrationCluster.name, type: 'Keyword' },
  { name: MigrationKubeVersions.name, type: 'KeywordList' },
  { name: MigrationLastSeen.name, type: 'Datetime' },
  { name: MigrationCampaign.name, type: 'Keyword' },
];
