/**
 * @module Client-side tensor data: user input (typed arrays, plain arrays, strings) to the bytes
 * the wire carries, and received bytes back to typed arrays.
 */
import { dataBytes, dataTypeByteSize, elementCount, serializeBytesTensor, viewBytesAs, type DataType, type TensorData } from '@triode/core';
import type { InferInput, InputData } from './types.js';

const TYPED: Partial<Record<DataType, (v: readonly number[]) => TensorData>> = {
  UINT8: (v) => Uint8Array.from(v), UINT16: (v) => Uint16Array.from(v), UINT32: (v) => Uint32Array.from(v),
  INT8: (v) => Int8Array.from(v), INT16: (v) => Int16Array.from(v), INT32: (v) => Int32Array.from(v),
  FP32: (v) => Float32Array.from(v), FP64: (v) => Float64Array.from(v),
  FP16: (v) => Uint16Array.from(v), BF16: (v) => Uint16Array.from(v),
};

function isTyped(d: InputData): d is TensorData {
  return ArrayBuffer.isView(d);
}

/**
 * An input's data as a typed array of its datatype (BYTES: the length-prefixed serialization).
 * @throws Error when the data does not fit the datatype or the shape.
 */
export function inputTensorData(input: InferInput): TensorData {
  const { name, datatype, data } = input;
  const count = elementCount(input.shape);
  let out: TensorData;
  if (datatype === 'BYTES') {
    if (isTyped(data)) {
      out = data as Uint8Array;
    } else {
      if (data.length !== count) throw new Error(`input '${name}': ${data.length} elements for shape [${input.shape.join(',')}]`);
      out = serializeBytesTensor(data.map((x) => (typeof x === 'string' || x instanceof Uint8Array ? x : String(x))));
    }
    return out;
  }
  if (isTyped(data)) {
    out = data;
  } else if (datatype === 'BOOL') {
    out = Uint8Array.from(data as readonly (boolean | number)[], (b) => (b ? 1 : 0));
  } else if (datatype === 'INT64') {
    out = BigInt64Array.from(data as readonly (number | bigint)[], (x) => BigInt(x));
  } else if (datatype === 'UINT64') {
    out = BigUint64Array.from(data as readonly (number | bigint)[], (x) => BigInt(x));
  } else {
    out = TYPED[datatype]!(data as readonly number[]);
  }
  if (out.byteLength !== count * dataTypeByteSize(datatype)) {
    throw new Error(`input '${name}': ${out.byteLength} bytes of data for ${count} ${datatype} elements (shape [${input.shape.join(',')}])`);
  }
  return out;
}

/** The raw little-endian bytes of an input (no copy for typed arrays). */
export function inputBytes(input: InferInput): Uint8Array {
  return dataBytes(inputTensorData(input));
}

/** Received bytes as a typed array of `datatype` (copied only when misaligned). */
export function outputData(datatype: DataType, bytes: Uint8Array): TensorData {
  return viewBytesAs(datatype, bytes);
}
