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
