/** @module Tensor data types. Triton: common/include/triton/common/model_config.h */

/** Wire names of Triton's data types (KServe v2 `datatype`). */
export const DATA_TYPES = [
  'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64',
  'FP16', 'FP32', 'FP64', 'BYTES', 'BF16',
] as const;

/** A wire data type name such as `"FP32"` or `"BYTES"`. */
export type DataType = (typeof DATA_TYPES)[number];

/** The typed arrays tensors are held in. BYTES, FP16 and BF16 are raw bytes or 16-bit words. */
export type TensorData =
  | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array
  | BigUint64Array | BigInt64Array | Float32Array | Float64Array;

interface TypeInfo {
  /** Bytes per element; 0 for BYTES (variable). */
  readonly size: number;
  readonly array: new (buffer: ArrayBufferLike, byteOffset: number, length: number) => TensorData;
}

const INFO: Record<DataType, TypeInfo> = {
  BOOL: { size: 1, array: Uint8Array },
  UINT8: { size: 1, array: Uint8Array },
  UINT16: { size: 2, array: Uint16Array },
  UINT32: { size: 4, array: Uint32Array },
  UINT64: { size: 8, array: BigUint64Array },
  INT8: { size: 1, array: Int8Array },
  INT16: { size: 2, array: Int16Array },
  INT32: { size: 4, array: Int32Array },
  INT64: { size: 8, array: BigInt64Array },
  FP16: { size: 2, array: Uint16Array },
  FP32: { size: 4, array: Float32Array },
  FP64: { size: 8, array: Float64Array },
  BYTES: { size: 0, array: Uint8Array },
  BF16: { size: 2, array: Uint16Array },
};

/** True if `s` is a wire data type name. */
export function isDataType(s: unknown): s is DataType {
  return typeof s === 'string' && Object.hasOwn(INFO, s);
}

/** True if `data` is the typed array class of `dt` (a Buffer is a Uint8Array). */
export function isDataOf(dt: DataType, data: unknown): boolean {
  return data instanceof INFO[dt].array;
}

/** The typed array class of `dt`, by name (`Float32Array`), for messages. */
export function arrayClassName(dt: DataType): string {
  return INFO[dt].array.name;
}

/** Bytes per element of a fixed-size type; 0 for BYTES. */
export function dataTypeByteSize(dt: DataType): number {
  return INFO[dt].size;
}

/** A typed-array view of `length` elements of `dt` on `buffer` (BYTES: `length` is in bytes). */
export function typedArrayView(dt: DataType, buffer: ArrayBufferLike, byteOffset: number, length: number): TensorData {
  return new INFO[dt].array(buffer, byteOffset, length);
}

/**
 * A typed-array view of raw little-endian bytes. Copies into an aligned buffer when the bytes are
 * not aligned for the element type (a view needs byteOffset % size == 0).
 */
export function viewBytesAs(dt: DataType, bytes: Uint8Array): TensorData {
  const size = INFO[dt].size || 1;
  // A copy into a fresh buffer (offset 0). Not `bytes.slice()`: on a Node Buffer that is a view.
  if (bytes.byteOffset % size !== 0) bytes = new Uint8Array(bytes);
  return new INFO[dt].array(bytes.buffer, bytes.byteOffset, bytes.byteLength / size);
}

/** The raw bytes of a tensor's data (no copy). */
export function dataBytes(data: TensorData): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Config enum name (`TYPE_FP32`) to wire name (`FP32`); TYPE_STRING is `BYTES`. */
export function configTypeToDataType(configType: string): DataType | undefined {
  if (configType === 'TYPE_STRING') return 'BYTES';
  const name = configType.startsWith('TYPE_') ? configType.slice(5) : '';
  return isDataType(name) && name !== 'BYTES' ? name : undefined;
}

/** Wire name (`FP32`) to config enum name (`TYPE_FP32`); BYTES is `TYPE_STRING`. */
export function dataTypeToConfigType(dt: DataType): string {
  return dt === 'BYTES' ? 'TYPE_STRING' : `TYPE_${dt}`;
}

/** Number of elements of a shape; 1 for a scalar shape `[]`. */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * The element count of `shape`, exact past 2^53 (where `elementCount` rounds), for messages:
 * shape [4294967296,4294967296] has 18446744073709551616 elements, not 18446744073709552000.
 */
export function elementCountExact(shape: readonly number[]): bigint {
  let n = 1n;
  for (const d of shape) n *= BigInt(d);
  return n;
}
