import { describe, expect, it } from 'vitest';
import { decodeInferResponse, HttpClient } from './http-client.js';
import { parseJson, stringifyJson, markNonFinite } from './json-non-finite.js';

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
