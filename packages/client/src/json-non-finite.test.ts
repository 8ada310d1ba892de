import { describe, expect, it } from 'vitest';
import { decodeInferResponse, HttpClient } from './http-client.js';
import { hasLongInteger, markInteger, markNonFinite, parseJson, stringifyJson } from './json-non-finite.js';

describe('NaN and infinities in JSON, as Triton writes and reads them', () => {
  it('reads bare NaN / Infinity / -Infinity tokens, and leaves strings that spell them alone', () => {
    expect(parseJson('{"a":[NaN,-Infinity,Infinity,1],"s":"NaN","t":["x\\"NaN",  "Infinity"]}')).toEqual({
      a: [NaN, -Infinity, Infinity, 1], s: 'NaN', t: ['x"NaN', 'Infinity'],
    });
    expect(() => parseJson('[NaNx]')).toThrow(SyntaxError);
    expect(() => parseJson('[nan]')).toThrow(SyntaxError);
  });

  it('writes marked values as bare tokens, and nothing else', () => {
    expect(stringifyJson({ data: markNonFinite([NaN, 1.5, -Infinity, Infinity]), s: 'NaN' })).toBe('{"data":[NaN,1.5,-Infinity,Infinity],"s":"NaN"}');
  });

  it('an infer response with non-finite FP32 outputs in JSON decodes to those values', () => {
    const body = Buffer.from('{"model_name":"m","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[4],"data":[NaN,-Infinity,Infinity,0.5]},{"name":"s","datatype":"BYTES","shape":[1],"data":["NaN"]}]}');
    const r = decodeInferResponse(body, undefined);
    expect(Array.from(r.data<Float32Array>('y'))).toEqual([NaN, -Infinity, Infinity, 0.5]);
    expect(r.outputs.find((o) => o.name === 's')!.shape).toEqual([1]);
  });

  it('HttpClient in JSON mode sends non-finite FP32/FP64 inputs as bare tokens (as tritonclient does)', () => {
    const c = new HttpClient('127.0.0.1:1', { binary: false });
    const { body } = c.encodeInfer({ inputs: [
      { name: 'x', datatype: 'FP32', shape: [3], data: Float32Array.from([NaN, 2, -Infinity]) },
      { name: 'y', datatype: 'FP64', shape: [1], data: Float64Array.from([Infinity]) },
    ] });
    const text = body.toString();
    expect(text).toContain('"data":[NaN,2,-Infinity]');
    expect(text).toContain('"data":[Infinity]');
    c.close();
  });
});

describe('64-bit integers in JSON', () => {
  it('exactIntegers reads integer literals past 2^53 as bigints, outside strings only', () => {
    expect(parseJson('{"a":[9007199254740993,-9223372036854775808,9007199254740991,1.2345678901234567e30,12345678901234567.5],"s":"12345678901234567890","t":["\\\\",18446744073709551615]}', { exactIntegers: true })).toEqual({
      a: [2n ** 53n + 1n, -(2n ** 63n), 2 ** 53 - 1, 1.2345678901234567e30, Number('12345678901234567.5')], s: '12345678901234567890', t: ['\\', 2n ** 64n - 1n],
    });
    expect(parseJson('[NaN,12345678901234567890]', { exactIntegers: true })).toEqual([NaN, 12345678901234567890n]);
    expect(parseJson('[12345678901234567890]')).toEqual([Number('12345678901234567890')]);
    expect(() => parseJson('[12345678901234567890-]', { exactIntegers: true })).toThrow(SyntaxError);
  });

  it('markInteger writes a bigint past 2^53 as its digits, and a safe one as a number', () => {
    expect(stringifyJson({ a: [markInteger(2n ** 63n - 1n), markInteger(-5n)], s: '1' })).toBe('{"a":[9223372036854775807,-5],"s":"1"}');
  });
});

describe('which responses take the exact-integer path', () => {
  it('doubles with 16 or more digits (FP32/FP64 outputs) do not, integer literals past 2^53 do (review: every float response took the 8-9x slower path)', () => {
    expect(hasLongInteger('{"data":[0.6749623417854309,0.32503765821456909]}')).toBe(false);
    expect(hasLongInteger('{"data":[1.2345678901234567e+30,-4.5e-1234567890123456]}')).toBe(false);
    expect(hasLongInteger('{"data":[12345678901234567.5]}')).toBe(false);
    expect(hasLongInteger('{"data":[9007199254740993]}')).toBe(true);
    expect(hasLongInteger('{"data":[-9223372036854775807]}')).toBe(true);
    expect(parseJson('{"data":[0.6749623417854309,9007199254740993]}', { exactIntegers: true })).toEqual({ data: [0.6749623417854309, 9007199254740993n] });
  });
});
