/** A load failure's message as a client gets it: no stacks, no absolute paths (issue #14). */
import { describe, expect, it } from 'vitest';
import { clientLoadMessage } from './load-error.js';

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
