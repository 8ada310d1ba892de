/**
 * Issue #14 over HTTP, in-process (`app.request()`): files chosen over the network, bodies read
 * without a limit, responses too large to build, unbounded echoes of client input and internal
 * details in error messages. Each test attacks one defect.
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { LogSettings, silentLogger, type Backplane, type InferenceRequest, type InferenceResponse, type Logger } from '@triode/core';
import { createHttpApp } from './http-server.js';
import { CONTROL_MAX_BODY_SIZE } from './body.js';
import { UNEXPECTED_ERROR_MESSAGE } from '../error-mapping.js';

/** A backplane that answers infer with what `answer` builds; everything else is a model "m" that exists. */
function fakeBackplane(answer: (r: InferenceRequest) => InferenceResponse | Promise<InferenceResponse>): Backplane & { loads: number; unloads: number } {
  const b = {
    loads: 0,
    unloads: 0,
    isLive: async () => true,
    isReady: async () => true,
    serverMetadata: async () => ({ name: 'triton', version: '0', extensions: [] }),
    modelReady: async () => true,
    modelMetadata: async (name: string) => ({ name, versions: ['1'], platform: 'x', inputs: [], outputs: [] }),
    modelConfig: async (name: string) => ({ name, input: [{ name: 'N', data_type: 'TYPE_INT32', dims: [1] }] }),
    modelStatistics: async () => [],
    repositoryIndex: async () => [],
    infer: async (r: InferenceRequest) => answer(r),
    inferStream: async (r: InferenceRequest, on: (x: InferenceResponse) => void) => { on(await answer(r)); },
    loadModel: async () => { b.loads++; },
    unloadModel: async () => { b.unloads++; },
  };
  return b as unknown as Backplane & { loads: number; unloads: number };
}

const request = { inputs: [{ name: 'N', datatype: 'INT32', shape: [1], data: [1] }] };

/** A model "m" whose output y has as many FP32 elements as the request's input N says: i / 7. */
const bigOutput = fakeBackplane((r) => {
  const n = Number((r.inputs[0]!.data as Int32Array)[0]);
  const y = Float32Array.from({ length: n }, (_, i) => i / 7);
  return { modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'FP32', shape: [n], data: y }] };
});

