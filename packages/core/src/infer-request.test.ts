import { describe, expect, it } from 'vitest';
import { CancelToken, MAX_CORRELATION_ID_BYTES, REQUEST_FLAG_SEQUENCE_END, REQUEST_FLAG_SEQUENCE_START, applyReshape, customParameters, normalizeRequest, requestControls, schedulePolicyParams, sequenceParams, type InferenceRequest } from './infer-request.js';
import type { ModelConfig } from './model-config/model-config.js';
import { serializeBytesTensor } from './tensor/bytes-tensor.js';

const simple: ModelConfig = {
  name: 'simple', max_batch_size: 8,
  input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] }],
  output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] }],
};

const req = (over: Partial<InferenceRequest> = {}, b = 1): InferenceRequest => ({
  modelName: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [b, 16], data: new Int32Array(16 * b) },
    { name: 'INPUT1', datatype: 'INT32', shape: [b, 16], data: new Int32Array(16 * b) },
  ],
  ...over,
});

describe('normalizeRequest()', () => {
  it('returns the batch size of a valid request', () => {
    expect(normalizeRequest(req({}, 3), simple)).toBe(3);
  });

  it('rejects an unknown input', () => {
    const r = req();
    r.inputs[1]!.name = 'INPUT9';
    expect(() => normalizeRequest(r, simple)).toThrow("unexpected inference input 'INPUT9' for model 'simple'");
  });

  it('rejects a missing input, naming it', () => {
    const r = req();
    r.inputs.pop();
    expect(() => normalizeRequest(r, simple)).toThrow("expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']");
  });

  it('rejects a wrong datatype', () => {
    const r = req();
    r.inputs[0] = { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) };
    expect(() => normalizeRequest(r, simple)).toThrow("inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'");
  });

  it('rejects a wrong shape with the expected one', () => {
    const r = req();
    r.inputs[0]!.shape = [1, 15];
    expect(() => normalizeRequest(r, simple)).toThrow("unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,15].");
  });

  it('rejects a batch larger than max_batch_size and mismatched batch sizes', () => {
    expect(() => normalizeRequest(req({}, 9), simple)).toThrow("inference request batch-size must be <= 8 for 'simple'");
    const r = req({}, 2);
    r.inputs[1] = { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) };
    expect(() => normalizeRequest(r, simple)).toThrow("input 'INPUT1' batch size does not match other inputs for 'simple'");
  });

  it('rejects a byte size that does not match the shape', () => {
    const r = req();
    r.inputs[0]!.data = new Int32Array(15);
    expect(() => normalizeRequest(r, simple)).toThrow("input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60");
  });

  it('rejects an unknown requested output and a bad classification count', () => {
    expect(() => normalizeRequest(req({ outputs: [{ name: 'NOPE' }] }), simple)).toThrow("unexpected inference output 'NOPE' for model 'simple'");
    expect(() => normalizeRequest(req({ outputs: [{ name: 'OUTPUT0', classCount: -1 }] }), simple)).toThrow('classification count');
  });

  it('counts BYTES elements', () => {
    const cfg: ModelConfig = { name: 's', max_batch_size: 0, input: [{ name: 'x', data_type: 'TYPE_STRING', dims: [2] }], output: [] };
    expect(normalizeRequest({ modelName: 's', inputs: [{ name: 'x', datatype: 'BYTES', shape: [2], data: serializeBytesTensor(['a', 'b']) }] }, cfg)).toBe(0);
    expect(() => normalizeRequest({ modelName: 's', inputs: [{ name: 'x', datatype: 'BYTES', shape: [2], data: serializeBytesTensor(['a']) }] }, cfg))
      .toThrow("expected 2 string elements for inference input 'x' for model 's', got 1");
  });

  it('answers too many BYTES elements, and a cut length indicator, with Triton\'s texts (ValidateBytesInputs)', () => {
    const cfg: ModelConfig = { name: 's', max_batch_size: 0, input: [{ name: 'x', data_type: 'TYPE_STRING', dims: [2] }], output: [] };
    expect(() => normalizeRequest({ modelName: 's', inputs: [{ name: 'x', datatype: 'BYTES', shape: [2], data: serializeBytesTensor(['a', 'b', 'c', 'd']) }] }, cfg))
      .toThrow("unexpected number of string elements 3 for inference input 'x' for model 's', expecting 2");
    expect(() => normalizeRequest({ modelName: 's', inputs: [{ name: 'x', datatype: 'BYTES', shape: [2], data: new Uint8Array([1, 0, 0, 0, 97, 1]) }] }, cfg))
      .toThrow("incomplete string length indicator for inference input 'x' for model 's', expecting 4 bytes but only 1 bytes available.");
  });

  it('applies reshape, filling variable dims', () => {
    const cfg: ModelConfig = { name: 'r', max_batch_size: 4, input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1], reshape: { shape: [-1, 2] } }], output: [] };
    const r: InferenceRequest = { modelName: 'r', inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 6], data: new Float32Array(12) }] };
    normalizeRequest(r, cfg);
    expect(r.inputs[0]!.shape).toEqual([2, 3, 2]);
  });

  it('reshapes an input by position: the variable dims of dims fill those of reshape (Triton\'s Normalize)', () => {
    const cfg: ModelConfig = { name: 'r', max_batch_size: 0, input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1, 6, -1], reshape: { shape: [-1, 2, 3, -1] } }], output: [] };
    const r: InferenceRequest = { modelName: 'r', inputs: [{ name: 'x', datatype: 'FP32', shape: [4, 6, 5], data: new Float32Array(120) }] };
    normalizeRequest(r, cfg);
    expect(r.inputs[0]!.shape).toEqual([4, 2, 3, 5]);
  });

  it('leaves an input that already has the reshaped shape as it is, and reshapes one in dims\' shape', () => {
    const cfg: ModelConfig = { name: 'r', max_batch_size: 4, input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [4, 2], reshape: { shape: [8] } }], output: [] };
    const r: InferenceRequest = { modelName: 'r', inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 8], data: new Float32Array(16) }] };
    normalizeRequest(r, cfg);
    expect(r.inputs[0]!.shape).toEqual([2, 8]);
    const given: InferenceRequest = { modelName: 'r', inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 4, 2], data: new Float32Array(16) }] };
    normalizeRequest(given, cfg);
    expect(given.inputs[0]!.shape).toEqual([2, 8]);
  });

  it('lets optional inputs be left out', () => {
    const cfg: ModelConfig = { ...simple, input: [simple.input![0]!, { ...simple.input![1]!, optional: true }] };
    const r = req();
    r.inputs.pop();
    expect(normalizeRequest(r, cfg)).toBe(1);
  });

  it('rejects an input or an output given twice, request after request', () => {
    for (let i = 0; i < 2; i++) {
      const r = req();
      r.inputs[1]!.name = 'INPUT0';
      expect(() => normalizeRequest(r, simple)).toThrow("input 'INPUT0' already exists in request");
      expect(() => normalizeRequest(req({ outputs: [{ name: 'OUTPUT1' }, { name: 'OUTPUT1' }] }), simple)).toThrow("output 'OUTPUT1' already exists in request");
      expect(normalizeRequest(req({ outputs: [{ name: 'OUTPUT1' }, { name: 'OUTPUT0' }] }), simple)).toBe(1);
    }
  });

  it('lists the inputs given and the required ones missing, in order', () => {
    const cfg: ModelConfig = { name: 'm', max_batch_size: 0, input: ['A', 'B', 'C', 'D'].map((name) => ({ name, data_type: 'TYPE_INT32', dims: [1] })), output: [] };
    const r: InferenceRequest = { modelName: 'm', inputs: ['C', 'A'].map((name) => ({ name, datatype: 'INT32', shape: [1], data: new Int32Array(1) })) };
    expect(() => normalizeRequest(r, cfg)).toThrow("expected 4 inputs but got 2 inputs for model 'm'. Got input(s) ['C','A'], but missing required input(s) ['B','D']. Please provide all required input(s).");
  });

  it('follows a config whose inputs, outputs or max_batch_size were replaced', () => {
    const cfg: ModelConfig = { ...simple };
    expect(normalizeRequest(req(), cfg)).toBe(1);
    cfg.input = [simple.input![0]!, { ...simple.input![1]!, name: 'OTHER' }];
    expect(() => normalizeRequest(req(), cfg)).toThrow("unexpected inference input 'INPUT1' for model 'simple'");
    cfg.input = simple.input;
    cfg.output = [simple.output![0]!];
    expect(() => normalizeRequest(req({ outputs: [{ name: 'OUTPUT1' }] }), cfg)).toThrow("unexpected inference output 'OUTPUT1' for model 'simple'");
    cfg.max_batch_size = 0;
    expect(() => normalizeRequest(req(), cfg)).toThrow("unexpected shape for input 'INPUT0' for model 'simple'. Expected [16], got [1,16].");
  });
});

