/**
 * @module Client-side tensor data: user input (typed arrays, plain arrays, strings) to the bytes
 * the wire carries, and received bytes back to typed arrays.
 */
import {
  countBytesElements, dataBytes, dataTypeByteSize, elementCount, isDataType, serializeBytesTensor, viewBytesAs, type DataType, type TensorData,
} from '@triode/core';
import { InferenceServerError } from './errors.js';
import type { InferInput, InputData, OutputTensor } from './types.js';

const TYPED: Partial<Record<DataType, (v: readonly number[]) => TensorData>> = {
  UINT8: (v) => Uint8Array.from(v), UINT16: (v) => Uint16Array.from(v), UINT32: (v) => Uint32Array.from(v),
  INT8: (v) => Int8Array.from(v), INT16: (v) => Int16Array.from(v), INT32: (v) => Int32Array.from(v),
  FP32: (v) => Float32Array.from(v), FP64: (v) => Float64Array.from(v),
  // Numbers become the nearest half / bfloat16 (ties to even); Uint16Array.from cut them to integer words (review).
  FP16: (v) => Uint16Array.from(v, (x) => toFloatBits(x, 5, 10)), BF16: (v) => Uint16Array.from(v, (x) => toFloatBits(x, 8, 7)),
};

/**
 * The typed array each datatype takes (`instanceof`, so a Buffer is a Uint8Array): BOOL takes 0/1
 * bytes, BYTES its length-prefixed serialization, FP16 and BF16 their raw 16-bit words. Any other
 * array was sent as its bytes, reinterpreted: a Float32Array of 1.5 as INT32 reached the model as
 * 1069547521 (review). tritonclient refuses a numpy array of another dtype the same way.
 */
const TYPED_ARRAY: Record<DataType, abstract new (...a: never[]) => TensorData> = {
  BOOL: Uint8Array, BYTES: Uint8Array, UINT8: Uint8Array, UINT16: Uint16Array, UINT32: Uint32Array, UINT64: BigUint64Array,
  INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, INT64: BigInt64Array,
  FP16: Uint16Array, BF16: Uint16Array, FP32: Float32Array, FP64: Float64Array,
};

function isTyped(d: InputData): d is TensorData {
  return ArrayBuffer.isView(d);
}

/**
 * A 64-bit integer element given as a number: refused unless it is a safe integer, since a number
 * past 2^53 is already rounded (give such values as bigints).
 */
function exactInteger(name: string, x: number | bigint, i: number): bigint {
  if (typeof x === 'bigint') return x;
  if (!Number.isSafeInteger(x)) {
    throw new InferenceServerError(`input '${name}': element ${i} (${x}) is not an exact integer: give 64-bit values past 2^53 as bigints`);
  }
  return BigInt(x);
}

/**
 * An input's data as a typed array of its datatype (BYTES: the length-prefixed serialization).
 * Typed arrays must be the datatype's own kind (see `TYPED_ARRAY`); plain arrays are converted.
 * @throws InferenceServerError when the data does not fit the datatype or the shape.
 */
