/**
 * The worker's Prometheus endpoint, scraped during a real migration and checked against etcd; and a private
 * Prometheus scraping workers the way the chart wires them (its metrics Service and ServiceMonitor) with the
 * chart's alert rules loaded: SvmNoLiveWorker and SvmCurrentVersionWithoutWorker silent while they should be,
 * firing when their worker is gone.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { installCrds } from '../src/client/cli-migrate';
import { storedVersions } from '../src/dev/etcd-truth';
import { startOnFreePort, waitServing } from '../src/dev/ports';
import { startProcess, stopProcess, type ProcessRecord } from '../src/dev/processes';
import { createLogger, createMigratorWorker } from '../src/worker/worker';
import { applyCrd, createObjects, ensureNamespace, testCrd } from './helpers/crd';
import { eventually, withWorker } from './helpers/migrate';
import { testPlane, uniq, type TestPlane } from './helpers/plane';
import { migrationResult } from './helpers/waits';

let plane: TestPlane;
before(async () => {
  plane = await testPlane();
  await installCrds(plane.kube);
});
after(async () => plane?.close());

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(' ').pop());
  }
  return undefined;
}

void test('the metrics endpoint counts what etcd shows, and carries the Temporal SDK metrics', async () => {
  const COUNT = 700;
  const crd = testCrd(`${uniq('mt')}.svm.test`);
  await applyCrd(plane.kube, crd, 'v1');
  await createObjects(plane.kube, crd, 'v1', COUNT, { namespace: uniq('ns') });
  await applyCrd(plane.kube, crd, 'v2');
  const { during, end } = await withWorker(
    plane,
    async (m, _taskQueue, w) => {
      assert.ok(w.metricsPort, 'the worker serves /metrics on the port it bound');
      const url = `http://127.0.0.1:${w.metricsPort}/metrics`;
      const h = await m.start(crd.name, { chunkSize: 100, qps: 200 });
      const during = await eventually('a scrape in mid-migration', async () => {
        const text = await (await fetch(url)).text();
        const n = sample(text, 'svm_objects_total', { resource: crd.name, outcome: 'migrated' });
        return n !== undefined && n > 0 && n < COUNT && text;
      });
      const result = await migrationResult(h);
      assert.equal(result.phase, 'Succeeded');
      return { during, end: await (await fetch(url)).text() };
    },
    { settings: { metricsPort: 0, metricsHost: '127.0.0.1' } },
  );
  assert.ok(during.includes('svm_update_duration_seconds_bucket'));
  const etcd = await storedVersions(plane.etcd, { group: crd.group, resource: crd.plural, custom: true });
  assert.equal(etcd.byApiVersion[`${crd.group}/v2`], COUNT);
  assert.equal(sample(end, 'svm_objects_total', { resource: crd.name, outcome: 'migrated' }), COUNT);
  assert.equal(sample(end, 'svm_objects_rewritten_total', { resource: crd.name }), etcd.byApiVersion[`${crd.group}/v2`]);
  assert.equal(sample(end, 'svm_update_duration_seconds_count', { resource: crd.name }), COUNT);
  assert.equal(sample(end, 'svm_migrations_total', { resource: crd.name, result: 'Succeeded' }), 1);
  // Every series of the resource exists at 0 from the migration's start (src/activities/index.ts), so that
  // Prometheus's increase() counts a first failure instead of taking it as the series' baseline.
  assert.equal(sample(during, 'svm_objects_total', { resource: crd.name, outcome: 'failed' }), 0);
  assert.equal(sample(end, 'svm_objects_total', { resource: crd.name, outcome: 'failed' }), 0);
  assert.equal(sample(end, 'svm_migrations_total', { resource: crd.name, result: 'Failed' }), 0);
  assert.equal(sample(end, 'svm_migrations_total', { resource: crd.name, result: 'Aborted' }), 0);
  assert.match(end, /# Temporal SDK metrics\n[\s\S]*temporal_/, 'the SDK metrics are missing');
  assert.ok(!end.includes('"spec"') && !end.includes('object 1'), 'object data in metrics');
});

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..');

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: Record<string, unknown>;
}
interface ServiceSpec {
  selector: Record<string, string>;
  ports: Array<{ name: string; port: number; targetPort: string }>;
}
interface ServiceMonitorSpec {
  selector: { matchLabels: Record<string, string> };
  namespaceSelector: { matchNames: string[] };
  endpoints: Array<{ port: string; path?: string; interval?: string }>;
}
interface RuleGroup {
  name: string;
  rules: Array<{ alert?: string; for?: string }>;
}

/** A Prometheus label name from a Kubernetes label key (as Prometheus's service discovery writes it). */
const labelName = (k: string) => k.replace(/[^a-zA-Z0-9_]/g, '_');

