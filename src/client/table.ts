/** The CLI's tables: columns two spaces apart, each as wide as its widest cell, numbers right-aligned. */

/** The lines of a table (header first), without trailing spaces; `right` holds the indexes of right-aligned columns. */
export function tableLines(header: string[], rows: string[][], right: number[] = []): string[] {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => (row[c] ?? '').length)));
  return [header, ...rows].map((row) =>
    header
      .map((_, c) => (right.includes(c) ? (row[c] ?? '').padStart(widths[c]!) : (row[c] ?? '').padEnd(widths[c]!)))
      .join('  ')
      .trimEnd(),
  );
}
