/**
 * @module TriodeError codes to gRPC status codes, and what a client is told. Triton: server/src/grpc/grpc_utils.cc
 */
import { status, type ServiceError } from '@grpc/grpc-js';
import { TriodeError, type ErrorCode, type Logger } from '@triode/core';
import { UNEXPECTED_ERROR_MESSAGE, clientMessage } from '../error-mapping.js';

export { MAX_CLIENT_MESSAGE_CHARS, clientMessage } from '../error-mapping.js';

/** gRPC status per error code (Triton's mapping; UNSUPPORTED is UNIMPLEMENTED). */
export const GRPC_STATUS: Record<ErrorCode, status> = {
  UNKNOWN: status.UNKNOWN,
  INTERNAL: status.INTERNAL,
  NOT_FOUND: status.NOT_FOUND,
  INVALID_ARG: status.INVALID_ARGUMENT,
  UNAVAILABLE: status.UNAVAILABLE,
  UNSUPPORTED: status.UNIMPLEMENTED,
  ALREADY_EXISTS: status.ALREADY_EXISTS,
  CANCELLED: status.CANCELLED,
};

/** `grpc-message` encoding: printable ASCII except '%' as is, everything else as %XX of its UTF-8 bytes. */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const b of Buffer.from(message, 'utf8')) {
    out += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * The status object grpc-js sends for anything thrown. What the client does not get (a stack, a
 * path, an error that is not a TriodeError) goes to `logger`.
 */
export function grpcError(err: unknown, logger?: Logger): Partial<ServiceError> & { code: status; details: string } {
  // As over HTTP: only a TriodeError's message reaches the client; anything else (a bug, a
  // library's exception: its text may hold internals or paths) is INTERNAL with a fixed message.
  if (!(err instanceof TriodeError)) {
    logger?.error(`unexpected error in the gRPC frontend: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    return { code: GRPC_STATUS.INTERNAL, details: UNEXPECTED_ERROR_MESSAGE, message: UNEXPECTED_ERROR_MESSAGE };
  }
  const e = err;
  const details = clientMessage(e);
  if (logger && details !== e.message) logger.verbose(1, `gRPC call failed (${e.code}): ${e.message}`);
  return { code: GRPC_STATUS[e.code], details, message: details };
}
