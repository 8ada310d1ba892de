/** @module A clock whose time moves only when a test says so (for exact scheduling tests). */
import type { Clock } from '../clock.js';

/** A manual clock: `advance(ns)` fires due timers in deadline order. */
export function manualClock(): Clock & { advance(ns: number): void; pendingTimers(): number } {
  let now = 0;
  const timers: { at: number; fn: () => void }[] = [];
  return {
    nowNs: () => now,
    epochMs: () => 1_700_000_000_000 + now / 1e6,
    setTimeout: (fn, ms) => {
      const t = { at: now + ms * 1e6, fn };
      timers.push(t);
      return t;
    },
    clearTimeout: (h) => {
      const i = timers.indexOf(h as (typeof timers)[number]);
      if (i >= 0) timers.splice(i, 1);
    },
    advance(ns: number) {
      const target = now + ns;
      for (;;) {
        const due = timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at)[0];
        if (!due) break;
        timers.splice(timers.indexOf(due), 1);
        now = Math.max(now, due.at);
        due.fn();
      }
      now = target;
    },
    pendingTimers: () => timers.length,
  };
}
