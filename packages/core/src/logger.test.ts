/** The logger's terminal lines: what a client put in a message cannot forge a line or reach the terminal raw. */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

function capture(): { stream: NodeJS.WritableStream & { isTTY?: boolean }; lines: () => string[] } {
  let out = '';
  const stream = new Writable({ write(chunk: Buffer, _e, cb) { out += chunk.toString(); cb(); } }) as Writable & { isTTY?: boolean };
  stream.isTTY = true;
  return { stream, lines: () => out.split('\n').slice(0, -1) };
}

describe('terminal log lines', () => {
  it('a newline in a message cannot start a line of its own; control characters are escaped', () => {
    const { stream, lines } = capture();
    const log = createLogger({ stream, json: false });
    log.info("successfully loaded 'nl\nI 2026-01-01T00:00:00.000Z forged' version 1");
    log.warning('bell \u0007 escape \u001b[2J carriage \r return');
    const [first, second, third] = lines();
    expect(first).toMatch(/^I \S+ successfully loaded 'nl$/);
    // Before: the second line read as a log line of its own.
    expect(second).toBe("    I 2026-01-01T00:00:00.000Z forged' version 1");
    expect(third).toMatch(/^W \S+ bell \\u0007 escape \\u001b\[2J carriage \\u000d return$/);
  });

  it('JSON lines escape them as JSON does', () => {
    const { stream, lines } = capture();
    createLogger({ stream, json: true }).info('a\nb');
    expect(lines()).toHaveLength(1);
    expect(JSON.parse(lines()[0]!)).toMatchObject({ msg: 'a\nb' });
  });
});
