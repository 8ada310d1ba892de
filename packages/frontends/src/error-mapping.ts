/**
 * @module TriodeError codes to transport status codes.
 * Triton: server/src/http_server.cc HttpCodeFromError, server/src/grpc/grpc_utils.cc
 */
import { TriodeError, type ErrorCode, type Logger } from '@triode/core';

/** HTTP status for each error code (Triton's HttpCodeFromError). */
export const HTTP_STATUS: Record<ErrorCode, 400 | 403 | 404 | 500 | 501 | 503> = {
  UNKNOWN: 400,
  INTERNAL: 500,
  NOT_FOUND: 404,
  INVALID_ARG: 400,
  UNAVAILABLE: 503,
  UNSUPPORTED: 501,
  ALREADY_EXISTS: 400,
  CANCELLED: 400,
};

/** The most characters of an error message a client gets, over HTTP and gRPC alike. */
export const MAX_CLIENT_MESSAGE_CHARS = 1024;

/**
 * An absolute file path (POSIX, or Windows with a drive letter, or a file URL), up to a quote, space
 * or separator; it may follow a colon (onnxruntime writes `...failed:/onnxruntime_src/...`), but a
 * `//` after a colon is a URL's, not a path.
 */
const ABSOLUTE_PATH = /(?<=^|[\s'"`(=[:])(?:file:\/\/)?(?:[A-Za-z]:\\|\/(?!\/))(?:[^\s'"`:,;()[\]{}<>\\/]+[\\/])+([^\s'"`:,;()[\]{}<>\\/]*)/g;

/**
 * What a client is told of an error, over HTTP and gRPC alike: what went wrong, not what is
 * inside. Only the first line (no stack traces), absolute paths cut to their file name, at most
 * MAX_CLIENT_MESSAGE_CHARS characters, control characters escaped. The whole error goes to the log.
 */
export function clientMessage(e: TriodeError): string {
  let s = e.message.split('\n', 1)[0]!.replace(ABSOLUTE_PATH, (_, base: string) => `.../${base}`);
  // eslint-disable-next-line no-control-regex
  s = s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return s.length > MAX_CLIENT_MESSAGE_CHARS ? `${s.slice(0, MAX_CLIENT_MESSAGE_CHARS)}...` : s;
}

/** What a client is told of an error that is not a TriodeError (a bug, a library's exception). */
export const UNEXPECTED_ERROR_MESSAGE = 'Internal error while handling the request: the details are in the server log';

/**
 * The HTTP status and `{"error": ...}` body for anything thrown. Only a TriodeError's message
 * reaches the client: anything else (whose message may hold stack fragments, absolute paths or
 * internals) becomes INTERNAL with a fixed message, and its detail goes to `logger`.
 */
export function httpError(err: unknown, logger?: Logger): { status: 400 | 403 | 404 | 500 | 501 | 503; body: string } {
  let e: TriodeError;
  if (err instanceof TriodeError) {
    e = err;
  } else {
    logger?.error(`unexpected error in the HTTP frontend: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    e = new TriodeError('INTERNAL', UNEXPECTED_ERROR_MESSAGE);
  }
  const message = clientMessage(e);
  if (logger && message !== e.message) logger.verbose(1, `HTTP request failed (${e.code}): ${e.message}`);
  return { status: HTTP_STATUS[e.code], body: JSON.stringify({ error: message }) };
}
