import { gunzipSync, gzipSync, deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { Errors, InferenceServer, LocalBackplane, LogSettings, silentLogger, deserializeBytesTensor, serializeBytesTensor, type AsyncInference } from '@triode/core';
import { binaryBody, makeRepository, splitBinary } from '../../../../test/helpers/repository.js';
import { HTTP_EXTENSIONS, createHttpApp, serverExtensions } from './http-server.js';

let server: InferenceServer;
let app: ReturnType<typeof createHttpApp>;
let strictApp: ReturnType<typeof createHttpApp>;

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i);
const IN1 = new Int32Array(16).fill(1);
const SUM = Array.from(IN0, (x) => x + 1);
const DIFF = Array.from(IN0, (x) => x - 1);

const simpleJson = (extra: Record<string, unknown> = {}) => ({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from(IN0) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from(IN1) },
  ],
  ...extra,
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}, a = app) =>
  a.request(path, { method: 'POST', body: typeof body === 'string' || body instanceof Uint8Array ? body as string : JSON.stringify(body), headers });

beforeAll(async () => {
  const repo = makeRepository(['simple', 'simple_string', 'ppocr_cls'], {
    'broken/config.pbtxt': 'name: "broken"\nplatform: "onnxruntime_onnx"\nmax_batch_size: oops\n',
    'broken/1/model.onnx': '',
  });
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()], strictReadiness: false });
  app = createHttpApp(new LocalBackplane(server), { maxInputSize: 1 << 20 });
  strictApp = createHttpApp(new LocalBackplane(await InferenceServer.create({ modelRepositories: [makeRepository([], { 'broken/config.pbtxt': 'x' })], backends: [] })));
});

afterAll(async () => {
  await server?.stop(1000);
});

