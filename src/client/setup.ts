/**
 * `svm setup`: registers the project's search attributes on a Temporal
 * namespace that lacks them (idempotent) and says what it did.
 */
import type { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { searchAttributeDefinitions } from '../contract/search-attributes';

const indexedType = {
  Keyword: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  Int: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT,
  KeywordList: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  Datetime: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
} as const;

export interface SetupResult {
  added: string[];
  present: string[];
}

export async function registerSearchAttributes(connection: Connection, namespace: string): Promise<SetupResult> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Map<string, number>(Object.entries(existing.customAttributes ?? {}).map(([k, v]) => [k, Number(v)]));
  const added: string[] = [];
  const present: string[] = [];
  const missing: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const sa of searchAttributeDefinitions) {
    const want = indexedType[sa.type];
    const got = have.get(sa.name);
    if (got === undefined) {
      missing[sa.name] = want;
      added.push(`${sa.name} (${sa.type})`);
    } else if (got !== want) {
      throw new Error(
        `search attribute ${sa.name} exists on namespace ${namespace} with another type (${temporal.api.enums.v1.IndexedValueType[got]}); svm needs ${sa.type}`,
      );
    } else present.push(sa.name);
  }
  if (added.length > 0) await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
  return { added, present };
}
