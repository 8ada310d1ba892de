/** What a client is told of an error: absolute paths cut to their last component, URLs left alone. */
import { describe, expect, it } from 'vitest';
import { TriodeError } from '@triode/core';
import { clientMessage } from './error-mapping.js';

const told = (message: string): string => clientMessage(new TriodeError('INVALID_ARG', message));

describe('clientMessage', () => {
  it('cuts a path that follows a colon (onnxruntime: "failed:/onnxruntime_src/...")', () => {
    const m = told('Load model from m failed:/onnxruntime_src/onnxruntime/core/graph/model.cc:202 onnxruntime::Model::Model(onnx::ModelProto&&) Unsupported model IR version: 99');
    expect(m).toBe('Load model from m failed:.../model.cc:202 onnxruntime::Model::Model(onnx::ModelProto&&) Unsupported model IR version: 99');
  });

  it('cuts file URLs, quoted and Windows paths, and leaves a URL of another scheme as it is', () => {
    expect(told("open 'file:///srv/secret/m/1/model.onnx' failed")).toBe("open '.../model.onnx' failed");
    expect(told("failed to read '/srv/secret/repo/m/1/model.onnx': broken")).toBe("failed to read '.../model.onnx': broken");
    expect(told('no file C:\\Users\\me\\model.onnx')).toBe('no file .../model.onnx');
    expect(told('see http://example.com/docs/a for more')).toBe('see http://example.com/docs/a for more');
    expect(told('ratio 3:2 in dims [1,2]')).toBe('ratio 3:2 in dims [1,2]');
  });
});
