/** @module Errors. Triton: core/src/status.h, common/error.h */

/** Triton's error codes, as strings so they stay readable in JSON and Redis. */
export type ErrorCode =
  | 'UNKNOWN'
  | 'INTERNAL'
  | 'NOT_FOUND'
  | 'INVALID_ARG'
  | 'UNAVAILABLE'
  | 'UNSUPPORTED'
  | 'ALREADY_EXISTS'
  | 'CANCELLED';

/** The one error type of Triode. Transports map `code` to a status (see the gateway's error mapping). */
export class TriodeError extends Error {
  readonly code: ErrorCode;
  /**
   * Refused by the model's queue policy (its queue timeout expired): the failure Triton counts
   * with reason REJECTED. Data, so that nothing has to read the message to tell.
   */
  readonly rejected: boolean;
  /**
   * Raised by a model instance that can run nothing more (its GPU was lost): the core fails the
   * batch with it and marks the model version not ready until the model is loaded again. Data,
   * so that nothing has to read the message to tell.
   */
  readonly instanceLost: boolean;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; rejected?: boolean; instanceLost?: boolean }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'TriodeError';
    this.code = code;
    this.rejected = options?.rejected === true;
    this.instanceLost = options?.instanceLost === true;
  }

  /** Wraps anything thrown into a TriodeError, keeping TriodeErrors as they are. */
  static from(err: unknown, code: ErrorCode = 'INTERNAL'): TriodeError {
    if (err instanceof TriodeError) return err;
    if (err instanceof Error) return new TriodeError(code, err.message, { cause: err });
    return new TriodeError(code, thrownText(err));
  }
}

/** Errors whose wording matches Triton's, because clients and Triton's tests match on it. */
export const Errors = {
  unknownModel: (name: string, version?: string | number) =>
    new TriodeError(
      'NOT_FOUND',
      version === undefined || version === '' || version === -1
        ? `Request for unknown model: '${echo(name)}' is not found`
        : `Request for unknown model: '${echo(name)}' version ${echo(version)} is not found`,
    ),
  /**
   * A model none of whose versions is ready (no `version`: NOT_FOUND "... has no available
   * versions"), or a version that is not ready (UNAVAILABLE "... version N is not at ready state"),
   * in Triton's words and codes; Triode adds why after them when it knows (a failed load, a lost
   * device). Triton: core/src/model_lifecycle.cc ModelLifeCycle::GetModel, ModelRepositoryManager::GetModel
   */
  modelNotReady: (name: string, version?: string | number, reason?: string) =>
    version === undefined || version === ''
      ? new TriodeError('NOT_FOUND', `Request for unknown model: '${echo(name)}' has no available versions${reason ? `: ${reason}` : ''}`)
      : new TriodeError('UNAVAILABLE', `Request for unknown model: '${echo(name)}' version ${echo(version)} is not at ready state${reason ? `: ${reason}` : ''}`),
  /** `details`: what Triton's GetModelVersionFromString adds after it (`stol`, what std::stol threw). */
  badVersion: (version: string, details?: string) =>
    new TriodeError('INVALID_ARG', `failed to get model version from specified version string '${echo(version)}'${details === undefined ? '' : ` (details: ${details}), version should be an integral value > 0`}`),
  /** A version std::stol reads as negative (Triton's GetModelVersionFromString; its space before the comma kept). */
  negativeVersion: (version: string) =>
    new TriodeError('INVALID_ARG', `invalid model version specified '${echo(version)}' , version should be an integral value > 0`),
  invalidArg: (message: string) => new TriodeError('INVALID_ARG', message),
  internal: (message: string, cause?: unknown) => new TriodeError('INTERNAL', message, { cause }),
  unavailable: (message: string) => new TriodeError('UNAVAILABLE', message),
  unsupported: (message: string) => new TriodeError('UNSUPPORTED', message),
  /** A single-answer infer request (HTTP /infer, gRPC ModelInfer) to a decoupled model. */
  decoupledInfer: (name: string) =>
    new TriodeError('UNSUPPORTED', `model '${name}' is decoupled (0..N responses per request): use a streaming endpoint (gRPC ModelStreamInfer, HTTP generate_stream)`),
  /** A request whose client went away (gRPC call cancelled) before it ran. */
  cancelled: (what = 'request') => new TriodeError('CANCELLED', `${what} was cancelled by the client before it ran`),
  /**
   * Statistics asked of a model with no ready version (or unknown), or of a version that is not
   * ready: INVALID_ARG in Triton's words (TRITONSERVER_ServerModelStatistics), both backplanes.
   */
  statsModelNotAvailable: (name: string) => new TriodeError('INVALID_ARG', `requested model '${echo(name)}' is not available`),
  statsVersionNotAvailable: (name: string) => new TriodeError('INVALID_ARG', `requested model version is not available for model '${echo(name)}'`),
  /** A readiness, metadata or statistics question while the server exits (Triton's ModelIsReady, ModelReadyVersions). */
  serverNotReady: () => new TriodeError('UNAVAILABLE', 'Server not ready'),
  /** A liveness or readiness question while the server exits (Triton's IsLive, IsReady). */
  serverExiting: () => new TriodeError('UNAVAILABLE', 'Server exiting'),
  serverStopping: () => new TriodeError('UNAVAILABLE', 'Server is stopping, no new inference requests are accepted'),
  /**
   * A scheduler stopped by a server shutdown refuses a request (Triton's text): any request for
   * the dynamic batcher, one that starts a sequence for the sequence batcher.
   */
  schedulerStopping: () => new TriodeError('UNAVAILABLE', 'Server is stopping, scheduler for model has stopped accepting new inference requests'),
  /** A request whose queue timeout expired (Triton's wording; failure reason REJECTED). */
  requestTimeout: () => new TriodeError('UNAVAILABLE', 'Request timeout expired', { rejected: true }),
  /** A model instance that can run nothing more (its device was lost): see TriodeError.instanceLost. */
  instanceLost: (message: string) => new TriodeError('UNAVAILABLE', message, { instanceLost: true }),
} as const;

