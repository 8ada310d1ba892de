import { describe, expect, it } from 'vitest';
import { PbtxtSyntaxError, parsePbtxt } from './pbtxt-parser.js';

describe('parsePbtxt()', () => {
  it('reads scalars, nested messages and both forms of repeated fields', () => {
    const c = parsePbtxt(`
      name: "simple"   # a comment
      platform: 'onnxruntime_onnx'
      max_batch_size: 8
      input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1", data_type: TYPE_INT32, dims: 4 dims: 4 } ]
      output { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] reshape: { shape: [ ] } }
      instance_group < count: 2 kind: KIND_CPU >;
      dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }
    `);
    expect(c.name).toBe('simple');
    expect(c.platform).toBe('onnxruntime_onnx');
    expect(c.max_batch_size).toBe(8);
    expect(c.input).toEqual([
      { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [4, 4] },
    ]);
    expect(c.output).toEqual([{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [-1], reshape: { shape: [] } }]);
    expect(c.instance_group).toEqual([{ count: 2, kind: 'KIND_CPU' }]);
    expect(c.dynamic_batching).toEqual({ preferred_batch_size: [2, 4], max_queue_delay_microseconds: 100 });
  });

  it('reads maps written as repeated key/value entries, in both forms', () => {
    const c = parsePbtxt(`
      parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
      parameters [ { key: "execution_mode", value { string_value: "0" } } ]
      dynamic_batching { priority_levels: 2 priority_queue_policy { key: 1 value: { max_queue_size: 4 timeout_action: DELAY } } }
    `);
    expect(c.parameters).toEqual({ intra_op_thread_count: { string_value: '1' }, execution_mode: { string_value: '0' } });
    expect(c.dynamic_batching?.priority_queue_policy).toEqual({ '1': { max_queue_size: 4, timeout_action: 'DELAY' } });
  });

  it('decodes string escapes and concatenates adjacent strings', () => {
    const c = parsePbtxt(String.raw`name: "a\"b\\c\n\x41\101" 'd' default_model_filename: "m\t.onnx"`);
    expect(c.name).toBe('a"b\\c\nAAd');
    expect(c.default_model_filename).toBe('m\t.onnx');
  });

  it('reads numbers with sign, exponent, hex and floats, and enums by number', () => {
    const c = parsePbtxt(`
      max_batch_size: 0x10
      input { name: "x" data_type: 11 dims: -1 }
      sequence_batching { direct { minimum_slot_utilization: 1.5e-1 } control_input { name: "S" control { kind: CONTROL_SEQUENCE_START fp32_false_true: [ -0.5, 1e2, inf ] } } }
      model_metrics { metric_control { histogram_options { buckets: [ 1.0, 2.5f ] } } }
    `);
    expect(c.max_batch_size).toBe(16);
    expect(c.input?.[0]).toEqual({ name: 'x', data_type: 'TYPE_FP32', dims: [-1] });
    expect(c.sequence_batching?.direct?.minimum_slot_utilization).toBeCloseTo(0.15);
    expect(c.sequence_batching?.control_input?.[0]?.control?.[0]?.fp32_false_true).toEqual([-0.5, 100, Infinity]);
  });

  it.each([
    ['unknown field', 'name: "x" foo: 1', '1:11: Message type "inference.ModelConfig" has no field named "foo".'],
    ['unknown enum value', 'input { name: "x" data_type: TYPE_FLOAT }', '1:30: Unknown enumeration value of "TYPE_FLOAT" for field of type inference.DataType.'],
    ['string for an int', 'max_batch_size: "8"', '1:17: Expected integer, got: "8"'],
    ['int out of range', 'max_batch_size: 3000000000', '1:17: Integer out of range (3000000000)'],
    ['a uint64 past 2^53 (legal in Triton)', 'dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }', '1:50: Integer out of range (18446744073709551615): Triode reads uint64 config values up to 2^53-1 (9007199254740991) in magnitude'],
    ['past uint64 itself', 'dynamic_batching { max_queue_delay_microseconds: 18446744073709551616 }', '1:50: Integer out of range (18446744073709551616)'],
    ['a scalar given twice', 'name: "a" name: "b"', '1:11: Non-repeated field "name" is specified multiple times.'],
    ['unterminated string', 'name: "abc', '1:7: String literal is not terminated'],
    ['missing closing brace', 'input { name: "x"', '1:18: Expected "}".'],
    ['missing colon', 'name "x"', '1:6: Expected ":", found ""x"".'],
    ['two members of a oneof', 'dynamic_batching {} sequence_batching {}', '1:21: Field "sequence_batching" is specified along with field "dynamic_batching", another member of oneof "scheduling_choice".'],
    ['a list for a scalar', 'max_batch_size: [1, 2]', '1:1: Non-repeated field "max_batch_size" cannot be given a list of values.'],
    ['bad bool', 'input { name: "x" optional: maybe }', '1:29: Invalid value for boolean field: "maybe"'],
    ['bad escape', String.raw`name: "a\q"`, '1:9: Invalid escape sequence in string literal: "\\q"'],
  ])('rejects %s with a line:column message', (_what, src, message) => {
    expect(() => parsePbtxt(src)).toThrow(PbtxtSyntaxError);
    expect(() => parsePbtxt(src)).toThrow(message);
  });
});

describe('parsePbtxt() on hostile configs', () => {
  it('attack: a field named like an Object property (constructor, toString, __proto__) is an unknown field, not an internal error', () => {
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(() => parsePbtxt(`${name}: 1`), name).toThrow(`Message type "inference.ModelConfig" has no field named "${name}".`);
    }
  });

  it('attack: a map key "__proto__" is an entry of the map, not its prototype', () => {
    const c = parsePbtxt('parameters { key: "__proto__" value: { string_value: "x" } }');
    const params = c.parameters as Record<string, unknown>;
    expect(Object.keys(params)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(params)).toBe(Object.prototype);
  });

  it('attack: a bracket list of 200,000 values is read (it overflowed the stack)', () => {
    const c = parsePbtxt(`dynamic_batching { preferred_batch_size: [ ${Array.from({ length: 200_000 }, () => '1').join(', ')} ] }`);
    expect(c.dynamic_batching?.preferred_batch_size).toHaveLength(200_000);
  });
});
