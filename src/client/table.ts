/**
 * The CLI's tables and the other forms of what a command prints (-o json|yaml|name), and --watch: columns two spaces
 * apart, each as wide as its widest cell, numbers right-aligned, as kubectl prints them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { OutputFormat } from '../config/cli-options';

/** The lines of a table (header first), without trailing spaces; `right` holds the indexes of right-aligned columns. */
export function tableLines(header: string[], rows: string[][], right: number[] = []): string[] {
  return new TableWriter(header, right).lines(rows);
}

/**
 * A table printed in parts (--watch): the header with the first rows, then further rows alone, in columns at least
 * as wide as any printed before, so that later rows stay under the header.
 */
export class TableWriter {
  private readonly widths: number[];
  private headerPrinted = false;

  constructor(
    private readonly header: string[],
    private readonly right: number[] = [],
  ) {
    this.widths = header.map((h) => h.length);
  }

  /** The lines of these rows, preceded by the header the first time. */
  lines(rows: string[][]): string[] {
    rows.forEach((row) => row.forEach((cell, c) => (this.widths[c] = Math.max(this.widths[c] ?? 0, cell.length))));
    const out = this.headerPrinted ? rows : [this.header, ...rows];
    this.headerPrinted = true;
    return out.map((row) =>
      this.header
        .map((_, c) => (this.right.includes(c) ? (row[c] ?? '').padStart(this.widths[c]!) : (row[c] ?? '').padEnd(this.widths[c]!)))
        .join('  ')
        .trimEnd(),
    );
  }
}

/** A value as YAML (the `yaml` package, loaded when asked for). */
export function toYaml(value: unknown): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { stringify } = require('yaml') as typeof import('yaml');
  return stringify(value, { lineWidth: 0 });
}

/**
 * What a command prints in a format: `json` and `yaml` the value itself (its shape is the command's contract,
 * docs/cli.md), `name` one name a line, `text` and `wide` the command's own text.
 */
export function formatted(format: OutputFormat, value: unknown, forms: { text: (wide: boolean) => string; names: () => string[] }): string {
  switch (format) {
    case 'json':
      return JSON.stringify(value, null, 2) + '\n';
    case 'yaml':
      return toYaml(value);
    case 'name':
      return forms
        .names()
        .map((n) => n + '\n')
        .join('');
    default:
      return forms.text(format === 'wide');
  }
}

/** How long ago, as kubectl's AGE column says it: 45s, 5m30s, 42m, 3h10m, 9h, 2d5h, 30d. */
export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 ? `${s % 60}s` : ''}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return `${h}h${m % 60 ? `${m % 60}m` : ''}`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 8) return `${d}d${h % 24 ? `${h % 24}h` : ''}`;
  return `${d}d`;
}

export interface Watch<T> {
  /** The rows as they are now. */
  fetch(): Promise<T[]>;
  /** A row's identity across looks, and what of it counts as a change (not its age, nor its rate alone). */
  id(row: T): string;
  state(row: T): string;
  /** Prints rows: on the first look all of them (first = true, possibly none), after that those that changed. */
  emit(rows: T[], first: boolean): void;
  intervalMs: number;
  /** Ends the watch (Ctrl-C). */
  signal: AbortSignal;
}

/** --watch: looks every intervalMs until the signal, printing the rows that are new or changed since the last look. */
export async function watchRows<T>(w: Watch<T>): Promise<void> {
  const seen = new Map<string, string>();
  for (let first = true; !w.signal.aborted; first = false) {
    const rows = await w.fetch();
    const changed = rows.filter((r) => seen.get(w.id(r)) !== w.state(r));
    for (const r of changed) seen.set(w.id(r), w.state(r));
    if (first || changed.length > 0) w.emit(changed, first);
    await sleep(w.intervalMs, undefined, { signal: w.signal }).catch(() => undefined);
  }
}

/** The signal of an interrupted watch: aborted on the first SIGINT or SIGTERM (the command then ends with exit 0). */
export function interruption(): AbortSignal {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return ac.signal;
}

/** How a command's rows print, in each format: the table's columns (more with -o wide) and each row's name. */
export interface RowForm<T> {
  header(wide: boolean): string[];
  /** Indexes of the right-aligned columns (numbers). */
  right: number[];
  cells(row: T, wide: boolean): string[];
  name(row: T): string;
  /** The line a table of no rows is (`no migrations`). */
  empty: string;
}

/** The rows as a table (or the empty line) for text and wide. */
export function rowsTable<T>(form: RowForm<T>, rows: T[], wide: boolean): string {
  if (rows.length === 0) return form.empty + '\n';
  return (
    tableLines(
      form.header(wide),
      rows.map((r) => form.cells(r, wide)),
      form.right,
    ).join('\n') + '\n'
  );
}

/**
 * The printer of a watch (watchRows' emit) in a format: a table whose header comes with the first rows and whose
 * later rows keep its columns; in json and yaml each row on its own (a JSON object, a YAML document), as kubectl
 * --watch prints them; in name each row's name.
 */
export function watchPrinter<T>(format: OutputFormat, form: RowForm<T>, write: (s: string) => void): (rows: T[], first: boolean) => void {
  const wide = format === 'wide';
  const table = new TableWriter(form.header(wide), form.right);
  return (rows, first) => {
    for (const r of format === 'json' || format === 'yaml' || format === 'name' ? rows : [])
      write(format === 'json' ? JSON.stringify(r) + '\n' : format === 'yaml' ? '---\n' + toYaml(r) : form.name(r) + '\n');
    if (format !== 'text' && format !== 'wide') return;
    if (first && rows.length === 0) write(form.empty + '\n');
    else if (rows.length > 0) write(table.lines(rows.map((r) => form.cells(r, wide))).join('\n') + '\n');
  };
}
