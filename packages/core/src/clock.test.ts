import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS, monotonicNs, settleWithin, systemClock, timerMs } from './clock.js';

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

describe('monotonicNs', () => {
  it('is process.hrtime (CLOCK_MONOTONIC: ns since boot, one clock for every process of a host), not performance.now() since this process began', () => {
    const before = Number(process.hrtime.bigint());
    const now = systemClock.nowNs();
    const after = Number(process.hrtime.bigint());
    expect(systemClock.nowNs).toBe(monotonicNs);
    // Within a millisecond of the bracket (the origin is taken to about a microsecond).
    expect(now).toBeGreaterThan(before - 1e6);
    expect(now).toBeLessThan(after + 1e6);
    // performance.now() alone counts from this process's start: far below ns since boot.
    expect(now - performance.now() * 1e6).toBeGreaterThan(1e6);
  });
});
