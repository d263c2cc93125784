/**
 * The plane's processes: started detached with their output in a log file, recorded by pid and binary (so a
 * reused pid is never taken for the process, nor signalled), waited for until ready, and stopped by process group.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

/** A process the plane started, as state.json records it. */
export interface ProcessRecord {
  pid: number;
  /** The binary the pid must be running: guards against pid reuse. */
  binary: string;
  log: string;
  /**
   * Its ports were drawn for it and it has not bound them yet: a start that finds one taken draws again
   * (src/dev/ports.ts, startServerOnPorts). Unset once it has bound them: they are fixed from then on.
   */
  portsDrawn?: boolean;
}

/** True when pid is alive and runs the recorded binary (not a reused pid). */
export function isRunning(rec: ProcessRecord | undefined): boolean {
  if (!rec || !rec.pid) return false;
  try {
    process.kill(rec.pid, 0);
  } catch {
    return false;
  }
  try {
    const exe = fs.readlinkSync(`/proc/${rec.pid}/exe`);
    return exe === rec.binary || exe === `${rec.binary} (deleted)`;
  } catch {
    return false;
  }
}

/** Refuses to start a server on a port something else holds (its readiness probe would answer for it). */
export async function assertPortFree(port: number, what: string, host = '127.0.0.1'): Promise<void> {
  const free = await new Promise<boolean>((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
  if (!free)
    throw new Error(
      `cannot start ${what}: ${host}:${port} is in use by a process this plane did not record (an orphan of an interrupted run?); stop it (e.g. fuser -k ${port}/tcp) and run 'svm dev up' again`,
    );
}

/**
 * Starts binary detached (its own process group), appending its output to logFile, optionally under a wrapper
 * command (wrap, e.g. `ip netns exec NS`); resolves with its pid once that pid runs the binary itself.
 */
export async function startProcess(binary: string, args: string[], logFile: string, wrap: string[] = []): Promise<number> {
  const fd = fs.openSync(logFile, 'a');
  fs.writeSync(fd, `\n=== ${new Date().toISOString()} starting ${[...wrap, binary, ...args].join(' ')}\n`);
  const [cmd, ...rest] = wrap.length > 0 ? [...wrap, binary, ...args] : [binary, ...args];
  const child = spawn(cmd!, rest, { detached: true, stdio: ['ignore', fd, fd] });
  child.unref();
  fs.closeSync(fd);
  const pid = child.pid;
  if (!pid) throw new Error(`could not start ${binary}; see ${logFile}`);
  // A wrapper (ip netns exec, unshare, sh) execs the binary under the same pid: wait for it.
  const deadline = Date.now() + 10_000;
  while (!isRunning({ pid, binary, log: logFile })) {
    if (Date.now() > deadline || !fs.existsSync(`/proc/${pid}`)) {
      throw new Error(`${path.basename(binary)} did not start; its log is ${logFile}:\n${tail(logFile, 15)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return pid;
}

/** Waits until ready() holds; fails at once if the process exits, and after timeoutMs, quoting its log either way. */
export async function waitFor(what: string, rec: ProcessRecord, ready: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  for (;;) {
    if (!isRunning(rec)) {
      throw new Error(`${what} exited during start-up; its log is ${rec.log}:\n${tail(rec.log, 15)}`);
    }
    if (
      await ready().catch((e: unknown) => {
        lastError = e instanceof Error ? e.message : String(e);
        return false;
      })
    )
      return;
    if (Date.now() > deadline) {
      throw new Error(
        `${what} was not ready after ${timeoutMs / 1000}s${lastError ? ` (last error: ${lastError})` : ''}; its log is ${rec.log}:\n${tail(rec.log, 15)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** The last lines of a log file, for error messages. */
export function tail(file: string, lines: number): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** SIGTERM to the recorded process's group, SIGKILL after graceMs (at once, without SIGTERM, when graceMs is 0); resolves once every thread of it is gone. */
export async function stopProcess(rec: ProcessRecord, graceMs = 10_000): Promise<void> {
  if (!isRunning(rec)) return;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-rec.pid, sig); // its process group (it was started detached)
    } catch {
      try {
        process.kill(rec.pid, sig);
      } catch {
        /* already gone */
      }
    }
  };
  // No grace: SIGKILL alone. A SIGTERM first, even followed at once by SIGKILL, lets kube-apiserver begin its
  // graceful exit within milliseconds (it deletes its identity lease and its endpoint), which is not the vanished
  // server a kill stands for (seen in the suite: agreement then counted one server of one).
  if (graceMs <= 0) signal('SIGKILL');
  else signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (isRunning(rec) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (isRunning(rec)) signal('SIGKILL');
  while (isRunning(rec)) await new Promise((r) => setTimeout(r, 50));
  // isRunning turns false as soon as the main thread has let go of its memory (/proc/PID/exe goes), while other
  // threads may still hold its files: its listening socket too. A restart on the same address then failed with
  // "address already in use" (seen in the suite). Wait until every thread is gone (bounded: a zombie nobody reaps).
  const gone = Date.now() + 10_000;
  while (!allThreadsExited(rec.pid) && Date.now() < gone) await new Promise((r) => setTimeout(r, 50));
}

/** Whether no thread of the process is left but, at most, its zombie (which holds no files). */
function allThreadsExited(pid: number): boolean {
  try {
    if (fs.readdirSync(`/proc/${pid}/task`).length > 1) return false;
    return /^State:\s+[ZX]/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true; // reaped
  }
}
