/**
 * Trace files of a running `triode serve` (written in the background, control/tracer.ts): the
 * traces held at SIGTERM, and a file cut when trace_count is used up just before it, are on disk
 * when the process has exited; a trace file that cannot be written is warned of and requests go
 * on being served.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

const repo = makeRepository(['simple']);
let running: Child | undefined;

afterEach(async () => {
  await running?.stop();
  running = undefined;
});

async function serve(file: string, ...config: string[]): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  const traceConfig = [`file=${file}`, 'level=TIMESTAMPS', 'rate=1', ...config].flatMap((c) => ['--trace-config', c]);
  running = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', ...traceConfig]);
  return { child: running, port };
}

function body(id: string): string {
  return JSON.stringify({ id, inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(2) },
  ] });
}

async function infer(port: number, id: string): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${port}/v2/models/simple/infer`, { method: 'POST', body: body(id) });
  await r.arrayBuffer();
  return r.status;
}

/** The request ids of a trace file, in the order written. */
function idsIn(path: string): string[] {
  return (JSON.parse(readFileSync(path, 'utf8')) as { model_name?: string; request_id?: string }[]).flatMap((e) => (e.model_name ? [e.request_id ?? ''] : []));
}

const N = 300;
const id = (i: number) => `${String(i).padStart(4, '0')}${'i'.repeat(4000)}`;

describe('trace files at exit', () => {
  it('SIGTERM: the traces held (log_frequency 0) are all in <file> once the process has exited', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'triode-trace-exit-')), 't.json');
    const { child, port } = await serve(file, 'log_frequency=0');
    for (let i = 0; i < N; i++) expect(await infer(port, id(i))).toBe(200);
    expect(existsSync(file)).toBe(false);
    expect(await child.stop()).toBe(0);
    expect(idsIn(file)).toEqual(Array.from({ length: N }, (_, i) => id(i)));
  });

  it('trace_count used up, then SIGTERM at once: the file it cut is whole once the process has exited', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'triode-trace-count-exit-')), 't.json');
    const { child, port } = await serve(file, 'log_frequency=0', `count=${N}`);
    for (let i = 0; i < N - 1; i++) expect(await infer(port, id(i))).toBe(200);
    // The last one cuts <file>.0 as its response goes out; the signal follows straight after.
    expect(await infer(port, id(N - 1))).toBe(200);
    expect(await child.stop()).toBe(0);
    expect(idsIn(`${file}.0`)).toEqual(Array.from({ length: N }, (_, i) => id(i)));
    expect(existsSync(file)).toBe(false);
  });
});

describe('a trace file that cannot be written', () => {
  it('its directory removed: requests are served, a warning (at most every 10 s) says what was lost (before: nothing was said)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'triode-trace-gone-'));
    const file = join(dir, 't.json');
    const { child, port } = await serve(file, 'log_frequency=1');
    rmSync(dir, { recursive: true });
    for (let i = 0; i < 20; i++) expect(await infer(port, `r${i}`)).toBe(200);
    const health = await fetch(`http://127.0.0.1:${port}/v2/health/ready`);
    expect(health.status).toBe(200);
    expect(await child.stop()).toBe(0);
    // 20 files lost: one warning for the first, the others counted (a run slower than 10 s a file
    // would warn again, with the count).
    const warnings = child.output().split('\n').filter((l) => l.includes('could not be written'));
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings.length).toBeLessThan(20);
    expect(warnings[0]).toContain(`trace file ${file}.0 could not be written, 1 traces lost (1 so far): ENOENT`);
  });
});
