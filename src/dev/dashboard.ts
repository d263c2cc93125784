/**
 * A small renderer of the shipped Grafana dashboard (deploy/grafana/svm-dashboard.json)
 * over a Prometheus server's HTTP API, for docs/dashboard.png
 * (scripts/dashboard-picture.ts). Grafana itself cannot be built here, so
 * this reads the dashboard's own panels (type, title, gridPos, unit, each
 * target's PromQL and legendFormat), substitutes Grafana's variables, asks
 * Prometheus (query_range for time series, an instant query at the end for
 * stat and table panels) and draws each panel as SVG in one HTML page laid
 * out by gridPos. It understands only what it lists below: a panel type,
 * unit or variable it does not know is a problem (dashboardProblems), so a
 * new kind of panel fails test/unit-dashboard-render.test.ts instead of
 * rendering blank.
 */

export interface DashboardTarget {
  refId?: string;
  expr?: string;
  legendFormat?: string;
  hide?: boolean;
}

export interface DashboardPanel {
  type: string;
  id?: number;
  title?: string;
  description?: string;
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: DashboardTarget[];
  fieldConfig?: { defaults?: { unit?: string; decimals?: number } };
  collapsed?: boolean;
  /** A collapsed row's panels. */
  panels?: DashboardPanel[];
}

export interface DashboardVariable {
  name: string;
  type: string;
  query?: string;
  current?: { value?: string | string[]; text?: string | string[] };
}

export interface Dashboard {
  title: string;
  panels: DashboardPanel[];
  templating?: { list?: DashboardVariable[] };
}

/** Panel types drawn, and how each is queried. */
export const PANEL_TYPES = {
  row: 'none',
  timeseries: 'range',
  stat: 'instant',
  table: 'instant',
} as const;
export type PanelType = keyof typeof PANEL_TYPES;

/** Units formatted (Grafana's unit ids); '' is Grafana's default (a plain number). */
export const UNITS = ['', 'none', 'short', 'ops', 'reqps', 's', 'ms', 'bytes', 'percentunit'] as const;

/** Grafana's built-in variables this renderer substitutes. */
export const BUILTIN_VARIABLES = [
  '__rate_interval',
  '__interval',
  '__interval_ms',
  '__range',
  '__range_s',
  '__range_ms',
  '__from',
  '__to',
] as const;

/** Kinds of dashboard variables substituted: a data source (only one Prometheus is asked), or a fixed value (its current one). */
export const VARIABLE_TYPES = ['datasource', 'constant', 'custom', 'textbox', 'interval', 'query'] as const;

/** Every panel, collapsed rows' panels included, in layout order. */
export function allPanels(d: Dashboard): DashboardPanel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** The variables an expression uses: $name, ${name}, ${name:format} and [[name]]. */
export function variablesOf(expr: string): string[] {
  const out = new Set<string>();
  for (const m of expr.matchAll(/\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]/g))
    out.add(m[1] ?? m[2] ?? m[3]!);
  return [...out];
}

/** What this renderer cannot draw faithfully in d: unknown panel types, units, variables or variable types. Empty when it can. */
export function dashboardProblems(d: Dashboard): string[] {
  const problems: string[] = [];
  const declared = new Map((d.templating?.list ?? []).map((v) => [v.name, v]));
  for (const v of declared.values())
    if (!(VARIABLE_TYPES as readonly string[]).includes(v.type)) problems.push(`variable $${v.name}: type ${v.type} is not rendered`);
  for (const p of allPanels(d)) {
    const name = `panel ${p.id ?? '?'} "${p.title ?? ''}"`;
    if (!(p.type in PANEL_TYPES)) {
      problems.push(`${name}: panel type ${p.type} is not rendered`);
      continue;
    }
    const unit = p.fieldConfig?.defaults?.unit ?? '';
    if (!(UNITS as readonly string[]).includes(unit)) problems.push(`${name}: unit ${unit} is not rendered`);
    if (p.type === 'row') continue;
    const targets = (p.targets ?? []).filter((t) => !t.hide);
    if (targets.length === 0) problems.push(`${name}: no query`);
    for (const t of targets) {
      if (!t.expr) problems.push(`${name}: target ${t.refId ?? '?'} has no expr`);
      for (const v of variablesOf(`${t.expr ?? ''} ${t.legendFormat ?? ''}`))
        if (!(BUILTIN_VARIABLES as readonly string[]).includes(v) && !declared.has(v))
          problems.push(`${name}: variable $${v} is neither built in nor declared`);
    }
  }
  return problems;
}

