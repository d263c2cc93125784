/**
 * `npm run gen`: writes the generated manifests. deploy/crds.yaml and the Helm chart's charts/svm/crds/crds.yaml
 * from the zod schemas (src/api/migration.ts); the fence's copies (deploy/worker-policy.yaml, deploy/static-fence,
 * charts/svm/templates/_fence.tpl) from scripts/fence.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { migrationCrdsYaml } from '../src/api/crds';
import { fenceFiles, ROOT } from './fence';

const files = [...['deploy/crds.yaml', 'charts/svm/crds/crds.yaml'].map((file) => ({ file, text: migrationCrdsYaml() })), ...fenceFiles()];
for (const { file, text } of files) {
  const out = path.join(ROOT, file);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, text);
  process.stderr.write(`wrote ${out}\n`);
}
