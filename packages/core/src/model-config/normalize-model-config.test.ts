import { describe, expect, it } from 'vitest';
import { autoCompleteBackendFields, normalizeModelConfig } from './normalize-model-config.js';
import { validateModelConfig } from './validate-model-config.js';
import type { ModelConfig } from './model-config.js';

describe('autoCompleteBackendFields()', () => {
  it('detects onnxruntime from model.onnx and fills platform and the default file name', () => {
    const c: ModelConfig = {};
    autoCompleteBackendFields(c, ['model.onnx']);
    expect(c).toMatchObject({ backend: 'onnxruntime', platform: 'onnxruntime_onnx', default_model_filename: 'model.onnx' });
  });

  it('fills backend from platform onnxruntime_onnx', () => {
    const c: ModelConfig = { platform: 'onnxruntime_onnx' };
    autoCompleteBackendFields(c, []);
    expect(c.backend).toBe('onnxruntime');
  });

  it("takes onnxruntime from default_model_filename 'model.onnx' only, as Triton (before: any *.onnx name)", () => {
    const c: ModelConfig = { name: 'm', default_model_filename: 'x.onnx' };
    autoCompleteBackendFields(c, ['x.onnx']);
    expect(c.backend).toBeUndefined();
    const d: ModelConfig = { name: 'm', default_model_filename: 'model.onnx' };
    autoCompleteBackendFields(d, []);
    expect(d).toMatchObject({ backend: 'onnxruntime', platform: 'onnxruntime_onnx' });
  });

  it("with nothing to go by, takes the backend from a model named <x>.<backend>, else refuses with Triton's text (before: 'must specify platform or backend')", () => {
    const c: ModelConfig = { name: 'add.identity' };
    autoCompleteBackendFields(c, []);
    expect(c).toMatchObject({ backend: 'identity', default_model_filename: 'model.identity' });
    expect(() => autoCompleteBackendFields({ name: 'nob' }, ['weights.bin'])).toThrow(
      "Invalid model name: Could not determine backend for model 'nob' with no backend in model configuration. Expected model name of the form 'model.<backend_name>'.");
  });

  it('detects the javascript backend from model.mjs', () => {
    const c: ModelConfig = {};
    autoCompleteBackendFields(c, ['model.mjs']);
    expect(c).toMatchObject({ backend: 'javascript', default_model_filename: 'model.mjs' });
  });
});

describe('normalizeModelConfig()', () => {
  it("fills Triton's defaults", () => {
    const c = normalizeModelConfig({ name: 'm', backend: 'onnxruntime', max_batch_size: 8, dynamic_batching: {}, input: [], output: [] });
    expect(c.version_policy).toEqual({ latest: { num_versions: 1 } });
    expect(c.dynamic_batching?.preferred_batch_size).toEqual([8]);
    // The group Triton adds is named after the model (a group given without a name gets <model>_<i>).
    expect(c.instance_group).toEqual([{ name: 'm', kind: 'KIND_CPU', count: 2 }]);
  });

  it("keeps a version policy given; latest {} is num_versions 0, as Triton reads it (before: 1)", () => {
    expect(normalizeModelConfig({ name: 'm', backend: 'onnxruntime', version_policy: { latest: {} } }).version_policy).toEqual({ latest: { num_versions: 0 } });
    expect(normalizeModelConfig({ name: 'm', backend: 'onnxruntime', version_policy: { all: {} } }).version_policy).toEqual({ all: {} });
  });

  it('keeps given preferred sizes and instance counts, and uses count 1 for other backends', () => {
    const c = normalizeModelConfig({ name: 'm', backend: 'javascript', max_batch_size: 8, dynamic_batching: { preferred_batch_size: [4] }, instance_group: [{ kind: 'KIND_AUTO' }, { count: 3, name: 'g' }] });
    expect(c.dynamic_batching?.preferred_batch_size).toEqual([4]);
    expect(c.instance_group).toEqual([{ name: 'm_0', kind: 'KIND_CPU', count: 1 }, { name: 'g', kind: 'KIND_CPU', count: 3 }]);
  });

  it('sets the sequence idle time to 1 s; no strategy (Direct) is left unset, as Triton leaves it', () => {
    const c = normalizeModelConfig({ name: 'm', backend: 'onnxruntime', sequence_batching: {} });
    expect(c.sequence_batching).toEqual({ max_sequence_idle_microseconds: 1_000_000 });
  });
});

describe('validateModelConfig()', () => {
  const base = (): ModelConfig => normalizeModelConfig({
    name: 'm', backend: 'onnxruntime', platform: 'onnxruntime_onnx', max_batch_size: 4,
    input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [3] }], output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [3] }],
  });

  it('accepts a complete config', () => {
    expect(() => validateModelConfig(base(), 'm')).not.toThrow();
  });

  it.each<[string, (c: ModelConfig) => void, string]>([
    ['a name that is not the folder', (c) => { c.name = 'other'; }, "unexpected model name 'other' in configuration, expected 'm'"],
    ['no platform nor backend', (c) => { c.backend = ''; c.platform = ''; }, "must specify 'platform' or 'backend' for 'm'"],
    ['a negative max_batch_size', (c) => { c.max_batch_size = -1; }, "'max_batch_size' must be non-negative value for m"],
    ['an input without data_type', (c) => { delete c.input![0]!.data_type; }, "model input 'x' must specify 'data_type'"],
    ['an input without dims', (c) => { c.input![0]!.dims = []; }, "model input 'x' must specify 'dims'"],
    ['a zero dim', (c) => { c.output![0]!.dims = [0]; }, "model output 'y' dimension must be integer >= 1, or -1 to indicate a variable-size dimension"],
    ['a reshape of another size', (c) => { c.input![0]!.reshape = { shape: [4] }; }, "model input 'x' has different size for dims and reshape"],
    ['an empty reshape without batching', (c) => { c.max_batch_size = 0; c.input![0]!.reshape = { shape: [] }; }, "model input 'x' cannot have empty reshape for non-batching model"],
    ['a duplicate input', (c) => { c.input!.push({ name: 'x', data_type: 'TYPE_FP32', dims: [1] }); }, "input 'x' specified more than once for m"],
    ['a preferred size above the max', (c) => { c.dynamic_batching = { preferred_batch_size: [8] }; }, 'dynamic batching preferred size must be <= max batch size for m'],
    ['NCHW without 3 dims', (c) => { c.input![0]!.format = 'FORMAT_NCHW'; }, "model input 'x' NHWC/NCHW require 3 dims for m"],
  ])('rejects %s', (_what, mutate, message) => {
    const c = base();
    mutate(c);
    expect(() => validateModelConfig(c, 'm')).toThrow(message);
  });

  it('accepts a reshape with matching variable-size runs', () => {
    const c = base();
    c.input![0]!.dims = [2, 4, -1, 6];
    c.input![0]!.reshape = { shape: [8, -1, 1, 6] };
    expect(() => validateModelConfig(c, 'm')).not.toThrow();
  });
});
