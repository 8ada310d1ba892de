import { describe, expect, it } from 'vitest';
import { messageType } from '@triode/core';
import { inferRequestFromMessage, type ModelInferRequestMessage } from './grpc-infer.js';

const decode = (m: object) => messageType('ModelInferRequest').decode(messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject(m)).finish()) as unknown as ModelInferRequestMessage;

describe('ModelInferRequest to a request', () => {
  it('an empty FP16 or BF16 input needs no data (as an empty input of any type); a non-empty one still needs raw contents', () => {
    for (const datatype of ['FP16', 'BF16']) {
      const { request } = inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype, shape: [2, 0] }] }));
      expect(request.inputs[0]!.data.length).toBe(0);
      expect(() => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype, shape: [1] }] }))).toThrow(/unable to find data for input tensor 'x'/);
    }
  });
});

describe('shared memory parameters', () => {
  // Review: ignored, an output asked for in a region came back in raw_output_contents.
  const region = { shared_memory_region: { string_param: 'r1' }, shared_memory_byte_size: { int64_param: 4 } };
  it('an input or output in a region is NOT_FOUND with Triton\'s words (no region is ever registered)', () => {
    const raw = [Buffer.alloc(4)];
    expect(() => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [1], parameters: region }], raw_input_contents: raw })))
      .toThrow(expect.objectContaining({ code: 'NOT_FOUND', message: "Unable to find shared memory region: 'r1'" }));
    expect(() => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [1] }], raw_input_contents: raw, outputs: [{ name: 'y', parameters: region }] })))
      .toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(() => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [1] }], raw_input_contents: raw, outputs: [{ name: 'y', parameters: { shared_memory_region: { int64_param: 3 } } }] })))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG' }));
  });

  // Review: a region with no value set was read as no region, and the output came back inline.
  it.each([
    ['no value', {}],
    ['an int64', { int64_param: 3 }],
    ['a bool', { bool_param: true }],
    ['a double', { double_param: 1.5 }],
    ['a uint64', { uint64_param: 0 }],
  ])("a region that is not a string_param (%s) is INVALID_ARG with Triton's words, on an input or an output", (_kind, value) => {
    const raw = [Buffer.alloc(4)];
    expect(() => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [1], parameters: { shared_memory_region: value } }], raw_input_contents: raw })))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "invalid value type for 'shared_memory_region' parameter for tensor 'x', expected string_param." }));
    expect(() => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [1] }], raw_input_contents: raw, outputs: [{ name: 'y\nz', parameters: { shared_memory_region: value } }] })))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "invalid value type for 'shared_memory_region' parameter for tensor 'y\\u000az', expected string_param." }));
  });
});

describe('the parameters Triton\'s gRPC frontend reads itself, with its types', () => {
  const raw = [Buffer.alloc(4)];
  const withParams = (parameters: object) => inferRequestFromMessage(decode({ model_name: 'm', parameters, inputs: [{ name: 'x', datatype: 'INT32', shape: [1] }], raw_input_contents: raw })).request.parameters ?? {};
  it('sequence_id: an int64 is taken as uint64 (-1 is 2^64-1, as a client sends ids of 2^63 or more), a string as it is (review: -1 was refused)', () => {
    expect(withParams({ sequence_id: { int64_param: -1 } })['sequence_id']).toBe(2n ** 64n - 1n);
    expect(withParams({ sequence_id: { int64_param: 42 } })['sequence_id']).toBe(42);
    expect(withParams({ sequence_id: { string_param: 'abc' } })['sequence_id']).toBe('abc');
    expect(withParams({ timeout: { int64_param: -1 } })['timeout']).toBe(2n ** 64n - 1n);
    expect(withParams({ priority: { uint64_param: 3 } })['priority']).toBe(3);
    expect(withParams({ custom: { double_param: 0.5 } })['custom']).toBe(0.5);
  });
  it.each([
    [{ sequence_id: { double_param: 5 } }, "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."],
    [{ sequence_id: { uint64_param: 5 } }, "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."],
    [{ sequence_id: {} }, "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."],
    [{ sequence_start: { int64_param: 1 } }, "invalid value type for 'sequence_start' parameter, expected bool_param."],
    [{ sequence_end: { string_param: 'true' } }, "invalid value type for 'sequence_end' parameter, expected bool_param."],
    [{ priority: { int64_param: -1 } }, "invalid value for 'priority', expected value >= 0."],
    [{ priority: { double_param: 1 } }, "invalid value type for 'priority' parameter, expected int64_param or uint64_param."],
    [{ timeout: { string_param: '5' } }, "invalid value type for 'timeout' parameter, expected int64_param."],
    [{ custom: { uint64_param: 5 } }, "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param."],
    [{ custom: {} }, "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param."],
  ])('%j is refused with Triton\'s words (review: several were accepted)', (parameters, message) => {
    expect(() => withParams(parameters)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message }));
  });
});

describe('typed contents', () => {
  const withContents = (datatype: string, contents: object, shape = [1]) => () => inferRequestFromMessage(decode({ model_name: 'm', inputs: [{ name: 'x', datatype, shape, contents }] }));
  it.each([
    ['INT32', { int_contents: [1], fp32_contents: [1.5] }, "unexpected explicit tensor data for input tensor 'x' for model 'm', binary data was already supplied."],
    ['INT32', { fp32_contents: [1.5] }, "unexpected explicit tensor data for input tensor 'x' for model 'm' of type 'FP32', expected datatype 'INT32'"],
    ['INT8', { int64_contents: [1] }, "unexpected explicit tensor data for input tensor 'x' for model 'm' of type 'INT64', expected datatype 'INT8'"],
    ['FP16', { fp32_contents: [1] }, "unexpected explicit tensor data for input tensor 'x' for model 'm' of type 'FP32', expected datatype 'FP16'"],
  ])('%s with %j is refused with Triton\'s words (review: the other field was ignored)', (datatype, contents, message) => {
    expect(withContents(datatype, contents)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message }));
  });
  it('the datatype\'s own field is read (int_contents for INT8 and INT16, uint_contents for UINT8)', () => {
    expect(Array.from(withContents('INT8', { int_contents: [-3] })().request.inputs[0]!.data as Int8Array)).toEqual([-3]);
    expect(Array.from(withContents('UINT8', { uint_contents: [250] })().request.inputs[0]!.data as Uint8Array)).toEqual([250]);
  });
});
