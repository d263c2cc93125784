/** Writes deploy/crds.yaml and the Helm chart's charts/svm/crds/crds.yaml from the zod schemas (src/api/migration.ts). */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { migrationCrdsYaml } from '../src/api/crds';

const root = path.join(__dirname, '..');
for (const out of [path.join(root, 'deploy', 'crds.yaml'), path.join(root, 'charts', 'svm', 'crds', 'crds.yaml')]) {
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, migrationCrdsYaml());
  process.stderr.write(`wrote ${out}\n`);
}
