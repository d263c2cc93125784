/**
 * The Grafana dashboard (deploy/grafana/svm-dashboard.json) and the alerting
 * rules (deploy/prometheus/svm-alerts.yaml) use only metrics the worker
 * registers itself (src/worker/metrics.ts): a renamed or removed metric, or a
 * panel on a metric nobody exports, fails here. No servers.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse, stringify } from 'yaml';
import { metricNames } from '../src/worker/metrics';

const root = path.join(__dirname, '..');
const DASHBOARD = path.join(root, 'deploy', 'grafana', 'svm-dashboard.json');
const ALERTS = path.join(root, 'deploy', 'prometheus', 'svm-alerts.yaml');

/** PromQL words that are not metric names. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'inf',
  'nan',
]);

/**
 * The metric names a PromQL expression reads: identifiers left once strings,
 * label matchers ({...}), label lists after by/on/..., range and subquery
 * brackets ([15m]) and numbers are removed, except function names (followed by "(").
 */
function metricsOf(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b\d+(\.\d+)?([eE][+-]?\d+)?\b/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*(?=\s*(\(?))/g)) {
    const word = m[0];
    if (m[1] === '(' || KEYWORDS.has(word.toLowerCase())) continue;
    names.add(word);
  }
  return [...names];
}

/** Every "expr" anywhere in a parsed JSON or YAML document. */
function exprs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) exprs(n, out);
  else if (node && typeof node === 'object')
    for (const [k, v] of Object.entries(node)) {
      if (k === 'expr' && typeof v === 'string') out.push(v);
      else exprs(v, out);
    }
  return out;
}

/** A histogram's series carry suffixes its registered name does not. */
const base = (name: string, registered: Set<string>) =>
  registered.has(name)
    ? name
    : (['_bucket', '_sum', '_count'].map((s) => name.replace(new RegExp(`${s}$`), '')).find((n) => registered.has(n)) ?? name);

void test('metricsOf: names, not functions, labels, keywords or durations', () => {
  assert.deepEqual(
    metricsOf(
      'max by (resource) (a_metric and on (resource, instance) (b_ts == on (resource) group_left max by (resource) (b_ts))) == 1',
    ).sort(),
    ['a_metric', 'b_ts'],
  );
  assert.deepEqual(metricsOf('sum by (outcome) (rate(svm_objects_total{outcome="failed", resource=~"x.+"}[15m])) > 0 or vector(0)'), [
    'svm_objects_total',
  ]);
  assert.deepEqual(metricsOf('histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))'), ['h_bucket']);
  assert.deepEqual(metricsOf('absent(up{job="svm"})'), ['up']);
});

