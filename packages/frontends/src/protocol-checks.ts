/**
 * @module Checks both frontends make the same way (HTTP binary extension, gRPC raw contents),
 * with Triton's messages. Triton: server/src/http_server.cc, grpc/infer_handler.cc
 */
import { Errors, checkBytesElements, dataTypeByteSize, elementCount, elementCountExact, type DataType } from '@triode/core';

/**
 * Checks that raw tensor bytes fit the elements of `shape` in `datatype` (BYTES: that many
 * length-prefixed elements) before they are viewed as a typed array.
 */
export function checkTensorBytes(name: string, datatype: DataType, shape: readonly number[], bytes: Uint8Array, model: string): void {
  if (datatype === 'BYTES') {
    // Core's check, so both frontends and core answer with Triton's one set of texts.
    checkBytesElements(bytes, shape, name, model);
    return;
  }
  checkTensorByteSize(name, datatype, shape, bytes.byteLength, model);
}

/** The byte size check of a tensor of fixed-size elements (not BYTES), in core's words. */
export function checkTensorByteSize(name: string, datatype: DataType, shape: readonly number[], byteLength: number, model: string): void {
  const size = dataTypeByteSize(datatype);
  if (byteLength !== elementCount(shape) * size) {
    // Exact: past 2^53 bytes the double product rounds (4294967296 x 4294967296 FP32 printed 73786976294838210000).
    const want = elementCountExact(shape) * BigInt(size);
    throw Errors.invalidArg(`input byte size mismatch for input '${name}' for model '${model}'. Expected ${want}, got ${byteLength}`);
  }
}

/** How `checkReservedParameters` words its refusal. */
export interface ReservedParameterOptions {
  /**
   * List the allowed keys in the message, as Triton's gRPC frontend does (SetInferenceRequestMetadata:
   * "... Only the following keys starting with 'triton_' are allowed: <keys joined by spaces>");
   * otherwise HTTP's text (http_server.cc: "... and should not be specified.").
   * @default false
   */
  listAllowed?: boolean;
}

/** Refuses request parameters in Triton's reserved `triton_` namespace (except those allowed). */
export function checkReservedParameters(keys: Iterable<string>, allowed: readonly string[] = [], options: ReservedParameterOptions = {}): void {
  for (const k of keys) {
    if (k.startsWith('triton_') && !allowed.includes(k)) {
      throw Errors.invalidArg(options.listAllowed
        ? `parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: ${allowed.join(' ')}`
        : `parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.`);
    }
  }
}

