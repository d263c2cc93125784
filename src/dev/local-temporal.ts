/**
 * The embedded default of `svm worker`: with no TEMPORAL_ADDRESS, a Temporal
 * dev server (with its UI and svm's search attributes) runs as a child of the
 * worker, on 127.0.0.1, persisting to SQLite under the user's state
 * directory, and stops with it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { searchAttributeDefinitions } from '../contract/search-attributes';
import { holdsPorts, portOpen, startOnFreePort } from './ports';
import { ensureTools } from './tools';
import { devServerDynamicConfigArgs } from './temporal-dynamic-config';

/**
 * The Temporal dev server's arguments as svm runs it (the worker's embedded default, the benches): on 127.0.0.1,
 * the default namespace, svm's search attributes and dynamic config; in memory unless given a SQLite file.
 */
export function devServerArgs(o: { port: number; uiPort: number; dbFile?: string; logLevel: 'warn' | 'error' }): string[] {
  return [
    'server',
    'start-dev',
    '--ip=127.0.0.1',
    `--port=${o.port}`,
    `--ui-port=${o.uiPort}`,
    ...(o.dbFile ? [`--db-filename=${o.dbFile}`] : []),
    '--namespace=default',
    `--log-level=${o.logLevel}`,
    ...searchAttributeDefinitions.flatMap((sa) => ['--search-attribute', `${sa.name}=${sa.type}`]),
    ...devServerDynamicConfigArgs(),
  ];
}

export interface LocalTemporal {
  address: string;
  uiUrl: string;
  dbFile: string;
  stop(): Promise<void>;
}

export async function startLocalTemporal(log: (line: string) => void): Promise<LocalTemporal> {
  const stateDir = path.join(process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state'), 'svm');
  fs.mkdirSync(stateDir, { recursive: true });
  const dbFile = path.join(stateDir, 'temporal.sqlite');
  const { temporal } = ensureTools(['temporal-cli'], log);
  // Drawn ports, bound by the server itself: when it finds one taken (it exits saying the address is in use), it
  // is started again on fresh ones.
  const { child, port, uiPort } = await startOnFreePort(
    'the local Temporal dev server',
    async ([port, uiPort]) => {
      const child: ChildProcess = spawn(temporal, devServerArgs({ port: port!, uiPort: uiPort!, dbFile, logLevel: 'warn' }), {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      let closed = false;
      child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)));
      child.once('close', () => (closed = true));
      const deadline = Date.now() + 60_000;
      // Its own listeners, where /proc tells (a port answering could be another process's); else the port answering.
      const serving = async () =>
        fs.existsSync('/proc/self/net/tcp') ? holdsPorts(child.pid ?? 0, [port!, uiPort!]) && (await portOpen(port!)) : portOpen(port!);
      while (!(await serving())) {
        if (closed || child.exitCode !== null)
          throw new Error(`the local Temporal dev server exited (${child.exitCode ?? child.signalCode}): ${stderr.trim()}`);
        if (Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new Error('the local Temporal dev server did not start within 60s');
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      return { child, port: port!, uiPort: uiPort! };
    },
    { count: 2, log },
  );
  return {
    address: `127.0.0.1:${port}`,
    uiUrl: `http://127.0.0.1:${uiPort}`,
    dbFile,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}