describe('errors repeat at most 256 characters of what the request sent (fuzz seed 2026, cases 3538, 10827, 12282)', () => {
  const long = 'x'.repeat(5000);
  const check = (f: () => unknown) => {
    let message = '';
    try { f(); } catch (e) { message = (e as Error).message; }
    expect(message).toMatch(/x{250}\.\.\./);
    expect(message.length).toBeLessThan(600);
  };
  it('an unknown input or output name', () => {
    const r = req();
    r.inputs[1]!.name = long;
    check(() => normalizeRequest(r, simple));
    check(() => normalizeRequest(req({ outputs: [{ name: long }] }), simple));
  });
  it('a shape with thousands of dims', () => {
    const r = req();
    r.inputs[0]!.shape = new Array(3000).fill(1).map((_, i) => (i === 0 ? -1 : 1));
    let message = '';
    try { normalizeRequest(r, simple); } catch (e) { message = (e as Error).message; }
    expect(message.length).toBeLessThan(600);
  });
  it('a timeout or priority parameter that is not a number', () => {
    check(() => schedulePolicyParams({ timeout: long }));
    check(() => schedulePolicyParams({ priority: long }));
  });
  it('a uint64 parameter past 2^64 - 1 (a bigint, as the HTTP reader gives a long integer)', () => {
    expect(schedulePolicyParams({ timeout: 2n ** 64n - 1n }).timeoutUs).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => schedulePolicyParams({ timeout: 2n ** 64n })).toThrow("parameter 'timeout' must be a non-negative integer, got \"18446744073709551616\"");
    expect(() => sequenceParams({ sequence_id: 2n ** 70n })).toThrow(/parameter 'sequence_id' must be a non-negative integer/);
  });
});

