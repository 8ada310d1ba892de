/** A load failure's message as a client gets it: no stacks, no absolute paths (issue #14). */
import { describe, expect, it } from 'vitest';
import { clientLoadMessage, loadFailed, loadFailureReason, statusString } from './load-error.js';

describe('clientLoadMessage', () => {
  it('cuts a path that follows a colon (onnxruntime: "failed:/onnxruntime_src/...")', () => {
    const m = clientLoadMessage('Load model from m failed:/onnxruntime_src/onnxruntime/core/graph/model.cc:202 onnxruntime::Model::Model(onnx::ModelProto&&) Unsupported model IR version: 99');
    expect(m).not.toContain('/onnxruntime_src');
    expect(m).toBe('Load model from m failed:model.cc:202 onnxruntime::Model::Model(onnx::ModelProto&&) Unsupported model IR version: 99');
  });

  it('reads paths relative to the given directories, cuts the others, drops stack lines, leaves URLs', () => {
    const m = clientLoadMessage("cannot open '/repo/m/1/model.onnx' (file:///srv/x/y.js)\n    at f (/srv/x/y.js:1:1)\nsee https://example.com/a/b", ['/repo']);
    expect(m).toBe("cannot open 'm/1/model.onnx' (y.js) see https://example.com/a/b");
  });
});

describe('Triton\'s load failure texts', () => {
  it('a failed load is one line ending in a newline (LoadUnloadModels), its reason kept without it; a version\'s status carries its code (Status::AsString)', () => {
    const e = loadFailed('m', 'version 1 is at UNAVAILABLE state: Internal: x;');
    expect([e.code, e.message]).toEqual(['INVALID_ARG', "load failed for model 'm': version 1 is at UNAVAILABLE state: Internal: x;\n"]);
    expect(loadFailureReason(e)).toBe('version 1 is at UNAVAILABLE state: Internal: x;');
    expect(loadFailureReason(new Error('other'))).toBe('other');
    expect(['INTERNAL', 'INVALID_ARG', 'UNAVAILABLE', 'NOT_FOUND', 'UNSUPPORTED'].map((c) => statusString(c as 'INTERNAL', 'x'))).toEqual(['Internal: x', 'Invalid argument: x', 'Unavailable: x', 'Not found: x', 'Unsupported: x']);
  });
});
