/**
 * The Temporal Web UI as a person sees it, in headless Chromium: two real
 * migrations (one Succeeded, one Failed because a webhook refuses some
 * objects), then the rendered pages: the workflow list filtered by the
 * project's search attributes (with their columns added the way a person adds
 * them), and a migration's own page with its summary, its current details
 * (phase and progress) and its search attributes. Screenshots go to
 * test/artifacts/, or to docs/ with SVM_UPDATE_SCREENSHOTS=1.
 *
 * Everything is read from the page (text in the DOM and in the markdown
 * iframes the UI renders user metadata into), never from the Temporal API.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { installCrds } from '../src/client/cli-migrate';
import { Migrator } from '../src/client';
import { createMigratorWorker } from '../src/worker/worker';
import { launchBrowser, type TestBrowser } from './helpers/browser';
import { cellText, configureColumns, listUrl, rows, showList, WAIT } from './helpers/ui-list';
import { applyCrd, createObjects, deleteCrd, testCrd } from './helpers/crd';
import { forgetNames, freeIdentity } from './helpers/identity';
import { withWorker } from './helpers/migrate';
import { serverPlane, testPlane, uniq, type TestPlane } from './helpers/plane';
import { denyUpdatesOf } from './helpers/webhook';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const VIEWPORT = { width: 1400, height: 900 };
// Screenshots go to test/artifacts (ignored by git); SVM_UPDATE_SCREENSHOTS=1 writes the copies in docs/ (README.md, docs/how-it-works.md).
const DOCS = path.resolve(__dirname, '..', process.env.SVM_UPDATE_SCREENSHOTS === '1' ? 'docs' : 'test/artifacts');
const OK_OBJECTS = 300;
const FAIL_OBJECTS = 100;
const DENIED = 3;

void test(
  'the Temporal UI shows migrations by their search attributes, with summary, phase and progress',
  { timeout: 10 * 60_000 },
  async (t) => {
    // -- two real migrations: one succeeds, one fails (a webhook refuses DENIED objects)
    const ok = testCrd(`${uniq('ui-ok')}.svm.test`);
    const bad = testCrd(`${uniq('ui-fail')}.svm.test`);
    const ns = uniq('ns');
    await applyCrd(plane.kube, ok, 'v1');
    await createObjects(plane.kube, ok, 'v1', OK_OBJECTS, { namespace: ns });
    await applyCrd(plane.kube, ok, 'v2');
    await applyCrd(plane.kube, bad, 'v1');
    await createObjects(plane.kube, bad, 'v1', FAIL_OBJECTS, { namespace: ns });
    await createObjects(plane.kube, bad, 'v1', DENIED, { namespace: ns, prefix: 'deny' });
    await applyCrd(plane.kube, bad, 'v2');
    const unwebhook = await denyUpdatesOf(plane, bad, ns);

    let browser: TestBrowser | undefined;
    try {
      await withWorker(plane, async (m) => {
        const okResult = await migrationResult(await m.start(ok.name, { chunkSize: 50 }));
        assert.equal(okResult.phase, 'Succeeded', okResult.message);
        assert.equal(okResult.counters.migrated, OK_OBJECTS);
        const badResult = await migrationResult(await m.start(bad.name, { chunkSize: 50 }));
        assert.equal(badResult.phase, 'Failed');
        assert.equal(badResult.counters.failed, DENIED);

        // -- the UI, while the worker still runs (current details are a query the worker answers)
        const okId = `migrate/${ok.name}`;
        const badId = `migrate/${bad.name}`;
        browser = await launchBrowser({ viewport: VIEWPORT });
        const page = await browser.newPage(VIEWPORT);
        page.setDefaultTimeout(WAIT);
        const ui = plane.env.TEMPORAL_UI_URL;
        assert.ok(ui, 'the plane has no TEMPORAL_UI_URL');
        const list = (query: string) => `${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;

        try {
          await t.test('the list filtered by MigrationResource shows that migration and no other', async () => {
            await showList(page, list(`MigrationResource = '${ok.name}'`), [okId]);
            assert.equal(await rows(page).count(), 1, 'exactly one workflow for one resource');
            assert.equal(await rows(page).filter({ hasText: badId }).count(), 0);
            // the filter a person sees above the list is the one asked for
            await page.getByText('MigrationResource', { exact: false }).first().waitFor();
          });

          await t.test(
            'a person adds the MigrationPhase and MigrationMigrated columns and reads phase and progress in the list',
            async () => {
              await configureColumns(page, { add: ['MigrationPhase', 'MigrationMigrated'], remove: ['Run ID', 'Type', 'Start'] });
              // and folds the saved views away, so the list has the page's width
              const collapse = page.getByRole('button', { name: 'Collapse saved views' });
              if (await collapse.count()) await collapse.first().click();
              await showList(page, list(`MigrationResource = '${ok.name}'`), [okId]);
              const row = rows(page).filter({ hasText: okId });
              assert.equal(await cellText(page, row, 'MigrationPhase'), 'Succeeded');
              assert.equal(await cellText(page, row, 'MigrationMigrated'), String(OK_OBJECTS));
              assert.match(await cellText(page, row, 'Status'), /Completed/);
              // on screen without scrolling sideways
              for (const c of ['Status', 'Workflow ID', 'MigrationPhase', 'MigrationMigrated']) await assertCellOnScreen(page, row, c);
            },
          );

          await t.test(`the list filtered by MigrationPhase = 'Succeeded' / 'Failed' puts each migration on its side`, async () => {
            await showList(page, list(`MigrationPhase = 'Succeeded'`), [okId]);
            assert.equal(await rows(page).filter({ hasText: badId }).count(), 0, 'the failed migration is listed as Succeeded');
            await showList(page, list(`MigrationPhase = 'Failed'`), [badId]);
            assert.equal(await rows(page).filter({ hasText: okId }).count(), 0, 'the succeeded migration is listed as Failed');
            const badRow = rows(page).filter({ hasText: badId });
            assert.equal(await cellText(page, badRow, 'MigrationPhase'), 'Failed');
            assert.equal(await cellText(page, badRow, 'MigrationMigrated'), String(FAIL_OBJECTS));
            assert.match(await cellText(page, badRow, 'Status'), /Failed/);
            await assertCellOnScreen(page, badRow, 'MigrationPhase');
          });

          await t.test('screenshot: both migrations of this test, filtered by MigrationResource, with phase and progress', async () => {
            await showList(page, list(`MigrationResource IN ('${ok.name}', '${bad.name}')`), [okId, badId]);
            assert.equal(await rows(page).count(), 2);
            mkdirSync(DOCS, { recursive: true });
            await page.screenshot({ path: path.join(DOCS, 'temporal-ui-migrations.png') });
          });

          await t.test(`the migration's page (from the list) shows its summary, phase, progress and search attributes`, async () => {
            await showList(page, list(`MigrationResource = '${ok.name}'`), [okId]);
            await rows(page).filter({ hasText: okId }).getByRole('link', { name: okId, exact: true }).first().click();
            await page.waitForURL((u) => u.pathname.startsWith(`/namespaces/default/workflows/${encodeURIComponent(okId)}/`));
            await page.getByRole('heading', { name: okId }).first().waitFor();
            await page.getByText('Completed', { exact: true }).first().waitFor();

            await openTab(page, 'User Metadata');
            const summary = await metadataText(page, 'Summary', /Storage version migration of/);
            assert.equal(summary.trim(), `Storage version migration of ${ok.name}`);
            const details = await metadataText(page, 'Details', /no-op update/);
            assert.match(details, new RegExp(`Rewrites every stored Widget \\(${esc(ok.name)}, through ${esc(ok.group)}/v2\\)`));
            const current = await metadataText(page, 'Current Details', /migrated \d+/);
            assert.match(current, new RegExp(`${esc(ok.name)} \\(v2, custom resource\\): Succeeded`));
            assert.match(current, new RegExp(`migrated ${OK_OBJECTS} \\(rewritten ${OK_OBJECTS}\\), conflicts 0, not found 0, failed 0`));
            // visible, not merely in the DOM: inside the page and inside the markdown frame's box
            await assertInView(page, 'Summary', `Storage version migration of ${ok.name}`);
            await assertInView(page, 'Current Details', 'Succeeded');
            await assertInView(page, 'Current Details', `migrated ${OK_OBJECTS}`);
            await page.screenshot({ path: path.join(DOCS, 'temporal-ui-migration-detail.png') });

            await openTab(page, 'Search Attributes');
            const attrs = await waitForText(page.locator('main'), /"MigrationPhase":\s*"Succeeded"/);
            assert.match(attrs, new RegExp(`"MigrationResource":\\s*"${esc(ok.name)}"`));
            assert.match(attrs, new RegExp(`"MigrationGroup":\\s*"${esc(ok.group)}"`));
            assert.match(attrs, new RegExp(`"MigrationMigrated":\\s*${OK_OBJECTS}\\b`));
          });

          await t.test(`the failed migration's page shows Failed, the counts and why`, async () => {
            await showList(page, list(`MigrationResource = '${bad.name}'`), [badId]);
            await rows(page).filter({ hasText: badId }).getByRole('link', { name: badId, exact: true }).first().click();
            await page.waitForURL((u) => u.pathname.startsWith(`/namespaces/default/workflows/${encodeURIComponent(badId)}/`));
            await page.getByRole('heading', { name: badId }).first().waitFor();
            await page.getByText('Failed', { exact: true }).first().waitFor();
            // the history page shows the failure message: which objects and why
            const history = await waitForText(page.locator('main'), /could not be updated/);
            assert.match(
              history,
              new RegExp(
                `${DENIED} object\\(s\\) of ${esc(bad.name)} could not be updated: .*deny-000000 \\(HTTP 403 Forbidden: admission webhook "deny\\.svm\\.test" denied the request\\)`,
              ),
            );
            await page.screenshot({ path: path.join(DOCS, 'temporal-ui-migration-failed.png') });

            await openTab(page, 'User Metadata');
            const current = await metadataText(page, 'Current Details', /migrated \d+/);
            assert.match(current, new RegExp(`${esc(bad.name)} \\(v2, custom resource\\): Failed`));
            assert.match(
              current,
              new RegExp(`migrated ${FAIL_OBJECTS} \\(rewritten ${FAIL_OBJECTS}\\), conflicts 0, not found 0, failed ${DENIED}`),
            );
            await assertInView(page, 'Current Details', `failed ${DENIED}`);
          });
        } catch (err) {
          const shot = path.join(os.tmpdir(), `svm-ui-failure-${Date.now()}.png`);
          await page.screenshot({ path: shot }).catch(() => undefined);
          process.stderr.write(`UI test failed at ${page.url()}; screenshot ${shot}\n`);
          throw err;
        }
      });
    } finally {
      await browser?.close();
      await unwebhook();
    }
  },
);

// ---------------------------------------------------------------------------
// The page, as a person reads it

/** A person sees the cell: it lies in the viewport and nothing covers its centre (no sideways scrolling needed). */
async function assertCellOnScreen(page: Page, row: Locator, column: string): Promise<void> {
  const headers = await page.locator('thead th').evaluateAll((ths) => ths.map((th) => th.getAttribute('data-testid') ?? ''));
  const cell = row
    .first()
    .locator('td')
    .nth(headers.indexOf(`workflows-summary-table-header-cell-${column}`));
  const box = await cell.boundingBox();
  const vp = page.viewportSize()!;
  assert.ok(
    box && box.x >= 0 && box.x + box.width <= vp.width && box.y >= 0 && box.y + box.height <= vp.height,
    `the ${column} cell is outside the ${vp.width}x${vp.height} viewport (${JSON.stringify(box)})`,
  );
  const seen = await cell.evaluate(
    (el, [x, y]) => {
      const doc = (globalThis as unknown as { document: { elementFromPoint(x: number, y: number): unknown } }).document;
      return el.contains(doc.elementFromPoint(x!, y!) as typeof el);
    },
    [box.x + box.width / 2, box.y + box.height / 2],
  );
  assert.ok(seen, `the ${column} cell is hidden (scrolled away or covered)`);
}

