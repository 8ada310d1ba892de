import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serializeBytesTensor, type InferenceResponse } from '@triode/core';
import { HeaderCache, MAX_PARAMETERS, encodeInferResponse, parseInferRequest, type ParsedInfer } from './infer-codec.js';
import { RequestSharedMemory, SystemSharedMemory } from '../shared-memory/system-shared-memory.js';

const model = { name: 'simple' };

/** A binary-extension body: the JSON header, then each tensor's bytes. */
function binaryBody(header: object, ...tensors: Uint8Array[]): { body: Uint8Array; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header));
  return { body: Buffer.concat([json, ...tensors]), headerLength: json.byteLength };
}

const int32Header = (size = 64, extra: object = {}) => ({
  ...extra,
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: size } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: size } },
  ],
  outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }],
});
const int32s = (from: number) => new Uint8Array(Int32Array.from({ length: 16 }, (_, i) => from + i).buffer);

/** A HeaderCache that counts the headers it gave. */
class CountingCache extends HeaderCache {
  hits = 0;

  override get(key: string): ReturnType<HeaderCache['get']> {
    const header = super.get(key);
    if (header) this.hits++;
    return header;
  }
}

/** Parses with `cache`, or the error it throws. */
function parse(cache: HeaderCache, body: Uint8Array, headerLength: number | undefined): unknown {
  try {
    return parseInferRequest(body, headerLength, model, undefined, cache);
  } catch (err) {
    return err;
  }
}