describe('health and metadata', () => {
  it('GET /v2/health/live and /ready answer 200 with an empty body', async () => {
    for (const p of ['/v2/health/live', '/v2/health/ready']) {
      const r = await app.request(p);
      expect(r.status).toBe(200);
      expect(await r.text()).toBe('');
    }
  });

  it('GET /v2/health/ready is 400 under strict readiness while a model is unavailable', async () => {
    expect((await strictApp.request('/v2/health/ready')).status).toBe(400);
    expect((await strictApp.request('/v2/health/live')).status).toBe(200);
  });

  it('GET /v2/cluster/workers answers 501 in embedded mode (cluster mode only)', async () => {
    const r = await app.request('/v2/cluster/workers');
    expect(r.status).toBe(501);
    expect(await r.json()).toEqual({ error: 'the cluster endpoints need cluster mode: start a gateway with --redis (triode gateway)' });
    // Another method on it is 405, as on every path Triode routes (review: 404).
    for (const method of ['POST', 'PUT', 'DELETE']) expect((await app.request('/v2/cluster/workers', { method })).status, method).toBe(405);
  });

  it('GET /v2 gives the server metadata with the default name "triton"', async () => {
    const r = await app.request('/v2');
    expect(r.status).toBe(200);
    const j = await r.json() as { name: string; version: string; extensions: string[] };
    expect(j.name).toBe('triton');
    expect(j.extensions).toContain('binary_tensor_data');
    expect(j.extensions).toContain('classification');
  });

  it('GET /v2/models/{m} gives inputs and outputs with the batch dim as -1', async () => {
    for (const p of ['/v2/models/simple', '/v2/models/simple/versions/1']) {
      const r = await app.request(p);
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({
        name: 'simple', versions: ['1'], platform: 'onnxruntime_onnx',
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] }],
        outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] }, { name: 'OUTPUT1', datatype: 'INT32', shape: [-1, 16] }],
      });
    }
  });

  it('answers 404 "Request for unknown model" for an unknown model or version', async () => {
    const r = await app.request('/v2/models/nope');
    expect(r.status).toBe(404);
    expect((await r.json() as { error: string }).error).toMatch(/^Request for unknown model: 'nope' is not found/);
    const v = await app.request('/v2/models/simple/versions/7');
    expect(v.status).toBe(404);
    expect((await v.json() as { error: string }).error).toMatch("Request for unknown model: 'simple' version 7 is not found");
  });

  it('answers 404 Not Found for a version that is not a number and for unknown paths', async () => {
    for (const p of ['/v2/models/simple/versions/abc', '/v2/nothing', '/v3']) {
      const r = await app.request(p);
      expect(r.status).toBe(404);
      expect(await r.json()).toEqual({ error: 'Not Found' });
    }
  });

  it('answers 405 for a known path with the wrong method', async () => {
    const r = await app.request('/v2/health/live', { method: 'POST' });
    expect(r.status).toBe(405);
    expect(await r.json()).toEqual({ error: 'Method Not Allowed' });
    expect((await app.request('/v2/models/simple/infer')).status).toBe(405);
  });

  it('answers HEAD as Triton does, whose GET handlers take GET only: 405 on a path it routes, 404 elsewhere (review: Hono served HEAD as GET, 200)', async () => {
    for (const p of ['/v2', '/v2/health/live', '/v2/health/ready', '/v2/models/simple', '/v2/models/simple/versions/1/ready', '/v2/models/simple/config', '/v2/models/stats', '/v2/models/simple/stats', '/v2/models/simple/infer']) {
      expect((await app.request(p, { method: 'HEAD' })).status, p).toBe(405);
    }
    expect((await app.request('/v2/nothing', { method: 'HEAD' })).status).toBe(404);
    expect((await app.request('/v2/models/simple/versions/x/ready', { method: 'HEAD' })).status).toBe(404);
  });

  it('without client shared memory: system status lists nothing, register and unregister say it is disabled (501), CUDA is not supported (501), 405 for the wrong method', async () => {
    expect([(await app.request('/v2/systemsharedmemory/status')).status, await (await app.request('/v2/systemsharedmemory/status')).json()]).toEqual([200, []]);
    const one = await app.request('/v2/systemsharedmemory/region/r0/status');
    expect([one.status, await one.json()]).toEqual([404, { error: "Unable to find system shared memory region: 'r0'" }]);
    for (const path of ['/v2/systemsharedmemory/region/r0/register', '/v2/systemsharedmemory/unregister', '/v2/systemsharedmemory/region/r0/unregister']) {
      const r = await app.request(path, { method: 'POST', body: '{"key":"k","offset":0,"byte_size":64}' });
      expect([path, r.status]).toEqual([path, 501]);
      expect((await r.json() as { error: string }).error).toMatch(/^client shared memory is disabled: start the server with --allow-client-shm=true/);
    }
    for (const [method, path] of [['GET', '/v2/cudasharedmemory/region/r0/status'], ['POST', '/v2/cudasharedmemory/region/r0/register'], ['POST', '/v2/cudasharedmemory/region/r0/unregister']] as const) {
      const r = await app.request(path, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect([path, r.status]).toEqual([path, 501]);
      expect((await r.json() as { error: string }).error).toMatch(/^CUDA shared memory is not supported by Triode/);
    }
    expect((await app.request('/v2/systemsharedmemory/status', { method: 'POST' })).status).toBe(405);
    expect((await app.request('/v2/cudasharedmemory/region/r0/register')).status).toBe(405);
    expect((await app.request('/v2/repository/any/models/simple/load')).status).toBe(405);
  });

  it('the extensions triode serve reports are Triton\'s, in Triton\'s order, trace included, less shared memory', () => {
    expect(HTTP_EXTENSIONS).toEqual([
      'classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)', 'schedule_policy', 'model_configuration',
      'binary_tensor_data', 'parameters', 'statistics', 'trace', 'logging', 'generate',
    ]);
    // With client shared memory allowed: system_shared_memory in Triton's place (never cuda_shared_memory).
    expect(serverExtensions({ systemSharedMemory: true })).toEqual([
      'classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)', 'schedule_policy', 'model_configuration',
      'system_shared_memory', 'binary_tensor_data', 'parameters', 'statistics', 'trace', 'logging', 'generate',
    ]);
    expect(serverExtensions({ systemSharedMemory: false })).toEqual(HTTP_EXTENSIONS);
  });

  it('GET .../ready is 200 for a ready model, 400 otherwise', async () => {
    expect((await app.request('/v2/models/simple/ready')).status).toBe(200);
    expect((await app.request('/v2/models/simple/versions/1/ready')).status).toBe(200);
    const r = await app.request('/v2/models/broken/ready');
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ error: 'Model version not ready' });
    expect((await app.request('/v2/models/nope/ready')).status).toBe(400);
  });

  it('GET .../config gives the config with proto field names', async () => {
    const r = await app.request('/v2/models/ppocr_cls/config');
    expect(r.status).toBe(200);
    const j = await r.json() as Record<string, unknown>;
    expect(j).toMatchObject({ name: 'ppocr_cls', platform: 'onnxruntime_onnx', backend: 'onnxruntime', max_batch_size: 16, default_model_filename: 'model.onnx' });
    expect(j['output']).toEqual([expect.objectContaining({ name: 'softmax_0.tmp_0', data_type: 'TYPE_FP32', dims: [2], label_filename: 'ppocr_cls_labels.txt' })]);
    expect(j['instance_group']).toEqual([expect.objectContaining({ kind: 'KIND_CPU', count: 2 })]);
    expect(j['parameters']).toEqual({ intra_op_thread_count: { string_value: '1' } });
  });

  it('a model whose config does not parse has no available versions (404, Triton\'s words), with the reason; the others serve', async () => {
    const r = await app.request('/v2/models/broken');
    expect(r.status).toBe(404);
    expect((await r.json() as { error: string }).error).toMatch(/^Request for unknown model: 'broken' has no available versions: .*failed to read text proto .*3:17: Expected integer, got: oops/);
    expect(server.repositoryIndex().find((m) => m.name === 'broken')).toMatchObject({ state: 'UNAVAILABLE' });
  });
});

