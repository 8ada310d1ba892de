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
});
