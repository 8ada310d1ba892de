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
