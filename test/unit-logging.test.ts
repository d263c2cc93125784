/**
 * Output a person reads is clean: a worker run inside a command someone
 * watches (the demo) logs JSON lines to a file and writes nothing on the
 * terminal; `svm worker` keeps JSON on stdout (a container). (A graceful
 * stop of the leader is info, not a warning: test/unit-leader.test.ts.)
 */
import test from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createFileLogger, readableLine } from '../src/worker/worker';

/** What fn writes to process.stdout and process.stderr. */
async function captured(fn: () => Promise<void> | void): Promise<string> {
  let out = '';
  const saved = [process.stdout.write, process.stderr.write] as const;
  const spy = (chunk: string | Uint8Array) => {
    out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  };
  process.stdout.write = spy as typeof process.stdout.write;
  process.stderr.write = spy as typeof process.stderr.write;
  try {
    await fn();
  } finally {
    [process.stdout.write, process.stderr.write] = saved;
  }
  return out;
}

void test('createFileLogger: JSON lines in the file (its directory created), nothing on the terminal', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svm-log-'));
  const file = path.join(dir, 'plane', 'demo-worker.log');
  try {
    const terminal = await captured(() => {
      const log = createFileLogger(file);
      log.info({ resource: 'widgets.example.com' }, 'worker started');
      log.warn('no longer leader: singletons stopped (stopping)');
    });
    assert.equal(terminal, '');
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    assert.equal(lines.length, 2);
    const entries = lines.map((l) => JSON.parse(l) as { msg: string; level: string; time: string; component: string });
    // Levels as words and times in ISO-8601 (UTC), as log pipelines read them; not pino's numbers and epoch milliseconds.
    assert.deepEqual(
      entries.map((e) => [e.level, e.msg, e.component]),
      [
        ['info', 'worker started', 'svm-worker'],
        ['warn', 'no longer leader: singletons stopped (stopping)', 'svm-worker'],
      ],
    );
    for (const e of entries) {
      assert.match(e.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(Math.abs(Date.parse(e.time) - Date.now()) < 60_000, e.time);
    }
    // The readable form a terminal would get is a sentence, not JSON.
    assert.match(readableLine(lines[0]!), /^\d\d:\d\d:\d\d\.\d{3} INFO {2}worker started {2}resource=widgets\.example\.com\n$/);
    assert.equal(readableLine(lines[0]!).slice(0, 12), entries[0]!.time.slice(11, 23), 'the time of the line, in UTC');
    assert.match(readableLine(lines[1]!), / WARN {2}no longer leader/);
    // A line of pino's defaults (another logger) reads the same.
    assert.equal(readableLine('{"level":50,"time":0,"msg":"boom"}'), '00:00:00.000 ERROR boom\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
