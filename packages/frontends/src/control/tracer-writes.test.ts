/**
 * Trace file writes: in the background, a piece at a time, one file after another in order, with
 * what waits bounded, and failures warned of rather than thrown. A file system seam holds or
 * fails writes where a test needs it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger, type Logger } from '@triode/core';
import { TraceSettings } from './trace-settings.js';
import { MAX_HELD_TRACE_BYTES, MAX_HELD_TRACES, MAX_TRACE_ID_CHARS, TRACE_WRITE_CHUNK_CHARS, Tracer, traceRecordBytes, type TraceFileEntry, type TraceFileHandle, type TraceFileSystem } from './tracer.js';

const STAMPS = ['HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_END', 'REQUEST_END', 'HTTP_SEND_START', 'HTTP_SEND_END'];

function traceFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'triode-trace-writes-')), 't.json');
}

/** A tracer tracing every request to `file` with this log_frequency. */
function tracerFor(file: string, logFrequency: number, options: ConstructorParameters<typeof Tracer>[1] = {}, more: Record<string, string> = {}): Tracer {
  const s = new TraceSettings({ trace_file: file, trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: String(logFrequency), ...more });
  return new Tracer(s, options);
}

/** One traced request of model `simple`, finished with request id `id`. */
function trace(t: Tracer, id: string): void {
  const a = t.start('simple')!;
  STAMPS.forEach((name, i) => a.trace.timestamps.push({ name, ns: 1_000 + i }));
  t.finish(a, '1', id);
}

/** The request ids of a trace file, in the order written. */
function idsIn(path: string): string[] {
  return (JSON.parse(readFileSync(path, 'utf8')) as TraceFileEntry[]).flatMap((e) => ('model_name' in e ? [e.request_id ?? ''] : []));
}

/** A logger that keeps its warnings. */
function warningsLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  return { logger: { ...silentLogger, warning: (m) => { warnings.push(m); } }, warnings };
}

/**
 * node:fs behind the seam, with what a test wants to see or hold: each open and write is logged,
 * a write waits while `hold` is set, and `fail(path)` says which operation on a path fails how.
 */
function seam(fail: (path: string, op: 'open' | 'write' | 'close') => Error | undefined = () => undefined) {
  const log: { op: 'open' | 'write' | 'close'; path: string; chars?: number }[] = [];
  let open = 0;
  let mostOpen = 0;
  let hold: Promise<void> | undefined;
  let release: () => void = () => undefined;
  const fs: TraceFileSystem = {
    open: async (path) => {
      log.push({ op: 'open', path });
      const e = fail(path, 'open');
      if (e) throw e;
      open++;
      mostOpen = Math.max(mostOpen, open);
      const h = await openFile(path, 'w');
      const handle: TraceFileHandle = {
        write: async (text) => {
          log.push({ op: 'write', path, chars: text.length });
          await hold;
          const e = fail(path, 'write');
          if (e) throw e;
          await h.writeFile(text);
        },
        close: async () => {
          log.push({ op: 'close', path });
          open--;
          await h.close();
          const e = fail(path, 'close');
          if (e) throw e;
        },
      };
      return handle;
    },
  };
  return {
    fs, log,
    get mostOpen() { return mostOpen; },
    hold: () => { hold = new Promise((r) => { release = r; }); },
    release: () => { hold = undefined; release(); },
  };
}

function errno(code: string, message: string): Error {
  return Object.assign(new Error(`${code}: ${message}`), { code });
}