describe('POST infer (JSON)', () => {
  it('adds and subtracts with flat data, echoing the request id', async () => {
    const r = await post('/v2/models/simple/infer', simpleJson({ id: 'req-1' }));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch('application/json');
    expect(await r.json()).toEqual({
      id: 'req-1', model_name: 'simple', model_version: '1',
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: SUM },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: DIFF },
      ],
    });
  });

  it('accepts nested data and a version in the path, and returns only the requested outputs', async () => {
    const body = simpleJson({ outputs: [{ name: 'OUTPUT1' }] });
    body.inputs[0]!.data = [Array.from(IN0)] as unknown as number[];
    const r = await post('/v2/models/simple/versions/1/infer', body);
    expect(r.status).toBe(200);
    const j = await r.json() as { outputs: { name: string; data: number[] }[] };
    expect(j.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
    expect(j.outputs[0]!.data).toEqual(DIFF);
  });

  it('handles BYTES as JSON strings', async () => {
    const r = await post('/v2/models/simple_string/infer', {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'BYTES', data: Array.from(IN0, String) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'BYTES', data: Array.from(IN1, String) },
      ],
    });
    expect(r.status).toBe(200);
    const j = await r.json() as { outputs: { datatype: string; data: string[] }[] };
    expect(j.outputs[0]).toMatchObject({ datatype: 'BYTES', data: SUM.map(String) });
    expect(j.outputs[1]!.data).toEqual(DIFF.map(String));
  });

  it('returns classification strings with labels', async () => {
    const r = await post('/v2/models/ppocr_cls/infer', {
      inputs: [{ name: 'x', shape: [1, 3, 48, 192], datatype: 'FP32', data: new Array(3 * 48 * 192).fill(0.5) }],
      outputs: [{ name: 'softmax_0.tmp_0', parameters: { classification: 2 } }],
    });
    expect(r.status).toBe(200);
    const j = await r.json() as { outputs: { datatype: string; shape: number[]; data: string[] }[] };
    expect(j.outputs[0]!.datatype).toBe('BYTES');
    expect(j.outputs[0]!.shape).toEqual([1, 2]);
    expect(j.outputs[0]!.data[0]).toMatch(/^\d\.\d{6}:[01]:(0|180)$/);
  });

  it('counts the inference in the statistics', async () => {
    const before = (await (await app.request('/v2/models/simple/stats')).json() as { model_stats: { inference_stats: { success: { count: number } } }[] }).model_stats[0]!;
    await post('/v2/models/simple/infer', simpleJson());
    const r = await app.request('/v2/models/simple/versions/1/stats');
    const j = await r.json() as { model_stats: { name: string; version: string; inference_count: number; execution_count: number; inference_stats: { success: { count: number; ns: number } }; batch_stats: unknown[] }[] };
    expect(j.model_stats).toHaveLength(1);
    const s = j.model_stats[0]!;
    expect(s).toMatchObject({ name: 'simple', version: '1' });
    expect(s.inference_stats.success.count).toBe(before.inference_stats.success.count + 1);
    expect(s.inference_stats.success.ns).toBeGreaterThan(0);
    expect(s.execution_count).toBeGreaterThan(0);
    const all = await (await app.request('/v2/models/stats')).json() as { model_stats: { name: string }[] };
    expect(all.model_stats.map((m) => m.name)).toEqual(['ppocr_cls', 'simple', 'simple_string']);
  });
});

describe('POST infer (binary tensor extension)', () => {
  it('takes INPUT0 as JSON and INPUT1 as binary, returns OUTPUT0 binary and OUTPUT1 JSON', async () => {
    const { body, headerLength } = binaryBody({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from(IN0) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1', parameters: { binary_data: false } }],
    }, [IN1]);
    const r = await post('/v2/models/simple/infer', new Uint8Array(body), { 'Inference-Header-Content-Length': String(headerLength) });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    const len = Number(r.headers.get('inference-header-content-length'));
    const { json, rest } = splitBinary(Buffer.from(await r.arrayBuffer()), len);
    expect(json['outputs']).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: DIFF },
    ]);
    expect(Array.from(new Int32Array(rest.buffer.slice(rest.byteOffset, rest.byteOffset + 64)))).toEqual(SUM);
  });

  it('returns every output binary with binary_data_output, BYTES length-prefixed', async () => {
    const a = serializeBytesTensor(Array.from(IN0, String));
    const b = serializeBytesTensor(Array.from(IN1, String));
    const { body, headerLength } = binaryBody({
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'BYTES', parameters: { binary_data_size: a.byteLength } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'BYTES', parameters: { binary_data_size: b.byteLength } },
      ],
    }, [a, b]);
    const r = await post('/v2/models/simple_string/infer', new Uint8Array(body), { 'Inference-Header-Content-Length': String(headerLength) });
    expect(r.status).toBe(200);
    const { json, rest } = splitBinary(Buffer.from(await r.arrayBuffer()), Number(r.headers.get('inference-header-content-length')));
    const outs = json['outputs'] as { parameters: { binary_data_size: number } }[];
    const s0 = outs[0]!.parameters.binary_data_size;
    const o0 = deserializeBytesTensor(new Uint8Array(rest.subarray(0, s0))).map((x) => Buffer.from(x).toString());
    const o1 = deserializeBytesTensor(new Uint8Array(rest.subarray(s0))).map((x) => Buffer.from(x).toString());
    expect(o0).toEqual(SUM.map(String));
    expect(o1).toEqual(DIFF.map(String));
  });

  it('accepts a raw binary request (header length 0) for a single-input model', async () => {
    const x = new Float32Array(3 * 48 * 192).fill(0.25);
    const r = await post('/v2/models/ppocr_cls/infer', new Uint8Array(x.buffer), { 'Inference-Header-Content-Length': '0' });
    expect(r.status).toBe(200);
    const { json, rest } = splitBinary(Buffer.from(await r.arrayBuffer()), Number(r.headers.get('inference-header-content-length')));
    expect(json['outputs']).toEqual([{ name: 'softmax_0.tmp_0', datatype: 'FP32', shape: [1, 2], parameters: { binary_data_size: 8 } }]);
    const p = new Float32Array(rest.buffer.slice(rest.byteOffset, rest.byteOffset + 8));
    expect(p[0]! + p[1]!).toBeCloseTo(1, 5);
  });

  it('refuses a raw binary request to a two-input model with Triton\'s text (core src/infer_request.cc Normalize)', async () => {
    const r = await post('/v2/models/simple/infer', new Uint8Array(64), { 'Inference-Header-Content-Length': '0' });
    expect(r.status).toBe(400);
    expect((await r.json() as { error: string }).error)
      .toBe("Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration");
  });
});

