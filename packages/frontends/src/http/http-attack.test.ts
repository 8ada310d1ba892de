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
    // dims [-1]: a generate request's N of any length fits it (a nested one flattened).
    modelConfig: async (name: string) => ({ name, input: [{ name: 'N', data_type: 'TYPE_INT32', dims: [-1] }] }),
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

  it('below the limit, a large JSON output is written exactly (pieces joined, NaN and -Infinity as Triton writes them)', async () => {
    const n = 40_000;
    const y = Float32Array.from({ length: n }, (_, i) => i / 7);
    y[20_000] = Number.NaN;
    y[39_999] = Number.NEGATIVE_INFINITY;
    const a = createHttpApp(fakeBackplane(() => ({ modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'FP32', shape: [n], data: y }] })), { logger: silentLogger });
    const r = await post(a, '/v2/models/m/infer', JSON.stringify(request));
    expect(r.status).toBe(200);
    // rapidjson's kWriteNanAndInfFlag: bare NaN / Infinity / -Infinity (Python's json reads them).
    const text = await r.text();
    expect(text).toContain(`,NaN,${y[20_001]},`);
    expect(text).toMatch(/,-Infinity\]/);
    const out = JSON.parse(text.replace(/NaN|-Infinity/g, 'null')) as { outputs: { data: (number | null)[] }[] };
    const data = out.outputs[0]!.data;
    expect(data).toHaveLength(n);
    expect(data[16_384]).toBe(y[16_384]);
    expect(data[39_998]).toBe(y[39_998]);
  });
});

describe('binary outputs with no bytes', () => {
  it('an answer whose only binary output is empty is plain JSON, with no Inference-Header-Content-Length (as Triton)', async () => {
    const a = createHttpApp(bigOutput, { logger: silentLogger });
    const r = await post(a, '/v2/models/m/infer', JSON.stringify({ ...request, inputs: [{ ...request.inputs[0]!, data: [0] }], parameters: { binary_data_output: true } }));
    expect(r.status).toBe(200);
    // Before: application/octet-stream with a header length, and no binary part after it.
    expect(r.headers.get('inference-header-content-length')).toBeNull();
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await r.json()).toEqual({ model_name: 'm', model_version: '1', outputs: [{ name: 'y', datatype: 'FP32', shape: [0], parameters: { binary_data_size: 0 } }] });
  });
});