export function inputTensorData(input: InferInput): TensorData {
  const { name, datatype, data } = input;
  if (data === undefined) throw new InferenceServerError(`input '${name}' has no data (it names a shared memory region)`);
  const count = elementCount(input.shape);
  const shape = `shape [${input.shape.join(',')}]`;
  if (isTyped(data) && !(data instanceof TYPED_ARRAY[datatype])) {
    throw new InferenceServerError(`input '${name}': ${datatype} data cannot be a ${data.constructor.name} (give a ${TYPED_ARRAY[datatype].name} or a plain array)`);
  }
  let out: TensorData;
  if (datatype === 'BYTES') {
    if (isTyped(data)) {
      out = data;
      const n = countBytesElements(data as Uint8Array);
      if (n !== count) throw new InferenceServerError(`input '${name}': ${n < 0 ? 'malformed BYTES serialization' : `${n} BYTES elements`} for ${shape}`);
    } else {
      if (data.length !== count) throw new InferenceServerError(`input '${name}': ${data.length} elements for ${shape}`);
      out = serializeBytesTensor(data.map((x) => (typeof x === 'string' || x instanceof Uint8Array ? x : String(x))));
    }
    return out;
  }
  if (isTyped(data)) {
    out = data;
  } else if (datatype === 'BOOL') {
    out = Uint8Array.from(data as readonly (boolean | number)[], (b) => (b ? 1 : 0));
  } else if (datatype === 'INT64') {
    out = BigInt64Array.from(data as readonly (number | bigint)[], (x, i) => exactInteger(name, x, i));
  } else if (datatype === 'UINT64') {
    out = BigUint64Array.from(data as readonly (number | bigint)[], (x, i) => exactInteger(name, x, i));
  } else {
    out = TYPED[datatype]!(data as readonly number[]);
  }
  if (out.byteLength !== count * dataTypeByteSize(datatype)) {
    throw new InferenceServerError(`input '${name}': ${out.byteLength} bytes of data for ${count} ${datatype} elements (${shape})`);
  }
  return out;
}

/** `v` rounded to the nearest integer, ties to even. */
function roundHalfEven(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f;
}

/**
 * The bits of the binary float nearest to `x` (ties to even) with `eb` exponent and `mb`
 * mantissa bits: FP16 is (5, 10), BF16 (8, 7). Overflow gives infinity, as IEEE rounding does.
 */
export function toFloatBits(x: number, eb: number, mb: number): number {
  const bias = (1 << (eb - 1)) - 1;
  const inf = ((1 << eb) - 1) << mb;
  if (Number.isNaN(x)) return inf | (1 << (mb - 1));
  const sign = x < 0 || Object.is(x, -0) ? 1 << (eb + mb) : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | inf;
  // Subnormals are whole multiples of 2^(1 - bias - mb); a carry to 2^mb is the smallest normal's bits.
  if (a < 2 ** (1 - bias)) return sign | roundHalfEven(a * 2 ** (bias - 1 + mb));
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  // a / 2^e is in [1, 2) and exact; a mantissa carry to 2^mb moves to the next exponent by itself.
  const bits = ((e + bias) << mb) + roundHalfEven((a / 2 ** e - 1) * 2 ** mb);
  return sign | Math.min(bits, inf);
}

/** The raw little-endian bytes of an input (no copy for typed arrays). */
export function inputBytes(input: InferInput): Uint8Array {
  return dataBytes(inputTensorData(input));
}

/** A received output's shape: non-negative integers. @throws InferenceServerError otherwise */
export function outputShape(name: unknown, shape: unknown): number[] {
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
    throw new InferenceServerError(`malformed response: output '${String(name)}' has an invalid shape`);
  }
  return shape as number[];
}

/**
 * A received output, checked before it is trusted: a known datatype, a shape of non-negative
 * integers, and bytes holding exactly the shape's elements (BYTES: that many well-formed
 * length-prefixed elements). The data is a typed array of the datatype (copied only when misaligned).
 * @throws InferenceServerError when the server's answer does not add up.
 */
export function outputTensor(name: unknown, datatype: unknown, shape: unknown, bytes: Uint8Array): OutputTensor {
  if (typeof name !== 'string') throw new InferenceServerError('malformed response: an output without a name');
  if (!isDataType(datatype)) throw new InferenceServerError(`malformed response: output '${name}' has an unknown datatype '${String(datatype)}'`);
  const dims = outputShape(name, shape);
  const count = elementCount(dims);
  const found = datatype === 'BYTES' ? countBytesElements(bytes) : bytes.byteLength / dataTypeByteSize(datatype);
  if (found !== count) {
    throw new InferenceServerError(`malformed response: output '${name}' has ${bytes.byteLength} bytes of data, not ${count} ${datatype} elements (shape [${dims.join(',')}])`);
  }
  return { name, datatype, shape: dims, data: viewBytesAs(datatype, bytes) };
}
