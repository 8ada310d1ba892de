/** `--log-file`: log lines go to the file (JSON lines, appended); `/v2/logging` reports it. */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

let triode: Child;
let base: string;
const logFile = join(mkdtempSync(join(tmpdir(), 'triode-log-')), 'server.log');

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  // The model table still goes to stderr; the log lines go to the file.
  triode = await startTriode(['serve', '--model-repository', makeRepository(['simple']), '--http-port', String(port), '--http-address', '127.0.0.1',
    '--allow-grpc=false', '--allow-metrics=false', '--log-file', logFile], /\| simple +\| 1 +\| READY/);
  for (let i = 0; i < 100; i++) {
    if ((await fetch(`${base}/v2/health/ready`).catch(() => undefined))?.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
});

afterAll(async () => {
  await triode?.stop();
});

describe('--log-file', () => {
  it('writes JSON log lines to the file, not stderr, and /v2/logging reports the file', async () => {
    const lines = readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { level: string; msg: string });
    expect(lines.some((l) => l.level === 'info' && /Started HTTPService at 127.0.0.1:\d+/.test(l.msg))).toBe(true);
    expect(triode.output()).not.toMatch(/Started HTTPService/);
    const settings = await (await fetch(`${base}/v2/logging`)).json() as { log_file: string };
    expect(settings.log_file).toBe(logFile);
    const r = await fetch(`${base}/v2/logging`, { method: 'POST', body: JSON.stringify({ log_file: '/tmp/other.log' }) });
    expect(r.status).toBe(501);
  });
});