/** A Prometheus duration (what Grafana writes for $__interval etc.). */
export function promDuration(seconds: number): string {
  const s = Math.max(1, Math.round(seconds));
  if (s % 3600 === 0) return `${s / 3600}h`;
  if (s % 60 === 0) return `${s / 60}m`;
  return `${s}s`;
}

export interface QueryWindow {
  /** Unix seconds. */
  start: number;
  end: number;
  /** Seconds between points of a range query ($__interval). */
  step: number;
  /** The scrape interval of the data (Grafana's data source setting; $__rate_interval is at least four of it). */
  scrapeInterval: number;
}

/**
 * Substitutes Grafana's variables as Grafana does for a Prometheus data
 * source: $__interval is the step, $__rate_interval max($__interval + scrape
 * interval, 4 x scrape interval), $__range the window; a declared variable
 * its current value (a data source variable is not used in expressions).
 */
export function substitute(expr: string, w: QueryWindow, vars: DashboardVariable[] = []): string {
  const range = w.end - w.start;
  const builtin: Record<string, string> = {
    __interval: promDuration(w.step),
    __interval_ms: String(Math.round(w.step * 1000)),
    __rate_interval: promDuration(Math.max(w.step + w.scrapeInterval, 4 * w.scrapeInterval)),
    __range: promDuration(range),
    __range_s: String(Math.round(range)),
    __range_ms: String(Math.round(range * 1000)),
    __from: String(Math.round(w.start * 1000)),
    __to: String(Math.round(w.end * 1000)),
  };
  const value = (name: string): string => {
    if (name in builtin) return builtin[name]!;
    const v = vars.find((x) => x.name === name);
    if (!v) throw new Error(`unknown variable $${name}`);
    // A query variable (label_values) is drawn at its current value, or All: the renderer asks no Prometheus for its values.
    const cur = v.current?.value ?? (v.type === 'query' ? '$__all' : (v.query ?? ''));
    const list = Array.isArray(cur) ? cur : [cur];
    if (list.includes('$__all')) return '.*';
    return list.length === 1 ? list[0]! : `(${list.join('|')})`;
  };
  return expr.replace(
    /\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]/g,
    (_m, a?: string, b?: string, c?: string) => value(a ?? b ?? c!),
  );
}

/** One series of a query's answer: its labels and its points (unix seconds, value; NaN breaks a line). */
export interface Series {
  labels: Record<string, string>;
  points: Array<[number, number]>;
}

/** A legend: legendFormat's {{label}} filled in, else the series' labels as Prometheus writes them. */
export function legendOf(format: string | undefined, labels: Record<string, string>): string {
  if (format && format !== '__auto') return format.replace(/\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g, (_m, l: string) => labels[l] ?? '');
  const { __name__: name, ...rest } = labels;
  const inner = Object.entries(rest)
    .map(([k, v]) => `${k}="${v}"`)
    .join(', ');
  return `${name ?? ''}${inner ? `{${inner}}` : ''}` || 'value';
}

/** What a panel shows: per target, its series (range points, or one point at the end for instant panels), or an error. */
export interface PanelData {
  series: Array<{ legend: string; points: Array<[number, number]> }>;
  error?: string;
}

interface PromAnswer {
  status: string;
  error?: string;
  data?: {
    resultType: string;
    result: Array<{ metric: Record<string, string>; values?: Array<[number, string]>; value?: [number, string] }>;
  };
}

