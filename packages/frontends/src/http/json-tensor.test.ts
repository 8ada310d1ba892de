import { describe, expect, it } from 'vitest';
import { serializeBytesTensor } from '@triode/core';
import { jsonToTensorData, tensorDataToJson } from './json-tensor.js';

describe('tensors written as Triton writes them (rapidjson)', () => {
  it('floats: an integral value with .0, -0.0 keeps its sign, exponents without +, NaN and infinities bare', () => {
    // rapidjson 1.1 (Triton's writer, kWriteNanAndInfFlag) wrote these for the same values.
    const fp32 = Float32Array.of(1, -0, 0.5, 1e30, 1e-7, 100, Number.NaN, Number.NEGATIVE_INFINITY);
    expect(tensorDataToJson(fp32, 'FP32')).toBe('[1.0,-0.0,0.5,1.0000000150474662e30,1.0000000116860974e-7,100.0,NaN,-Infinity]');
    expect(tensorDataToJson(Float64Array.of(1e21, 123456789012345680000, -2.5e-300, 0), 'FP64')).toBe('[1e21,123456789012345680000.0,-2.5e-300,0.0]');
    // FP16 as numbers (Triode's difference: Triton refuses FP16 in JSON): the same writer.
    expect(tensorDataToJson(Uint16Array.of(0x3c00, 0x8000, 0x3555), 'FP16')).toBe('[1.0,-0.0,0.333251953125]');
  });

  it('a large float tensor is written the same, piece by piece', () => {
    const a = Float32Array.from({ length: 40_000 }, (_, i) => (i % 2 ? i : -0));
    const text = tensorDataToJson(a, 'FP32');
    expect(text.startsWith('[-0.0,1.0,-0.0,3.0,')).toBe(true);
    expect(text.endsWith(',-0.0,39999.0]')).toBe(true);
    expect(text.split(',')).toHaveLength(40_000);
  });

  it('BYTES: control characters escaped as JSON.stringify escapes them (lower-case hex: a difference from rapidjson, README)', () => {
    const t = serializeBytesTensor([Buffer.from('a\u001fb\n'), Buffer.from('\\u001f')]);
    expect(tensorDataToJson(t, 'BYTES')).toBe('["a\\u001fb\\n","\\\\u001f"]');
  });

  it('integers are written exactly', () => {
    expect(tensorDataToJson(BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n), 'INT64')).toBe('[-9223372036854775808,9223372036854775807]');
    expect(tensorDataToJson(Int32Array.of(0, -1), 'INT32')).toBe('[0,-1]');
  });

  it('integers: small arrays (joined in a loop) and large ones (joined natively) read the same as join, every integer type', () => {
    for (const n of [0, 1, 16, 1024, 1025, 5000]) {
      const ints = Array.from({ length: n }, (_, i) => (i % 11) - 5);
      const arrays = [Int8Array.from(ints), Int16Array.from(ints), Int32Array.from(ints), Uint8Array.from(ints, Math.abs), Uint16Array.from(ints, Math.abs),
        Uint32Array.from(ints, (x) => x + 2 ** 32 - 6), BigInt64Array.from(ints, (x) => BigInt(x) * 2n ** 60n), BigUint64Array.from(ints, (x) => BigInt(x + 5) * 2n ** 60n)];
      const types = ['INT8', 'INT16', 'INT32', 'UINT8', 'UINT16', 'UINT32', 'INT64', 'UINT64'] as const;
      arrays.forEach((a, k) => expect(tensorDataToJson(a, types[k]!)).toBe(`[${a.join(',')}]`));
    }
  });
});

describe('jsonToTensorData: a flat array of numbers in one loop, the rest through the general walk', () => {
  const msgOf = (f: () => unknown) => { try { f(); return 'no error'; } catch (e) { return (e as Error).message; } };
  it('a flat array gives what its nested form gives, for every numeric type', () => {
    for (const dt of ['INT8', 'INT16', 'INT32', 'UINT8', 'UINT16', 'UINT32', 'FP32', 'FP64'] as const) {
      const flat = jsonToTensorData([1, 2, 3, 4], dt, 4, 'x');
      expect(flat).toEqual(jsonToTensorData([[1, 2], [3, 4]], dt, 4, 'x'));
      expect(Array.from(flat as Int32Array)).toEqual([1, 2, 3, 4]);
    }
    expect(Array.from(jsonToTensorData([-0, 0.5, NaN, 1e300], 'FP64', 4, 'x') as Float64Array)).toEqual([-0, 0.5, NaN, 1e300]);
    expect(Array.from(jsonToTensorData([1, 123456789012345678901234567890n], 'FP64', 2, 'x') as Float64Array)).toEqual([1, 1.2345678901234568e29]);
  });
  it('a value a flat array may not hold is refused with the element named, as before', () => {
    expect(msgOf(() => jsonToTensorData([1, 2, 'x', 4], 'INT32', 4, 'in'))).toBe("Unable to parse 'data': input 'in' element 2 is not a number");
    expect(msgOf(() => jsonToTensorData([1, 3e9], 'INT32', 2, 'in'))).toBe("Unable to parse 'data': input 'in' element 1 is not an integer of type INT32");
    expect(msgOf(() => jsonToTensorData([1, 1.5], 'UINT8', 2, 'in'))).toBe("Unable to parse 'data': input 'in' element 1 is not an integer of type UINT8");
    expect(msgOf(() => jsonToTensorData([1, 5n], 'INT32', 2, 'in'))).toBe("Unable to parse 'data': input 'in' element 1 is not an integer of type INT32");
    expect(msgOf(() => jsonToTensorData([1, null], 'FP32', 2, 'in'))).toBe("Unable to parse 'data': input 'in' element 1 is not a number");
    // As many values as elements, one of them an array: the count is what is wrong.
    expect(msgOf(() => jsonToTensorData([1, [2, 3]], 'INT32', 2, 'in'))).toBe("Unable to parse 'data': Shape does not match true shape of 'data' field for input 'in': expected 2 elements, got 3");
    expect(msgOf(() => jsonToTensorData([1, 2, 3], 'INT32', 2, 'in'))).toBe("Unable to parse 'data': Shape does not match true shape of 'data' field for input 'in': expected 2 elements, got 3");
  });
});

describe('jsonToTensorData: FP16 and BF16', () => {
  it('are refused with Triton\'s text, the input name unquoted (server src/http_server.cc ReadDataFromJson)', () => {
    for (const datatype of ['FP16', 'BF16'] as const) {
      expect(() => jsonToTensorData([1], datatype, 1, 'IN'))
        .toThrow(new RegExp(`^receiving ${datatype} data via JSON is not supported\\. Please use the binary data format for input IN$`));
    }
  });
});