describe('HeaderCache and shared memory: a JSON body naming regions is kept as a header, its windows read and held again for each request', () => {
  it('the second request with the same body skips its parse, reads the region as it is now, and holds its windows itself', () => {
    const dir = mkdtempSync(join(tmpdir(), 'triode-codec-shm-'));
    const regions = new SystemSharedMemory({ directory: dir });
    try {
      writeFileSync(join(dir, 'io'), Buffer.concat([Buffer.from(int32s(0)), Buffer.from(int32s(100)), Buffer.alloc(4096 - 128)]));
      regions.register('io', 'io', 0, 4096);
      const window = (offset: number) => ({ shared_memory_region: 'io', shared_memory_offset: offset, shared_memory_byte_size: 64 });
      const body = Buffer.from(JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: window(0) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: window(64) }],
        outputs: [{ name: 'OUTPUT0', parameters: window(128) }],
      }));
      const cache = new CountingCache();
      const factory = () => new RequestSharedMemory(regions, 1 << 20);
      const first = parseInferRequest(body, undefined, model, undefined, cache, factory);
      writeFileSync(join(dir, 'io'), Buffer.from(int32s(7)), { flag: 'r+' });
      const second = parseInferRequest(body, undefined, model, undefined, cache, factory);
      expect(cache.hits).toBe(1);
      const input0 = (p: ParsedInfer) => Array.from(p.request.inputs[0]!.data as Int32Array);
      expect(input0(first)).toEqual(Array.from(new Int32Array(int32s(0).buffer)));
      expect(input0(second)).toEqual(Array.from(new Int32Array(int32s(7).buffer)));
      expect([first.sharedMemory?.outputs.has('OUTPUT0'), second.sharedMemory?.outputs.has('OUTPUT0')]).toEqual([true, true]);
      regions.unregister('io');
      first.sharedMemory!.release();
      expect(regions.status().map((r) => r.name)).toEqual(['io']);
      second.sharedMemory!.release();
      expect(regions.status()).toEqual([]);
      // A JSON body with data is not kept (its tensors are in it).
      const json = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: [1] }] }));
      parseInferRequest(json, undefined, model, undefined, cache);
      parseInferRequest(json, undefined, model, undefined, cache);
      expect(cache.hits).toBe(1);
    } finally {
      regions.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('HeaderCache: a binary request whose header was seen skips its parse, with the same answer', () => {
  it('the second request with the same header is read from the cache, with its own tensors and objects', () => {
    const cache = new CountingCache();
    const a = binaryBody(int32Header(64, { parameters: { priority: 2 } }), int32s(0), int32s(100));
    const b = binaryBody(int32Header(64, { parameters: { priority: 2 } }), int32s(7), int32s(200));
    const first = parseInferRequest(a.body, a.headerLength, model, undefined, cache);
    expect(cache.size).toBe(1);
    // A request may be changed on its way: what the first one gets is not what the header keeps.
    first.request.inputs[0]!.shape[0] = 99;
    first.request.parameters!['priority'] = 9;
    first.request.outputs![0]!.name = 'changed';
    expect(cache.hits).toBe(0);
    const second = parseInferRequest(b.body, b.headerLength, model, undefined, cache);
    expect(cache.hits).toBe(1);
    expect(cache.size).toBe(1);
    expect(second.request.inputs.map((t) => [t.name, t.datatype, t.shape, Array.from(t.data as Int32Array)])).toEqual([
      ['INPUT0', 'INT32', [1, 16], Array.from({ length: 16 }, (_, i) => 7 + i)],
      ['INPUT1', 'INT32', [1, 16], Array.from({ length: 16 }, (_, i) => 200 + i)],
    ]);
    expect(second.request.parameters).toEqual({ priority: 2 });
    expect(second.request.outputs).toEqual([{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }]);
    expect([...second.encoding.binary]).toEqual([['OUTPUT0', true], ['OUTPUT1', false]]);
    // Its own tensors, not the first request's.
    expect((second.request.inputs[0]!.data as Int32Array).buffer).not.toBe((first.request.inputs[0]!.data as Int32Array).buffer);
  });

  it('attack: a cached header with a body of another length gets the errors an uncached parse gives, in the same order', () => {
    const warm = new CountingCache();
    const seed = binaryBody(int32Header(), int32s(0), int32s(0));
    parseInferRequest(seed.body, seed.headerLength, model, undefined, warm);
    expect(warm.size).toBe(1);
    const cases = [
      binaryBody(int32Header()), // no tensor bytes at all
      binaryBody(int32Header(), int32s(0)), // the second input's bytes missing
      binaryBody(int32Header(), int32s(0), int32s(0).subarray(0, 60)), // short by 4
      binaryBody(int32Header(), int32s(0), int32s(0), new Uint8Array(3)), // 3 bytes too many
    ];
    for (const c of cases) {
      const cached = parse(warm, c.body, c.headerLength);
      const fresh = parse(new HeaderCache(), c.body, c.headerLength);
      expect(cached).toBeInstanceOf(Error);
      expect(String(cached)).toBe(String(fresh));
    }
    expect(warm.hits).toBe(cases.length);
    expect(String(parse(warm, cases[1]!.body, cases[1]!.headerLength))).toContain("unexpected size for input 'INPUT1', expecting 64 additional bytes");
    expect(String(parse(warm, cases[3]!.body, cases[3]!.headerLength))).toContain('unexpected additional input data');
  });

  it('attack: a BYTES input from a cached header has its elements checked in every body', () => {
    const cache = new CountingCache();
    const good = serializeBytesTensor([Buffer.from('ab'), Buffer.from('c')]);
    const header = { inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: good.byteLength } }] };
    const ok = binaryBody(header, good);
    parseInferRequest(ok.body, ok.headerLength, model, undefined, cache);
    expect(cache.size).toBe(1);
    // Same header, same size, but one element whose length runs past the data.
    const bad = Uint8Array.from(good);
    new DataView(bad.buffer).setUint32(0, 1000, true);
    const attack = binaryBody(header, bad);
    expect(String(parse(cache, attack.body, attack.headerLength))).toContain("incomplete string data for inference input 'TEXT'");
    expect(cache.hits).toBe(1);
  });

  it('keeps only headers that passed every check, with binary inputs only, up to its bound', () => {
    const cache = new HeaderCache(4);
    // JSON data: the request's own, not kept.
    const json = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, 2] }] }));
    parseInferRequest(json, json.byteLength, model, undefined, cache);
    parseInferRequest(json, undefined, model, undefined, cache);
    expect(cache.size).toBe(0);
    // Refused headers are not kept.
    const refused = binaryBody({ inputs: [{ name: 'X', datatype: 'INT33', shape: [1], parameters: { binary_data_size: 4 } }] }, new Uint8Array(4));
    expect(parse(cache, refused.body, refused.headerLength)).toBeInstanceOf(Error);
    const shortBody = binaryBody(int32Header(), int32s(0));
    expect(parse(cache, shortBody.body, shortBody.headerLength)).toBeInstanceOf(Error);
    expect(cache.size).toBe(0);
    // A header over 4 KiB is parsed every time.
    const long = binaryBody(int32Header(64, { id: 'x'.repeat(5000) }), int32s(0), int32s(0));
    expect(parseInferRequest(long.body, long.headerLength, model, undefined, cache).request.id).toHaveLength(5000);
    expect(cache.size).toBe(0);
    // Attack: a client that sends a new header with every request does not grow it past its bound.
    for (let i = 0; i < 50; i++) {
      const r = binaryBody(int32Header(64, { id: `request-${i}` }), int32s(i), int32s(i));
      expect(parseInferRequest(r.body, r.headerLength, model, undefined, cache).request.id).toBe(`request-${i}`);
      expect(cache.size).toBeLessThanOrEqual(4);
    }
    expect(cache.size).toBe(4);
  });
});

