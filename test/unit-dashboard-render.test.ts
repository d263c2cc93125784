/**
 * The renderer behind docs/dashboard.png (src/dev/dashboard.ts,
 * scripts/dashboard-picture.ts) understands every panel type, unit and
 * variable the shipped dashboard uses, so a new kind of panel fails here
 * instead of rendering blank in the picture. No servers.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  PANEL_TYPES,
  allPanels,
  dashboardProblems,
  formatValue,
  legendOf,
  renderHtml,
  substitute,
  variablesOf,
  type Dashboard,
  type DashboardPanel,
  type PanelData,
  type QueryWindow,
} from '../src/dev/dashboard';

const DASHBOARD = path.join(__dirname, '..', 'deploy', 'grafana', 'svm-dashboard.json');
const shipped = () => JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as Dashboard;
const window: QueryWindow = { start: 1_790_000_000, end: 1_790_000_300, step: 2, scrapeInterval: 2 };

void test('the shipped dashboard: every panel type, unit and variable is one the renderer draws', () => {
  const d = shipped();
  assert.deepEqual(dashboardProblems(d), []);
  const types = new Set(allPanels(d).map((p) => p.type));
  for (const t of types) assert.ok(t in PANEL_TYPES, `panel type ${t}`);
  // Every panel that is not a row has a query the renderer can substitute.
  for (const p of allPanels(d).filter((x) => x.type !== 'row'))
    for (const t of p.targets ?? []) assert.doesNotThrow(() => substitute(t.expr!, window, d.templating?.list), `${p.title}: ${t.expr}`);
});

void test('what the renderer does not know is a problem, not a blank panel', () => {
  const d: Dashboard = {
    title: 'x',
    templating: {
      list: [
        { name: 'datasource', type: 'datasource', query: 'prometheus' },
        { name: 'job', type: 'adhoc', query: 'label_values(up, job)' },
      ],
    },
    panels: [
      { type: 'piechart', id: 1, title: 'pie', gridPos: { h: 8, w: 8, x: 0, y: 0 }, targets: [{ expr: 'up' }] },
      {
        type: 'timeseries',
        id: 2,
        title: 'ts',
        gridPos: { h: 8, w: 8, x: 8, y: 0 },
        fieldConfig: { defaults: { unit: 'celsius' } },
        targets: [{ refId: 'A', expr: 'rate(svm_objects_total{namespace="$namespace"}[$__rate_interval])' }],
      },
      {
        type: 'row',
        id: 3,
        title: 'collapsed',
        collapsed: true,
        gridPos: { h: 1, w: 24, x: 0, y: 8 },
        panels: [{ type: 'bargauge', id: 4, title: 'inner', gridPos: { h: 8, w: 8, x: 0, y: 9 }, targets: [{ expr: 'up' }] }],
      },
      { type: 'stat', id: 5, title: 'empty', gridPos: { h: 4, w: 4, x: 16, y: 0 } },
    ],
  };
  const problems = dashboardProblems(d);
  for (const want of [
    /variable \$job: type adhoc/,
    /panel 1 "pie": panel type piechart/,
    /panel 2 "ts": unit celsius/,
    /panel 2 "ts": variable \$namespace/,
    /panel 4 "inner": panel type bargauge/,
    /panel 5 "empty": no query/,
  ])
    assert.ok(
      problems.some((p) => want.test(p)),
      `${want} not in:\n${problems.join('\n')}`,
    );
  assert.equal(problems.length, 6, problems.join('\n'));
});

void test('Grafana variables are substituted as Grafana does for Prometheus', () => {
  assert.deepEqual(variablesOf('rate(x{a="$a",b=~"${b:regex}"}[$__rate_interval]) + [[c]]').sort(), ['__rate_interval', 'a', 'b', 'c']);
  // $__rate_interval: max($__interval + scrape interval, 4 x scrape interval)
  assert.equal(substitute('rate(x[$__rate_interval])', window), 'rate(x[8s])');
  assert.equal(substitute('rate(x[$__rate_interval])', { ...window, step: 60, scrapeInterval: 15 }), 'rate(x[75s])');
  assert.equal(substitute('increase(x[$__range]) / $__range_s', { ...window, end: window.start + 3600 }), 'increase(x[1h]) / 3600');
  assert.equal(substitute('x[${__interval}]', { ...window, step: 120 }), 'x[2m]');
  const vars = [
    { name: 'namespace', type: 'custom', current: { value: 'svm-system' } },
    { name: 'resource', type: 'custom', current: { value: ['a.x', 'b.y'] } },
    { name: 'all', type: 'custom', current: { value: '$__all' } },
  ];
  assert.equal(
    substitute('x{namespace="$namespace",resource=~"${resource}",r=~"[[all]]"}', window, vars),
    'x{namespace="svm-system",resource=~"(a.x|b.y)",r=~".*"}',
  );
  assert.throws(() => substitute('x{a="$nope"}', window), /unknown variable \$nope/);
});

void test('legends, units', () => {
  assert.equal(legendOf('{{outcome}} on {{ instance }}', { outcome: 'migrated', instance: 'w:9464' }), 'migrated on w:9464');
  assert.equal(legendOf(undefined, { __name__: 'up', job: 'svm' }), 'up{job="svm"}');
  assert.equal(legendOf('', {}), 'value');
  assert.equal(formatValue(97.34, 'ops'), '97.3 ops/s');
  assert.equal(formatValue(150.4, 'ops'), '150 ops/s');
  assert.equal(formatValue(0.0123, 's'), '12.3 ms');
  assert.equal(formatValue(2.5, 's'), '2.5 s');
  assert.equal(formatValue(150 * 1024 * 1024, 'bytes'), '150 MiB');
  assert.equal(formatValue(4, ''), '4');
  assert.equal(formatValue(NaN, ''), 'NaN');
});

void test('every panel of the shipped dashboard is drawn at its place, with data or a "No data"', () => {
  const d = shipped();
  const data = new Map<DashboardPanel, PanelData>();
  const panels = allPanels(d).filter((p) => p.type !== 'row');
  panels.forEach((p, i) => {
    if (i % 5 === 4) {
      data.set(p, { series: [] }); // a panel without data still says so
      return;
    }
    const points: Array<[number, number]> = [];
    for (let t = window.start; t <= window.end; t += window.step) points.push([t, t % 60 === 0 ? NaN : (t - window.start) / 10]);
    data.set(p, { series: (p.targets ?? []).map((t, j) => ({ legend: `${t.legendFormat ?? ''} ${j}`, points })) });
  });
  const html = renderHtml(d, data, window, { width: 1400, caption: 'caption text' });
  assert.ok(html.includes('caption text'));
  assert.equal((html.match(/class="panel /g) ?? []).length, panels.length);
  assert.equal((html.match(/class="row"/g) ?? []).length, allPanels(d).length - panels.length);
  panels.forEach((p, i) => {
    const box = html
      .split(`class="panel ${p.type}"`)
      .find((b) => b.includes(`<div class="title">${p.title!.replace(/&/g, '&amp;')}</div>`));
    assert.ok(box, `panel "${p.title}" is not drawn`);
    const body = box.slice(0, box.indexOf('class="panel ') >= 0 ? box.indexOf('class="panel ') : undefined);
    if (i % 5 === 4) assert.match(body, /No data|<svg/, `${p.title}: empty panel says nothing`);
    else if (p.type === 'timeseries') assert.match(body, /<path d="M/, `${p.title}: no line`);
    else if (p.type === 'stat') assert.match(body, /class="big"/, `${p.title}: no number`);
    else if (p.type === 'table') assert.match(body, /<td>/, `${p.title}: no row`);
    else assert.fail(`${p.title}: panel type ${p.type} has no check here`);
  });
  // Laid out by gridPos: the panel at x=12,y=7 (w=12) is right of the one at x=0.
  const at = (p: DashboardPanel) => {
    const m = new RegExp(`left:(\\d+)px;top:(\\d+)px;[^"]*"><div class="title">${p.title}</div>`).exec(html);
    assert.ok(m, `${p.title} has no place`);
    return Number(m[1]);
  };
  const a = panels.find((p) => p.gridPos.x === 0 && p.gridPos.y === 7)!;
  const b = panels.find((p) => p.gridPos.x === 12 && p.gridPos.y === 7)!;
  assert.ok(at(b) > at(a) + 600, `${at(a)} ${at(b)}`);
});

void test('the cluster variable: every svm series of the shipped dashboard is selected by it, and All takes every series', () => {
  const d = shipped();
  const cluster = d.templating?.list?.find((v) => v.name === 'cluster');
  assert.equal(cluster?.type, 'query');
  for (const p of allPanels(d))
    for (const t of p.targets ?? [])
      for (const m of (t.expr ?? '').matchAll(/\bsvm_[a-z0-9_]+(\{[^}]*\})?/g))
        assert.match(m[1] ?? '', /^\{cluster=~"\$cluster"/, `panel "${p.title ?? ''}": ${m[0]} is not selected by $cluster`);
  assert.equal(substitute('svm_leader{cluster=~"$cluster"}', window, [cluster!]), 'svm_leader{cluster=~".*"}');
  assert.equal(
    substitute('svm_leader{cluster=~"$cluster"}', window, [{ ...cluster!, current: { value: ['east', 'west'] } }]),
    'svm_leader{cluster=~"(east|west)"}',
  );
});