describe('compression', () => {
  it('decompresses gzip and deflate requests and compresses the response when accepted', async () => {
    for (const [enc, fn] of [['gzip', gzipSync], ['deflate', deflateSync]] as const) {
      const r = await post('/v2/models/simple/infer', new Uint8Array(fn(JSON.stringify(simpleJson()))), { 'Content-Encoding': enc, 'Accept-Encoding': 'gzip' });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-encoding')).toBe('gzip');
      const j = JSON.parse(gunzipSync(Buffer.from(await r.arrayBuffer())).toString()) as { outputs: { data: number[] }[] };
      expect(j.outputs[0]!.data).toEqual(SUM);
    }
  });

  it('picks the response encoding from Accept-Encoding by weight, as Triton: q=0 refuses, the first wins a tie', async () => {
    const cases: [string, string | null][] = [
      ['gzip;q=0, identity', null],
      ['gzip;q=0', null],
      ['deflate;q=1.0, gzip;q=0.5', 'deflate'],
      ['deflate, gzip', 'deflate'],
      ['gzip, deflate', 'gzip'],
      ['identity;q=0.5, gzip;q=0.9', 'gzip'],
      ['gzip;q=0.2, identity;q=0.5', null],
      ['br, *', null],
      ['gzip;q=abc, deflate;q=0.1', 'deflate'],
    ];
    for (const [accept, expected] of cases) {
      const r = await post('/v2/models/simple/infer', simpleJson(), { 'Accept-Encoding': accept });
      expect(r.status).toBe(200);
      expect([accept, r.headers.get('content-encoding')]).toEqual([accept, expected]);
      await r.arrayBuffer();
    }
  });

  it("answers 501 with Accept-Encoding and Triton's words for a Content-Encoding other than gzip, deflate or identity, compared as sent (GetRequestCompressionType)", async () => {
    for (const encoding of ['br', 'GZIP', 'Deflate', 'IDENTITY']) {
      const r = await post('/v2/models/simple/infer', simpleJson(), { 'Content-Encoding': encoding });
      expect(r.status, encoding).toBe(501);
      expect(r.headers.get('accept-encoding')).toBe('gzip, deflate');
      expect(await r.json()).toEqual({ error: 'Unsupported compression type' });
    }
    expect((await post('/v2/models/simple/infer', simpleJson(), { 'Content-Encoding': '' })).status).toBe(200);
  });
});

