import { describe, expect, it } from 'vitest';
import { messageType } from '@triode/core';
import { MAX_LOAD_PARAMETERS, countLoadParameters } from './load-request-scan.js';

const encode = (m: object) => messageType('RepositoryModelLoadRequest').encode(messageType('RepositoryModelLoadRequest').fromObject(m)).finish();

describe('countLoadParameters', () => {
  it('counts the parameters entries of a RepositoryModelLoadRequest as encoded, other fields skipped', () => {
    const params = { config: { string_param: '{}' }, 'file:1/a': { bytes_param: Buffer.from('abc') }, 'file:1/b': { bytes_param: Buffer.alloc(300) } };
    expect(countLoadParameters(encode({ repository_name: '', model_name: 'm', parameters: params }), MAX_LOAD_PARAMETERS)).toBe(3);
    expect(countLoadParameters(encode({ model_name: 'm' }), MAX_LOAD_PARAMETERS)).toBe(0);
    expect(countLoadParameters(new Uint8Array(0), MAX_LOAD_PARAMETERS)).toBe(0);
  });

  it('stops counting past stopAfter', () => {
    const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`file:${i}`, { bytes_param: Buffer.alloc(0) }]));
    expect(countLoadParameters(encode({ model_name: 'm', parameters: many }), 10)).toBe(11);
  });

  it('is undefined for a top level that is not wire format (the decoder reports it): a cut length, a cut varint, a group', () => {
    expect(countLoadParameters(Uint8Array.of(0x1a, 0x05, 0x00), MAX_LOAD_PARAMETERS)).toBeUndefined();
    expect(countLoadParameters(Uint8Array.of(0x1a, 0xff), MAX_LOAD_PARAMETERS)).toBeUndefined();
    expect(countLoadParameters(Uint8Array.of(0x1b), MAX_LOAD_PARAMETERS)).toBeUndefined();
    expect(countLoadParameters(new Uint8Array(11).fill(0xff), MAX_LOAD_PARAMETERS)).toBeUndefined();
  });
});
