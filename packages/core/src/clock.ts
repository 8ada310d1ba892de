/** @module Time, injectable so scheduling tests are exact. */

/** A source of time and timers. */
export interface Clock {
  /** Monotonic time in nanoseconds (a float; microsecond precision is enough). */
  nowNs(): number;
  /** Wall-clock time in milliseconds since the epoch. */
  epochMs(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The real clock. */
export const systemClock: Clock = {
  nowNs: () => performance.now() * 1e6,
  epochMs: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};
