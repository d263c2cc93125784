/**
 * Workers of a fleet as shipped: `svm worker` processes with deploy/deployment.yaml's environment, on a test's
 * Temporal and task queue, each logging to a file of the test's scratch directory; and `svm` commands run as an
 * operator runs them. Shared by the fleet's files on real planes.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { readManifests } from './rbac-identity';
import { metricsPortOf } from './migrate';

const run = promisify(execFile);
export const SVM = path.join(__dirname, '..', '..', 'bin', 'svm.js');

/** The worker container's environment in deploy/deployment.yaml. */
export function shippedEnv(): Record<string, string> {
  const d = readManifests('deployment.yaml').find((m) => m.kind === 'Deployment') as unknown as {
    spec: { template: { spec: { containers: Array<{ name: string; env?: Array<{ name: string; value?: string }> }> } } };
  };
  const c = d.spec.template.spec.containers.find((x) => x.name === 'worker')!;
  return Object.fromEntries((c.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
}

export interface FleetWorkers {
  /** The shipped environment on this Temporal and task queue, /metrics on a port of the OS's choosing, then `over`. */
  env(over: Record<string, string>): NodeJS.ProcessEnv;
  /** Starts `svm worker` with env; resolves with the metrics port it logs, and its log file. */
  start(name: string, env: NodeJS.ProcessEnv): Promise<{ proc: ChildProcess; metricsPort: number; log: string }>;
  /** SIGTERM, and waits for the exit. */
  stop(proc: ChildProcess): Promise<void>;
  /** Kills every worker started (a test's end). */
  killAll(): void;
  /** `svm <args>` on this Temporal and task queue, as an operator runs it: its stdout, stderr and exit code. */
  svm(args: string[], env?: Record<string, string>): Promise<{ stdout: string; stderr: string; code: number }>;
}

export function fleetWorkers(opts: { temporalAddress: string; taskQueue: string; scratch: string; deploymentName?: string }): FleetWorkers {
  const procs: ChildProcess[] = [];
  const temporalEnv = { TEMPORAL_ADDRESS: opts.temporalAddress, TEMPORAL_TASK_QUEUE: opts.taskQueue };
  return {
    env: (over) => ({
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      ...shippedEnv(),
      ...temporalEnv,
      ...(opts.deploymentName ? { TEMPORAL_DEPLOYMENT_NAME: opts.deploymentName } : {}),
      SVM_METRICS_PORT: '0',
      SVM_METRICS_HOST: '127.0.0.1',
      ...over,
    }),
    async start(name, env) {
      const log = path.join(opts.scratch, `${name}-${Date.now()}.log`);
      const out = createWriteStream(log);
      const proc = spawn(process.execPath, [SVM, 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      procs.push(proc);
      proc.stdout!.pipe(out);
      proc.stderr!.pipe(out);
      const metricsPort = await metricsPortOf(proc, `${name}'s worker`, { logFile: log });
      return { proc, metricsPort, log };
    },
    async stop(proc) {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
    killAll() {
      for (const p of procs) p.kill('SIGKILL');
    },
    async svm(args, env = {}) {
      try {
        const { stdout, stderr } = await run(process.execPath, [SVM, ...args], {
          env: { ...process.env, ...temporalEnv, ...env },
          timeout: 180_000,
        });
        return { stdout, stderr, code: 0 };
      } catch (err) {
        const e = err as { stdout?: string; stderr?: string; code?: number | string; killed?: boolean };
        if (typeof e.code !== 'number') throw err;
        return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: e.code };
      }
    },
  };
}