void test('the dashboard and the alerts read only metrics the worker registers', async () => {
  const registered = new Set(await metricNames());
  const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: unknown[] };
  const rules = parse(fs.readFileSync(ALERTS, 'utf8')) as { kind: string; spec: { groups: Array<{ rules: Array<{ alert: string }> }> } };

  const sources = { [path.relative(root, DASHBOARD)]: exprs(dashboard), [path.relative(root, ALERTS)]: exprs(rules) };
  for (const [file, list] of Object.entries(sources)) {
    assert.ok(list.length >= 5, `${file}: only ${list.length} expressions`);
    const unknown: string[] = [];
    for (const e of list) {
      const names = metricsOf(e);
      assert.ok(names.length > 0, `${file}: no metric in ${e}`);
      for (const n of names) if (!registered.has(base(n, registered))) unknown.push(`${n} (in ${e.trim()})`);
    }
    assert.deepEqual(unknown, [], `${file} reads metrics the worker does not register:\n${unknown.join('\n')}`);
  }

  // process_* and nodejs_* are prom-client's standard names, which every Node.js process Prometheus scrapes exports:
  // a query of them takes svm's targets only (those with svm_worker_up), and no alert keys on them.
  const shared = (e: string) => metricsOf(e).some((n) => /^(process|nodejs)_/.test(n));
  const unjoined = exprs(dashboard).filter((e) => shared(e) && !/\band on \(job, instance\) svm_worker_up\b/.test(e));
  assert.deepEqual(unjoined, [], 'dashboard queries of process metrics that would mix in other processes');
  assert.ok(exprs(dashboard).some(shared), 'the dashboard shows the process metrics');
  assert.deepEqual(exprs(rules).filter(shared), [], 'alerts on metrics every Node.js process exports');

  // The alerts the operations guide promises.
  assert.equal(rules.kind, 'PrometheusRule');
  const alerts = rules.spec.groups.flatMap((g) => g.rules.map((r) => r.alert));
  for (const a of [
    'SvmMigrationWaitingForAgreement',
    'SvmObjectsFailing',
    'SvmBudgetStarvingMigration',
    'SvmNoLiveWorker',
    'SvmCurrentVersionWithoutWorker',
    'SvmLeaderLeaseUnheld',
  ])
    assert.ok(alerts.includes(a), `missing alert ${a}`);
  const ops = fs.readFileSync(path.join(root, 'docs', 'operations.md'), 'utf8');
  for (const a of alerts) assert.ok(ops.includes(a), `docs/operations.md does not document ${a}`);

  // Each alert with a runbook names it in runbook_url (not in its description), a section of docs/operations.md;
  // SvmStatusMirrorFailing has none (the bridge repairs the statuses; its description says where to look).
  const anchors = new Set([...ops.matchAll(/^#+ (.+)$/gm)].map((m) => anchorOf(m[1]!)));
  const annotated = rules.spec.groups.flatMap((g) => g.rules) as Array<{ alert: string; annotations: Record<string, string> }>;
  for (const { alert, annotations } of annotated) {
    assert.doesNotMatch(annotations.description!, /Runbook:/, `${alert}: the runbook belongs in runbook_url`);
    if (alert === 'SvmStatusMirrorFailing') continue;
    const url = annotations.runbook_url;
    assert.match(url ?? '', /^docs\/operations\.md#/, `${alert}: runbook_url`);
    assert.ok(anchors.has(url!.split('#')[1]!), `${alert}: ${url} names no section of docs/operations.md`);
  }
});

/** GitHub's anchor of a Markdown heading: lower case, punctuation but - and _ dropped, spaces as -. */
const anchorOf = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** promtool from Prometheus (Debian's prometheus package; npm test as root installs it: scripts/preflight.ts). */
const promtool = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;

void test('promtool: the rules are valid and the alerts fire as deploy/prometheus/svm-alerts.test.yaml expects', () => {
  assert.ok(promtool, 'promtool is missing: apt-get install prometheus (npm test as root installs it)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-rules-'));
  try {
    const rule = parse(fs.readFileSync(ALERTS, 'utf8')) as { spec: unknown };
    fs.writeFileSync(path.join(dir, 'svm-rules.yml'), stringify(rule.spec));
    fs.copyFileSync(path.join(root, 'deploy', 'prometheus', 'svm-alerts.test.yaml'), path.join(dir, 'svm-alerts.test.yaml'));
    execFileSync('promtool', ['check', 'rules', path.join(dir, 'svm-rules.yml')], { stdio: 'pipe' });
    execFileSync('promtool', ['test', 'rules', path.join(dir, 'svm-alerts.test.yaml')], { stdio: 'pipe' });
    // The dashboard's queries parse as PromQL: each checked as a recording rule.
    const queries = exprs(JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')));
    const recording = {
      groups: [{ name: 'dashboard', rules: queries.map((expr, i) => ({ record: `svm:dashboard_query:${i}`, expr })) }],
    };
    fs.writeFileSync(path.join(dir, 'dashboard.yml'), stringify(recording));
    execFileSync('promtool', ['check', 'rules', path.join(dir, 'dashboard.yml')], { stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer; message: string };
    assert.fail(`${e.message}\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

interface RuleTest {
  alert_rule_test?: Array<{ eval_time: string; alertname: string; exp_alerts: unknown[] }>;
}

void test('promtool: the SvmCurrentVersionWithoutWorker test fails on a wrong expectation (no alert after the rollback, one during the rollout)', () => {
  assert.ok(promtool, 'promtool is missing: run scripts/ensure-plane-packages.sh (as root) or apt-get install prometheus');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-rules-'));
  try {
    fs.writeFileSync(path.join(dir, 'svm-rules.yml'), stringify((parse(fs.readFileSync(ALERTS, 'utf8')) as { spec: unknown }).spec));
    const shipped = parse(fs.readFileSync(path.join(root, 'deploy', 'prometheus', 'svm-alerts.test.yaml'), 'utf8')) as {
      tests: RuleTest[];
    };
    const cases = (t: { tests: RuleTest[] }) =>
      t.tests.flatMap((g) => g.alert_rule_test ?? []).filter((c) => c.alertname === 'SvmCurrentVersionWithoutWorker');
    const firing = cases(shipped).filter((c) => c.exp_alerts.length > 0);
    const silent = cases(shipped).filter((c) => c.exp_alerts.length === 0);
    assert.ok(firing.length > 0 && silent.length > 0, 'the shipped test expects the alert both silent and firing');
    const wrongs: Array<[string, (c: { exp_alerts: unknown[] }[], all: { exp_alerts: unknown[] }[]) => void]> = [
      ['no alert after the rollback', (f) => f.forEach((c) => (c.exp_alerts = []))],
      ['an alert during the rollout', (f, s) => s.forEach((c) => (c.exp_alerts = f[0]!.exp_alerts))],
    ];
    for (const [name, mutate] of wrongs) {
      const t = structuredClone(shipped);
      const all = cases(t);
      mutate(
        all.filter((c) => c.exp_alerts.length > 0),
        all.filter((c) => c.exp_alerts.length === 0),
      );
      fs.writeFileSync(path.join(dir, 'wrong.test.yaml'), stringify(t));
      const r = spawnSync('promtool', ['test', 'rules', path.join(dir, 'wrong.test.yaml')], { encoding: 'utf8' });
      assert.notEqual(r.status, 0, `promtool passed a test expecting ${name}`);
      assert.match(r.stdout + r.stderr, /FAILED:[\s\S]*alertname: SvmCurrentVersionWithoutWorker/, name);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void test("promtool: the dashboard's process panels show svm's workers only, a pool once, and follow the cluster variable", () => {
  assert.ok(promtool, 'promtool is missing: apt-get install prometheus (npm test as root installs it)');
  const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as unknown;
  const rss = exprs(dashboard).find((e) => e.startsWith('process_resident_memory_bytes'));
  assert.ok(rss, 'no RSS panel');
  // Grafana's substitution of $cluster: All is .*, one cluster its name.
  const at = (cluster: string) => rss.replaceAll('$cluster', cluster);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-dash-'));
  try {
    fs.writeFileSync(path.join(dir, 'none.yml'), stringify({ groups: [] }));
    // A single worker (a), a pool of east and west (p: its process metrics unlabelled), another Node.js process (o).
    const input_series = [
      { series: 'process_resident_memory_bytes{job="svm",instance="a"}', values: '100x5' },
      { series: 'svm_worker_up{job="svm",instance="a"}', values: '1x5' },
      { series: 'process_resident_memory_bytes{job="svm",instance="p"}', values: '200x5' },
      { series: 'svm_worker_up{job="svm",instance="p",cluster="east"}', values: '1x5' },
      { series: 'svm_worker_up{job="svm",instance="p",cluster="west"}', values: '1x5' },
      { series: 'process_resident_memory_bytes{job="other",instance="o"}', values: '300x5' },
    ];
    const sample = (instance: string, value: number) => ({
      labels: `process_resident_memory_bytes{job="svm",instance="${instance}"}`,
      value,
    });
    const promql_expr_test = [
      { expr: at('.*'), eval_time: '2m', exp_samples: [sample('a', 100), sample('p', 200)] },
      { expr: at('east'), eval_time: '2m', exp_samples: [sample('p', 200)] },
      { expr: at('north'), eval_time: '2m', exp_samples: [] },
    ];
    fs.writeFileSync(
      path.join(dir, 'dashboard.test.yml'),
      stringify({ rule_files: ['none.yml'], tests: [{ interval: '1m', input_series, promql_expr_test }] }),
    );
    execFileSync('promtool', ['test', 'rules', path.join(dir, 'dashboard.test.yml')], { stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer; message: string };
    assert.fail(`${e.message}\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
