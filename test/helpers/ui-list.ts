/**
 * The Temporal Web UI's workflow list as a person uses it, in headless
 * Chromium (test/helpers/browser.ts): a filtered list, its rows and cells, and
 * the gear that adds columns. Shared by the UI test on the dev server
 * (test-ui) and the one on temporal-server's own UI server
 * (test-temporal-server-ui).
 */
import assert from 'node:assert/strict';
import type { Locator, Page } from 'playwright-core';

/** One wait for the single-page app to show something; generous, but bounded. */
export const WAIT = 30_000;

/** The list of namespace default filtered by a visibility query. */
export const listUrl = (ui: string, query: string) => `${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;

/** The rows of the workflow list. */
export const rows = (page: Page) => page.getByTestId('workflows-summary-configurable-table-row');

/**
 * Opens a filtered list and waits until every expected workflow ID is a row.
 * Visibility can trail a workflow's close by a moment, so it reloads, a bounded number of times.
 */
export async function showList(page: Page, url: string, expected: string[]): Promise<void> {
  const deadline = Date.now() + 3 * WAIT;
  for (let attempt = 1; ; attempt++) {
    await page.goto(url);
    try {
      for (const id of expected)
        await rows(page)
          .filter({ hasText: id })
          .first()
          .waitFor({ timeout: Math.min(10_000, Math.max(1000, deadline - Date.now())) });
      return;
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`the list at ${url} did not show ${expected.join(', ')} after ${attempt} loads: ${(err as Error).message}`);
    }
  }
}

/** The text of one row's cell under the column headed `column`. */
export async function cellText(page: Page, row: Locator, column: string): Promise<string> {
  const headers = await page.locator('thead th').evaluateAll((ths) => ths.map((th) => th.getAttribute('data-testid') ?? ''));
  const index = headers.indexOf(`workflows-summary-table-header-cell-${column}`);
  assert.ok(index >= 0, `the list has no column ${column} (columns: ${headers.filter(Boolean).join(', ')})`);
  return (await row.first().locator('td').nth(index).innerText()).trim();
}

/** The gear above the list: "Configure Workflows Table", as a person uses it. */
export async function configureColumns(page: Page, change: { add: string[]; remove: string[] }): Promise<void> {
  await page.getByTestId('workflows-summary-table-configuration-button').click();
  await page.getByText('Configure Workflows Table').waitFor();
  for (const c of change.remove) {
    const button = page.getByTestId(`orderable-list-item-${c}-remove-button`);
    if (await button.count()) await button.click();
  }
  for (const c of change.add) {
    const button = page.getByTestId(`orderable-list-item-${c}-add-button`);
    if (await button.count()) await button.click(); // absent when it is already in view
    await page.getByTestId(`orderable-list-item-${c}-remove-button`).waitFor();
  }
  const close = page.getByTestId('drawer-close-button');
  await close.click();
  // the drawer slides away; its close button then reports it collapsed (or leaves the DOM)
  await page.waitForFunction(
    () => {
      const doc = (globalThis as unknown as { document: { querySelector(s: string): { getAttribute(a: string): string | null } | null } })
        .document;
      return doc.querySelector('[data-testid="drawer-close-button"]')?.getAttribute('aria-expanded') !== 'true';
    },
    undefined,
    { timeout: 10_000 },
  );
  for (const c of change.add) await page.getByTestId(`workflows-summary-table-header-cell-${c}`).waitFor();
}
