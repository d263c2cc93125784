/**
 * The worker's logging: its logger (JSON lines, or readable lines on a terminal) and the Temporal runtime, installed
 * once per process, logging through it.
 */
import { DefaultLogger, Runtime, type LogEntry } from '@temporalio/worker';
import pino, { type Logger } from 'pino';
import { startOnFreePort } from './free-port';

/**
 * The long-running worker's logger (`svm worker`, a container): JSON lines
 * (pino) on stdout, or one readable line per entry when stdout is a
 * terminal. Never object data. Each line's `level` is a word (`"info"`,
 * `"warn"`, ...) and its `time` ISO-8601 in UTC, as log pipelines (Loki,
 * Elasticsearch, Cloud Logging) read them without a mapping, not pino's
 * numbers and epoch milliseconds.
 */
export function createLogger(destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    base: { component: 'svm-worker' },
    level: process.env.SVM_LOG_LEVEL || 'info',
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (destination) return pino(options, destination);
  if (process.stdout.isTTY && !process.env.CI)
    return pino(options, { write: (line: string) => void process.stdout.write(readableLine(line)) });
  return pino(options);
}

/**
 * The logger of a worker run inside a command a person watches (the demo):
 * JSON lines appended to file (its directory created), nothing on the
 * terminal, which gets sentences only. Written synchronously, so nothing is
 * lost when the command exits.
 */
export function createFileLogger(file: string): Logger {
  return createLogger(pino.destination({ dest: file, mkdir: true, sync: true, append: true }));
}

/** pino's numeric levels, for a line written by a logger other than createLogger's (pino's defaults). */
const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** One JSON log line as a person reads it on a terminal: `HH:MM:SS.mmm LEVEL message  key=value ...`. */
export function readableLine(json: string): string {
  const { level, time, msg, component: _c, pid: _p, hostname: _h, ...rest } = JSON.parse(json) as Record<string, unknown>;
  const fields = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  const word = typeof level === 'number' ? (LEVELS[level] ?? String(level)) : String(level);
  const at = new Date(typeof time === 'number' ? time : String(time));
  return `${at.toISOString().slice(11, 23)} ${word.toUpperCase().padEnd(5)} ${String(msg)}${fields ? '  ' + fields : ''}\n`;
}

/** Where the Temporal runtime's log entries (SDK, workflow and activity logs) go: the current worker's logger. */
let runtimeSink: Logger | undefined;
let runtimeInstalled = false;

function forward(entry: LogEntry): void {
  const log = runtimeSink;
  if (!log) return;
  const meta = (entry.meta ?? {}) as Record<string, unknown>;
  // Worker lifecycle chatter is debug; activity and workflow logs keep their level.
  const level =
    entry.level === 'ERROR'
      ? 'error'
      : entry.level === 'WARN'
        ? 'warn'
        : entry.level === 'INFO' && meta.sdkComponent !== 'worker'
          ? 'info'
          : 'debug';
  log[level](meta, entry.message);
}

let sdkMetricsUrl: string | undefined;

/**
 * Installs the Temporal runtime once per process, logging through pino and,
 * when asked, exporting the SDK's metrics on a loopback port (served again,
 * with ours, by the worker's /metrics).
 */
export async function installRuntime(log: Logger, withSdkMetrics = false, keepSink = false): Promise<string | undefined> {
  // The runtime's one sink: the latest worker's logger, but in a pool the pool's (a cluster's would label every
  // cluster's SDK lines with its name).
  if (!keepSink || !runtimeInstalled) runtimeSink = log;
  if (runtimeInstalled) return sdkMetricsUrl;
  if (withSdkMetrics) {
    // The core binds its Prometheus endpoint in Runtime.install, on an address given up front (the port it would get
    // for port 0 is not reported back): a drawn port, and a fresh one when the bind finds it taken (install throws
    // "Address already in use" and can be called again). Once install returns, the port is the endpoint's.
    sdkMetricsUrl = await startOnFreePort('the SDK metrics endpoint', async ([port]) => {
      Runtime.install({
        logger: new DefaultLogger('DEBUG', forward),
        telemetryOptions: { metrics: { prometheus: { bindAddress: `127.0.0.1:${port}` } } },
      });
      return `http://127.0.0.1:${port}/metrics`;
    });
  } else Runtime.install({ logger: new DefaultLogger('DEBUG', forward) });
  runtimeInstalled = true;
  return sdkMetricsUrl;
}