async function openTab(page: Page, name: string): Promise<void> {
  const tab = page.getByRole('tab', { name, exact: true });
  if (await tab.count()) await tab.first().click();
  else await page.getByRole('link', { name, exact: true }).first().click();
}

/** The markdown iframe the UI renders a user metadata section into (Summary, Details, Current Details). */
const metadataFrame = (page: Page, heading: string) => page.locator(`xpath=//h3[normalize-space()="${heading}"]/following::iframe[1]`);

/** The rendered text of a user metadata section, once it matches `want` (Current Details is fetched live: R refreshes it). */
async function metadataText(page: Page, heading: string, want: RegExp): Promise<string> {
  await page.locator(`xpath=//h3[normalize-space()="${heading}"]`).first().waitFor();
  const body = metadataFrame(page, heading).contentFrame().locator('body');
  const deadline = Date.now() + 2 * WAIT;
  for (let i = 1; ; i++) {
    const text = await body.innerText({ timeout: 5000 }).catch(() => '');
    if (want.test(text)) return text;
    if (Date.now() > deadline) throw new Error(`the ${heading} section never showed ${want} (last: ${JSON.stringify(text)})`);
    await page.waitForTimeout(500);
    if (heading === 'Current Details' && i % 10 === 0) await page.keyboard.press('r'); // "Press the R for freshness"
  }
}

