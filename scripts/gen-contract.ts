/**
 * `npm run gen:contract`: writes contract/v<N>/<name>.schema.json from the
 * zod schemas of the workflow contract (src/contract/json-schema.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { contractSchemas } from '../src/contract/json-schema';
import { CONTRACT_VERSION } from '../src/contract/definitions';

export const contractDir = path.join(__dirname, '..', 'contract', `v${CONTRACT_VERSION}`);
export const contractFile = (name: string) => path.join(contractDir, `${name}.schema.json`);
export const render = (schema: unknown) => JSON.stringify(schema, null, 2) + '\n';

if (require.main === module) {
  mkdirSync(contractDir, { recursive: true });
  for (const [name, schema] of Object.entries(contractSchemas())) writeFileSync(contractFile(name), render(schema));
  process.stderr.write(`wrote ${Object.keys(contractSchemas()).length} schemas to ${contractDir}\n`);
}