/** Asks Prometheus (base URL) for every panel's targets over the window. */
export async function queryDashboard(d: Dashboard, prometheus: string, w: QueryWindow): Promise<Map<DashboardPanel, PanelData>> {
  const vars = d.templating?.list ?? [];
  const out = new Map<DashboardPanel, PanelData>();
  for (const p of allPanels(d)) {
    const kind = PANEL_TYPES[p.type as PanelType];
    if (!kind || kind === 'none') continue;
    const data: PanelData = { series: [] };
    for (const t of (p.targets ?? []).filter((x) => !x.hide && x.expr)) {
      const query = substitute(t.expr!, w, vars);
      const params =
        kind === 'range'
          ? new URLSearchParams({ query, start: String(w.start), end: String(w.end), step: String(w.step) })
          : new URLSearchParams({ query, time: String(w.end) });
      const res = await fetch(`${prometheus}/api/v1/${kind === 'range' ? 'query_range' : 'query'}?${params.toString()}`);
      const body = (await res.json()) as PromAnswer;
      if (body.status !== 'success' || !body.data) {
        data.error = `${t.refId ?? ''}: ${body.error ?? res.status}`;
        continue;
      }
      for (const r of body.data.result) {
        const points: Array<[number, number]> = r.values
          ? r.values.map(([ts, v]) => [ts, Number(v)])
          : r.value
            ? [[r.value[0], Number(r.value[1])]]
            : [];
        data.series.push({ legend: legendOf(t.legendFormat, r.metric), points });
      }
    }
    out.set(p, data);
  }
  return out;
}

const PALETTE = ['#73BF69', '#F2CC0C', '#5794F2', '#FF9830', '#F2495C', '#B877D9', '#8AB8FF', '#FADE2A'];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A value in a unit, as Grafana writes it (about three significant digits). */
export function formatValue(v: number, unit = ''): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : v > 0 ? '+Inf' : '-Inf';
  const num = (x: number) => {
    const a = Math.abs(x);
    if (a === 0) return '0';
    if (a >= 100) return x.toFixed(0);
    if (a >= 10) return String(Number(x.toFixed(1)));
    if (a >= 1) return String(Number(x.toFixed(2)));
    return String(Number(x.toPrecision(2)));
  };
  const scaled = (x: number, steps: Array<[number, string]>) => {
    for (const [f, s] of steps) if (Math.abs(x) >= f) return `${num(x / f)} ${s}`;
    return `${num(x)} ${steps[steps.length - 1]![1]}`;
  };
  switch (unit) {
    case 'ops':
      return `${num(v)} ops/s`;
    case 'reqps':
      return `${num(v)} req/s`;
    case 's':
      if (v === 0) return '0 s';
      return Math.abs(v) >= 1 ? `${num(v)} s` : Math.abs(v) >= 0.001 ? `${num(v * 1000)} ms` : `${num(v * 1e6)} µs`;
    case 'ms':
      return Math.abs(v) >= 1000 ? `${num(v / 1000)} s` : `${num(v)} ms`;
    case 'bytes':
      return scaled(v, [
        [1024 ** 3, 'GiB'],
        [1024 ** 2, 'MiB'],
        [1024, 'KiB'],
        [1, 'B'],
      ]);
    case 'percentunit':
      return `${num(v * 100)}%`;
    default:
      return Math.abs(v) >= 1e6 ? `${num(v / 1e6)} Mil` : Math.abs(v) >= 1e4 ? `${num(v / 1e3)} K` : num(v);
  }
}