const post = (app: ReturnType<typeof createHttpApp>, path: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
  app.request(path, { method: 'POST', body: body as string, headers });

const errorOf = async (r: Response) => (await r.json() as { error: string }).error;

describe('log_file and trace_file over the network', () => {
  it('POST /v2/logging with log_file is 501 with Triton\'s message, even for the current file; nothing changes', async () => {
    const settings = new LogSettings({ file: '/var/log/triode.log' });
    const app = createHttpApp(fakeBackplane(() => { throw new Error('unused'); }), { logSettings: settings, logger: silentLogger });
    const before = settings.toJson();
    for (const log_file of ['/tmp/chosen.log', before['log_file'], '']) {
      const r = await post(app, '/v2/logging', JSON.stringify({ log_file, log_info: false }));
      expect(r.status).toBe(501);
      expect(await errorOf(r)).toBe('log file location can not be updated through network protocol');
    }
    expect(settings.toJson()).toEqual(before);
  });
});

describe('request body limits', () => {
  const app = createHttpApp(bigOutput, { maxInputSize: 1 << 20, logSettings: new LogSettings(), logger: silentLogger });
  // Valid JSON padded past the limit: the old routes read it whole and accepted it.
  const padded = (doc: unknown, size: number) => JSON.stringify(doc) + ' '.repeat(size);

  it('control routes refuse a body over 64 KiB with 413 (logging, trace, repository index and unload)', async () => {
    for (const [path, doc] of [
      ['/v2/logging', { log_info: true }], ['/v2/trace/setting', { trace_rate: '5' }], ['/v2/models/m/trace/setting', { trace_rate: '5' }],
      ['/v2/repository/index', {}], ['/v2/repository/models/m/unload', {}], ['/v2/no/such/route', {}],
    ] as const) {
      const small = await post(app, path, padded(doc, 1000));
      expect(small.status, path).not.toBe(413);
      const r = await post(app, path, padded(doc, CONTROL_MAX_BODY_SIZE));
      expect(r.status, path).toBe(413);
      expect(r.headers.get('connection')).toBe('close');
      expect(await errorOf(r)).toMatch(/^Request body of \d+ bytes exceeds the limit of 65536 bytes of this endpoint$/);
    }
    expect(bigOutput.unloads).toBe(1);
  });

  it('a declared Content-Length over the limit is refused before the body is read', async () => {
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({ pull(ctl) { pulled++; ctl.enqueue(new Uint8Array(1024).fill(32)); } });
    const r = await app.request('/v2/logging', { method: 'POST', body, headers: { 'content-length': String(1 << 30) }, duplex: 'half' } as RequestInit);
    expect(r.status).toBe(413);
    expect(await errorOf(r)).toContain(`Request body of ${1 << 30} bytes`);
    expect(pulled).toBeLessThanOrEqual(1);
  });

  it('a body without a length is counted as it streams: an endless one is cut at the limit', async () => {
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({ pull(ctl) { sent += 4096; ctl.enqueue(new Uint8Array(4096).fill(32)); } });
    const r = await app.request('/v2/trace/setting', { method: 'POST', body: endless, duplex: 'half' } as RequestInit);
    expect(r.status).toBe(413);
    expect(sent).toBeLessThan(CONTROL_MAX_BODY_SIZE + 3 * 4096);
  });

  it('a gzip bomb is refused on its stated size, without inflating (control route: 413; infer: Triton\'s 400)', async () => {
    const bomb = gzipSync(Buffer.alloc(8 << 20, 32));
    expect(bomb.byteLength).toBeLessThan(CONTROL_MAX_BODY_SIZE);
    const r = await post(app, '/v2/logging', bomb, { 'content-encoding': 'gzip' });
    expect(r.status).toBe(413);
    expect(await errorOf(r)).toContain(`Request body of ${8 << 20} bytes`);
    const i = await post(app, '/v2/models/m/infer', bomb, { 'content-encoding': 'gzip' });
    expect(i.status).toBe(400);
    expect(await errorOf(i)).toBe(`Request JSON size of ${8 << 20} bytes exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size to increase the limit.`);
  });

  it('a gzip bomb that understates its size is inflated only up to the limit', async () => {
    const liar = gzipSync(Buffer.alloc(8 << 20, 32));
    liar.writeUInt32LE(100, liar.byteLength - 4);
    const r = await post(app, '/v2/trace/setting', liar, { 'content-encoding': 'gzip' });
    expect(r.status).toBe(413);
    expect(await errorOf(r)).toContain(`Request body of ${CONTROL_MAX_BODY_SIZE + 1} bytes`);
    const i = await post(app, '/v2/models/m/infer', liar, { 'content-encoding': 'gzip' });
    expect(i.status).toBe(400);
    expect(await errorOf(i)).toContain('exceeds the maximum allowed value of 1048576 bytes');
  });

  it('model load gets --http-max-input-size (it may carry model files), not the control limit', async () => {
    const doc = { parameters: { config: '{}' } };
    const ok = await post(app, '/v2/repository/models/m/load', padded(doc, 200_000));
    expect(ok.status).toBe(200);
    expect(bigOutput.loads).toBe(1);
    const r = await post(app, '/v2/repository/models/m/load', padded(doc, 1 << 20));
    expect(r.status).toBe(413);
    expect(bigOutput.loads).toBe(1);
  });
});

describe('JSON response size guard', () => {
  const app = createHttpApp(bigOutput, { maxJsonOutputSize: 1 << 20, logger: silentLogger });
  const infer = (n: number, extra: Record<string, unknown> = {}) =>
    post(app, '/v2/models/m/infer', JSON.stringify({ ...request, inputs: [{ ...request.inputs[0], data: [n] }], ...extra }));

  it('an output whose JSON could pass the limit is refused with 400 naming the size and binary_data, before any is written', async () => {
    const r = await infer(100_000);
    expect(r.status).toBe(400);
    const e = await errorOf(r);
    expect(e).toBe(
      'Response of up to 2600002 bytes exceeds the limit of 1048576 bytes for outputs written as JSON (the largest: \'y\', FP32 [100000]); '
      + 'request large outputs as binary data: output parameter "binary_data": true, or request parameter "binary_data_output": true',
    );
  });

  it('generate and generate_stream refuse it too (400; an error event on the stream)', async () => {
    const r = await post(app, '/v2/models/m/generate', JSON.stringify({ N: 100_000 }));
    expect(r.status).toBe(400);
    expect(await errorOf(r)).toMatch(/^Response of up to 2600002 bytes exceeds the limit of 1048576 bytes/);
    const s = await post(app, '/v2/models/m/generate_stream', JSON.stringify({ N: 100_000 }));
    expect(await s.text()).toMatch(/^data: \{"error":"Response of up to 2600002 bytes exceeds/);
    expect((await post(app, '/v2/models/m/generate', JSON.stringify({ N: 3 }))).status).toBe(200);
  });

  it('the same output as binary data is answered, byte for byte', async () => {
    const r = await infer(100_000, { parameters: { binary_data_output: true } });
    expect(r.status).toBe(200);
    const headerLength = Number(r.headers.get('inference-header-content-length'));
    const body = new Uint8Array(await r.arrayBuffer());
    const y = new Float32Array(body.slice(headerLength).buffer);
    expect(y.length).toBe(100_000);
    expect(y[99_999]).toBe(Math.fround(99_999 / 7));
  });

  it('below the limit, a large JSON output is written exactly (pieces joined, NaN and Infinity as null)', async () => {
    const n = 40_000;
    const y = Float32Array.from({ length: n }, (_, i) => i / 7);
    y[20_000] = Number.NaN;
    y[39_999] = Number.NEGATIVE_INFINITY;
    const a = createHttpApp(fakeBackplane(() => ({ modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'FP32', shape: [n], data: y }] })), { logger: silentLogger });
    const r = await post(a, '/v2/models/m/infer', JSON.stringify(request));
    expect(r.status).toBe(200);
    const out = (await r.json() as { outputs: { data: (number | null)[] }[] }).outputs[0]!.data;
    expect(out).toHaveLength(n);
    expect(out[16_384]).toBe(y[16_384]);
    expect(out[20_000]).toBeNull();
    expect(out[39_999]).toBeNull();
    expect(out[39_998]).toBe(y[39_998]);
  });
});

describe('error messages', () => {
  it('a thrown non-TriodeError reaches the client as a clean 500; its detail goes to the log', async () => {
    const logged: string[] = [];
    const logger: Logger = { ...silentLogger, error: (m) => { logged.push(m); } };
    const app = createHttpApp(fakeBackplane(() => {
      throw new Error("ENOENT: no such file or directory, open '/srv/secret/models/m/1/model.onnx'");
    }), { logger });
    const r = await post(app, '/v2/models/m/infer', JSON.stringify(request));
    expect(r.status).toBe(500);
    const e = await errorOf(r);
    expect(e).toBe(UNEXPECTED_ERROR_MESSAGE);
    expect(e).not.toMatch(/\/srv|ENOENT|at /);
    expect(logged.join('\n')).toContain('/srv/secret/models/m/1/model.onnx');
    expect(logged.join('\n')).toMatch(/\n\s+at /);
  });

  it('client input echoed in errors is cut (header values, setting names, tensor names, JSON tokens)', async () => {
    const app = createHttpApp(bigOutput, { logSettings: new LogSettings(), logger: silentLogger });
    const long = 'A'.repeat(10_000);
    const cases: Response[] = [
      await post(app, '/v2/models/m/infer', JSON.stringify(request), { 'inference-header-content-length': long }),
      await post(app, '/v2/models/m/infer', JSON.stringify(request), { 'content-encoding': long }),
      await post(app, '/v2/logging', JSON.stringify({ [long]: 1 })),
      await post(app, '/v2/trace/setting', JSON.stringify({ [long]: '1' })),
      await post(app, '/v2/models/m/infer', JSON.stringify({ inputs: [{ name: long, datatype: long, shape: [1], data: [1] }] })),
      await post(app, '/v2/models/m/infer', JSON.stringify({ inputs: [{ name: long, datatype: 'FP32', shape: [2], data: [1] }] })),
    ];
    for (const r of cases) {
      expect(r.status).toBeGreaterThanOrEqual(400);
      const e = await errorOf(r);
      expect(e.length).toBeLessThan(1000);
      expect(e.toUpperCase()).toContain('AAA...');
    }
    // A control character in a JSON token comes back escaped, on one line.
    const ctl = await post(app, '/v2/models/m/infer', '{"inputs": \u0001}');
    expect(await errorOf(ctl)).toContain("Unexpected token '\\u0001'");
  });
});