/**
 * The scrape job a Prometheus Operator makes of a ServiceMonitor: Kubernetes service discovery of the EndpointSlices
 * in the monitor's namespaces, kept when their Service carries the monitor's labels and the port has the endpoint's
 * name; the endpoint's path. Only what the chart's monitor uses: matchLabels, matchNames, port, path, interval.
 * Debian builds Prometheus without Kubernetes service discovery, so the discovery itself comes over HTTP from
 * endpointSliceDiscovery below (sdUrl), with the labels Prometheus's own (role endpointslice) gives each target.
 */
function scrapeJob(monitor: Obj, sdUrl: string, defaultInterval: string) {
  const spec = monitor.spec as unknown as ServiceMonitorSpec;
  assert.equal(spec.endpoints.length, 1, 'one endpoint');
  const endpoint = spec.endpoints[0]!;
  return {
    job_name: `serviceMonitor/${monitor.metadata.namespace}/${monitor.metadata.name}/0`,
    scrape_interval: endpoint.interval || defaultInterval,
    metrics_path: endpoint.path ?? '/metrics',
    http_sd_configs: [{ url: `${sdUrl}?namespaces=${spec.namespaceSelector.matchNames.join(',')}`, refresh_interval: '1s' }],
    relabel_configs: [
      ...Object.entries(spec.selector.matchLabels).map(([k, v]) => ({
        source_labels: [`__meta_kubernetes_service_label_${labelName(k)}`, `__meta_kubernetes_service_labelpresent_${labelName(k)}`],
        regex: `(${v});true`,
        action: 'keep',
      })),
      { source_labels: ['__meta_kubernetes_endpointslice_port_name'], regex: endpoint.port, action: 'keep' },
    ],
  };
}

interface EndpointSlice {
  metadata: { name: string; labels?: Record<string, string> };
  ports: Array<{ name?: string; port: number; protocol?: string }>;
  endpoints: Array<{ addresses: string[]; conditions?: { ready?: boolean } }>;
}

/**
 * What Prometheus's Kubernetes service discovery (role endpointslice) finds in some namespaces, read from the API
 * server, as target groups for http_sd_configs: one target per endpoint address and port, with the
 * __meta_kubernetes_* labels it documents for that role (the namespace, the slice, the port's name, protocol and
 * number, the endpoint's readiness, and the Service named by the slice's kubernetes.io/service-name label with its
 * labels). Selecting among them is left to the scrape job's relabelling, made from the ServiceMonitor.
 */
