/**
 * The generate extension as Triton's HTTP frontend answers it (server qa/L0_http
 * generate_endpoint_test.py, with a JavaScript port of its mock_llm), in-process: how request
 * keys become inputs or parameters, the shapes inputs get, and the status of a stream.
 */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JavaScriptBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, silentLogger, type Backplane, type InferenceResponse } from '@triode/core';
import { ROOT } from '../../../../../test/helpers/repository.js';
import { createHttpApp } from '../http-server.js';
import { fitShape } from './generate-request.js';

let server: InferenceServer;
let app: ReturnType<typeof createHttpApp>;

beforeAll(async () => {
  server = await InferenceServer.create({ modelRepositories: [`${ROOT}/test/fixtures/generate-models`], backends: [new JavaScriptBackend()], logger: silentLogger });
  app = createHttpApp(new LocalBackplane(server), { logger: silentLogger });
}, 30_000);

afterAll(async () => {
  await server?.stop(1000);
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  app.request(`/v2/models/${path}`, { method: 'POST', body: typeof body === 'string' || body instanceof Uint8Array ? body as string : JSON.stringify(body), headers });

const errorOf = async (r: Response) => (await r.json() as { error: string }).error;

/** The events of an SSE body, parsed. */
const events = async (r: Response) => (await r.text()).split('\n\n').filter(Boolean).map((e) => JSON.parse(e.replace(/^data: /, '')) as Record<string, unknown>);

describe('fitShape: a generate input of n elements gets the model\'s shape (Triton ExactMappingInput)', () => {
  it.each([
    [[1, 1], 1, [1, 1]],
    [[2, 3], 6, [2, 3]],
    [[-1, -1, 2], 4, [1, 2, 2]],
    [[-1], 5, [5]],
    [[1, -1], 3, [1, 3]],
    [[-1, 2, -1], 6, [1, 2, 3]],
    [[-1], 0, [0]],
  ])('dims %j, %i elements: %j', (dims, n, shape) => {
    expect(fitShape(dims, n, 'X')).toEqual(shape);
  });

  it.each([[[2, 3], 5], [[1, 1], 2], [[1], 0], [[-1, 2], 3]])('dims %j, %i elements: Triton\'s error', (dims, n) => {
    expect(() => fitShape(dims, n, 'X')).toThrow("The schema can not convert input 'X' to tensor with proper shape");
  });
});

describe('generate with mock_llm (Triton\'s generate_endpoint_test.py)', () => {
  it('test_generate: PROMPT and STREAM fill dims [1,1]', async () => {
    const r = await post('mock_llm/generate', { PROMPT: 'hello world', STREAM: false });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json');
    expect(await r.json()).toMatchObject({ TEXT: 'hello world' });
  });

  it('test_generate_stream: a key that is no input is a parameter (REPETITION)', async () => {
    const r = await post('mock_llm/generate_stream', { PROMPT: ['hello world'], STREAM: true, REPETITION: 3 });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect((await events(r)).map((e) => e['TEXT'])).toEqual(['hello world', 'hello world', 'hello world']);
  });

  it('test_missing_inputs: the core\'s error, as JSON on both routes', async () => {
    for (const [body, n] of [[{}, 0], [{ abc: 123 }, 0], [{ PROMPT: 'hello' }, 1], [{ STREAM: false }, 1], [{ STREAM: false, other: 'param' }, 1]] as const) {
      for (const route of ['generate', 'generate_stream']) {
        const r = await post(`mock_llm/${route}`, body);
        expect(r.status, `${route} ${JSON.stringify(body)}`).toBe(400);
        expect(r.headers.get('content-type')).toBe('application/json');
        expect(await errorOf(r)).toContain(`expected 2 inputs but got ${n}`);
      }
    }
  });

  it('test_invalid_input_types: Triton\'s words, in document order', async () => {
    const string = "Unable to parse 'data': attempt to access JSON non-string as string";
    const boolean = "Unable to parse 'data': attempt to access JSON non-boolean as boolean";
    for (const [body, message] of [
      ['{"PROMPT": 123, "STREAM": false}', string],
      ['{"PROMPT": "hello", "STREAM": "false"}', boolean],
      ['{"PROMPT": true, "STREAM": 123}', string],
      ['{"STREAM": 123, "PROMPT": true}', boolean],
      ['{"PROMPT": {"USER": "hello world", "BOT": "world hello"}, "STREAM": true}', string],
    ] as const) {
      for (const route of ['generate', 'generate_stream']) {
        const r = await post(`mock_llm/${route}`, body);
        expect(r.status, body).toBe(400);
        expect(r.headers.get('content-type')).toBe('application/json');
        expect(await errorOf(r)).toBe(message);
      }
    }
    // A wrong value inside an array too (mock_nd's PROMPT has dims [-1]).
    expect(await errorOf(await post('mock_nd/generate', { PROMPT: ['a', 1] }))).toBe(string);
  });

  it('test_duplicate_inputs: an input named twice is refused, the first duplicate in document order', async () => {
    const cases = [
      ['{"PROMPT": "hello", "STREAM": false, "PROMPT": "duplicate"}', 'PROMPT'],
      ['{"PROMPT": "hello", "STREAM": false, "STREAM": false}', 'STREAM'],
      ['{"PROMPT": "hello", "STREAM": false, "PROMPT": "duplicate", "STREAM": true}', 'PROMPT'],
      ['{"PROMPT": "hello", "STREAM": false, "STREAM": true, "PROMPT": "duplicate"}', 'STREAM'],
    ];
    for (const [body, name] of cases) {
      for (const route of ['generate', 'generate_stream']) {
        const r = await post(`mock_llm/${route}`, body!);
        expect(r.status, body).toBe(400);
        expect(r.headers.get('content-type')).toBe('application/json');
        expect(await errorOf(r)).toBe(`input '${name}' already exists in request`);
      }
    }
    // Named once at the top and once in parameters: the same input twice.
    const r = await post('mock_llm/generate', { PROMPT: 'hello', STREAM: false, parameters: { PROMPT: 'again' } });
    expect(await errorOf(r)).toBe("Converting keyword: 'parameters': input 'PROMPT' already exists in request");
  });

  it('test_generate_stream_response_error: a first response that is an error sets the stream\'s status', async () => {
    const r = await post('mock_llm/generate_stream', { PROMPT: ['hello world'], STREAM: true, REPETITION: 0, FAIL_LAST: true });
    expect(r.status).toBe(500);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await events(r)).toEqual([{ error: 'An Error Occurred' }]);
    const u = await post('mock_llm/generate_stream', { PROMPT: ['hello world'], STREAM: true, REPETITION: 0, FAIL_LAST: true, ERROR_CODE: 'UNAVAILABLE' });
    expect(u.status).toBe(503);
    // After a good first response: 200, the error an event.
    const ok = await post('mock_llm/generate_stream', { PROMPT: ['hello world'], STREAM: true, REPETITION: 1, FAIL_LAST: true });
    expect(ok.status).toBe(200);
    expect(await events(ok)).toEqual([{ model_name: 'mock_llm', model_version: '1', TEXT: 'hello world' }, { error: 'An Error Occurred' }]);
  });

  it('test_one_response, test_zero_response, test_many_response', async () => {
    for (const STREAM of [true, false]) {
      expect((await post('mock_llm/generate_stream', { PROMPT: 'hello world', STREAM })).status).toBe(200);
      expect((await post('mock_llm/generate', { PROMPT: 'hello world', STREAM })).status).toBe(200);
    }
    const zero = await post('mock_llm/generate_stream', { PROMPT: 'hello world', STREAM: true, REPETITION: 0 });
    expect(zero.status).toBe(200);
    expect(await zero.text()).toBe('');
    for (const REPETITION of [0, 2]) {
      const r = await post('mock_llm/generate', { PROMPT: 'hello world', STREAM: true, REPETITION });
      expect(r.status).toBe(400);
      expect(await errorOf(r)).toBe('generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses');
    }
  });

  it('test_complex_schema: an object that is no input is a parameter of an invalid type', async () => {
    const r = await post('mock_llm/generate', { PROMPT: 'hello world', STREAM: true, PARAMS: { PARAM_0: 0, PARAM_1: true } });
    expect(r.status).toBe(400);
    expect(await errorOf(r)).toBe("parameter 'PARAMS' has invalid type. It should be either 'int', 'bool', or 'string'.");
    for (const bad of [null, [1, 2]]) {
      const n = await post('mock_llm/generate', { PROMPT: 'hello world', STREAM: true, X: bad });
      expect(await errorOf(n)).toBe("parameter 'X' has invalid type. It should be either 'int', 'bool', or 'string'.");
    }
  });

  it('test_parameters: each key of parameters is an input or a parameter', async () => {
    const r = await post('mock_llm/generate_stream', { PROMPT: ['hello world'], STREAM: true, parameters: { REPETITION: 3 } });
    expect((await events(r)).map((e) => e['TEXT'])).toEqual(['hello world', 'hello world', 'hello world']);
    // The protocol document's example: an input given in parameters.
    const s = await post('mock_llm/generate', { PROMPT: 'hello world', parameters: { STREAM: false } });
    expect(await s.json()).toMatchObject({ TEXT: 'hello world' });
    const one = await post('mock_llm/generate', { PROMPT: ['hello world'], STREAM: true, parameters: 1 });
    expect(one.status).toBe(400);
    expect(await errorOf(one)).toBe("Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object");
    const nested = await post('mock_llm/generate', { PROMPT: ['hello world'], STREAM: true, parameters: { nested: { twice: 1 } } });
    expect(await errorOf(nested)).toBe("Converting keyword: 'parameters': parameter 'nested' has invalid type. It should be either 'int', 'bool', or 'string'.");
  });
});

describe('generate inputs get the model\'s shape', () => {
  it('dims [2,3] with 6 values: [2,3]; 5 values: Triton\'s error', async () => {
    const r = await post('ident23/generate', { X: [1, 2, 3, 4, 5, 6] });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ Y: [1, 2, 3, 4, 5, 6] });
    const bad = await post('ident23/generate', { X: [1, 2, 3, 4, 5] });
    expect(bad.status).toBe(400);
    expect(await errorOf(bad)).toBe("The schema can not convert input 'X' to tensor with proper shape");
  });

  it('max_batch_size 8, dims [-1,2], 4 values: [1,2,2] (the batch dim is 1)', async () => {
    const r = await post('identb/generate', { X: [1, 2, 3, 4] });
    expect(r.status).toBe(200);
    expect(JSON.parse((await r.json() as { SHAPE: string }).SHAPE)).toEqual([['X', [1, 2, 2]]]);
  });

  it('parameters reach the model with their types; id is one too, as in Triton', async () => {
    const r = await post('mock_nd/generate', { id: 'q', PROMPT: ['a', 'b'], s: 'x', i: 7, f: 1.5, b: true, parameters: { N: [1, 2], k: 'v' } });
    expect(r.status).toBe(200);
    const info = JSON.parse((await r.json() as { SHAPES: string }).SHAPES) as { shapes: unknown; params: unknown; id: string };
    expect(info.shapes).toEqual([['PROMPT', 'BYTES', [2]], ['N', 'FP32', [2]]]);
    expect(info.params).toEqual({ id: 'q', s: 'x', i: 7, f: 1.5, b: true, k: 'v' });
    expect(info.id).toBe('q');
  });

  it('a parameter named __proto__ reaches the model (review: the rewrite dropped it)', async () => {
    const r = await post('mock_nd/generate', { PROMPT: ['a'], parameters: { ['__proto__']: 'P', constructor: 'c' } });
    expect(r.status).toBe(200);
    const info = JSON.parse((await r.json() as { SHAPES: string }).SHAPES) as { params: Record<string, unknown> };
    expect(Object.keys(info.params).sort()).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(info.params, '__proto__')?.value).toBe('P');
  });

  it('a Content-Encoding other than identity is 400 with Triton\'s words', async () => {
    // Compared as sent, as Triton's GetRequestCompressionType: IDENTITY is not identity.
    for (const encoding of ['gzip', 'br', 'IDENTITY']) {
      const r = await post('mock_llm/generate', gzipSync(JSON.stringify({ PROMPT: 'a', STREAM: false })), { 'Content-Encoding': encoding });
      expect(r.status, encoding).toBe(400);
      expect(await errorOf(r)).toBe("Unsupported content-encoding, only 'identity' is supported.");
    }
    expect((await post('mock_llm/generate', { PROMPT: 'a', STREAM: false }, { 'Content-Encoding': 'identity' })).status).toBe(200);
  });
});

