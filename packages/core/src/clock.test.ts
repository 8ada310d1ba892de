import { describe, expect, it } from 'vitest';
import { settleWithin } from './clock.js';

describe('settleWithin', () => {
  it('is true when the work settles in time, resolved or rejected', async () => {
    expect(await settleWithin(Promise.resolve(1), 1000)).toBe(true);
    expect(await settleWithin(Promise.reject(new Error('gone')), 1000)).toBe(true);
  });

  it('is false, without waiting longer, when the work never settles', async () => {
    const t = Date.now();
    expect(await settleWithin(new Promise(() => undefined), 50)).toBe(false);
    expect(Date.now() - t).toBeLessThan(1000);
  });
});