describe('trace file writes', () => {
  it('are made after finish returns, a piece at a time with the event loop turning between pieces (before: finish wrote ~50 MB with writeFileSync, 0.25-0.65 s with the event loop held)', async () => {
    const f = traceFile();
    const s = seam();
    const t = tracerFor(f, 0, { fileSystem: s.fs });
    // Event loop turns, counted by a setImmediate that keeps rescheduling itself, seen at each piece.
    let turns = 0;
    let ticking = true;
    const tick = () => { turns++; if (ticking) setImmediate(tick); };
    setImmediate(tick);
    const turnsAtWrite: number[] = [];
    const write = s.fs.open.bind(s.fs);
    s.fs.open = async (path) => {
      const h = await write(path);
      return { write: (text) => { turnsAtWrite.push(turns); return h.write(text); }, close: () => h.close() };
    };
    // Ids of 1,000 characters: MAX_HELD_TRACES of them stay under MAX_HELD_TRACE_BYTES.
    const id = (i: number) => `${String(i).padStart(5, '0')}${'x'.repeat(1000)}`;
    for (let i = 0; i < MAX_HELD_TRACES; i++) trace(t, id(i));
    // The MAX_HELD_TRACES-th trace cut <file>.0: nothing of it is written when finish returns (the
    // file may be there, opened in the background, but empty: its first piece waits for the open).
    expect(existsSync(`${f}.0`) ? statSync(`${f}.0`).size : 0).toBe(0);
    expect(s.log.filter((e) => e.op === 'write')).toHaveLength(0);
    await t.idle();
    ticking = false;
    const writes = s.log.filter((e) => e.op === 'write');
    // ~16 MB in pieces of about TRACE_WRITE_CHUNK_CHARS (one record's entries over at most).
    expect(writes.length).toBeGreaterThan(20);
    for (const w of writes) expect(w.chars).toBeLessThanOrEqual(TRACE_WRITE_CHUNK_CHARS + 8 * 1024);
    for (let i = 1; i < turnsAtWrite.length; i++) expect(turnsAtWrite[i]).toBeGreaterThan(turnsAtWrite[i - 1]!);
    const ids = idsIn(`${f}.0`);
    expect(ids).toHaveLength(MAX_HELD_TRACES);
    expect(ids.every((x, i) => x === id(i))).toBe(true);
  });

  it('go out one file at a time, in the order cut; traces that come while a file is written go with the next (before: each at once, in finish)', async () => {
    const f = traceFile();
    const s = seam();
    const t = tracerFor(f, 2, { fileSystem: s.fs });
    s.hold();
    trace(t, 'a');
    trace(t, 'b');
    // <file>.0 is being written (held); these come meanwhile: <file>.1 is cut, 'e' waits.
    trace(t, 'c');
    trace(t, 'd');
    trace(t, 'e');
    await new Promise((r) => setImmediate(r));
    expect(s.log.filter((e) => e.op === 'open').map((e) => e.path)).toEqual([`${f}.0`]);
    s.release();
    const flushed = t.flush();
    trace(t, 'f');
    await flushed;
    await t.flush();
    expect(s.log.filter((e) => e.op === 'open').map((e) => e.path)).toEqual([`${f}.0`, `${f}.1`, `${f}.2`, `${f}.3`]);
    expect(s.mostOpen).toBe(1);
    expect([0, 1, 2, 3].map((k) => idsIn(`${f}.${k}`))).toEqual([['a', 'b'], ['c', 'd'], ['e'], ['f']]);
  });

  it('hold at most MAX_HELD_TRACES waiting while a file is written; past that, traces are dropped, counted, and warned of once per 10 s (before: nothing to bound, every write was synchronous)', async () => {
    const f = traceFile();
    const s = seam();
    const { logger, warnings } = warningsLogger();
    const t = tracerFor(f, 0, { fileSystem: s.fs, logger });
    s.hold();
    // <file>.0 under way (held), then <file>.1 cut and waiting: MAX_HELD_TRACES wait.
    for (let i = 0; i < 2 * MAX_HELD_TRACES; i++) trace(t, `r${i}`);
    expect(t.dropped).toBe(0);
    for (let i = 0; i < 5; i++) trace(t, `late${i}`);
    expect(t.dropped).toBe(5);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^trace file .*t\.json: 10000 traces are waiting while a file is written, so traces are dropped \(1 so far\)$/);
    s.release();
    await t.idle();
    // Room again: the next is held, and written at exit.
    trace(t, 'after');
    await t.flush();
    expect(idsIn(`${f}.0`)).toHaveLength(MAX_HELD_TRACES);
    expect(idsIn(`${f}.1`)[MAX_HELD_TRACES - 1]).toBe(`r${2 * MAX_HELD_TRACES - 1}`);
    expect(idsIn(f)).toEqual(['after']);
    expect(warnings).toHaveLength(1);
  });

  it('hold at most MAX_HELD_TRACE_BYTES of records with long request ids: a file is cut at that, and past it while one is written traces are dropped (before: MAX_HELD_TRACES of them, ~90 MB, held and as many again being written)', async () => {
    const f = traceFile();
    const s = seam();
    const t = tracerFor(f, 0, { fileSystem: s.fs });
    const id = (i: number) => `${String(i).padStart(5, '0')}${'x'.repeat(MAX_TRACE_ID_CHARS - 5)}`;
    const bytes = traceRecordBytes({ id: 1, model_name: 'simple', model_version: 1, request_id: id(0), timestamps: STAMPS.map((name, i) => ({ name, ns: i })) });
    const perFile = Math.ceil(MAX_HELD_TRACE_BYTES / bytes);
    expect(perFile).toBeLessThan(MAX_HELD_TRACES / 2);
    s.hold();
    // <file>.0 is cut at perFile and written (held), <file>.1 is cut at perFile and waits: the next are dropped.
    for (let i = 0; i < 2 * perFile + 3; i++) trace(t, id(i));
    expect(t.dropped).toBe(3);
    s.release();
    await t.flush();
    expect(idsIn(`${f}.0`)).toHaveLength(perFile);
    expect(idsIn(`${f}.1`)).toHaveLength(perFile);
    expect(existsSync(f)).toBe(false);
  });

  it('traces held for both kinds of file (log_frequency changed) are cut at MAX_HELD_TRACES in all, so none is dropped with the writer idle', async () => {
    const f = traceFile();
    const s = new TraceSettings({ trace_file: f, trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: '0' });
    const t = new Tracer(s);
    for (let i = 0; i < 6000; i++) trace(t, `a${i}`);
    s.update({ log_frequency: '1000000' });
    for (let i = 0; i < 4000; i++) trace(t, `b${i}`);
    await t.idle();
    for (let i = 0; i < 5; i++) trace(t, `c${i}`);
    expect(t.dropped).toBe(0);
    await t.flush();
    expect(idsIn(`${f}.0`)).toHaveLength(4000);
    expect(idsIn(`${f}.1`)).toHaveLength(6000);
    expect(idsIn(`${f}.2`)).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
  });

  it('log_frequency 0: the traces <file> is written with count once against MAX_HELD_TRACES while it waits for the writer (they counted twice: held, and waiting to be written)', async () => {
    const f = traceFile();
    const s = seam();
    const settings = new TraceSettings({ trace_file: f, trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: '1' });
    const t = new Tracer(settings, { fileSystem: s.fs });
    s.hold();
    trace(t, 'a'); // <file>.0, under way (held)
    settings.update({ log_frequency: '0' });
    const n = MAX_HELD_TRACES / 2 + 1;
    for (let i = 0; i < n; i++) trace(t, `b${i}`);
    // <file> waits behind <file>.0, with the n traces still held.
    const flushed = t.flush();
    for (let i = 0; i < 5; i++) trace(t, `c${i}`);
    expect(t.dropped).toBe(0);
    s.release();
    await flushed;
    await t.flush();
    expect(idsIn(`${f}.0`)).toEqual(['a']);
    expect(idsIn(f)).toHaveLength(n + 5);
  });

  it('a trace dropped still counts as collected: the trace_count used up still cuts what is held at once', async () => {
    const f = traceFile();
    const s = seam();
    const n = 2 * MAX_HELD_TRACES + 5;
    const t = tracerFor(f, 0, { fileSystem: s.fs }, { trace_count: String(n) });
    s.hold();
    for (let i = 0; i < 2 * MAX_HELD_TRACES + 3; i++) trace(t, `r${i}`);
    expect(t.dropped).toBe(3);
    s.release();
    await t.idle();
    trace(t, 'y');
    trace(t, 'z');
    // The last of the n: every request the setting saw has finished, so <file>.2 is cut now, not at exit.
    await t.idle();
    expect(idsIn(`${f}.2`)).toEqual(['y', 'z']);
  });

  it('that fail (a full disk, no permission, a removed directory) lose that file\'s traces, warn once per 10 s, and the next files still go out (before: failures were dropped without a word)', async () => {
    const f = traceFile();
    const failures: Record<string, [op: 'open' | 'write' | 'close', Error]> = {
      [`${f}.0`]: ['write', errno('ENOSPC', 'no space left on device, write')],
      [`${f}.1`]: ['open', errno('EACCES', `permission denied, open '${f}.1'`)],
      [`${f}.2`]: ['close', errno('EIO', 'i/o error, close')],
    };
    const s = seam((path, op) => (failures[path]?.[0] === op ? failures[path][1] : undefined));
    const { logger, warnings } = warningsLogger();
    const t = tracerFor(f, 2, { fileSystem: s.fs, logger });
    for (let i = 0; i < 8; i++) trace(t, `r${i}`);
    await t.idle();
    expect(t.lost).toBe(6);
    expect(warnings).toEqual([`trace file ${f}.0 could not be written, 2 traces lost (2 so far): ENOSPC: no space left on device, write`]);
    expect(idsIn(`${f}.3`)).toEqual(['r6', 'r7']);
    // Every file opened was closed.
    expect(s.log.filter((e) => e.op === 'close')).toHaveLength(3);

    // On the disk: the trace file's directory removed.
    const g = traceFile();
    rmSync(join(g, '..'), { recursive: true });
    const real = warningsLogger();
    const u = tracerFor(g, 1, { logger: real.logger });
    trace(u, 'x');
    trace(u, 'y');
    await u.flush();
    expect(u.lost).toBe(2);
    expect(real.warnings).toHaveLength(1);
    expect(real.warnings[0]).toContain(`trace file ${g}.0 could not be written, 1 traces lost (1 so far): ENOENT`);
  });

  it('a flush with a time limit gives up on a write that does not end (a hung disk) and says so, so exit is not held for good; one without waits it out (before: exit awaited the write with no limit)', async () => {
    const f = traceFile();
    const s = seam();
    const t = tracerFor(f, 0, { fileSystem: s.fs });
    trace(t, 'a');
    s.hold();
    expect(await t.flush(50)).toBe(false);
    const whole = t.flush();
    s.release();
    expect(await whole).toBe(true);
    expect(idsIn(f)).toEqual(['a']);
    expect(await t.flush(50)).toBe(true);
  });
});
