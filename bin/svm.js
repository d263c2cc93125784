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

// A client command's action runs from dist/cli/svm-client.js (scripts/bundle-cli.mjs): the same code in one file,
// with V8's code cache of it, for a start of a fraction of the time. Not the worker and the dev plane (their SDK
// must share one copy of @temporalio/common with what they load), nor --help and `svm version`, which load
// little anyway. SVM_CLIENT_BUNDLE=off turns it off.
const bundled = path.join(root, 'dist', 'cli', 'svm-client.js');
// Every command but these (and no command at all, `svm --help`) is a client command: a new one needs no entry here.
const UNBUNDLED_COMMANDS = ['worker', 'dev', 'version', 'help'];

function bundleFits(args) {
  const command = args[0];
  if (process.env.SVM_CLIENT_BUNDLE === 'off' || !command || command.startsWith('-') || UNBUNDLED_COMMANDS.includes(command)) return false;
  if (args.some((a) => a === '-h' || a === '--help')) return false;
  // An installed package (in a node_modules) was packed whole, and npm writes its files in no set order: their times
  // say nothing of which was built after which.
  if (root.split(path.sep).includes('node_modules')) return fs.existsSync(bundled);
  try {
    return fs.statSync(bundled).mtimeMs >= fs.statSync(compiled).mtimeMs;
  } catch {
    return false;
  }
}

/** Runs file as a CommonJS module compiled with the V8 code cache beside it (file.cache) when there is one. */
function loadWithCodeCache(file, writeCache) {
  const Module = require('node:module');
  const vm = require('node:vm');
  let cachedData;
  if (!writeCache) {
    try {
      cachedData = fs.readFileSync(`${file}.cache`);
    } catch {
      cachedData = undefined;
    }
  }
  const script = new vm.Script(Module.wrap(fs.readFileSync(file, 'utf8')), { filename: file, cachedData });
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  Module._cache[file] = m;
  script.runInThisContext().call(m.exports, m.exports, Module.createRequire(file), m, file, path.dirname(file));
  m.loaded = true;
  return { exports: m.exports, script };
}

if (process.env.SVM_WRITE_CODE_CACHE === '1') {
  // scripts/bundle-cli.mjs: load what the client commands load, then save the compiled code.
  const { exports, script } = loadWithCodeCache(bundled, true);
  exports.warm();
  fs.writeFileSync(`${bundled}.cache`, script.createCachedData());
} else if (compiledIsCurrent() && bundleFits(process.argv.slice(2))) {
  const { exports, script } = loadWithCodeCache(bundled, false);
  // SVM_START_REPORT=1: say on stderr what ran (the image's test and the start bench check it).
  if (process.env.SVM_START_REPORT === '1')
    process.stderr.write(`svm start: dist/cli/svm-client.js, code cache ${script.cachedDataRejected === false ? 'used' : 'not used'}\n`);
  exports.main();
} else if (compiledIsCurrent()) {
  if (process.env.SVM_START_REPORT === '1') process.stderr.write('svm start: dist/cli/svm.js\n');
  require(compiled).main();
} else {
  if (process.env.SVM_START_REPORT === '1') process.stderr.write('svm start: the sources, through tsx\n');
  // tsx is a dev dependency: a checkout has it; an installed package (or the image) runs its compiled code, never this.
  try {
    require('tsx/cjs');
  } catch {
    process.stderr.write(
      `error: no compiled code in ${path.join(root, 'dist')} to run, nor tsx to run the sources (npm ci installs it and builds dist/)\n`,
    );
    process.exit(1);
  }
  require(path.join(root, 'cli', 'svm.ts')).main();
}
