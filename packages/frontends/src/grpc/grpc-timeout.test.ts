import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS, grpcJsTimeout, grpcTimeoutMs } from './grpc-timeout.js';

describe('grpcTimeoutMs() reads grpc-timeout as gRPC C++ does', () => {
  it.each([
    ['100m', 100], ['5S', 5000], ['2M', 120_000], ['1H', 3_600_000], [' 7 m', 7],
    ['500u', 1], ['1n', 1], ['1000001n', 2], ['0n', 0], ['0S', 0], ['000000000H', 0],
    // Up to 1,000,000,000 of a unit, as gRPC C++; then at most what a timer holds.
    ['123456789m', 123_456_789], ['1000000000m', 1e9], ['1000000001m', Infinity], ['99999999H', Infinity],
    ['2147483S', 2_147_483_000], ['2147484S', Infinity], ['3024000S', Infinity],
  ])('%j is %d ms', (v, ms) => {
    expect(grpcTimeoutMs(v)).toBe(ms);
  });

  it.each([undefined, '', 'm', '5', '5x', '-5S', '5.5S', '5 S x', ['5S']])('%j is no deadline (absent or malformed)', (v) => {
    expect(grpcTimeoutMs(v)).toBeUndefined();
  });
});

describe('grpcJsTimeout() words a deadline so grpc-js reads it back exactly (at most 8 digits, value * unit below 2^31)', () => {
  // grpc-js: /(\d{1,8})\s*([HMSmun])/, then value * unit | 0.
  const asGrpcJs = (v: string): number => {
    const m = /(\d{1,8})\s*([HMSmun])/.exec(v)!;
    return (Number(m[1]) * { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }[m[2] as 'S']) | 0;
  };
  it.each([1, 99_999_999, 100_000_000, 1_234_567_890, MAX_TIMER_MS])('%d ms', (ms) => {
    const back = asGrpcJs(grpcJsTimeout(ms));
    expect(back).toBeGreaterThan(ms - 1000);
    expect(back).toBeLessThanOrEqual(ms);
  });
});
