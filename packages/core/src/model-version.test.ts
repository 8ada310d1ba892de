import { describe, expect, it } from 'vitest';
import { parseModelVersion } from './model-version.js';

const stol = (v: string) => `failed to get model version from specified version string '${v}' (details: stol), version should be an integral value > 0`;

describe('parseModelVersion() reads a version as std::stol (Triton: GetModelVersionFromString)', () => {
  it('"" is the policy\'s choice; white space, a sign, leading zeros and what follows the digits are taken', () => {
    expect(parseModelVersion(undefined)).toBeUndefined();
    expect(parseModelVersion('')).toBeUndefined();
    for (const v of ['2', ' 2', '\t\n\v\f\r2', '+2', '02', '0000000000000000000000002', '2abc', '2 3', '2.9', '2\u00003']) expect(parseModelVersion(v), JSON.stringify(v)).toBe(2);
    expect(parseModelVersion('-0')).toBe(0);
    expect(parseModelVersion('0')).toBe(0);
  });

  it('past 2^53 a bigint (no model has it), up to int64\'s largest', () => {
    expect(parseModelVersion('9007199254740991')).toBe(9007199254740991);
    expect(parseModelVersion('9007199254740992')).toBe(9007199254740992n);
    expect(parseModelVersion(' +09223372036854775807x')).toBe(9223372036854775807n);
  });

  it('no digits, or past int64 either way: "(details: stol)"; negative: "invalid model version specified"', () => {
    for (const v of ['abc', '-', '+', ' ', 'x1', '\u00001', '- 1', '9223372036854775808', '-9223372036854775809', `1${'0'.repeat(19)}`]) {
      expect(() => parseModelVersion(v), JSON.stringify(v)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: stol(v.replace('\u0000', '\\u0000')) }));
    }
    for (const v of ['-1', ' -2abc', '-9223372036854775808']) {
      expect(() => parseModelVersion(v)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: `invalid model version specified '${v}' , version should be an integral value > 0` }));
    }
  });

  it('a huge string is refused at once, its echo cut', () => {
    const t = performance.now();
    expect(() => parseModelVersion('7'.repeat(4 << 20))).toThrow(/^failed to get model version from specified version string '7{256}\.\.\.' \(details: stol\)/);
    expect(() => parseModelVersion(' '.repeat(4 << 20))).toThrow(/details: stol/);
    expect(() => parseModelVersion(`${'0'.repeat(4 << 20)}1`)).not.toThrow();
    expect(performance.now() - t).toBeLessThan(1000);
  });
});