describe('parseInferRequest', () => {
  it('an array of numbers where inputs or outputs go is told the same in a small document and a large one', () => {
    // The reader gives a large document's number arrays as Float64Arrays, a small one's as arrays.
    for (const doc of [{ inputs: [1] }, { inputs: [], outputs: [1] }, { inputs: [1], parameters: {} }]) {
      const small = Buffer.from(JSON.stringify(doc));
      const large = Buffer.from(JSON.stringify({ ...doc, pad: 'x'.repeat(5000) }));
      const withExponent = Buffer.from(JSON.stringify(doc).replace('{', '{"e":1e0,'));
      const messages = [small, large, withExponent].map((b) => String(parse(new HeaderCache(), b, undefined)));
      expect(messages[0]).toMatch(/^TriodeError: (Input must set only one of the following fields: .* But no field is set|Unable to parse 'name': attempt to access non-existing object member 'name')$/);
      expect(new Set(messages).size, messages.join(' | ')).toBe(1);
    }
  });
});

describe('parseInferRequest parameters', () => {
  it(`attack: a parameters object of more than ${MAX_PARAMETERS} keys is refused before its values are read (6.5 million held the server 41 s)`, () => {
    const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i), 0]));
    const input = (p?: object) => ({ name: 'I', datatype: 'INT32', shape: [1], data: [1], ...(p ? { parameters: p } : {}) });
    for (const doc of [{ inputs: [input()], parameters: keys(MAX_PARAMETERS + 1) }, { inputs: [input(keys(MAX_PARAMETERS + 1))] }, { inputs: [input()], outputs: [{ name: 'O', parameters: keys(MAX_PARAMETERS + 1) }] }]) {
      expect(() => parseInferRequest(Buffer.from(JSON.stringify(doc)), undefined, { name: 'm' })).toThrow(new RegExp(`has more than ${MAX_PARAMETERS} keys$`));
    }
    expect(parseInferRequest(Buffer.from(JSON.stringify({ inputs: [input()], parameters: keys(MAX_PARAMETERS) })), undefined, { name: 'm' }).request.parameters).toBeDefined();
  });
});

describe("the parameters Triton's HTTP frontend reads itself, checked for every model", () => {
  const body = (parameters: string) => Buffer.from(`{"parameters":${parameters},"inputs":[{"name":"I","datatype":"INT32","shape":[1],"data":[1]}]}`);
  const params = (parameters: string) => parseInferRequest(body(parameters), undefined, { name: 'simple' }).request.parameters;

  it('takes a uint64 or string sequence_id, boolean flags, uint64 priority and timeout', () => {
    expect(params('{"sequence_id":18446744073709551615,"sequence_start":true,"sequence_end":false,"priority":0,"timeout":18446744073709551615}'))
      .toEqual({ sequence_id: 2n ** 64n - 1n, sequence_start: true, sequence_end: false, priority: 0, timeout: 2n ** 64n - 1n });
    expect(params('{"sequence_id":"abc"}')).toEqual({ sequence_id: 'abc' });
    expect(params('{"sequence_id":0}')).toEqual({ sequence_id: 0 });
  });

  // Review: to a model without sequence batching these got 200 over HTTP (gRPC refused them).
  it.each([
    ['{"sequence_id":-5}', "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    ['{"sequence_id":1.5}', "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    ['{"sequence_id":true}', "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    ['{"sequence_id":18446744073709551616}', "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    ['{"sequence_start":"bogus"}', "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"],
    ['{"sequence_end":1}', "Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean"],
    ['{"priority":-1}', "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    ['{"priority":"1"}', "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    ['{"timeout":0.5}', "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as unsigned-integer"],
  ])('%s is refused with Triton\'s words (400)', (parameters, message) => {
    expect(() => params(parameters)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message }));
  });
});

describe('parameter types', () => {
  const input = (parameters?: object) => ({ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1], ...(parameters ? { parameters } : {}) });
  const parse = (doc: object) => () => parseInferRequest(Buffer.from(JSON.stringify(doc)), undefined, model);

  it("a request parameter that is null, an object or an array gets Triton's words (SetTritonParameterFromJsonParameter)", () => {
    for (const v of [null, { a: 1 }, [1]]) {
      expect(parse({ inputs: [input()], parameters: { x: v } })).toThrow(/^parameter 'x' has invalid type\. It should be either 'int', 'bool', or 'string'\.$/);
    }
    // The keys Triton reads itself keep their own words.
    expect(parse({ inputs: [input()], parameters: { sequence_start: null } })).toThrow("Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean");
    expect(parse({ inputs: [input()], parameters: { binary_data_output: null } })).toThrow("Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean");
    expect(parse({ inputs: [input()], parameters: { triton_x: null } })).toThrow(/^parameter keys starting with 'triton_' are reserved/);
  });

  it('an input or output parameter Triton does not read is ignored, whatever its type; those it reads are still checked', () => {
    const ok = parse({ inputs: [input({ note: null, extra: { a: [1] } })], outputs: [{ name: 'OUTPUT0', parameters: { tag: null, more: [] } }] })();
    expect(ok.request.inputs[0]!.name).toBe('INPUT0');
    expect(ok.request.outputs).toEqual([{ name: 'OUTPUT0' }]);
    expect(parse({ inputs: [input()], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: null } }] })).toThrow(/binary_data/);
    expect(parse({ inputs: [input()], outputs: [{ name: 'OUTPUT0', parameters: { classification: null } }] })).toThrow(/classification/);
  });
});

