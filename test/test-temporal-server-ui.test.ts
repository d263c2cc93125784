/**
 * The Temporal Web UI's filters by resource and phase on temporal-server,
 * where SQL visibility (PostgreSQL) answers them and a separate UI server
 * (temporalio/ui-server) serves the pages: on the suite's one server plane
 * (serverPlane()). Only the filters: the rest of the UI (a migration's own
 * page, its summary and details) does not depend on the visibility store and
 * is test-ui's, on the dev server.
 *
 * Two real migrations (one Succeeded, one Failed because a webhook refuses
 * some objects), then, read from the rendered page in headless Chromium: the
 * list filtered by MigrationResource shows that migration alone; filtered by
 * MigrationPhase, each is on its side, its phase in the column a person adds.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { installCrds } from '../src/client/cli-migrate';
import { launchBrowser, type TestBrowser } from './helpers/browser';
import { applyCrd, createObjects, testCrd } from './helpers/crd';
import { withWorker } from './helpers/migrate';
import { serverPlane, uniq, type TestPlane } from './helpers/plane';
import { cellText, configureColumns, listUrl, rows, showList, WAIT } from './helpers/ui-list';
import { denyUpdatesOf } from './helpers/webhook';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await serverPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

const VIEWPORT = { width: 1400, height: 900 };
const OK_OBJECTS = 60;
const FAIL_OBJECTS = 20;
const DENIED = 2;

void test(
  "temporal-server's UI server filters migrations by MigrationResource and MigrationPhase (SQL visibility)",
  { timeout: 10 * 60_000 },
  async (t) => {
    const ok = testCrd(`${uniq('sui-ok')}.svm.test`);
    const bad = testCrd(`${uniq('sui-fail')}.svm.test`);
    const ns = uniq('ns');
    await applyCrd(plane.kube, ok, 'v1');
    await createObjects(plane.kube, ok, 'v1', OK_OBJECTS, { namespace: ns });
    await applyCrd(plane.kube, ok, 'v2');
    await applyCrd(plane.kube, bad, 'v1');
    await createObjects(plane.kube, bad, 'v1', FAIL_OBJECTS, { namespace: ns });
    await createObjects(plane.kube, bad, 'v1', DENIED, { namespace: ns, prefix: 'deny' });
    await applyCrd(plane.kube, bad, 'v2');
    const unwebhook = await denyUpdatesOf(plane, bad, ns);

    try {
      await withWorker(plane, async (m) => {
        const okResult = await migrationResult(await m.start(ok.name, { chunkSize: 50 }));
        assert.equal(okResult.phase, 'Succeeded', okResult.message);
        const badResult = await migrationResult(await m.start(bad.name, { chunkSize: 50 }));
        assert.equal(badResult.phase, 'Failed');
        assert.equal(badResult.counters.failed, DENIED);
      });
    } finally {
      await unwebhook();
    }

    const okId = `migrate/${ok.name}`;
    const badId = `migrate/${bad.name}`;
    const ui = plane.env.TEMPORAL_UI_URL;
    assert.ok(ui, 'the plane has no TEMPORAL_UI_URL');
    assert.equal(new URL(ui).port, String(plane.state.temporal.uiPort), 'the UI is the UI server of the plane');
    assert.ok(plane.state.temporalServer?.ui.pid, 'a UI server of its own (not the dev server)');
    const browser: TestBrowser = await launchBrowser({ viewport: VIEWPORT });
    const page = await browser.newPage(VIEWPORT);
    page.setDefaultTimeout(WAIT);
    try {
      await t.test('the list filtered by MigrationResource shows that migration and no other', async () => {
        await showList(page, listUrl(ui, `MigrationResource = '${ok.name}'`), [okId]);
        assert.equal(await rows(page).count(), 1, 'exactly one workflow for one resource');
        assert.equal(await rows(page).filter({ hasText: badId }).count(), 0);
      });

      await t.test(
        `filtered by MigrationPhase = 'Succeeded' / 'Failed', each migration is on its side, its phase in the MigrationPhase column`,
        async () => {
          await configureColumns(page, { add: ['MigrationPhase', 'MigrationMigrated'], remove: [] });
          const ours = `MigrationResource IN ('${ok.name}', '${bad.name}')`;
          await showList(page, listUrl(ui, `${ours} AND MigrationPhase = 'Succeeded'`), [okId]);
          assert.equal(await rows(page).count(), 1);
          assert.equal(await cellText(page, rows(page).filter({ hasText: okId }), 'MigrationPhase'), 'Succeeded');
          assert.equal(await cellText(page, rows(page).filter({ hasText: okId }), 'MigrationMigrated'), String(OK_OBJECTS));
          await showList(page, listUrl(ui, `${ours} AND MigrationPhase = 'Failed'`), [badId]);
          assert.equal(await rows(page).count(), 1);
          const badRow = rows(page).filter({ hasText: badId });
          assert.equal(await cellText(page, badRow, 'MigrationPhase'), 'Failed');
          assert.match(await cellText(page, badRow, 'Status'), /Failed/i); // v2.55 shows it in capitals
          // and across every migration of the server: no Succeeded one in the Failed list
          await showList(page, listUrl(ui, `MigrationPhase = 'Failed'`), [badId]);
          assert.equal(await rows(page).filter({ hasText: okId }).count(), 0, 'the succeeded migration is listed as Failed');
        },
      );
    } catch (err) {
      const shot = path.join(os.tmpdir(), `svm-server-ui-failure-${Date.now()}.png`);
      await page.screenshot({ path: shot }).catch(() => undefined);
      process.stderr.write(`server UI test failed at ${page.url()}; screenshot ${shot}\n`);
      throw err;
    } finally {
      await browser.close();
    }
  },
);
