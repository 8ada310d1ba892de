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

  it('attack: priority_queue_policy keys "1" and "01" name one level: refused as twice (review: "01" loaded and was never applied)', () => {
    expect(() => validateModelConfig(base({ dynamic_batching: { priority_levels: 3, default_priority_level: 1, priority_queue_policy: { '1': { max_queue_size: 1 }, '01': { max_queue_size: 2 } } } }), 'm'))
      .toThrow('priority queue policy names priority level 1 twice for m');
    expect(() => validateModelConfig(base({ dynamic_batching: { priority_levels: 3, default_priority_level: 1, priority_queue_policy: { '01': { max_queue_size: 1 } } } }), 'm')).not.toThrow();
  });

  it('attack: an implicit state whose zeros are over MAX_STATE_BYTES is refused at load (it was made per sequence: OOM)', () => {
    const state = (data_type: string, dims: number[]) => base({ sequence_batching: { state: [{ input_name: 'S_IN', output_name: 'S_OUT', data_type, dims }] } } as never);
    expect(() => validateModelConfig(state('TYPE_FP32', [1024, 1024]), 'm')).not.toThrow();
    expect(() => validateModelConfig(state('TYPE_STRING', [500_000_000]), 'm'))
      .toThrow(`implicit state 'S_IN' of m starts with [500000000] BYTES elements: its states would start with over the limit of ${MAX_STATE_BYTES} bytes a sequence`);
    expect(() => validateModelConfig(state('TYPE_FP32', [2147483647]), 'm')).toThrow(/over the limit/);
    expect(() => validateModelConfig(state('TYPE_FP32', [-1]), 'm')).not.toThrow();
    // A variable dim starts as 1: [-1, 100000000] starts with 400 MB (it was not checked, review).
    expect(() => validateModelConfig(state('TYPE_FP32', [-1, 100_000_000]), 'm')).toThrow(/starts with \[1,100000000\] FP32 elements: its states would start with over the limit/);
    // The limit holds for a sequence's states together: five of 240 MB passed one by one.
    const five = base({ sequence_batching: { state: Array.from({ length: 5 }, (_, i) => ({ input_name: `S${i}`, output_name: `O${i}`, data_type: 'TYPE_FP32', dims: [60_000_000] })) } } as never);
    expect(() => validateModelConfig(five, 'm')).toThrow(/implicit state 'S1' of m starts with \[60000000\] FP32 elements: its states would start with over the limit/);
  });
});

describe('validateModelConfig: sequence batching strategies (Triton ValidateModelConfig)', () => {
  const seq = (sequence_batching: ModelConfig['sequence_batching']) => base({ sequence_batching } as never);

  it('refuses an Oldest preferred_batch_size of 0 or less, with Triton text (review: 0 loaded, then spun a core and hung)', () => {
    expect(() => validateModelConfig(seq({ oldest: { preferred_batch_size: [0] } }), 'm')).toThrow('sequence batching preferred batch size must be positive for m');
    expect(() => validateModelConfig(seq({ oldest: { preferred_batch_size: [2, -1] } }), 'm')).toThrow('sequence batching preferred batch size must be positive for m');
    expect(() => validateModelConfig(seq({ oldest: { preferred_batch_size: [2, 8] } }), 'm')).not.toThrow();
  });

  it('refuses an Oldest preferred_batch_size over max_batch_size, with Triton text', () => {
    expect(() => validateModelConfig(seq({ oldest: { preferred_batch_size: [9] } }), 'm')).toThrow('sequence batching preferred batch size must be <= max batch size for m');
  });

  it('refuses a Direct minimum_slot_utilization outside [0, 1], with Triton text (0 passes, as in Triton)', () => {
    for (const u of [-0.1, 1.5]) {
      expect(() => validateModelConfig(seq({ direct: { minimum_slot_utilization: u } }), 'm'), String(u)).toThrow('sequence batching minimum slot utilization must be in range (0.0, 1.0] for m');
    }
    for (const u of [0, 0.5, 1]) expect(() => validateModelConfig(seq({ direct: { minimum_slot_utilization: u } }), 'm'), String(u)).not.toThrow();
  });
});

describe('validateModelConfig: a config sent with a load request is client input', () => {
  it('attack: a 5,000-character input name or data type is repeated at most MAX_ECHO_CHARS (fuzz seed 2031 case 11247)', () => {
    const long = 'x'.repeat(5000);
    for (const config of [
      base({ input: [{ name: long, data_type: 'TYPE_INT32', dims: [1] }, { name: long, data_type: 'TYPE_INT32', dims: [1] }] }),
      base({ input: [{ name: 'IN', data_type: long, dims: [1] }] as never }),
      base({ input: [{ name: long, data_type: 'TYPE_INT32', dims: [0] }] }),
    ]) {
      let message = '';
      try { validateModelConfig(config, 'm'); } catch (e) { message = (e as Error).message; }
      expect(message).toContain('xxxx');
      expect(message.length).toBeLessThan(400);
    }
  });
});

describe('validateModelConfig: ensemble scheduling, as Triton\'s ValidateEnsembleSchedulingConfig', () => {
  const steps = { step: [{ model_name: 'a', model_version: -1, input_map: { IN: 'IN' }, output_map: { OUT: 'OUT' } }] };
  const ensemble = (extra: Partial<ModelConfig>) => base({ backend: undefined, platform: 'ensemble', ensemble_scheduling: steps, ...extra } as never);

  it('review: ensemble_scheduling on a model that is not an ensemble, and instance_group, optimization or model_warmup on an ensemble, are refused with Triton\'s words (they loaded, and the model was taken for an ensemble of its steps)', () => {
    expect(() => validateModelConfig(ensemble({}), 'm')).not.toThrow();
    expect(() => validateModelConfig(base({ ensemble_scheduling: steps } as never), 'm')).toThrow(expect.objectContaining({
      code: 'INVALID_ARG', message: "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble",
    }));
    expect(() => validateModelConfig(ensemble({ instance_group: [{ count: 3 }] } as never), 'm')).toThrow("instance group should not be specified for ensemble 'm'");
    expect(() => validateModelConfig(ensemble({ optimization: {} } as never), 'm')).toThrow("optimization should not be specified for ensemble 'm'");
    const warmup = [{ name: 'w', batch_size: 1, inputs: { IN: { data_type: 'TYPE_INT32', dims: [1], zero_data: true } } }];
    expect(() => validateModelConfig(ensemble({ model_warmup: warmup } as never), 'm')).toThrow("model_warmup can not be specified for ensemble 'm'");
  });
});