describe('log settings', () => {
  it('GET /v2/logging reports and POST changes them with Triton\'s field names', async () => {
    const settings = new LogSettings();
    const a = createHttpApp(new LocalBackplane(server), { logSettings: settings });
    expect(await (await a.request('/v2/logging')).json()).toEqual({ log_file: '', log_info: true, log_warning: true, log_error: true, log_verbose_level: 0, log_format: 'default' });
    const r = await a.request('/v2/logging', { method: 'POST', body: JSON.stringify({ log_verbose_level: 2, log_info: false, log_format: 'ISO8601' }) });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ log_info: false, log_verbose_level: 2, log_format: 'ISO8601' });
    expect(settings.log_verbose_level).toBe(2);
    for (const [body, message] of [[{ log_info: 'yes' }, 'attempt to access JSON non-boolean as boolean'], [{ log_format: 'json' }, 'invalid argument for --log_format, got: json'],
      [{ log_verbose_level: -1 }, 'attempt to access JSON non-unsigned-integer as unsigned-integer'], [{ log_verbose_level: 2 ** 32 }, "expect an integer in [0, 2147483647] for 'log_verbose_level'"]] as const) {
      const bad = await a.request('/v2/logging', { method: 'POST', body: JSON.stringify(body) });
      expect(bad.status).toBe(400);
      expect((await bad.json() as { error: string }).error).toContain(message);
    }
    expect(settings.log_info).toBe(false);
    // As Triton: null values and fields it does not know (its own doc's 'log_warnings') change nothing.
    for (const body of [{ log_info: null }, { log_file: null }, { log_warnings: false, nope: 1 }]) {
      const ok = await a.request('/v2/logging', { method: 'POST', body: JSON.stringify(body) });
      expect(ok.status).toBe(200);
    }
    expect(settings.toJson()).toMatchObject({ log_info: false, log_warning: true, log_verbose_level: 2 });
  });

  it('POST /v2/logging refuses a log_verbose_level written with a fraction or an exponent, as TritonJson\'s AsUInt refuses the double rapidjson reads (before: 1.0 set the level to 1)', async () => {
    const settings = new LogSettings();
    const a = createHttpApp(new LocalBackplane(server), { logSettings: settings });
    const post = (body: string) => a.request('/v2/logging', { method: 'POST', body });
    for (const body of ['{"log_verbose_level": 1.0}', '{"log_verbose_level":1e0}', '{"log_verbose_level":1E+0}', '{"log_verbose_level":-0.0}', '{"log_verbose_level":2.5e1}',
      '{"log_verbose_level":3, "log_verbose_level":1.0}', '{"x":{"log_verbose_level":1},"log_verbose_level" : 10.0 }', '{"log_info":1.0}']) {
      const r = await post(body);
      expect(r.status, body).toBe(400);
      expect(await r.json(), body).toEqual({ error: body.includes('log_info') ? 'attempt to access JSON non-boolean as boolean' : 'attempt to access JSON non-unsigned-integer as unsigned-integer' });
    }
    expect(settings.log_verbose_level).toBe(0);
    // Integers as written are taken: the last of a duplicated key (as JSON.parse), whatever came before it or
    // sits deeper; -0 is rapidjson's integer 0; a string that reads as a double is only a string.
    for (const [body, level] of [['{"log_verbose_level":1.0,"log_verbose_level":3}', 3], ['{"a":[1.5,{"b":"1.0"}],"log_verbose_level":4,"c":"x\\\\"}', 4], ['{"k\\"ey":1.5, "log_verbose_level":5}', 5], ['{"log_verbose_level":-0}', 0]] as const) {
      const r = await post(body);
      expect(r.status, body).toBe(200);
      expect(((await r.json()) as { log_verbose_level: number }).log_verbose_level, body).toBe(level);
    }
    // Trace settings take strings only (AsString): a double was refused already, in the same words as any number.
    const t = await a.request('/v2/trace/setting', { method: 'POST', body: '{"trace_rate": 1.0}' });
    expect(t.status).toBe(400);
    expect(await t.json()).toEqual({ error: 'attempt to access JSON non-string as string' });
  });

  it('POST /v2/logging and /v2/trace/setting read the body as Triton: an empty one is refused with rapidjson\'s words, JSON that is not an object changes nothing (before: {} and 400)', async () => {
    const settings = new LogSettings();
    const a = createHttpApp(new LocalBackplane(server), { logSettings: settings });
    for (const path of ['/v2/logging', '/v2/trace/setting', '/v2/models/simple/trace/setting']) {
      for (const body of ['', '  \n']) {
        const r = await a.request(path, { method: 'POST', body });
        expect(r.status, path).toBe(400);
        expect(await r.json()).toEqual({ error: `failed to parse the request JSON buffer: The document is empty. at ${body.length}` });
      }
      const before = await (await a.request(path)).json();
      for (const body of ['[]', '"x"', '7', 'null', '[{"log_info":false,"trace_rate":"1"}]']) {
        const r = await a.request(path, { method: 'POST', body });
        expect(r.status, `${path} ${body}`).toBe(200);
        expect(await r.json()).toEqual(before);
      }
    }
  });
});

describe('trace settings', () => {
  it('keeps global and per-model settings with Triton\'s fields; null resets a model field', async () => {
    // In HandleTrace's order (before: trace_file first).
    expect(await (await app.request('/v2/trace/setting')).text()).toBe('{"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1","log_frequency":"0","trace_file":"","trace_mode":"triton"}');
    let r = await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ trace_rate: '100' }) });
    expect(await r.json()).toMatchObject({ trace_rate: '100' });
    // As Triton: a level that traces, with no trace file (a start-up setting) to write to, is refused.
    r = await app.request('/v2/models/simple/trace/setting', { method: 'POST', body: JSON.stringify({ trace_level: ['TIMESTAMPS'], trace_rate: '5' }) });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ error: 'Attempting to set invalid trace setting :trace file name is not given' });
    r = await app.request('/v2/models/simple/trace/setting', { method: 'POST', body: JSON.stringify({ trace_count: '3', trace_rate: '5' }) });
    expect(await r.json()).toMatchObject({ trace_count: '3', trace_rate: '5' });
    r = await app.request('/v2/models/simple/trace/setting', { method: 'POST', body: JSON.stringify({ trace_rate: null }) });
    expect(await r.json()).toMatchObject({ trace_count: '3', trace_rate: '100' });
    expect((await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ trace_level: ['LOUD'] }) })).status).toBe(400);
    expect((await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ trace_rate: 5 }) })).status).toBe(400);
    // As Triton: a key it does not read is ignored (200, the settings in effect).
    r = await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ nope: '1', trace_count: '7' }) });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ trace_count: '7', trace_mode: 'triton' });
    // Triton: ModelIsReady, then INVALID_ARG (400) for a model it does not have.
    const unknown = await app.request('/v2/models/nope/trace/setting');
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual({ error: 'Request for unknown model : nope' });
    expect((await app.request('/v2/models/nope/trace/setting', { method: 'POST', body: '{"trace_rate":"1"}' })).status).toBe(400);
    // Levels and integers are checked and kept as Triton reports them.
    r = await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ trace_level: ['OFF', 'TIMESTAMPS'] }) });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ error: "Expect only one trace level 'OFF' is specified" });
    r = await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ trace_level: [], trace_rate: '0001', trace_count: '-0' }) });
    expect(await r.json()).toMatchObject({ trace_level: ['OFF'], trace_rate: '1', trace_count: '0' });
    await app.request('/v2/trace/setting', { method: 'POST', body: JSON.stringify({ trace_level: ['OFF'], trace_rate: '100' }) });
  });
});

