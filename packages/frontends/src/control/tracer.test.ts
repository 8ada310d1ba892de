/** Trace emission: sampling, Triton's record shape and timestamp names, the files written. */
import { mkdtempSync, readFileSync, readdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, messageType } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { createHttpApp } from '../http/http-server.js';
import { startHttpServer } from '../http/listen.js';
import { startGrpcServer, type GrpcServerHandle } from '../grpc/grpc-server.js';
import { TraceSettings } from './trace-settings.js';
import { MAX_HELD_TRACES, MAX_TRACE_ID_CHARS, Tracer, type TraceFileEntry, type TraceRecord } from './tracer.js';

/**
 * A trace file read back into one record per trace, grouped by id in file order as Triton's
 * qa/common/trace_summary.py groups them (the file holds Triton's entries: see traceFileEntries).
 */
function readTraces(path: string): TraceRecord[] {
  const byId = new Map<number, TraceRecord>();
  for (const e of JSON.parse(readFileSync(path, 'utf8')) as (TraceFileEntry & Partial<TraceRecord>)[]) {
    let r = byId.get(e.id);
    if (!r) byId.set(e.id, (r = { id: e.id, model_name: '', model_version: 0, request_id: '', timestamps: [] }));
    if ('model_name' in e) Object.assign(r, { model_name: e.model_name, model_version: e.model_version, request_id: e.request_id ?? '' });
    if ('timestamps' in e) r.timestamps.push(...e.timestamps!);
  }
  return [...byId.values()];
}

let server: InferenceServer;
let grpc: GrpcServerHandle;
const dir = mkdtempSync(join(tmpdir(), 'triode-trace-'));
// The trace file is a start-up setting (clients cannot choose it).
const file = join(dir, 'trace.json');
const settings = new TraceSettings({ trace_file: file });
const tracer = new Tracer(settings);
let app: ReturnType<typeof createHttpApp>;

