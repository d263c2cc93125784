/**
 * `npm run dashboard:picture`: docs/dashboard.png, the shipped Grafana
 * dashboard over a real migration.
 *   1. on the local plane (SVM_DEV_DIR, else .svm-dev; brought up if needed):
 *      two test CRDs stored at v1, objects, storage moved to v2, and a
 *      validating webhook that denies the update of a few objects (so the
 *      failure panels have something to show);
 *   2. one worker process (`svm worker`) with the environment of
 *      deploy/deployment.yaml (Temporal and Kubernetes addresses of the
 *      plane; metrics on a free loopback port instead of 0.0.0.0:9464);
 *   3. a private Prometheus (Debian's package) on 127.0.0.1, scraping the
 *      worker every 2 s, while both migrations run; etcd is asked afterwards
 *      whether they really happened;
 *   4. the dashboard JSON's own panels and queries, rendered by
 *      src/dev/dashboard.ts over that Prometheus, in Debian's chromium
 *      (playwright-core), written to docs/dashboard.png.
 * Grafana itself is not used: it cannot be built on this machine (its
 * frontend needs a full yarn build). Everything started here is stopped
 * at the end; the plane keeps running.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Migrator } from '../src/client';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { queryDashboard, renderHtml, dashboardProblems, type Dashboard, type QueryWindow } from '../src/dev/dashboard';
import { freePort } from '../src/dev/ports';
import { applyCrd, createObjects, ensureNamespace, testCrd } from '../src/dev/test-crd';
import { launchBrowser } from '../test/helpers/browser';
import { testPlane } from '../test/helpers/plane';
import { denyUpdatesOf } from '../test/helpers/webhook';

const root = path.join(__dirname, '..');
const DASHBOARD = path.join(root, 'deploy', 'grafana', 'svm-dashboard.json');
const OUT = path.join(root, 'docs', 'dashboard.png');
const SCRAPE_SECONDS = 2;
const BIG = Number(process.env.PICTURE_OBJECTS || 4000);
const SMALL = Math.round(BIG / 4);
const DENIED = 4;
const WIDTH = 1400;

const say = (s: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The worker container's env in deploy/deployment.yaml (plain values only). */
function deploymentEnv(): Record<string, string> {
  for (const doc of parseAllDocuments(fs.readFileSync(path.join(root, 'deploy', 'deployment.yaml'), 'utf8'))) {
    const o = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: Array<{ env?: Array<{ name: string; value?: string }> }> } } };
    } | null;
    if (o?.kind !== 'Deployment') continue;
    const env: Record<string, string> = {};
    for (const e of o.spec?.template?.spec?.containers?.[0]?.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
    return env;
  }
  throw new Error('deploy/deployment.yaml has no Deployment');
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 300_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}

function stop(p: ChildProcess | undefined): Promise<void> {
  if (!p || p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => p.kill('SIGKILL'), 20_000);
    p.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    p.kill('SIGTERM');
  });
}