describe('async inference in embedded mode', () => {
  it('answers 501 with what to do instead', async () => {
    for (const [method, path] of [['POST', '/v2/models/simple/infer_async'], ['GET', '/v2/jobs/1'], ['GET', '/v2/jobs/1/result'], ['DELETE', '/v2/jobs/1']] as const) {
      const r = await app.request(path, { method, ...(method === 'POST' ? { body: JSON.stringify(simpleJson()) } : {}) });
      expect(r.status).toBe(501);
      expect((await r.json() as { error: string }).error).toBe('async inference needs cluster mode: start a gateway with --redis (triode gateway)');
    }
  });
});

describe('async inference: the size limit', () => {
  // A stand-in for the cluster's jobs: it keeps what is submitted, and refuses past its limit by the
  // request's raw tensor bytes, as AsyncJobs refuses by the encoded request.
  const submitted: number[] = [];
  let parameters: unknown;
  const jobs: AsyncInference = {
    maxRequestBytes: 2048,
    async submit(request) {
      const bytes = request.inputs.reduce((n, t) => n + t.data.byteLength, 0);
      if (bytes > 2048) throw Errors.invalidArg(`async request of ${bytes} bytes is over the limit`);
      submitted.push(bytes);
      parameters = request.parameters;
      return 'job';
    },
    status: () => Promise.reject(new Error('unused')),
    result: () => Promise.reject(new Error('unused')),
    cancel: () => Promise.reject(new Error('unused')),
  };

  it('takes a JSON body longer than the limit whose tensors are within it (review: JSON text was measured against the limit on raw bytes)', async () => {
    const a = createHttpApp(new LocalBackplane(server), { asyncJobs: jobs });
    // A batch of 8 x 16 x 2 INT32: 1,024 raw bytes, and JSON text of ~3.2 KB (past the 2,048 limit).
    const body = JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [8, 16], datatype: 'INT32', data: new Array(128).fill(-1234567890) })) });
    expect(body.length).toBeGreaterThan(2048);
    const r = await a.request('/v2/models/simple/infer_async', { method: 'POST', body, headers: { 'Content-Length': String(body.length) } });
    expect(r.status, await r.clone().text()).toBe(202);
    expect(submitted).toEqual([1024]);
  });

  it('forwards the headers --http-header-forward-pattern names with the job, as /infer does (review: they were left out)', async () => {
    const a = createHttpApp(new LocalBackplane(server), { asyncJobs: jobs, headerForwardPattern: /^x-tenant$/i });
    const r = await a.request('/v2/models/simple/infer_async', { method: 'POST', body: JSON.stringify(simpleJson()), headers: { 'X-Tenant': 'acme', 'X-Other': 'no' } });
    expect(r.status).toBe(202);
    expect(parameters).toEqual({ 'x-tenant': 'acme' });
  });

  it('refuses a binary body whose tensor bytes are past the limit before reading it', async () => {
    const a = createHttpApp(new LocalBackplane(server), { asyncJobs: jobs });
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [8, 16], datatype: 'INT32', parameters: { binary_data_size: 8192 } }] }));
    const body = Buffer.concat([header, Buffer.alloc(8192)]);
    const r = await a.request('/v2/models/simple/infer_async', { method: 'POST', body, headers: { 'Content-Length': String(body.length), 'Inference-Header-Content-Length': String(header.length) } });
    expect(r.status).toBe(400);
    expect((await r.json() as { error: string }).error).toBe('async request of 8192 tensor bytes is over the limit of 2048 bytes (--async-max-request-bytes); send it to the infer endpoint instead');
  });
});