describe('NaN and Infinity in JSON tensors, as Triton (rapidjson kParseNanAndInfFlag / kWriteNanAndInfFlag)', () => {
  const echoBack = fakeBackplane((r) => ({ modelName: 'm', modelVersion: '1', outputs: r.inputs.map((t) => ({ ...t, name: `${t.name}_out` })) }));
  const app = createHttpApp(echoBack, { logger: silentLogger });
  const body = (datatype: string, data: string) => `{"inputs":[{"name":"x","datatype":"${datatype}","shape":[3],"data":${data}}]}`;

  it('reads NaN, Inf and Infinity tokens into a float tensor and writes them back as Triton does', async () => {
    for (const datatype of ['FP32', 'FP64']) {
      const r = await post(app, '/v2/models/m/infer', body(datatype, '[NaN, -Infinity, Inf]'));
      expect(r.status).toBe(200);
      expect(await r.text()).toContain('"data":[NaN,-Infinity,Infinity]');
    }
  });

  it('an integer tensor refuses NaN; a number past the largest double is a parse error (400)', async () => {
    const r = await post(app, '/v2/models/m/infer', body('INT32', '[NaN, 1, 2]'));
    expect(r.status).toBe(400);
    expect(await errorOf(r)).toMatch(/element 0 is not an integer of type INT32/);
    const big = await post(app, '/v2/models/m/infer', body('FP32', '[1e400, 1, 2]'));
    expect(big.status).toBe(400);
    expect(await errorOf(big)).toMatch(/^failed to parse the request JSON buffer: Number too big to be stored in double at position \d+$/);
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

  it('client input echoed in errors is cut (header values, setting values, tensor names, JSON tokens)', async () => {
    const app = createHttpApp(bigOutput, { logSettings: new LogSettings(), logger: silentLogger });
    const long = 'A'.repeat(10_000);
    const cases: Response[] = [
      await post(app, '/v2/models/m/infer', JSON.stringify(request), { 'inference-header-content-length': `99999999${long}` }),
      await post(app, '/v2/logging', JSON.stringify({ log_format: long })),
      await post(app, '/v2/trace/setting', JSON.stringify({ trace_rate: long })),
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

describe('64-bit integers in JSON', () => {
  /** A backplane that keeps the last request and answers its first input back as output y. */
  const seen: InferenceRequest[] = [];
  const echoBack = fakeBackplane((r) => {
    seen.push(r);
    const x = r.inputs[0]!;
    return { modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: x.datatype, shape: x.shape, data: x.data }] };
  });
  const app = createHttpApp(echoBack, { logger: silentLogger });
  const infer = (datatype: string, literal: string) =>
    post(app, '/v2/models/m/infer', `{"inputs":[{"name":"N","datatype":"${datatype}","shape":[1],"data":[${literal}]}]}`);

  it('values past the type\'s range are 400, not wrapped (they were taken mod 2^64)', async () => {
    for (const [datatype, literal] of [
      ['INT64', '9223372036854775808'], ['INT64', '-9223372036854775809'], ['INT64', '1e19'], ['INT64', '123456789012345678901234567890'],
      ['UINT64', '18446744073709551616'], ['UINT64', '-1'], ['UINT64', '1.5'], ['UINT64', '2e19'],
    ]) {
      const r = await infer(datatype!, literal!);
      expect(r.status, `${datatype} ${literal}`).toBe(400);
      expect(await errorOf(r)).toBe(`Unable to parse 'data': input 'N' element 0 is not an integer of type ${datatype}`);
    }
  });

  it('values at the ends of the range arrive exactly and are written back exactly', async () => {
    for (const [datatype, literal, value] of [
      ['INT64', '9223372036854775807', 2n ** 63n - 1n], ['INT64', '-9223372036854775808', -(2n ** 63n)],
      ['UINT64', '18446744073709551615', 2n ** 64n - 1n], ['INT64', '9007199254740993', 2n ** 53n + 1n],
    ] as const) {
      const r = await infer(datatype, literal);
      expect(r.status, literal).toBe(200);
      expect(seen.at(-1)!.inputs[0]!.data[0]).toBe(value);
      expect(await r.text()).toContain(`"data":[${literal}]`);
    }
  });

  it('a long integer in a float tensor is read as its double; in a 32-bit one it is out of range', async () => {
    expect((await infer('FP64', '12345678901234567890')).status).toBe(200);
    expect(seen.at(-1)!.inputs[0]!.data[0]).toBe(Number('12345678901234567890'));
    const r = await infer('INT32', '12345678901234567890');
    expect(r.status).toBe(400);
    expect(await errorOf(r)).toBe(`Unable to parse 'data': input 'N' element 0 is not an integer of type INT32`);
  });

  it('request, input and output parameters given as a number array are 400 (the reader\'s Float64Array passed as an object)', async () => {
    for (const [body, message] of [
      ['{"parameters":[1],"inputs":[]}', "'parameters' of the request must be a JSON object"],
      ['{"inputs":[{"name":"N","datatype":"INT32","shape":[1],"data":[1],"parameters":[5]}]}', "'parameters' of input 'N' must be a JSON object"],
      ['{"inputs":[{"name":"N","datatype":"INT32","shape":[1],"data":[1]}],"outputs":[{"name":"y","parameters":[5]}]}', "'parameters' of output 'y' must be a JSON object"],
    ]) {
      const r = await post(app, '/v2/models/m/infer', body!);
      expect(r.status, body).toBe(400);
      expect(await errorOf(r)).toBe(message);
    }
  });

  it('a uint64 sequence_id past 2^53 reaches the server exactly', async () => {
    const r = await post(app, '/v2/models/m/infer', `{"parameters":{"sequence_id":18446744073709551615},"inputs":[{"name":"N","datatype":"INT32","shape":[1],"data":[1]}]}`);
    expect(r.status).toBe(200);
    expect(seen.at(-1)!.parameters!['sequence_id']).toBe(2n ** 64n - 1n);
  });
});

describe('generate requests get the infer route\'s checks', () => {
  const seen: InferenceRequest[] = [];
  const app = createHttpApp(fakeBackplane((r) => {
    seen.push(r);
    return { ...(r.id ? { id: r.id } : {}), modelName: 'm', modelVersion: '1', outputs: [{ name: 'big', datatype: 'INT64', shape: [1], data: BigInt64Array.of(2n ** 63n - 1n) }] };
  }), { logger: silentLogger });

  it('deeply nested arrays are 400 (were a stack overflow: 500)', async () => {
    for (const path of ['/v2/models/m/generate', '/v2/models/m/generate_stream']) {
      const r = await post(app, path, `{"N":${'['.repeat(200_000)}1${']'.repeat(200_000)}}`);
      expect(r.status, path).toBe(400);
      expect(await errorOf(r)).toMatch(/^failed to parse the request JSON buffer: JSON nested too deeply at position \d+$/);
    }
    // Within the limit, nested arrays are flattened as before.
    expect((await post(app, '/v2/models/m/generate', '{"N":[[1,2],[3]]}')).status).toBe(200);
    expect(seen.at(-1)!.inputs[0]).toMatchObject({ shape: [3], data: Int32Array.of(1, 2, 3) });
  });

  it('reserved triton_ parameters, parameters that are not values, and a non-string id are 400', async () => {
    const cases: [string, string][] = [
      ['{"N":1,"parameters":{"triton_enable_empty_final_response":true}}', "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."],
      // Triton's words (http_server.cc ConvertGenerateRequest, SetTritonParameterFromJsonParameter).
      ['{"N":1,"parameters":{"x":{"y":1}}}', "Converting keyword: 'parameters': parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."],
      ['{"N":1,"parameters":[1]}', "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"],
      ['{"N":1,"id":7}', "request 'id' must be a string"],
    ];
    const before = seen.length;
    for (const [body, message] of cases) {
      const r = await post(app, '/v2/models/m/generate', body);
      expect(r.status, body).toBe(400);
      expect(await errorOf(r)).toBe(message);
    }
    expect(seen.length).toBe(before);
  });

  it('a 64-bit output is written exactly (was rounded through a double)', async () => {
    const r = await post(app, '/v2/models/m/generate', '{"N":1,"id":"a"}');
    // In name order, as Triton writes the fields.
    expect(await r.text()).toBe('{"big":9223372036854775807,"id":"a","model_name":"m","model_version":"1"}');
  });
});

describe('shared memory parameters on an infer request', () => {
  // Review: they were ignored, so an output asked for in a region came back inline with 200, and a
  // client reading the region read stale memory. No region is registered (client shared memory not
  // allowed here): Triton's NOT_FOUND.
  const echoModel = fakeBackplane(() => ({ modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] }));
  it.each([
    ['an input', { inputs: [{ name: 'N', datatype: 'INT32', shape: [1], parameters: { shared_memory_region: 'r1', shared_memory_byte_size: 4 } }] }, 404, "Unable to find shared memory region: 'r1'"],
    // Triton's ValidateInputContentType, before the region is looked up (review: 404).
    ['an input with data too', { inputs: [{ name: 'N', datatype: 'INT32', shape: [1], data: [1], parameters: { shared_memory_region: 'r1' } }] }, 400,
      "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'"],
    ['an output', { ...request, outputs: [{ name: 'y', parameters: { shared_memory_region: 'r1', shared_memory_byte_size: 64 } }] }, 404, "Unable to find shared memory region: 'r1'"],
    // The offset is read before the region is looked up (CheckSharedMemoryData, then GetMemoryInfo).
    ['an output with a negative offset', { ...request, outputs: [{ name: 'y', parameters: { shared_memory_region: 'r1', shared_memory_byte_size: 64, shared_memory_offset: -5 } }] }, 400,
      "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    // Triton's words (http_server.cc CheckSharedMemoryData), on inputs and outputs alike.
    ['a region that is not a string', { ...request, outputs: [{ name: 'y', parameters: { shared_memory_region: 7 } }] }, 400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
    ['an input region that is not a string', { inputs: [{ name: 'N', datatype: 'INT32', shape: [1], parameters: { shared_memory_region: true } }] }, 400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
    // null, an object or an array too (null had "parameter 'shared_memory_region' of input 'N' must be a string, number or boolean").
    ['an input region that is null', { inputs: [{ name: 'N', datatype: 'INT32', shape: [1], parameters: { shared_memory_region: null } }] }, 400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
    ['an output region that is null', { ...request, outputs: [{ name: 'y', parameters: { shared_memory_region: null } }] }, 400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
    ['an input region that is an object', { inputs: [{ name: 'N', datatype: 'INT32', shape: [1], parameters: { shared_memory_region: { a: 1 } } }] }, 400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
    ['an output region that is an array', { ...request, outputs: [{ name: 'y', parameters: { shared_memory_region: ['r1'] } }] }, 400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"],
  ])('%s in a region is refused, not served inline', async (_what, body, status, message) => {
    const r = await post(createHttpApp(echoModel), '/v2/models/m/infer', JSON.stringify(body));
    expect(r.status).toBe(status);
    expect(await errorOf(r)).toBe(message);
  });
});
