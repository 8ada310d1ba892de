/**
 * @module TriodeError codes to transport status codes.
 * Triton: server/src/http_server.cc HttpCodeFromError, server/src/grpc/grpc_utils.cc
 */
import { TriodeError, type ErrorCode } from '@triode/core';

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

/** The HTTP status and `{"error": ...}` body for anything thrown. */
export function httpError(err: unknown): { status: 400 | 403 | 404 | 500 | 501 | 503; body: string } {
  const e = TriodeError.from(err);
  return { status: HTTP_STATUS[e.code], body: JSON.stringify({ error: e.message }) };
}