describe("Triton's words for fields it cannot read (ParseJsonTritonIO, ValidateInputContentType)", () => {
  const input = (extra: object = {}) => ({ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1], ...extra });
  const error = (doc: object) => {
    try {
      parseInferRequest(Buffer.from(JSON.stringify(doc)), undefined, model);
    } catch (err) {
      return (err as Error).message;
    }
    return 'no error';
  };
  const only = "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But ";
  const cases: [object, string][] = [
    [{ inputs: [input({ parameters: { binary_data_size: 4 } })] }, `${only}set 'data' 'binary_data_size'`],
    [{ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }] }, `${only}no field is set`],
    [{ inputs: [input({ parameters: { shared_memory_region: 'r' } })] }, `${only}set 'data' 'shared_memory_region'`],
    [{ inputs: [7] }, `${only}no field is set`],
    [{ inputs: [{ datatype: 'INT32', shape: [1], data: [1] }] }, "Unable to parse 'name': attempt to access non-existing object member 'name'"],
    [{ inputs: [{ name: 'INPUT0', shape: [1], data: [1] }] }, "Unable to parse 'datatype': attempt to access non-existing object member 'datatype'"],
    [{ inputs: [input({ datatype: 'FLOAT' })] }, 'invalid datatype for input INPUT0'],
    [{ inputs: [{ name: 'INPUT0', datatype: 'INT32', data: [1] }] }, "Unable to parse 'shape': attempt to access non-existing object member 'shape'"],
    [{ inputs: [input({ shape: [-1] })] }, "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    [{ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 'x' } }] }, "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    [{ inputs: [input()], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: 1 } }] }, "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean"],
    [{ inputs: [input()], outputs: [{ name: 'OUTPUT0', parameters: { classification: -1 } }] }, "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    [{ outputs: [] }, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"],
    [{ inputs: {} }, "Unable to parse 'inputs': attempt to access JSON non-array as array"],
    [{ inputs: [input()], outputs: {} }, "Unable to parse 'outputs': attempt to access JSON non-array as array"],
    [{ inputs: [input()], id: 7 }, "Unable to parse 'id': attempt to access JSON non-string as string"],
  ];
  it.each(cases)('%j', (doc, message) => {
    expect(error(doc)).toBe(message);
  });
});