/** Round tick values covering [lo, hi]. */
function ticks(lo: number, hi: number, count: number): number[] {
  const span = hi - lo || 1;
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

const hhmmss = (t: number) => new Date(t * 1000).toISOString().slice(11, 19);

/** A time series panel's SVG: lines over the window, y axis in the panel's unit, x axis in UTC. */
export function timeseriesSvg(data: PanelData, w: QueryWindow, width: number, height: number, unit = ''): string {
  const left = 62;
  const right = 10;
  const top = 8;
  const bottom = 22;
  const pw = width - left - right;
  const ph = height - top - bottom;
  const values = data.series.flatMap((s) => s.points.map((p) => p[1]).filter(Number.isFinite));
  const lo = Math.min(0, ...values);
  let hi = Math.max(...values, lo);
  if (hi - lo < 1e-9) hi = lo + 1; // no data, or flat at lo: an axis of whole numbers
  const yt = ticks(lo, hi, 4);
  hi = Math.max(hi, yt[yt.length - 1] ?? hi);
  const x = (t: number) => left + ((t - w.start) / (w.end - w.start)) * pw;
  const y = (v: number) => top + ph - ((v - lo) / (hi - lo || 1)) * ph;
  const parts: string[] = [];
  for (const v of yt) {
    parts.push(`<line x1="${left}" x2="${left + pw}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" class="grid"/>`);
    parts.push(`<text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" class="axis" text-anchor="end">${esc(formatValue(v, unit))}</text>`);
  }
  const span = w.end - w.start;
  const tStep = [10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].find((s) => span / s <= Math.max(2, Math.floor(pw / 90))) ?? 3600;
  for (let t = Math.ceil(w.start / tStep) * tStep; t <= w.end; t += tStep) {
    parts.push(`<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${top}" y2="${top + ph}" class="grid"/>`);
    parts.push(`<text x="${x(t).toFixed(1)}" y="${height - 6}" class="axis" text-anchor="middle">${hhmmss(t)}</text>`);
  }
  data.series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    let d = '';
    let pen = false;
    for (const [t, v] of s.points) {
      if (!Number.isFinite(v)) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    }
    if (d) parts.push(`<path d="${d}" stroke="${color}" fill="none" stroke-width="1.6"/>`);
  });
  return `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>`;
}

function legendHtml(data: PanelData): string {
  return `<div class="legend">${data.series
    .map((s, i) => {
      const last = [...s.points].reverse().find((p) => Number.isFinite(p[1]));
      return `<span><i style="background:${PALETTE[i % PALETTE.length]}"></i>${esc(s.legend)}${last ? '' : ' (no value)'}</span>`;
    })
    .join('')}</div>`;
}

/** How many lines the legend wraps to at this width (about 6.5 px per character at 11.5 px, plus the swatch and gap). */
function legendRowsOf(data: PanelData, width: number): number {
  let rows = 1;
  let used = 0;
  for (const s of data.series) {
    const w = s.legend.length * 6.5 + 33;
    if (used > 0 && used + w > width) {
      rows++;
      used = 0;
    }
    used += w;
  }
  return rows;
}

/** Grid geometry: Grafana's 24 columns, 30 px per row unit, 8 px between panels. */
const COLUMNS = 24;
const ROW_PX = 30;
const GAP = 8;

/**
 * The dashboard as one HTML page: every panel at its gridPos, drawn from
 * data; heading says what the picture is (caption).
 */
