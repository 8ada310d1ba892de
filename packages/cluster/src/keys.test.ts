import { describe, expect, it } from 'vitest';
import { ClusterKeys } from './keys.js';

describe('ClusterKeys', () => {
  const k = new ClusterKeys('t');

  it('keeps the keys of plain model names as they were', () => {
    expect(k.requests('simple')).toBe('t:req:simple');
    expect(k.workerRequests('simple', 'w1')).toBe('t:req:simple:w:w1');
    expect(k.sequence('simple', '42')).toBe('t:seq:simple:42');
  });

  it('attack: a model name with colons cannot build another model\'s key (a worker\'s stream, a sequence)', () => {
    // Before: model 'a:w:w1' read and wrote the stream of model 'a' pinned to worker 'w1'.
    expect(k.requests('a:w:w1')).not.toBe(k.workerRequests('a', 'w1'));
    expect(k.sequence('m:x', 'y')).not.toBe(k.sequence('m', 'x:y'));
    expect(k.requests('a%3Ab')).not.toBe(k.requests('a:b'));
    const names = ['a', 'a:b', 'a%3Ab', 'a%253Ab', 'a:w:w1'];
    expect(new Set(names.map((n) => k.requests(n))).size).toBe(names.length);
  });
});
