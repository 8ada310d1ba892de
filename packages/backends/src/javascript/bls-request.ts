/**
 * @module A BLS call's `correlationId`, `flags` and `timeout` (Triton: python_backend's
 * `pb_utils.InferenceRequest(correlation_id=, flags=, timeout=)`, which request_executor.cc sets
 * with TRITONSERVER_InferenceRequestSetCorrelationId(String), SetFlags and
 * SetTimeoutMicroseconds), checked and turned into the request parameters the core acts on.
 */
import { REQUEST_FLAG_SEQUENCE_END, REQUEST_FLAG_SEQUENCE_START, echo, type ParameterValue } from '@triode/core';

const MAX_UINT64 = 2n ** 64n - 1n;
const ALL_FLAGS = REQUEST_FLAG_SEQUENCE_START | REQUEST_FLAG_SEQUENCE_END;

/** A value as a message quotes it (a bigint with its `n`, a string in quotes). */
const shown = (v: unknown): string => echo(typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? JSON.stringify(v) : String(v), 64);

/** A uint64 given exactly: a bigint in range, or a safe-integer number. */
const isExactUint64 = (v: unknown): boolean =>
  (typeof v === 'bigint' && v >= 0n && v <= MAX_UINT64) || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);

/** Each option, and the parameters that say the same thing (one of the two ways, not both). */
const SAME_AS: readonly (readonly [option: string, parameters: readonly string[]])[] = [
  ['correlationId', ['sequence_id']],
  ['flags', ['sequence_start', 'sequence_end']],
  ['timeout', ['timeout']],
];

/**
 * Why a BLS request's `correlationId`, `flags` or `timeout` is refused (undefined when they are
 * fine): a correlation id that is neither a uint64 given exactly (a bigint, or a number up to
 * 2^53 - 1) nor a string, flags other than the sequence start and end bits, a timeout that is not
 * a uint64, or an option set again by its parameter (`sequence_id`, `sequence_start` /
 * `sequence_end`, `timeout`).
 * @param r the request, already known to be an object whose `parameters` (if any) is an object
 */
export function blsControlsProblem(r: Record<string, unknown>): string | undefined {
  const { correlationId: id, flags, timeout } = r;
  if (id !== undefined && typeof id !== 'string' && !isExactUint64(id)) {
    const inexact = typeof id === 'number' && Number.isInteger(id) && id > 0;
    return `'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got ${shown(id)}${inexact ? ': pass a bigint to keep it exact' : ''}`;
  }
  if (flags !== undefined && !(typeof flags === 'number' && Number.isInteger(flags) && flags >= 0 && (flags & ~ALL_FLAGS) === 0)) {
    return `'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got ${shown(flags)}`;
  }
  if (timeout !== undefined && !isExactUint64(timeout)) {
    return `'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got ${shown(timeout)}`;
  }
  const params = (r['parameters'] ?? {}) as Record<string, unknown>;
  for (const [option, keys] of SAME_AS) {
    if (r[option] === undefined) continue;
    const twice = keys.find((k) => Object.hasOwn(params, k) && params[k] !== undefined);
    if (twice !== undefined) return `'${option}' and parameter '${twice}' both set the request's ${option === 'flags' ? 'sequence flags' : option === 'timeout' ? 'timeout' : 'correlation id'}: set one`;
  }
  return undefined;
}

/**
 * The parameters a BLS request reaches the server with: its own, plus its checked (blsControlsProblem)
 * `correlationId`, `flags` and `timeout` as the `sequence_id`, `sequence_start` / `sequence_end` and
 * `timeout` a client would send, so that the sequence batcher, the queue policy and the callee's
 * `Request` fields see them. A correlation id of 0, flags of 0 or a timeout of 0 set nothing, as
 * in Triton, where they are the defaults.
 */
export function blsParameters(r: { parameters?: Record<string, ParameterValue>; correlationId?: bigint | number | string; flags?: number; timeout?: bigint | number }): Record<string, ParameterValue> {
  const { correlationId: id, flags, timeout } = r;
  const own = r.parameters ?? {};
  if (id === undefined && flags === undefined && timeout === undefined) return own;
  const params = { ...own };
  if (id !== undefined && id !== 0 && id !== 0n && id !== '') params['sequence_id'] = id;
  if (flags !== undefined && (flags & REQUEST_FLAG_SEQUENCE_START) !== 0) params['sequence_start'] = true;
  if (flags !== undefined && (flags & REQUEST_FLAG_SEQUENCE_END) !== 0) params['sequence_end'] = true;
  if (timeout !== undefined && timeout !== 0 && timeout !== 0n) params['timeout'] = timeout;
  return params;
}