export function renderHtml(
  d: Dashboard,
  data: Map<DashboardPanel, PanelData>,
  w: QueryWindow,
  opts: { width: number; caption: string },
): string {
  const colPx = (opts.width - GAP) / COLUMNS;
  const header = 64;
  const panels = allPanels(d);
  const bottom = Math.max(...panels.map((p) => p.gridPos.y + p.gridPos.h));
  const boxes: string[] = [];
  for (const p of panels) {
    const g = p.gridPos;
    const left = GAP + g.x * colPx;
    const top = header + g.y * (ROW_PX + GAP / 2);
    const width = g.w * colPx - GAP;
    const height = g.h * ROW_PX + (g.h - 1) * (GAP / 2);
    const style = `left:${left.toFixed(0)}px;top:${top.toFixed(0)}px;width:${width.toFixed(0)}px;height:${height.toFixed(0)}px`;
    const title = esc(p.title ?? '');
    if (p.type === 'row') {
      boxes.push(`<div class="row" style="${style}">${title}</div>`);
      continue;
    }
    const pd = data.get(p) ?? { series: [], error: 'not queried' };
    const unit = p.fieldConfig?.defaults?.unit ?? '';
    const bodyH = height - 30;
    let body: string;
    if (pd.error) body = `<div class="nodata error">${esc(pd.error)}</div>`;
    else if (p.type === 'timeseries') {
      const legendRows = legendRowsOf(pd, width - 20);
      body = timeseriesSvg(pd, w, width - 12, bodyH - 8 - legendRows * 17, unit) + legendHtml(pd);
    } else if (p.type === 'stat') {
      const vals = pd.series.map((s) => ({ legend: s.legend, v: s.points[s.points.length - 1]?.[1] ?? NaN }));
      body =
        vals.length === 0
          ? '<div class="nodata">No data</div>'
          : `<div class="stats">${vals
              .map(
                (s, i) =>
                  `<div class="statv"><div class="big" style="color:${PALETTE[i % PALETTE.length]}">${esc(formatValue(s.v, unit))}</div>${
                    vals.length > 1 ? `<div class="sub">${esc(s.legend)}</div>` : ''
                  }</div>`,
              )
              .join('')}</div>`;
    } else {
      // table: one row per series (its legend and its value at the end)
      body =
        pd.series.length === 0
          ? '<div class="nodata">No data</div>'
          : `<table><tr><th>series</th><th>value</th></tr>${pd.series
              .map((s) => `<tr><td>${esc(s.legend)}</td><td>${esc(formatValue(s.points[s.points.length - 1]?.[1] ?? NaN, unit))}</td></tr>`)
              .join('')}</table>`;
    }
    boxes.push(`<div class="panel ${p.type}" style="${style}"><div class="title">${title}</div><div class="body">${body}</div></div>`);
  }
  const pageH = header + bottom * (ROW_PX + GAP / 2) + GAP;
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(d.title)}</title><style>
body{margin:0;background:#111217;color:#ccccdc;font:13px/1.3 "DejaVu Sans",Arial,sans-serif}
#page{position:relative;width:${opts.width}px;height:${pageH}px}
.head{position:absolute;left:${GAP}px;top:8px;right:${GAP}px}
.head h1{font-size:18px;margin:0;color:#e0e0ef;font-weight:600}
.head p{margin:4px 0 0;font-size:12px;color:#9fa1b0}
.panel{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px;box-sizing:border-box;overflow:hidden}
.panel .title{height:26px;line-height:26px;padding:0 8px;font-weight:600;font-size:13px;color:#e0e0ef;white-space:nowrap;overflow:hidden}
.panel .body{padding:0 6px}
.row{position:absolute;font-size:15px;font-weight:600;color:#e0e0ef;line-height:30px;border-bottom:1px solid #2c3235}
.grid{stroke:#2c3235;stroke-width:1}
.axis{fill:#9fa1b0;font-size:10.5px}
.legend{font-size:11.5px;display:flex;flex-wrap:wrap;gap:2px 14px;padding:2px 4px}
.legend i{display:inline-block;width:14px;height:4px;margin-right:5px;vertical-align:middle;border-radius:2px}
.stats{display:flex;justify-content:space-around;align-items:center;height:calc(100% - 8px);gap:8px}
.statv{text-align:center}
.big{font-size:34px;font-weight:600}
.sub{font-size:12px;color:#9fa1b0}
.statv .big:only-child{font-size:44px}
.panel.stat .body{height:calc(100% - 30px)}
.nodata{color:#9fa1b0;text-align:center;padding-top:30px}
.error{color:#F2495C}
table{width:100%;border-collapse:collapse;font-size:12px}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #2c3235}
</style></head><body><div id="page"><div class="head"><h1>${esc(d.title)}</h1><p>${esc(opts.caption)}</p></div>${boxes.join('')}</div></body></html>`;
}
