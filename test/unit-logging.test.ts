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
    const entries = lines.map((l) => JSON.parse(l) as { msg: string; level: number; component: string });
    assert.deepEqual(
      entries.map((e) => [e.level, e.msg, e.component]),
      [
        [30, 'worker started', 'svm-worker'],
        [40, 'no longer leader: singletons stopped (stopping)', 'svm-worker'],
      ],
    );
    // The readable form a terminal would get is a sentence, not JSON.
    assert.match(readableLine(lines[0]!), /^\d\d:\d\d:\d\d\.\d{3} INFO {2}worker started {2}resource=widgets\.example\.com\n$/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
