/**
 * @module Checks both frontends make the same way (HTTP binary extension, gRPC raw contents),
 * with Triton's messages. Triton: server/src/http_server.cc, grpc/infer_handler.cc
 */
import { Errors, countBytesElements, dataTypeByteSize, type DataType } from '@triode/core';

/**
 * Checks that raw tensor bytes fit `count` elements of `datatype` (BYTES: that many
 * length-prefixed elements) before they are viewed as a typed array.
 */
export function checkTensorBytes(name: string, datatype: DataType, count: number, bytes: Uint8Array, model: string): void {
  if (datatype === 'BYTES') {
    const n = countBytesElements(bytes);
    // -1: an element's 4-byte length, or its bytes, run past the end of the data.
    if (n < 0) throw Errors.invalidArg(`incomplete string data for inference input '${name}' for model '${model}': an element's length runs past the end of its ${bytes.byteLength} bytes`);
    if (n !== count) throw Errors.invalidArg(`unexpected number of string elements ${n} for inference input '${name}' for model '${model}', expecting ${count}`);
    return;
  }
  const want = count * dataTypeByteSize(datatype);
  if (bytes.byteLength !== want) {
    throw Errors.invalidArg(`input byte size mismatch for input '${name}' for model '${model}'. Expected ${want}, got ${bytes.byteLength}`);
  }
}

/** Refuses request parameters in Triton's reserved `triton_` namespace (except those allowed). */
export function checkReservedParameters(keys: Iterable<string>, allowed: readonly string[] = []): void {
  for (const k of keys) {
    if (k.startsWith('triton_') && !allowed.includes(k)) {
      throw Errors.invalidArg(`parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.`);
    }
  }
}