describe('binary_data_output', () => {
  const out = (name: string, v: number) => ({ name, datatype: 'INT32' as const, shape: [1], data: Int32Array.of(v) });
  const answer = (header: object) => {
    const { encoding } = parseInferRequest(Buffer.from(JSON.stringify(header)), undefined, model);
    const { body, headerLength } = encodeInferResponse({ modelName: 'simple', modelVersion: '1', outputs: [out('OUTPUT0', 7), out('OUTPUT1', 8)] }, encoding);
    const text = Buffer.from(body).subarray(0, headerLength).toString();
    return JSON.parse(text) as { outputs: { name: string; data?: number[]; parameters?: object }[] };
  };
  const inputs = [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1] }];

  it("is the kind of the outputs the request does not list; a listed one is binary only with its own binary_data: true (Triton's CheckBinaryOutputData)", () => {
    const listed = answer({ inputs, parameters: { binary_data_output: true }, outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: true } }] });
    expect(listed.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1], data: [7] });
    expect(listed.outputs[1]!.parameters).toEqual({ binary_data_size: 4 });
    const all = answer({ inputs, parameters: { binary_data_output: true } });
    expect(all.outputs.map((o) => o.parameters)).toEqual([{ binary_data_size: 4 }, { binary_data_size: 4 }]);
  });
});

describe('encodeInferResponse', () => {
  it('a binary output follows the JSON header, whose length is given (non-ASCII names counted in bytes)', () => {
    const response: InferenceResponse = {
      modelName: 'modèle', modelVersion: '1', id: 'é',
      outputs: [{ name: 'OUT', datatype: 'INT32', shape: [2], data: Int32Array.of(1, -1) }, { name: 'J', datatype: 'INT32', shape: [1], data: Int32Array.of(5) }],
    };
    const { body, headerLength } = encodeInferResponse(response, { binary: new Map([['OUT', true]]), defaultBinary: false });
    const bytes = body as Uint8Array;
    const header = '{"id":"é","model_name":"modèle","model_version":"1","outputs":[{"name":"OUT","datatype":"INT32","shape":[2],"parameters":{"binary_data_size":8}},{"name":"J","datatype":"INT32","shape":[1],"data":[5]}]}';
    expect(headerLength).toBe(Buffer.byteLength(header));
    expect(bytes.byteLength).toBe(headerLength! + 8);
    expect(Buffer.from(bytes.subarray(0, headerLength)).toString('utf8')).toBe(header);
    expect(Array.from(new Int32Array(Uint8Array.from(bytes.subarray(headerLength)).buffer))).toEqual([1, -1]);
  });
});

describe('FP64 JSON data', () => {
  it('reaches the model exactly, whatever the digits, in a small and in a large document (review: 161 of 2,000 17-digit values were up to 2 ulp off)', () => {
    let seed = 7;
    const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return (seed / 2147483648 - 0.5) * 10 ** ((seed % 12) - 6); };
    for (const n of [3, 2000]) {
      const values = Array.from({ length: n }, random);
      values[0] = -0.0038866138458251956;
      const body = Buffer.from(JSON.stringify({ inputs: [{ name: 'X', datatype: 'FP64', shape: [n], data: values }] }));
      const { request } = parseInferRequest(body, undefined, model) as { request: { inputs: { data: Float64Array }[] } };
      const got = Array.from(request.inputs[0]!.data);
      expect(got.filter((v, i) => !Object.is(v, values[i])), `n=${n}`).toEqual([]);
    }
  });
});

describe('raw binary requests (header length 0)', () => {
  const model = { name: 'm' };
  const raw = (datatype: string, shape: number[]) => ({ name: 'INPUT0', datatype, shape });
  const text = (f: () => unknown): string => {
    try {
      f();
    } catch (err) {
      return (err as Error).message;
    }
    return 'no error';
  };

  it('takes a BYTES input only when the model\'s shape is one element, with Triton\'s text (core src/infer_request.cc Normalize)', () => {
    const body = new Uint8Array(Buffer.from('hello'));
    const ok = parseInferRequest(body, 0, model, raw('BYTES', [1, 1]));
    expect(ok.request.inputs[0]!.shape).toEqual([1, 1]);
    expect(Buffer.from(ok.request.inputs[0]!.data as Uint8Array).subarray(4).toString()).toBe('hello');
    for (const shape of [[-1], [1, -1], [2], [1, 3]]) {
      expect(text(() => parseInferRequest(body, 0, model, raw('BYTES', shape)))).toBe("For BYTE datatype raw input 'INPUT0', the model must have input shape [1]");
    }
  });

  it('deduces one variable-sized dimension, and refuses more with Triton\'s text', () => {
    const body = new Uint8Array(new Float32Array(6).buffer);
    expect(parseInferRequest(body, 0, model, raw('FP32', [1, -1, 3])).request.inputs[0]!.shape).toEqual([1, 2, 3]);
    expect(text(() => parseInferRequest(body, 0, model, raw('FP32', [-1, -1]))))
      .toBe("The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized dimension");
  });
});