async function main() {
  const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  const problems = dashboardProblems(dashboard);
  if (problems.length) throw new Error(`the renderer cannot draw this dashboard:\n${problems.join('\n')}`);
  const promVersion = `Prometheus ${/version (\S+)/.exec(execFileSync('prometheus', ['--version'], { encoding: 'utf8' }))?.[1] ?? '(unknown version)'}`;
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();

  say(`plane ${process.env.SVM_DEV_DIR || '.svm-dev'}`);
  const plane = await testPlane();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-dashboard-'));
  let worker: ChildProcess | undefined;
  let prometheus: ChildProcess | undefined;
  const cleanups: Array<() => Promise<void>> = [];
  let done = false;
  try {
    await installCrds(plane.kube);
    await ensureNamespace(plane.kube, 'svm-system'); // the worker's leases, as deploy/namespace.yaml
    const stamp = Date.now().toString(36).slice(-5); // short: resource names are the legends
    const big = testCrd(`svm-${stamp}.example`, 'widgets', 'Widget');
    const small = testCrd(`svm-${stamp}.example`, 'gadgets', 'Gadget');
    for (const c of [big, small]) await applyCrd(plane.kube, c, 'v1');
    say(`creating ${BIG} ${big.name} and ${SMALL} + ${DENIED} ${small.name} at v1`);
    await createObjects(plane.kube, big, 'v1', BIG, { namespace: `pic-${stamp}-a` });
    await createObjects(plane.kube, small, 'v1', SMALL, { namespace: `pic-${stamp}-a` });
    // The denied ones in a namespace listed after the others (etcd keys in byte order): they fail late in their migration.
    await createObjects(plane.kube, small, 'v1', DENIED, { namespace: `pic-${stamp}-z`, prefix: 'deny' });
    for (const c of [big, small]) await applyCrd(plane.kube, c, 'v2');
    cleanups.push(await denyUpdatesOf(plane, small, `pic-${stamp}-z`));

    // The worker as deployed, on this plane.
    const metricsPort = await freePort();
    const deployed = deploymentEnv();
    const workerEnv: NodeJS.ProcessEnv = {
      ...process.env,
      ...deployed,
      TEMPORAL_ADDRESS: plane.env.TEMPORAL_ADDRESS,
      TEMPORAL_NAMESPACE: plane.env.TEMPORAL_NAMESPACE ?? deployed.TEMPORAL_NAMESPACE,
      KUBECONFIG: plane.env.KUBECONFIG,
      SVM_METRICS_PORT: String(metricsPort),
      SVM_METRICS_HOST: '127.0.0.1',
    };
    const taskQueue = workerEnv.TEMPORAL_TASK_QUEUE!;
    const workerLog = fs.openSync(path.join(tmp, 'worker.log'), 'w');
    say(`worker: svm worker, task queue ${taskQueue}, metrics on 127.0.0.1:${metricsPort} (log ${tmp}/worker.log)`);
    worker = spawn(process.execPath, [path.join(root, 'bin', 'svm.js'), 'worker'], {
      env: workerEnv,
      stdio: ['ignore', workerLog, workerLog],
    });
    await waitFor('the worker metrics endpoint', async () => (await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).ok);

    // A private Prometheus.
    const promPort = await freePort();
    fs.writeFileSync(
      path.join(tmp, 'prometheus.yml'),
      [
        'global:',
        `  scrape_interval: ${SCRAPE_SECONDS}s`,
        `  evaluation_interval: ${SCRAPE_SECONDS}s`,
        'scrape_configs:',
        '  - job_name: svm',
        '    static_configs:',
        `      - targets: ["127.0.0.1:${metricsPort}"]`,
        '',
      ].join('\n'),
    );
    const promLog = fs.openSync(path.join(tmp, 'prometheus.log'), 'w');
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${path.join(tmp, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(tmp, 'data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        '--storage.tsdb.retention.time=1d',
      ],
      { stdio: ['ignore', promLog, promLog] },
    );
    const prom = `http://127.0.0.1:${promPort}`;
    await waitFor('Prometheus', async () => (await fetch(`${prom}/-/ready`)).ok);
    await waitFor('a first scrape of the worker', async () => {
      const r = (await (await fetch(`${prom}/api/v1/query?query=up`)).json()) as { data: { result: Array<{ value: [number, string] }> } };
      return r.data.result[0]?.value[1] === '1';
    });
    const start = Date.now() / 1000;
    say(`${promVersion} on ${prom}, scraping every ${SCRAPE_SECONDS}s; half a quiet minute first`);
    await sleep(30_000);

    const m = await Migrator.connect({ temporal: { address: plane.env.TEMPORAL_ADDRESS!, taskQueue }, kubeconfig: plane.env.KUBECONFIG });
    let results;
    try {
      say(`migrating ${big.name}`);
      const hBig = await m.start(big.name);
      await sleep(15_000);
      say(`migrating ${small.name}`);
      const hSmall = await m.start(small.name);
      results = await Promise.all([hBig.wait(), hSmall.wait()]);
    } finally {
      await m.close();
    }
    for (const r of results) say(`${r.phase}: ${r.message}`);
    const etcd = await Promise.all(
      [big, small].map(async (c) => (await storedVersions(plane.etcd, { group: c.group, resource: c.plural, custom: true })).byApiVersion),
    );
    say(`etcd: ${big.name} ${JSON.stringify(etcd[0])}, ${small.name} ${JSON.stringify(etcd[1])}`);
    if (results[0]!.phase !== 'Succeeded' || etcd[0]![`${big.group}/v2`] !== BIG)
      throw new Error(`${big.name} was not migrated: ${results[0]!.phase}`);
    if (results[1]!.phase !== 'Failed' || results[1]!.counters.failed !== DENIED || etcd[1]![`${small.group}/v2`] !== SMALL)
      throw new Error(`${small.name} did not end as expected: ${results[1]!.phase}, ${results[1]!.counters.failed} failed`);
    say('the tail: another minute');
    await sleep(60_000);
    const end = Date.now() / 1000;

    const window: QueryWindow = {
      start,
      end,
      step: Math.max(SCRAPE_SECONDS, Math.ceil((end - start) / 300)),
      scrapeInterval: SCRAPE_SECONDS,
    };
    const data = await queryDashboard(dashboard, prom, window);
    const when = new Date(start * 1000).toISOString().slice(0, 16).replace('T', ' ');
    const caption =
      `Not a Grafana screenshot: the panels and PromQL of deploy/grafana/svm-dashboard.json drawn by scripts/dashboard-picture.ts ` +
      `over a private ${promVersion} scraping one svm worker every ${SCRAPE_SECONDS}s, during real migrations on the local plane ` +
      `(${BIG} ${big.plural} migrated; ${SMALL} ${small.plural} with ${DENIED} denied by a webhook), ${when} UTC, commit ${commit}.`;
    const html = renderHtml(dashboard, data, window, { width: WIDTH, caption });
    fs.writeFileSync(path.join(tmp, 'dashboard.html'), html);

    const browser = await launchBrowser();
    try {
      const page = await browser.newPage({ width: WIDTH, height: 900 });
      await page.setContent(html, { waitUntil: 'load' });
      await page.locator('#page').screenshot({ path: OUT });
    } finally {
      await browser.close();
    }
    say(`wrote ${path.relative(root, OUT)} (${Math.round(fs.statSync(OUT).size / 1024)} KB; page ${tmp}/dashboard.html)`);
    for (const [p, d] of data)
      say(
        `  ${p.title}: ${d.error ?? (d.series.map((s) => `${s.legend}=${s.points[s.points.length - 1]?.[1] ?? '-'}`).join(', ') || 'no data')}`,
      );
    done = true;
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await stop(worker);
    await stop(prometheus);
    await plane.close();
    if (!done) say(`kept ${tmp} (worker and Prometheus logs)`);
    if (done && !process.env.PICTURE_KEEP) fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
