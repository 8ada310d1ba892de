import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS, settleWithin, systemClock, timerMs } from './clock.js';

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

describe('systemClock timers', () => {
  it('attack: a delay past what a Node timer holds waits (MAX_TIMER_MS), not 1 ms', async () => {
    let fired = 0;
    const h = systemClock.setTimeout(() => { fired++; }, 3e12);
    await new Promise((r) => setTimeout(r, 50));
    systemClock.clearTimeout(h);
    expect(fired).toBe(0);
    expect(timerMs(3e12)).toBe(MAX_TIMER_MS);
    expect(timerMs(5)).toBe(5);
  });
});
