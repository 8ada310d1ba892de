/** @module Time, injectable so scheduling tests are exact. */

/** A source of time and timers. */
export interface Clock {
  /**
   * Monotonic time in nanoseconds (a float; microsecond precision is enough). The real clock's is
   * CLOCK_MONOTONIC (see monotonicNs): trace timestamps are these values.
   */
  nowNs(): number;
  /** Wall-clock time in milliseconds since the epoch. */
  epochMs(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The longest delay a Node timer holds (ms): past it, Node fires after 1 ms (with a warning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A delay as a timer can hold it: a longer one (a config's max_sequence_idle_microseconds of a
 * month, a load timeout of years) fires at MAX_TIMER_MS instead of at once; a caller whose
 * deadline has not come then arms again (the wake timers do).
 */
export const timerMs = (ms: number): number => Math.min(ms, MAX_TIMER_MS);

/**
 * Where `performance.now()` starts on the process's monotonic clock (`process.hrtime`, which is
 * CLOCK_MONOTONIC on Linux: time since boot, the same in every process of a host), in ns. Both
 * read the same clock (libuv's uv_hrtime), so the difference is fixed; it is taken from the
 * narrowest of a few brackets of a `process.hrtime.bigint()` between two `performance.now()`s
 * (within about a microsecond).
 */
const MONOTONIC_ORIGIN_NS = ((): number => {
  let best = Number.POSITIVE_INFINITY;
  let origin = 0;
  for (let i = 0; i < 8; i++) {
    const before = performance.now();
    const hr = process.hrtime.bigint();
    const after = performance.now();
    if (after - before < best) {
      best = after - before;
      origin = Number(hr) - ((before + after) / 2) * 1e6;
    }
  }
  return origin;
})();

/**
 * Now on CLOCK_MONOTONIC (ns since boot on Linux), as `Number(process.hrtime.bigint())` reads it
 * but without a BigInt per call. Triton stamps its traces with std::chrono::steady_clock, the
 * same clock (core src/infer_trace.h InferenceTrace::ReportNow, server src/tracer.h
 * TraceManager::CaptureTimestamp), so trace timestamps of a gateway and of its workers on one
 * host compare, and are the kind of values Triton writes. Across hosts they do not compare.
 */
export const monotonicNs = (): number => performance.now() * 1e6 + MONOTONIC_ORIGIN_NS;

/** The real clock. */
export const systemClock: Clock = {
  nowNs: monotonicNs,
  epochMs: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, timerMs(ms)),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/**
 * Waits for `work` to settle, or `ms` at most; never rejects. For shutdown steps that must not
 * hold a process up (a farewell to a Redis that is gone, requests still in flight).
 * @returns true when `work` settled in time.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      work.then(() => true, () => true),
      new Promise<boolean>((r) => { timer = setTimeout(() => r(false), timerMs(ms)); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Settles as `work` does, or rejects with `signal.reason` as soon as `signal` aborts. What `work`
 * resolves to after that is handed to `release` (a model or an instance made too late is freed,
 * not leaked).
 */
export function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined, release?: (late: T) => unknown): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const onAbort = (): void => {
      if (done) return;
      done = true;
      reject(signal.reason);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    work.then((value) => {
      signal.removeEventListener('abort', onAbort);
      if (!done) {
        done = true;
        resolve(value);
      } else if (release) {
        void Promise.resolve().then(() => release(value)).catch(() => undefined);
      }
    }, (err: unknown) => {
      signal.removeEventListener('abort', onAbort);
      if (!done) {
        done = true;
        reject(err);
      }
    });
  });
}
