/**
 * @module BYTES tensors: each element is a 4-byte unsigned little-endian length, then the bytes.
 * Triton: server docs/protocol/extension_binary_data.md, core/src/infer_request.cc
 */
import { Errors } from '../errors.js';
import { elementCount, elementCountExact } from './data-type.js';

const encoder = new TextEncoder();

/**
 * Serializes strings or byte arrays into Triton's length-prefixed BYTES layout: measured first,
 * then written into one buffer, with no array made per element (20 million empty strings from a
 * 60 MB JSON request made 20 million arrays, and the server ran out of heap, review).
 */
export function serializeBytesTensor(elements: ReadonlyArray<string | Uint8Array>): Uint8Array {
  let total = 0;
  for (let i = 0; i < elements.length; i++) {
    const e = elements[i]!;
    total += 4 + (typeof e === 'string' ? Buffer.byteLength(e, 'utf8') : e.byteLength);
  }
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let off = 0;
  for (let i = 0; i < elements.length; i++) {
    const e = elements[i]!;
    let n: number;
    if (typeof e === 'string') {
      n = e.length === 0 ? 0 : encoder.encodeInto(e, out.subarray(off + 4)).written;
    } else {
      out.set(e, off + 4);
      n = e.byteLength;
    }
    view.setUint32(off, n, true);
    off += 4 + n;
  }
  return out;
}

/**
 * Splits a length-prefixed BYTES buffer into its elements (views, no copy).
 * Throws INVALID_ARG when the buffer does not hold exactly `expected` elements (when given).
 */
export function deserializeBytesTensor(buf: Uint8Array, expected?: number, what = 'BYTES tensor'): Uint8Array[] {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: Uint8Array[] = [];
  let off = 0;
  while (off < buf.byteLength) {
    if (off + 4 > buf.byteLength) throw Errors.invalidArg(`${what}: incomplete length prefix at byte ${off}`);
    const len = view.getUint32(off, true);
    off += 4;
    if (off + len > buf.byteLength) {
      throw Errors.invalidArg(`${what}: element ${out.length} of ${len} bytes runs past the end of the data`);
    }
    out.push(buf.subarray(off, off + len));
    off += len;
  }
  if (expected !== undefined && out.length !== expected) {
    throw Errors.invalidArg(`${what}: expected ${expected} string elements, got ${out.length}`);
  }
  return out;
}

/**
 * Checks that a BYTES input's data holds exactly the elements of `shape`, length-prefixed, with
 * Triton's messages (core/src/infer_request.cc ValidateBytesInputs, asserted by server
 * qa/L0_input_validation/input_validation_test.py test_input_string_shape_validation and core
 * src/test/input_byte_size_test.cc): too many elements report the count where the data overran
 * (expected + 1), not the total, as Triton stops there.
 * @param input the input's name, as it goes in the message (echoed by the caller)
 * @param model the model's name, for the message
 */
export function checkBytesElements(buf: Uint8Array, shape: readonly number[], input: string, model: string): void {
  const expected = elementCount(shape);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const where = `for inference input '${input}' for model '${model}'`;
  let off = 0;
  let n = 0;
  while (off < buf.byteLength) {
    if (n >= expected) throw Errors.invalidArg(`unexpected number of string elements ${n + 1} ${where}, expecting ${elementCountExact(shape)}`);
    const left = buf.byteLength - off;
    if (left < 4) {
      throw Errors.invalidArg(
        `incomplete string length indicator ${where}, expecting 4 bytes but only ${left} bytes available. Please make sure the string length indicator is in one buffer.`,
      );
    }
    const len = view.getUint32(off, true);
    off += 4;
    if (len > buf.byteLength - off) {
      throw Errors.invalidArg(`incomplete string data ${where}, expecting string of length ${len} but only ${buf.byteLength - off} bytes available`);
    }
    off += len;
    n++;
  }
  if (n !== expected) throw Errors.invalidArg(`expected ${elementCountExact(shape)} string elements ${where}, got ${n}`);
}

/** Counts the elements of a length-prefixed BYTES buffer, or returns -1 if it is malformed. */
export function countBytesElements(buf: Uint8Array): number {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
  let n = 0;
  while (off < buf.byteLength) {
    if (off + 4 > buf.byteLength) return -1;
    off += 4 + view.getUint32(off, true);
    if (off > buf.byteLength) return -1;
    n++;
  }
  return n;
}
