/** Writes deploy/crds.yaml from the zod schemas (src/api/migration.ts). */
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { migrationCrdsYaml } from '../src/api/crds';

const out = path.join(__dirname, '..', 'deploy', 'crds.yaml');
writeFileSync(out, migrationCrdsYaml());
process.stderr.write(`wrote ${out}\n`);
