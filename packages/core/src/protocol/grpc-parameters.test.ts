import { describe, expect, it } from 'vitest';
import { inferParameter, parameterValue } from './grpc-parameters.js';

describe('inferParameter', () => {
  it('writes whole numbers within int64 as int64, and beyond it as double (1e308 went out as int64 0)', () => {
    expect(inferParameter(5)).toEqual({ int64_param: 5 });
    expect(inferParameter(2 ** 62)).toEqual({ int64_param: 2 ** 62 });
    expect(inferParameter(-(2 ** 63))).toEqual({ int64_param: -(2 ** 63) });
    expect(inferParameter(2 ** 63)).toEqual({ double_param: 2 ** 63 });
    expect(inferParameter(1e308)).toEqual({ double_param: 1e308 });
    expect(inferParameter(-1e300)).toEqual({ double_param: -1e300 });
    expect(inferParameter(1.5)).toEqual({ double_param: 1.5 });
    expect(inferParameter(Number.POSITIVE_INFINITY)).toEqual({ double_param: Number.POSITIVE_INFINITY });
  });

  it('keeps bigints exact: int64 up to 2^63-1, uint64 beyond', () => {
    expect(inferParameter(2n ** 63n - 1n)).toEqual({ int64_param: '9223372036854775807' });
    expect(inferParameter(2n ** 63n)).toEqual({ uint64_param: '9223372036854775808' });
  });

  it('reads back what it writes', () => {
    for (const v of [0, 7, -3, 1.25, 1e308, true, 'x']) expect(parameterValue(inferParameter(v))).toBe(v);
  });
});
