/**
 * Ports are bound, not probed (issue 48): a drawn port is a candidate, and a start that finds it taken is started
 * again on another (startOnFreePort for listeners of this process, startServerOnPorts for the plane's servers, which
 * also asks /proc whether the server itself holds its ports). A port fixed by the record (a plane restarted on its
 * recorded ports) is never drawn again: one held by another process is refused with assertPortFree's message.
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  addressInUse,
  freePort,
  holdsPorts,
  latestStart,
  listeningPorts,
  startOnFreePort,
  startServerOnPorts,
  waitServing,
} from '../src/dev/ports';
import { isRunning, startProcess, stopProcess, type ProcessRecord } from '../src/dev/processes';
import { createMetrics, serveMetrics } from '../src/worker/metrics';
import { metricsPortOf } from './helpers/migrate';

/** A listener of this test on a port of freePort's range: the port another process took meanwhile. */
async function holdPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const port = await freePort();
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', resolve);
  });
  return { port, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

/** The draw, injected: the ports given first, then freePort's. */
function drawing(first: number[]): (taken: Set<number>) => Promise<number> {
  const queue = [...first];
  return (taken) => (queue.length > 0 ? Promise.resolve(queue.shift()!) : freePort(taken));
}

/** Binds port in this process, as the SDK's Prometheus endpoint does in Runtime.install: fails with EADDRINUSE when taken. */
function listenOn(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

void test('startOnFreePort: a drawn port another listener holds fails the bind, and the start is made again on a fresh port', async () => {
  const held = await holdPort();
  try {
    const tried: number[] = [];
    const lines: string[] = [];
    const srv = await startOnFreePort(
      'the test listener',
      async ([port]) => {
        tried.push(port!);
        return listenOn(port!);
      },
      { draw: drawing([held.port]), log: (l) => lines.push(l) },
    );
    const got = (srv.address() as net.AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    assert.equal(tried[0], held.port, 'the first start was on the held port');
    assert.equal(tried.length, 2, `one start again: ${tried.join(', ')}`);
    assert.notEqual(got, held.port);
    assert.equal(got, tried[1], 'the port bound is the one handed back');
    assert.match(lines.join('\n'), new RegExp(`the test listener: ${held.port} taken by another process meanwhile`));
  } finally {
    await held.close();
  }
});

void test('startOnFreePort: bounded; it fails naming what it starts and every port tried, and a failure that is no lost port is not retried', async () => {
  const [a, b] = [await holdPort(), await holdPort()];
  try {
    let cleanups = 0;
    await assert.rejects(
      startOnFreePort('the test listener', async ([port]) => listenOn(port!), {
        draw: drawing([a.port, b.port, a.port]),
        attempts: 3,
        beforeRetry: () => Promise.resolve(void cleanups++),
      }),
      (e: Error) => {
        assert.match(e.message, /^cannot start the test listener: another process took its port at each of 3 tries/);
        assert.match(e.message, new RegExp(`ports tried: ${a.port}, ${b.port}, ${a.port}`));
        assert.match(e.message, /EADDRINUSE/);
        return true;
      },
    );
    assert.equal(cleanups, 3, 'what each failed start left is stopped, the last one too');
    let starts = 0;
    await assert.rejects(
      startOnFreePort('the test listener', () => {
        starts++;
        return Promise.reject(new Error('invalid configuration'));
      }),
      /^Error: invalid configuration$/,
    );
    assert.equal(starts, 1);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

void test('addressInUse reads the bind failures of the servers the plane starts; an earlier start in the same log does not count', () => {
  for (const line of [
    'Error: listen EADDRINUSE: address already in use 127.0.0.1:20001', // Node
    '{"level":"fatal","msg":"listen tcp 127.0.0.1:20001: bind: address already in use"}', // Go: etcd, kube-apiserver, temporal
    'Failed to start prometheus metrics exporter: Address already in use (os error 98)', // the SDK's core (Rust)
    '[ALERT] : Binding [haproxy.cfg:9] for frontend fe: cannot bind socket (Address already in use) for [127.0.0.1:20001]',
    'LOG:  could not bind IPv4 address "127.0.0.1": Address already in use', // PostgreSQL
  ])
    assert.ok(addressInUse(line), line);
  assert.equal(addressInUse('=== 2026 starting kube-apiserver --bind-address=127.0.0.1 --secure-port=20001'), false);
  // A bind that is no socket's: Kubernetes' RBAC refusal is not a port lost.
  assert.equal(addressInUse('clusterroles.rbac.authorization.k8s.io "svm" is forbidden: user cannot bind resource "clusterroles"'), false);
  const log = [
    'etcd exited during start-up; its log is /d/etcd.log:',
    '=== T1 starting etcd',
    'listen tcp 127.0.0.1:20001: bind: address already in use',
    '=== T2 starting etcd',
    'flag provided but not defined: -bogus',
  ].join('\n');
  assert.equal(addressInUse(latestStart(log)), false, 'only the latest start is read');
  assert.equal(addressInUse(latestStart(log.replace('-bogus', 'x\nbind: address already in use'))), true);
});

void test('listeningPorts: the listeners of a process, read from /proc; a port answering is not a port held', async () => {
  const mine = await holdPort();
  try {
    assert.ok(listeningPorts(process.pid).has(mine.port));
    assert.ok(holdsPorts(process.pid, [mine.port]));
    const other = await freePort();
    assert.equal(holdsPorts(process.pid, [mine.port, other]), false);
    assert.equal(listeningPorts(2 ** 22 + 1).size, 0, 'no such process: nothing');
  } finally {
    await mine.close();
  }
});

/** A server process: listens on argv[1] (or only exits, silent, when it cannot: a server that says nothing). */
const SERVER = `
const net = require('node:net');
const srv = net.createServer();
if (process.argv[2] === 'silent') srv.once('error', () => process.exit(3));
srv.listen(Number(process.argv[1]), '127.0.0.1', () => console.log('listening on', process.argv[1]));
`;

async function serverProcess(dir: string, held: number, mode: 'loud' | 'silent', rec: ProcessRecord, lines: string[]) {
  const tried: number[] = [];
  const port = await startServerOnPorts(
    'the test server',
    rec,
    [held],
    async ([port]) => {
      tried.push(port!);
      rec.pid = await startProcess(process.execPath, ['-e', SERVER, String(port), mode], rec.log);
      rec.binary = process.execPath;
      await waitServing('the test server', rec, [port!], undefined, 20_000);
      return port!;
    },
    { log: (l) => lines.push(l) },
  );
  return { port, tried };
}

void test('startServerOnPorts: a server started on a drawn port another process holds exits; it is started again on a fresh one, which it holds', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-unit-ports-'));
  const held = await holdPort();
  try {
    for (const mode of ['loud', 'silent'] as const) {
      // loud: its log says EADDRINUSE. silent: it exits saying nothing, and the port is found held by another process.
      const rec: ProcessRecord = { pid: 0, binary: process.execPath, log: path.join(dir, `${mode}.log`), portsDrawn: true };
      const lines: string[] = [];
      const { port, tried } = await serverProcess(dir, held.port, mode, rec, lines);
      try {
        assert.deepEqual(tried.length, 2, `${mode}: ${tried.join(', ')}`);
        assert.equal(tried[0], held.port);
        assert.notEqual(port, held.port);
        assert.ok(isRunning(rec) && holdsPorts(rec.pid, [port]), `${mode}: the server holds ${port}`);
        assert.match(lines.join('\n'), /the test server: \d+ taken by another process meanwhile/);
        if (mode === 'loud') assert.match(fs.readFileSync(rec.log, 'utf8'), /EADDRINUSE/);
      } finally {
        await stopProcess(rec, 0);
      }
    }
  } finally {
    await held.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void test("startServerOnPorts: a fixed port (the record's, from a run) held by another process is refused with assertPortFree's message, not drawn again", async () => {
  const held = await holdPort();
  try {
    let starts = 0;
    await assert.rejects(
      startServerOnPorts('etcd', { pid: 0, binary: '/nonexistent', log: '/dev/null' }, [held.port], () => {
        starts++;
        return Promise.resolve();
      }),
      new RegExp(`cannot start etcd: 127\\.0\\.0\\.1:${held.port} is in use by a process this plane did not record`),
    );
    assert.equal(starts, 0);
  } finally {
    await held.close();
  }
});

void test("the SDK's Prometheus endpoint (src/worker/worker.ts installRuntime): the core's bind on a taken port throws, and the install on a fresh port holds it", async () => {
  const { Runtime, DefaultLogger } = await import('@temporalio/worker');
  const held = await holdPort();
  try {
    const tried: number[] = [];
    const url = await startOnFreePort(
      'the SDK metrics endpoint',
      async ([port]) => {
        tried.push(port!);
        Runtime.install({
          logger: new DefaultLogger('ERROR'),
          telemetryOptions: { metrics: { prometheus: { bindAddress: `127.0.0.1:${port}` } } },
        });
        return `http://127.0.0.1:${port}/metrics`;
      },
      { draw: drawing([held.port]) },
    );
    assert.equal(tried.length, 2);
    assert.equal(tried[0], held.port);
    assert.ok(holdsPorts(process.pid, [tried[1]!]), 'this process holds the endpoint');
    assert.equal((await fetch(url)).status, 200);
  } finally {
    await held.close();
    await Runtime.instance().shutdown();
  }
});

void test('metricsPortOf (test/helpers/migrate.ts): a worker process under SVM_METRICS_PORT=0 is found on the port it bound, read from its log line; one that exits first is a failure quoting its output', async () => {
  // The worker's endpoint and log line (src/worker/worker.ts withServices), on port 0.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-metrics-port-'));
  const src = path.join(__dirname, '..', 'src', 'worker');
  const script = path.join(dir, 'serve.ts');
  fs.writeFileSync(
    script,
    `import { createLogger } from ${JSON.stringify(path.join(src, 'worker'))};
import { createMetrics, serveMetrics } from ${JSON.stringify(path.join(src, 'metrics'))};
void (async () => {
  const endpoint = await serveMetrics(createMetrics({ processMetrics: false }), 0, '127.0.0.1');
  createLogger().info({ port: endpoint.port, host: '127.0.0.1' }, 'metrics on /metrics');
})();
`,
  );
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await metricsPortOf(child, 'the worker', { timeoutMs: 60_000 });
    assert.ok(holdsPorts(child.pid!, [port]), `the worker holds ${port}`);
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  }

  const early = spawn(process.execPath, ['-e', 'console.log("no connection"); process.exit(3)'], { stdio: ['ignore', 'pipe', 'ignore'] });
  await assert.rejects(metricsPortOf(early, 'the worker'), /the worker exited \(3\) before serving \/metrics: no connection/);
});

void test('serveMetrics: a port another listener holds is refused with a message naming the address and the settings, not an unhandled error', async () => {
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  const port = (holder.address() as net.AddressInfo).port;
  try {
    await assert.rejects(
      serveMetrics(createMetrics({ processMetrics: false }), port, '127.0.0.1'),
      new RegExp(`cannot serve /metrics on 127\\.0\\.0\\.1:${port} \\(SVM_METRICS_PORT, SVM_METRICS_HOST\\): EADDRINUSE`),
    );
  } finally {
    await new Promise<void>((r) => holder.close(() => r()));
  }
});
