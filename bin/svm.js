#!/usr/bin/env node
// The `svm` command (composed in cli/svm.ts). Runs the compiled code in dist/ (made by `npm ci`, the prepare
// script, and by `npm run build:fast` or `npm run build`) unless a TypeScript file of src/ or cli/ beside it is
// newer than dist/cli/svm.js: then, as when there is no compiled code or SVM_FROM_SOURCE=1, the sources run
// through tsx (seconds slower to start, never stale). The image ships dist/ without the sources.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const root = path.join(__dirname, '..');
const compiled = path.join(root, 'dist', 'cli', 'svm.js');

/** Whether a .ts file under dir was modified after t (ms since the epoch). */
function sourceNewerThan(dir, t) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return false;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() ? sourceNewerThan(p, t) : e.name.endsWith('.ts') && fs.statSync(p).mtimeMs > t) return true;
  }
  return false;
}

function compiledIsCurrent() {
  if (process.env.SVM_FROM_SOURCE === '1') return false;
  let built;
  try {
    built = fs.statSync(compiled).mtimeMs;
  } catch {
    return false;
  }
  return !['src', 'cli'].some((d) => sourceNewerThan(path.join(root, d), built));
}

if (compiledIsCurrent()) {
  require(compiled).main();
} else {
  require('tsx/cjs');
  require(path.join(root, 'cli', 'svm.ts')).main();
}