/** The most characters of client input an error message repeats (issue #14: no unbounded echoes). */
export const MAX_ECHO_CHARS = 256;

/**
 * Client input as an error message may repeat it: at most `max` characters, cut with "...", and
 * control characters (NUL, newlines, escapes) shown as `\uXXXX` so a message stays one clean line.
 */
export function echo(input: unknown, max: number = MAX_ECHO_CHARS): string {
  let s = typeof input === 'string' ? input : String(input);
  const cut = s.length > max;
  if (cut) s = s.slice(0, max);
  // eslint-disable-next-line no-control-regex
  s = s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return cut ? `${s}...` : s;
}

const ERROR_CODES: ReadonlySet<string> = new Set<ErrorCode>(['UNKNOWN', 'INTERNAL', 'NOT_FOUND', 'INVALID_ARG', 'UNAVAILABLE', 'UNSUPPORTED', 'ALREADY_EXISTS', 'CANCELLED']);

/** True if `code` is one of Triton's error codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && ERROR_CODES.has(code);
}

/**
 * An error as it crosses a thread or process boundary: plain data, so the code survives a
 * structured clone (an Error keeps only its message there). Made with `toWireError`, turned back
 * with `fromWireError`, once per crossing.
 */
export interface WireError {
  code: ErrorCode;
  message: string;
  /** TriodeError.rejected, when set. */
  rejected?: true;
  /** TriodeError.instanceLost, when set. */
  instanceLost?: true;
}

/** Anything thrown, as a WireError (`code` for what is not a TriodeError nor carries a known code). */
export function toWireError(err: unknown, code: ErrorCode = 'INTERNAL'): WireError {
  if (err instanceof TriodeError) {
    return { code: err.code, message: err.message, ...(err.rejected ? { rejected: true as const } : {}), ...(err.instanceLost ? { instanceLost: true as const } : {}) };
  }
  let carried: unknown;
  try {
    carried = err !== null && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  } catch {
    carried = undefined; // a getter that throws
  }
  return { code: isErrorCode(carried) ? carried : code, message: thrownText(err) };
}

/**
 * What was thrown, as text, without calling into it in a way that can throw again (model code
 * may throw anything: an object without a prototype, one whose toString throws): an Error's
 * message, a string as it is, an object's own `message` string, else its JSON, else its type.
 */
export function thrownText(err: unknown): string {
  try {
    if (err instanceof Error) return err.message;
    if (typeof err === 'string') return err;
    if (typeof err === 'object' && err !== null) {
      const m = (err as { message?: unknown }).message;
      if (typeof m === 'string') return m;
      return JSON.stringify(err) ?? Object.prototype.toString.call(err);
    }
    return String(err);
  } catch {
    return Object.prototype.toString.call(err);
  }
}

/** The TriodeError a WireError stands for (an unknown code reads as INTERNAL). */
export function fromWireError(w: { code?: unknown; message?: unknown; rejected?: unknown; instanceLost?: unknown }): TriodeError {
  // A message that is not text (from a broken peer) is shown as what it is, never converted by
  // calling into it: an object's own toString may throw.
  const m = w.message;
  const message = typeof m === 'string' ? m : typeof m === 'number' || typeof m === 'boolean' || typeof m === 'bigint' ? String(m) : `(malformed error message: ${m === null ? 'null' : typeof m})`;
  return new TriodeError(isErrorCode(w.code) ? w.code : 'INTERNAL', message, {
    rejected: w.rejected === true, instanceLost: w.instanceLost === true,
  });
}
