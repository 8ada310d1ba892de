/**
 * @module The `grpc-timeout` header as gRPC C++ (Triton's server) reads it.
 * Triton: grpc core src/core/lib/transport/timeout_encoding.cc (ParseTimeout), call.cc (UpdateDeadline)
 */

/** The longest timer Node keeps (a longer one fires at once). */
export const MAX_TIMER_MS = 2147483647;

const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * `grpc-timeout` in ms as gRPC C++ reads it: optional spaces, digits, optional spaces, a unit
 * (H M S m u n); micro- and nanoseconds round up to whole ms, so only a value of zero is 0 (a
 * deadline that has passed as the call arrives). Undefined when absent or malformed (gRPC C++
 * then sets no deadline); Infinity past 1,000,000,000 of its unit (as gRPC C++) or past what a
 * Node timer holds (MAX_TIMER_MS, about 24.8 days): no deadline either.
 */
export function grpcTimeoutMs(v: string | string[] | undefined): number | undefined {
  const m = typeof v === 'string' ? /^ *(\d+) *([HMSmun])$/.exec(v) : null;
  if (!m) return undefined;
  const digits = m[1]!.replace(/^0+/, '');
  if (digits.length > 10) return Infinity;
  const n = Number(digits);
  if (n > 1e9) return Infinity;
  const ms = Math.ceil(n * UNIT_MS[m[2]!]!);
  return ms > MAX_TIMER_MS ? Infinity : ms;
}

/**
 * The `grpc-timeout` value to hand grpc-js for a deadline of `ms` (finite, at most MAX_TIMER_MS),
 * or undefined for none. grpc-js reads at most 8 digits (of a longer value, the last 8) and
 * computes `value * unit | 0`: a deadline past 2^31 ms wrapped, so the `3024000S` a grpc-js client
 * sends for 35 days failed DEADLINE_EXCEEDED at once, and `500u` was a 0 ms timer (review).
 */
export function grpcJsTimeout(ms: number): string {
  return ms < 1e8 ? `${ms}m` : `${Math.floor(ms / 1000)}S`;
}
