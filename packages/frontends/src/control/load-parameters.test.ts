import { describe, expect, it } from 'vitest';
import { MAX_CONFIG_BYTES } from '@triode/core';
import { loadOptionsFrom } from './load-parameters.js';

describe('loadOptionsFrom', () => {
  it('reads a config override and file contents', () => {
    const o = loadOptionsFrom('m', { config: '{"max_batch_size":"4"}', 'file:1/model.onnx': Uint8Array.of(1, 2), 'file:1/x.txt': Buffer.from('hi').toString('base64') });
    expect(o.config).toMatchObject({ max_batch_size: 4 });
    expect(Object.keys(o.files ?? {})).toEqual(['1/model.onnx', '1/x.txt']);
  });

  it('attack: file:__proto__ is a file named __proto__, not the prototype of the files (review: the file was dropped)', () => {
    // As HTTP hands it over: JSON.parse makes '__proto__' an own key.
    const o = loadOptionsFrom('m', JSON.parse('{"config":"{}","file:__proto__":"aGVsbG8=","file:1/x":"AA=="}') as Record<string, string>);
    expect(Object.keys(o.files ?? {})).toEqual(['__proto__', '1/x']);
    expect(Buffer.from(Object.getOwnPropertyDescriptor(o.files, '__proto__')?.value as Uint8Array).toString()).toBe('hello');
    expect(Object.getPrototypeOf(o.files) === null || Object.getPrototypeOf(o.files) === Object.prototype).toBe(true);
  });

  it('attack: refuses a config over the limit before parsing it (before, 63 MB of [{},{},...] held the server at 5-7 GB for minutes)', () => {
    const huge = `{"batch_output":[${'{},'.repeat(MAX_CONFIG_BYTES / 3)}{}]}`;
    expect(() => loadOptionsFrom('m', { config: huge })).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: `failed to load 'm': the 'config' parameter is over the limit of ${MAX_CONFIG_BYTES} bytes` }));
    // Counted in bytes: 400k three-byte characters are 1.2 MB.
    expect(() => loadOptionsFrom('m', { config: `{"name":"${'€'.repeat(400_000)}"}` })).toThrow(/over the limit/);
  });
});
