import { describe, expect, it } from 'vitest';
import { InferenceServerError } from './errors.js';
import { inputTensorData, toFloatBits } from './tensor-data.js';
import type { DataType, InputData } from './types.js';

const data = (datatype: DataType, d: InputData, shape = [Array.isArray(d) || ArrayBuffer.isView(d) ? (d as { length: number }).length : 0]) =>
  inputTensorData({ name: 'x', datatype, shape, data: d });

describe('inputTensorData', () => {
  it.each([
    ['INT32', new Float32Array(2)], ['FP32', new Int32Array(2)], ['INT64', new Float64Array(2)], ['UINT8', new Int8Array(2)],
    ['FP16', new Int16Array(2)], ['BOOL', new Int8Array(2)], ['BYTES', new Uint32Array(2)], ['UINT64', new BigInt64Array(2)],
  ] as const)('refuses %s data given as a %o (it was sent as its bytes, reinterpreted)', (datatype, typed) => {
    expect(() => data(datatype, typed)).toThrow(new RegExp(`input 'x': ${datatype} data cannot be a ${typed.constructor.name}`));
  });

  it('takes each datatype\'s own typed array, a Buffer as a Uint8Array', () => {
    expect(data('INT32', Int32Array.of(1, 2))).toEqual(Int32Array.of(1, 2));
    expect(data('UINT8', Buffer.from([1, 2]))).toEqual(Buffer.from([1, 2]));
    expect(data('BOOL', Uint8Array.of(1, 0))).toEqual(Uint8Array.of(1, 0));
    expect(data('FP16', Uint16Array.of(0x3c00), [1])).toEqual(Uint16Array.of(0x3c00));
    expect(data('INT64', [1n, 2n ** 62n])).toEqual(BigInt64Array.of(1n, 2n ** 62n));
    expect(data('INT64', [-2, 2 ** 53 - 1])).toEqual(BigInt64Array.of(-2n, 2n ** 53n - 1n));
    // Numbers and bigints in one array: the type admits what the code takes (review: it did not).
    const mixed: (number | bigint)[] = [1, 2n ** 60n];
    expect(data('INT64', mixed)).toEqual(BigInt64Array.of(1n, 2n ** 60n));
    expect(data('UINT64', mixed)).toEqual(BigUint64Array.of(1n, 2n ** 60n));
  });

  it('converts numbers to FP16 / BF16 bits, rounding to nearest even (they were cut to integer words)', () => {
    expect(Array.from(data('FP16', [0.5, 1.5, 2.75, -2, 65504, 65520, 2 ** -24, 2 ** -25, 1 + 2 ** -11, 1 + 3 * 2 ** -11, NaN, -Infinity]) as Uint16Array))
      .toEqual([0x3800, 0x3e00, 0x4180, 0xc000, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x3c00, 0x3c02, 0x7e00, 0xfc00]);
    expect(Array.from(data('BF16', [1, 3.14159, -0.5, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.4e38]) as Uint16Array))
      .toEqual([0x3f80, 0x4049, 0xbf00, 0x3f80, 0x3f82, 0x7f80]);
    expect(toFloatBits(-0, 5, 10)).toBe(0x8000);
  });

  it('checks a serialized BYTES buffer against the shape', () => {
    const two = Uint8Array.of(1, 0, 0, 0, 65, 1, 0, 0, 0, 66);
    expect(data('BYTES', two, [2])).toBe(two);
    expect(() => data('BYTES', two, [3])).toThrow(/2 BYTES elements for shape \[3\]/);
    expect(() => data('BYTES', Uint8Array.of(9, 0, 0, 0, 65), [1])).toThrow(/malformed BYTES serialization/);
  });

  it('refuses 64-bit integers given as numbers that are not exact', () => {
    expect(() => data('INT64', [1, 2 ** 53])).toThrow(InferenceServerError);
    expect(() => data('UINT64', [0.5])).toThrow(/element 0 \(0.5\) is not an exact integer/);
  });
});