/** The text is on screen: inside the viewport and inside its metadata frame's box (the frame is a fixed height). */
async function assertInView(page: Page, heading: string, text: string): Promise<void> {
  const frame = metadataFrame(page, heading);
  const frameBox = await frame.boundingBox();
  const box = await frame.contentFrame().getByText(text, { exact: false }).first().boundingBox();
  assert.ok(frameBox && box, `${text} has no box on the page`);
  const vp = page.viewportSize()!;
  assert.ok(
    box.y >= frameBox.y - 1 && box.y + box.height <= frameBox.y + frameBox.height + 1,
    `"${text}" is cut off by the ${heading} frame (${JSON.stringify(box)} outside ${JSON.stringify(frameBox)})`,
  );
  assert.ok(
    box.y >= 0 && box.y + box.height <= vp.height && box.x >= 0 && box.x + box.width <= vp.width,
    `"${text}" is outside the ${vp.width}x${vp.height} viewport`,
  );
}

/** Polls a locator's rendered text until it matches (bounded). */
async function waitForText(locator: Locator, want: RegExp, timeoutMs = WAIT): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await locator
      .first()
      .innerText({ timeout: 5000 })
      .catch(() => '');
    if (want.test(text)) return text;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${want} on the page (last text: ${JSON.stringify(text.slice(0, 2000))})`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

void test(
  "the Temporal UI lists one cluster's workflows by MigrationCluster, and none of another cluster's",
  { timeout: 5 * 60_000 },
  async () => {
    // Two named clusters on one namespace, each an API of its own (a uid is one cluster's: src/client/identity.ts):
    // east this plane's, west the server plane's. A migration in each.
    const [east, west] = [uniq('ui-east'), uniq('ui-west')];
    const server = await serverPlane();
    const apis = [plane, server];
    await installCrds(server.kube);
    const crds = [testCrd(`${uniq('ui-ce')}.svm.test`), testCrd(`${uniq('ui-cw')}.svm.test`)];
    for (const [i, c] of crds.entries()) {
      await applyCrd(apis[i]!.kube, c, 'v1');
      await createObjects(apis[i]!.kube, c, 'v1', 20, { namespace: uniq('ns') });
      await applyCrd(apis[i]!.kube, c, 'v2');
    }
    for (const [i, cluster] of [east, west].entries()) await freeIdentity(plane.temporal.client, apis[i]!.kube, cluster);
    const base = uniq('tq-ui');
    const workers = await Promise.all(
      [east, west].map((cluster, i) => {
        const s = plane.workerSettings(base);
        return createMigratorWorker({
          ...s,
          kubeconfig: apis[i]!.env.KUBECONFIG,
          temporal: { ...s.temporal, cluster },
          clusterReportSeconds: 0,
        });
      }),
    );
    const migrators = await Promise.all(
      [east, west].map((cluster, i) =>
        Migrator.connect({ temporal: { ...plane.temporal.settings, taskQueue: base }, kubeconfig: apis[i]!.env.KUBECONFIG, cluster }),
      ),
    );
    let browser: TestBrowser | undefined;
    try {
      await Promise.all(
        workers.map((w, i) =>
          w.runUntil(async () => {
            const r = await migrationResult(await migrators[i]!.start(crds[i]!.name));
            assert.equal(r.phase, 'Succeeded', r.message);
          }),
        ),
      );
      browser = await launchBrowser({ viewport: VIEWPORT });
      const page = await browser.newPage(VIEWPORT);
      page.setDefaultTimeout(WAIT);
      const eastId = `migrate/${east}/${crds[0]!.name}`;
      const westId = `migrate/${west}/${crds[1]!.name}`;
      // east's workflows: its migration and its registration (which pins its uid), none of west's.
      await showList(page, listUrl(plane.env.TEMPORAL_UI_URL!, `MigrationCluster = '${east}'`), [eastId, `svm-cluster/${east}`]);
      assert.equal(await rows(page).filter({ hasText: west }).count(), 0, "none of west's workflows is in east's list");
      assert.equal(await rows(page).count(), 2, `east's list: ${(await rows(page).allInnerTexts()).join(' | ')}`);
      await showList(page, listUrl(plane.env.TEMPORAL_UI_URL!, `MigrationCluster IN ('${east}', '${west}')`), [eastId, westId]);
      await page.screenshot({ path: path.join(DOCS, 'temporal-ui-cluster.png') });
    } finally {
      await browser?.close();
      for (const m of migrators) await m.close();
      for (const [i, c] of crds.entries()) await deleteCrd(apis[i]!.kube, c).catch(() => undefined);
      await forgetNames(plane.temporal.client, [east, west]);
      await server.close();
    }
  },
);
