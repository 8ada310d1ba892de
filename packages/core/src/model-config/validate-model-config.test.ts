import { describe, expect, it } from 'vitest';
import type { ModelConfig } from './model-config.js';
import { MAX_PRIORITY_LEVELS, MAX_STATE_BYTES, validateModelConfig } from './validate-model-config.js';

const base = (extra: Partial<ModelConfig>): ModelConfig => ({
  name: 'm', backend: 'javascript', max_batch_size: 8,
  input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1] }],
  ...extra,
} as ModelConfig);

describe('validateModelConfig: sizes a config could make the server allocate', () => {
  it('attack: priority_levels past MAX_PRIORITY_LEVELS is refused at load (50 million took the process down)', () => {
    expect(() => validateModelConfig(base({ dynamic_batching: { priority_levels: MAX_PRIORITY_LEVELS, default_priority_level: 1 } }), 'm')).not.toThrow();
    expect(() => validateModelConfig(base({ dynamic_batching: { priority_levels: 50_000_000, default_priority_level: 1 } }), 'm'))
      .toThrow(`'priority_levels' of m is 50000000; Triode allows at most ${MAX_PRIORITY_LEVELS}`);
  });

  it('attack: a priority_queue_policy key that is not a level number is refused (NaN passed the range check)', () => {
    for (const key of ['abc', '1.5', '', '0x2']) {
      expect(() => validateModelConfig(base({ dynamic_batching: { priority_levels: 3, default_priority_level: 1, priority_queue_policy: { [key]: { max_queue_size: 1 } } } }), 'm'), key)
        .toThrow('priority queue policy must have priority level in range [1, 3] for m');
    }
    expect(() => validateModelConfig(base({ dynamic_batching: { priority_levels: 3, default_priority_level: 1, priority_queue_policy: { 2: { max_queue_size: 1 } } } }), 'm')).not.toThrow();
  });

  it('attack: an implicit state whose zeros are over MAX_STATE_BYTES is refused at load (it was made per sequence: OOM)', () => {
    const state = (data_type: string, dims: number[]) => base({ sequence_batching: { state: [{ input_name: 'S_IN', output_name: 'S_OUT', data_type, dims }] } } as never);
    expect(() => validateModelConfig(state('TYPE_FP32', [1024, 1024]), 'm')).not.toThrow();
    expect(() => validateModelConfig(state('TYPE_STRING', [500_000_000]), 'm'))
      .toThrow(`implicit state 'S_IN' of m starts with [500000000] BYTES elements, over the limit of ${MAX_STATE_BYTES} bytes`);
    expect(() => validateModelConfig(state('TYPE_FP32', [2147483647]), 'm')).toThrow(/over the limit/);
    // Variable dims take their size from the request's first state: nothing to check here.
    expect(() => validateModelConfig(state('TYPE_FP32', [-1]), 'm')).not.toThrow();
  });
});
