// Lists the failed tests of the TAP files given, each with where it is and the first lines of its error,
// and the slowest tests: the end of a long suite's log is often all a CI page keeps.
/* global process, console */
import { readFileSync } from 'node:fs';

const failures = [];
const timed = [];
const KEEP = /^(location|failureType|error|code|expected|actual):/;
for (const path of process.argv.slice(2)) {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    continue;
  }
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)(not )?ok \d+ - (.*)$/.exec(lines[i]);
    if (!m) continue;
    const depth = m[1].length;
    m[3] = m[3].replace(/\\#/g, '#'); // TAP escapes # in names
    const failed = m[2] !== undefined;
    const detail = [];
    let seconds;
    let location = '';
    let stack = 0;
    let block = 0; // lines still kept of a multi-line value (error: |-, expected:, actual:)
    let blockIndent = 0;
    for (let j = i + 1; j < lines.length; j++) {
      const l = lines[j].trim();
      if (l === '...' || /^(not )?ok \d+ - /.test(l)) break;
      const indent = lines[j].length - lines[j].trimStart().length;
      if (block > 0 && (l === '' || indent > blockIndent)) {
        if (l !== '') {
          detail.push(`  ${l.slice(0, 300)}`);
          block--;
        }
        continue;
      }
      block = 0;
      if (/^(error|expected|actual):\s*(\|-?|>-?)?$/.test(l)) {
        block = 8;
        blockIndent = indent;
      }
      const d = /^duration_ms: ([\d.]+)/.exec(l);
      if (d) seconds = Number(d[1]) / 1000;
      const loc = /^location: '(.*)'$/.exec(l);
      if (loc) location = loc[1].replace(/^.*\/(test\/)/, '$1');
      if (KEEP.test(l) && !l.startsWith('location:')) detail.push(l.slice(0, 400));
      if (l.startsWith('stack:')) stack = 3;
      else if (stack > 0) {
        detail.push(`  at ${l.slice(0, 200)}`);
        stack--;
      }
    }
    if (depth === 0 && seconds !== undefined) timed.push({ name: m[3], seconds, location });
    if (failed) failures.push({ depth, name: m[3], location, detail });
  }
}
timed.sort((a, b) => b.seconds - a.seconds);
console.log('== slowest tests');
for (const t of timed.slice(0, 15)) {
  console.log(`${t.seconds.toFixed(0).padStart(6)} s  ${t.location.replace(/:\d+:\d+$/, '')}  ${t.name.slice(0, 110)}`);
}
if (failures.length === 0) {
  console.log('== no test failed');
} else {
  console.log(`== failed: ${failures.length} (a test whose subtests failed is listed after them)`);
  for (const f of failures) {
    const pad = ' '.repeat(Math.min(f.depth, 8));
    console.log(`${pad}✖ ${f.location}  ${f.name}`);
    for (const d of f.detail) console.log(`${pad}    ${d}`);
  }
}
