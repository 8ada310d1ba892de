import { describe, expect, it } from 'vitest';
import { modelConfigFromJson, modelConfigToJson } from './model-config-json.js';
import { normalizeModelConfig } from './normalize-model-config.js';
import { parsePbtxt } from './pbtxt-parser.js';

describe('modelConfigToJson()', () => {
  it('prints proto field names, scalar defaults, empty repeated fields and maps, and only set messages', () => {
    const c = normalizeModelConfig(parsePbtxt('name: "m" backend: "onnxruntime" max_batch_size: 8 input { name: "x" data_type: TYPE_FP32 dims: [3] }'));
    const j = modelConfigToJson(c) as Record<string, unknown>;
    expect(j['name']).toBe('m');
    expect(j['platform']).toBe('');
    expect(j['runtime']).toBe('');
    expect(j['version_policy']).toEqual({ latest: { num_versions: 1 } });
    expect(j['input']).toEqual([{ name: 'x', data_type: 'TYPE_FP32', format: 'FORMAT_NONE', dims: [3], is_shape_tensor: false, allow_ragged_batch: false, optional: false, is_non_linear_format_io: false }]);
    expect(j['output']).toEqual([]);
    expect(j['batch_input']).toEqual([]);
    expect(j['parameters']).toEqual({});
    expect(j['model_warmup']).toEqual([]);
    expect(j).not.toHaveProperty('dynamic_batching');
    expect(j).not.toHaveProperty('sequence_batching');
    expect(j['instance_group']).toEqual([{ name: 'm', kind: 'KIND_CPU', count: 2, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' }]);
    expect(j['optimization']).toMatchObject({ priority: 'PRIORITY_DEFAULT', input_pinned_memory: { enable: true }, output_pinned_memory: { enable: true } });
  });

  it('prints 64-bit integers as numbers, but the three Triton never turns from protobuf\'s strings', () => {
    const c = normalizeModelConfig(parsePbtxt(`name: "s" backend: "onnxruntime" max_batch_size: 2
      input { name: "x" data_type: TYPE_FP32 dims: [-1, 3] reshape { shape: [3] } }
      version_policy { specific { versions: [1, 3] } }
      sequence_batching {
        max_sequence_idle_microseconds: 5000000
        state { input_name: "i" output_name: "o" data_type: TYPE_INT32 dims: [2, 4] initial_state { name: "z" data_type: TYPE_INT32 dims: [2, 4] zero_data: true } }
      }
      instance_group { kind: KIND_GPU gpus: [0] secondary_devices { kind: KIND_NVDLA device_id: 1 } }
      optimization { cuda { graph_spec { batch_size: 2 input { key: "x" value { dim: [3] } } graph_lower_bound { batch_size: 1 input { key: "x" value { dim: [1] } } } } } }`));
    const j = modelConfigToJson(c);
    /** The value at a path of keys and indexes. */
    const at = (...path: (string | number)[]): unknown => path.reduce<unknown>((x, k) => (x as Record<string | number, unknown>)[k], j);
    expect(at('input', 0)).toMatchObject({ dims: [-1, 3], reshape: { shape: [3] } });
    expect(at('version_policy')).toEqual({ specific: { versions: [1, 3] } });
    expect(at('sequence_batching', 'max_sequence_idle_microseconds')).toBe(5000000);
    expect(at('sequence_batching', 'state', 0, 'dims')).toEqual([2, 4]);
    expect(at('sequence_batching', 'state', 0, 'initial_state', 0)).toEqual({ data_type: 'TYPE_INT32', dims: ['2', '4'], zero_data: true, name: 'z' });
    expect(at('instance_group', 0, 'secondary_devices')).toEqual([{ kind: 'KIND_NVDLA', device_id: '1' }]);
    expect(at('optimization', 'cuda', 'graph_spec', 0)).toEqual({ batch_size: 2, input: { x: { dim: ['3'] } }, graph_lower_bound: { batch_size: 1, input: { x: { dim: ['1'] } } } });
    // Read back as Triton reads them (protobuf's JSON parser takes integers as strings).
    const back = modelConfigFromJson(j);
    expect(back.sequence_batching?.state?.[0]?.initial_state?.[0]?.dims).toEqual([2, 4]);
    expect(back.instance_group?.[0]?.secondary_devices?.[0]?.device_id).toBe(1);
  });
});

describe('modelConfigFromJson()', () => {
  it('accepts integers given as strings, as protobuf JSON does', () => {
    expect(modelConfigFromJson({ max_batch_size: '16' }).max_batch_size).toBe(16);
  });

  it('reads nested messages, enums and maps', () => {
    const c = modelConfigFromJson({
      input: [{ name: 'x', data_type: 'TYPE_INT32', dims: ['16'] }],
      parameters: { a: { string_value: 'b' } },
      instance_group: [{ kind: 'KIND_CPU', count: 1 }],
    });
    expect(c.input).toEqual([{ name: 'x', data_type: 'TYPE_INT32', dims: [16] }]);
    expect(c.parameters).toEqual({ a: { string_value: 'b' } });
  });

  it('takes lowerCamelCase JSON names as well as proto names, and enum names in any case, as Triton\'s JsonToModelConfig (review: both were refused)', () => {
    const c = modelConfigFromJson({
      maxBatchSize: 4,
      input: [{ name: 'x', dataType: 'type_fp32', dims: [3], allowRaggedBatch: true }],
      instanceGroup: [{ kind: 'Kind_Gpu', count: 1, gpus: [0] }],
      sequenceBatching: { controlInput: [{ name: 'S', control: [{ kind: 'control_sequence_start', int32FalseTrue: [0, 1] }] }], max_sequence_idle_microseconds: 5 },
      parameters: { my_key: { stringValue: 'v' } },
    });
    expect(c).toEqual({
      max_batch_size: 4,
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [3], allow_ragged_batch: true }],
      instance_group: [{ kind: 'KIND_GPU', count: 1, gpus: [0] }],
      sequence_batching: { control_input: [{ name: 'S', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1] }] }], max_sequence_idle_microseconds: 5 },
      // Map keys are data: kept as given.
      parameters: { my_key: { string_value: 'v' } },
    });
    expect(() => modelConfigFromJson({ max_batch_size: 1, maxBatchSize: 2 })).toThrow('failed to parse model configuration: "max_batch_size" is given twice (as "max_batch_size" and "maxBatchSize")');
    expect(() => modelConfigFromJson({ dynamicBatching: {}, sequence_batching: {} })).toThrow('are both set (oneof scheduling_choice)');
    expect(() => modelConfigFromJson({ MaxBatchSize: 1 })).toThrow('unknown field "MaxBatchSize"');
    expect(() => modelConfigFromJson({ max_batchSize: 1 })).toThrow('unknown field "max_batchSize"');
  });

  it('config.pbtxt keeps the text format\'s rules: proto names only, enum names as declared', () => {
    expect(() => parsePbtxt('maxBatchSize: 4')).toThrow();
    expect(() => parsePbtxt('input { name: "x" data_type: type_fp32 dims: [ 1 ] }')).toThrow();
  });

  it.each([
    [{ max_batch_size: 'eight' }, 'max_batch_size: expected an integer of type int32'],
    // Review: a legal uint64 past 2^53 was refused as if it were not a uint64.
    [{ dynamic_batching: { max_queue_delay_microseconds: '18446744073709551615' } }, 'dynamic_batching.max_queue_delay_microseconds: expected an integer of type uint64 (Triode reads uint64 config values up to 2^53-1 (9007199254740991) in magnitude)'],
    [{ nope: 1 }, 'unknown field "nope"'],
    [{ input: { name: 'x' } }, 'input: expected an array'],
    [{ input: [{ data_type: 'FLOAT' }] }, 'invalid value "FLOAT" for enum DataType'],
    [[1], 'expected a JSON object'],
  ])('rejects %j', (json, message) => {
    expect(() => modelConfigFromJson(json)).toThrow(message);
  });
});

describe('modelConfigFromJson() on hostile configs', () => {
  it('attack: a field named like an Object property is an unknown field, not an internal error', () => {
    for (const name of ['constructor', 'toString', 'hasOwnProperty']) {
      expect(() => modelConfigFromJson(JSON.parse(`{"${name}": 1}`)), name).toThrow(`failed to parse model configuration: unknown field "${name}"`);
    }
    expect(() => modelConfigFromJson(JSON.parse('{"dynamic_batching": {"constructor": {}}}'))).toThrow('unknown field "dynamic_batching.constructor"');
  });
});
