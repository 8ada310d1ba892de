import { describe, expect, it } from 'vitest';
import { TriodeError, echo } from '../errors.js';
import { checkModelName, modelNameProblem } from './model-name.js';

describe('checkModelName()', () => {
  it.each(['simple', 'ppocr_cls', 'a.b-c', 'модель', 'x'.repeat(255)])('accepts %j', (name) => {
    expect(modelNameProblem(name)).toBeUndefined();
  });

  it.each([
    ['', 'empty'], ['.', 'relative'], ['..', 'relative'], ['../escaped', 'separator'], ['a/b', 'separator'],
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

describe('echo()', () => {
  it('keeps short input as it is', () => expect(echo('simple')).toBe('simple'));
  it('cuts long input at 256 characters with "..."', () => expect(echo('a'.repeat(600))).toBe(`${'a'.repeat(256)}...`));
  it('shows control characters escaped', () => expect(echo('a\u0000\nb')).toBe('a\\u0000\\u000ab'));
});