describe('POST infer errors', () => {
  const cases: [string, string, unknown, Record<string, string>, number, string | RegExp][] = [
    ['unknown model', '/v2/models/nope/infer', simpleJson(), {}, 404, "Request for unknown model: 'nope' is not found"],
    ['bad JSON', '/v2/models/simple/infer', '{"inputs": [', {}, 400, /^failed to parse the request JSON buffer: /],
    ['no inputs array', '/v2/models/simple/infer', { outputs: [] }, {}, 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"],
    ['wrong datatype', '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'FP32', data: Array.from(IN0) }, simpleJson().inputs[1]] }, {}, 400, "inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"],
    ['unknown datatype', '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'FLOAT', data: [] }] }, {}, 400, "invalid datatype for input INPUT0"],
    ['wrong shape', '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 8], datatype: 'INT32', data: [1, 2, 3, 4, 5, 6, 7, 8] }, simpleJson().inputs[1]] }, {}, 400, "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]."],
    ['missing input', '/v2/models/simple/infer', { inputs: [simpleJson().inputs[0]] }, {}, 400, "missing required input(s) ['INPUT1']"],
    ['data count not matching the shape', '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: [1, 2] }, simpleJson().inputs[1]] }, {}, 400, "Unable to parse 'data': Shape does not match true shape of 'data' field for input 'INPUT0'"],
    ['a string in INT32 data', '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: ['x'] }] }, {}, 400, "input 'INPUT0' element 0 is not a number"],
    ['FP16 in JSON', '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1], datatype: 'FP16', data: [1] }] }, {}, 400, "receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0"],
    ['a binary_data_output that is not a boolean', '/v2/models/simple/infer', simpleJson({ parameters: { binary_data_output: 'true' } }), {}, 400, "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean"],
    ['a reserved parameter', '/v2/models/simple/infer', simpleJson({ parameters: { triton_x: 1 } }), {}, 400, "parameter keys starting with 'triton_' are reserved"],
    ['an unknown output', '/v2/models/simple/infer', simpleJson({ outputs: [{ name: 'OUT' }] }), {}, 400, "unexpected inference output 'OUT' for model 'simple'"],
    ['a header length past the body', '/v2/models/simple/infer', simpleJson(), { 'Inference-Header-Content-Length': '99999' }, 400, /^inference header size should be in range \(0, \d+\), got: 99999$/],
    ['a negative header length', '/v2/models/simple/infer', simpleJson(), { 'Inference-Header-Content-Length': '-5' }, 400, /^inference header size should be in range \(0, \d+\), got: -5$/],
    ['a header length of leading zeros past the body', '/v2/models/simple/infer', simpleJson(), { 'Inference-Header-Content-Length': '0099999' }, 400, /^inference header size should be in range \(0, \d+\), got: 0099999$/],
    ['a header length with no digits (atoi: 0, a raw binary request)', '/v2/models/simple/infer', simpleJson(), { 'Inference-Header-Content-Length': 'x' }, 400, /^Raw request must only have 1 input \(found 1\)/],
    ['a header length that wraps to 0 as an int (atoi)', '/v2/models/simple/infer', simpleJson(), { 'Inference-Header-Content-Length': '4294967296' }, 400, /^Raw request must only have 1 input \(found 1\)/],
    ['a body that is too large', '/v2/models/simple/infer', 'x'.repeat((1 << 20) + 1), {}, 400, /exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size/],
    // Triton's words and codes (ModelLifeCycle::GetModel), Triode's why after them.
    ['a model with no ready version', '/v2/models/broken/infer', simpleJson(), {}, 404, /^Request for unknown model: 'broken' has no available versions: /],
  ];
  it.each(cases)('%s', async (_what, path, body, headers, status, message) => {
    const r = await post(path, body, headers);
    expect(r.status).toBe(status);
    const j = await r.json() as { error: string };
    if (typeof message === 'string') expect(j.error).toContain(message);
    else expect(j.error).toMatch(message);
  });

  it("answers an unknown model or version, or a decoupled model, before the body's faults, as Triton's HandleInfer (review: a bad body to 'nope' got 400)", async () => {
    const bodies: [string, Record<string, string>][] = [
      ['{"inputs": [', {}],
      [JSON.stringify(simpleJson()), { 'Content-Encoding': 'br' }],
      [JSON.stringify(simpleJson()), { 'Content-Encoding': 'gzip' }],
      [JSON.stringify(simpleJson()), { 'Inference-Header-Content-Length': '99999' }],
      [JSON.stringify({ inputs: 1 }), {}],
      ['x'.repeat((1 << 20) + 1), {}],
    ];
    for (const [body, headers] of bodies) {
      let r = await post('/v2/models/nope/infer', body, headers);
      expect(r.status).toBe(404);
      expect(await r.json()).toEqual({ error: "Request for unknown model: 'nope' is not found" });
      r = await post('/v2/models/simple/versions/7/infer', body, headers);
      expect(r.status).toBe(404);
      expect(await r.json()).toEqual({ error: "Request for unknown model: 'simple' version 7 is not found" });
    }
    const repo = makeRepository([], {
      'dec/config.pbtxt': 'backend: "javascript"\nmodel_transaction_policy { decoupled: true }\n'
        + 'input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n',
      'dec/1/model.mjs': 'export default class { execute(requests) { for (const r of requests) r.sender.close(); } }',
    });
    const dec = await InferenceServer.create({ modelRepositories: [repo], backends: [new JavaScriptBackend()], logger: silentLogger });
    try {
      const a = createHttpApp(new LocalBackplane(dec));
      const r = await post('/v2/models/dec/infer', '{"inputs": [', {}, a);
      expect(r.status).toBe(501);
      expect(await r.json()).toEqual({ error: Errors.decoupledInfer('dec').message });
    } finally {
      await dec.stop(1000);
    }
  });

  it("reads Inference-Header-Content-Length as Triton's atoi: a sign, then the digits that lead", async () => {
    const { body, headerLength } = binaryBody({ inputs: [simpleJson().inputs[0], { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } }] }, [IN1]);
    for (const h of [`+${headerLength}`, `${headerLength}abc`, `${headerLength}.5`]) {
      const r = await post('/v2/models/simple/infer', new Uint8Array(body), { 'Inference-Header-Content-Length': h });
      expect(r.status, h).toBe(200);
    }
  });

  it("reads an infer route's version as Triton's std::stol: past 2^53 not found, past int64 refused with Triton's words", async () => {
    const answers: [string, number, string][] = [
      ['/v2/models/simple/versions/9007199254740993/infer', 404, "Request for unknown model: 'simple' version 9007199254740993 is not found"],
      ['/v2/models/simple/versions/09223372036854775807/infer', 404, "Request for unknown model: 'simple' version 9223372036854775807 is not found"],
      ['/v2/models/nope/versions/9007199254740993/infer', 404, "Request for unknown model: 'nope' is not found"],
      ['/v2/models/simple/versions/9223372036854775808/infer', 400, "failed to get model version from specified version string '9223372036854775808' (details: stol), version should be an integral value > 0"],
    ];
    for (const [path, status, error] of answers) {
      const r = await post(path, simpleJson());
      expect(r.status, path).toBe(status);
      expect(await r.json()).toEqual({ error });
    }
  });

  it("reads every model route's version as Triton's std::stol: past 2^53 not found (not ready), past int64 refused with Triton's words", async () => {
    const big = '9007199254740993';
    const stol = "failed to get model version from specified version string '9223372036854775808' (details: stol), version should be an integral value > 0";
    for (const suffix of ['', '/config']) {
      const answers: [string, number, string][] = [
        [`/v2/models/simple/versions/${big}${suffix}`, 404, `Request for unknown model: 'simple' version ${big} is not found`],
        [`/v2/models/simple/versions/0${big}${suffix}`, 404, `Request for unknown model: 'simple' version ${big} is not found`],
        [`/v2/models/nope/versions/${big}${suffix}`, 404, "Request for unknown model: 'nope' is not found"],
        [`/v2/models/simple/versions/9223372036854775808${suffix}`, 400, stol],
        [`/v2/models/simple/versions/0001${suffix}`, 200, ''],
      ];
      for (const [path, status, error] of answers) {
        const r = await app.request(path);
        expect(r.status, path).toBe(status);
        if (status !== 200) expect(await r.json(), path).toEqual({ error });
      }
    }
    // Statistics answer a version that is not ready, and a model with none, in their own words (400).
    const statsAnswers: [string, number, string][] = [
      [`/v2/models/simple/versions/${big}/stats`, 400, "requested model version is not available for model 'simple'"],
      ['/v2/models/simple/versions/7/stats', 400, "requested model version is not available for model 'simple'"],
      [`/v2/models/nope/versions/${big}/stats`, 400, "requested model 'nope' is not available"],
      ['/v2/models/nope/stats', 400, "requested model 'nope' is not available"],
      ['/v2/models/simple/versions/9223372036854775808/stats', 400, stol],
    ];
    for (const [path, status, error] of statsAnswers) {
      const res = await app.request(path);
      expect([path, res.status, await res.json()]).toEqual([path, status, { error }]);
    }
    expect((await app.request('/v2/models/simple/versions/0001/stats')).status).toBe(200);
    let r = await app.request(`/v2/models/simple/versions/${big}/ready`);
    expect([r.status, await r.json()]).toEqual([400, { error: 'Model version not ready' }]);
    r = await app.request('/v2/models/simple/versions/9223372036854775808/ready');
    expect([r.status, await r.json()]).toEqual([400, { error: stol }]);
    r = await post(`/v2/models/simple/versions/${big}/generate`, { INPUT0: [1] });
    expect([r.status, await r.json()]).toEqual([404, { error: `Request for unknown model: 'simple' version ${big} is not found` }]);
  });

  it('rejects binary data shorter or longer than declared', async () => {
    const short = binaryBody({ inputs: [simpleJson().inputs[0], { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } }] }, [new Int32Array(8)]);
    let r = await post('/v2/models/simple/infer', new Uint8Array(short.body), { 'Inference-Header-Content-Length': String(short.headerLength) });
    expect(r.status).toBe(400);
    expect((await r.json() as { error: string }).error).toBe("unexpected size for input 'INPUT1', expecting 64 additional bytes for model 'simple'");
    const long = binaryBody({ inputs: [simpleJson().inputs[0], { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } }] }, [new Int32Array(20)]);
    r = await post('/v2/models/simple/infer', new Uint8Array(long.body), { 'Inference-Header-Content-Length': String(long.headerLength) });
    expect(r.status).toBe(400);
    expect((await r.json() as { error: string }).error).toBe("unexpected additional input data for model 'simple'");
    const wrong = binaryBody({ inputs: [simpleJson().inputs[0], { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 60 } }] }, [new Int32Array(15)]);
    r = await post('/v2/models/simple/infer', new Uint8Array(wrong.body), { 'Inference-Header-Content-Length': String(wrong.headerLength) });
    expect(r.status).toBe(400);
    expect((await r.json() as { error: string }).error).toBe("input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 60");
  });

  it('rejects malformed BYTES binary data', async () => {
    const bad = new Uint8Array([200, 0, 0, 0, 1]);
    const { body, headerLength } = binaryBody({ inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'BYTES', parameters: { binary_data_size: 5 } },
      { name: 'INPUT1', shape: [1, 16], datatype: 'BYTES', data: Array(16).fill('1') },
    ] }, [bad]);
    const r = await post('/v2/models/simple_string/infer', new Uint8Array(body), { 'Inference-Header-Content-Length': String(headerLength) });
    expect(r.status).toBe(400);
    expect((await r.json() as { error: string }).error).toBe("incomplete string data for inference input 'INPUT0' for model 'simple_string', expecting string of length 200 but only 1 bytes available");
  });

  it('keeps serving after every bad request', async () => {
    const r = await post('/v2/models/simple/infer', simpleJson());
    expect(r.status).toBe(200);
  });
});