const body = JSON.stringify({ id: 'r', inputs: [
  { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
  { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(2) },
] });

beforeAll(async () => {
  server = await InferenceServer.create({ modelRepositories: [makeRepository(['simple'])], backends: [new OnnxRuntimeBackend()] });
  app = createHttpApp(new LocalBackplane(server), { traceSettings: settings, tracer });
  grpc = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', traceSettings: settings, tracer });
});

afterAll(async () => {
  await grpc?.close(500);
  await server?.stop(1000);
});

describe('trace emission', () => {
  it('nothing is traced while trace_level is OFF', async () => {
    settings.update({ trace_rate: '1' });
    expect((await app.request('/v2/models/simple/infer', { method: 'POST', body })).status).toBe(200);
    await tracer.flush();
    expect(existsSync(file)).toBe(false);
  });

  it('TIMESTAMPS: every trace_rate-th request, log_frequency per file, with Triton\'s names in order', async () => {
    settings.update({ trace_level: ['TIMESTAMPS'], trace_rate: '2', log_frequency: '2', trace_count: '-1' });
    for (let i = 0; i < 4; i++) expect((await app.request('/v2/models/simple/infer', { method: 'POST', body })).status).toBe(200);
    // Over gRPC (the direct ModelInfer path), with plain HTTP/2 from here.
    const { connect } = await import('node:http2');
    const session = connect(`http://127.0.0.1:${grpc.port}`);
    const msg = Buffer.from(messageType('ModelInferRequest').encode({ model_name: 'simple', id: 'g', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [Buffer.alloc(64), Buffer.alloc(64)] }).finish());
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
    frame.writeUInt32BE(msg.byteLength, 1);
    for (let i = 0; i < 2; i++) {
      await new Promise<void>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' });
        req.on('data', () => undefined);
        req.on('end', () => resolve());
        req.on('error', reject);
        req.end(frame);
      });
    }
    session.close();
    // 6 requests, rate 2: 3 traced; log_frequency 2: one file of 2 now, the third at flush.
    await tracer.idle();
    const first = readTraces(`${file}.0`);
    expect(first).toHaveLength(2);
    expect(first[0]).toMatchObject({ model_name: 'simple', model_version: 1, request_id: 'r' });
    expect(first[0]!.timestamps.map((t) => t.name)).toEqual([
      'HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END',
      'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END', 'HTTP_SEND_START', 'HTTP_SEND_END',
    ]);
    const ns = first[0]!.timestamps.map((t) => t.ns);
    expect([...ns].sort((a, b) => a - b)).toEqual(ns);
    await tracer.flush();
    const rest = readTraces(`${file}.1`);
    expect(rest).toHaveLength(1);
    expect(rest[0]!.request_id).toBe('g');
    expect(rest[0]!.timestamps.map((t) => t.name)).toContain('GRPC_WAITREAD_START');
  });

  it('trace_count caps how many requests are traced, counted from when it was set', async () => {
    settings.update({ trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: '0', trace_count: '2' });
    for (let i = 0; i < 3; i++) await app.request('/v2/models/simple/infer', { method: 'POST', body });
    await tracer.flush();
    // Used up with every request traced: written to <file>.<k> at once (below), not to <file>.
    expect(existsSync(file)).toBe(false);
  });

  it("as Triton: GET reports the trace_count left; used up (every request traced), the traces go to <file>.<k> at once; an update of another field keeps what is left (before: the count set, <file> at exit, the count started over)", async () => {
    const f = join(mkdtempSync(join(tmpdir(), 'triode-trace-count-')), 't.json');
    const s = new TraceSettings({ trace_file: f, trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    const tr = new Tracer(s);
    const a = createHttpApp(new LocalBackplane(server), { traceSettings: s, tracer: tr });
    const count = async () => ((await (await a.request('/v2/trace/setting')).json()) as Record<string, string>)['trace_count'];
    expect(await count()).toBe('-1');
    s.update({ trace_count: '3' });
    expect((await a.request('/v2/models/simple/infer', { method: 'POST', body })).status).toBe(200);
    expect(await count()).toBe('2');
    // Another field: what is left stays (Triton copies count_ when a client set it).
    s.update({ log_frequency: '0' });
    expect(await count()).toBe('2');
    for (let i = 0; i < 3; i++) expect((await a.request('/v2/models/simple/infer', { method: 'POST', body })).status).toBe(200);
    expect(await count()).toBe('0');
    // Used up, and the last request the setting saw has finished: what is held for the file goes to
    // <file>.0 (Triton had written the trace taken before the update to <file> when it replaced that setting).
    await tr.idle();
    expect(readTraces(`${f}.0`)).toHaveLength(3);
    expect(existsSync(f)).toBe(false);
    // Cleared: back to the start-up value (-1, no limit).
    s.update({ trace_count: null });
    expect(await count()).toBe('-1');
  });

  it('trace_rate N traces the N-th request, then every N-th, as Triton (++sample % rate == 0; before: the first)', async () => {
    await tracer.flush();
    const read = (): TraceRecord[] => (existsSync(file) ? readTraces(file) : []);
    const before = read().length;
    settings.update({ trace_level: ['TIMESTAMPS'], trace_rate: '3', log_frequency: '0', trace_count: '-1' });
    for (const id of ['b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7']) {
      const r = await app.request('/v2/models/simple/infer', { method: 'POST', body: body.replace('"id":"r"', `"id":"${id}"`) });
      expect(r.status).toBe(200);
    }
    await tracer.flush();
    const traced = read().slice(before).map((t) => t.request_id);
    expect(traced).toEqual(['b3', 'b6']);
  });
});

describe('trace emission on the direct HTTP path (a listening server, not Hono)', () => {
  it('traces the same timestamps as the Hono route; a request for a model that is not there is not counted', async () => {
    const http = await startHttpServer(app, 0, '127.0.0.1');
    try {
      await tracer.flush();
      // What the shared tracer wrote: <file> at exit and <file>.<k> in order.
      const read = (): TraceRecord[] => [
        ...(existsSync(file) ? readTraces(file) : []),
        ...readdirSync(dir).filter((n) => /^trace\.json\.\d+$/.test(n)).sort((x, y) => Number(x.split('.').pop()) - Number(y.split('.').pop())).flatMap((n) => readTraces(join(dir, n))),
      ];
      const before = new Set(read().map((r) => r.id));
      settings.update({ trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: '0', trace_count: '1' });
      const post = (model: string) => fetch(`http://127.0.0.1:${http.port}/v2/models/${model}/infer`, { method: 'POST', body });
      const missing = await post('nothing_here');
      expect(missing.status).toBe(404);
      await missing.arrayBuffer();
      const ok = await post('simple');
      expect(ok.status).toBe(200);
      await ok.arrayBuffer();
      await tracer.flush();
      // trace_count 1: the failed lookup gave its place back, so the request to simple took it (and,
      // the count used up with every request it saw traced, wrote it to the next <file>.<k> at once).
      const records = read().filter((r) => !before.has(r.id));
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({ model_name: 'simple', model_version: 1, request_id: 'r' });
      expect(records[0]!.timestamps.map((t) => t.name)).toEqual([
        'HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END',
        'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END', 'HTTP_SEND_START', 'HTTP_SEND_END',
      ]);
      const ns = records[0]!.timestamps.map((t) => t.ns);
      expect([...ns].sort((a, b) => a - b)).toEqual(ns);
    } finally {
      settings.update({ trace_level: ['OFF'] });
      await http.close(500);
    }
  });
});

describe('trace records held in memory (review: log_frequency 0 held every record, and 1 MB ids ran the heap out)', () => {
  it('holds at most MAX_HELD_TRACES records a file, whatever log_frequency says, and cuts long request ids', async () => {
    const out = mkdtempSync(join(tmpdir(), 'triode-trace-held-'));
    for (const logFrequency of ['0', '1000000000']) {
      const f = join(out, `t${logFrequency}.json`);
      const s = new TraceSettings({ trace_file: f });
      s.update({ trace_level: ['TIMESTAMPS'], trace_rate: '1', log_frequency: logFrequency, trace_count: '-1' });
      const t = new Tracer(s);
      for (let i = 0; i < MAX_HELD_TRACES + 5; i++) t.finish(t.start('simple')!, '1', i === 0 ? 'x'.repeat(MAX_TRACE_ID_CHARS + 10) : String(i));
      // The first MAX_HELD_TRACES went to <file>.0 once that many were held; 5 are still held.
      await t.idle();
      const first = readTraces(`${f}.0`);
      expect(first).toHaveLength(MAX_HELD_TRACES);
      expect(first[0]!.request_id).toBe(`${'x'.repeat(MAX_TRACE_ID_CHARS)}...`);
      await t.flush();
      const rest = readTraces(logFrequency === '0' ? f : `${f}.1`);
      expect(rest.map((r) => r.request_id)).toEqual(['10000', '10001', '10002', '10003', '10004']);
    }
  });
});

describe('trace records held in memory: long request ids', () => {
  it('a cut id keeps only what was kept, not the whole id it was cut from (before: 100 held traces with 1 MB ids held 100 MB)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = (): number => {
      gc();
      gc();
      return getHeapStatistics().used_heap_size;
    };
    const s = new TraceSettings({ trace_file: join(mkdtempSync(join(tmpdir(), 'triode-trace-ids-')), 't.json'), trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    const t = new Tracer(s);
    const before = heap();
    // log_frequency 0: all 100 are held until exit.
    for (let i = 0; i < 100; i++) t.finish(t.start('simple')!, '1', String(i).padEnd(1 << 20, 'x'));
    const grown = heap() - before;
    // What is held: 100 ids of 4,099 characters (under 1 MB in all, two bytes a character).
    expect(grown).toBeLessThan(20 * 1024 * 1024);
    await t.flush();
  });
});

describe('trace file layout', () => {
  it("is Triton's (TraceActivity): an entry per timestamp in order, the model entry before REQUEST_START, request_id only when there is one, compact JSON (before: one entry per trace, indented)", async () => {
    const f = join(mkdtempSync(join(tmpdir(), 'triode-trace-layout-')), 't.json');
    const s = new TraceSettings({ trace_file: f, trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    const t = new Tracer(s);
    for (const requestId of ['r1', '']) {
      const a = t.start('simple')!;
      for (const [name, ns] of [['HTTP_RECV_START', 1], ['REQUEST_START', 2], ['REQUEST_END', 3], ['HTTP_SEND_END', 4]] as const) a.trace.timestamps.push({ name, ns });
      t.finish(a, '3', requestId);
    }
    await t.flush();
    const text = readFileSync(f, 'utf8');
    expect(text).not.toMatch(/\s/);
    expect(JSON.parse(text)).toEqual([
      { id: 1, timestamps: [{ name: 'HTTP_RECV_START', ns: 1 }] },
      { id: 1, model_name: 'simple', model_version: 3, request_id: 'r1' },
      { id: 1, timestamps: [{ name: 'REQUEST_START', ns: 2 }] },
      { id: 1, timestamps: [{ name: 'REQUEST_END', ns: 3 }] },
      { id: 1, timestamps: [{ name: 'HTTP_SEND_END', ns: 4 }] },
      { id: 2, timestamps: [{ name: 'HTTP_RECV_START', ns: 1 }] },
      { id: 2, model_name: 'simple', model_version: 3 },
      { id: 2, timestamps: [{ name: 'REQUEST_START', ns: 2 }] },
      { id: 2, timestamps: [{ name: 'REQUEST_END', ns: 3 }] },
      { id: 2, timestamps: [{ name: 'HTTP_SEND_END', ns: 4 }] },
    ]);
    expect(Object.keys(JSON.parse(text)[1] as object)).toEqual(['id', 'model_name', 'model_version', 'request_id']);
  });
});

describe('trace_file over the network (issue #14)', () => {
  it('is refused UNSUPPORTED with Triton\'s message, globally and per model, and nothing is written there', async () => {
    const elsewhere = join(dir, 'chosen-by-client.json');
    for (const path of ['/v2/trace/setting', '/v2/models/simple/trace/setting']) {
      for (const value of [elsewhere, file, null]) {
        const r = await app.request(path, { method: 'POST', body: JSON.stringify({ trace_file: value, trace_rate: '1' }) });
        expect(r.status).toBe(501);
        expect(await r.json()).toEqual({ error: 'trace file location can not be updated through network protocol' });
      }
    }
    expect(settings.get()['trace_file']).toBe(file);
    expect(settings.get('simple')['trace_file']).toBe(file);
    expect(() => settings.update({ trace_file: elsewhere })).toThrow(expect.objectContaining({ code: 'UNSUPPORTED' }) as Error);
    for (let i = 0; i < 2; i++) await app.request('/v2/models/simple/infer', { method: 'POST', body });
    await tracer.flush();
    expect(existsSync(elsewhere)).toBe(false);
  });
});

describe('trace sampling per settings scope', () => {
  it('a model\'s own trace_count holds while requests of other models come between', () => {
    const s = new TraceSettings({ trace_file: join(dir, 'scoped.json'), trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    const t = new Tracer(s);
    s.update({ trace_count: '1' }, 'simple');
    let simple = 0;
    let other = 0;
    for (let i = 0; i < 5; i++) {
      if (t.start('simple')) simple++;
      if (t.start('tagged')) other++;
    }
    // Before: one allowance for all, reset whenever the count setting in effect changed: 5 and 5.
    expect({ simple, other }).toEqual({ simple: 1, other: 5 });
    // An update of the scope starts its count over.
    s.update({ trace_count: '2' }, 'simple');
    expect([t.start('simple'), t.start('simple'), t.start('simple')].filter(Boolean)).toHaveLength(2);
  });

  it('a request to an unknown model gives its trace_count back', async () => {
    const f = join(dir, 'count.json');
    const s = new TraceSettings({ trace_file: f, trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '2' });
    const t = new Tracer(s);
    const a = createHttpApp(new LocalBackplane(server), { traceSettings: s, tracer: t });
    for (const m of ['nope1', 'nope2']) expect((await a.request(`/v2/models/${m}/infer`, { method: 'POST', body })).status).toBe(404);
    for (let i = 0; i < 3; i++) expect((await a.request('/v2/models/simple/infer', { method: 'POST', body })).status).toBe(200);
    // Before: the two 404s used up the count and nothing was traced. They are not counted as seen
    // either, so the count used up by the two traced requests writes them at once.
    await t.idle();
    expect(readTraces(`${f}.0`).map((r) => r.model_name)).toEqual(['simple', 'simple']);
    expect(existsSync(f)).toBe(false);
  });

  it('a traced request that fails is recorded with the timestamps it got, so the count used up still writes at once (review: one failure and the write never came until exit)', async () => {
    const f = join(dir, 'failed.json');
    const s = new TraceSettings({ trace_file: f, trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '2', log_frequency: '0' });
    const t = new Tracer(s);
    const a = createHttpApp(new LocalBackplane(server), { traceSettings: s, tracer: t });
    const bad = body.replace('"INT32"', '"FP32"');
    expect(bad).not.toBe(body);
    expect((await a.request('/v2/models/simple/infer', { method: 'POST', body: bad })).status).toBe(400);
    expect((await a.request('/v2/models/simple/infer', { method: 'POST', body })).status).toBe(200);
    await t.idle();
    const traces = readTraces(`${f}.0`);
    expect(traces).toHaveLength(2);
    expect(traces[0]!.timestamps.map((x) => x.name)).toContain('HTTP_RECV_START');
    expect(traces[0]!.timestamps.map((x) => x.name)).not.toContain('HTTP_SEND_START');
    expect(traces[1]!.timestamps.map((x) => x.name)).toContain('HTTP_SEND_END');
  });
});