describe('generate responses', () => {
  /** A backplane whose model "m" answers once with `response`. */
  const answering = (response: InferenceResponse): Backplane => ({
    modelConfig: async (name: string) => ({ name, input: [{ name: 'N', data_type: 'TYPE_INT32', dims: [-1] }] }),
    inferStream: async (_r: unknown, on: (x: InferenceResponse) => void) => { on(response); },
  }) as unknown as Backplane;

  it('response parameters are fields, as Triton writes them; keys in Triton\'s (sorted) order', async () => {
    const a = createHttpApp(answering({
      id: 'r1', modelName: 'm', modelVersion: '1', parameters: { z: 'last', b: true, n: 3, big: 2n ** 63n - 1n },
      outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1], data: Int32Array.of(5) }],
    }), { logger: silentLogger });
    const r = await a.request('/v2/models/m/generate', { method: 'POST', body: '{"N":1}' });
    expect(await r.text()).toBe('{"OUT":5,"b":true,"big":9223372036854775807,"id":"r1","model_name":"m","model_version":"1","n":3,"z":"last"}');
  });

  it('a parameter named like an output or a reserved field does not replace it (Triton keeps the first)', async () => {
    const a = createHttpApp(answering({
      modelName: 'm', modelVersion: '1', parameters: { model_name: 'x', OUT: 'param' },
      outputs: [{ name: 'OUT', datatype: 'INT32', shape: [2], data: Int32Array.of(5, 6) }],
    }), { logger: silentLogger });
    const r = await a.request('/v2/models/m/generate', { method: 'POST', body: '{"N":1}' });
    expect(await r.json()).toEqual({ OUT: 'param', model_name: 'm', model_version: '1' });
  });
});
