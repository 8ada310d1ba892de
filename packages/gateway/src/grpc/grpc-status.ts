/**
 * @module TriodeError codes to gRPC status codes. Triton: server/src/grpc/grpc_utils.cc
 */
import { status, type ServiceError } from '@grpc/grpc-js';
import { TriodeError, type ErrorCode } from '@triode/core';

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

/** The status object grpc-js sends for anything thrown. */
export function grpcError(err: unknown): Partial<ServiceError> & { code: status; details: string } {
  const e = TriodeError.from(err);
  return { code: GRPC_STATUS[e.code], details: e.message, message: e.message };
}