describe('sequenceParams', () => {
  it(`attack: a string correlation id of more than ${MAX_CORRELATION_ID_BYTES} bytes is refused (review: 40 ids of 5 MB held 500 MB for max_sequence_idle)`, () => {
    expect(sequenceParams({ sequence_id: 'x'.repeat(MAX_CORRELATION_ID_BYTES), sequence_start: true })?.key).toBe(`s:${'x'.repeat(MAX_CORRELATION_ID_BYTES)}`);
    expect(() => sequenceParams({ sequence_id: 'x'.repeat(5_000_000), sequence_start: true }))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: `string correlation ID (sequence_id) of 5000000 bytes is longer than the ${MAX_CORRELATION_ID_BYTES} bytes accepted` }));
    // Counted in UTF-8 bytes: 129 two-byte characters are 258 bytes.
    expect(() => sequenceParams({ sequence_id: '\u00e9'.repeat(129) })).toThrow(/of 258 bytes is longer/);
  });
});

describe('customParameters', () => {
  it('is the same object when no parameter is one the core acts on; else a copy without those, in order, a `__proto__` parameter kept as one', () => {
    const plain = { tenant: 'a', n: 1 };
    expect(customParameters(plain)).toBe(plain);
    const mixed = { binary_data_output: true, tenant: 'a', priority: 2, sequence_id: 'x', n: 1 };
    expect(Object.keys(customParameters(mixed))).toEqual(['tenant', 'n']);
    expect(mixed).toEqual({ binary_data_output: true, tenant: 'a', priority: 2, sequence_id: 'x', n: 1 });
    const only = customParameters({ binary_data_output: true });
    expect(only).toEqual({});
    expect(Object.isFrozen(only)).toBe(true);
    const proto = customParameters(JSON.parse('{"timeout": 5, "__proto__": "p"}') as Record<string, string | number>);
    expect(Object.keys(proto)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
  });
});

describe('requestControls', () => {
  it('reads what a backend sees of the parameters the core acts on; undefined when a request sets none of it', () => {
    expect([REQUEST_FLAG_SEQUENCE_START, REQUEST_FLAG_SEQUENCE_END]).toEqual([1, 2]);
    expect(requestControls(undefined)).toBeUndefined();
    expect(requestControls({ tenant: 'a', priority: 3, binary_data_output: false })).toBeUndefined();
    expect(requestControls({ sequence_id: 0, sequence_start: false, sequence_end: false, timeout: 0 })).toBeUndefined();
    expect(requestControls({ sequence_id: '' })).toBeUndefined();
    expect(requestControls({ sequence_id: 2n ** 64n - 1n, sequence_end: true })).toEqual({ correlationId: 18446744073709551615n, flags: 2 });
    expect(requestControls({ sequence_id: 9 })).toEqual({ correlationId: 9n });
    // A string id of any length (only sequence batching, which keeps it, limits it).
    expect(requestControls({ sequence_id: 'x'.repeat(1000), sequence_start: true, sequence_end: true, timeout: 5 })).toEqual({ correlationId: 'x'.repeat(1000), flags: 3, timeoutUs: 5 });
    expect(requestControls({ timeout: 2n ** 64n - 1n })).toEqual({ timeoutUs: Number.MAX_SAFE_INTEGER });
    expect(() => requestControls({ sequence_end: 1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "parameter 'sequence_end' must be a boolean" }));
    expect(() => requestControls({ sequence_id: 1.5 })).toThrow("parameter 'sequence_id' must be a non-negative integer, got 1.5");
    expect(() => requestControls({ timeout: 'soon' })).toThrow("parameter 'timeout' must be a non-negative integer");
  });
});

describe('CancelToken', () => {
  it('runs each listener once on cancel, none after removal, and reports aborted', () => {
    const t = new CancelToken();
    let a = 0;
    let b = 0;
    const fa = () => { a++; };
    const fb = () => { b++; };
    t.addEventListener('abort', fa);
    t.addEventListener('abort', fb);
    t.removeEventListener('abort', fb);
    expect(t.aborted).toBe(false);
    t.cancel();
    t.cancel();
    expect([t.aborted, a, b]).toEqual([true, 1, 0]);
  });
});

describe('applyReshape', () => {
  it('output: the batch dim plus dims, from the backend\'s reshape.shape (Triton\'s Output::Reshape)', () => {
    expect(applyReshape([3, 16], [16], [2, 8], true)).toEqual([3, 2, 8]);
    expect(applyReshape([1, 16], [16], [2, 8], true)).toEqual([1, 2, 8]);
    expect(applyReshape([16], [16], [2, 8], false)).toEqual([2, 8]);
  });

  it('fills variable dims in order from the backend\'s shape', () => {
    expect(applyReshape([2, 5, 4], [-1, 4], [-1, 2, 2], true)).toEqual([2, 5, 2, 2]);
    expect(applyReshape([4, 2, 3, 5], [-1, 2, 3, -1], [-1, 6, -1], false)).toEqual([4, 6, 5]);
  });

  it('a scalar reshape (shape []) of a batching model gives dims back per batch item', () => {
    expect(applyReshape([3], [], [1], true)).toEqual([3, 1]);
  });

  it('a backend shape in another form with the same elements is read by its element count', () => {
    expect(applyReshape([2, 2, 8], [16], [-1, 8], true)).toEqual([2, 2, 8]);
    expect(applyReshape([1, 2, 8], [16], [2, 8], true)).toEqual([1, 2, 8]);
  });

  it('refuses a shape whose element count no dims of that form can hold (INTERNAL)', () => {
    expect(() => applyReshape([1, 15], [16], [2, 8], true)).toThrow(expect.objectContaining({ code: 'INTERNAL', message: 'cannot reshape [1,15] from [16] to [2,8]: the element counts differ' }));
  });
});
