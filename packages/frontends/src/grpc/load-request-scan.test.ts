import { describe, expect, it } from 'vitest';
import { messageType } from '@triode/core';
import { MAX_LOAD_OTHER_FIELDS, MAX_LOAD_PARAMETERS, MAX_LOAD_PARAMETER_FIELDS, loadRequestProblem } from './load-request-scan.js';

const encode = (m: object) => messageType('RepositoryModelLoadRequest').encode(messageType('RepositoryModelLoadRequest').fromObject(m)).finish();
/** A length-delimited field `n` holding `body`. */
const field = (n: number, body: Uint8Array): Buffer => {
  const len: number[] = [];
  for (let v = body.length; ; v = Math.floor(v / 128)) {
    if (v < 128) { len.push(v); break; }
    len.push((v & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from([(n << 3) | 2, ...len]), body]);
};
const times = (k: number, b: Uint8Array) => Buffer.concat(Array.from({ length: k }, () => b));
const TOO_MANY_PARAMETERS = `a RepositoryModelLoad message with more than ${MAX_LOAD_PARAMETERS} parameters is over the limit of a 'config' and ${MAX_LOAD_PARAMETERS - 1} 'file:' overrides a load may carry`;

describe('loadRequestProblem', () => {
  it('passes a load request as encoded, whatever its files weigh', () => {
    const params = { config: { string_param: '{}' }, 'file:1/a': { bytes_param: Buffer.from('abc') }, 'file:1/b': { bytes_param: Buffer.alloc(300) } };
    expect(loadRequestProblem(encode({ repository_name: '', model_name: 'm', parameters: params }))).toBeUndefined();
    expect(loadRequestProblem(encode({ model_name: 'm' }))).toBeUndefined();
    expect(loadRequestProblem(new Uint8Array(0))).toBeUndefined();
    const files = Object.fromEntries(Array.from({ length: MAX_LOAD_PARAMETERS }, (_, i) => [`file:${i}`, { bytes_param: Buffer.alloc(0) }]));
    expect(loadRequestProblem(encode({ model_name: 'm', parameters: files }))).toBeUndefined();
  });

  it(`refuses more than ${MAX_LOAD_PARAMETERS} parameters`, () => {
    const many = Object.fromEntries(Array.from({ length: MAX_LOAD_PARAMETERS + 1 }, (_, i) => [`file:${i}`, { bytes_param: Buffer.alloc(0) }]));
    expect(loadRequestProblem(encode({ model_name: 'm', parameters: many }))).toBe(TOO_MANY_PARAMETERS);
  });

  it('attack: refuses a field repeated past what a load request holds, at the top or inside a parameter (review: 30M model_name fields, 90 MB, held the event loop 380 ms)', () => {
    const name = field(2, Buffer.from('a'));
    expect(loadRequestProblem(times(MAX_LOAD_OTHER_FIELDS, name))).toBeUndefined();
    expect(loadRequestProblem(times(100_000, name))).toBe(`a RepositoryModelLoad message with more than ${MAX_LOAD_OTHER_FIELDS} fields besides its parameters is not a load request`);
    const nested = `a RepositoryModelLoad parameter with more than ${MAX_LOAD_PARAMETER_FIELDS} fields is not a load parameter`;
    // An entry of 100,000 keys; an entry whose value repeats its oneof 100,000 times.
    expect(loadRequestProblem(field(3, times(100_000, field(1, Buffer.from('k')))))).toBe(nested);
    expect(loadRequestProblem(field(3, Buffer.concat([field(1, Buffer.from('config')), field(2, times(100_000, field(3, Buffer.from('x'))))])))).toBe(nested);
    expect(loadRequestProblem(field(3, Buffer.concat([field(1, Buffer.from('config')), field(2, times(MAX_LOAD_PARAMETER_FIELDS, field(3, Buffer.from('x'))))])))).toBeUndefined();
  });

  it('refuses bytes that are not wire format as the decoder does (throws): a cut length, a cut varint, a group never ended or ended under another number', () => {
    const decode = (b: Uint8Array) => messageType('RepositoryModelLoadRequest').decode(b);
    for (const b of [Uint8Array.of(0x1a, 0x05, 0x00), Uint8Array.of(0x1a, 0xff), Uint8Array.of(0x1b), new Uint8Array(11).fill(0xff), field(3, Uint8Array.of(0x0a, 0x09))]) {
      expect(() => loadRequestProblem(b)).toThrow('malformed RepositoryModelLoadRequest');
      expect(() => decode(b)).toThrow();
    }
    // A group started as field 1 and ended as field 2: protobufjs takes it (it does not check a
    // group's end); refused here, or all after it would pass unchecked.
    const mismatched = Buffer.concat([Uint8Array.of(0x0b, 0x14), times(100_000, field(2, Buffer.from('a')))]);
    expect(() => loadRequestProblem(mismatched)).toThrow('malformed RepositoryModelLoadRequest');
  });

  it('attack: a group (which the decoder skips) in front of the fields does not end the count (review: an empty group let 30M model_name fields through to the decoder)', () => {
    const name = field(2, Buffer.from('a'));
    const emptyGroup = Uint8Array.of(0x7b, 0x7c); // field 15, start and end
    expect(loadRequestProblem(Buffer.concat([emptyGroup, times(100_000, name)]))).toBe(`a RepositoryModelLoad message with more than ${MAX_LOAD_OTHER_FIELDS} fields besides its parameters is not a load request`);
    // Inside an entry too.
    expect(loadRequestProblem(field(3, Buffer.concat([emptyGroup, times(100_000, field(1, Buffer.from('k')))])))).toBe(`a RepositoryModelLoad parameter with more than ${MAX_LOAD_PARAMETER_FIELDS} fields is not a load parameter`);
    // A group counts as a field; a request with one still loads.
    expect(loadRequestProblem(Buffer.concat([emptyGroup, encode({ model_name: 'm' })]))).toBeUndefined();
    expect(messageType('RepositoryModelLoadRequest').decode(Buffer.concat([emptyGroup, encode({ model_name: 'm' })]))).toMatchObject({ model_name: 'm' });
  });
});
