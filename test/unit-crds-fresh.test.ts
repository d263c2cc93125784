import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { migrationCrdsYaml } from '../src/api/crds';

for (const file of ['deploy/crds.yaml', 'charts/svm/crds/crds.yaml']) {
  void test(`${file} is what the zod schemas generate (run \`npm run gen\` after changing src/api/migration.ts)`, () => {
    const onDisk = readFileSync(path.join(__dirname, '..', file), 'utf8');
    assert.equal(onDisk, migrationCrdsYaml());
  });
}
