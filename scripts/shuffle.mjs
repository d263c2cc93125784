#!/usr/bin/env node
// Prints its arguments after the first in an order drawn from the first (a seed: a whole number, or `random`), one a
// line; on stderr the seed, so that an order that failed can be run again (SVM_TEST_SHUFFLE=<seed> npm test).
/* global process */
// Every seed printed replays: only `random` draws one (it used to be drawn for `1` too, so SVM_TEST_SHUFFLE=1 printed
// another seed each run and seed 1 itself could never be run). A seed is taken as written, in decimal digits, below
// 2^32 (the generator's state: a larger one would give the order of another seed).
const [seedArg, ...items] = process.argv.slice(2);
const seed = seedArg === 'random' ? Math.floor(Math.random() * 2 ** 31) : /^[0-9]{1,10}$/.test(seedArg ?? '') ? Number(seedArg) : NaN;
if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) {
  process.stderr.write(`SVM_TEST_SHUFFLE must be a whole number below 2^32 (a seed) or 'random', not '${seedArg ?? ''}'\n`);
  process.exit(2);
}
// mulberry32: a small seeded generator, the same order for the same seed on every machine.
let a = seed >>> 0;
const next = () => {
  a = (a + 0x6d2b79f5) >>> 0;
  let t = a;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
for (let i = items.length - 1; i > 0; i--) {
  const j = Math.floor(next() * (i + 1));
  [items[i], items[j]] = [items[j], items[i]];
}
process.stderr.write(`the files in a shuffled order, seed ${seed} (SVM_TEST_SHUFFLE=${seed} gives it again)\n`);
process.stdout.write(items.map((f) => `${f}\n`).join(''));
