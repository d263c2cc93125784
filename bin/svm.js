#!/usr/bin/env node
// The `svm` command (composed in cli/svm.ts). Runs the compiled code when
// `npm run build` produced it, otherwise the TypeScript sources through tsx.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const compiled = path.join(__dirname, '..', 'dist', 'cli', 'svm.js');
if (fs.existsSync(compiled)) {
  require(compiled).main();
} else {
  require('tsx/cjs');
  require(path.join(__dirname, '..', 'cli', 'svm.ts')).main();
}
