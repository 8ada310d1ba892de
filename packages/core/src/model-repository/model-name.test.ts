import { describe, expect, it } from 'vitest';
import { Errors, TriodeError, echo } from '../errors.js';
import { checkLoadModelName, checkModelName, modelNameProblem } from './model-name.js';

describe('checkModelName()', () => {
  it.each(['simple', 'ppocr_cls', 'a.b-c', 'модель', 'x'.repeat(255)])('accepts %j', (name) => {
    expect(modelNameProblem(name)).toBeUndefined();
  });

  it.each([
    ['', 'model name must not be empty'], ['.', 'relative'], ['..', 'must not contain path traversal characters'], ['../escaped', 'must not contain path traversal characters'], ['a/b', 'must not contain path traversal characters'],
    ['a\\b', 'separator'], ['a\u0000b', 'control'], ['a\nb', 'control'], ['x'.repeat(256), 'longer than 255'],
    ['é'.repeat(128), 'longer than 255'],
  ])('refuses %j with INVALID_ARG (%s)', (name, why) => {
    let err: unknown;
    try { checkModelName(name); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(TriodeError);
    expect((err as TriodeError).code).toBe('INVALID_ARG');
    expect((err as TriodeError).message).toContain(why);
    expect((err as TriodeError).message.length).toBeLessThan(400);
  });
});

describe('checkLoadModelName()', () => {
  const refusal = (name: string) => {
    try {
      checkLoadModelName(name);
    } catch (e) {
      return [(e as TriodeError).code, (e as TriodeError).message];
    }
    return undefined;
  };

  it('refuses what Triton\'s load refuses, in its words (ValidateModelName)', () => {
    expect(refusal('')).toEqual(['INVALID_ARG', 'model name must not be empty']);
    expect(refusal('   ')).toEqual(['INVALID_ARG', 'model name must not contain only whitespace characters']);
    expect(refusal('a..b')).toEqual(['INVALID_ARG', "invalid model name 'a..b', model name must not contain path traversal characters"]);
    expect(refusal('../x')).toEqual(['INVALID_ARG', "invalid model name '../x', model name must not contain path traversal characters"]);
    expect(refusal('a b')).toBeUndefined();
    expect(refusal('a.b')).toBeUndefined();
  });
});

describe('echo()', () => {
  it('keeps short input as it is', () => expect(echo('simple')).toBe('simple'));
  it('cuts long input at 256 characters with "..."', () => expect(echo('a'.repeat(600))).toBe(`${'a'.repeat(256)}...`));
  it('shows control characters escaped', () => expect(echo('a\u0000\nb')).toBe('a\\u0000\\u000ab'));
});

describe('errors that repeat a model name or version (found by the fuzz suite, seed 14 case 351)', () => {
  const long = 'a'.repeat(4000);
  it.each([
    ['unknownModel', () => Errors.unknownModel(long)],
    ['unknownModel with a version', () => Errors.unknownModel('m', long)],
    ['modelNotReady', () => Errors.modelNotReady(long, long)],
    ['badVersion', () => Errors.badVersion(long)],
  ])('%s cuts the echoed input', (_what, make) => {
    const e = make();
    expect(e.message.length).toBeLessThan(700);
    expect(e.message).toContain(`${'a'.repeat(256)}...`);
  });
});
