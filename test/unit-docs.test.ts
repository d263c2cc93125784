/**
 * The README and docs/ hold together: every relative link (and #anchor)
 * points at something that exists, every section of the README before its
 * 2026-11-25 rewrite still has a home (its heading in the README or in
 * docs/), and every worker setting is documented. No servers.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { settingSources } from '../src/worker/config';

const root = path.join(__dirname, '..');
const docs = fs
  .readdirSync(path.join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => path.join('docs', f));
const files = ['README.md', ...docs];
const read = (f: string) => fs.readFileSync(path.join(root, f), 'utf8');

/** Markdown outside fenced code blocks and inline code. */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to dashes. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

const headings = (text: string) => [...text.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)].map((m) => m[1]!);

void test('every relative link in README.md and docs/*.md points at an existing file (and heading)', () => {
  const broken: string[] = [];
  for (const f of files) {
    for (const m of prose(read(f)).matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file ? path.normalize(path.join(path.dirname(f), file)) : f;
      if (!fs.existsSync(path.join(root, resolved))) {
        broken.push(`${f}: ${target} (no ${resolved})`);
        continue;
      }
      if (anchor && resolved.endsWith('.md') && !headings(read(resolved)).map(slug).includes(anchor))
        broken.push(`${f}: ${target} (no heading #${anchor} in ${resolved})`);
    }
  }
  assert.deepEqual(broken, []);
});

/** The sections of the README before the rewrite of 2026-11-25 (commit a9f73c4); each moved, nearly verbatim. */
const OLD_README_HEADINGS = [
  'svm: Kubernetes storage version migration on Temporal',
  'Try it',
  'Requirements',
  'Using it',
  'The local control plane: shaped like a cluster',
  'Who may start a migration',
  'What the worker itself may do',
  'Under load: API Priority and Fairness',
  'Before an upgrade: `svm plan`',
  'A pre-upgrade Job',
  'Worker settings',
  'How a migration works',
  'Safe in HA: agreement',
  'Production shape: reaching each API server',
  'Automatic migration: the trigger',
  'Metrics',
  'Benchmark',
  'Install',
  'Architecture',
  'Development',
  'Changing workflow code',
];

void test('every section of the old README has a home in the README or docs/', () => {
  const all = new Set(files.flatMap((f) => headings(read(f))));
  assert.deepEqual(
    OLD_README_HEADINGS.filter((h) => !all.has(h)),
    [],
  );
});

void test('the README stays short: readable in five minutes', () => {
  const lines = read('README.md').split('\n').length;
  assert.ok(lines <= 260, `README.md has ${lines} lines`);
});

void test('docs/configuration.md documents every worker setting', () => {
  const conf = read('docs/configuration.md');
  const missing = [...new Set(Object.values(settingSources))].filter((v) => !conf.includes(`\`${v}\``));
  assert.deepEqual(missing, []);
});

void test("the README's first screen (its first 500 words) says what svm needs, what it prints and how to install it", () => {
  const words = read('README.md').split(/\s+/).filter(Boolean);
  const first = words.slice(0, 500).join(' ');
  const versions = JSON.parse(read('tools/versions.json')) as Record<string, string | { version: string }>;
  const version = (k: string) => {
    const v = versions[k]!;
    return (typeof v === 'string' ? v : v.version).replace(/^v/, '');
  };
  const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node.replace(/^>=/, '');
  const missing = Object.entries({
    'a Temporal server': /Temporal server/,
    // The releases the suite runs, as tools/versions.json pins them.
    [`Kubernetes ${version('kubernetes')}`]: new RegExp(version('kubernetes').replace(/\./g, '\\.')),
    [`Kubernetes ${version('kubernetesPrevious')}`]: new RegExp(version('kubernetesPrevious').replace(/\./g, '\\.')),
    [`temporal-server ${version('temporalServer')}`]: new RegExp(version('temporalServer').replace(/\./g, '\\.')),
    [`Node.js >= ${engines}`]: new RegExp(`Node\\.js >= ?${engines.replace(/\./g, '\\.')}`),
    // What it prints: svm status's table and svm migrate --wait's result.
    'svm status and its table': /\$ svm status RESOURCE PHASE MIGRATED RATE AGE/,
    'svm migrate --wait and its result': /\$ svm migrate \S+ --wait .*: Succeeded migrated=\d+/,
    // The way to a cluster: the chart and the CLI.
    'helm install': /helm install /,
    'the CLI from npm': /npx /,
  }).filter(([, re]) => !re.test(first));
  assert.deepEqual(missing, [], `the README's first 500 words do not name: ${missing.map(([k]) => k).join(', ')}`);
});