async function endpointSliceDiscovery(kube: TestPlane['kube'], namespaces: string[]) {
  const groups: Array<{ targets: string[]; labels: Record<string, string> }> = [];
  for (const ns of namespaces) {
    const slices = await kube.getJson<{ items: EndpointSlice[] }>(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`);
    for (const slice of slices.items) {
      const serviceName = slice.metadata.labels?.['kubernetes.io/service-name'];
      const service = serviceName
        ? await kube
            .getJson<{ metadata: { labels?: Record<string, string> } }>(`/api/v1/namespaces/${ns}/services/${serviceName}`)
            .catch(() => undefined)
        : undefined;
      const serviceLabels: Record<string, string> = service
        ? {
            __meta_kubernetes_service_name: serviceName!,
            ...Object.fromEntries(
              Object.entries(service.metadata.labels ?? {}).flatMap(([k, v]) => [
                [`__meta_kubernetes_service_label_${labelName(k)}`, v],
                [`__meta_kubernetes_service_labelpresent_${labelName(k)}`, 'true'],
              ]),
            ),
          }
        : {};
      for (const e of slice.endpoints ?? [])
        for (const a of e.addresses)
          for (const p of slice.ports ?? [])
            groups.push({
              targets: [`${a}:${p.port}`],
              labels: {
                __meta_kubernetes_namespace: ns,
                __meta_kubernetes_endpointslice_name: slice.metadata.name,
                __meta_kubernetes_endpointslice_address_type: 'IPv4',
                __meta_kubernetes_endpointslice_port: String(p.port),
                __meta_kubernetes_endpointslice_port_name: p.name ?? '',
                __meta_kubernetes_endpointslice_port_protocol: p.protocol ?? 'TCP',
                __meta_kubernetes_endpointslice_endpoint_conditions_ready: String(e.conditions?.ready ?? true),
                ...serviceLabels,
              },
            });
    }
  }
  return groups;
}

interface AlertRule {
  name: string;
  state: 'inactive' | 'pending' | 'firing';
  lastEvaluation: string;
  alerts: Array<{ labels: Record<string, string>; state: string }>;
}

void test('a private Prometheus scraping workers as the chart wires them: SvmNoLiveWorker and SvmCurrentVersionWithoutWorker silent while a worker of the Current version runs, firing after a rollback and when the last worker stops', async () => {
  assert.equal(
    spawnSync('prometheus', ['--version'], { stdio: 'ignore' }).status,
    0,
    'prometheus is missing: run scripts/ensure-plane-packages.sh (as root) or apt-get install prometheus',
  );
  // The chart as an operator renders it with the alert rules on (the ServiceMonitor comes with them).
  const { stdout: helmOut } = await run('bash', [path.join(ROOT, 'scripts', 'tools.d', 'helm.sh')], { timeout: 1_800_000 });
  const helmBin = /^helm=(.+)$/m.exec(helmOut)![1]!;
  const ns = uniq('metrics');
  const prefix = uniq('m');
  const helmHome = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-metrics-helm-'));
  const rendered = YAML.parseAllDocuments(
    (
      await run(
        helmBin,
        [
          'template',
          'svm',
          path.join(ROOT, 'charts', 'svm'),
          '-n',
          ns,
          '--set',
          `namePrefix=${prefix}`,
          '--set',
          'monitoring.prometheusRule.enabled=true',
        ],
        { env: { ...process.env, HELM_CONFIG_HOME: helmHome, HELM_CACHE_HOME: helmHome, HELM_DATA_HOME: helmHome }, maxBuffer: 64 << 20 },
      )
    ).stdout,
  )
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => !!o);
  fs.rmSync(helmHome, { recursive: true, force: true });
  const one = (kind: string) => {
    const found = rendered.filter((o) => o.kind === kind);
    assert.equal(found.length, 1, `one ${kind} rendered`);
    return found[0]!;
  };
  const service = one('Service');
  const monitor = one('ServiceMonitor');
  const rule = one('PrometheusRule');
  const deployment = one('Deployment') as unknown as {
    spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
  };
  const env = Object.fromEntries(deployment.spec.template.spec.containers[0]!.env.map((e) => [e.name, e.value]));

  // The Service in the release namespace. No kubelet or EndpointSlice controller runs here: the test writes, for
  // each worker process, the EndpointSlice the controller would write for its Pod (the Service's port name, the
  // address and port the worker listens on; a Pod has an address of its own, here one of this machine that is
  // not loopback, which Kubernetes refuses in endpoints).
  await ensureNamespace(plane.kube, ns);
  await plane.kube.request('POST', `/api/v1/namespaces/${ns}/services`, {
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: service.metadata, spec: service.spec }),
  });
  const svc = service.spec as unknown as ServiceSpec;
  const address =
    plane.state.network?.gateway ??
    Object.values(os.networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  assert.ok(address, 'no address of this machine but loopback for the endpoints');
  const slices = `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
  const podUp = (name: string, port: number) =>
    plane.kube.request('POST', slices, {
      body: JSON.stringify({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          name,
          labels: { 'kubernetes.io/service-name': service.metadata.name, 'endpointslice.kubernetes.io/managed-by': 'svm-test' },
        },
        addressType: 'IPv4',
        ports: svc.ports.map((p) => ({ name: p.name, port, protocol: 'TCP' })),
        endpoints: [{ addresses: [address], conditions: { ready: true } }],
      }),
    });
  const podGone = (name: string) => plane.kube.request('DELETE', `${slices}/${name}`);

  // The chart's rules as its PrometheusRule holds them; the two alerts under test wait 2 s instead of 5 minutes.
  const groups = (rule.spec as unknown as { groups: RuleGroup[] }).groups;
  const underTest = ['SvmNoLiveWorker', 'SvmCurrentVersionWithoutWorker'];
  for (const g of groups) for (const r of g.rules) if (r.alert && underTest.includes(r.alert)) r.for = '2s';
  assert.equal(groups.flatMap((g) => g.rules).filter((r) => r.for === '2s').length, underTest.length);

  // The service discovery Prometheus asks over HTTP.
  const sd = http.createServer((req, res) => {
    const namespaces = (new URL(req.url ?? '/', 'http://sd').searchParams.get('namespaces') ?? '').split(',').filter(Boolean);
    endpointSliceDiscovery(plane.kube, namespaces).then(
      (groups) => {
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify(groups));
      },
      (err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      },
    );
  });
  await new Promise<void>((r) => sd.listen(0, '127.0.0.1', r));
  const sdUrl = `http://127.0.0.1:${(sd.address() as AddressInfo).port}/sd`;

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-prom-'));
  fs.writeFileSync(path.join(dir, 'rules.yml'), YAML.stringify({ groups }));
  fs.writeFileSync(
    path.join(dir, 'prometheus.yml'),
    YAML.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [path.join(dir, 'rules.yml')],
      scrape_configs: [scrapeJob(monitor, sdUrl, '1s')],
    }),
  );
  // Prometheus takes its port as given (0 would leave it unknown): a drawn one, bound by Prometheus, which decides;
  // a start that finds it taken (Prometheus exits saying the address is in use) is made again on another.
  // Its path as /proc/PID/exe names it (isRunning compares the two).
  const PROMETHEUS = fs.realpathSync(spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' }).stdout.trim());
  const promLogFile = path.join(dir, 'prometheus.log');
  const prometheus: ProcessRecord = { pid: 0, binary: PROMETHEUS, log: promLogFile };
  const promPort = await startOnFreePort(
    'Prometheus',
    async ([port]) => {
      prometheus.pid = await startProcess(
        PROMETHEUS,
        [
          `--config.file=${path.join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${path.join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--storage.tsdb.retention.time=1h',
        ],
        promLogFile,
      );
      await waitServing('Prometheus', prometheus, [port!], undefined, 60_000); // its own listener, not a port answering
      return port!;
    },
    { beforeRetry: () => stopProcess(prometheus, 0) },
  ).catch(async (err: unknown) => {
    await stopProcess(prometheus, 0); // one that started but never served
    await new Promise((r) => sd.close(r));
    throw err;
  });
  const prom = `http://127.0.0.1:${promPort}`;
  const query = async (q: string) =>
    ((await (await fetch(`${prom}/api/v1/query?query=${encodeURIComponent(q)}`)).json()) as { data: { result: unknown[] } }).data.result;
  const alertRules = async () =>
    (
      (await (await fetch(`${prom}/api/v1/rules?type=alert`)).json()) as { data: { groups: Array<{ rules: AlertRule[] }> } }
    ).data.groups.flatMap((g) => g.rules);
  const ruleNamed = async (name: string) => (await alertRules()).find((r) => r.name === name);
  /** The alert's state at its first evaluation after `since` (ms): data seen before then is in it. */
  const stateAfter = (name: string, since: number) =>
    eventually(`${name} evaluated`, async () => {
      const r = await ruleNamed(name);
      return r && Date.parse(r.lastEvaluation) > since && r;
    });
  /** Waits until the alert fires with these labels. */
  const firing = (name: string, labels: Record<string, string>) =>
    eventually(`${name} firing with ${JSON.stringify(labels)}`, async () => {
      const r = await ruleNamed(name);
      return r?.alerts.find((a) => a.state === 'firing' && Object.entries(labels).every(([k, v]) => a.labels[k] === v));
    });

  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  // A worker as the chart's Pod runs it (its versioning and metrics settings), on a port of its own: the one it binds
  // when it runs (a Pod's EndpointSlice is written once it is ready).
  const deploymentName = env.TEMPORAL_DEPLOYMENT_NAME!;
  assert.equal(deploymentName, `${prefix}-worker`);
  assert.equal(env.SVM_PROMOTE_VERSION, 'true');
  const taskQueue = uniq('tq-mon');
  const workerOf = async (buildId: string) => {
    const settings = plane.workerSettings(taskQueue, {
      metricsPort: 0,
      metricsHost: env.SVM_METRICS_HOST!,
      watchAgreement: false,
      versioning: { deploymentName, buildId, promote: true, checkSeconds: 1 },
    });
    return createMigratorWorker(settings, createLogger(sink));
  };
  const version = (buildId: string) => `{deployment_name="${deploymentName}",build_id="${buildId}"}`;
  const t0 = Date.now();
  const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
  try {
    await eventually('Prometheus ready', async () => (await fetch(`${prom}/-/ready`)).ok);
    const one = await workerOf('one');
    await one.runUntil(async () => {
      await podUp('pod-one', one.metricsPort!);
      // Version one is Current and runs: scraped through the Service, both alerts inactive.
      await eventually(
        'version one scraped as Current',
        async () =>
          (await query(`svm_worker_version_info${version('one')}`)).length > 0 &&
          (await query(`svm_worker_deployment_current_version${version('one')}`)).length > 0,
      );
      const seen = Date.now();
      for (const a of underTest) assert.equal((await stateAfter(a, seen)).state, 'inactive', `${a} while version one runs and is Current`);
      process.stderr.write(`  version one scraped through the chart's Service, alerts inactive after ${secs()}s\n`);

      // A rollout: version two starts, makes itself Current; the rollback then removes it and leaves it Current.
      const two = await workerOf('two');
      await two.runUntil(async () => {
        await podUp('pod-two', two.metricsPort!);
        await eventually(
          'version two scraped as Current',
          async () =>
            (await query(`svm_worker_version_info${version('two')}`)).length > 0 &&
            (await query(`svm_worker_deployment_current_version${version('two')}`)).length > 0,
          90_000,
        );
        const seenTwo = Date.now();
        assert.equal((await stateAfter('SvmCurrentVersionWithoutWorker', seenTwo)).state, 'inactive', 'while version two runs');
      });
      await podGone('pod-two');
      const alert = await firing('SvmCurrentVersionWithoutWorker', {
        deployment_name: deploymentName,
        build_id: 'two',
        temporal_namespace: 'default',
      });
      assert.match(String((alert as { annotations?: { summary?: string } }).annotations?.summary), new RegExp(`${deploymentName}\\.two`));
      assert.equal((await ruleNamed('SvmNoLiveWorker'))?.state, 'inactive', 'a worker still runs');
      process.stderr.write(`  version two removed while Current: SvmCurrentVersionWithoutWorker firing after ${secs()}s\n`);
    });
    await podGone('pod-one');
    await firing('SvmNoLiveWorker', {});
    process.stderr.write(`  no worker left: SvmNoLiveWorker firing after ${secs()}s\n`);
    fs.rmSync(dir, { recursive: true, force: true });
  } catch (err) {
    process.stderr.write(
      `  kept ${dir} (prometheus.yml, rules.yml, prometheus.log)\n${lines.filter((l) => /"level":"(warn|error)"/.test(l)).join('')}`,
    );
    throw err;
  } finally {
    await stopProcess(prometheus);
    await new Promise((r) => sd.close(r));
  }
});
